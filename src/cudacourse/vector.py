"""Lesson 1: element-wise vector addition, the "hello world" of GPU programming.

Three kernels of rising speed: one element per thread, a grid-stride loop, and several
elements per thread (more bytes in flight per thread hides more memory latency).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from .arrays import check_array, is_device_array, same_shape, to_device


def vector_add_ref(a: Any, b: Any, xp: Any = np) -> Any:
    """The reference: what every vector-add kernel must produce."""
    return xp.add(a, b)


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


ITEMS_PER_THREAD = 4


@cuda.jit
def _vector_add_ilp(a, b, out):
    """Each thread handles ITEMS_PER_THREAD elements, one block-width apart."""
    n = out.shape[0]
    base = cuda.blockIdx.x * cuda.blockDim.x * ITEMS_PER_THREAD + cuda.threadIdx.x
    step = cuda.blockDim.x
    # Issue all loads before any add: several independent loads in flight per thread hide
    # the ~600-cycle DRAM latency better than one load at a time. Each load stays coalesced
    # because neighbouring threads still read neighbouring addresses.
    x = cuda.local.array(ITEMS_PER_THREAD, np.float32)
    y = cuda.local.array(ITEMS_PER_THREAD, np.float32)
    for k in range(ITEMS_PER_THREAD):
        i = base + k * step
        if i < n:
            x[k] = a[i]
            y[k] = b[i]
    for k in range(ITEMS_PER_THREAD):
        i = base + k * step
        if i < n:
            out[i] = x[k] + y[k]


VARIANTS = ("simple", "grid_stride", "ilp")


def launch_config(n: int, variant: str = "simple", threads: int = 256) -> tuple[int, int]:
    """Blocks and threads per block for ``n`` elements."""
    if variant == "simple":
        return (n + threads - 1) // threads, threads
    if variant == "ilp":
        per_block = threads * ITEMS_PER_THREAD
        return (n + per_block - 1) // per_block, threads
    if variant == "grid_stride":
        # Enough blocks to fill every SM several times over, no more: each thread loops.
        sms = cuda.get_current_device().MULTIPROCESSOR_COUNT if not _sim() else 2
        return min((n + threads - 1) // threads, sms * 32), threads
    raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")


def _sim() -> bool:
    from .device import is_simulator

    return is_simulator()


def vector_add(a: Any, b: Any, out: Any = None, variant: str = "simple",
               threads: int = 256) -> Any:
    """``a + b`` on the GPU. Host inputs give a host result; device inputs stay on the device."""
    check_array(a, "a", ndim=1)
    check_array(b, "b", ndim=1)
    same_shape(a=a, b=b)
    kernel = {"simple": _vector_add, "grid_stride": _vector_add_grid_stride,
              "ilp": _vector_add_ilp}.get(variant)
    if kernel is None:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    on_host = not (is_device_array(a) and is_device_array(b))
    da, db = to_device(a), to_device(b)
    n = a.shape[0]
    if out is None:
        dout = cuda.device_array(n, dtype=np.float32)
    else:
        check_array(out, "out", ndim=1)
        same_shape(a=a, out=out)
        dout = to_device(out)
    if n == 0:
        return dout.copy_to_host() if on_host else dout
    blocks, tpb = launch_config(n, variant, threads)
    kernel[blocks, tpb](da, db, dout)
    if on_host:
        result = dout.copy_to_host()
        if isinstance(out, np.ndarray):
            out[...] = result
            return out
        return result
    return dout
