"""Catalogue of right and wrong answers to lesson 4's exercises, and what the checkers say.

Every wrong kernel must be rejected with a diagnosis naming its mistake; every right one
(including a grid-stride loop) must pass. Race-dependent cases run in the simulator, where
threads interleave and shared memory starts poisoned during a check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda, float32

import cudacourse.check
from cudacourse.check import tiling as T

pytestmark = pytest.mark.lesson4

TILE = T.TILE
TPB = T.TPB
WARPS = TPB // 32  # a shared array's size must be a constant the compiler sees


# --- tiled matmul: right answers ---------------------------------------------------------

@cuda.jit
def mm_right(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(0, a.shape[1], TILE):
        sa[ty, tx] = a[row, t + tx] if row < a.shape[0] and t + tx < a.shape[1] else 0.0
        sb[ty, tx] = b[t + ty, col] if t + ty < b.shape[0] and col < b.shape[1] else 0.0
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@cuda.jit
def mm_right_grid_stride(a, b, c):
    """Walks over output tiles in steps of the grid: works for any grid size."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    m, k = a.shape
    n = b.shape[1]
    for by in range(cuda.blockIdx.y, (m + TILE - 1) // TILE, cuda.gridDim.y):
        for bx in range(cuda.blockIdx.x, (n + TILE - 1) // TILE, cuda.gridDim.x):
            row = by * TILE + ty
            col = bx * TILE + tx
            acc = float32(0.0)
            for t in range((k + TILE - 1) // TILE):
                kk = t * TILE
                sa[ty, tx] = a[row, kk + tx] if row < m and kk + tx < k else 0.0
                sb[ty, tx] = b[kk + ty, col] if kk + ty < k and col < n else 0.0
                cuda.syncthreads()
                for i in range(TILE):
                    acc += sa[ty, i] * sb[i, tx]
                cuda.syncthreads()
            if row < m and col < n:
                c[row, col] = acc


# --- tiled matmul: wrong answers ---------------------------------------------------------

@cuda.jit
def mm_naive(a, b, c):
    row, col = cuda.grid(2)[1], cuda.grid(2)[0]
    if row < c.shape[0] and col < c.shape[1]:
        acc = float32(0.0)
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


@cuda.jit
def mm_naive_through_transpose(a, b, c):
    # no shared memory, reading through views (.T, a row): the reads are still reads of a, b
    row, col = cuda.grid(2)[1], cuda.grid(2)[0]
    bt = b.T
    if row < c.shape[0] and col < c.shape[1]:
        ar = a[row]
        acc = float32(0.0)
        for k in range(a.shape[1]):
            acc += ar[k] * bt[col, k]
        c[row, col] = acc


@cuda.jit
def mm_no_first_barrier(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(0, a.shape[1], TILE):
        sa[ty, tx] = a[row, t + tx] if row < a.shape[0] and t + tx < a.shape[1] else 0.0
        sb[ty, tx] = b[t + ty, col] if t + ty < b.shape[0] and col < b.shape[1] else 0.0
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@cuda.jit
def mm_no_second_barrier(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(0, a.shape[1], TILE):
        sa[ty, tx] = a[row, t + tx] if row < a.shape[0] and t + tx < a.shape[1] else 0.0
        sb[ty, tx] = b[t + ty, col] if t + ty < b.shape[0] and col < b.shape[1] else 0.0
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@cuda.jit
def mm_multiples_only(a, b, c):
    """No edge handling: loads past the edges of a and b."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(0, a.shape[1], TILE):
        sa[ty, tx] = a[row, t + tx]
        sb[ty, tx] = b[t + ty, col]
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    c[row, col] = acc


@cuda.jit
def mm_skips_last_tile(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(a.shape[1] // TILE):
        kk = t * TILE
        sa[ty, tx] = a[row, kk + tx] if row < a.shape[0] else 0.0
        sb[ty, tx] = b[kk + ty, col] if col < b.shape[1] else 0.0
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@cuda.jit
def mm_unwritten(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    sa[ty, tx] = 0.0
    cuda.syncthreads()


@cuda.jit
def mm_wrong_index(a, b, c):
    """Multiplies by b[tx, i] instead of b[i, tx] (a transposed tile of b)."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(0, a.shape[1], TILE):
        sa[ty, tx] = a[row, t + tx] if row < a.shape[0] and t + tx < a.shape[1] else 0.0
        sb[ty, tx] = b[t + ty, col] if t + ty < b.shape[0] and col < b.shape[1] else 0.0
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[tx, i]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


def mm_plain_python(a, b, c):
    c[:] = a @ b


@cuda.jit
def mm_first_barrier_in_if(a, b, c):
    """Both barriers are there, but the first only for threads inside c."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(0, a.shape[1], TILE):
        sa[ty, tx] = a[row, t + tx] if row < a.shape[0] and t + tx < a.shape[1] else 0.0
        sb[ty, tx] = b[t + ty, col] if t + ty < b.shape[0] and col < b.shape[1] else 0.0
        if row < c.shape[0] and col < c.shape[1]:
            cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@cuda.jit
def mm_partial_tile_unfilled(a, b, c):
    """Past the edges of a and b the tile slots are left as they were, not set to 0.0."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    acc = float32(0.0)
    for t in range(0, a.shape[1], TILE):
        if row < a.shape[0] and t + tx < a.shape[1]:
            sa[ty, tx] = a[row, t + tx]
        if t + ty < b.shape[0] and col < b.shape[1]:
            sb[ty, tx] = b[t + ty, col]
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@cuda.jit
def mm_right_statements(a, b, c):
    """Right, written differently: tile-index loop, if/else statements, early store guard."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    col, row = cuda.grid(2)
    k = a.shape[1]
    acc = 0.0
    for tile in range((k + TILE - 1) // TILE):
        kk = tile * TILE
        if row < a.shape[0] and kk + tx < k:
            sa[ty, tx] = a[row, kk + tx]
        else:
            sa[ty, tx] = 0.0
        if kk + ty < k and col < b.shape[1]:
            sb[ty, tx] = b[kk + ty, col]
        else:
            sb[ty, tx] = 0.0
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if row >= c.shape[0] or col >= c.shape[1]:
        return
    c[row, col] = acc


@cuda.jit
def mm_accumulates_into_c(a, b, c):  # issue 45: c[row, col] += into the uninitialised output
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    m, k = a.shape
    n = b.shape[1]
    for t in range(0, k, TILE):
        sa[ty, tx] = a[row, t + tx] if row < m and t + tx < k else float32(0.0)
        sb[ty, tx] = b[t + ty, col] if t + ty < k and col < n else float32(0.0)
        cuda.syncthreads()
        for i in range(TILE):
            if row < m and col < n:
                c[row, col] += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()


MM_WRONG = {
    "accumulates into the uninitialised c": (mm_accumulates_into_c,
                                             "accumulate into a local variable"),
    "no shared memory": (mm_naive, "as often as a kernel without shared memory"),
    "no shared memory, read through views": (mm_naive_through_transpose,
                                             "as often as a kernel without shared memory"),
    "missing first barrier": (mm_no_first_barrier, "after loading the tiles"),
    "missing second barrier": (mm_no_second_barrier, "add the second cuda.syncthreads()"),
    "only tile multiples": (mm_multiples_only, "missing bounds guard"),
    "last partial tile skipped": (mm_skips_last_tile, "partial tile is skipped"),
    "unwritten output": (mm_unwritten, "never written"),
    "wrong arithmetic": (mm_wrong_index, "check the arithmetic"),
    "not a kernel": (mm_plain_python, "@cuda.jit"),
    "first barrier inside an if": (mm_first_barrier_in_if, "inside `if row < c.shape[0]"),
    "partial tile left unfilled": (mm_partial_tile_unfilled, "load 0.0 there"),
}


def rejects(checker, kernel, phrase: str, seed: int = 1) -> AssertionError:
    with pytest.raises(AssertionError) as info:
        checker(kernel, seed=seed)
    assert phrase.lower() in str(info.value).lower(), str(info.value)
    return info.value


@pytest.mark.parametrize("name", list(MM_WRONG))
def test_tiled_matmul_rejects(name):
    kernel, phrase = MM_WRONG[name]
    rejects(cudacourse.check.check_tiled_matmul, kernel, phrase)


@pytest.mark.parametrize("seed", [2, 3])
def test_missing_barriers_caught_repeatedly(seed):
    """The race is caught on every attempt, not once in a while: the detector sees the two
    accesses between the same barriers, whatever order the threads ran in."""
    for kernel in (mm_no_first_barrier, mm_no_second_barrier):
        err = rejects(cudacourse.check.check_tiled_matmul, kernel, "syncthreads", seed)
        assert err.cause == "missing_barrier"


def test_tiled_matmul_messages_do_not_misdirect():
    """An indexing bug is not blamed on a race; a barrier inside an `if` is not reported as
    a missing second barrier."""
    err = rejects(cudacourse.check.check_tiled_matmul, mm_wrong_index, "check the arithmetic")
    assert "or a race" not in str(err).lower()
    err = rejects(cudacourse.check.check_tiled_matmul, mm_first_barrier_in_if, "undefined")
    assert err.cause == "divergent_barrier" and "add the second" not in str(err).lower()
    err = rejects(cudacourse.check.check_tiled_matmul, mm_partial_tile_unfilled, "0.0")
    assert err.cause == "unfilled_tile" and "check the arithmetic" not in str(err)


@pytest.mark.parametrize("kernel", [mm_right, mm_right_grid_stride, mm_right_statements])
def test_tiled_matmul_accepts(kernel):
    cudacourse.check.check_tiled_matmul(kernel, seed=4)


def test_each_check_returns_one_success_line():
    lines = [cudacourse.check.check_tiled_matmul(mm_right, seed=4),
             cudacourse.check.check_block_sum(sum_right, seed=4)]
    assert [ln.split(":")[0] for ln in lines] == ["tiled_matmul passes", "block_sum passes"]
    assert "no shared-memory race" in lines[0] and "a tree in shared memory" in lines[1]


def test_tiled_matmul_hidden_accepts():
    cudacourse.check.check_tiled_matmul(mm_right, hidden=cudacourse.check.Cases(5, [(21, 40, 7, 1), (17, 20, 18, 0), (5, 50, 9, 0)]))


@pytest.mark.gpu
def test_tiled_matmul_gpu_rejects_no_shared_memory():
    """On a GPU the simulator replay counts the reads first (the same diagnosis as in the
    simulator); the GPU's own cases would say the kernel declares no shared memory."""
    with pytest.raises(AssertionError) as info:
        cudacourse.check.check_tiled_matmul(mm_naive, seed=1)
    assert info.value.cause == "no_tiles", info.value


# --- block sum: right answers --------------------------------------------------------------

@cuda.jit
def sum_right(x, partial):
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    sh[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_right_grid_stride(x, partial):
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    acc = float32(0.0)
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        acc += x[i]
    sh[t] = acc
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_right_interleaved(x, partial):
    """The other classic tree: strides 1, 2, 4, ... (slower on a GPU, but right)."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    s = 1
    while s < TPB:
        if t % (2 * s) == 0:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s *= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


# --- block sum: wrong answers ---------------------------------------------------------------

@cuda.jit
def sum_no_tree_barrier(x, partial):
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_no_load_barrier(x, partial):
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.shape[0] else 0.0
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_wrong_stride(x, partial):
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    s = TPB // 4
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_first_block_only(x, partial):
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    sh[t] = x[t] if t < x.shape[0] else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_ignores_tail(x, partial):
    """Threads past the end leave their slot as it was."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.shape[0]:
        sh[t] = x[i]
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_drops_tail(x, partial):
    """Counts only whole blocks: the tail of x is dropped."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    n_whole = x.shape[0] - x.shape[0] % TPB
    sh[t] = x[i] if i < n_whole else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_sync_in_if(x, partial):
    """The lesson's undefined behaviour: the tree's barrier only for threads t < s."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
            cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_serial_thread0(x, partial):
    """Right sums, no tree: thread 0 adds the block's slots one by one."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    if t == 0:
        acc = float32(0.0)
        for j in range(TPB):
            acc += sh[j]
        partial[cuda.blockIdx.x] = acc


@cuda.jit
def sum_serial_global(x, partial):
    """Right sums, no shared memory at all: thread 0 reads its block's elements itself."""
    if cuda.threadIdx.x == 0:
        acc = float32(0.0)
        base = cuda.blockIdx.x * TPB
        for j in range(base, min(base + TPB, x.shape[0])):
            acc += x[j]
        partial[cuda.blockIdx.x] = acc


@cuda.jit
def sum_np_sum(x, partial):
    """Right sums, no tree: thread 0 hands the whole shared array to np.sum (which compiles
    for a GPU, and runs serially in one thread there)."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    if t == 0:
        partial[cuda.blockIdx.x] = np.sum(sh)


@cuda.jit
def sum_shared_atomic(x, partial):
    """Right sums, no tree: every thread adds into slot 0 with an atomic."""
    sh = cuda.shared.array(1, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if t == 0:
        sh[0] = 0.0
    cuda.syncthreads()
    if i < x.shape[0]:
        cuda.atomic.add(sh, 0, x[i])
    cuda.syncthreads()
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_right_shuffle_tail(x, partial):
    """Right, written differently: the tree in shared memory down to one warp, then shuffles."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s >= 32:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t < 32:
        v = sh[t]
        for off in (16, 8, 4, 2, 1):
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, off)
        if t == 0:
            partial[cuda.blockIdx.x] = v


@cuda.jit
def sum_right_warps_then_warp(x, partial):
    """Right, written differently: each warp sums by shuffles, warp 0 sums the warps' sums."""
    sh = cuda.shared.array(WARPS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else float32(0.0)
    off = 16
    while off > 0:
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, off)
        off //= 2
    if t % 32 == 0:
        sh[t // 32] = v
    cuda.syncthreads()
    if t < 32:
        w = sh[t] if t < WARPS else float32(0.0)
        for o in (16, 8, 4, 2, 1):
            w += cuda.shfl_down_sync(0xFFFFFFFF, w, o)
        if t == 0:
            partial[cuda.blockIdx.x] = w


@cuda.jit
def sum_right_for_levels(x, partial):
    """Right, written differently: a for loop over the levels, strides from a shift."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    v = float32(0.0)
    if i < x.shape[0]:
        v = x[i]
    sh[t] = v
    cuda.syncthreads()
    for level in range(1, 8):
        s = TPB >> level
        if t < s:
            sh[t] = sh[t] + sh[t + s]
        cuda.syncthreads()
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_unwritten(x, partial):
    sh = cuda.shared.array(TPB, float32)
    sh[cuda.threadIdx.x] = 0.0


@cuda.jit
def sum_stores_at_thread_index(x, partial):  # issue 45: partial[i], not partial[blockIdx.x]
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    sh[t] = x[i] if i < x.shape[0] else float32(0.0)
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[i] = sh[0]


@cuda.jit
def sum_tree_from_tpb(x, partial):  # issue 45: the tree starts at s = TPB
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    sh[t] = x[i] if i < x.shape[0] else float32(0.0)
    cuda.syncthreads()
    s = TPB
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_index_without_block(x, partial):
    # issue 45 (mutants): threadIdx.x where blockIdx.x belongs in i
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.threadIdx.x * cuda.blockDim.x + t
    sh[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_block_start_b(x, partial):
    # issue 45 (mutants): blockDim.y (= 1) where blockDim.x belongs: block b starts at b
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.y + t
    sh[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_pads_with_one(x, partial):
    # issue 45 (mutants): threads past the end store 1.0, not 0.0
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    sh[t] = x[i] if i < x.shape[0] else 1.0
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


SUM_WRONG = {
    "tail padded with 1.0": (sum_pads_with_one, "stored 1 in their slot, where 0.0 belongs"),
    "i without the block": (sum_index_without_block, "every block returned the same sum"),
    "block b starts at b": (sum_block_start_b, "starting at b"),
    "stores at its own global index": (sum_stores_at_thread_index,
                                       "partial[cuda.blockIdx.x]"),
    "tree starts at s = TPB": (sum_tree_from_tpb, "starts one level too high"),
    "missing barrier in the tree": (sum_no_tree_barrier, "races on shared memory"),
    "missing barrier after loading": (sum_no_load_barrier, "races on shared memory"),
    "wrong tree stride": (sum_wrong_stride, "first half only"),
    "only the first block": (sum_first_block_only, "first block's elements"),
    "tail slots left unwritten": (sum_ignores_tail, "past the end of x must"),
    "tail dropped": (sum_drops_tail, "only the last block"),
    "unwritten output": (sum_unwritten, "never written"),
    "barrier inside if t < s": (sum_sync_in_if, "inside `if t < s:`"),
    "thread 0 adds serially": (sum_serial_thread0, "serially"),
    "thread 0 reads x serially": (sum_serial_global, "serially"),
    "thread 0 calls np.sum": (sum_np_sum, "serially"),
    "atomics into one slot": (sum_shared_atomic, "atomic additions"),
}


@pytest.mark.parametrize("name", list(SUM_WRONG))
def test_block_sum_rejects(name):
    kernel, phrase = SUM_WRONG[name]
    rejects(cudacourse.check.check_block_sum, kernel, phrase)


def test_block_sum_causes():
    causes = {k.__name__: rejects(cudacourse.check.check_block_sum, k, "").cause
              for k in (sum_sync_in_if, sum_serial_thread0, sum_no_tree_barrier,
                        sum_stores_at_thread_index)}
    assert causes == {"sum_sync_in_if": "divergent_barrier", "sum_serial_thread0": "no_tree",
                      "sum_no_tree_barrier": "missing_barrier",
                      "sum_stores_at_thread_index": "wrong_index"}
    # the misleading words of issue 45 are gone: a guard would hide these mistakes
    for k in (sum_stores_at_thread_index, sum_tree_from_tpb):
        assert "missing bounds guard" not in str(rejects(cudacourse.check.check_block_sum, k,
                                                         "")).lower()


@pytest.mark.parametrize("kernel", [sum_right, sum_right_grid_stride, sum_right_interleaved,
                                    sum_right_shuffle_tail, sum_right_for_levels,
                                    sum_right_warps_then_warp])
def test_block_sum_accepts(kernel):
    cudacourse.check.check_block_sum(kernel, seed=6)
    cudacourse.check.check_block_sum(kernel, hidden=cudacourse.check.Cases(7, [260, 1, 200]))


# --- issue 45 (mutants): a race no barrier explains, and poison with no race, are not
# blamed on a missing barrier --------------------------------------------------------------

@cuda.jit
def mm_sb_same_slot(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    m, k = a.shape
    n = b.shape[1]
    acc = float32(0.0)
    for t in range(0, k, TILE):
        sa[ty, tx] = a[row, t + tx] if row < m and t + tx < k else float32(0.0)
        sb[tx, tx] = b[t + ty, col] if t + ty < k and col < n else float32(0.0)  # tx for ty
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if row < m and col < n:
        c[row, col] = acc


@cuda.jit
def mm_sb_accumulated(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    m, k = a.shape
    n = b.shape[1]
    acc = float32(0.0)
    for t in range(0, k, TILE):
        sa[ty, tx] = a[row, t + tx] if row < m and t + tx < k else float32(0.0)
        sb[ty, tx] += b[t + ty, col] if t + ty < k and col < n else float32(0.0)  # += for =
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if row < m and col < n:
        c[row, col] = acc


@cuda.jit
def sum_reads_one_before(x, partial):
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    sh[t] = x[i] if i < x.shape[0] else float32(0.0)
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s - 1]  # one slot early: thread 0 reads what thread s - 1 writes
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_reads_twice_t(x, partial):
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    sh[t] = x[i] if i < x.shape[0] else float32(0.0)
    cuda.syncthreads()
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + t]  # t for s
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@cuda.jit
def sum_right_barrier_first(x, partial):
    # right, written differently: the level's barrier at the top of the loop body, the
    # first one after the loads doubling as it
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    sh[t] = x[i] if i < x.shape[0] else float32(0.0)
    s = TPB // 2
    while s > 0:
        cuda.syncthreads()
        if t < s:
            sh[t] += sh[t + s]
        s //= 2
    cuda.syncthreads()
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@pytest.mark.parametrize("checker, kernel, cause", [
    ("check_tiled_matmul", mm_sb_same_slot, "slot_collision"),
    ("check_tiled_matmul", mm_sb_accumulated, "unfilled_tile"),
    ("check_block_sum", sum_reads_one_before, "slot_collision"),
    ("check_block_sum", sum_reads_twice_t, "slot_collision"),
    ("check_block_sum", sum_no_tree_barrier, "missing_barrier"),  # the loop has no barrier
    ("check_tiled_matmul", mm_no_second_barrier, "missing_barrier"),
])
def test_a_race_or_poison_is_blamed_on_a_barrier_only_when_one_is_missing(checker, kernel,
                                                                          cause):
    err = rejects(getattr(cudacourse.check, checker), kernel, "")
    assert err.cause == cause, str(err)


def test_block_sum_accepts_the_barrier_at_the_top_of_the_level():
    cudacourse.check.check_block_sum(sum_right_barrier_first, seed=6)


@cuda.jit
def mm_acc_starts_at_one(a, b, c):
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    m, k = a.shape
    n = b.shape[1]
    acc = float32(1.0)  # the sum starts at 1, not 0
    for t in range(0, k, TILE):
        sa[ty, tx] = a[row, t + tx] if row < m and t + tx < k else float32(0.0)
        sb[ty, tx] = b[t + ty, col] if t + ty < k and col < n else float32(0.0)
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()
    if row < m and col < n:
        c[row, col] = acc


def test_tiled_matmul_names_a_sum_that_does_not_start_at_zero():
    err = rejects(cudacourse.check.check_tiled_matmul, mm_acc_starts_at_one, "plus 1")
    assert err.cause == "constant_offset", str(err)


# --- issue 45: the one change of the lesson's program, named from the values ------------------
# A slip that leaves every access inside its array and every slot filled (no record names it)
# still singles itself out: the lesson's program (loads, tree levels, store) with that ONE
# change gives every output. Run on the simulator and on a GPU's path (the instrumented
# build, CUDACOURSE_NATIVE=1 CUDACOURSE_PREFLIGHT=1, run by the simulator).

def _mm_slip(slip: str):
    guard_n = slip == "guard_n"  # the k guard of a's tile compares with n
    sa_sa = slip == "sa_sa"  # the product reads sa where sb belongs
    stride2 = slip == "stride2"  # the loop over tiles steps 2 * TILE
    stores_k = slip == "stores_k"  # c[row, col] = k, a size where the sum belongs

    @cuda.jit
    def mm(a, b, c):
        sa = cuda.shared.array((TILE, TILE), float32)
        sb = cuda.shared.array((TILE, TILE), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        m, k = a.shape
        n = b.shape[1]
        acc = float32(0.0)
        for t in range(0, k, 2 * TILE if stride2 else TILE):
            sa[ty, tx] = a[row, t + tx] if row < m and t + tx < (n if guard_n else k) else 0.0
            sb[ty, tx] = b[t + ty, col] if t + ty < k and col < n else 0.0
            cuda.syncthreads()
            for i in range(TILE):
                acc += sa[ty, i] * (sa[i, tx] if sa_sa else sb[i, tx])
            cuda.syncthreads()
        if row < m and col < n:
            c[row, col] = k if stores_k else acc

    return mm


@cuda.jit
def mm_right_while_tiles(a, b, c):
    """Right, written differently: a while loop over tiles, explicit if/else loads, the
    product of a tile accumulated in a local before it is added."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    x, y = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * cuda.blockDim.y + y
    q = cuda.blockIdx.x * cuda.blockDim.x + x
    total = float32(0.0)
    base = 0
    while base < a.shape[1]:
        if r < a.shape[0] and base + x < a.shape[1]:
            sa[y, x] = a[r, base + x]
        else:
            sa[y, x] = 0.0
        if base + y < b.shape[0] and q < b.shape[1]:
            sb[y, x] = b[base + y, q]
        else:
            sb[y, x] = 0.0
        cuda.syncthreads()
        part = float32(0.0)
        for i in range(TILE):
            part += sa[y, i] * sb[i, x]
        total += part
        cuda.syncthreads()
        base += TILE
    if r < c.shape[0] and q < c.shape[1]:
        c[r, q] = total


@pytest.fixture(params=["sim", "native"])
def gpu_path(request, monkeypatch):
    if request.param == "native":
        monkeypatch.setenv("CUDACOURSE_NATIVE", "1")
        monkeypatch.setenv("CUDACOURSE_PREFLIGHT", "1")
    return request.param


@pytest.mark.parametrize("slip, phrase", [
    ("guard_n", "`sa[ty, tx] = a[row, t + tx] if row < m and t + tx < n else 0.0` in place of"),
    ("sa_sa", "`acc += sa[ty, i] * sa[i, tx]` in place of `acc += sa[ty, i] * sb[i, tx]`"),
    ("stride2", "over the tiles t = 0, 32, where k = 37 takes t = 0, 16, 32"),
    ("stores_k", "`c[row, col] = k` in place of `c[row, col] = acc`"),
])
def test_tiled_matmul_names_the_one_changed_statement(slip, phrase, gpu_path):
    err = rejects(cudacourse.check.check_tiled_matmul, _mm_slip(slip), phrase)
    assert err.cause == "wrong_formula", err


def test_tiled_matmul_one_change_keeps_right_answers(gpu_path):
    cudacourse.check.check_tiled_matmul(mm_right_while_tiles, seed=4)
    cudacourse.check.check_tiled_matmul(_mm_slip(""), seed=4)


def test_a_guard_slip_two_loads_share_is_said_of_both():
    """`t + ty < m` in b's guard gives the same c as `t + tx < m` in a's: the values cannot
    tell which load it is, so the diagnosis says both, and neither alone."""
    m, k, n = 19, 37, 21
    rng = np.random.default_rng(3)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    got = a.astype(np.float64)[:, :m] @ b.astype(np.float64)[:m, :]  # k cut at m, either load
    with pytest.raises(AssertionError) as info:
        T._matmul_one_change(got, a, b, 0, {})
    text = str(info.value)
    assert "t + tx < m else 0.0` in place of" in text and "t + ty < m and col < n" in text
    assert "cannot tell which" in text, text


def _sum_slip(slip: str):
    i_for_t = slip == "i_for_t"  # `if i < s`: only block 0's threads pass
    assign = slip == "assign"  # `sh[t] = sh[t + s]`: `=` where `+=` belongs
    third = slip == "third"  # s starts at TPB // 3

    @cuda.jit
    def block_sum(x, partial):
        sh = cuda.shared.array(TPB, float32)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * cuda.blockDim.x + t
        sh[t] = x[i] if i < x.shape[0] else 0.0
        cuda.syncthreads()
        s = TPB // 3 if third else TPB // 2
        while s > 0:
            if (i if i_for_t else t) < s:
                if assign:
                    sh[t] = sh[t + s]
                else:
                    sh[t] += sh[t + s]
            cuda.syncthreads()
            s //= 2
        if t == 0:
            partial[cuda.blockIdx.x] = sh[0]

    return block_sum


@cuda.jit
def sum_right_shifts(x, partial):
    """Right, written differently: levels by shifts, the load with an explicit if/else."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    g = cuda.grid(1)
    if g < x.shape[0]:
        sh[t] = x[g]
    else:
        sh[t] = 0.0
    cuda.syncthreads()
    half = TPB >> 1
    while half >= 1:
        if t < half:
            sh[t] = sh[t] + sh[half + t]
        cuda.syncthreads()
        half >>= 1
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


@pytest.mark.parametrize("slip, phrase", [
    ("i_for_t", "`if i < s: sh[t] += sh[t + s]` in place of `if t < s: sh[t] += sh[t + s]`"),
    ("assign", "`if t < s: sh[t] = sh[t + s]` in place of `if t < s: sh[t] += sh[t + s]`"),
    ("third", "the levels s = 42, 21, 10, 5, 2, 1"),
])
def test_block_sum_names_the_one_changed_statement(slip, phrase, gpu_path):
    err = rejects(cudacourse.check.check_block_sum, _sum_slip(slip), phrase)
    assert err.cause == "wrong_formula", err


def test_block_sum_one_change_keeps_right_answers(gpu_path):
    cudacourse.check.check_block_sum(sum_right_shifts, seed=4)
    cudacourse.check.check_block_sum(_sum_slip(""), seed=4)
