"""Lesson 4: reductions (sum and max of a float32 vector), in three steps.

* ``shared_tree``: each block halves its partial results in shared memory (a tree, with a
  barrier between levels), writes one value per block; a second launch of one block
  reduces those;
* ``warp_shuffle``: the 32 threads of a warp combine values through registers
  (``cuda.shfl_down_sync``) with no shared memory and no barrier, then one value per warp
  goes through shared memory; still two launches;
* ``single_pass``: each thread keeps several independent accumulators (more loads in
  flight), the block reduces with shuffles, and one atomic per block combines the blocks:
  one launch, no second pass.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, float32

from ..runtime.arrays import check_array, require_device, to_device
from ..runtime.launch import DevicePlans, KernelConfig, Variants, resident_blocks, sm_count


def reduce_sum_ref(x: Any, xp: Any = np) -> Any:
    """The reference sum, accumulated in float64."""
    return xp.sum(x, dtype=xp.float64)


def reduce_max_ref(x: Any, xp: Any = np) -> Any:
    """The reference maximum."""
    return xp.max(x)


FULL_MASK = 0xFFFFFFFF
TPB = 256  # threads per block for every reduction kernel here (a power of two)
WARPS = TPB // 32


@cuda.jit(device=True, inline="always")
def _add(a, b):
    return a + b


@cuda.jit(device=True, inline="always")
def _max(a, b):
    return max(a, b)


_OPS = {"sum": (_add, 0.0), "max": (_max, -math.inf)}


ITEMS = 16  # independent accumulators per thread in single_pass


def _make_kernels(op: str, items: int = ITEMS):
    """Build the kernels of every variant for ``op`` ("sum" or "max").

    ``combine`` and ``identity`` are closure constants: Numba compiles one specialised copy.
    """
    combine, ident = _OPS[op]
    identity = np.float32(ident)
    is_sum = op == "sum"

    @cuda.jit
    def tree(x, partial):
        """One value per block into partial[blockIdx.x], by a tree in shared memory."""
        sh = cuda.shared.array(TPB, float32)
        t = cuda.threadIdx.x
        # Grid-stride: any number of blocks covers any n; the tail past n adds nothing.
        acc = identity
        for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
            acc = combine(acc, x[i])
        sh[t] = acc
        # Wait until every thread has stored its value before anyone reads a neighbour's.
        cuda.syncthreads()
        s = TPB // 2
        while s > 0:
            if t < s:
                sh[t] = combine(sh[t], sh[t + s])
            # Wait for this level to finish before the next level reads its results.
            cuda.syncthreads()
            s //= 2
        if t == 0:
            partial[cuda.blockIdx.x] = sh[0]

    @cuda.jit(device=True, inline="always")
    def warp_reduce(v):
        """Combine the 32 lanes' values; lane 0 ends with the result."""
        # Registers only: each step halves the lanes holding live data, no barrier needed
        # because the 32 lanes of a warp exchange values in one instruction.
        off = 16
        while off > 0:
            v = combine(v, cuda.shfl_down_sync(FULL_MASK, v, off))
            off //= 2
        return v

    @cuda.jit(device=True, inline="always")
    def block_reduce(v):
        """Combine the block's values; thread 0 ends with the result."""
        sh = cuda.shared.array(WARPS, float32)
        t = cuda.threadIdx.x
        v = warp_reduce(v)
        if t % 32 == 0:
            sh[t // 32] = v
        # Wait until every warp has posted its value.
        cuda.syncthreads()
        if t < 32:
            v = sh[t] if t < WARPS else identity
            v = warp_reduce(v)
        return v

    @cuda.jit
    def warp(x, partial):
        """One value per block into partial[blockIdx.x], with warp shuffles."""
        acc = identity
        for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
            acc = combine(acc, x[i])
        acc = block_reduce(acc)
        if cuda.threadIdx.x == 0:
            partial[cuda.blockIdx.x] = acc

    @cuda.jit(fastmath=True)
    def single(x, out):
        """Combine everything into out[0] in one launch: ILP, shuffles, one atomic per block."""
        n = x.shape[0]
        t = cuda.threadIdx.x
        chunk = TPB * items  # elements one block handles per step
        # Several independent accumulators: their loads do not wait on each other, so each
        # thread keeps `items` loads in flight, which is what saturates memory bandwidth.
        acc = cuda.local.array(items, float32)
        for q in range(items):
            acc[q] = identity
        full = n // chunk
        for c in range(cuda.blockIdx.x, full, cuda.gridDim.x):
            base = c * chunk + t
            for q in range(items):  # unrolled: all loads issued before the adds need them
                acc[q] = combine(acc[q], x[base + q * TPB])
        # The tail (fewer than one chunk) is spread over all threads of the grid.
        for i in range(full * chunk + cuda.grid(1), n, cuda.gridsize(1)):
            acc[0] = combine(acc[0], x[i])
        v = acc[0]
        for q in range(1, items):
            v = combine(v, acc[q])
        v = block_reduce(v)
        if t == 0:
            # One atomic per block: blocks finish in any order, the hardware serialises these.
            if is_sum:
                cuda.atomic.add(out, 0, v)
            else:
                cuda.atomic.max(out, 0, v)

    @cuda.jit
    def fill(out):
        """out[0] = the identity of the operation (so the atomics have a start value)."""
        if cuda.grid(1) == 0:
            out[0] = identity

    return {"shared_tree": tree, "warp_shuffle": warp, "single_pass": single, "fill": fill,
            "items": items}


@dataclass(frozen=True)
class Config(KernelConfig):
    """One way to run a reduction: which kernel, and how many blocks per SM it launches."""

    kernel: str  # "shared_tree", "warp_shuffle", "single_pass"
    blocks_per_sm: int = 8

    @property
    def name(self) -> str:
        default = SINGLE_PASS_BLOCKS_PER_SM if self.kernel == "single_pass" else BLOCKS_PER_SM
        return self.kernel + (f"/b{self.blocks_per_sm}" if self.blocks_per_sm != default else "")


BLOCKS_PER_SM = 8
# Measured on an NVIDIA H200 (2026-11-30, 256M float32, tools/probe_tiling.py): 16 items per
# thread and 16 blocks per SM read at 3.53 TB/s, 1.03 x the device-to-device copy rate.
SINGLE_PASS_BLOCKS_PER_SM = 16
REGISTRY = Variants(
    {"shared_tree": Config("shared_tree"), "warp_shuffle": Config("warp_shuffle"),
     "single_pass": Config("single_pass", SINGLE_PASS_BLOCKS_PER_SM)},
    best=Config("single_pass", SINGLE_PASS_BLOCKS_PER_SM),
    chosen_by="tools/probe_tiling.py on an NVIDIA H200, 2026-11-30 (256M float32)")
REDUCE_VARIANTS = VARIANTS = REGISTRY.names
BEST = REGISTRY.best
_kernels: dict[str, dict] = {}


def kernels(op: str) -> dict:
    if op not in _kernels:
        _kernels[op] = _make_kernels(op)
    return _kernels[op]


def _sm_count() -> int:
    return sm_count()


def grid_size(n: int, items: int = 1, blocks_per_sm: int = BLOCKS_PER_SM) -> int:
    """Blocks for ``n`` elements: enough to fill every SM a few times, never more than the
    work needs (grid-stride loops cover the rest)."""
    return resident_blocks(n, TPB * items, blocks_per_sm)


def launch_config(n: int, variant: str | Config = "best", items: int = ITEMS
                  ) -> tuple[int, int]:
    """(grid, block) of the first (or only) launch of ``variant`` for ``n`` elements."""
    cfg = REGISTRY.resolve(variant)
    per = items if cfg.kernel == "single_pass" else 1
    return grid_size(n, per, cfg.blocks_per_sm), TPB


def _check_input(x: Any, name: str = "x") -> None:
    check_array(x, name, ndim=1)
    if x.shape[0] == 0:
        raise ValueError(f"{name} is empty: the reduction of no elements is not defined here")


def _reduce_into(x: Any, out: Any, op: str, variant: str | Config) -> None:
    """Launch ``variant`` on device array ``x``; the result lands in device ``out[0]``."""
    cfg = REGISTRY.resolve(variant)
    ks = kernels(op)
    n = x.shape[0]
    blocks, tpb = launch_config(n, cfg, ks["items"])
    if cfg.kernel == "single_pass":
        ks["fill"][1, 32](out)
        ks["single_pass"][blocks, tpb](x, out)
        return
    k = ks[cfg.kernel]
    if blocks == 1:
        k[1, tpb](x, out)
        return
    partial = cuda.device_array(blocks, dtype=np.float32)
    k[blocks, tpb](x, partial)
    k[1, tpb](partial, out)  # the second pass: one block reduces the per-block results


def _reduce(x: Any, op: str, variant: str | Config) -> float:
    REGISTRY.resolve(variant)  # an unknown variant is refused before any copy
    _check_input(x)
    out = cuda.device_array(1, dtype=np.float32)
    _reduce_into(to_device(x), out, op, variant)
    return float(out.copy_to_host()[0])


def reduce_sum(x: Any, variant: str | Config = "best") -> float:
    """The sum of a float32 vector (host or device), as a Python float."""
    return _reduce(x, "sum", variant)


def reduce_max(x: Any, variant: str | Config = "best") -> float:
    """The largest element of a float32 vector (host or device), as a Python float."""
    return _reduce(x, "max", variant)


def reduce_sum_into(x: Any, out: Any, variant: str | Config = "best") -> Any:
    """Write the sum of device array ``x`` into the 1-element device array ``out``.

    No copy back and no synchronisation: for timing loops. Returns ``out``.
    """
    if _PLANS.run(variant, x, out):  # device arrays seen before: no checks, no conversion
        return out
    cfg = REGISTRY.resolve(variant)
    _check_input(x)
    require_device(x, "x")
    require_device(out, "out")
    check_array(out, "out", ndim=1)
    if out.shape[0] != 1:
        raise ValueError(f"out must hold exactly 1 element, got shape {tuple(out.shape)}")
    dx, dout = to_device(x), to_device(out)
    _reduce_into(dx, dout, "sum", cfg)
    if cfg.kernel == "single_pass":  # one launch pair, no temporary: worth remembering
        ks = kernels("sum")
        blocks, tpb = launch_config(x.shape[0], cfg, ks["items"])
        _PLANS.remember(variant, (x, out), [(ks["fill"], 1, 32, (dout,), (1,)),
                                            (ks["single_pass"], blocks, tpb, (dx, dout), (0, 1))])
    return out


_PLANS = DevicePlans()  # launches worked out for device arrays, reused while they look alike


__all__ = ["reduce_sum_ref", "reduce_max_ref", "reduce_sum", "reduce_max", "reduce_sum_into",
           "REDUCE_VARIANTS", "VARIANTS", "BEST", "Config", "launch_config"]
