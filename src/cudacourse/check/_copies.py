"""On a GPU, during a check, a copy between a device array and a host array of another
size is refused as the simulator refuses it.

The simulator's ``copy_to_device`` raises "incompatible shape: (64,) vs. (0,)" for a chunk
copied from an empty host slice (``h_in[hi:hi]``, ``h_in[lo:k]``); a GPU's Numba returns
without copying anything when the host array is empty, so the same learner mistake was
"a shape mismatch" in one and "elements never written" in the other (issue 45's mutants of
pipelined_scale on the H200, 2026-12-05). Within :func:`exact` (every public ``check_*``
runs inside), a GPU's ``copy_to_device`` and ``copy_to_host`` of an empty host array to or
from a non-empty device array raise the simulator's ValueError, which ``_raised`` names
(``shape_mismatch``). Outside a check, and in the simulator, nothing changes.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

from . import _engine as E


def refuse_empty(device_array: Any, host: Any) -> None:
    """The simulator's words for a copy between ``device_array`` and an empty ``host``."""
    size = getattr(host, "size", None)
    if size == 0 and int(getattr(device_array, "size", 0)) != 0:
        raise ValueError(f"incompatible shape: {tuple(device_array.shape)} vs. "
                         f"{tuple(host.shape)}")


def _checked(copy: Callable) -> Callable:
    """``copy`` (``copy_to_device(self, ary, stream=0)`` or ``copy_to_host(self, ary=None,
    stream=0)``) that first refuses an empty host side."""
    @functools.wraps(copy)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        ary = args[0] if args else kwargs.get("ary")
        if ary is not None:
            refuse_empty(self, ary)
        return copy(self, *args, **kwargs)

    wrapper._cudacourse_exact = True  # type: ignore[attr-defined]
    return wrapper


@contextlib.contextmanager
def exact() -> Iterator[None]:
    """Within the block, on a GPU, copies with an empty host side are refused (see above)."""
    if E.simulator():
        yield
        return
    from numba.cuda.cudadrv import devicearray

    # the class that defines them, which _trace patches too (a subclass attribute here would
    # shadow _trace's: on the H200, 2026-12-05, its record lost the copies that synchronize,
    # and lesson 3's master was told it returned before its streams were done)
    cls = devicearray.DeviceNDArrayBase
    saved = {name: cls.__dict__.get(name) for name in ("copy_to_device", "copy_to_host")}
    base = {name: getattr(cls, name) for name in saved}
    if getattr(base["copy_to_device"], "_cudacourse_exact", False):  # already (nested)
        yield
        return
    for name, fn in base.items():
        setattr(cls, name, _checked(fn))
    try:
        yield
    finally:
        for name, fn in saved.items():
            if fn is None:
                delattr(cls, name)
            else:
                setattr(cls, name, fn)
