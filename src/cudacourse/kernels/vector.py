"""Lesson 1: element-wise vector addition, the "hello world" of GPU programming.

A vector add is memory-bound: 12 bytes move (two 4-byte reads, one write) per addition. DRAM
answers a load only after several hundred nanoseconds, so to stream at full bandwidth the
GPU must keep about *bandwidth x latency* bytes in flight (Little's law): a few MB across
the whole GPU, tens of KB per SM. The variants differ in how many bytes each thread keeps in
flight, and with how many instructions:

* ``simple``: one element per thread: 8 bytes of loads in flight per thread. Even with every
  SM full (2048 threads), that is 16 KB per SM: too little to hide the latency.
* ``grid_stride``: a grid of a few waves of blocks (32 blocks per SM), each thread looping in
  steps of the whole grid: no millions of tiny blocks to schedule, and no partly idle last
  wave; the accesses stay coalesced.
* ``ilp``: each thread issues the loads of 4 elements (one block-width apart, so each load
  instruction is still coalesced) before it adds any: 32 bytes in flight per thread, but 12
  memory instructions and their 64-bit index arithmetic for 4 elements.
* ``vec4``: each thread moves 16 bytes per instruction (4 consecutive floats, like CUDA C's
  ``float4``), 2 such vectors per input per thread: 64 bytes in flight per thread with only 4
  load instructions; a warp's 16-byte load covers 512 consecutive bytes (four whole 128-byte
  lines). A quarter of the instructions for the same bytes leaves the schedulers free to keep
  memory busy.

``vector_add(..., variant="best")`` uses the fastest configuration measured on an NVIDIA
H200 (``BEST``, chosen by ``tools/probe_vector.py``, which measures every kernel x block size
x work per thread x grid size x cache hint in one run; ``REGISTRY.chosen_by`` says which run).
"""
from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import functools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numba import cuda, float32

from ..runtime.arrays import (check_array, is_device_array, output_array, return_like_input,
    same_shape, to_device)
from ..runtime.intrinsics import aligned16, hinted
from ..runtime.launch import (DevicePlans, KernelConfig, Variants, blocks_for, check_threads,
    resident_blocks)


def vector_add_ref(a: Any, b: Any, xp: Any = np) -> Any:
    """The reference: what every vector-add kernel must produce."""
    return xp.add(a, b)


# --- one element per thread ----------------------------------------------------------------

@cuda.jit
def _vector_add(a, b, out):
    """One thread per element."""
    i = cuda.grid(1)
    # The grid is rounded up to whole blocks, so the last block has threads past the end.
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@cuda.jit
def _vector_add_grid_stride(a, b, out):
    """Each thread walks the array in steps of the whole grid's size."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    # Consecutive threads touch consecutive addresses on every step: coalesced accesses.
    for i in range(start, out.shape[0], stride):
        out[i] = a[i] + b[i]


# --- several elements per thread (instruction-level parallelism) ---------------------------

ITEMS_PER_THREAD = 4


def _make_ilp_kernel(items: int):
    """A kernel in which each thread adds ``items`` elements, one block-width apart."""

    @cuda.jit
    def kernel(a, b, out):
        """Each thread handles ``items`` elements, one block-width apart."""
        n = out.shape[0]
        base = cuda.blockIdx.x * cuda.blockDim.x * items + cuda.threadIdx.x
        step = cuda.blockDim.x
        # Issue all loads before any add: several independent loads in flight per thread
        # hide the DRAM latency (hundreds of cycles) better than one load at a time. Each
        # load stays coalesced because neighbouring threads still read neighbouring addresses.
        x = cuda.local.array(items, float32)
        y = cuda.local.array(items, float32)
        for k in range(items):  # a constant trip count: unrolled, x and y live in registers
            i = base + k * step
            if i < n:  # the last block may run past the end
                x[k] = a[i]
                y[k] = b[i]
        for k in range(items):
            i = base + k * step
            if i < n:
                out[i] = x[k] + y[k]

    return kernel


_vector_add_ilp = _make_ilp_kernel(ITEMS_PER_THREAD)


@functools.cache
def _ilp_kernel(items: int):
    return _vector_add_ilp if items == ITEMS_PER_THREAD else _make_ilp_kernel(items)


# --- 16-byte loads and stores (vectorised access) ------------------------------------------
#
# ``cudacourse.runtime.intrinsics`` asks LLVM for one aligned 16-byte load (PTX ld.global.v4.f32) or
# store of four consecutive floats. They need a contiguous float32 array whose data pointer
# is a multiple of 16 bytes: the launcher checks that and falls back to the ``ilp`` kernel
# otherwise.

VEC4_PER_THREAD = 2  # 16-byte vectors per thread in the ``vec4`` variant


def _vec4_kernel(vectors: int, hint: str = "", stride: bool = False):
    """The ``vec4`` kernel for these parameters, compiled once per combination."""
    return _make_vec4_kernel(int(vectors), hint, bool(stride))


@functools.cache
def _make_vec4_kernel(vectors: int, hint: str, stride: bool):
    """A kernel in which each thread adds ``vectors`` groups of 4 floats, 16 bytes at a time.

    ``hint`` is a PTX cache operator for the 16-byte accesses (``intrinsics.hinted``).
    ``stride=False``: one pass, the grid covers the array; ``stride=True``: a grid of a few
    waves, each block looping over chunks in steps of the whole grid.
    """
    load4, store4 = hinted(hint)
    floats = 4 * vectors  # a closure constant: local array sizes must be known at compile time

    @cuda.jit
    def kernel(a, b, out):
        """Each thread adds ``vectors`` float4 groups, one block-width of groups apart."""
        n = out.shape[0]
        nvec = n // 4  # whole groups of 4; the 0-3 elements after them are the tail
        tid = cuda.threadIdx.x
        step = cuda.blockDim.x
        chunk = cuda.blockDim.x * vectors  # groups handled by one block per pass
        first = cuda.blockIdx.x * chunk
        if stride:  # a closure constant: Numba compiles only the branch taken
            last = nvec  # grid-stride: loop over chunks in steps of the whole grid
            jump = cuda.gridDim.x * chunk
        else:
            last = first + 1  # one pass (a trip count of 1 the compiler folds away)
            jump = 1
        x = cuda.local.array(floats, float32)
        y = cuda.local.array(floats, float32)
        for start in range(first, last, jump):
            base = start + tid
            # A warp's 16-byte loads cover 512 consecutive bytes: coalesced, and 4x fewer
            # load instructions than 4-byte loads. All loads go out before the first add, so
            # each thread has 2 x 16 x vectors bytes in flight while it waits for DRAM.
            for k in range(vectors):
                j = base + k * step
                if j < nvec:  # the last block may run past the end
                    x[4 * k], x[4 * k + 1], x[4 * k + 2], x[4 * k + 3] = load4(a, j)
                    y[4 * k], y[4 * k + 1], y[4 * k + 2], y[4 * k + 3] = load4(b, j)
            for k in range(vectors):
                j = base + k * step
                if j < nvec:
                    store4(out, j, x[4 * k] + y[4 * k], x[4 * k + 1] + y[4 * k + 1],
                           x[4 * k + 2] + y[4 * k + 2], x[4 * k + 3] + y[4 * k + 3])
        # The 0-3 elements after the last whole group: block 0 adds them one by one.
        if cuda.blockIdx.x == 0:
            for i in range(4 * nvec + tid, n, step):
                out[i] = a[i] + b[i]

    return kernel


# --- configurations and launch -------------------------------------------------------------

@dataclass(frozen=True)
class Config(KernelConfig):
    """One way to run the vector add: which kernel, block size, work per thread, grid."""

    kernel: str  # "simple", "grid_stride", "ilp", "vec4", "vec4_stride"
    threads: int = 256
    per_thread: int = 1  # elements (ilp) or 16-byte vectors (vec4*) per thread
    blocks_per_sm: int = 0  # grid-stride kernels: blocks = blocks_per_sm x SMs
    hint: str = ""  # vec4*: PTX cache hint, "" (none), "cs" (streaming) or "nc"

    @property
    def name(self) -> str:
        s = f"{self.kernel}/t{self.threads}"
        if self.kernel in ("ilp", "vec4", "vec4_stride"):
            s += f"/x{self.per_thread}"
        if self.blocks_per_sm:
            s += f"/b{self.blocks_per_sm}"
        return s + (f"/{self.hint}" if self.hint else "")

    def elements_per_block(self) -> int:
        per = {"ilp": self.per_thread, "vec4": 4 * self.per_thread,
               "vec4_stride": 4 * self.per_thread}.get(self.kernel, 1)
        return self.threads * per

    def needs_alignment(self) -> bool:
        return self.kernel in ("vec4", "vec4_stride")

    def grid_stride(self) -> bool:
        return self.kernel in ("grid_stride", "vec4_stride")


REGISTRY = Variants(
    {"simple": Config("simple"),
     "grid_stride": Config("grid_stride", blocks_per_sm=32),
     "ilp": Config("ilp", per_thread=ITEMS_PER_THREAD),
     "vec4": Config("vec4", per_thread=VEC4_PER_THREAD)},
    # 8 elements per thread, 512 threads: 1.04 of the device-to-device copy measured in the
    # same run; vec4 with 1024 threads reached 1.03, the plain kernel 0.82.
    best=Config("ilp", threads=512, per_thread=8),
    chosen_by="tools/probe_vector.py on an NVIDIA H200, 2026-11-30: the fastest correct of "
              "81 configurations (kernel x block size x work per thread x grid x cache hint)")
VARIANTS = REGISTRY.names
BEST = REGISTRY.best


def resolve(variant: str | Config, threads: int | None = None) -> Config:
    """The configuration a variant name stands for ("best" is ``BEST``), with ``threads``
    per block instead of its own when given."""
    cfg = REGISTRY.resolve(variant)
    if threads is not None:
        cfg = replace(cfg, threads=check_threads(threads))
    return cfg


def _grid(n: int, cfg: Config) -> tuple[int, int]:
    if cfg.grid_stride():
        # Enough blocks to fill every SM a few times over, no more: each thread loops.
        return resident_blocks(n, cfg.elements_per_block(), cfg.blocks_per_sm or 32), cfg.threads
    return blocks_for(n, cfg.elements_per_block()), cfg.threads


def launch_config(n: int, variant: str | Config = "best",
                  threads: int | None = None) -> tuple[int, int]:
    """(grid, block) for ``n`` elements: blocks and threads per block."""
    return _grid(n, resolve(variant, threads))


def _kernel_for(cfg: Config):
    if cfg.kernel == "simple":
        return _vector_add
    if cfg.kernel == "grid_stride":
        return _vector_add_grid_stride
    if cfg.kernel == "ilp":
        return _ilp_kernel(cfg.per_thread)
    if cfg.kernel in ("vec4", "vec4_stride"):
        return _vec4_kernel(cfg.per_thread, cfg.hint, cfg.kernel == "vec4_stride")
    raise ValueError(f"unknown kernel {cfg.kernel!r}")


_vec4_ok = aligned16  # 16-byte accesses need contiguous, 16-byte aligned float32 arrays


def _plan(cfg: Config, n: int, aligned: bool) -> tuple[Any, int, int]:
    """(kernel, grid, block) for ``n`` elements; without alignment a vec4 configuration
    runs as ``ilp`` with the same elements per thread."""
    if cfg.needs_alignment() and not aligned:
        cfg = replace(REGISTRY.named["ilp"], threads=cfg.threads, per_thread=4 * cfg.per_thread)
    blocks, tpb = _grid(n, cfg)
    return _kernel_for(cfg), blocks, tpb


def run(cfg: Config, a: Any, b: Any, out: Any) -> None:
    """Launch ``cfg`` on Numba device arrays (no checks, no copies, no sync): for benchmarks."""
    n = out.shape[0]
    if n == 0:
        return
    kernel, grid, block = _plan(cfg, n, not cfg.needs_alignment() or _vec4_ok(a, b, out))
    kernel[grid, block](a, b, out)


# Launch plans for device arrays passed with ``out``, reused while their layout is the same.
_PLANS = DevicePlans()


def vector_add(a: Any, b: Any, out: Any = None, variant: str | Config = "best",
               threads: int | None = None) -> Any:
    """``a + b`` on the GPU. Host inputs give a host result; device inputs stay on the device.

    ``variant`` is one of ``VARIANTS``, ``"best"`` (the default, ``BEST``) or a ``Config``;
    ``threads`` (threads per block) defaults to the variant's own.

    Device arrays with ``out`` given take a fast path after their first launch: the checks
    and the launch plan of the first call are reused for every later call with the same
    shapes, dtypes, layout and alignment.
    """
    if out is not None and _PLANS.run((variant, threads), a, b, out):
        return out
    check_array(a, "a", ndim=1)
    check_array(b, "b", ndim=1)
    same_shape(a=a, b=b)
    cfg = resolve(variant, threads)
    on_host = not (is_device_array(a) and is_device_array(b))
    da, db = to_device(a), to_device(b)
    n = a.shape[0]
    if out is not None:
        same_shape(a=a, out=out)
    dout = output_array(out, (n,))
    if n:
        kernel, grid, block = _plan(cfg, n, not cfg.needs_alignment() or _vec4_ok(da, db, dout))
        kernel[grid, block](da, db, dout)
        if not on_host and out is not None:
            _PLANS.remember((variant, threads), (a, b, out),
                            [(kernel, grid, block, (da, db, dout), (0, 1, 2))])
    return return_like_input(dout, out, on_host)
