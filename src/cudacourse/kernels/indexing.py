"""Lesson 2: which thread handles which element.

The thread hierarchy (``threadIdx``, ``blockIdx``, ``blockDim``, ``gridDim``), 1D and 2D
grids, grid-stride loops and launch configurations, each with its NumPy reference:

* ``thread_map``: every element of a 2D array records the block and thread that wrote it;
* ``radial``: an image computed from its pixel coordinates alone (a 2D grid with a 2D guard);
* ``scale``: ``factor * x`` with one thread per element or a grid-stride loop;
* ``coverage``: how many times each element is handled by a launch, to see what a grid
  smaller than the data does with and without a grid-stride loop.

Convention used throughout: ``x`` is the column (the fast, contiguous axis) and ``y`` the row,
so ``c, r = cuda.grid(2)`` and ``out[r, c]``.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import math
from typing import Any, NamedTuple

import numpy as np
from numba import cuda

from ..runtime.arrays import (check_array, is_device_array, output_array, return_like_input,
    to_device)
from ..runtime.launch import WARP_SIZE, blocks_for, check_block, check_threads


# --- launch configurations ----------------------------------------------------------------

def launch_config_1d(n: int, threads: int = 256) -> tuple[int, int]:
    """(grid, block) = (blocks, threads per block) for ``n`` elements, one thread each."""
    threads = check_threads(threads, whole_warps=True)
    return blocks_for(n, threads), threads


def launch_config_2d(shape: tuple[int, int], block: tuple[int, int] = (16, 16)
                     ) -> tuple[tuple[int, int], tuple[int, int]]:
    """(grid, block) covering a ``(rows, cols)`` array; block and grid are (x=cols, y=rows)."""
    rows, cols = shape
    bx, by = check_block(block)
    return (blocks_for(cols, bx), blocks_for(rows, by)), (bx, by)


# --- the thread map -------------------------------------------------------------------------

class ThreadMap(NamedTuple):
    """For each element of a 2D array: who handled it (all ``int32`` arrays of that shape)."""

    block_x: np.ndarray
    block_y: np.ndarray
    thread_x: np.ndarray
    thread_y: np.ndarray

    def block_id(self, grid_x: int) -> np.ndarray:
        """Linear block number, ``block_x + grid_x * block_y``."""
        return self.block_x + grid_x * self.block_y

    def thread_id(self, block_x_dim: int) -> np.ndarray:
        """Linear thread number inside its block, ``thread_x + blockDim.x * thread_y``."""
        return self.thread_x + block_x_dim * self.thread_y

    def warp(self, block_x_dim: int) -> np.ndarray:
        """The warp (inside its block) of the thread: 32 consecutive linear thread ids."""
        return self.thread_id(block_x_dim) // WARP_SIZE


def thread_map_ref(shape: tuple[int, int], block: tuple[int, int], xp: Any = np) -> ThreadMap:
    """Who handles element ``[r, c]`` of a ``shape`` array under a 2D launch of ``block``."""
    rows, cols = shape
    bx, by = block
    r = xp.arange(rows, dtype=xp.int32)[:, None] + xp.zeros((1, cols), dtype=xp.int32)
    c = xp.zeros((rows, 1), dtype=xp.int32) + xp.arange(cols, dtype=xp.int32)[None, :]
    return ThreadMap(c // bx, r // by, c % bx, r % by)


@cuda.jit
def _thread_map_2d(block_x, block_y, thread_x, thread_y):
    """Each thread writes its own ids into the element it owns."""
    c, r = cuda.grid(2)  # x runs along a row (columns), y down the rows
    # The grid is rounded up to whole blocks in both directions: guard both.
    if r < block_x.shape[0] and c < block_x.shape[1]:
        block_x[r, c] = cuda.blockIdx.x
        block_y[r, c] = cuda.blockIdx.y
        thread_x[r, c] = cuda.threadIdx.x
        thread_y[r, c] = cuda.threadIdx.y


def thread_map(shape: tuple[int, int], block: tuple[int, int] = (8, 4)) -> ThreadMap:
    """Run a 2D launch over ``shape`` and record, per element, the block and thread ids."""
    rows, cols = (int(s) for s in shape)
    if rows < 1 or cols < 1:
        raise ValueError(f"shape must have two positive sizes, got {shape}")
    grid, blk = launch_config_2d((rows, cols), block)
    outs = [cuda.device_array((rows, cols), dtype=np.int32) for _ in range(4)]
    _thread_map_2d[grid, blk](*outs)
    return ThreadMap(*(o.copy_to_host() for o in outs))


# --- a 2D image from coordinates ------------------------------------------------------------

def radial_ref(shape: tuple[int, int], xp: Any = np) -> Any:
    """Distance of each pixel from the image centre, divided by the half-diagonal: 0..1."""
    rows, cols = shape
    r = xp.arange(rows, dtype=xp.float32)[:, None] - (rows - 1) / 2
    c = xp.arange(cols, dtype=xp.float32)[None, :] - (cols - 1) / 2
    half_diag = max(math.hypot((rows - 1) / 2, (cols - 1) / 2), 1e-12)
    return (xp.sqrt(r * r + c * c) / half_diag).astype(xp.float32)


@cuda.jit
def _radial_2d(out):
    """One thread per pixel: its value depends only on its coordinates."""
    c, r = cuda.grid(2)
    rows, cols = out.shape
    # Threads of the last block row/column may lie outside the image.
    if r < rows and c < cols:
        dr = r - (rows - 1) / 2
        dc = c - (cols - 1) / 2
        half_diag = max(math.sqrt(((rows - 1) / 2) ** 2 + ((cols - 1) / 2) ** 2), 1e-12)
        out[r, c] = math.sqrt(dr * dr + dc * dc) / half_diag


def radial(shape: tuple[int, int], block: tuple[int, int] = (16, 16), out: Any = None) -> Any:
    """The radial gradient image on the GPU (host result unless ``out`` is a device array)."""
    rows, cols = (int(s) for s in shape)
    if rows < 1 or cols < 1:
        raise ValueError(f"shape must have two positive sizes, got {shape}")
    dout = output_array(out, (rows, cols))
    on_host = out is None or not is_device_array(out)
    grid, blk = launch_config_2d((rows, cols), block)
    _radial_2d[grid, blk](dout)
    return return_like_input(dout, out, on_host)


# --- 1D: one thread per element, or a grid-stride loop ---------------------------------------

def scale_ref(x: Any, factor: float, xp: Any = np) -> Any:
    """The reference: ``factor * x`` in float32."""
    return (xp.asarray(x, dtype=xp.float32) * xp.float32(factor)).astype(xp.float32)


@cuda.jit
def _scale(x, factor, out):
    """One thread per element."""
    i = cuda.grid(1)
    if i < out.shape[0]:  # the last block runs past the end
        out[i] = factor * x[i]


@cuda.jit
def _scale_grid_stride(x, factor, out):
    """Each thread steps through the array by the size of the whole grid."""
    # Any grid size is correct: a small grid loops more, a large one less. Neighbouring threads
    # still touch neighbouring elements on every step (coalesced).
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = factor * x[i]


def scale(x: Any, factor: float, *, blocks: int | None = None, threads: int = 256,
          grid_stride: bool = False) -> Any:
    """``factor * x``; ``blocks=None`` sizes the grid to cover ``x``. A fixed smaller
    ``blocks`` needs ``grid_stride=True`` or elements are left undone (a ValueError says so)."""
    check_array(x, "x", ndim=1)
    n = int(x.shape[0])
    need = blocks_for(n, threads)
    if blocks is None:
        blocks = need
    if blocks < 1:
        raise ValueError(f"blocks must be positive, got {blocks}")
    if blocks < need and not grid_stride:
        raise ValueError(f"{blocks} blocks of {threads} threads cover {blocks * threads} of "
                         f"{n} elements: use grid_stride=True or at least {need} blocks")
    dx = to_device(x)
    dout = output_array(None, (n,))
    if n:
        kernel = _scale_grid_stride if grid_stride else _scale
        kernel[blocks, threads](dx, np.float32(factor), dout)
    return return_like_input(dout, None, not is_device_array(x))


# --- coverage: how often is each element handled? -------------------------------------------

def coverage_ref(n: int, blocks: int, threads: int, grid_stride: bool) -> np.ndarray:
    """How many threads handle each of ``n`` elements (1 everywhere is right)."""
    total = blocks * threads
    counts = np.zeros(n, dtype=np.int32)
    if grid_stride:
        counts[:] = 1
    else:
        counts[:min(n, total)] = 1
    return counts


@cuda.jit
def _coverage(counts, grid_stride):
    """Count, per element, the threads that handle it."""
    i = cuda.grid(1)
    step = cuda.gridsize(1) if grid_stride else counts.shape[0] + 1  # no loop: one pass
    while i < counts.shape[0]:
        cuda.atomic.add(counts, i, 1)  # atomic: two threads could share an element
        i += step


def coverage(n: int, blocks: int, threads: int, grid_stride: bool) -> np.ndarray:
    """Measured on the device: the number of threads that handled each element."""
    counts = cuda.to_device(np.zeros(n, dtype=np.int32))
    _coverage[blocks, threads](counts, bool(grid_stride))
    return counts.copy_to_host()
