"""cudacourse.kernels.transfer: the lifecycle, device-resident loops, the stream pipeline, mapped
memory, copy timing and the offload model."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import device
from cudacourse.kernels import transfer

pytestmark = pytest.mark.lesson3


def rand(n, seed=0):
    return np.random.default_rng(seed).uniform(-3, 3, n).astype(np.float32)


@pytest.mark.parametrize("n", [1, 255, 257, 1000])
def test_gpu_scale_host(n):
    x = rand(n)
    out = transfer.gpu_scale(x, 1.5)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_allclose(out, transfer.scale_ref(x, 1.5), rtol=1e-6)


def test_gpu_scale_device_input_stays_on_device():
    x = rand(300)
    d = transfer.gpu_scale(cuda.to_device(x), -2.0)
    assert not isinstance(d, np.ndarray)
    np.testing.assert_allclose(d.copy_to_host(), -2.0 * x, rtol=1e-6)


def test_gpu_scale_into_host_out_and_stream():
    x = rand(100)
    out = np.zeros_like(x)
    s = cuda.stream()
    got = transfer.gpu_scale(x, 3.0, out=out, stream=s)
    assert got is out
    np.testing.assert_allclose(out, 3.0 * x, rtol=1e-6)


def test_gpu_scale_refuses_bad_input():
    with pytest.raises(TypeError, match="x has dtype float64"):
        transfer.gpu_scale(np.ones(4), 2.0)
    with pytest.raises(ValueError, match="x must be 1-dimensional"):
        transfer.gpu_scale(np.ones((2, 2), np.float32), 2.0)
    with pytest.raises(ValueError, match="shape mismatch"):
        transfer.gpu_scale(np.ones(4, np.float32), 2.0, out=np.ones(5, np.float32))
    with pytest.raises(TypeError, match="x must be a NumPy array"):
        transfer.gpu_scale([1.0, 2.0], 2.0)


def test_smooth_ref_keeps_the_mean_of_a_constant_and_smooths_a_spike():
    assert np.allclose(transfer.smooth_ref(np.full(5, 2.0, np.float32), 3), 2.0)
    spike = np.zeros(7, np.float32)
    spike[3] = 3.0
    one = transfer.smooth_ref(spike, 1)
    np.testing.assert_allclose(one, [0, 0, 1, 1, 1, 0, 0])


@pytest.mark.parametrize("n, steps", [(1, 3), (2, 1), (300, 4), (129, 0)])
def test_smooth_on_device_matches_reference(n, steps):
    x = rand(n, seed=n)
    got = transfer.smooth_on_device(x, steps)
    np.testing.assert_allclose(got, transfer.smooth_ref(x, steps), rtol=1e-5, atol=1e-6)


def test_smooth_on_device_device_input_unchanged():
    x = rand(64)
    d = cuda.to_device(x)
    got = transfer.smooth_on_device(d, 2)
    np.testing.assert_allclose(got.copy_to_host(), transfer.smooth_ref(x, 2), rtol=1e-5)
    np.testing.assert_array_equal(d.copy_to_host(), x)


def test_smooth_on_device_refuses_negative_steps():
    with pytest.raises(ValueError, match="steps must be >= 0"):
        transfer.smooth_on_device(rand(4), -1)


@pytest.mark.parametrize("n, k", [(10, 3), (9, 3), (2, 5), (1000, 7)])
def test_chunk_bounds_cover_everything_once(n, k):
    b = transfer.chunk_bounds(n, k)
    assert b[0][0] == 0 and b[-1][1] == n
    assert all(hi == lo2 for (_, hi), (lo2, _) in zip(b, b[1:]))
    assert len(b) <= k


def test_chunk_bounds_refuses_zero_chunks():
    with pytest.raises(ValueError, match="n_chunks"):
        transfer.chunk_bounds(10, 0)


@pytest.mark.parametrize("n, chunks, streams", [(1000, 7, 3), (64, 3, 3), (5, 8, 2)])
def test_pipelined_scale(n, chunks, streams):
    x = rand(n)
    got = transfer.pipelined_scale(x, 0.5, n_chunks=chunks, n_streams=streams)
    np.testing.assert_allclose(got, 0.5 * x, rtol=1e-6)


def test_pipelined_scale_passes_its_own_checker():
    """What the pipeline does passes the checker (handed in through a function of this file:
    the checker refuses the course's own function as a learner's answer)."""
    import cudacourse.check as check

    def pipelined_scale(x, alpha, n_chunks=8, n_streams=3):
        return transfer.pipelined_scale(x, alpha, n_chunks, n_streams)

    check.check_pipelined_scale(pipelined_scale, seed=5)


def test_pipelined_scale_refuses_device_input():
    with pytest.raises(TypeError, match="NumPy"):
        transfer.pipelined_scale(cuda.to_device(rand(8)), 2.0)


def test_modelled_timeline_overlaps_with_streams_and_never_shares_an_engine():
    one = transfer.modelled_timeline(6, 1)
    three = transfer.modelled_timeline(6, 3)
    assert max(b.end for b in one) == 18.0  # nothing overlaps: 6 chunks x 3 operations
    assert max(b.end for b in three) == 8.0  # a 3-stage pipeline: 6 + 2
    for kind in ("H2D", "kernel", "D2H"):
        bars = sorted((b for b in three if b.kind == kind), key=lambda b: b.start)
        assert all(a.end <= b.start for a, b in zip(bars, bars[1:]))


def test_mapped_scale():
    x = rand(50)
    np.testing.assert_allclose(transfer.mapped_scale(x, 4.0), 4.0 * x, rtol=1e-6)


def test_copy_timing_and_sweep_shape():
    assert transfer.copy_seconds(4096, pinned=True, repeats=1) > 0
    rows = transfer.bandwidth_sweep([4096, 8192], "D2H", repeats=1)
    assert [r["bytes"] for r in rows] == [4096.0, 8192.0]
    assert all(r["pageable"] > 0 and r["pinned"] > 0 for r in rows)
    with pytest.raises(ValueError, match="direction"):
        transfer.copy_seconds(4096, pinned=True, direction="sideways")
    with pytest.raises(ValueError, match="nbytes"):
        transfer.copy_seconds(2, pinned=True)


def test_offload_model():
    m = transfer.Machine.h200()
    t = transfer.offload_times(np.array([0.1, 1000.0]), 1e9, m)
    assert t["cpu"][0] < t["gpu"][0]  # an element-wise op: transfer-bound, CPU wins
    assert t["gpu"][1] < t["cpu"][1]  # high intensity: compute-bound, GPU wins
    be = transfer.break_even_intensity(1e9, m)
    assert 1 < be < 1000
    assert transfer.break_even_intensity(1e9, transfer.Machine(1e9, 1e12, 1e15, 1e12)) == \
        float("inf")


@pytest.mark.sim_only
def test_memory_state_in_the_simulator():
    assert transfer.memory_state() is None
    transfer.flush_frees()  # a no-op, no error


@pytest.mark.gpu
def test_memory_state_on_gpu_sees_allocation_and_free():
    transfer.flush_frees()
    before = transfer.memory_state()
    d = cuda.device_array(256 * 2**20, np.float32)  # 1 GiB
    during = transfer.memory_state()
    assert during["free"] < before["free"]
    del d
    assert transfer.memory_state()["queued_frees"] >= 1
    transfer.flush_frees()
    assert transfer.memory_state()["queued_frees"] == 0


@pytest.mark.gpu
def test_pipeline_timeline_on_gpu():
    x = rand(2**20)
    got, bars = transfer.pipelined_scale(x, 2.0, n_chunks=6, n_streams=3, timeline=True)
    np.testing.assert_allclose(got, 2.0 * x, rtol=1e-6)
    assert len(bars) == 18
    assert all(0 <= b.start <= b.end for b in bars)
    assert {b.stream for b in bars} == {0, 1, 2}


@pytest.mark.gpu
def test_gpu_scale_with_cupy_input():
    ok, why = device.cupy_usable()
    if not ok:
        pytest.skip(why)
    import cupy as cp

    c = cp.arange(10, dtype=cp.float32)
    d = transfer.gpu_scale(c, 2.0)
    np.testing.assert_allclose(d.copy_to_host(), 2.0 * np.arange(10))


@pytest.mark.gpu
def test_implicit_copy_warns_on_gpu():
    from numba.cuda.core.errors import NumbaPerformanceWarning

    x = rand(64)
    with pytest.warns(NumbaPerformanceWarning, match="Host array"):
        transfer._scale[1, 64](x, np.empty_like(x), np.float32(2.0))
