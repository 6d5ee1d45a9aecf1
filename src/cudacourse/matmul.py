"""Lesson 4: matrix multiply, from one thread per output to register-blocked tiles.

Three steps, each faster for one reason:

* ``naive``: one thread per output, every operand read from global memory (``k`` reads of
  A and of B for each output: the arithmetic waits on memory);
* ``tiled``: a block stages TILE x TILE tiles of A and B in shared memory, so each global
  element is read ``n / TILE`` times instead of ``n`` times;
* ``register``/``register128``: each thread computes a small grid of outputs from values
  held in registers, so each shared-memory read feeds several multiply-adds.

All kernels take float32 matrices of any shape; partial tiles at the edges are padded
with zeros on load and not written back.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda, float32, uint64

from .arrays import check_array, is_device_array, to_device


def matmul_ref(a: Any, b: Any, xp: Any = np) -> Any:
    """The reference: ``a @ b`` (float32 in, float32 out)."""
    return xp.matmul(a, b)


# --- step 1: one thread per output ------------------------------------------------------

@cuda.jit
def _matmul_naive(a, b, c):
    """c[row, col] = sum_k a[row, k] * b[k, col], one thread per output."""
    row, col = cuda.grid(2)
    # The grid is rounded up to whole blocks: threads past the edge must not write.
    if row < c.shape[0] and col < c.shape[1]:
        acc = float32(0.0)
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


# --- step 2: shared-memory tiles --------------------------------------------------------

TILE = 16


@cuda.jit
def _matmul_tiled(a, b, c):
    """Each block computes a TILE x TILE tile of c from TILE x TILE tiles in shared memory."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    m, k = a.shape
    n = b.shape[1]
    acc = float32(0.0)
    for t in range(0, k, TILE):
        # Every thread loads one element of each tile; outside the matrix it loads 0 so
        # that the partial tiles at the edges add nothing.
        sa[ty, tx] = a[row, t + tx] if row < m and t + tx < k else float32(0.0)
        sb[ty, tx] = b[t + ty, col] if t + ty < k and col < n else float32(0.0)
        # Wait until the whole tile is loaded: the loop below reads other threads' loads.
        cuda.syncthreads()
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        # Wait until everyone is done with this tile before the next loads overwrite it.
        cuda.syncthreads()
    if row < m and col < n:
        c[row, col] = acc


# --- step 3: register blocking ----------------------------------------------------------

def _make_register_kernel(bm: int, bn: int, bk: int, tm: int, tn: int, prefetch: bool = True,
                          max_registers: int | None = None):
    """A kernel where a block of (bm/tm)*(bn/tn) threads computes a bm x bn tile of c and
    each thread a tm x tn grid of outputs, ``bk`` columns of A at a time.

    The sizes are closure constants, so Numba sees fixed trip counts and unrolls the inner
    loops completely: the tm x tn accumulators then live in registers, not local memory.
    A thread owns rows ty, ty + ty_n, ty + 2*ty_n, ... and columns tx, tx + tx_n, ...
    """
    tx_n = bn // tn  # threads along a row of the tile
    ty_n = bm // tm
    threads = tx_n * ty_n
    # A is stored transposed; 4 spare columns spread its column-wise writes over all banks.
    sa_cols = bm + 4
    a_loads = bm * bk // threads  # elements of the A tile each thread loads
    b_loads = bk * bn // threads
    assert a_loads * threads == bm * bk and b_loads * threads == bk * bn

    @cuda.jit(device=True, inline="always")
    def load_tiles(a, b, ra, rb, tid, row0, col0, k0):
        """Global -> registers: consecutive threads read consecutive addresses (coalesced).
        Outside the matrices it loads 0, so partial tiles add nothing."""
        m, k = a.shape
        n = b.shape[1]
        for q in range(a_loads):
            e = tid + q * threads
            r = row0 + e // bk
            kk = k0 + e % bk
            ra[q] = a[r, kk] if r < m and kk < k else float32(0.0)
        for q in range(b_loads):
            e = tid + q * threads
            kk = k0 + e // bn
            cc = col0 + e % bn
            rb[q] = b[kk, cc] if kk < k and cc < n else float32(0.0)

    # max_registers caps registers per thread so that more blocks fit on an SM (the
    # simulator does not take the option; it has no registers to cap).
    from .device import is_simulator

    opts = {"max_registers": max_registers} if max_registers and not is_simulator() else {}

    @cuda.jit(fastmath=True, **opts)
    def kernel(a, b, c):
        """c tile = A row panel @ B column panel, tm x tn outputs per thread."""
        # A is stored transposed (sa[kk, r]) so a thread's tm values of one k are a row.
        sa = cuda.shared.array((bk, sa_cols), float32)
        sb = cuda.shared.array((bk, bn), float32)
        acc = cuda.local.array((tm, tn), float32)
        fa = cuda.local.array(tm, float32)
        fb = cuda.local.array(tn, float32)
        ra = cuda.local.array(a_loads, float32)
        rb = cuda.local.array(b_loads, float32)
        # A 2D block of threads; tid numbers them 0..threads-1 for the cooperative loads.
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        tid = ty * tx_n + tx
        ux = uint64(tx)
        uy = uint64(ty)
        m, k = a.shape
        n = b.shape[1]
        row0 = cuda.blockIdx.y * bm
        col0 = cuda.blockIdx.x * bn
        for i in range(tm):
            for j in range(tn):
                acc[i, j] = float32(0.0)

        load_tiles(a, b, ra, rb, tid, row0, col0, 0)
        for k0 in range(0, k, bk):
            # Registers -> shared memory (A transposed).
            for q in range(a_loads):
                e = tid + q * threads
                sa[e % bk, e // bk] = ra[q]
            for q in range(b_loads):
                e = tid + q * threads
                sb[e // bn, e % bn] = rb[q]
            # Wait until the whole tile is in shared memory before anyone reads it.
            cuda.syncthreads()
            if prefetch:
                # Start the next tiles' global loads now: they arrive during the math below.
                load_tiles(a, b, ra, rb, tid, row0, col0, k0 + bk)
            for kk in range(bk):
                # Each value read from shared memory feeds tn (or tm) multiply-adds.
                # A warp reads consecutive words of sb (no bank conflicts) and two distinct
                # words of sa (a broadcast).
                # Unsigned indices: Numba then skips its negative-index (wraparound) fix-up,
                # and each read becomes one load at a fixed offset.
                ku = uint64(kk)
                for i in range(tm):
                    fa[i] = sa[ku, uy + uint64(i * ty_n)]
                for j in range(tn):
                    fb[j] = sb[ku, ux + uint64(j * tx_n)]
                for i in range(tm):
                    for j in range(tn):
                        acc[i, j] += fa[i] * fb[j]
            # Everyone must finish reading this tile before the next one overwrites it.
            cuda.syncthreads()
            if not prefetch:
                load_tiles(a, b, ra, rb, tid, row0, col0, k0 + bk)

        for i in range(tm):
            r = row0 + ty + i * ty_n
            for j in range(tn):
                cc = col0 + tx + j * tx_n
                # Partial tiles at the bottom and right edges: write only inside c.
                if r < m and cc < n:
                    c[r, cc] = acc[i, j]

    kernel.tile = (bm, bn)
    kernel.block = (tx_n, ty_n)
    return kernel


# name -> (block tile rows, cols, k-slice, outputs per thread rows, cols, prefetch,
#          max registers per thread). Measured on an NVIDIA H200 (2026-11-30, 4096^3,
#          tools/probe_tiling.py): 17.1, 25.1 and 28.0 TFLOP/s; cuBLAS 50.2.
REGISTER_CONFIGS = {
    "register": (64, 64, 8, 4, 4, False, None),
    "register128": (128, 128, 8, 8, 8, True, 128),  # 128 registers: 2 blocks per SM
    "register128x256": (128, 256, 8, 8, 16, True, None),  # 128 outputs per thread
}
_register_kernels: dict[str, Any] = {}


def _register_kernel(variant: str):
    if variant not in _register_kernels:
        _register_kernels[variant] = _make_register_kernel(*REGISTER_CONFIGS[variant])
    return _register_kernels[variant]


MATMUL_VARIANTS = ("naive", "tiled", "register", "register128", "register128x256")
BEST = "register128x256"  # fastest on an NVIDIA H200 (tools/probe_tiling.py, 2026-11-30)


def flops(m: int, k: int, n: int) -> int:
    """Floating-point operations of an (m,k) x (k,n) product: one multiply and one add each."""
    return 2 * m * k * n


def launch_config(m: int, n: int, variant: str) -> tuple[tuple, tuple]:
    """(grid, block) for an m x n output."""
    if variant == "naive":
        return (math.ceil(m / 16), math.ceil(n / 16)), (16, 16)
    if variant == "tiled":
        # x runs along columns (coalesced), y along rows.
        return (math.ceil(n / TILE), math.ceil(m / TILE)), (TILE, TILE)
    kern = _register_kernel(variant)
    bm, bn = kern.tile
    return (math.ceil(n / bn), math.ceil(m / bm)), kern.block


def matmul(a: Any, b: Any, out: Any = None, variant: str = "best") -> Any:
    """``a @ b`` for float32 matrices of any shape, on the GPU.

    Host inputs give a host result; device inputs (Numba, CuPy) give a device array.
    ``out`` may be a preallocated (m, n) device array, to keep allocation out of timings.
    """
    if variant == "best":
        variant = BEST
    if variant not in MATMUL_VARIANTS:
        raise ValueError(f"variant must be 'best' or one of {MATMUL_VARIANTS}, got {variant!r}")
    check_array(a, "a", ndim=2)
    check_array(b, "b", ndim=2)
    m, k = a.shape
    if b.shape[0] != k:
        raise ValueError(f"shape mismatch: a {tuple(a.shape)} @ b {tuple(b.shape)} needs "
                         f"b to have {k} rows")
    n = b.shape[1]
    on_host = not (is_device_array(a) and is_device_array(b))
    da, db = to_device(a), to_device(b)
    if out is None:
        dout = cuda.device_array((m, n), dtype=np.float32)
    else:
        check_array(out, "out", ndim=2)
        if tuple(out.shape) != (m, n):
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {(m, n)}")
        dout = to_device(out)
    if m and n:
        if k == 0:
            dout.copy_to_device(np.zeros((m, n), np.float32))  # an empty sum
        else:
            grid, block = launch_config(m, n, variant)
            kernel = {"naive": _matmul_naive, "tiled": _matmul_tiled}.get(variant)
            if kernel is None:
                kernel = _register_kernel(variant)
            kernel[grid, block](da, db, dout)
    if on_host:
        result = dout.copy_to_host()
        if isinstance(out, np.ndarray):
            out[...] = result
            return out
        return result
    return dout
