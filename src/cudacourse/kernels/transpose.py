"""Lesson 4: matrix transpose, where shared memory turns strided writes into coalesced ones.

* ``naive``: each thread copies one element; reads along a row are coalesced, but the
  writes of a warp land a whole row of ``out`` apart from each other (32 transactions);
* ``tiled``: a block reads a 32 x 32 tile with coalesced reads into shared memory, then
  writes it out transposed, again coalesced; but reading a tile *column* from shared
  memory makes all 32 threads of a warp hit the same bank (a 32-way bank conflict);
* ``tiled_padded``: one spare column per tile row shifts each row by one bank, so a column
  touches 32 different banks: no conflict.

Each thread of a 32 x 8 block moves 4 elements (32 / 8), so more loads are in flight;
``tiled_padded64`` moves 64 x 64 tiles with 64 x 4 threads, 16 elements each.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, float32, uint64

from ..runtime.arrays import (check_array, is_device_array, output_array, return_like_input,
    to_device)
from ..runtime.launch import DevicePlans, KernelConfig, Variants, blocks_for, chosen


def transpose_ref(x: Any, xp: Any = np) -> Any:
    """The reference: the transpose as a new C-contiguous array."""
    return xp.ascontiguousarray(x.T)


NAIVE_BLOCK = (32, 8)


@cuda.jit
def _transpose_naive(x, out):
    """out[c, r] = x[r, c], one thread per element."""
    c, r = cuda.grid(2)  # x (fastest-varying) runs along a row of x: coalesced reads
    if r < x.shape[0] and c < x.shape[1]:
        out[c, r] = x[r, c]  # neighbouring threads write a column of out: strided writes


def _make_tiled(tile: int, rows: int, pad: int):
    """A transpose kernel for a block of tile x rows threads and a tile x tile tile
    (``pad`` spare columns in shared memory; each thread moves tile / rows elements)."""
    cols = tile + pad
    steps = tile // rows
    assert steps * rows == tile

    @cuda.jit
    def kernel(x, out):
        """Transpose one tile through shared memory: coalesced reads and writes."""
        sh = cuda.shared.array((tile, cols), float32)
        # Unsigned indices: Numba skips its negative-index fix-up (fewer instructions).
        tx = uint64(cuda.threadIdx.x)
        ty = uint64(cuda.threadIdx.y)
        m = uint64(x.shape[0])
        n = uint64(x.shape[1])
        r0 = uint64(cuda.blockIdx.y) * uint64(tile)
        c0 = uint64(cuda.blockIdx.x) * uint64(tile)
        # Read rows of the tile: a warp reads 32 consecutive elements of one row of x.
        for j in range(steps):
            r = r0 + ty + uint64(j * rows)
            c = c0 + tx
            if r < m and c < n:
                sh[ty + uint64(j * rows), tx] = x[r, c]
        # Wait until the whole tile is in shared memory: we now read other threads' loads.
        cuda.syncthreads()
        # Write rows of out (= columns of the tile): a warp writes 32 consecutive elements.
        # It reads a column of sh: without padding, those 32 words sit in one bank.
        for j in range(steps):
            r = c0 + ty + uint64(j * rows)  # row of out
            c = r0 + tx  # column of out
            if r < n and c < m:
                out[r, c] = sh[tx, ty + uint64(j * rows)]

    kernel.tile = (tile, tile)  # (rows, cols) of the tile one block moves, as in matmul
    kernel.block = (tile, rows)
    return kernel


@dataclass(frozen=True)
class Config(KernelConfig):
    """One way to run the transpose: the naive kernel, or a tile through shared memory."""

    kernel: str  # "naive" or "tiled"
    tile: int = 32  # the block moves a tile x tile tile
    rows: int = 8  # threads per block = tile x rows; each thread moves tile / rows elements
    pad: int = 0  # spare columns in shared memory (1 avoids the bank conflicts)

    @property
    def name(self) -> str:
        if self.kernel == "naive":
            return "naive"
        s = "tiled" + ("_padded" if self.pad else "") + (str(self.tile) if self.tile != 32 else "")
        default_rows = {32: 8, 64: 4}.get(self.tile)
        return s + (f"/r{self.rows}" if self.rows != default_rows else "") + \
            (f"/p{self.pad}" if self.pad > 1 else "")


# On an NVIDIA H200 (2026-11-30, 16384^2, tools/probe_tiling.py) against a device-to-device
# copy: naive 0.15, tiled 0.50, tiled_padded 0.98, tiled_padded64 1.09 (the probe's figures;
# docs/benchmarks.md has the bench's, measured through this launcher).
REGISTRY = Variants(
    {"naive": Config("naive"), "tiled": Config("tiled", 32, 8, 0),
     "tiled_padded": Config("tiled", 32, 8, 1),
     "tiled_padded64": Config("tiled", 64, 4, 1)},  # 64 x 64 tile, 16 elements per thread
    best=Config("tiled", *chosen("transpose", (64, 4, 1))),  # (tile, rows, pad)
    chosen_by="tools/probe_tiling.py on an NVIDIA H200, 2026-11-30 (16384^2 float32)")
TRANSPOSE_VARIANTS = VARIANTS = REGISTRY.names
BEST = REGISTRY.best
# name -> (tile, rows of threads, padding columns), as lesson 4 shows them
TILED_CONFIGS = {name: (c.tile, c.rows, c.pad) for name, c in REGISTRY.named.items()
                 if c.kernel == "tiled"}


@functools.cache
def _tiled_for(tile: int, rows: int, pad: int):
    return _make_tiled(tile, rows, pad)


def _kernel_for(cfg: Config):
    return _transpose_naive if cfg.kernel == "naive" else _tiled_for(cfg.tile, cfg.rows, cfg.pad)


def _tiled_kernel(variant: str | Config):
    """The compiled-once kernel of a tiled variant."""
    return _kernel_for(REGISTRY.resolve(variant))


def launch_config(m: int, n: int, variant: str | Config = "best") -> tuple[tuple, tuple]:
    """(grid, block) to transpose an m x n matrix."""
    cfg = REGISTRY.resolve(variant)
    if cfg.kernel == "naive":
        bx, by = NAIVE_BLOCK
        return (blocks_for(n, bx), blocks_for(m, by)), NAIVE_BLOCK
    k = _kernel_for(cfg)
    rows, cols = k.tile
    return (blocks_for(n, cols), blocks_for(m, rows)), k.block


def transpose(x: Any, out: Any = None, variant: str | Config = "best") -> Any:
    """The transpose of a float32 matrix on the GPU (host in, host out; device in, device
    out). ``out`` may be a preallocated (n, m) device array."""
    if out is not None and _PLANS.run(variant, x, out):  # device arrays seen before
        return out
    cfg = REGISTRY.resolve(variant)
    check_array(x, "x", ndim=2)
    m, n = x.shape
    on_host = not is_device_array(x)
    dx = to_device(x)
    dout = output_array(out, (n, m))
    if m and n:
        grid, block = launch_config(m, n, cfg)
        kernel = _kernel_for(cfg)
        kernel[grid, block](dx, dout)
        if not on_host and is_device_array(out):
            _PLANS.remember(variant, (x, out), [(kernel, grid, block, (dx, dout), (0, 1))])
    return return_like_input(dout, out, on_host)


_PLANS = DevicePlans()  # launches worked out for device arrays, reused while they look alike
