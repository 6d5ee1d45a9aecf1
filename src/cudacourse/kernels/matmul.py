"""Lesson 4: matrix multiply, from one thread per output to register-blocked tiles.

Three steps, each faster for one reason:

* ``naive``: one thread per output, every operand read from global memory (``k`` reads of
  A and of B for each output: the arithmetic waits on memory);
* (the step between, 16 x 16 tiles of A and B in shared memory, is lesson 4's exercise,
  ``tiled_matmul``: the package has no copy of it);
* ``register``/``register128``: each thread computes a small grid of outputs from values
  held in registers, so each shared-memory read feeds several multiply-adds;
* ``register128x256v4``: the same 128 x 256 tiles, but each thread reads its A and B values
  from shared memory 16 bytes (4 floats) per load instead of 4 bytes.

All kernels take float32 matrices of any shape; partial tiles at the edges are padded
with zeros on load and not written back.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import math
from typing import Any

import numpy as np
from numba import cuda, float32, uint64
from numba.cuda.core import config as _numba_config

from ..runtime.arrays import (check_array, is_device_array, output_array, return_like_input,
    to_device)
from ..runtime.launch import DevicePlans, chosen


def matmul_ref(a: Any, b: Any, xp: Any = np) -> Any:
    """The reference: ``a @ b`` (float32 in, float32 out)."""
    return xp.matmul(a, b)


# --- step 1: one thread per output ------------------------------------------------------

@cuda.jit
def _matmul_naive(a, b, c):
    """c[row, col] = sum_k a[row, k] * b[k, col], one thread per output."""
    # x (threadIdx.x, the index that differs between neighbouring lanes of a warp) runs
    # along columns: a warp reads 32 neighbouring values of a row of b and writes 32
    # neighbouring values of c (coalesced), and all its lanes read the same a[row, k].
    col, row = cuda.grid(2)
    # The grid is rounded up to whole blocks: threads past the edge must not write.
    if row < c.shape[0] and col < c.shape[1]:
        acc = float32(0.0)
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


# --- step 2: shared-memory tiles --------------------------------------------------------
#
# Lesson 4's graded exercise (``tiled_matmul``): 16 x 16 tiles of A and B staged in shared
# memory, one output per thread. The package carries no copy of that answer; lesson 4 times
# the learner's own kernel beside these.

# --- step 3: register blocking ----------------------------------------------------------

def _tile_loader(a_loads: int, b_loads: int, threads: int, bk: int, bn: int):
    """The register kernels' global -> register load of one k-slice: the A tile (bm x bk)
    and the B tile (bk x bn), ``a_loads`` and ``b_loads`` elements a thread. The sizes are
    closure constants (the loops unroll); inlined into the kernel, so ``ra`` and ``rb`` stay
    in registers."""

    @cuda.jit(device=True, inline="always")
    def load_tiles(a, b, ra, rb, tid, row0, col0, k0):
        """Consecutive threads read consecutive addresses (coalesced). Outside the matrices
        it loads 0, so partial tiles add nothing."""
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

    return load_tiles


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

    load_tiles = _tile_loader(a_loads, b_loads, threads, bk, bn)

    # max_registers caps registers per thread so that more blocks fit on an SM (the
    # simulator does not take the option; it has no registers to cap).
    from ..runtime.device import is_simulator

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


# --- step 4: 16-byte shared-memory loads ------------------------------------------------
#
# Numba reads a float32 shared array 4 bytes at a time (PTX ld.shared.f32): the register
# kernels above issue one shared load per value, tm + tn of them per k, and on an H200 the
# big ones are bound by those loads. ``_load4_shared(arr, j)`` reads elements 4j .. 4j+3 of
# a 1-D float32 *shared* array with one 16-byte load (PTX ld.shared.v4.f32), like CUDA C's
# ``float4``. The array must start on 16 bytes (``cuda.shared.array(..., alignment=16)``);
# taking a group index j, not an element index, keeps every load on a multiple of 4 floats.
# Passing it a global or local array is undefined behaviour (the address is cast to the
# shared space). The simulator runs the plain-Python version (and refuses ``alignment=``).

_SIM = _numba_config.ENABLE_CUDASIM
_SHARED_ALIGN = None if _SIM else 16  # bytes; the simulator has no alignment option

if _SIM:
    def _load4_shared(arr, j):
        """Elements 4j .. 4j+3 of the shared array ``arr``."""
        return arr[4 * j], arr[4 * j + 1], arr[4 * j + 2], arr[4 * j + 3]
else:
    from llvmlite import ir as _ir
    from numba.cuda import types as _types
    from numba.cuda.core.errors import TypingError as _TypingError
    from numba.cuda.extending import intrinsic as _intrinsic

    _F32X4 = _ir.VectorType(_ir.FloatType(), 4)
    _ADDRSPACE_SHARED = 3  # NVVM's address space for __shared__

    @_intrinsic
    def _load4_shared(typingctx, arr, j):
        if not (isinstance(arr, _types.Array) and arr.ndim == 1
                and arr.dtype == _types.float32 and arr.layout == "C"):
            raise _TypingError(f"16-byte shared loads need a contiguous 1-D float32 shared "
                               f"array, got {arr}")
        if not isinstance(j, _types.Integer):
            raise _TypingError(f"16-byte shared loads need an integer group index, got {j}")
        sig = _types.UniTuple(_types.float32, 4)(arr, j)

        def codegen(context, builder, sig, args):
            arrty, jty = sig.args
            data = context.make_array(arrty)(context, builder, value=args[0]).data
            jj = context.cast(builder, args[1], jty, _types.intp)
            ptr = builder.gep(data, [builder.mul(jj, _ir.Constant(jj.type, 4))])
            ptr = builder.bitcast(ptr, _F32X4.as_pointer())
            # Numba's shared arrays are generic pointers to an addrspace(3) global; casting
            # back lets NVVM emit ld.shared (not a generic ld) whatever it can prove.
            sptr = builder.addrspacecast(ptr, _F32X4.as_pointer(_ADDRSPACE_SHARED))
            vec = builder.load(sptr, align=16)
            vals = [builder.extract_element(vec, _ir.Constant(_ir.IntType(32), q))
                    for q in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)

        return sig, codegen


# ``_load4_global(arr, r, g)`` reads elements 4g .. 4g+3 of row r of a C-contiguous 2-D
# float32 *global* array with one 16-byte load (PTX ld.global.v4.f32, CUDA C's float4). The
# row length and the array's start must be multiples of 16 bytes (``vector_loads_ok`` checks
# both on the host); elsewhere it is undefined behaviour.

if _SIM:
    def _load4_global(arr, r, g):
        """Elements 4g .. 4g+3 of row r of the global array ``arr``."""
        return arr[r, 4 * g], arr[r, 4 * g + 1], arr[r, 4 * g + 2], arr[r, 4 * g + 3]
else:
    _ADDRSPACE_GLOBAL = 1

    @_intrinsic
    def _load4_global(typingctx, arr, r, g):
        if not (isinstance(arr, _types.Array) and arr.ndim == 2
                and arr.dtype == _types.float32 and arr.layout == "C"):
            raise _TypingError(f"16-byte global loads need a C-contiguous 2-D float32 array, "
                               f"got {arr}")
        if not (isinstance(r, _types.Integer) and isinstance(g, _types.Integer)):
            raise _TypingError(f"16-byte global loads need integer indices, got {r}, {g}")
        sig = _types.UniTuple(_types.float32, 4)(arr, r, g)

        def codegen(context, builder, sig, args):
            arrty, rty, gty = sig.args
            ary = context.make_array(arrty)(context, builder, value=args[0])
            rr = context.cast(builder, args[1], rty, _types.intp)
            gg = context.cast(builder, args[2], gty, _types.intp)
            ncols = builder.extract_value(ary.shape, 1)
            four = _ir.Constant(rr.type, 4)
            elem = builder.add(builder.mul(rr, ncols), builder.mul(gg, four))
            ptr = builder.bitcast(builder.gep(ary.data, [elem]), _F32X4.as_pointer())
            gptr = builder.addrspacecast(ptr, _F32X4.as_pointer(_ADDRSPACE_GLOBAL))
            vec = builder.load(gptr, align=16)
            vals = [builder.extract_element(vec, _ir.Constant(_ir.IntType(32), q))
                    for q in range(4)]
            return context.make_tuple(builder, sig.return_type, vals)

        return sig, codegen


def vector_loads_ok(arr: Any) -> bool:
    """Whether ``_load4_global`` may read ``arr``: a C-contiguous float32 device array whose
    start and row length are multiples of 16 bytes."""
    cai = getattr(arr, "__cuda_array_interface__", None)
    if cai is None or len(cai["shape"]) != 2:
        return False
    ptr = cai["data"][0]
    rows, cols = cai["shape"]
    strides = cai.get("strides")
    contiguous = strides is None or tuple(strides) == (4 * cols, 4)
    return contiguous and ptr % 16 == 0 and cols % 4 == 0


def _make_register_v4_kernel(bm: int, bn: int, bk: int, tm: int, tn: int, warp_rows: int = 4,
                             max_registers: int | None = None, double_buffer: bool = False,
                             global_v4: bool = False):
    """Like ``_make_register_kernel`` (with prefetch), but each thread reads its A and B
    slices from shared memory 16 bytes at a time.

    A thread owns tm rows in groups of 4 consecutive rows (4*ty .. 4*ty+3, then the same
    ty_n*4 rows further on, ...) and tn columns in groups of 4 (4*tx .. 4*tx+3, then tx_n*4
    columns further on, ...), so each group is one aligned 16-byte load: tm/4 + tn/4 shared
    loads per k instead of tm + tn. A is stored transposed (sa[kk, r]) so a thread's rows of
    one k are contiguous too; both shared arrays are flat, 16-byte aligned, and their row
    lengths are multiples of 4 floats.

    The 32 threads of a warp cover ``warp_rows`` x (32 / warp_rows) positions of the thread
    grid: with 4 x 8 a warp's B loads touch 8 distinct 16-byte words (128 contiguous bytes)
    and its A loads 4 (broadcast to the 8 threads sharing a row group).

    ``double_buffer``: two shared copies of each tile, so that the next tile is stored while
    other threads still read this one: one barrier per k-slice instead of two.

    ``global_v4``: the tiles come from global memory 16 bytes per load (``_load4_global``)
    and without bounds checks: for matrices whose sizes are multiples of the tile (bm, bn,
    bk) and which ``vector_loads_ok`` accepts; ``matmul`` falls back to the checked kernel
    otherwise. A thread then issues a_loads / 4 + b_loads / 4 global loads per k-slice, not
    a_loads + b_loads, each without its two compares.
    """
    assert tm % 4 == 0 and tn % 4 == 0, "outputs per thread must be groups of 4"
    tx_n = bn // tn
    ty_n = bm // tm
    threads = tx_n * ty_n
    warp_cols = 32 // warp_rows
    assert threads % 32 == 0 and warp_rows * warp_cols == 32
    assert ty_n % warp_rows == 0 and tx_n % warp_cols == 0
    warps_x = tx_n // warp_cols  # warps along a row of the thread grid
    # A transposed; 4 spare columns spread its column-wise writes over all banks and keep
    # every row a multiple of 16 bytes long.
    sa_cols = bm + 4
    sa_groups = sa_cols // 4  # 16-byte groups per row of sa
    sb_groups = bn // 4
    sa_size = bk * sa_cols  # closure constants: shared array sizes must be literals
    sb_size = bk * bn
    nbuf = 2 if double_buffer else 1
    sa_alloc = nbuf * sa_size
    sb_alloc = nbuf * sb_size
    sa_gsize = sa_size // 4  # one buffer, in 16-byte groups
    sb_gsize = sb_size // 4
    a_loads = bm * bk // threads
    b_loads = bk * bn // threads
    assert a_loads * threads == bm * bk and b_loads * threads == bk * bn
    ga_n = tm // 4  # row groups per thread
    gb_n = tn // 4  # column groups per thread

    if global_v4:
        assert bk % 4 == 0 and a_loads % 4 == 0 and b_loads % 4 == 0
        bkg = bk // 4  # 16-byte groups per row of the A tile
        bng = bn // 4  # ... and of the B tile
        a_vl = a_loads // 4
        b_vl = b_loads // 4

        @cuda.jit(device=True, inline="always")
        def load_tiles(a, b, ra, rb, tid, row0, col0, k0):
            """Interior tiles only: 16-byte loads, consecutive threads on consecutive
            groups; ra[4q + i] is A[row0 + e // bkg, k0 + 4 (e % bkg) + i], rb[4q + i] is
            element 4e + i of the B tile (e = tid + q * threads)."""
            for q in range(a_vl):
                e = tid + q * threads
                ra[4 * q], ra[4 * q + 1], ra[4 * q + 2], ra[4 * q + 3] = _load4_global(
                    a, row0 + e // bkg, k0 // 4 + e % bkg)
            for q in range(b_vl):
                e = tid + q * threads
                rb[4 * q], rb[4 * q + 1], rb[4 * q + 2], rb[4 * q + 3] = _load4_global(
                    b, k0 + e // bng, col0 // 4 + e % bng)

        @cuda.jit(device=True, inline="always")
        def store_tiles(sa, sb, ra, rb, tid, abase, bbase):
            """Registers -> shared memory, A transposed (sa[kk, r])."""
            for q in range(a_vl):
                e = tid + q * threads
                r = e // bkg
                kk = 4 * (e % bkg)
                for i in range(4):
                    sa[abase + (kk + i) * sa_cols + r] = ra[4 * q + i]
            for q in range(b_vl):
                e = tid + q * threads
                for i in range(4):
                    sb[bbase + 4 * e + i] = rb[4 * q + i]
    else:
        load_tiles = _tile_loader(a_loads, b_loads, threads, bk, bn)

        @cuda.jit(device=True, inline="always")
        def store_tiles(sa, sb, ra, rb, tid, abase, bbase):
            """Registers -> shared memory, A transposed (sa[kk, r])."""
            for q in range(a_loads):
                e = tid + q * threads
                sa[abase + (e % bk) * sa_cols + e // bk] = ra[q]
            for q in range(b_loads):
                sb[bbase + tid + q * threads] = rb[q]  # sb[kk, cc] at kk * bn + cc

    opts = {"max_registers": max_registers} if max_registers and not _SIM else {}

    @cuda.jit(fastmath=True, **opts)
    def kernel(a, b, c):
        """c tile = A row panel @ B column panel, 16-byte shared loads."""
        sa = cuda.shared.array(sa_alloc, float32, alignment=_SHARED_ALIGN)
        sb = cuda.shared.array(sb_alloc, float32, alignment=_SHARED_ALIGN)
        acc = cuda.local.array((tm, tn), float32)
        fa = cuda.local.array(tm, float32)
        fb = cuda.local.array(tn, float32)
        ra = cuda.local.array(a_loads, float32)
        rb = cuda.local.array(b_loads, float32)
        tid = cuda.threadIdx.y * tx_n + cuda.threadIdx.x
        # Where this thread sits in the ty_n x tx_n thread grid: warp by warp, each warp a
        # warp_rows x warp_cols patch (the launch shape only fixes how many threads run).
        warp = tid // 32
        lane = tid % 32
        ty = (warp // warps_x) * warp_rows + lane // warp_cols
        tx = (warp % warps_x) * warp_cols + lane % warp_cols
        m, k = a.shape
        n = b.shape[1]
        row0 = cuda.blockIdx.y * bm
        col0 = cuda.blockIdx.x * bn
        for i in range(tm):
            for j in range(tn):
                acc[i, j] = float32(0.0)

        load_tiles(a, b, ra, rb, tid, row0, col0, 0)
        if double_buffer:
            store_tiles(sa, sb, ra, rb, tid, 0, 0)
            cuda.syncthreads()
        for k0 in range(0, k, bk):
            cur = (k0 // bk) % nbuf
            if not double_buffer:
                store_tiles(sa, sb, ra, rb, tid, 0, 0)
                cuda.syncthreads()
            if not global_v4 or k0 + bk < k:  # (vector loads: nothing is read past the end)
                load_tiles(a, b, ra, rb, tid, row0, col0, k0 + bk)  # arrives during the math
            for kk in range(bk):
                ga = cur * sa_gsize + kk * sa_groups + ty
                gb = cur * sb_gsize + kk * sb_groups + tx
                for g in range(ga_n):
                    fa[4 * g], fa[4 * g + 1], fa[4 * g + 2], fa[4 * g + 3] = \
                        _load4_shared(sa, ga + g * ty_n)
                for g in range(gb_n):
                    fb[4 * g], fb[4 * g + 1], fb[4 * g + 2], fb[4 * g + 3] = \
                        _load4_shared(sb, gb + g * tx_n)
                for i in range(tm):
                    for j in range(tn):
                        acc[i, j] += fa[i] * fb[j]
            if double_buffer and k0 + bk < k:  # the other buffer: read by no one now
                store_tiles(sa, sb, ra, rb, tid, (1 - cur) * sa_size, (1 - cur) * sb_size)
            cuda.syncthreads()

        for i in range(tm):
            r = row0 + 4 * (ty + (i // 4) * ty_n) + i % 4
            for j in range(tn):
                cc = col0 + 4 * (tx + (j // 4) * tx_n) + j % 4
                if r < m and cc < n:
                    c[r, cc] = acc[i, j]

    kernel.tile = (bm, bn)
    kernel.bk = bk
    kernel.block = (tx_n, ty_n)
    kernel.global_v4 = global_v4
    return kernel


# name -> (block tile rows, cols, k-slice, outputs per thread rows, cols, warp rows,
#          max registers per thread[, double buffer]): kernels with 16-byte shared loads.
# Tried on the H200, 2026-12-01 (`python3 tools/probe_attention.py`, which sweeps these tiles
# too: docs/sweeps/probe_attention_h200_2026-12-01_run*.json), none
# faster than register128x256v4 (30.5 TFLOP/s in that sweep): 256 x 128 tiles 30.4-31.0;
# double-buffered shared tiles (one barrier per k-slice) 28.5; k-slices of 16, 22-26;
# 168 registers at most, 11 (spills). Its 238 registers x 256 threads allow one block per SM
# (8 warps), and a block waits at each barrier: what keeps it near 0.6 of cuBLAS.
REGISTER_V4_CONFIGS = {
    "register128x256v4": (128, 256, 8, 8, 16, 4, None),
}
# Candidates of issue 35 (not in MATMUL_VARIANTS until one is measured faster): 16-byte
# global loads without bounds checks for interior tiles ("g"), and 128 x 128 tiles capped at
# 128 registers (two blocks per SM). Correct in the simulator (tests/test_matmul.py); the GPU
# probe of 2026-12-02 (docs/sweeps/probe_issue35_h200_2026-12-02.json) ran out of its budget
# before it reached them: not yet timed on the H200.
CANDIDATE_V4_CONFIGS = {
    "register128x256v4g": (128, 256, 8, 8, 16, 4, None, False, True),
    "register128x256v4w8g": (128, 256, 8, 8, 16, 8, None, False, True),
    "register256x128v4g": (256, 128, 8, 16, 8, 4, None, False, True),
    "register128v4r128g": (128, 128, 8, 8, 8, 4, 128, False, True),
    "register128v4k16r128g": (128, 128, 16, 8, 8, 4, 128, False, True),
    "register128v4r128": (128, 128, 8, 8, 8, 4, 128),
    "register128x256v4w8": (128, 256, 8, 8, 16, 8, None),
    "register256x128v4": (256, 128, 8, 16, 8, 4, None),
    "register128v4k16r128": (128, 128, 16, 8, 8, 4, 128),
    "register128x256v4dbg": (128, 256, 8, 8, 16, 4, None, True, True),
    "register128x256v4db": (128, 256, 8, 8, 16, 4, None, True),
    "register128x256v4k16g": (128, 256, 16, 8, 16, 4, None, False, True),
    "register128x256v4k16": (128, 256, 16, 8, 16, 4, None),
}


_register_kernels: dict[str, Any] = {}


def _checked_twin(variant: str) -> str:
    """The variant with the same tiles whose loads check the matrix edges (its name without
    the trailing "g")."""
    twin = variant[:-1]
    def tiles(cfg: tuple) -> tuple:  # (..., max_registers, double_buffer), defaults filled
        return (tuple(cfg) + (None, False, False)[len(cfg) - 6:])[:8]

    same = _v4_config(twin) is not None and tiles(_v4_config(twin)) == tiles(_v4_config(variant))
    assert variant.endswith("g") and same, f"{variant} has no checked twin"
    return twin


def _v4_config(variant: str) -> tuple | None:
    return REGISTER_V4_CONFIGS.get(variant) or CANDIDATE_V4_CONFIGS.get(variant)


def _vector_tiles_fit(kernel: Any, da: Any, db: Any) -> bool:
    """Whether ``kernel``'s unchecked 16-byte tile loads stay inside a and b."""
    (m, k), n = da.shape, db.shape[1]
    bm, bn = kernel.tile
    return (m % bm == 0 and n % bn == 0 and k % kernel.bk == 0 and vector_loads_ok(da)
            and vector_loads_ok(db))


def _register_kernel(variant: str):
    if variant not in _register_kernels:
        if _v4_config(variant):
            _register_kernels[variant] = _make_register_v4_kernel(*_v4_config(variant))
        else:
            _register_kernels[variant] = _make_register_kernel(*REGISTER_CONFIGS[variant])
    return _register_kernels[variant]


MATMUL_VARIANTS = ("naive", "register", "register128", "register128x256",
                   "register128x256v4")
# Fastest correct variant on an NVIDIA H200, 2026-11-30 (`cudacourse bench --only matmul`, then
# `cudacourse bench`): 30.8 TFLOP/s, 0.598 of cuBLAS SGEMM measured in the same run; the
# same tiles with 4-byte shared loads (register128x256) reached 0.56. Again 30.8 TFLOP/s,
# 0.60 of cuBLAS and of torch.matmul (both 51.4), on 2026-12-01.
BEST = "register128x256v4"
BEST = chosen("matmul", BEST)  # a GPU sweep's winner, for one bench run (launch.chosen)
if BEST not in MATMUL_VARIANTS:  # a candidate chosen by that sweep
    MATMUL_VARIANTS = MATMUL_VARIANTS + (BEST,)


def flops(m: int, k: int, n: int) -> int:
    """Floating-point operations of an (m,k) x (k,n) product: one multiply and one add each."""
    return 2 * m * k * n


def launch_config(m: int, n: int, variant: str) -> tuple[tuple, tuple]:
    """(grid, block) for an m x n output."""
    if variant == "naive":  # x along columns, as in the kernel
        return (math.ceil(n / 16), math.ceil(m / 16)), (16, 16)
    kern = _register_kernel(variant)
    bm, bn = kern.tile
    return (math.ceil(n / bn), math.ceil(m / bm)), kern.block


def matmul(a: Any, b: Any, out: Any = None, variant: str = "best") -> Any:
    """``a @ b`` for float32 matrices of any shape, on the GPU.

    Host inputs give a host result; device inputs (Numba, CuPy) give a device array.
    ``out`` may be a preallocated (m, n) device array, to keep allocation out of timings.
    """
    if out is not None and _PLANS.run(variant, a, b, out):  # device arrays seen before
        return out
    variant_asked = variant
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
    dout = output_array(out, (m, n))
    if m and n:
        if k == 0:
            dout.copy_to_device(np.zeros((m, n), np.float32))  # an empty sum
        else:
            grid, block = launch_config(m, n, variant)
            kernel = _matmul_naive if variant == "naive" else _register_kernel(variant)
            if getattr(kernel, "global_v4", False) and not _vector_tiles_fit(kernel, da, db):
                kernel = _register_kernel(_checked_twin(variant))  # edges or misaligned
            kernel[grid, block](da, db, dout)
            if not on_host and out is not None and is_device_array(out):
                _PLANS.remember(variant_asked, (a, b, out),
                                [(kernel, grid, block, (da, db, dout), (0, 1, 2))])
    return return_like_input(dout, out, on_host)


_PLANS = DevicePlans()  # launches worked out for device arrays, reused while they look alike
