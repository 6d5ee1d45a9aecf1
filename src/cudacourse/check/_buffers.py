"""One model of memory for the simulator: accesses are observed by buffer, not by object.

A GPU kernel sees memory, not Python objects: ``o = out.T``, ``out.reshape(...)``,
``out[2:]``, ``out.real`` or a row ``a[i]`` all name the bytes of ``out``. Numba's simulator
hands a kernel plain NumPy views for such attributes, so an observation kept on a wrapper
object (a ``FakeCUDAArray`` subclass) misses every access made through a view.

Here the observed object is the NumPy array itself: a :class:`Probe` is an ``ndarray``
subclass, and NumPy makes every view of a subclass instance an instance too
(``__array_finalize__``), so each view carries the :class:`Buffer` it aliases and its byte
offset into it. An element access through any view is turned into the flat element numbers
("slots") of the buffer it touches, and reported to the buffer's observer, whatever chain of
views led there. Paths around ``__getitem__`` (iteration, ``.flat``, ``.item()``, ``.fill()``,
ufuncs and NumPy functions) are routed through the same report. Kernels that would need a
path this module does not follow do not compile for a GPU (the compile gate refuses them).

This module imports nothing of the package: ``_engine`` (read counts) and ``_observe``
(per-thread logs, shared-memory races) both build on it.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

import numpy as _np

_ndarray = _np.ndarray
_integer = _np.integer
_arange = _np.arange
_zeros = _np.zeros
_int64 = _np.int64
_unravel = _np.unravel_index


class Buffer:
    """The memory of one observed array (C-contiguous), and who is told about accesses.

    ``report(buffer, slots, write)`` is called, from the simulated thread that made it, for
    every access with the flat element numbers of the buffer it touched. ``outside(view,
    axis, index, size, write)`` is called for an integer index outside a view's extent; it
    returns True when the access is to be dropped (a read then yields ``sentinel``), as a
    GPU would read or write whatever lies there instead of raising."""

    def __init__(self, base: _ndarray, name: str, report: Callable[..., None],
                 outside: Callable[..., bool] | None = None, sentinel: Any = 0) -> None:
        ai = base.__array_interface__
        self.ptr = int(ai["data"][0])
        self.itemsize = int(base.dtype.itemsize)
        self.size = int(base.size)
        self.shape = tuple(base.shape)
        self.name = name
        self.report = report
        self.outside = outside
        self.sentinel = sentinel

    def contains(self, addr: int) -> bool:
        return self.ptr <= addr < self.ptr + self.size * self.itemsize


def in_kernel() -> bool:
    """True in a simulated GPU thread (the simulator runs each as a Python thread)."""
    return hasattr(threading.current_thread(), "threadIdx")


def _addr(a: _ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _plain(x: Any) -> Any:
    return x.view(_ndarray) if isinstance(x, Probe) else x


class Probe(_ndarray):
    """An array (and each of its views) that reports element accesses to its Buffer."""

    def __array_finalize__(self, obj: Any) -> None:
        buf = getattr(obj, "_cc_buf", None)
        if buf is None or not buf.contains(_addr(self)) or self.size == 0:
            self._cc_buf = None  # a copy (or no buffer): plain local memory from now on
            return
        self._cc_buf = buf
        self._cc_off = _addr(self) - buf.ptr

    # --- where an access lands -------------------------------------------------------
    def _offsets(self) -> _ndarray:
        """Byte offset into the buffer of every element of this view (its shape)."""
        off = _zeros(self.shape, dtype=_int64) + int(self._cc_off)
        for axis, (n, st) in enumerate(zip(self.shape, self.strides)):
            shape = [1] * self.ndim
            shape[axis] = n
            off = off + (_arange(n, dtype=_int64) * st).reshape(shape)
        return off

    def _all_slots(self) -> list[int]:
        return [int(o) // self._cc_buf.itemsize for o in self._offsets().ravel()]

    def _slots(self, idx: Any, write: bool) -> list[int] | None:
        """Slots ``self[idx]`` touches; None when the access goes outside (and is dropped)."""
        buf = self._cc_buf
        it = idx if type(idx) is tuple else (idx,)
        if len(it) == self.ndim:  # the hot path: one element by integer indices
            off = self._cc_off
            axis = 0
            for i, n, st in zip(it, self.shape, self.strides):
                if type(i) is not int and not isinstance(i, _integer):
                    break  # a slice, an array, a bool...: the general path below
                i = int(i)
                if not 0 <= i < n:
                    # Python (and Numba, on a GPU) would wrap a negative index around to
                    # another element, or raise past the end where a GPU reads or writes
                    # whatever memory lies there: both are outside the index range
                    if buf.outside is not None and buf.outside(self, axis, i, n, write):
                        return None
                    break
                off += i * st
                axis += 1
            else:
                return [off // buf.itemsize]
        try:
            sel = self._offsets()[idx]
        except (IndexError, TypeError, ValueError):
            return []  # NumPy raises for this index below; nothing was accessed
        return [int(o) // buf.itemsize for o in _np.ravel(sel)]

    def _tell(self, slots: list[int], write: bool) -> None:
        if slots and not _quiet.depth and in_kernel():
            self._cc_buf.report(self._cc_buf, slots, write)

    # --- element access ----------------------------------------------------------------
    def __getitem__(self, idx: Any) -> Any:
        if getattr(self, "_cc_buf", None) is None:
            return super().__getitem__(idx)
        slots = self._slots(idx, False)
        if slots is None:
            return self._cc_buf.sentinel
        out = super().__getitem__(idx)
        if not (isinstance(out, Probe) and getattr(out, "_cc_buf", None) is not None):
            self._tell(slots, False)  # a value (or a copy) was read; a view reads nothing
        return out

    def __setitem__(self, idx: Any, value: Any) -> None:
        if getattr(self, "_cc_buf", None) is None:
            return super().__setitem__(idx, _plain(value))
        if isinstance(value, Probe) and getattr(value, "_cc_buf", None) is not None:
            value._tell(value._all_slots(), False)
            value = value.view(_ndarray)
        slots = self._slots(idx, True)
        if slots is None:
            return None  # outside: on a GPU a guard zone (or other memory) takes it
        super().__setitem__(idx, value)
        self._tell(slots, True)
        return None

    def __iter__(self):
        # ndarray iteration probes one index past the end; count only real elements
        for i in range(len(self)):
            yield self[i]

    @property
    def flat(self) -> "_Flat":
        return _Flat(self)

    def item(self, *args: Any) -> Any:
        if getattr(self, "_cc_buf", None) is None:
            return super().item(*args)
        if not args:  # the one element of a one-element array
            self._tell(self._all_slots(), False)
            return self.view(_ndarray).item()
        idx = args if len(args) > 1 else args[0]
        if isinstance(idx, (int, _integer)) and self.ndim != 1:
            idx = tuple(int(v) for v in _unravel(int(idx), self.shape))
        value = self[idx]
        return value.item() if hasattr(value, "item") else value

    def fill(self, value: Any) -> None:
        if getattr(self, "_cc_buf", None) is not None:
            self._tell(self._all_slots(), True)
        self.view(_ndarray).fill(value)

    # --- whole-array operations: every element of a probed operand -------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        for x in inputs:
            if isinstance(x, Probe) and getattr(x, "_cc_buf", None) is not None:
                x._tell(x._all_slots(), False)
        outs = kwargs.get("out")
        if outs:
            for o in outs:
                if isinstance(o, Probe) and getattr(o, "_cc_buf", None) is not None:
                    o._tell(o._all_slots(), True)
            kwargs["out"] = tuple(_plain(o) for o in outs)
        if method == "at" and inputs and isinstance(inputs[0], Probe):
            inputs[0]._tell(inputs[0]._all_slots(), True)
        return getattr(ufunc, method)(*(_plain(x) for x in inputs), **kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
        # np.transpose(out), np.reshape(out, ...): a view, no access. np.copyto(out, x),
        # np.sum(out), np.concatenate(...): every element of each probed argument read, and
        # the destination's written. Accesses NumPy makes inside are not counted twice.
        writer = getattr(func, "__name__", "") in _WRITERS
        if _quiet.depth:
            return super().__array_function__(func, types, args, kwargs)
        _quiet.depth += 1
        try:
            out = super().__array_function__(func, types, args, kwargs)
        finally:
            _quiet.depth -= 1
        if isinstance(out, Probe) and getattr(out, "_cc_buf", None) is not None:
            return out  # a view of an argument: nothing was read yet
        targets = [(v, writer and k == 0) for k, v in enumerate(args)]
        targets += [(v, k == "out") for k, v in kwargs.items()]
        for v, write in targets:
            for x in (v if isinstance(v, (list, tuple)) else (v,)):
                if isinstance(x, Probe) and getattr(x, "_cc_buf", None) is not None:
                    x._tell(x._all_slots(), write)
        return out


# NumPy functions that write into their first argument
_WRITERS = frozenset({"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"})


class _Quiet(threading.local):
    depth = 0


_quiet = _Quiet()


class _Flat:
    """``probe.flat``: indexing in C order through the probe (NumPy's flatiter would write
    memory without a word)."""

    def __init__(self, arr: Probe) -> None:
        self._arr = arr

    def _idx(self, i: Any) -> Any:
        if isinstance(i, (int, _integer)) and self._arr.ndim != 1:
            n = self._arr.size
            j = int(i)
            if 0 <= j < n:
                return tuple(int(v) for v in _unravel(j, self._arr.shape))
        return i if self._arr.ndim == 1 else None

    def __getitem__(self, i: Any) -> Any:
        idx = self._idx(i)
        if idx is None:
            return self._arr.reshape(-1)[i]
        return self._arr[idx]

    def __setitem__(self, i: Any, value: Any) -> None:
        idx = self._idx(i)
        if idx is None:
            self._arr.reshape(-1)[i] = value
        else:
            self._arr[idx] = value

    def __iter__(self):
        for i in range(self._arr.size):
            yield self[i]

    def __len__(self) -> int:
        return int(self._arr.size)


def probe(base: _ndarray, buffer: Buffer) -> Probe:
    """``base`` seen through a probe: same memory, every access reported to ``buffer``."""
    p = base.view(Probe)
    p._cc_buf = buffer
    p._cc_off = _addr(p) - buffer.ptr
    return p


def buffer_of(x: Any) -> Buffer | None:
    """The Buffer an array (a probe, a simulator device array around one) aliases."""
    inner = getattr(x, "__dict__", {}).get("_ary", x)
    inner = getattr(getattr(inner, "__dict__", {}), "get", lambda *_: None)("_ary") or inner
    return getattr(inner, "_cc_buf", None) if isinstance(inner, Probe) else None
