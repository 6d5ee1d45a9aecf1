"""Record what a host function asks of the GPU, and find the stream mistakes in it.

In the simulator every copy and launch runs synchronously, so a pipeline that races (two
streams sharing a buffer without waiting for each other) or returns before its copies
finished still produces the right numbers. On a GPU it fails only sometimes. Neither way
teaches anything, so checkers do not rely on the numbers alone: ``tracing()`` temporarily
wraps Numba's public memory API (allocations, copies, launches, stream and event calls),
records every operation with its stream and the memory ranges it touches, and reasons about
ordering the way the CUDA programming model defines it:

* operations on one stream run in the order issued;
* the legacy default stream waits for all earlier work in other (blocking) streams, and
  work issued later on those streams waits for it; its copies return only when done;
* ``stream.synchronize()`` / ``cuda.synchronize()`` / ``event.synchronize()`` make the host
  wait; ``event.record(s1)`` then ``event.wait(s2)`` makes s2 wait for s1.

An asynchronous copy into pinned host memory (``copy_to_host(h, stream=s)``) lands, as
far as the traced code can tell, only when the host has waited for it: until then the
destination holds a NaN marker, and the copied values are delivered by the
``synchronize()`` that covers the copy. That is one legal schedule of a real GPU (the copy
engine may finish at any time before the synchronization), so a host that reads the
pinned buffer too early gets the marker, on a GPU as in the simulator.

Vector clocks turn these rules into a happens-before relation. Two operations that touch the
same bytes (at least one writing) without happens-before between them are a race, whatever
the simulator's numbers say. Everything is restored on exit, also after an exception.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as _np
from ..i18n import T, shown

_nan = _np.nan
_ndarray = _np.ndarray
_full = _np.full

DEFAULT = 0  # the legacy default stream, however it was named


@dataclass
class Op:
    """One operation issued to the GPU (or one the host did to memory the GPU uses)."""

    index: int
    kind: str  # "H2D", "D2H", "D2D", "launch", "fill", "host-write"
    stream: int
    what: str  # for messages: "copy of 256 float32 to the device"
    reads: list = field(default_factory=list)  # (space, lo, hi)
    writes: list = field(default_factory=list)
    n: int = 0  # position in its stream
    vc: dict = field(default_factory=dict)
    host_args: list = field(default_factory=list)  # launch arguments that were host arrays
    pageable: bool = False  # an asynchronous copy touching pageable host memory
    args: list = field(default_factory=list)  # a launch's array arguments, in order
    block: int = 0  # a launch's threads per block (x)
    grid_dims: tuple = ()  # a launch's grid, (x, y, z) as given
    block_dims: tuple = ()  # a launch's block, (x, y, z) as given

    def io(self) -> tuple[tuple, tuple] | None:
        """(input, output) memory ranges of a launch of a two-buffer step kernel
        (``step(src, dst, ...)``: the exercises' convention), or None for another number of
        array arguments."""
        return (self.args[0], self.args[1]) if self.kind == "launch" and \
            len(self.args) == 2 else None

    def aliased(self) -> bool:
        """A launch that got the same memory as two of its array arguments."""
        return any(same_memory(a, b) for k, a in enumerate(self.args) for b in self.args[k + 1:])


def same_memory(a: tuple | None, b: tuple | None) -> bool:
    """Two memory ranges (``memory_range``) that share bytes."""
    return bool(a and b and a[0] == b[0] and a[1] < b[2] and b[1] < a[2])


@dataclass
class Alloc:
    kind: str  # "device_array", "to_device", "pinned_array", "mapped_array"
    nbytes: int
    space: str
    lo: int
    hi: int


def _extent(base: int, shape: tuple, strides: tuple | None, itemsize: int) -> tuple[int, int]:
    if any(s == 0 for s in shape):
        return base, base
    if strides is None:  # C-contiguous
        size = itemsize
        for s in shape:
            size *= s
        return base, base + size
    lo = hi = base
    for s, st in zip(shape, strides):
        if st >= 0:
            hi += (s - 1) * st
        else:
            lo += (s - 1) * st
    return lo, hi + itemsize


def memory_range(x: Any) -> tuple[str, int, int] | None:
    """("dev" | "host", first byte, one past the last byte) of an array, or None."""
    inner = getattr(x, "_ary", None)  # the simulator's FakeCUDAArray wraps a NumPy array
    if type(x).__name__ in ("FakeCUDAArray", "FakeWithinKernelCUDAArray") and inner is not None:
        if type(inner).__name__ == "FakeCUDAArray":
            inner = inner._ary
        ai = inner.__array_interface__
        return ("dev",) + _extent(ai["data"][0], ai["shape"], ai["strides"],
                                  inner.dtype.itemsize)
    if not isinstance(x, _ndarray) or type(x).__name__ == "MappedNDArray":
        cai = getattr(x, "__cuda_array_interface__", None)
        if cai is not None:
            itemsize = _np.dtype(cai["typestr"]).itemsize
            return ("dev",) + _extent(cai["data"][0], tuple(cai["shape"]), cai.get("strides"),
                                      itemsize)
    if isinstance(x, _ndarray):
        ai = x.__array_interface__
        return ("host",) + _extent(ai["data"][0], ai["shape"], ai["strides"], x.dtype.itemsize)
    return None


def _overlap(a: list, b: list) -> bool:
    return any(sa == sb and lo < hi2 and lo2 < hi
               for sa, lo, hi in a for sb, lo2, hi2 in b)


def _join(*clocks: dict) -> dict:
    out: dict = {}
    for c in clocks:
        for k, v in c.items():
            if v > out.get(k, 0):
                out[k] = v
    return out


class Trace:
    """What a host function issued, in order, with the ordering rules applied."""

    def __init__(self, readonly: list[Any] = ()) -> None:
        self.ops: list[Op] = []
        self.allocs: list[Alloc] = []
        self.races: list[str] = []
        self.pinned: list[tuple[str, int, int]] = []
        self.readonly = [r for r in (memory_range(a) for a in readonly) if r]
        self.stream_names: dict[int, str] = {DEFAULT: T("the default stream")}
        self.streams_created = 0
        self._stream_vc: dict[int, dict] = {}
        self._host_vc: dict = {}
        self._event_vc: dict[int, dict] = {}
        self._sim_keys: dict[int, int] = {}
        self._keepalive: list = []
        self.deferred: list[tuple[Op, Any, Any]] = []  # (copy, staging buffer, destination)
        self.delivered_late = 0  # deferred copies delivered by a synchronization
        self.syncs: list[tuple[int, str]] = []  # (operations issued before it, what waited)

    # --- names ------------------------------------------------------------------------
    def stream_key(self, stream: Any) -> int:
        if not stream:
            return DEFAULT
        handle = getattr(stream, "handle", None)
        if handle is not None:  # a real Numba stream: its driver handle names it
            try:
                key = int(handle)
            except (TypeError, ValueError):
                key = id(handle)
            key = DEFAULT if key in (0, 1, 2) else key  # default, legacy, per-thread
        else:  # the simulator's streams have no handle
            key = self._sim_keys.get(id(stream))
            if key is None:
                key = -(len(self._sim_keys) + 1)
                self._sim_keys[id(stream)] = key
                self._keepalive.append(stream)
        if key not in self.stream_names:
            self.stream_names[key] = T("stream {n_stream_names}",
                                       n_stream_names=len(self.stream_names))
        return key

    def default_key(self, stream: Any) -> None:
        """Make ``stream`` (a simulator default-stream object) mean the default stream."""
        self._sim_keys[id(stream)] = DEFAULT
        self._keepalive.append(stream)

    # --- ordering ---------------------------------------------------------------------
    def _vc(self, s: int) -> dict:
        return self._stream_vc.setdefault(s, {})

    def _hb(self, a: Op, b: Op) -> bool:
        return b.vc.get(a.stream, 0) >= a.n

    def host_done(self, a: Op) -> bool:
        return self._host_vc.get(a.stream, 0) >= a.n

    def issue(self, op: Op, synchronous: bool = False) -> Op:
        s = op.stream
        if s == DEFAULT:  # the legacy default stream waits for all earlier work
            base = _join(self._vc(s), self._host_vc, *self._stream_vc.values())
        else:  # a blocking stream waits for earlier default-stream work
            base = _join(self._vc(s), self._host_vc, self._vc(DEFAULT))
        base[s] = base.get(s, 0) + 1
        op.n, op.vc, op.index = base[s], base, len(self.ops)
        self._stream_vc[s] = dict(base)
        for prev in self.ops:
            if self._conflict(prev, op) and not self._hb(prev, op):
                self.races.append(self._describe_race(prev, op))
        self.ops.append(op)
        if synchronous:
            self._host_vc = _join(self._host_vc, base)
        return op

    def host_write(self, rng: tuple, what: str) -> None:
        """The host is about to overwrite ``rng``: any GPU work still using it races."""
        for prev in self.ops:
            if _overlap(prev.reads + prev.writes, [rng]) and not self.host_done(prev):
                self.races.append(
                    T("the host refilled a pinned buffer for {what} while operation "
                      "#{index_plus_1} ({what_2} on {stream_names}) could still be using it: "
                      "synchronize that stream before reusing the buffer", what=what,
                      index_plus_1=prev.index + 1, what_2=prev.what,
                      stream_names=self.stream_names[prev.stream]))

    def sync_stream(self, key: int) -> None:
        self.syncs.append((len(self.ops), f"{self.stream_names.get(key, 'a stream')}"
                                          ".synchronize()"))
        self._host_vc = _join(self._host_vc, self._vc(key))
        self.deliver()

    def sync_all(self) -> None:
        self.syncs.append((len(self.ops), "cuda.synchronize()"))
        self._host_vc = _join(self._host_vc, *self._stream_vc.values())
        self.deliver()

    def deliver(self) -> None:
        """Copy the staged results of deferred copies the host has now waited for into
        their destinations, in issue order."""
        keep = []
        for op, staging, dest in self.deferred:
            if self.host_done(op):
                _np.copyto(dest, staging)
                self.delivered_late += 1
            else:
                keep.append((op, staging, dest))
        self.deferred = keep

    def record_event(self, event: Any, key: int) -> None:
        self._event_vc[id(event)] = dict(self._vc(key))
        self._keepalive.append(event)

    def wait_event(self, event: Any, key: int) -> None:
        self._stream_vc[key] = _join(self._vc(key), self._event_vc.get(id(event), {}))

    def sync_event(self, event: Any) -> None:
        self.syncs.append((len(self.ops), "event.synchronize()"))
        self._host_vc = _join(self._host_vc, self._event_vc.get(id(event), {}))
        self.deliver()

    @staticmethod
    def _conflict(a: Op, b: Op) -> bool:
        return (_overlap(a.writes, b.reads) or _overlap(a.reads, b.writes)
                or _overlap(a.writes, b.writes))

    def buffer_name(self, rng: tuple) -> str:
        """Which allocation a memory range belongs to, in words."""
        for k, a in enumerate(self.allocs):
            if a.space == rng[0] and a.lo < rng[2] and rng[1] < a.hi:
                return T("the buffer from your call #{k_plus_1} that allocates memory ({kind})",
                         k_plus_1=k + 1, kind=a.kind)
        return T("the same {device} buffer", device=T("device") if rng[0] == "dev" else T("host"))

    def _describe_race(self, a: Op, b: Op) -> str:
        shared = [r for r in b.reads + b.writes if _overlap([r], a.reads + a.writes)]
        where = self.buffer_name(shared[0]) if shared else T("the same memory")
        return (T("operation #{index_plus_1} ({what} on {stream_names}) and operation "
                  "#{index_plus_1_2} ({what_2} on {stream_names_2}) both use {where}, and "
                  "nothing orders them, so on a GPU they can run at the same time",
                  index_plus_1=b.index + 1, what=b.what,
                  stream_names=self.stream_names[b.stream], index_plus_1_2=a.index + 1,
                  what_2=a.what, stream_names_2=self.stream_names[a.stream], where=where))

    # --- memory kinds ------------------------------------------------------------------
    def is_pinned(self, rng: tuple) -> bool:
        return any(s == rng[0] and lo <= rng[1] and rng[2] <= hi for s, lo, hi in self.pinned)

    def is_readonly(self, rng: tuple) -> bool:
        return any(s == rng[0] and lo <= rng[1] and rng[2] <= hi
                   for s, lo, hi in self.readonly)

    # --- summaries ---------------------------------------------------------------------
    def pending(self) -> list[Op]:
        """Operations the host has not waited for (call when the function has returned)."""
        return [op for op in self.ops if op.kind != "host-write" and not self.host_done(op)]

    def concurrent(self, kinds: tuple[str, ...] = ("H2D", "D2H", "launch")) -> list[tuple[Op, Op]]:
        """Pairs of operations (of ``kinds``, on two different streams) that nothing orders:
        a GPU may run them at the same time. This is the overlap a pipeline buys, measured
        from the record (happens-before), the same on every device: the simulator runs them
        one after another anyway, and a GPU's timing varies."""
        ops = [op for op in self.ops if op.kind in kinds]
        return [(a, b) for k, a in enumerate(ops) for b in ops[k + 1:]
                if a.stream != b.stream and not self._hb(a, b)]

    def device_copies(self, after_launch: bool = True) -> list[Op]:
        """Copies from device memory to device memory (``copy_to_device`` of a device array,
        or ``d[:] = other_device_array``); with ``after_launch``, only those issued after
        the first launch (a copy that sets up a buffer before any step is no mistake)."""
        launches = [op.index for op in self.ops if op.kind == "launch"]
        start = launches[0] if (launches and after_launch) else -1
        if after_launch and not launches:
            return []
        return [op for op in self.ops if op.index > start and (op.kind == "D2D" or
                (op.kind == "fill" and any(r[0] == "dev" for r in op.reads)))]

    def of(self, kind: str) -> list[Op]:
        return [op for op in self.ops if op.kind == kind]

    def streams_used(self) -> set[int]:
        return {op.stream for op in self.ops if op.kind != "host-write"}

    def log(self) -> str:
        """The operations, one per line, as a learner would want to read them."""
        lines = []
        for op in self.ops:
            lines.append(f"#{op.index + 1:<3} {shown(self.stream_names[op.stream]):<20} "
                         f"{shown(op.what)}")  # Text: in the course's language
        return "\n".join(lines) or T("(no GPU operations)")


# --- wrapping Numba ----------------------------------------------------------------------

_active: list[Trace] = []
# Not thread-local on purpose: the simulator runs kernel threads as Python threads, and
# their element writes happen while the launching thread is inside _inner().
_depth = [0]
_lock = threading.Lock()


@contextlib.contextmanager
def _inner() -> Iterator[None]:
    """Calls Numba makes on our behalf (inside a launch or a copy) are not recorded."""
    with _lock:
        _depth[0] += 1
    try:
        yield
    finally:
        with _lock:
            _depth[0] -= 1


def _outer() -> bool:
    return _depth[0] == 0 and bool(_active)


def _describe(x: Any) -> str:
    shape = getattr(x, "shape", ())
    dtype = getattr(x, "dtype", "")
    n = 1
    for s in shape:
        n *= s
    return f"{n} {dtype}"


def _poison(arr: Any) -> None:
    """Fill a fresh allocation with NaN, so a never-written element is visible."""
    dtype = getattr(arr, "dtype", None)
    if dtype is None or _np.dtype(dtype).kind != "f" or getattr(arr, "size", 0) == 0:
        return
    with _inner():
        if isinstance(arr, _ndarray):
            arr.fill(_nan)
        elif type(arr).__name__ == "FakeCUDAArray":
            arr._ary.fill(_nan)
        else:
            arr.copy_to_device(_full(arr.shape, _nan, dtype=arr.dtype))


def _pinned_like(ary: Any, sim: bool) -> Any:
    """A pinned host buffer like ``ary`` (a plain array in the simulator)."""
    if sim:
        return _np.empty_like(ary)
    from numba import cuda

    return cuda.pinned_array(ary.shape, dtype=ary.dtype)


def _wrap(trace: Trace) -> list[tuple[Any, str, Any]]:
    """Install wrappers; return (owner, attribute, original) to restore."""
    from numba import cuda

    from numba.cuda.core import config

    sim = bool(config.ENABLE_CUDASIM)
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, make: Any) -> None:
        orig = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        saved.append((owner, name, orig))
        setattr(owner, name, make(orig))

    def alloc(kind: str, space: str = "dev"):
        def make(orig):
            def wrapper(*args, **kwargs):
                with _inner():
                    arr = orig(*args, **kwargs)
                if _outer():
                    trace._keepalive.append(arr)
                    rng = memory_range(arr)
                    if rng:
                        trace.allocs.append(Alloc(kind, rng[2] - rng[1], rng[0], rng[1], rng[2]))
                        if kind in ("pinned_array", "mapped_array"):
                            trace.pinned.append(rng)
                    _poison(arr)
                return arr
            return wrapper
        return make

    for name, kind in (("device_array", "device_array"), ("device_array_like", "device_array"),
                       ("pinned_array", "pinned_array"), ("pinned_array_like", "pinned_array"),
                       ("mapped_array", "mapped_array")):
        if hasattr(cuda, name):
            patch(cuda, name, alloc(kind))

    def copy_op(kind: str, src: Any, dst: Any, stream: Any, synchronous: bool) -> None:
        # Keep every array alive while tracing: a freed buffer's address can be reused by
        # the next allocation, which would look like the same buffer (a GPU does not race
        # there: Numba defers frees, and cuMemFree waits for the device).
        trace._keepalive += [src, dst]
        key = trace.stream_key(stream)
        rs, rd = memory_range(src), memory_range(dst)
        host = rs if kind == "H2D" else rd if kind == "D2H" else None
        pageable = bool(host and key != DEFAULT and not trace.is_pinned(host))
        if kind == "H2D" and rs and not trace.is_readonly(rs) and trace.is_pinned(rs):
            trace.host_write(rs, T("copy #{n}", n=len(trace.ops) + 1))
        words = {"H2D": T("copy to the device"), "D2H": T("copy to the host"),
                 "D2D": T("device-to-device copy")}[kind]
        trace.issue(Op(0, kind, key, T("{words} of {describe}", words=words,
                                       describe=_describe(dst)),
                       reads=[rs] if rs else [], writes=[rd] if rd else [], pageable=pageable),
                    synchronous=synchronous)

    def make_to_device(orig):
        def to_device(obj, stream=0, copy=True, to=None):
            with _inner():
                out = orig(obj, stream=stream, copy=copy, to=to)
            if _outer():
                trace._keepalive.append(out)
                if to is None:
                    rng = memory_range(out)
                    if rng:
                        trace.allocs.append(Alloc("to_device", rng[2] - rng[1], *rng))
                if copy and isinstance(obj, _ndarray):
                    copy_op("H2D", obj, out if to is None else to, stream, not stream)
            return out
        return to_device

    patch(cuda, "to_device", make_to_device)

    def bound_stream(arr: Any, stream: Any) -> Any:
        return stream if stream else getattr(arr, "stream", 0)

    def make_copy_to_host(orig):
        def copy_to_host(self, ary=None, stream=0):
            s = bound_stream(self, stream) if _outer() else 0
            dest_rng = memory_range(ary) if ary is not None and s else None
            if (dest_rng and dest_rng[0] == "host" and trace.is_pinned(dest_rng)
                    and trace.stream_key(s) != DEFAULT
                    and _np.dtype(ary.dtype).kind == "f"):
                # Deferred: the copy goes to a staging buffer now (stream order kept); the
                # destination shows the marker until a synchronization covers the copy.
                from ._observe import poison_host

                with _inner():
                    staging = _pinned_like(ary, sim)
                    orig(self, staging, stream=stream)
                trace._keepalive.append(staging)
                poison_host(ary)
                copy_op("D2H", self, ary, s, False)
                trace.deferred.append((trace.ops[-1], staging, ary))
                return ary
            with _inner():
                out = orig(self, ary, stream=stream)
            if _outer():
                s = bound_stream(self, stream)
                copy_op("D2H", self, out, s, not s)
            return out
        return copy_to_host

    def make_copy_to_device(orig):
        def copy_to_device(self, ary, stream=0):
            with _inner():
                out = orig(self, ary, stream=stream)
            if _outer():
                s = bound_stream(self, stream)
                kind = "H2D" if isinstance(ary, _ndarray) and memory_range(ary)[0] == "host" \
                    else "D2D"
                copy_op(kind, ary, self, s, not s)
            return out
        return copy_to_device

    def make_setitem(orig):
        def setitem(self, key, value):
            with _inner():
                out = orig(self, key, value)
            if _outer():
                with _inner():
                    view = self[key]
                rd = memory_range(view) or memory_range(self)
                rs = memory_range(value) if hasattr(value, "shape") else None
                s = bound_stream(self, 0)
                trace._keepalive += [self, value]
                trace.issue(Op(0, "fill", trace.stream_key(s),
                               T("assignment into a device array ({describe})",
                                 describe=_describe(self)),
                               reads=[rs] if rs else [], writes=[rd] if rd else []),
                            synchronous=not s)
            return out
        return setitem

    def host_read(arr: Any, what: str) -> None:
        """The host read device memory itself (an element, or np.asarray of the array):
        a copy to the host, on the default stream, that the host waits for."""
        rng = memory_range(arr)
        trace._keepalive.append(arr)
        trace.issue(Op(0, "D2H", DEFAULT, T("{what} ({describe}) read by the host", what=what,
                                            describe=_describe(arr)),
                       reads=[rng] if rng else []), synchronous=True)

    def make_getitem_read(orig):
        def getitem(self, idx):
            out = orig(self, idx)
            if _outer() and not hasattr(threading.current_thread(), "threadIdx") and \
                    memory_range(out) is None:  # a value, not a device view
                host_read(self, T("an element of a device array"))
            return out
        return getitem

    def make_as_host(orig):
        def as_host(self, *args, **kwargs):
            out = orig(self, *args, **kwargs)
            if _outer():
                host_read(self, T("np.asarray of a device array"))
            return out
        return as_host

    def launch_op(kernel: Any, grid: Any, block: Any, stream: Any, args: tuple) -> None:
        key = trace.stream_key(stream)
        trace._keepalive.append(args)
        ranges, host_args = [], []
        for pos, a in enumerate(args):
            rng = memory_range(a)
            if rng is None:
                continue
            if rng[0] == "host":
                host_args.append(pos)
            ranges.append(rng)
        name = getattr(getattr(kernel, "py_func", None), "__name__", "kernel")
        g = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        b = tuple(block) if isinstance(block, (tuple, list)) else (block,)
        while len(g) > 1 and g[-1] == 1:
            g = g[:-1]
        while len(b) > 1 and b[-1] == 1:
            b = b[:-1]
        shape = f"[{', '.join(map(str, g))}], [{', '.join(map(str, b))}]" if len(g) > 1 or \
            len(b) > 1 else f"{g[0]}, {b[0]}"
        writes = [r for r in ranges if not trace.is_readonly(r)]
        trace.issue(Op(0, "launch", key, T("launch {name}[{shape}]", name=name,
                                           shape=shape), reads=list(ranges),
                       writes=writes, host_args=host_args, args=list(ranges),
                       block=int(b[0]), grid_dims=g, block_dims=b),
                    synchronous=bool(host_args) and not stream)

    def make_stream(orig, default: bool = False):
        def stream(*args, **kwargs):
            s = orig(*args, **kwargs)
            if _outer():
                if default:
                    if getattr(s, "handle", None) is None:
                        trace.default_key(s)
                else:
                    trace.streams_created += 1
                    trace.stream_key(s)
            return s
        return stream

    patch(cuda, "stream", make_stream)
    for name in ("default_stream", "legacy_default_stream"):
        if hasattr(cuda, name):
            patch(cuda, name, lambda orig: make_stream(orig, default=True))

    def make_sync_all(orig):
        def synchronize(*args, **kwargs):
            out = orig(*args, **kwargs)
            if _outer():
                trace.sync_all()
            return out
        return synchronize

    patch(cuda, "synchronize", make_sync_all)

    def make_pinned(orig):
        # Numba's real signature: cuda.pinned(*arrays), any number of host arrays (the
        # simulator's stand-in takes one: each array is pinned in turn, the same thing)
        @contextlib.contextmanager
        def pinned(*arrays):
            with contextlib.ExitStack() as stack:
                for a in arrays:
                    stack.enter_context(orig(a))
                added = [r for r in (memory_range(a) for a in arrays) if r]
                trace.pinned.extend(added)
                try:
                    yield
                finally:
                    for r in added:
                        trace.pinned.remove(r)
        return pinned

    patch(cuda, "pinned", make_pinned)

    def make_stream_sync(orig):
        def synchronize(self):
            out = orig(self)
            if _outer():
                trace.sync_stream(trace.stream_key(self))
            return out
        return synchronize

    def make_event(method: str):
        def make(orig):
            if method == "synchronize":
                def sync(self):
                    out = orig(self)
                    if _outer():
                        trace.sync_event(self)
                    return out
                return sync

            def f(self, stream=0):
                out = orig(self, stream)
                if _outer():
                    key = trace.stream_key(stream)
                    (trace.record_event if method == "record" else trace.wait_event)(self, key)
                return out
            return f
        return make

    if sim:
        from numba.cuda.simulator import api as sim_api
        from numba.cuda.simulator import kernel as sim_kernel
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        patch(FakeCUDAArray, "copy_to_host", make_copy_to_host)
        patch(FakeCUDAArray, "copy_to_device", make_copy_to_device)
        patch(FakeCUDAArray, "__setitem__", make_setitem)
        patch(FakeCUDAArray, "__getitem__", make_getitem_read)
        # np.asarray(d) in the simulator reads the wrapped array's memory in place (through
        # __array_interface__); on a GPU it copies it to the host (DeviceNDArray.__array__)
        def make_getattr(orig):
            def getattr_(self, name):
                out = orig(self, name)
                host = not hasattr(threading.current_thread(), "threadIdx")
                if name in _AS_HOST and _outer() and host:
                    host_read(self, T("np.asarray of a device array"))
                return out
            return getattr_

        patch(FakeCUDAArray, "__getattr__", make_getattr)
        patch(sim_api.stream, "synchronize", make_stream_sync)

        def make_auto(orig):
            @contextlib.contextmanager
            def auto_synchronize(self):
                yield self
                self.synchronize()
            return auto_synchronize

        patch(sim_api.stream, "auto_synchronize", make_auto)
        for m in ("record", "wait", "synchronize"):
            patch(sim_api.Event, m, make_event(m))

        def make_getitem(orig):
            def getitem(self, config):
                out = orig(self, config)
                self._cudacourse_stream = config[2] if len(config) > 2 else 0
                self._cudacourse_shared = config[3] if len(config) > 3 else 0
                return out
            return getitem

        def make_call(orig):
            def call(self, *args):
                if self._device or sim_kernel._kernel_context is not None or not _outer():
                    return orig(self, *args)
                stream = self.__dict__.pop("_cudacourse_stream", 0)
                shared = self.__dict__.pop("_cudacourse_shared", 0)
                # What a GPU refuses at the launch, refused here before the simulator runs
                # it: more than 1024 threads per block, too much shared memory, a kernel
                # that does not compile for sm_90 (the simulator would run them all).
                _limits(self, self.grid_dim, self.block_dim, shared, args)
                with _inner():
                    out = orig(self, *args)
                launch_op(self, self.grid_dim, self.block_dim, stream, args)
                return out
            return call

        patch(sim_kernel.FakeCUDAKernel, "__getitem__", make_getitem)
        patch(sim_kernel.FakeCUDAKernel, "__call__", make_call)
    else:
        from numba.cuda import dispatcher
        from numba.cuda.cudadrv import devicearray, driver

        patch(devicearray.DeviceNDArrayBase, "copy_to_host", make_copy_to_host)
        patch(devicearray.DeviceNDArrayBase, "copy_to_device", make_copy_to_device)
        patch(devicearray.DeviceNDArray, "__setitem__", make_setitem)
        patch(devicearray.DeviceNDArray, "__getitem__", make_getitem_read)
        patch(devicearray.DeviceNDArray, "__array__", make_as_host)
        patch(driver.Stream, "synchronize", make_stream_sync)
        for m in ("record", "wait", "synchronize"):
            patch(driver.Event, m, make_event(m))

        def make_configure(orig):
            def configure(self, griddim, blockdim, stream=0, sharedmem=0):
                cfg = orig(self, griddim, blockdim, stream, sharedmem)
                cfg._cudacourse_stream = stream
                return cfg
            return configure

        def make_launch(orig):
            def call(self, *args):
                if not _outer():
                    return orig(self, *args)
                # The same verdict as in the simulator: a GPU refuses a block of more than
                # 1024 threads with a bare CUDA_ERROR_INVALID_VALUE, which names no cause.
                from . import _engine as E

                E.validate_launch(tuple(self.griddim), tuple(self.blockdim))
                with _inner():
                    out = orig(self, *args)
                launch_op(self.dispatcher, self.griddim, self.blockdim,
                          getattr(self, "_cudacourse_stream", 0), args)
                return out
            return call

        patch(dispatcher.CUDADispatcher, "configure", make_configure)
        patch(dispatcher._LaunchConfiguration, "__call__", make_launch)
    return saved


# what NumPy asks of an object it turns into an array (np.asarray, np.array, np.copyto...)
_AS_HOST = frozenset({"__array_struct__", "__array_interface__", "__array__"})


def _limits(kernel: Any, grid: Any, block: Any, shared: int, args: tuple) -> None:
    """Raise the checkers' ``bad_launch`` / ``does_not_compile`` failure for a launch a GPU
    would refuse (simulator only: a GPU refuses it itself, and the host function raises)."""
    __tracebackhide__ = True
    from . import _engine as E

    g = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    b = tuple(block) if isinstance(block, (tuple, list)) else (block,)
    name = getattr(getattr(kernel, "fn", None), "__name__", None) or \
        getattr(getattr(kernel, "py_func", None), "__name__", "kernel")
    E.validate_launch(g, b)
    with _inner():
        res = E.compile_gate(kernel, args, name)
    E.validate_shared(res, int(shared or 0), name)


@contextlib.contextmanager
def tracing(readonly: list[Any] = ()) -> Iterator[Trace]:
    """Record Numba memory operations made inside the block (one trace at a time).

    ``readonly``: host or device arrays the traced code must only read (the caller's
    inputs): launches are assumed not to write them, and copies from them need no refill.
    """
    if _active:
        raise RuntimeError("tracing() does not nest")
    trace = Trace(readonly)
    saved = _wrap(trace)
    _active.append(trace)
    try:
        yield trace
    finally:
        _active.clear()
        for owner, name, orig in reversed(saved):
            setattr(owner, name, orig)
