"""cudacourse.runtime.tensorcore and cudacourse.runtime.fragments: mma, ldmatrix and cp.async, emulated in the
simulator as the PTX ISA lays the fragments out (and, on a GPU, the same tests against the
hardware)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32, uint16

from cudacourse.runtime import device, fragments as fr, tensorcore as tc
from cudacourse.runtime.intrinsics import SHARED_ALIGNMENT as ALIGN  # 16 on a GPU, None simulated

sim_only = pytest.mark.skipif(not device.is_simulator(), reason="the simulator's emulation")


# --- the layout tables, against the PTX ISA's figures ------------------------------------------

def test_layouts_match_the_isa_figures():
    a, b, c = fr.a_layout(), fr.b_layout(), fr.c_layout()
    # "Matrix Fragments for mma.m16n8k16": lane 0 holds a0,a1 = A[0, 0:2], a2,a3 = A[8, 0:2],
    # a4,a5 = A[0, 8:10], a6,a7 = A[8, 8:10]; lane 5 (group 1, thread 1) starts at A[1, 2].
    assert a[0].reshape(-1, 2).tolist() == [[0, 0], [0, 1], [8, 0], [8, 1], [0, 8], [0, 9],
                                            [8, 8], [8, 9]]
    assert a[5, 0].tolist() == [[1, 2], [1, 3]]
    assert a[31, 3].tolist() == [[15, 14], [15, 15]]
    # B: lane 5 holds b0,b1 = B[2:4, 1] and b2,b3 = B[10:12, 1]
    assert b[5].reshape(-1, 2).tolist() == [[2, 1], [3, 1], [10, 1], [11, 1]]
    # C/D: lane 5 holds c0,c1 = C[1, 2:4], c2,c3 = C[9, 2:4]
    assert c[5].tolist() == [[1, 2], [1, 3], [9, 2], [9, 3]]
    # m16n8k8 tf32: lane 5 holds a0 = A[1, 1], a1 = A[9, 1], a2 = A[1, 5], a3 = A[9, 5]
    assert fr.a_layout("m16n8k8")[5].tolist() == [[1, 1], [9, 1], [1, 5], [9, 5]]
    assert fr.b_layout("m16n8k8")[5].tolist() == [[1, 1], [5, 1]]
    assert fr.ldmatrix_layout()[5].tolist() == [[1, 2], [1, 3]]
    assert fr.ldmatrix_layout(trans=True)[5].tolist() == [[2, 1], [3, 1]]
    with pytest.raises(ValueError, match="unknown mma shape 'm8n8k4'"):
        fr.a_layout("m8n8k4")


@pytest.mark.parametrize("layout,shape", [
    (fr.a_layout(), (16, 16)), (fr.b_layout(), (16, 8)), (fr.c_layout(), (16, 8)),
    (fr.a_layout("m16n8k8"), (16, 8)), (fr.b_layout("m16n8k8"), (8, 8)),
    (fr.ldmatrix_layout(), (8, 8)), (fr.ldmatrix_layout(True), (8, 8))])
def test_every_element_is_held_by_exactly_one_lane(layout, shape):
    cells = layout.reshape(-1, 2)
    assert len(cells) == shape[0] * shape[1]
    assert len({tuple(x) for x in cells}) == len(cells)
    own = fr.owner(layout, *shape)
    assert (own >= 0).all()


def test_fragments_round_trip():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2**16, (16, 16), dtype=np.uint16)
    b = rng.integers(0, 2**16, (16, 8), dtype=np.uint16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    np.testing.assert_array_equal(fr.a_from_fragments(fr.a_fragments(a)), a)
    np.testing.assert_array_equal(fr.b_from_fragments(fr.b_fragments(b)), b)
    np.testing.assert_array_equal(fr.c_from_fragments(fr.c_fragments(c)), c)


def test_bf16_rounds_to_nearest_even():
    """Generated: random float32 bit patterns (every exponent), against the two neighbours."""
    n = 200_000 if os.environ.get("CUDACOURSE_NIGHTLY") else 20_000
    u = np.random.default_rng(0).integers(0, 0x7F7F0000, n, dtype=np.uint32)
    u |= np.random.default_rng(1).integers(0, 2, n, dtype=np.uint32) << 31  # signs
    x = u.view(np.float32)
    got = fr.round_bf16(x).astype(np.float64)
    down = fr.from_bf16_bits((u >> 16).astype(np.uint16)).astype(np.float64)
    up = fr.from_bf16_bits(((u >> 16) + 1).astype(np.uint16)).astype(np.float64)
    assert ((got == down) | (got == up)).all()
    xd = x.astype(np.float64)
    other = np.where(got == down, up, down)
    assert (np.abs(got - xd) <= np.abs(other - xd)).all()
    tie = np.abs(got - xd) == np.abs(other - xd)
    assert ((fr.to_bf16_bits(x[tie]) & 1) == 0).all(), "ties go to the even pattern"


def test_bf16_ties_and_tf32():
    assert fr.to_bf16_bits(np.float32(1 + 2**-8)) == 0x3F80  # tie: to even (down)
    assert fr.to_bf16_bits(np.float32(1 + 3 * 2**-8)) == 0x3F82  # tie: to even (up)
    assert np.isnan(fr.from_bf16_bits(fr.to_bf16_bits(np.float32("nan"))))
    assert fr.round_tf32(np.float32(1 + 2**-11)) == 1.0  # below TF32's 10 mantissa bits
    assert fr.round_tf32(np.float32(1 + 2**-10)) == 1 + 2**-10
    with pytest.raises(ValueError, match="kind must be"):
        fr.mma_reference(np.zeros((16, 16)), np.zeros((16, 8)), np.zeros((16, 8)), "fp8")


# --- mma: the emulation (and the hardware) against the NumPy reference -------------------------

@cuda.jit
def _mma_kernel(a, b, c, d, kind):
    """One warp: each lane passes its fragments (a: (32, 4), b: (32, 2), c: (32, 4))."""
    lane = cuda.threadIdx.x
    acc = (c[lane, 0], c[lane, 1], c[lane, 2], c[lane, 3])
    if kind == 0:
        r = tc.mma_bf16((a[lane, 0], a[lane, 1], a[lane, 2], a[lane, 3]),
                        (b[lane, 0], b[lane, 1]), acc)
    elif kind == 1:
        r = tc.mma_f16((a[lane, 0], a[lane, 1], a[lane, 2], a[lane, 3]),
                       (b[lane, 0], b[lane, 1]), acc)
    else:
        r = tc.mma_tf32((bits(a[lane, 0]), bits(a[lane, 1]), bits(a[lane, 2]),
                         bits(a[lane, 3])), (bits(b[lane, 0]), bits(b[lane, 1])), acc)
    for i in range(4):
        d[lane, i] = r[i]


@cuda.jit(device=True)
def bits(u):
    """A TF32 operand from its uint32 pattern (the fragments are built on the host)."""
    return tc.bits_float(u)


def _run_mma(kind: str, A, B, C, a_layout=None):
    """D computed by one warp from fragments built with ``a_layout`` (default: the ISA's)."""
    if kind == "tf32":
        lay_a = fr.a_layout("m16n8k8") if a_layout is None else a_layout
        af = A.astype(np.float32)[lay_a[..., 0], lay_a[..., 1]].view(np.uint32)
        lay_b = fr.b_layout("m16n8k8")
        bf = B.astype(np.float32)[lay_b[..., 0], lay_b[..., 1]].view(np.uint32)
    else:
        to = fr.to_bf16_bits if kind == "bf16" else fr.to_f16_bits
        if a_layout is None:
            af = fr.a_fragments(to(A))
        else:
            v = to(A)[a_layout[..., 0], a_layout[..., 1]]
            af = fr.pack_pairs(v[..., 0], v[..., 1])
        bf = fr.b_fragments(to(B))
    d = np.zeros((32, 4), np.float32)
    _mma_kernel[1, 32](np.ascontiguousarray(af), np.ascontiguousarray(bf),
                       fr.c_fragments(C), d, {"bf16": 0, "f16": 1, "tf32": 2}[kind])
    return fr.c_from_fragments(d)


@pytest.mark.parametrize("kind,k", [("bf16", 16), ("f16", 16), ("tf32", 8)])
def test_mma_equals_the_reference_of_the_isa_layout(kind, k):
    rng = np.random.default_rng(2)
    A = rng.standard_normal((16, k)).astype(np.float32)
    B = rng.standard_normal((k, 8)).astype(np.float32)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    D = _run_mma(kind, A, B, C)
    np.testing.assert_allclose(D, fr.mma_reference(A, B, C, kind), rtol=1e-5, atol=1e-5)
    # and the rounding is real: float32 A @ B + C is further away than float32's epsilon
    assert np.abs(D - (A.astype(np.float64) @ B + C)).max() > 1e-4


def test_a_transposed_lane_mapping_gives_a_wrong_result():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((16, 16)).astype(np.float32)
    B = rng.standard_normal((16, 8)).astype(np.float32)
    C = np.zeros((16, 8), np.float32)
    wrong = fr.a_layout()[..., ::-1]  # (col, row): the learner swapped the two
    D = _run_mma("bf16", A, B, C, a_layout=wrong)
    assert np.abs(D - fr.mma_reference(A, B, C)).max() > 0.5
    np.testing.assert_allclose(D, fr.mma_reference(A.T, B, C), rtol=1e-5, atol=1e-5)
    swapped = fr.a_layout()[:, [1, 0, 3, 2]]  # registers 0/1 swapped: rows g and g+8
    D = _run_mma("bf16", A, B, C, a_layout=swapped)
    assert np.abs(D - fr.mma_reference(A, B, C)).max() > 0.5


@cuda.jit
def _half_warp_mma(d):
    lane = cuda.threadIdx.x
    if lane >= 16:
        return
    z = float32(0)
    r = tc.mma_bf16((0, 0, 0, 0), (0, 0), (z, z, z, z))
    d[lane] = r[0]


@sim_only
def test_mma_needs_the_whole_warp():
    from cudacourse.runtime.simwarp import WarpError

    with pytest.raises(WarpError, match=r"all 32 lanes .* lanes \[16, 17"):
        _half_warp_mma[1, 32](np.zeros(32, np.float32))


# --- ldmatrix ------------------------------------------------------------------------------------

@cuda.jit
def _ldmatrix_kernel(tile_g, rows, cols, out, num, trans):
    sh = cuda.shared.array((16, 32), uint16, alignment=ALIGN)
    lane = cuda.threadIdx.x
    for j in range(16):
        sh[lane // 2, (lane % 2) * 16 + j] = tile_g[lane // 2, (lane % 2) * 16 + j]
    cuda.syncthreads()
    r, c = rows[lane], cols[lane]
    if num == 1:
        out[lane, 0] = tc.ldmatrix_x1_trans(sh, r, c) if trans else tc.ldmatrix_x1(sh, r, c)
    elif num == 2:
        v = tc.ldmatrix_x2_trans(sh, r, c) if trans else tc.ldmatrix_x2(sh, r, c)
        out[lane, 0], out[lane, 1] = v[0], v[1]
    else:
        v = tc.ldmatrix_x4_trans(sh, r, c) if trans else tc.ldmatrix_x4(sh, r, c)
        for i in range(4):
            out[lane, i] = v[i]


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_gives_each_lane_its_pair(num, trans):
    rng = np.random.default_rng(4 + num)
    tile = rng.integers(0, 2**16, (16, 32), dtype=np.uint16)
    # matrix m: 8 rows starting at a different place for each m (lanes 8m .. 8m+7)
    starts = [(0, 8), (8, 0), (3, 24), (8, 16)]
    rows = np.array([starts[(l // 8) % num][0] + l % 8 for l in range(32)], np.int32)
    cols = np.array([starts[(l // 8) % num][1] for l in range(32)], np.int32)
    out = np.zeros((32, 4), np.uint32)
    _ldmatrix_kernel[1, 32](tile, rows, cols, out, num, trans)
    lay = fr.ldmatrix_layout(trans)
    for m in range(num):
        r0, c0 = starts[m]
        M = tile[r0:r0 + 8, c0:c0 + 8]
        want = fr.pack_pairs(M[lay[:, 0, 0], lay[:, 0, 1]], M[lay[:, 1, 0], lay[:, 1, 1]])
        np.testing.assert_array_equal(out[:, m], want, err_msg=f"matrix {m}")


@cuda.jit
def _ldmatrix_at_kernel(tile_g, out):
    sh = cuda.shared.array((16, 32), uint16, alignment=ALIGN)
    lane = cuda.threadIdx.x
    for j in range(16):
        sh[lane // 2, (lane % 2) * 16 + j] = tile_g[lane // 2, (lane % 2) * 16 + j]
    cuda.syncthreads()
    at = tc.smem_addr(sh, lane % 16, 0)  # this lane's row, then 16 bytes = 8 columns on
    v = tc.ldmatrix_x4_at(at + 16 + 16 * (lane // 16))
    w = tc.ldmatrix_x4_trans_at(at + 16 + 16 * (lane // 16))
    for i in range(4):
        out[lane, i] = v[i]
        out[lane, 4 + i] = w[i]


def test_ldmatrix_from_an_address_plus_bytes():
    """smem_addr + a byte offset addresses the same rows as ldmatrix_x4(tile, row, col)."""
    tile = np.random.default_rng(9).integers(0, 2**16, (16, 32), dtype=np.uint16)
    out = np.zeros((32, 8), np.uint32)
    _ldmatrix_at_kernel[1, 32](tile, out)
    rows = np.arange(32, dtype=np.int32) % 16
    cols = (8 + 8 * (np.arange(32) // 16)).astype(np.int32)
    for trans, half in ((False, slice(0, 4)), (True, slice(4, 8))):
        want = np.zeros((32, 4), np.uint32)
        _ldmatrix_kernel[1, 32](tile, rows, cols, want, 4, trans)
        np.testing.assert_array_equal(out[:, half], want)


@sim_only
def test_ldmatrix_refuses_an_unaligned_row():
    tile = np.zeros((16, 32), np.uint16)
    rows = np.arange(32, dtype=np.int32) % 8
    cols = np.full(32, 4, np.int32)  # 8 bytes into the row: not 16-byte aligned
    with pytest.raises(RuntimeError, match=r"lane 0's row address tile\[0, 4\] is not on a "
                                           "16-byte boundary"):
        _ldmatrix_kernel[1, 32](tile, rows, cols, np.zeros((32, 4), np.uint32), 1, False)


# --- cp.async: copies, and the order rule ---------------------------------------------------------

@cuda.jit
def _cp_kernel(src, out, wait, sync, use_ldmatrix):
    """Each of 32 threads copies 16 bytes (8 bf16) of a 16 x 16 tile; then the warp reads."""
    sh = cuda.shared.array((16, 16), uint16, alignment=ALIGN)
    t = cuda.threadIdx.x
    tc.cp_async16(sh, t // 2, 8 * (t % 2), src, t // 2, 8 * (t % 2))
    tc.cp_async_commit()
    if wait:
        tc.cp_async_wait(0)
    if sync:
        cuda.syncthreads()
    if use_ldmatrix:
        v = tc.ldmatrix_x4(sh, t % 16, 8 * (t // 16))
        for i in range(4):
            out[t, i] = v[i]
    else:
        for j in range(8):
            out[t, j] = sh[(t + 1) % 32 // 2, j + 8 * ((t + 1) % 2)]


@pytest.mark.parametrize("use_ldmatrix", [False, True])
def test_cp_async_then_wait_and_barrier_copies(use_ldmatrix):
    src = np.arange(256, dtype=np.uint16).reshape(16, 16)
    out = np.zeros((32, 8), np.uint32)
    _cp_kernel[1, 32](src, out, True, True, use_ldmatrix)
    if use_ldmatrix:
        np.testing.assert_array_equal(out[:, :4], fr.a_fragments(src))
    else:
        t = (np.arange(32) + 1) % 32
        np.testing.assert_array_equal(out, src[t // 2][np.arange(32)[:, None],
                                                         8 * (t % 2)[:, None] + np.arange(8)])


@sim_only
def test_ldmatrix_before_the_wait_is_named():
    src = np.arange(256, dtype=np.uint16).reshape(16, 16)
    with pytest.raises(tc.AsyncCopyError, match=r"ldmatrix_x4 \(lane \d+\) reads "
                                                r"tile\[\d+, \d+:\d+\] while the cp.async"):
        _cp_kernel[1, 32](src, np.zeros((32, 8), np.uint32), False, True, True)


@sim_only
def test_a_read_before_the_wait_sees_no_data():
    """Without the wait, plain reads find the 0xFFFF poison (a bfloat16 NaN), never the data."""
    src = np.arange(256, dtype=np.uint16).reshape(16, 16)
    out = np.zeros((32, 8), np.uint32)
    _cp_kernel[1, 32](src, out, False, True, False)
    assert (out == 0xFFFF).all()


@cuda.jit
def _cp_sizes(src, out):
    sh = cuda.shared.array((4, 16), float32, alignment=ALIGN)
    t = cuda.threadIdx.x
    if t == 0:
        tc.cp_async16(sh, 0, 0, src, 0, 0)
        tc.cp_async16_ca(sh, 1, 4, src, 1, 4)
        tc.cp_async8(sh, 2, 2, src, 2, 2)
        tc.cp_async4(sh, 3, 3, src, 3, 3)
        tc.cp_async_commit()
        tc.cp_async4(sh, 3, 15, src, 3, 15)  # not committed: wait_all still waits for it
        tc.cp_async_wait_all()
    cuda.syncthreads()
    for j in range(16):
        out[t, j] = sh[t, j]


def test_cp_async_sizes():
    src = np.arange(64, dtype=np.float32).reshape(4, 16)
    out = np.zeros((4, 16), np.float32)
    # every other element untouched: zero-initialise the tile in the kernel? shared memory
    # is not initialised on a GPU, so compare only what was copied
    _cp_sizes[1, 4](src, out)
    np.testing.assert_array_equal(out[0, 0:4], src[0, 0:4])
    np.testing.assert_array_equal(out[1, 4:8], src[1, 4:8])
    np.testing.assert_array_equal(out[2, 2:4], src[2, 2:4])
    np.testing.assert_array_equal(out[3, [3, 15]], src[3, [3, 15]])
    assert tc.cp_async(8, "ca") is tc.cp_async8
    with pytest.raises(ValueError, match="got 8 bytes with 'cg'"):
        tc.cp_async(8, "cg")


@cuda.jit
def _cp_unaligned(src):
    sh = cuda.shared.array((4, 16), float32, alignment=ALIGN)
    tc.cp_async16(sh, 0, 2, src, 0, 2)


@sim_only
def test_cp_async_refuses_an_unaligned_address():
    with pytest.raises(RuntimeError, match=r"destination\[0, 2\] is not on a 16-byte boundary"):
        _cp_unaligned[1, 1](np.zeros((4, 16), np.float32))


# --- 2-D views of dynamic shared memory -------------------------------------------------------

@cuda.jit
def _tile_kernel(out):
    dyn = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    view = tc.shared_tile(dyn, 8, 4, 6)  # elements 8 .. 31 as 4 rows of 6
    view[t // 6, t % 6] = t
    cuda.syncthreads()
    out[t] = dyn[8 + t]


def test_shared_tile_is_a_view_of_dynamic_shared_memory():
    out = np.zeros(24, np.float32)
    _tile_kernel[1, 24, 0, 32 * 4](out)
    np.testing.assert_array_equal(out, np.arange(24))


# --- bf16 packing ----------------------------------------------------------------------------

@cuda.jit
def _pack_kernel(x, packed, back):
    i = cuda.grid(1)
    if i < packed.shape[0]:
        r = tc.pack_bf16x2(x[2 * i], x[2 * i + 1])
        packed[i] = r
        lo, hi = tc.unpack_bf16x2(r)
        back[2 * i], back[2 * i + 1] = lo, hi


@cuda.jit
def _tf32_kernel(x, out):
    i = cuda.grid(1)
    if i < x.shape[0]:
        out[i] = tc.to_tf32(x[i])


def test_to_tf32_rounds_to_nearest_ties_away():
    x = np.array([1 + 2**-11, 1 + 3 * 2**-11, -(1 + 2**-11), 1 + 2**-12, 3.0, 1e-3],
                 np.float32)
    out = np.zeros_like(x)
    _tf32_kernel[1, 32](x, out)
    want = np.array([1 + 2**-10, 1 + 2 * 2**-10, -(1 + 2**-10), 1.0, 3.0,
                     fr.to_tf32(np.float32(1e-3))], np.float32)
    np.testing.assert_array_equal(out, want)
    assert (out.view(np.uint32) & 0x1FFF == 0).all()
    assert fr.round_tf32(np.float32(1 + 3 * 2**-11)) == 1 + 2**-10  # truncation differs


def test_pack_bf16x2_rounds_like_numpy():
    x = np.random.default_rng(5).standard_normal(64).astype(np.float32) * 1000
    packed, back = np.zeros(32, np.uint32), np.zeros(64, np.float32)
    _pack_kernel[1, 32](x, packed, back)
    b = fr.to_bf16_bits(x)
    np.testing.assert_array_equal(packed, fr.pack_pairs(b[0::2], b[1::2]))
    np.testing.assert_array_equal(back, fr.round_bf16(x))


# --- compiles for sm_80 and sm_90 ------------------------------------------------------------

_COMPILE_SCRIPT = r'''
import subprocess, sys, tempfile
sys.path.insert(0, "tools")
import offline_sm90  # noqa: F401  GPU mode and the toolkit, without a GPU
from numba.cuda.cudadrv import nvrtc
nvrtc.get_supported_ccs = lambda: ((8, 0), (9, 0))  # offline: A100 and H100/H200 targets
from numba import cuda, float32, uint16
from cudacourse.runtime import tensorcore as tc


def every_intrinsic(a, out, g):
    sh = cuda.shared.array((64, 64), uint16, alignment=16)
    l = cuda.threadIdx.x
    tc.cp_async16(sh, l, 0, g, l, 0)
    tc.cp_async16_ca(sh, l, 8, g, l, 8)
    tc.cp_async8(sh, l, 16, g, l, 16)
    tc.cp_async4(sh, l, 20, g, l, 20)
    tc.cp_async_commit()
    tc.cp_async_wait(1)
    tc.cp_async_wait_all()
    cuda.syncthreads()
    x = tc.ldmatrix_x4(sh, l % 16, 8 * (l // 16))
    y = tc.ldmatrix_x2_trans(sh, l % 16, 0)
    z = tc.ldmatrix_x1(sh, l % 8, 0) + tc.ldmatrix_x1_trans(sh, l % 8, 8)
    w = tc.ldmatrix_x2(sh, l % 16, 8)[0] + tc.ldmatrix_x4_trans(sh, l % 16, 16)[3]
    p = tc.pack_bf16x2(a[l], a[l + 1]) + tc.pack_f16x2(a[0], a[1])
    d = tc.mma_bf16(x, y, (float32(0), float32(0), float32(0), float32(0)))
    d = tc.mma_f16((x[0], x[1], p, z), (w, y[1]), d)
    d = tc.mma_tf32((a[0], a[1], a[2], a[3]), (a[4], a[5]), d)
    lo, hi = tc.unpack_bf16x2(p)
    view = tc.shared_tile(cuda.shared.array(0, uint16), 64, 8, 32)
    at = tc.smem_addr(sh, l % 16, 0) + 16
    e = tc.ldmatrix_x4_at(at)[0] + tc.ldmatrix_x4_trans_at(at + 32)[1]
    out[l] = d[0] + d[1] + d[2] + d[3] + lo + hi + tc.bits_float(tc.float_bits(a[2])) \
        + tc.exp2_approx(a[3]) + view[l % 8, l] + tc.to_tf32(a[4]) + e


sig = (float32[::1], float32[::1], uint16[:, ::1])
want = ["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32",
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x1.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
        "cp.async.cg.shared.global", "cp.async.ca.shared.global", "cp.async.commit_group",
        "cp.async.wait_group 1", "cp.async.wait_all", "cvt.rn.bf16x2.f32", "cvt.rn.f16x2.f32",
        "ex2.approx.ftz.f32", "cvt.rna.tf32.f32"]
for cc in ((8, 0), (9, 0)):
    ptx, _ = cuda.compile_ptx(every_intrinsic, sig, cc=cc)
    missing = [w for w in want if w not in ptx]
    assert not missing, (cc, missing)
    with tempfile.TemporaryDirectory() as d:
        with open(d + "/k.ptx", "w") as f:
            f.write(ptx)
        r = subprocess.run([offline_sm90.PTXAS, f"-arch=sm_{cc[0]}{cc[1]}", d + "/k.ptx",
                            "-o", d + "/k.cubin"], capture_output=True, text=True)
        assert r.returncode == 0, (cc, r.stderr[-1500:])
print("ok")
'''


def test_every_intrinsic_compiles_and_assembles_for_sm80_and_sm90():
    """Without a GPU: Numba's compiler and ptxas from the pip wheels (tools/offline_sm90.py)."""
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM",
                                                              "CUDACOURSE_SIM_REASON")}
    env["CUDACOURSE_QUIET"] = "1"
    proc = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    if proc.returncode and "offline_sm90:" in proc.stderr:
        pytest.skip(f"no CUDA toolkit for an offline compile: {proc.stderr.strip()}")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


def _learner_kernel(a, b, c, d):
    lane = cuda.threadIdx.x
    r = tc.mma_bf16((a[lane, 0], a[lane, 1], a[lane, 2], a[lane, 3]), (b[lane, 0], b[lane, 1]),
                    (c[lane, 0], c[lane, 1], c[lane, 2], c[lane, 3]))
    for i in range(4):
        d[lane, i] = r[i]


@sim_only
def test_the_compile_gate_compiles_a_kernel_that_uses_the_intrinsics():
    """The checkers' gate (check/_compile) rebuilds a learner's kernel with ``tc`` in it."""
    from cudacourse.check import _compile

    if not _compile.status()[0]:
        pytest.skip(f"no sm_90 compile gate here: {_compile.status()[1]}")
    args = (np.zeros((32, 4), np.uint32), np.zeros((32, 2), np.uint32),
            np.zeros((32, 4), np.float32), np.zeros((32, 4), np.float32))
    res = _compile.gate(cuda.jit(_learner_kernel), args, "mma")
    assert res is not None and res.registers > 0


# --- the typical mistakes, named ----------------------------------------------------------

def test_every_mistake_differs_from_the_right_answer_and_is_recognised():
    rng = np.random.default_rng(7)
    a = fr.round_bf16(rng.standard_normal((16, 16)).astype(np.float32))
    b = fr.round_bf16(rng.standard_normal((16, 8)).astype(np.float32))
    c = rng.standard_normal((16, 8)).astype(np.float32)
    mistakes = fr.mma_mistakes(a, b, c)
    assert len(mistakes) == 7
    for name, d in mistakes.items():
        assert fr.which_mistake(d, a, b, c) == name
    # B's k halves swapped is the same product as A's: one name for both
    b_swapped = fr.mma_reference(a, np.vstack([b[8:], b[:8]]), c)
    assert fr.which_mistake(b_swapped, a, b, c) == "k_halves_swapped"
    assert fr.which_mistake(fr.mma_reference(a, b, c), a, b, c) is None


def test_the_transposed_mutant_is_what_the_simulated_warp_computes():
    """The table's a_transposed is what a warp loading A with (col, row) actually gives."""
    rng = np.random.default_rng(8)
    A = rng.standard_normal((16, 16)).astype(np.float32)
    B = rng.standard_normal((16, 8)).astype(np.float32)
    C = rng.standard_normal((16, 8)).astype(np.float32)
    D = _run_mma("bf16", A, B, C, a_layout=fr.a_layout()[..., ::-1])
    assert fr.which_mistake(D, A, B, C) == "a_transposed"
    D = _run_mma("bf16", A, B, C, a_layout=fr.a_layout()[:, [2, 3, 0, 1]])
    assert fr.which_mistake(D, A, B, C) == "k_halves_swapped"
