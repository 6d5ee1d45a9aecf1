"""Lesson 7 checkers (check/tensorcores.py): the catalogue of wrong tensor-core kernels, each
rejected with the phrase that names its mistake, and right kernels written differently from
the master, accepted. Every diagnosis is rendered in Japanese too (tests/japanese_edition.py)."""

from __future__ import annotations

import math
import os

import pytest
from numba import cuda, float32, uint16

import cudacourse.check
from cudacourse.runtime import tensorcore as tc
from cudacourse.check import CheckFailure

pytestmark = pytest.mark.lesson7

ALIGN = None if tc.SIM else 16  # cp.async and ldmatrix: 16-byte aligned tiles on a GPU


# --- exercise 1: mma_tile(a, b, c, d), one warp ----------------------------------------------

@cuda.jit
def tile_master(a, b, c, d):
    lane = cuda.threadIdx.x
    g = lane // 4
    t = lane % 4
    fa = (tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
          tc.pack_bf16x2(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]),
          tc.pack_bf16x2(a[g, 2 * t + 8], a[g, 2 * t + 9]),
          tc.pack_bf16x2(a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9]))
    fb = (tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g]),
          tc.pack_bf16x2(b[2 * t + 8, g], b[2 * t + 9, g]))
    acc = (c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
    r = tc.mma_bf16(fa, fb, acc)
    d[g, 2 * t] = r[0]
    d[g, 2 * t + 1] = r[1]
    d[g + 8, 2 * t] = r[2]
    d[g + 8, 2 * t + 1] = r[3]


@cuda.jit(device=True)
def _a_reg(a, g, t, r):
    """Register r of A: row g + 8 (r % 2), columns 2t + 8 (r // 2) and the next."""
    row = g + 8 * (r % 2)
    col = 2 * t + 8 * (r // 2)
    return tc.pack_bf16x2(a[row, col], a[row, col + 1])


@cuda.jit
def tile_right_helpers(a, b, c, d):
    # written differently: a device function per register, the lane split by shifts and masks
    lane = cuda.threadIdx.x
    g = lane >> 2
    t = lane & 3
    fb0 = tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g])
    fb1 = tc.pack_bf16x2(b[2 * t + 8, g], b[2 * t + 9, g])
    r = tc.mma_bf16((_a_reg(a, g, t, 0), _a_reg(a, g, t, 1), _a_reg(a, g, t, 2),
                     _a_reg(a, g, t, 3)), (fb0, fb1),
                    (c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1]))
    for i in range(4):
        d[g + 8 * (i // 2), 2 * t + i % 2] = r[i]


@cuda.jit
def tile_right_zero_then_add(a, b, c, d):
    # right too: mma with a zero accumulator, C added in float32 afterwards
    lane = cuda.threadIdx.x
    g = lane // 4
    t = lane % 4
    fa = (tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
          tc.pack_bf16x2(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]),
          tc.pack_bf16x2(a[g, 2 * t + 8], a[g, 2 * t + 9]),
          tc.pack_bf16x2(a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9]))
    fb = (tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g]),
          tc.pack_bf16x2(b[2 * t + 8, g], b[2 * t + 9, g]))
    z = float32(0.0)
    r = tc.mma_bf16(fa, fb, (z, z, z, z))
    d[g, 2 * t] = r[0] + c[g, 2 * t]
    d[g, 2 * t + 1] = r[1] + c[g, 2 * t + 1]
    d[g + 8, 2 * t] = r[2] + c[g + 8, 2 * t]
    d[g + 8, 2 * t + 1] = r[3] + c[g + 8, 2 * t + 1]


def _tile_mutant(kind: int):
    """The master with one mistake: kind selects it (a constant, so Numba folds it)."""
    @cuda.jit
    def mutant(a, b, c, d):
        lane = cuda.threadIdx.x
        g = lane // 4
        t = lane % 4
        if kind == 0:  # A transposed: a[col, row]
            fa = (tc.pack_bf16x2(a[2 * t, g], a[2 * t + 1, g]),
                  tc.pack_bf16x2(a[2 * t, g + 8], a[2 * t + 1, g + 8]),
                  tc.pack_bf16x2(a[2 * t + 8, g], a[2 * t + 9, g]),
                  tc.pack_bf16x2(a[2 * t + 8, g + 8], a[2 * t + 9, g + 8]))
        elif kind == 1:  # the k offset 8 left out of A's registers 2 and 3
            fa = (tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
                  tc.pack_bf16x2(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]),
                  tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
                  tc.pack_bf16x2(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]))
        elif kind == 2:  # registers 0 and 1 exchanged: rows g and g + 8
            fa = (tc.pack_bf16x2(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]),
                  tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
                  tc.pack_bf16x2(a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9]),
                  tc.pack_bf16x2(a[g, 2 * t + 8], a[g, 2 * t + 9]))
        else:
            fa = (tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
                  tc.pack_bf16x2(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]),
                  tc.pack_bf16x2(a[g, 2 * t + 8], a[g, 2 * t + 9]),
                  tc.pack_bf16x2(a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9]))
        if kind == 3:  # B row-major: b[g + 8r, 2t + h]
            fb = (tc.pack_bf16x2(b[g, 2 * t], b[g, 2 * t + 1]),
                  tc.pack_bf16x2(b[g + 8, 2 * t], b[g + 8, 2 * t + 1]))
        elif kind == 4:  # the k offset 8 left out of B's register 1
            fb = (tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g]),
                  tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g]))
        else:
            fb = (tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g]),
                  tc.pack_bf16x2(b[2 * t + 8, g], b[2 * t + 9, g]))
        if kind == 5:  # C not passed
            z = float32(0.0)
            acc = (z, z, z, z)
        else:
            acc = (c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
        r = tc.mma_bf16(fa, fb, acc)
        if kind == 6:  # D kept in bfloat16
            lo, hi = tc.unpack_bf16x2(tc.pack_bf16x2(r[0], r[1]))
            lo2, hi2 = tc.unpack_bf16x2(tc.pack_bf16x2(r[2], r[3]))
            r = (lo, hi, lo2, hi2)
        d[g, 2 * t] = r[0]
        d[g, 2 * t + 1] = r[1]
        if kind != 7:  # kind 7: the second row's results never stored
            d[g + 8, 2 * t] = r[2]
            d[g + 8, 2 * t + 1] = r[3]
    return mutant


TILE_MUTANTS = {
    "a_transposed": (0, "fragment_layout", "A is loaded transposed"),
    "a_k8_missing": (1, "fragment_layout", "the k offset 8 is missing in A"),
    "a_rows_swapped": (2, "fragment_layout", "registers 0 and 1 (and 2 and 3) are exchanged"),
    "b_row_major": (3, "fragment_layout", "B is loaded row-major"),
    "b_k8_missing": (4, "fragment_layout", "the k offset 8 is missing in B"),
    "c_ignored": (5, "wrong_formula", "C was not added"),
    "bf16_accumulator": (6, "bf16_accumulator", "D was rounded to bfloat16"),
    "unwritten": (7, "unwritten", "lane 0's D register 2"),
}


@pytest.mark.parametrize("kernel", [tile_master, tile_right_helpers, tile_right_zero_then_add],
                         ids=["master", "helpers", "zero_then_add"])
def test_mma_tile_accepts_right_kernels(kernel):
    assert "mma_tile passes" in str(cudacourse.check.check_mma_tile(kernel))


@pytest.mark.parametrize("name", list(TILE_MUTANTS))
def test_mma_tile_names_the_mistake(name):
    kind, cause, phrase = TILE_MUTANTS[name]
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_mma_tile(_tile_mutant(kind))
    assert info.value.cause == cause
    assert phrase in str(info.value)


@cuda.jit
def tile_row_g_plus_7(a, b, c, d):
    # issue 45 (mutants): one index of A's fragment one off (row g + 7 where g + 8 belongs)
    lane = cuda.threadIdx.x
    g = lane // 4
    t = lane % 4
    fa = (tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
          tc.pack_bf16x2(a[g + 7, 2 * t], a[g + 8, 2 * t + 1]),
          tc.pack_bf16x2(a[g, 2 * t + 8], a[g, 2 * t + 9]),
          tc.pack_bf16x2(a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9]))
    fb = (tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g]),
          tc.pack_bf16x2(b[2 * t + 8, g], b[2 * t + 9, g]))
    acc = (c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
    r = tc.mma_bf16(fa, fb, acc)
    d[g, 2 * t] = r[0]
    d[g, 2 * t + 1] = r[1]
    d[g + 8, 2 * t] = r[2]
    d[g + 8, 2 * t + 1] = r[3]


def test_mma_tile_names_the_one_changed_index():
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_mma_tile(tile_row_g_plus_7)
    assert info.value.cause == "wrong_index"
    assert "`a[g + 7, 2 * t]` in place of `a[g + 8, 2 * t]`" in str(info.value)


# --- exercise 2: mma_matmul(a, b, c), two warps a block, a 16 x 16 tile --------------------------

def _matmul(variant: str):
    """The master (variant "master") or one of its mistakes, by name."""
    skip_last = variant == "skip_last"
    no_trans = variant == "b_no_trans"
    a_k8 = variant == "a_k8"
    bf16_acc = variant == "bf16_acc"

    @cuda.jit
    def kernel(a, b, c):
        sa = cuda.shared.array((16, 16), uint16, alignment=ALIGN)
        sb = cuda.shared.array((16, 16), uint16, alignment=ALIGN)
        tid = cuda.threadIdx.x
        lane = tid % 32
        warp = tid // 32
        row0 = cuda.blockIdx.y * 16
        col0 = cuda.blockIdx.x * 16
        acc = (float32(0.0), float32(0.0), float32(0.0), float32(0.0))
        kend = a.shape[1] - 16 if skip_last else a.shape[1]
        for k0 in range(0, kend, 16):
            r = lane // 2
            ch = 8 * (lane % 2)
            if warp == 0:
                tc.cp_async16(sa, r, ch, a, row0 + r, k0 + ch)
            else:
                tc.cp_async16(sb, r, ch, b, k0 + r, col0 + ch)
            tc.cp_async_commit()
            tc.cp_async_wait(0)
            cuda.syncthreads()
            fa = tc.ldmatrix_x4(sa, lane % 16, 0 if a_k8 else 8 * (lane // 16))
            if no_trans:
                fb = tc.ldmatrix_x2(sb, lane % 16, 8 * warp)
            else:
                fb = tc.ldmatrix_x2_trans(sb, lane % 16, 8 * warp)
            acc = tc.mma_bf16(fa, fb, acc)
            if bf16_acc:
                lo, hi = tc.unpack_bf16x2(tc.pack_bf16x2(acc[0], acc[1]))
                lo2, hi2 = tc.unpack_bf16x2(tc.pack_bf16x2(acc[2], acc[3]))
                acc = (lo, hi, lo2, hi2)
            cuda.syncthreads()
        g = lane // 4
        t = lane % 4
        col = col0 + 8 * warp + 2 * t
        c[row0 + g, col] = acc[0]
        c[row0 + g, col + 1] = acc[1]
        c[row0 + g + 8, col] = acc[2]
        c[row0 + g + 8, col + 1] = acc[3]

    return kernel


@cuda.jit
def matmul_right_plain_loads(a, b, c):
    # written differently: plain loads into shared memory (no cp.async), each thread 8
    # elements of both tiles, B's fragment from ldmatrix_x4_trans with the upper half unused
    sa = cuda.shared.array((16, 16), uint16, alignment=ALIGN)
    sb = cuda.shared.array((16, 16), uint16, alignment=ALIGN)
    tid = cuda.threadIdx.x
    lane = tid & 31
    warp = tid >> 5
    row0 = cuda.blockIdx.y * 16
    col0 = cuda.blockIdx.x * 16
    acc = (float32(0.0), float32(0.0), float32(0.0), float32(0.0))
    for kt in range(a.shape[1] // 16):
        for e in range(4):
            i = tid * 4 + e
            sa[i // 16, i % 16] = a[row0 + i // 16, kt * 16 + i % 16]
            sb[i // 16, i % 16] = b[kt * 16 + i // 16, col0 + i % 16]
        cuda.syncthreads()
        fa = tc.ldmatrix_x4(sa, lane % 16, 8 * (lane // 16))
        y = tc.ldmatrix_x4_trans(sb, lane % 16, 8 * warp)
        acc = tc.mma_bf16(fa, (y[0], y[1]), acc)
        cuda.syncthreads()
    g = lane // 4
    t = lane % 4
    for i in range(4):
        c[row0 + g + 8 * (i // 2), col0 + 8 * warp + 2 * t + i % 2] = acc[i]


@cuda.jit
def matmul_no_barrier(a, b, c):
    # the master without the barrier between cp_async_wait and ldmatrix
    sa = cuda.shared.array((16, 16), uint16, alignment=ALIGN)
    sb = cuda.shared.array((16, 16), uint16, alignment=ALIGN)
    tid = cuda.threadIdx.x
    lane = tid % 32
    warp = tid // 32
    row0 = cuda.blockIdx.y * 16
    col0 = cuda.blockIdx.x * 16
    acc = (float32(0.0), float32(0.0), float32(0.0), float32(0.0))
    for k0 in range(0, a.shape[1], 16):
        r = lane // 2
        ch = 8 * (lane % 2)
        if warp == 0:
            tc.cp_async16(sa, r, ch, a, row0 + r, k0 + ch)
        else:
            tc.cp_async16(sb, r, ch, b, k0 + r, col0 + ch)
        tc.cp_async_commit()
        tc.cp_async_wait(0)
        fa = tc.ldmatrix_x4(sa, lane % 16, 8 * (lane // 16))
        fb = tc.ldmatrix_x2_trans(sb, lane % 16, 8 * warp)
        acc = tc.mma_bf16(fa, fb, acc)
        cuda.syncthreads()
    g = lane // 4
    t = lane % 4
    col = col0 + 8 * warp + 2 * t
    c[row0 + g, col] = acc[0]
    c[row0 + g, col + 1] = acc[1]
    c[row0 + g + 8, col] = acc[2]
    c[row0 + g + 8, col + 1] = acc[3]


MATMUL_MUTANTS = {
    "skip_last": ("k_tile_skipped", "skips the last tile"),
    "b_no_trans": ("fragment_layout", "ldmatrix needs .trans"),
    "a_k8": ("fragment_layout", "A's k offset 8 is missing"),
    "bf16_acc": ("bf16_accumulator", "rounded to bfloat16 after every k tile"),
    "no_barrier": ("missing_barrier", "cuda.syncthreads()"),
}


@pytest.mark.parametrize("kernel", [_matmul("master"), matmul_right_plain_loads],
                         ids=["master", "plain_loads"])
def test_mma_matmul_accepts_right_kernels(kernel):
    assert "mma_matmul passes" in str(cudacourse.check.check_mma_matmul(kernel))


@pytest.mark.parametrize("name", list(MATMUL_MUTANTS))
def test_mma_matmul_names_the_mistake(name):
    cause, phrase = MATMUL_MUTANTS[name]
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_mma_matmul(matmul_no_barrier if name == "no_barrier"
                                          else _matmul(name))
    assert info.value.cause == cause, str(info.value)
    assert phrase in str(info.value)


def test_matmul_refuses_sizes_that_are_not_tiles():
    with pytest.raises(ValueError, match="multiples of 16"):
        cudacourse.check.check_mma_matmul(_matmul("master"),
                                          hidden=cudacourse.check.Cases(1, [(16, 24, 16)]))


# --- exercise 3: mma_attention(q, k, v, o, scale), one warp per 16 rows ---------------------------

def _attention(variant: str):
    no_rescale = variant == "no_rescale"
    skip_last = variant == "skip_last"
    no_scale = variant == "no_scale"
    no_max = variant == "no_max"
    v_row_7 = variant == "v_row_7"  # issue 45: v[j0 + 2 * t + 7, g] where + 8 belongs
    lo_for_hi = variant == "lo_for_hi"  # issue 45: o0[3] rescaled by a_lo, not a_hi
    reciprocal = variant == "reciprocal"  # right, written otherwise: o times 1 / l
    sum_assigned = variant == "sum_assigned"  # issue 45: `l_hi = shfl(...)` where += belongs

    @cuda.jit
    def kernel(q, k, v, o, scale):
        lane = cuda.threadIdx.x
        g = lane // 4
        t = lane % 4
        r0 = cuda.blockIdx.x * 16
        sc = float32(1.0) if no_scale else scale
        qa = (tc.pack_bf16x2(q[r0 + g, 2 * t], q[r0 + g, 2 * t + 1]),
              tc.pack_bf16x2(q[r0 + g + 8, 2 * t], q[r0 + g + 8, 2 * t + 1]),
              tc.pack_bf16x2(q[r0 + g, 2 * t + 8], q[r0 + g, 2 * t + 9]),
              tc.pack_bf16x2(q[r0 + g + 8, 2 * t + 8], q[r0 + g + 8, 2 * t + 9]))
        z = float32(0.0)
        m_lo = float32(-math.inf)
        m_hi = float32(-math.inf)
        l_lo = float32(0.0)
        l_hi = float32(0.0)
        o0 = (z, z, z, z)
        o1 = (z, z, z, z)
        kend = k.shape[0] - 16 if skip_last else k.shape[0]
        for j0 in range(0, kend, 16):
            kb0 = (tc.pack_bf16x2(k[j0 + g, 2 * t], k[j0 + g, 2 * t + 1]),
                   tc.pack_bf16x2(k[j0 + g, 2 * t + 8], k[j0 + g, 2 * t + 9]))
            kb1 = (tc.pack_bf16x2(k[j0 + 8 + g, 2 * t], k[j0 + 8 + g, 2 * t + 1]),
                   tc.pack_bf16x2(k[j0 + 8 + g, 2 * t + 8], k[j0 + 8 + g, 2 * t + 9]))
            s0 = tc.mma_bf16(qa, kb0, (z, z, z, z))
            s1 = tc.mma_bf16(qa, kb1, (z, z, z, z))
            x_lo = max(max(s0[0], s0[1]), max(s1[0], s1[1])) * sc
            x_hi = max(max(s0[2], s0[3]), max(s1[2], s1[3])) * sc
            x_lo = max(x_lo, cuda.shfl_xor_sync(0xFFFFFFFF, x_lo, 1))
            x_lo = max(x_lo, cuda.shfl_xor_sync(0xFFFFFFFF, x_lo, 2))
            x_hi = max(x_hi, cuda.shfl_xor_sync(0xFFFFFFFF, x_hi, 1))
            x_hi = max(x_hi, cuda.shfl_xor_sync(0xFFFFFFFF, x_hi, 2))
            n_lo = max(m_lo, x_lo)
            n_hi = max(m_hi, x_hi)
            if no_max:
                n_lo = float32(0.0)
                n_hi = float32(0.0)
            a_lo = math.exp(m_lo - n_lo)
            a_hi = math.exp(m_hi - n_hi)
            if no_rescale:
                a_lo = float32(1.0)
                a_hi = float32(1.0)
            p00 = math.exp(s0[0] * sc - n_lo)
            p01 = math.exp(s0[1] * sc - n_lo)
            p02 = math.exp(s0[2] * sc - n_hi)
            p03 = math.exp(s0[3] * sc - n_hi)
            p10 = math.exp(s1[0] * sc - n_lo)
            p11 = math.exp(s1[1] * sc - n_lo)
            p12 = math.exp(s1[2] * sc - n_hi)
            p13 = math.exp(s1[3] * sc - n_hi)
            l_lo = l_lo * a_lo + p00 + p01 + p10 + p11
            l_hi = l_hi * a_hi + p02 + p03 + p12 + p13
            pa = (tc.pack_bf16x2(p00, p01), tc.pack_bf16x2(p02, p03),
                  tc.pack_bf16x2(p10, p11), tc.pack_bf16x2(p12, p13))
            vb0 = (tc.pack_bf16x2(v[j0 + 2 * t, g], v[j0 + 2 * t + 1, g]),
                   tc.pack_bf16x2(v[j0 + 2 * t + (7 if v_row_7 else 8), g],
                                  v[j0 + 2 * t + 9, g]))
            vb1 = (tc.pack_bf16x2(v[j0 + 2 * t, g + 8], v[j0 + 2 * t + 1, g + 8]),
                   tc.pack_bf16x2(v[j0 + 2 * t + 8, g + 8], v[j0 + 2 * t + 9, g + 8]))
            o0 = tc.mma_bf16(pa, vb0, (o0[0] * a_lo, o0[1] * a_lo, o0[2] * a_hi,
                                       o0[3] * (a_lo if lo_for_hi else a_hi)))
            o1 = tc.mma_bf16(pa, vb1, (o1[0] * a_lo, o1[1] * a_lo, o1[2] * a_hi,
                                       o1[3] * a_hi))
            m_lo = n_lo
            m_hi = n_hi
        l_lo += cuda.shfl_xor_sync(0xFFFFFFFF, l_lo, 1)
        l_lo += cuda.shfl_xor_sync(0xFFFFFFFF, l_lo, 2)
        l_hi += cuda.shfl_xor_sync(0xFFFFFFFF, l_hi, 1)
        if sum_assigned:
            l_hi = cuda.shfl_xor_sync(0xFFFFFFFF, l_hi, 2)
        else:
            l_hi += cuda.shfl_xor_sync(0xFFFFFFFF, l_hi, 2)
        if reciprocal:
            l_lo = float32(1.0) / l_lo
            l_hi = float32(1.0) / l_hi
            o[r0 + g, 2 * t] = o0[0] * l_lo
            o[r0 + g, 2 * t + 1] = o0[1] * l_lo
            o[r0 + g + 8, 2 * t] = o0[2] * l_hi
            o[r0 + g + 8, 2 * t + 1] = o0[3] * l_hi
            o[r0 + g, 2 * t + 8] = o1[0] * l_lo
            o[r0 + g, 2 * t + 9] = o1[1] * l_lo
            o[r0 + g + 8, 2 * t + 8] = o1[2] * l_hi
            o[r0 + g + 8, 2 * t + 9] = o1[3] * l_hi
            return
        o[r0 + g, 2 * t] = o0[0] / l_lo
        o[r0 + g, 2 * t + 1] = o0[1] / l_lo
        o[r0 + g + 8, 2 * t] = o0[2] / l_hi
        o[r0 + g + 8, 2 * t + 1] = o0[3] / l_hi
        o[r0 + g, 2 * t + 8] = o1[0] / l_lo
        o[r0 + g, 2 * t + 9] = o1[1] / l_lo
        o[r0 + g + 8, 2 * t + 8] = o1[2] / l_hi
        o[r0 + g + 8, 2 * t + 9] = o1[3] / l_hi

    return kernel


ATTENTION_MUTANTS = {
    "no_rescale": ("no_rescale", "not rescaled when a row's maximum grows"),
    "skip_last": ("k_tile_skipped", "skips the last one"),
    "no_scale": ("wrong_formula", "not multiplied by scale"),
    "no_max": ("overflow", "exp(s) overflows"),
}


@pytest.mark.parametrize("variant", ["master", "reciprocal"])
def test_mma_attention_accepts_the_master(variant):
    assert "mma_attention passes" in str(cudacourse.check.check_mma_attention(
        _attention(variant)))


# issue 45: a one-change slip in the lane program, named by the statement it changes (the
# lane model of every lane of every block, check/tensorcores._ATT_*), not "check the arithmetic"
@pytest.mark.parametrize("name, cause, phrase", [
    ("v_row_7", "wrong_index", "`v[j0 + 2 * t + 7, g]` in place of `v[j0 + 2 * t + 8, g]`"),
    pytest.param("lo_for_hi", "wrong_formula", "`a_lo` in place of `a_hi`",
                 marks=pytest.mark.skipif(os.environ.get("CUDACOURSE_NIGHTLY") != "1",
                                          reason="about 20 s in the simulator (the whole "
                                                 "model swept): the nightly profile runs it")),
    ("sum_assigned", "wrong_formula",
     "`l_hi = cuda.shfl_xor_sync(0xFFFFFFFF, l_hi, 2)` in place of "
     "`l_hi += cuda.shfl_xor_sync(0xFFFFFFFF, l_hi, 2)`"),
])
def test_mma_attention_names_the_one_changed_statement(name, cause, phrase):
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_mma_attention(_attention(name))
    assert info.value.cause == cause, str(info.value)
    assert phrase in str(info.value)


@pytest.mark.parametrize("name", list(ATTENTION_MUTANTS))
def test_mma_attention_names_the_mistake(name):
    cause, phrase = ATTENTION_MUTANTS[name]
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_mma_attention(_attention(name))
    assert info.value.cause == cause, str(info.value)
    assert phrase in str(info.value)


# --- the source checks that name a barrier the run could not see ---------------------------------

def test_wait_without_barrier_is_read_from_the_order_of_the_calls():
    from cudacourse.check import tensorcores as T

    assert T._wait_without_barrier("tc.cp_async_wait(0)\nx = tc.ldmatrix_x4(s, 0, 0)\n")
    assert not T._wait_without_barrier(
        "tc.cp_async_wait(0)\ncuda.syncthreads()\nx = tc.ldmatrix_x4(s, 0, 0)\n")
    assert not T._wait_without_barrier("x = tc.ldmatrix_x4(s, 0, 0)\n")


# --- generated: every named mistake is told apart from the right answer and from the others -----

def test_each_named_mistake_is_distinct_on_random_tiles():
    """Over many random tiles (more with CUDACOURSE_NIGHTLY=1), each wrong fragment's D
    differs from the right one and is named as itself, not as another mistake: the
    checker's diagnosis cannot depend on a lucky draw."""
    import os

    import numpy as np

    from cudacourse.runtime import fragments as fr
    from cudacourse.check import tensorcores as tcheck

    rng = np.random.default_rng(40)
    for _ in range(500 if os.environ.get("CUDACOURSE_NIGHTLY") else 40):
        r = float(rng.choice([1.0, 4.0, 100.0]))
        a, c = (rng.uniform(-r, r, s).astype(np.float32) for s in ((16, 16), (16, 8)))
        b = rng.uniform(-r, r, (16, 8)).astype(np.float32)
        want = fr.mma_reference(a, b, c).astype(np.float64)
        mistakes = tcheck._tile_mistakes(a, b, c)
        for key, (d, _, _) in mistakes.items():
            named = tcheck._named(np.asarray(d, np.float64), want, mistakes, 1e-3)
            assert named is not None and named[0] == key, (key, named and named[0])
        m, k, n = 16 * rng.integers(1, 4), 16 * rng.integers(2, 5), 16 * rng.integers(1, 4)
        av = fr.round_bf16(rng.uniform(-r, r, (m, k)).astype(np.float32)).astype(np.float64)
        bv = fr.round_bf16(rng.uniform(-r, r, (k, n)).astype(np.float32)).astype(np.float64)
        want = tcheck._tiled(av, bv)
        mistakes = tcheck._matmul_mistakes(av, bv)
        for key, (got, _, _) in mistakes.items():
            named = tcheck._named(got, want, mistakes, 1e-3)
            # with two k tiles, "only the first" and "all but the last" are one mistake
            same = {key, "last_tile"} if key == "first_tile" and k == 32 else {key}
            assert named is not None and named[0] in same, (key, named and named[0])


# --- issue 45: compile refusals analysed into what the learner wrote ------------------------------

@cuda.jit
def tile_fragment_in_index(a, b, c, d):
    # a fragment's name read where t belongs: `2 * fa` is a tuple times a number
    lane = cuda.threadIdx.x
    g = lane // 4
    t = lane % 4
    fa = (tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
          tc.pack_bf16x2(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]),
          tc.pack_bf16x2(a[g, 2 * t + 8], a[g, 2 * t + 9]),
          tc.pack_bf16x2(a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9]))
    fb = (tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g]),
          tc.pack_bf16x2(b[2 * t + 8, g], b[2 * t + 9, g]))
    acc = (c[g, 2 * fa], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
    r = tc.mma_bf16(fa, fb, acc)
    d[g, 2 * t] = r[0]
    d[g, 2 * t + 1] = r[1]
    d[g + 8, 2 * t] = r[2]
    d[g + 8, 2 * t + 1] = r[3]


@cuda.jit
def tile_group_from_itself(a, b, c, d):
    # g computed from itself where lane belongs: g is read before it has a value
    lane = cuda.threadIdx.x
    g = g // 4  # noqa: F821 - the learner's slip under test
    t = lane % 4
    fa = (tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
          tc.pack_bf16x2(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]),
          tc.pack_bf16x2(a[g, 2 * t + 8], a[g, 2 * t + 9]),
          tc.pack_bf16x2(a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9]))
    fb = (tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g]),
          tc.pack_bf16x2(b[2 * t + 8, g], b[2 * t + 9, g]))
    acc = (c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
    r = tc.mma_bf16(fa, fb, acc)
    d[g, 2 * t] = r[0]
    d[g, 2 * t + 1] = r[1]
    d[g + 8, 2 * t] = r[2]
    d[g + 8, 2 * t + 1] = r[3]


@pytest.mark.parametrize("kernel, cause, phrase", [
    (tile_fragment_in_index, "tuple_for_number", "the operation mul got a tuple"),
    (tile_group_from_itself, "used_before_assigned", "g is read before any value"),
])
def test_mma_tile_compile_refusal_names_what_was_written(kernel, cause, phrase):
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_mma_tile(kernel)
    assert info.value.cause == cause, str(info.value)
    assert phrase in str(info.value)


def test_refusal_cause_reads_a_tuple_after_an_argument_with_parentheses():
    from cudacourse.check import _compile

    error = " >>> mul(Literal[int](2), UniTuple(uint32 x 4))\n"
    assert _compile.refusal_cause(error) == "tuple_for_number"
    assert _compile.refusal_cause(" >>> mul(Literal[int](2), int64)\n") == "does_not_compile"
    assert _compile.refusal_cause("NameError: Variable 'g' is not defined.") == \
        "used_before_assigned"


@cuda.jit
def tile_last_column_past_the_end(a, b, c, d):
    # issue 45 (mutants): a[g + 8, 2 * t + 10] is column 16 of a 16-column a for t = 3: those
    # lanes leave before the mma (an index outside the array), which is what is named, on
    # every run (not the mma's missing lanes, whichever thread the simulator reports first)
    lane = cuda.threadIdx.x
    g = lane // 4
    t = lane % 4
    fa = (tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
          tc.pack_bf16x2(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]),
          tc.pack_bf16x2(a[g, 2 * t + 8], a[g, 2 * t + 9]),
          tc.pack_bf16x2(a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 10]))
    fb = (tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g]),
          tc.pack_bf16x2(b[2 * t + 8, g], b[2 * t + 9, g]))
    acc = (c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
    r = tc.mma_bf16(fa, fb, acc)
    d[g, 2 * t] = r[0]
    d[g, 2 * t + 1] = r[1]
    d[g + 8, 2 * t] = r[2]
    d[g + 8, 2 * t + 1] = r[3]


def test_mma_tile_names_the_lanes_read_past_the_end_every_run():
    for _ in range(3):
        with pytest.raises(CheckFailure) as info:
            cudacourse.check.check_mma_tile(tile_last_column_past_the_end)
        assert info.value.cause == "out_of_bounds_read", str(info.value)
        assert "index 16" in str(info.value)
