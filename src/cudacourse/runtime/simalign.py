"""``cuda.shared.array(..., alignment=16)`` and ``cuda.local.array(..., alignment=...)`` in
Numba's CUDA simulator.

On a GPU the alignment option matters: a 16-byte vector load (``ldmatrix``, ``cp.async``,
``ld.shared.v4``) of an address that is not 16-byte aligned faults. The stock simulator
refuses the option outright ("Array alignment is not supported in cudasim"), so a kernel
written for the GPU (lesson 7's tiles, declared ``alignment=16``) could not run in it, nor be
replayed there to find an index outside an array before it runs on the GPU (the checkers'
first run, ``check/_preflight``). ``install()`` makes the simulator accept the option with
the GPU compiler's own rules (a positive power of two, a multiple of a pointer's size; a
wrong one is the same ``ValueError``) and return an array whose data starts at that
alignment, so what the GPU would refuse is refused here too. Nothing here runs on a GPU.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .._numba_private import simulator_patch


def validate(alignment: Any) -> None:
    """The GPU compiler's rules for ``alignment=`` (numba-cuda's own, same words)."""
    if alignment is None:
        return
    if not isinstance(alignment, (int, np.integer)) or isinstance(alignment, bool):
        raise ValueError("Alignment must be an integer")
    if alignment <= 0:
        raise ValueError("Alignment must be positive")
    if alignment & (alignment - 1):
        raise ValueError("Alignment must be a power of 2")
    pointer = struct.calcsize("P")
    if alignment % pointer:
        raise ValueError(f"Alignment must be a multiple of {pointer}")


def aligned(array: np.ndarray, alignment: int) -> np.ndarray:
    """``array``'s values in a new array whose data starts at a multiple of ``alignment``."""
    if array.ctypes.data % alignment == 0:
        return array
    raw = np.zeros(array.nbytes + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    out = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def declaring_line() -> tuple:
    """(file, line) of the kernel's ``cuda.shared.array`` call: the simulator tells one
    block's shared arrays apart by the line that declares them. The frames of the patches
    around the simulator's ``array`` (this module's, the checkers' observers', registered in
    :data:`PLUMBING`) are skipped, however many are stacked."""
    import sys

    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in PLUMBING:
        f = f.f_back
    return (f.f_code.co_filename, f.f_lineno) if f is not None else ("?", 0)


PLUMBING = {__file__}  # files whose functions wrap the simulator's shared arrays


def _dtype(dtype: Any) -> np.dtype:
    from numba.core import types
    from numba.np import numpy_support

    return numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else np.dtype(dtype)


@simulator_patch
def install() -> None:
    """Let the simulator's shared and local arrays take ``alignment=`` (idempotent)."""
    from numba.cuda.simulator import kernelapi

    plain_shared = kernelapi.FakeCUDAShared.array
    plain_local = kernelapi.FakeCUDALocal.array

    def shared_array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        validate(alignment)
        if shape == 0:
            # the dynamic shared array: one buffer every call shares, which NumPy allocates
            # at least 16-byte aligned already
            return plain_shared(self, shape, dtype)
        # (the stock method names the allocation by its caller's line, which would be this
        # function's: every array would be one)
        site = declaring_line()
        res = self._allocations.get(site)
        if res is None:
            res = np.empty(shape, _dtype(dtype))
            res = res if alignment is None else aligned(res, int(alignment))
            self._allocations[site] = res
        return res

    def local_array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> Any:
        validate(alignment)
        out = plain_local(self, shape, dtype)
        return out if alignment is None else aligned(out, int(alignment))

    shared_array.__name__ = local_array.__name__ = "array"
    kernelapi.FakeCUDAShared.array = shared_array
    kernelapi.FakeCUDALocal.array = local_array
