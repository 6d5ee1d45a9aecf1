"""cudacourse.runtime.simblock: the simulator's block scheduler waits for its threads instead of
polling them, with the stock simulator's barrier and failure semantics."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import cudacourse  # noqa: F401 - installs the scheduler in the simulator
from cudacourse.runtime import device

pytestmark = pytest.mark.skipif(not device.is_simulator(),
                                reason="the scheduler replaces the simulator's; a GPU has none")


@cuda.jit
def _reverse_in_shared(a, out):
    tile = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    tile[t] = a[t]
    cuda.syncthreads()  # every write lands before any thread reads a neighbour's slot
    out[t] = tile[cuda.blockDim.x - 1 - t]
    cuda.syncthreads()
    tile[t] = out[t] * 2
    cuda.syncthreads()
    out[t] = tile[t]


def test_barriers_order_every_thread_of_every_block():
    a = np.arange(64 * 3, dtype=np.float32)
    out = np.zeros_like(a)
    for b in range(3):
        part = np.zeros(64, np.float32)
        _reverse_in_shared[1, 64](a[b * 64:(b + 1) * 64], part)
        out[b * 64:(b + 1) * 64] = part
    want = np.concatenate([a[b * 64:(b + 1) * 64][::-1] * 2 for b in range(3)])
    np.testing.assert_array_equal(out, want)


@cuda.jit
def _early_exit_then_barrier(first, out):
    t = cuda.threadIdx.x
    if t >= 20:
        return  # these threads never reach the barrier: the stock simulator does not wait
    first[t] = t
    cuda.syncthreads()
    out[t] = first[t] + first[(t + 1) % 20]


def test_threads_that_returned_are_not_waited_for_at_a_barrier():
    out = np.zeros(32, np.int64)
    _early_exit_then_barrier[1, 32](np.zeros(32, np.int64), out)
    want = np.zeros(32, np.int64)
    want[:20] = np.arange(20) + (np.arange(1, 21) % 20)
    np.testing.assert_array_equal(out, want)


@cuda.jit
def _fails_in_one_thread(out):
    t = cuda.threadIdx.x
    cuda.syncthreads()
    if t == 5:
        raise ValueError("thread five")
    cuda.syncthreads()
    out[t] = 1


def test_the_first_failing_thread_ends_the_launch_naming_it():
    out = np.zeros(16, np.int64)
    with pytest.raises(ValueError, match=r"tid=\[5, 0, 0\].*thread five"):
        _fails_in_one_thread[1, 16](out)


def test_the_launching_thread_sleeps_between_events():
    """A block of 64 threads with 3 barriers wakes the scheduler about once per arrival and
    exit (4 per thread), not thousands of times as a polling loop would."""
    captured = []
    from numba.cuda.simulator import kernel as sim_kernel

    run = sim_kernel.BlockManager.run

    def spy(self, *args):
        try:
            return run(self, *args)
        finally:
            captured.append(self._cc_wakeups)

    sim_kernel.BlockManager.run = spy
    try:
        _reverse_in_shared[1, 64](np.arange(64, dtype=np.float32), np.zeros(64, np.float32))
    finally:
        sim_kernel.BlockManager.run = run
    assert captured and captured[0] <= 64 * 4 + 10, captured
