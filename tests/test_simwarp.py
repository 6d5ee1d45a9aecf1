"""Warp intrinsics: the same kernels run in the simulator (through cudacourse.runtime.simwarp) and on
a GPU, and both are compared with NumPy models of the documented semantics. Simulator ==
GPU follows from both matching one spec."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import device, simwarp

pytestmark = pytest.mark.lesson2

FULL = 0xFFFFFFFF
LANES = np.arange(32)


# --- NumPy models of the documented semantics (per warp of 32 lanes, all taking part) --------

def shfl_model(values, src):
    """Lane j gets values[src[j]] when 0 <= src[j] < 32, else its own value."""
    src = np.asarray(src)
    inside = (src >= 0) & (src < 32)
    return np.where(inside, values[np.clip(src, 0, 31)], values)


def per_warp(x, fn):
    return np.concatenate([fn(x[k:k + 32]) for k in range(0, x.size, 32)])


# --- kernels ---------------------------------------------------------------------------------

@cuda.jit
def k_shfl_idx(x, src, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_sync(0xFFFFFFFF, x[i], src[i])


@cuda.jit
def k_shfl_up(x, delta, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_up_sync(0xFFFFFFFF, x[i], delta)


@cuda.jit
def k_shfl_down(x, delta, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_down_sync(0xFFFFFFFF, x[i], delta)


@cuda.jit
def k_shfl_xor(x, lane_mask, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_xor_sync(0xFFFFFFFF, x[i], lane_mask)


@cuda.jit
def k_votes(x, ballot, all_, any_):
    i = cuda.grid(1)
    p = x[i] > 0
    ballot[i] = cuda.ballot_sync(0xFFFFFFFF, p)
    all_[i] = cuda.all_sync(0xFFFFFFFF, p)
    any_[i] = cuda.any_sync(0xFFFFFFFF, p)


@cuda.jit
def k_lane_and_mask(lane, active):
    i = cuda.grid(1)
    lane[i] = cuda.laneid
    active[i] = cuda.activemask()


@cuda.jit
def k_syncwarp_exchange(x, out):
    """Lane j writes, syncwarp, then reads lane 31 - j's slot of a shared buffer."""
    buf = cuda.shared.array(64, np.float32)
    t = cuda.threadIdx.x
    buf[t] = x[cuda.grid(1)] * 2
    cuda.syncwarp()  # without it, lane j could read before lane 31 - j wrote
    w = (t // 32) * 32
    out[cuda.grid(1)] = buf[w + 31 - (t % 32)]


@cuda.jit
def k_half_warps(x, out):
    """Each half of the warp shuffles among itself, with its own mask."""
    i = cuda.grid(1)
    lane = cuda.laneid
    mask = 0x0000FFFF if lane < 16 else 0xFFFF0000
    out[i] = cuda.shfl_xor_sync(mask, x[i], 1)


@cuda.jit
def k_partial_block(x, out):
    """A block of 48 threads: the second warp has 16 lanes; its full-mask shuffle still works."""
    i = cuda.grid(1)
    out[i] = cuda.shfl_down_sync(0xFFFFFFFF, x[i], 1)


@cuda.jit
def k_2d_lanes(out):
    """Lanes follow the linear id x + blockDim.x * y: a (8, 8) block has 2 warps of 4 rows."""
    t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
    v = cuda.shfl_sync(0xFFFFFFFF, t, 0)  # every lane gets lane 0's linear id
    out[t] = v


@cuda.jit
def k_float64(x, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_xor_sync(0xFFFFFFFF, x[i], 31)


# --- tests -----------------------------------------------------------------------------------

def _rand(n, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(n).astype(dtype)


def test_install_adds_the_intrinsics():
    if device.is_simulator():
        assert simwarp.installed()
        from numba.cuda.simulator.kernelapi import FakeCUDAModule
        for name in simwarp.NAMES:
            assert hasattr(FakeCUDAModule, name), name
    for name in ("shfl_sync", "shfl_down_sync", "ballot_sync", "syncwarp", "activemask"):
        assert hasattr(cuda, name)


def test_shfl_sync_reads_the_named_lane():
    x = _rand(64)
    src = np.random.default_rng(1).integers(0, 32, 64).astype(np.int32)
    out = np.zeros_like(x)
    k_shfl_idx[1, 64](x, src, out)
    want = np.concatenate([shfl_model(x[:32], src[:32]), shfl_model(x[32:], src[32:])])
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("delta", [1, 3, 16])
def test_shfl_up_and_down(delta):
    x = _rand(64, delta)
    up, down = np.zeros_like(x), np.zeros_like(x)
    k_shfl_up[2, 32](x, delta, up)
    k_shfl_down[2, 32](x, delta, down)
    np.testing.assert_array_equal(up, per_warp(x, lambda v: shfl_model(v, LANES - delta)))
    np.testing.assert_array_equal(down, per_warp(x, lambda v: shfl_model(v, LANES + delta)))


@pytest.mark.parametrize("lane_mask", [1, 5, 16, 31])
def test_shfl_xor(lane_mask):
    x = _rand(32, lane_mask)
    out = np.zeros_like(x)
    k_shfl_xor[1, 32](x, lane_mask, out)
    np.testing.assert_array_equal(out, shfl_model(x, LANES ^ lane_mask))


def test_votes():
    x = _rand(96, 3)
    x[32:64] = np.abs(x[32:64]) + 0.1  # warp 1: all positive
    x[64:] = -np.abs(x[64:]) - 0.1  # warp 2: none
    ballot = np.zeros(96, np.uint32)
    all_, any_ = np.zeros(96, np.int32), np.zeros(96, np.int32)
    k_votes[1, 96](x, ballot, all_, any_)
    p = (x > 0).reshape(3, 32)
    want_ballot = (p * (1 << LANES.astype(np.uint64))).sum(1).astype(np.uint32)
    np.testing.assert_array_equal(ballot, np.repeat(want_ballot, 32))
    np.testing.assert_array_equal(all_, np.repeat(p.all(1), 32))
    np.testing.assert_array_equal(any_, np.repeat(p.any(1), 32))


def test_laneid_and_activemask_of_a_partial_block():
    lane, active = np.zeros(48, np.int32), np.zeros(48, np.uint32)
    k_lane_and_mask[1, 48](lane, active)
    np.testing.assert_array_equal(lane, np.arange(48) % 32)
    # All lanes run the same code, so all existing lanes are active (no divergence here).
    np.testing.assert_array_equal(active[:32], 0xFFFFFFFF)
    np.testing.assert_array_equal(active[32:], 0x0000FFFF)


@cuda.jit
def k_after_early_return(x, active, out):
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    m = cuda.activemask()
    active[i] = m
    out[i] = cuda.shfl_xor_sync(m, x[i], 1)


def test_activemask_after_an_early_return():
    x = _rand(20, 8)  # 20 of 32 lanes stay
    active, out = np.zeros(32, np.uint32), np.zeros(20, np.float32)
    k_after_early_return[1, 32](x, active, out)
    np.testing.assert_array_equal(active[:20], 0x000FFFFF)
    np.testing.assert_array_equal(out, x[np.arange(20) ^ 1])


def test_syncwarp_orders_shared_memory():
    x = _rand(64, 4)
    out = np.zeros_like(x)
    k_syncwarp_exchange[1, 64](x, out)
    np.testing.assert_array_equal(out, per_warp(2 * x, lambda v: v[::-1]))


def test_disjoint_masks_meet_separately():
    x = _rand(32, 5)
    out = np.zeros_like(x)
    k_half_warps[1, 32](x, out)
    np.testing.assert_array_equal(out, shfl_model(x, LANES ^ 1))


def test_partial_warp_shuffles_among_existing_lanes():
    x = _rand(48, 6)
    out = np.zeros_like(x)
    k_partial_block[1, 48](x, out)
    np.testing.assert_array_equal(out[:32], shfl_model(x[:32], LANES + 1))
    # Warp 1 has lanes 0-15; lane 15's source, lane 16, does not exist: undefined on a GPU.
    np.testing.assert_array_equal(out[32:47], x[33:48])


def test_lanes_of_a_2d_block_follow_the_linear_id():
    out = np.zeros(64, np.int32)
    k_2d_lanes[1, (8, 8)](out)
    np.testing.assert_array_equal(out, np.repeat([0, 32], 32))


def test_float64_values_shuffle_whole():
    x = _rand(32, 7, np.float64) * 1e10
    out = np.zeros_like(x)
    k_float64[1, 32](x, out)
    np.testing.assert_array_equal(out, x[::-1])


# --- simulator-only diagnoses of undefined behaviour --------------------------------------

@cuda.jit
def k_mask_without_self(x, out):
    i = cuda.grid(1)
    out[i] = cuda.shfl_down_sync(0x1, x[i], 1)


@cuda.jit
def k_warp_call_against_syncthreads(x):
    if cuda.threadIdx.x < 16:
        cuda.syncwarp()
    else:
        cuda.syncthreads()


@cuda.jit
def k_mixed_intrinsics(x, out):
    i = cuda.grid(1)
    if cuda.laneid < 16:
        out[i] = cuda.shfl_down_sync(0xFFFFFFFF, x[i], 1)
    else:
        out[i] = cuda.ballot_sync(0xFFFFFFFF, x[i] > 0)


@pytest.mark.sim_only
def test_mask_without_the_lane_is_an_error():
    with pytest.raises(simwarp.WarpError, match="does not include the lane itself"):
        k_mask_without_self[1, 32](_rand(32), np.zeros(32, np.float32))


@pytest.mark.sim_only
def test_warp_call_against_syncthreads_is_a_deadlock_error():
    with pytest.raises(simwarp.WarpError, match="lanes 16-31 at cuda.syncthreads"):
        k_warp_call_against_syncthreads[1, 32](_rand(32))


@pytest.mark.sim_only
def test_different_intrinsics_in_one_meeting_is_an_error():
    with pytest.raises(simwarp.WarpError, match="different warp intrinsics"):
        k_mixed_intrinsics[1, 32](_rand(32), np.zeros(32, np.float32))


@pytest.mark.sim_only
def test_simulator_still_runs_ordinary_kernels_after_an_error():
    test_shfl_xor(3)


@pytest.mark.gpu
@pytest.mark.parametrize("delta", [1, 16])
def test_gpu_matches_the_same_models(delta):
    # The tests above run unchanged on a GPU; this one states the link explicitly.
    test_shfl_up_and_down(delta)
    test_votes()
    test_syncwarp_orders_shared_memory()


def test_pinned_takes_several_arrays_as_numba_does():
    # Numba's signature is cuda.pinned(*arrays); the stock simulator's takes one array
    x = np.arange(8, dtype=np.float32)
    out = np.empty_like(x)
    with cuda.pinned(x, out):
        d = cuda.to_device(x)
        d.copy_to_host(out)
    assert np.array_equal(out, x)
    with cuda.pinned():
        pass
