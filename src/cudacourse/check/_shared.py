"""Shared memory that starts poisoned in the simulator: ``poisoned_shared()``.

The stock simulator gives every ``cuda.shared.array`` whatever ``np.empty`` returns (often
zeros), which hides a missing barrier or a tile never filled; inside ``poisoned_shared()`` a
new shared array starts full of :data:`SHARED_POISON` (floats) or -999999 (integers).
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from typing import Iterator

import numpy as _np

from . import _engine

SHARED_POISON = 1.0e30  # what unwritten shared memory holds during a check (simulator)


@contextlib.contextmanager
def poisoned_shared() -> Iterator[None]:
    """In the simulator, make new shared arrays start full of POISON instead of whatever
    ``np.empty`` returns (often zeros, which would hide a missing barrier or zero-fill)."""
    if not _engine.simulator():
        yield
        return
    from numba.cuda.simulator import kernelapi  # here: the simulator's modules exist only in it

    cls = kernelapi.FakeCUDAShared
    original = cls.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:
            return original(self, shape, dtype, alignment)
        from numba.np import numpy_support
        from numba.core import types

        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        # Allocations are identified by the kernel's source line, as the simulator does.
        caller = traceback.extract_stack(sys._getframe())[-2][0:2]
        res = self._allocations.get(caller)
        if res is None:
            res = _engine._full(shape, SHARED_POISON if _np.dtype(dtype).kind == "f" else -999999,
                         dtype=dtype)
            self._allocations[caller] = res
        return res

    cls.array = array
    try:
        yield
    finally:
        cls.array = original
