"""Shared memory that starts poisoned in the simulator: ``poisoned_shared()``.

The stock simulator gives every ``cuda.shared.array`` whatever ``np.empty`` returns (often
zeros), which hides a missing barrier or a tile never filled; inside ``poisoned_shared()`` a
new shared array starts full of :data:`SHARED_POISON` (floats) or -999999 (integers).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import numpy as _np

from . import _engine
from ..runtime import simalign

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
    simalign.PLUMBING.add(__file__)  # array() below is not the kernel's line

    def array(self, shape, dtype, alignment=None):
        simalign.validate(alignment)  # a GPU's rules; the simulator needs no alignment
        if shape == 0:
            return original(self, shape, dtype)
        from numba.np import numpy_support
        from numba.core import types

        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        # Allocations are identified by the kernel's source line, as the simulator does.
        caller = simalign.declaring_line()
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
