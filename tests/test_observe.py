"""check/_observe: the evidence the technique checks rest on, seen on small kernels.

These tests are about the simulator's instrumentation itself, so they are simulator-only;
on a GPU the same observations reach the checkers through the simulator replay, which the
catalogues in tests/test_check_*.py exercise there.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32

from cudacourse.check import _engine as E
from cudacourse.check import _observe as O

pytestmark = pytest.mark.sim_only(
    reason="tests the simulator instrumentation itself (on a GPU, observing() records "
           "nothing by design; the checkers replay in a simulator subprocess instead)")

N = 64


@cuda.jit
def tree_right(x, out):
    sh = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    cuda.syncthreads()
    s = 16
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[0] = sh[0]


@cuda.jit
def tree_no_barrier(x, out):
    sh = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    cuda.syncthreads()
    s = 16
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        s //= 2
    if t == 0:
        out[0] = sh[0]


@cuda.jit
def tree_barrier_in_if(x, out):
    sh = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    cuda.syncthreads()
    s = 16
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
            cuda.syncthreads()
        s //= 2
    if t == 0:
        out[0] = sh[0]


@cuda.jit
def tree_no_barrier_through_a_view(x, out):
    # the same race, through a view of the shared array: the view is the same memory
    sh = cuda.shared.array(32, float32)
    t = cuda.threadIdx.x
    sh[t] = x[t]
    cuda.syncthreads()
    view = sh[0:]
    s = 16
    while s > 0:
        if t < s:
            view[t] += view[t + s]
        s //= 2
    if t == 0:
        out[0] = sh[0]


@cuda.jit
def one_thread_writes_through_transpose(x, out):
    o = out.T
    if cuda.grid(1) == 0:
        for j in range(o.shape[0]):
            o[j] = x[j]


def observe(kernel, x, out, threads=32):
    with O.observing() as obs:
        O.launch(kernel, 1, threads, obs.watch(cuda.to_device(x), "x"),
                 obs.watch(out.view, "out"), name=kernel.__name__, obs=obs)
    return obs


def test_a_right_tree_shows_no_race_and_no_divergence():
    x = np.arange(32, dtype=np.float32)
    out = O.output(1, "out")
    obs = observe(tree_right, x, out)
    assert obs.races == [] and obs.divergences == []
    assert out.result()[0] == x.sum()
    assert max(obs.shared_reads.values()) <= 2 * 5 + 1  # a tree: a few reads per thread
    assert len(obs.barriers[((0, 0, 0), (0, 0, 0))]) == 6


def test_a_missing_barrier_is_a_race_whatever_the_numbers():
    x = np.arange(32, dtype=np.float32)
    obs = observe(tree_no_barrier, x, O.output(1, "out"))
    assert obs.races, "the tree's levels are not separated by barriers"
    assert "nothing orders the two" in obs.race_words()


def test_a_race_through_a_view_of_shared_memory_is_seen():
    x = np.arange(32, dtype=np.float32)
    obs = observe(tree_no_barrier_through_a_view, x, O.output(1, "out"))
    assert obs.races, "accesses through sh[0:] are accesses to sh"
    assert "nothing orders the two" in obs.race_words()


def test_writes_through_a_transposed_view_are_writes_to_the_array():
    x = np.arange(32, dtype=np.float32)
    out = O.output(32, "out")
    obs = observe(one_thread_writes_through_transpose, x, out)
    log = obs.log("out")
    assert log.total_writes == 32 and log.busiest_writer() == (((0, 0, 0), (0, 0, 0)), 32)
    assert log.element_writes.tolist() == [1] * 32
    assert np.array_equal(out.result(), x)


def test_a_barrier_inside_if_is_reported_with_its_condition():
    x = np.arange(32, dtype=np.float32)
    obs = observe(tree_barrier_in_if, x, O.output(1, "out"))
    words = obs.divergence_words()
    assert "inside `if t < s:`" in words and "threads 16 to 31 of block 0" in words


@cuda.jit
def reads_past_the_end(x, out):
    i = cuda.grid(1)
    if i <= x.shape[0]:
        out[i] = x[i]


def test_an_index_outside_reads_the_sentinel_and_is_recorded_like_a_gpu():
    x = np.arange(N, dtype=np.float32)
    out = O.output(N, "out")
    with O.observing() as obs:
        E.launch(reads_past_the_end, 3, 32, obs.watch(E.to_device_guarded(x, "x").view, "x"),
                 obs.watch(out.view, "out"), name="k")
    assert [(r.array, r.index, r.grid_index((32,))) for r in obs.oob] == [("x", N, N),
                                                                          ("out", N, N)]
    cause, words = O.out_of_bounds_words(obs.oob, (32,), "k")
    assert cause == "off_by_one_guard" and "the guard lets thread n through" in words


@cuda.jit
def nan_in_half(x, out):
    i = cuda.grid(1)
    if i < x.shape[0] and i % 2 == 0:
        z = x[i] - x[i]
        out[i] = z / z


def test_poison_and_computed_nan_are_told_apart():
    x = np.arange(1, N + 1, dtype=np.float32)
    out = O.output(N, "out")
    with np.errstate(invalid="ignore"):
        E.launch(nan_in_half, 2, 32, cuda.to_device(x), out.view, name="k")
    got = out.result()
    assert np.isnan(got).all()
    assert O.computed_nan(got).sum() == N // 2 and O.poisoned(got).sum() == N // 2


@cuda.jit
def returns_value(x, out):
    return x[cuda.grid(1)]


def test_a_returned_value_is_seen():
    # The sm_90 compile gate (in E.launch) refuses such a kernel first; this is the fallback
    # where the gate cannot run, so the launch here bypasses it.
    x = np.arange(32, dtype=np.float32)
    with O.observing() as obs:
        returns_value[1, 32](obs.watch(cuda.to_device(x), "x"), O.output(1, "out").view)
    assert obs.returned and obs.returned[0][1] in x
    with pytest.raises(E.CheckFailure) as info:
        O.no_return_value(obs, "returns_value", "out")
    assert info.value.cause == "kernel_returns_value"


@cuda.jit
def shuffles_five_times(x, out):
    v = x[cuda.threadIdx.x]
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
    if cuda.threadIdx.x == 0:
        out[0] = v


def test_shuffles_are_counted_per_lane():
    x = np.arange(32, dtype=np.float32)
    obs = observe(shuffles_five_times, x, O.output(1, "out"))
    assert set(obs.shuffles.values()) == {5} and len(obs.shuffles) == 32


def test_observing_restores_the_simulator():
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator import kernelapi

    before = (sim_kernel.BlockThread.syncthreads, sim_kernel.BlockManager.run,
              kernelapi.FakeCUDAShared.array, kernelapi.FakeCUDAModule.shfl_down_sync)
    with pytest.raises(RuntimeError):
        with O.observing():
            raise RuntimeError("boom")
    after = (sim_kernel.BlockThread.syncthreads, sim_kernel.BlockManager.run,
             kernelapi.FakeCUDAShared.array, kernelapi.FakeCUDAModule.shfl_down_sync)
    assert before == after
