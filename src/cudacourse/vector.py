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
x work per thread x grid size x cache hint in one run).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numba import cuda, float32
from numba.cuda.core import config as _numba_config

from .arrays import check_array, is_device_array, return_like_input, same_shape, to_device


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
# Numba has no float4 array type, so two tiny intrinsics ask LLVM for one aligned 16-byte
# load (PTX ld.global.v4.f32) or store of four consecutive floats. They need a contiguous
# float32 array whose data pointer is a multiple of 16 bytes: the launcher checks that and
# falls back to the ``ilp`` kernel otherwise. The simulator runs the plain-Python versions.

if _numba_config.ENABLE_CUDASIM:
    def _load4(arr, j):
        """Elements 4j .. 4j+3 of ``arr``."""
        return arr[4 * j], arr[4 * j + 1], arr[4 * j + 2], arr[4 * j + 3]

    def _store4(arr, j, v0, v1, v2, v3):
        """Write elements 4j .. 4j+3 of ``arr``."""
        arr[4 * j] = v0
        arr[4 * j + 1] = v1
        arr[4 * j + 2] = v2
        arr[4 * j + 3] = v3

    _HINTED = {hint: (_load4, _store4) for hint in ("", "cs", "nc")}
else:
    from llvmlite import ir as _ir
    from numba.cuda import types as _types
    from numba.cuda.core.errors import TypingError as _TypingError
    from numba.cuda.extending import intrinsic as _intrinsic

    _F32X4 = _ir.VectorType(_ir.FloatType(), 4)
    _I32 = _ir.IntType(32)

    def _check_types(arr, j):
        if not (isinstance(arr, _types.Array) and arr.ndim == 1 and arr.dtype == _types.float32
                and arr.layout == "C"):
            raise _TypingError(f"16-byte access needs a contiguous 1-D float32 array, got {arr}")
        if not isinstance(j, _types.Integer):
            raise _TypingError(f"16-byte access needs an integer group index, got {j}")

    def _group_pointer(context, builder, arrty, arr, jty, j):
        """Address of element 4j, as a pointer to 4 floats."""
        data = context.make_array(arrty)(context, builder, value=arr).data
        j = context.cast(builder, j, jty, _types.intp)
        ptr = builder.gep(data, [builder.mul(j, _ir.Constant(j.type, 4))])
        return builder.bitcast(ptr, _F32X4.as_pointer())

    def _make_load4(hint: str):
        @_intrinsic
        def load4(typingctx, arr, j):
            _check_types(arr, j)
            sig = _types.UniTuple(_types.float32, 4)(arr, j)

            def codegen(context, builder, sig, args):
                ptr = _group_pointer(context, builder, sig.args[0], args[0], sig.args[1],
                                     args[1])
                if hint:  # PTX with an explicit cache hint
                    fty = _ir.FunctionType(_ir.LiteralStructType([_ir.FloatType()] * 4),
                                           [ptr.type])
                    asm = _ir.InlineAsm(fty, f"ld.global.{hint}.v4.f32 {{$0, $1, $2, $3}}, "
                                        "[$4];", "=f,=f,=f,=f,l", side_effect=True)
                    res = builder.call(asm, [ptr])
                    vals = [builder.extract_value(res, k) for k in range(4)]
                else:  # plain LLVM: one aligned vector load, PTX ld.global.v4.f32
                    vec = builder.load(ptr, align=16)
                    vals = [builder.extract_element(vec, _ir.Constant(_I32, k))
                            for k in range(4)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return load4

    def _make_store4(hint: str):
        @_intrinsic
        def store4(typingctx, arr, j, v0, v1, v2, v3):
            _check_types(arr, j)
            sig = _types.void(arr, j, v0, v1, v2, v3)

            def codegen(context, builder, sig, args):
                ptr = _group_pointer(context, builder, sig.args[0], args[0], sig.args[1],
                                     args[1])
                vals = [context.cast(builder, v, t, _types.float32)
                        for v, t in zip(args[2:], sig.args[2:])]
                if hint:
                    fty = _ir.FunctionType(_ir.VoidType(), [ptr.type] + [_ir.FloatType()] * 4)
                    asm = _ir.InlineAsm(fty, f"st.global.{hint}.v4.f32 [$0], "
                                        "{$1, $2, $3, $4};", "l,f,f,f,f,~{memory}")
                    builder.call(asm, [ptr] + vals)
                else:
                    vec = _ir.Constant(_F32X4, _ir.Undefined)
                    for k, v in enumerate(vals):
                        vec = builder.insert_element(vec, v, _ir.Constant(_I32, k))
                    builder.store(vec, ptr, align=16)
                return context.get_dummy_value()

            return sig, codegen

        return store4

    _load4, _store4 = _make_load4(""), _make_store4("")
    # Cache hints (PTX ISA "cache operators"): "cs" streams (evict first: data used once
    # should not push anything else out of L2), "nc" reads through the non-coherent
    # read-only path, as CUDA C does for const __restrict__ pointers.
    _HINTED = {"": (_load4, _store4), "cs": (_make_load4("cs"), _make_store4("cs")),
               "nc": (_make_load4("nc"), _store4)}


VEC4_PER_THREAD = 2  # 16-byte vectors per thread in the ``vec4`` variant


def _make_vec4_kernel(vectors: int, hint: str = ""):
    """A kernel in which each thread adds ``vectors`` groups of 4 floats, 16 bytes at a time.

    ``hint`` is a PTX cache hint for the loads (and stores, for "cs"): see ``_HINTED``.
    """
    load4, store4 = _HINTED[hint]
    floats = 4 * vectors  # a closure constant: local array sizes must be known at compile time

    @cuda.jit
    def kernel(a, b, out):
        """Each thread adds ``vectors`` float4 groups, one block-width of groups apart."""
        n = out.shape[0]
        nvec = n // 4  # whole groups of 4; the 0-3 elements after them are the tail
        tid = cuda.threadIdx.x
        base = cuda.blockIdx.x * cuda.blockDim.x * vectors + tid
        step = cuda.blockDim.x
        # A warp's 16-byte loads cover 512 consecutive bytes: coalesced, and 4x fewer load
        # instructions than 4-byte loads. All loads go out before the first add, so each
        # thread has 2 x 16 x vectors bytes in flight while it waits for DRAM.
        x = cuda.local.array(floats, float32)
        y = cuda.local.array(floats, float32)
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


def _make_vec4_stride_kernel(vectors: int):
    """``vec4`` inside a grid-stride loop: a grid of a few waves, each thread looping."""

    floats = 4 * vectors

    @cuda.jit
    def kernel(a, b, out):
        """Grid-stride loop over chunks of ``vectors`` float4 groups per thread."""
        n = out.shape[0]
        nvec = n // 4
        step = cuda.blockDim.x
        chunk = cuda.blockDim.x * vectors  # groups handled by one block per pass
        x = cuda.local.array(floats, float32)
        y = cuda.local.array(floats, float32)
        for start in range(cuda.blockIdx.x * chunk, nvec, cuda.gridDim.x * chunk):
            base = start + cuda.threadIdx.x
            for k in range(vectors):
                j = base + k * step
                if j < nvec:
                    x[4 * k], x[4 * k + 1], x[4 * k + 2], x[4 * k + 3] = _load4(a, j)
                    y[4 * k], y[4 * k + 1], y[4 * k + 2], y[4 * k + 3] = _load4(b, j)
            for k in range(vectors):
                j = base + k * step
                if j < nvec:
                    _store4(out, j, x[4 * k] + y[4 * k], x[4 * k + 1] + y[4 * k + 1],
                            x[4 * k + 2] + y[4 * k + 2], x[4 * k + 3] + y[4 * k + 3])
        if cuda.blockIdx.x == 0:  # the 0-3 elements after the last whole group
            for i in range(4 * nvec + cuda.threadIdx.x, n, step):
                out[i] = a[i] + b[i]

    return kernel


@functools.cache
def _vec4_kernel(vectors: int, hint: str = "", stride: bool = False):
    if stride:
        return _make_vec4_stride_kernel(vectors)
    return _make_vec4_kernel(vectors, hint)


# --- configurations and launch -------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """One way to run the vector add: which kernel, block size, work per thread, grid."""

    kernel: str  # "simple", "grid_stride", "ilp", "vec4", "vec4_stride"
    threads: int = 256
    per_thread: int = 1  # elements (ilp) or 16-byte vectors (vec4*) per thread
    blocks_per_sm: int = 0  # grid-stride kernels: blocks = blocks_per_sm x SMs
    hint: str = ""  # vec4 only: PTX cache hint, "" (none), "cs" (streaming) or "nc"

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


VARIANTS = ("simple", "grid_stride", "ilp", "vec4")

_NAMED = {
    "simple": Config("simple"),
    "grid_stride": Config("grid_stride", blocks_per_sm=32),
    "ilp": Config("ilp", per_thread=ITEMS_PER_THREAD),
    "vec4": Config("vec4", per_thread=VEC4_PER_THREAD),
}

# The fastest correct configuration that tools/probe_vector.py measured on an NVIDIA H200 on
# 2026-11-30 (81 candidates): 8 elements per thread, 512 threads, 1.04 of the device-to-device
# copy measured in the same run; vec4 with 1024 threads reached 1.03, the plain kernel 0.82.
BEST = Config("ilp", threads=512, per_thread=8)


def _sm_count() -> int:
    from .device import is_simulator

    return 2 if is_simulator() else cuda.get_current_device().MULTIPROCESSOR_COUNT


def resolve(variant: str, threads: int | None = None) -> Config:
    """The configuration a variant name stands for ("best" is ``BEST``)."""
    if variant == "best":
        cfg = BEST
    elif variant in _NAMED:
        cfg = _NAMED[variant]
    else:
        raise ValueError(f"variant must be one of {VARIANTS + ('best',)}, got {variant!r}")
    if threads is not None:
        if not isinstance(threads, (int, np.integer)) or not 1 <= threads <= 1024:
            raise ValueError(f"threads must be an int from 1 to 1024, got {threads!r}")
        cfg = replace(cfg, threads=int(threads))
    return cfg


def _grid(n: int, cfg: Config) -> tuple[int, int]:
    per_block = cfg.elements_per_block()
    blocks = max(1, (n + per_block - 1) // per_block)
    if cfg.kernel in ("grid_stride", "vec4_stride"):
        # Enough blocks to fill every SM a few times over, no more: each thread loops.
        blocks = min(blocks, _sm_count() * (cfg.blocks_per_sm or 32))
    return blocks, cfg.threads


def launch_config(n: int, variant: str = "simple", threads: int | None = None) -> tuple[int, int]:
    """Blocks and threads per block for ``n`` elements."""
    return _grid(n, resolve(variant, threads))


def _kernel_for(cfg: Config):
    if cfg.kernel == "simple":
        return _vector_add
    if cfg.kernel == "grid_stride":
        return _vector_add_grid_stride
    if cfg.kernel == "ilp":
        return _ilp_kernel(cfg.per_thread)
    if cfg.kernel == "vec4":
        return _vec4_kernel(cfg.per_thread, cfg.hint)
    if cfg.kernel == "vec4_stride":
        return _vec4_kernel(cfg.per_thread, stride=True)
    raise ValueError(f"unknown kernel {cfg.kernel!r}")


def _vec4_ok(*arrays: Any) -> bool:
    """16-byte accesses need contiguous float32 arrays whose data starts on 16 bytes."""
    if _numba_config.ENABLE_CUDASIM:
        return True  # the simulator's Python loads have no alignment rule
    for x in arrays:
        cai = x.__cuda_array_interface__
        if cai.get("strides") not in (None, (4,)) or cai["data"][0] % 16:
            return False
    return True


def run(cfg: Config, a: Any, b: Any, out: Any) -> None:
    """Launch ``cfg`` on Numba device arrays (no checks, no copies, no sync): for benchmarks."""
    n = out.shape[0]
    if n == 0:
        return
    if cfg.needs_alignment() and not _vec4_ok(a, b, out):
        cfg = replace(_NAMED["ilp"], threads=cfg.threads, per_thread=4 * cfg.per_thread)
    blocks, tpb = _grid(n, cfg)
    _kernel_for(cfg)[blocks, tpb](a, b, out)


def vector_add(a: Any, b: Any, out: Any = None, variant: str = "simple",
               threads: int | None = None) -> Any:
    """``a + b`` on the GPU. Host inputs give a host result; device inputs stay on the device.

    ``variant`` is one of ``VARIANTS`` or ``"best"``; ``threads`` (threads per block)
    defaults to the variant's own (256).
    """
    check_array(a, "a", ndim=1)
    check_array(b, "b", ndim=1)
    same_shape(a=a, b=b)
    cfg = resolve(variant, threads)
    on_host = not (is_device_array(a) and is_device_array(b))
    da, db = to_device(a), to_device(b)
    n = a.shape[0]
    if out is None:
        dout = cuda.device_array(n, dtype=np.float32)
    else:
        check_array(out, "out", ndim=1)
        same_shape(a=a, out=out)
        dout = to_device(out)
    run(cfg, da, db, dout)
    return return_like_input(dout, out, on_host)
