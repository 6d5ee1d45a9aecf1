"""What each thread of a learner's kernel did, seen from inside the simulator.

Right numbers do not prove the technique an exercise asks for: one thread can add a whole
vector, lane 0 can loop over its warp, thread 0 can sum its block serially, and a race can
happen to give the right answer. ``observing()`` temporarily instruments Numba's CUDA
simulator and records, per thread (block, thread):

* element reads and writes of the arrays passed through ``watch`` (the array itself is
  unchanged: the watched view shares its memory), observed by buffer (``_buffers``): an
  access through any view the kernel makes (``out.T``, a slice, a row, ``.real``) is an
  access to the array it aliases, as on a GPU;
* every ``cuda.syncthreads()`` reached, by source line, so that a barrier that not every
  thread of the block reaches (inside ``if t < s``, or after an early ``return``) is found
  whatever the simulator's scheduling did;
* every shared-memory access (through the array or any view of it), between which
  barriers it happened: a slot written by one
  thread and read or written by another between the same two barriers is a race on a GPU
  (the CUDA memory model orders them only through the barrier), even when the simulator's
  interleaving gave the right numbers. Shared memory also starts poisoned in every block
  (the stock simulator reuses one array for all blocks, and ``np.empty`` is often zeros);
* warp-shuffle calls, and values a kernel ``return``s (a kernel returns nothing on a GPU).

On a GPU none of this is visible; there ``observing()`` records nothing (``live`` is
False) and the checkers have the same kernel re-checked in a simulator subprocess, unless a
native-evidence session (``_instrument``) hands out an instrumented build's observation.

This module owns the simulator's observer (``observing``), the verdicts every checker shares
on an observation (``launch``, ``spread``, ``no_divergent_barrier``, ...), failures and
poisoned outputs, and a kernel checker's common start (``kernel_cases``: which observer
runs, and the simulator replay on a GPU). The record itself (``Observation`` and its parts)
is ``_observation``'s, below this module and ``_instrument`` alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Any, Iterator, NoReturn

import numpy as _np

from . import _buffers
from ..runtime import simalign
from . import _engine as E
from ._failure import fail
from ..i18n import T
# The record both observers fill (this module in the simulator, _instrument on any device),
# kept below both; its names are this module's too, as the checkers know them.
from ._observation import (POISON, POISON_INT, ArrayLog, Divergence, Fill,  # noqa: F401
                           Observation, OutOfBounds, Race, _dims, _key, _kernel_site, _SIM,
                           _sim_dir, thread_name)
from ._observation import verb as _verb
from ..i18n import T

_np = E._np
# trusted references, captured at import (before any learner cell can rebind them)
_uint32 = _np.uint32
_uint64 = _np.uint64
_dtype = _np.dtype

# A NaN with a payload: what outputs hold before the kernel runs. A kernel that computes NaN
# (0/0, inf - inf) writes the canonical NaN instead, so the two can be told apart.
_NAN_BITS32 = _np.uint32(0x7FE0DEAD)  # quiet, so arithmetic on it keeps the payload
_NAN_BITS64 = _np.uint64(0x7FFCDEAD0000DEAD)


# --- failures ----------------------------------------------------------------------------

def ctx_text(context: Any) -> str:
    if isinstance(context, dict):
        return ", ".join(f"{k}={E.fmt(v)}" for k, v in context.items())
    if isinstance(context, str):
        return context  # a T(...) context keeps its template: shown in the learner's language
    return str(context or "")


# the last observation made (one list: module state that never changes identity), so that a
# comparison can ask the record whether an element it finds "never written" was written
_LAST: list = []


def compare(got: Any, want: Any, *, context: Any = None, **kwargs: Any) -> None:
    """``E.compare`` with this module's dict contexts, re-raised as a structured failure.
    An output the comparison finds "never written" is checked against the record of the
    last observed launch: elements that were written and still hold the check's NaN
    poison were computed from the output itself (``c[i, j] += ...`` into memory nobody
    initialised), which is named instead."""
    __tracebackhide__ = True
    reads = kwargs.pop("reads", None)
    try:
        E.compare(got, want, context=context if isinstance(context, dict) else
                  ctx_text(context), **kwargs)
    except E.CheckFailure as exc:
        if getattr(exc, "cause", None) == "unwritten":
            fed_back(got, kwargs.get("name", ""), exc.context)
            _colliding_writes(got, kwargs.get("name", ""), exc)
        if getattr(exc, "cause", None) == "wrong_values":
            _first_wrong_value(kwargs.get("name", ""), exc, reads)
        if getattr(exc, "cause", None) and getattr(exc, "context", None) is not None:
            raise
        fail("wrong_values", str(exc), None)


def fed_back(got: Any, name: Any, context: Any) -> None:
    """Raise "accumulated into the output" when the record shows that the elements of
    ``got`` holding NaN (the check's poison, or NaN computed from it) were all written by
    the kernel, and that the kernel read the output: it computed from the output itself
    (``c[i, j] += ...`` into memory nobody initialised). The record decides, never the NaN's
    bits: NumPy (the simulator) keeps the poison's payload through ``nan + x``, a GPU's
    arithmetic makes it the canonical NaN (on the H200, 2026-12-05, the same kernel was
    "never written" in one and "NaN computed" in the other)."""
    __tracebackhide__ = True
    obs = _LAST[0] if _LAST else None
    if obs is None or not getattr(obs, "live", False) or not isinstance(name, str):
        return
    log = obs.arrays.get(name)
    if log is None or log.element_writes is None or not log.total_reads:
        return
    got = E._asarray(got)
    if got.dtype.kind != "f":
        return
    left = E._isnan(got).ravel()
    writes = _asarray_int(log.element_writes)
    if writes.size != left.size or not left.any():
        return
    written = left & (writes > 0)
    if not written.any() or written.sum() < left.sum():
        return  # some elements really were never written: the first diagnosis stands
    first = int(E._flatnonzero(written)[0])
    idx = E._unravel_index(first, got.shape) if got.ndim > 1 else first
    who, _n = log.busiest_reader()
    fail("accumulated_into_output",
         T("{k} of {n} elements of {name} were written by the kernel, yet still hold the NaN "
           "the check filled {name} with, the first {at}; and {thread_name} read {name}: the "
           "kernel computes from the output itself, such as `{name}[...] += ...` into memory "
           "nobody initialised (a new device array holds whatever was there before). "
           "Accumulate into a local variable (acc = 0.0, then acc += ... in the loop) and "
           "store it once: {name}[...] = acc", k=int(written.sum()), n=int(got.size),
           name=name, at=E.at(name, idx), thread_name=thread_name(who)),
         dict(context) if isinstance(context, dict) else context)


def _span(values: list) -> str:
    """``3``, ``0..15``, or ``{0, 16, 32}`` for the values one axis of a read took."""
    v = sorted(set(values))
    if len(v) == 1:
        return str(v[0])
    if v[-1] - v[0] + 1 == len(v):
        return f"{v[0]}..{v[-1]}"
    return "{" + ", ".join(str(x) for x in v[:4]) + (", ...}" if len(v) > 4 else "}")


def _elements(name: str, shape: tuple, idx: list) -> Any:
    """The elements ``idx`` (index tuples) of ``name`` in a few words: a[0, 0..15] (16)."""
    if not idx:
        return T("nothing of {name}", name=name)
    axes = [_span([i[d] for i in idx]) for d in range(len(idx[0]))]
    return T("{name}[{axes}] ({n} elements)", name=name, axes=", ".join(axes), n=len(set(idx)))


def _first_wrong_value(name: Any, exc: E.CheckFailure, reads: Any) -> None:
    """No family matched: explain the first wrong element from the record, what the thread
    that wrote it read (and, with ``reads(index) -> {array: [index, ...]}`` from the
    checker, what the reference reads for it, and the line of the first read that
    differs). No cause is named: the evidence is shown."""
    __tracebackhide__ = True
    obs = _LAST[0] if _LAST else None
    idx = exc.context.get("index")
    if obs is None or not getattr(obs, "live", False) or not isinstance(name, str) or \
            idx is None:
        return
    log = obs.arrays.get(name)
    if log is None or not log.writer or not log.shape:
        return
    index = tuple(idx) if isinstance(idx, (list, tuple)) else (idx,)
    try:
        flat = int(_np.ravel_multi_index(index, log.shape))
    except ValueError:
        return
    if flat not in log.writer:
        return
    who, line = log.writer[flat]
    parts, versus, first_line = [], [], 0
    want = reads(index) if reads is not None else None
    for other in obs.arrays.values():
        if other is log or not other.shape:
            continue
        mine = [(tuple(int(i) for i in _np.unravel_index(el, other.shape)), ln)
                for el, ln in other.read_log.get(who, [])]
        got_idx = [m for m, _ln in mine]
        if got_idx:
            parts.append(_elements(other.name, other.shape, got_idx))
        if want is None or other.name not in want:
            continue
        ref = {tuple(int(i) for i in t) for t in want[other.name]}
        missing = sorted(ref - set(got_idx))
        extra = sorted(set(got_idx) - ref)
        if missing:
            versus.append(T("it did not read {what}", what=_elements(other.name, other.shape,
                                                                      missing)))
        if extra:
            versus.append(T("it read {what}, which the reference does not",
                            what=_elements(other.name, other.shape, extra)))
            first_line = first_line or next((ln for m, ln in mine if m not in ref), 0)
    if not parts and not versus:
        return
    # an input the reference reads for this element, of which the writer read nothing at
    # all: the record singles out the mistake (the formula leaves that input out)
    ignored = [arr for arr in (want or {}) if want[arr] and arr in obs.arrays and
               obs.arrays[arr] is not log and not obs.arrays[arr].read_log.get(who)]
    read = ", ".join(str(p) for p in parts) if parts else T("no watched input")
    text = T("{message} From the record: {at} was written by {thread_name} (line {line}), "
             "which read {read}.", message=exc.text_message or exc.message,
             at=E.at(name, index), thread_name=thread_name(who), line=line,
             read=_joined(parts) if parts else read)
    if want is not None:
        if versus:
            text = T("{text} Against the reference: {versus}{where}.", text=text,
                     versus=_joined(versus),
                     where=T(" (the first such read at line {line})", line=first_line)
                     if first_line else "")
        else:
            text = T("{text} It read the same elements as the reference: the arithmetic "
                     "on them differs.", text=text)
    if ignored:
        text = T("{text} It never read {array}, which the formula needs.", text=text,
                 array=ignored[0])
        raise E.CheckFailure(text, cause="input_ignored", hint=exc.hint,
                             context=exc.context) from None
    raise E.CheckFailure(text, cause=exc.cause, hint=exc.hint, context=exc.context) from None


def _joined(parts: list) -> Any:
    """Texts joined with the language's comma (each shown in the learner's language)."""
    if len(parts) == 1:
        return parts[0]
    return T("{first}; {rest}", first=parts[0], rest=_joined(parts[1:]))


def _colliding_writes(got: Any, name: Any, exc: E.CheckFailure) -> None:
    """Elements never written while others were written by several threads: the launch
    has the threads, the index maps them onto each other (``blockIdx.x * gridDim.x`` where
    ``blockDim.x`` belongs); "does your launch cover every element" would point away."""
    __tracebackhide__ = True
    obs = _LAST[0] if _LAST else None
    if obs is None or not getattr(obs, "live", False) or not isinstance(name, str):
        return
    log = obs.arrays.get(name)
    if log is None or log.element_writes is None:
        return
    counts = _asarray_int(log.element_writes)
    if counts.size != E._asarray(got).size:
        return
    many = E._flatnonzero(counts > 1)
    never = E._flatnonzero(counts == 0)
    if not many.size or not never.size:
        return
    shape = E._asarray(got).shape
    pos = (lambda k: E._unravel_index(int(k), shape) if len(shape) > 1 else int(k))
    fail("wrong_index",
         T("{k} elements of {name} were written by more than one thread (the first, {at}, "
           "{times} times) while {m} were never written (the first {at_2}): the launch has "
           "threads enough, but the index maps several threads onto one element and none "
           "onto others. Check how the index is computed: blockIdx times blockDim (the "
           "block's size, not gridDim, the grid's), plus threadIdx (cuda.grid does it)",
           k=int(many.size), name=name, at=E.at(name, pos(many[0])),
           times=int(counts[int(many[0])]), m=int(never.size), at_2=E.at(name, pos(never[0]))),
         {**exc.context})


def _asarray_int(v: Any) -> Any:
    return E._asarray(v).ravel()


def cause_of(exc: BaseException) -> str:
    return str(getattr(exc, "cause", "") or "")


def passed(name: str, *facts: str, hidden: bool = False) -> str:
    """The one success line a checker returns (a notebook cell shows it), naming what was
    verified."""
    return E.passes(name, *facts, hidden=hidden)


# --- poisoned outputs whose "never written" cannot be confused with a computed NaN ------

def poison(g: "E.Guarded") -> "E.Guarded":
    """Refill a Guarded output's view with the payload NaN (float outputs only)."""
    dt = _dtype(g.view.dtype)
    if dt.kind != "f":
        return g
    bits = {4: (_NAN_BITS32, _uint32), 8: (_NAN_BITS64, _uint64)}.get(dt.itemsize)
    if bits is None:
        return g
    host = E._full(g.shape, bits[0], dtype=bits[1]).view(dt)
    g.view.copy_to_device(host)
    return g


def poison_host(ary: Any) -> None:
    """Fill a float NumPy array with the payload NaN (what "not there yet" looks like)."""
    dt = _dtype(ary.dtype)
    if dt.kind == "f" and dt.itemsize in (4, 8):
        ary.view(_uint32 if dt.itemsize == 4 else _uint64)[...] = (
            _NAN_BITS32 if dt.itemsize == 4 else _NAN_BITS64)


def poisoned(got: Any) -> Any:
    """Mask of elements still holding the payload NaN (never written, or not arrived yet)."""
    got = E._asarray(got)
    if got.dtype.kind != "f" or got.dtype.itemsize not in (4, 8):
        return E._full(got.shape, False)
    return E._isnan(got) & ~computed_nan(got)


def output(shape: Any, name: str, dtype: Any = None, fill: str = "poison") -> "E.Guarded":
    """An output between guard zones: ``fill="poison"`` (floats: the payload NaN; integers:
    the marker -999999, which ``compare`` reports as never written) or ``"zero"`` (an
    accumulator the kernel adds into, e.g. with ``cuda.atomic.add``)."""
    dtype = _dtype(dtype or E._float32)
    if fill == "zero":
        return E.Guarded.make(shape, dtype, name, fill=E._np.zeros(E._prod(shape), dtype),
                              output=True)
    if fill != "poison":
        raise ValueError(f"output {name}: fill must be 'poison' or 'zero', got {fill!r}")
    return poison(E.Guarded.make(shape, dtype, name))


def computed_nan(got: Any) -> Any:
    """Mask of NaNs the kernel wrote (not the poison left in unwritten elements)."""
    got = E._asarray(got)
    if got.dtype.kind != "f" or got.dtype.itemsize not in (4, 8):
        return E._full(got.shape, False)
    nan = E._isnan(got)
    bits = _NAN_BITS32 if got.dtype.itemsize == 4 else _NAN_BITS64
    raw = got.view(_uint32 if got.dtype.itemsize == 4 else _uint64)
    return nan & (raw != bits)


def no_computed_nan(got: Any, name: str, context: str, why: str = "") -> None:
    fed_back(got, name, context)  # NaN from the poison the kernel read back: said as such
    bad = E._flatnonzero(computed_nan(got))
    if bad.size:
        got = E._asarray(got)
        idx = E._unravel_index(int(bad[0]), got.shape) if got.ndim > 1 else (int(bad[0]),)
        where = ", ".join(str(int(i)) for i in idx)
        fail("nan_result",
             T("{name}[{where}] = nan, and {size} of {size_2} elements are NaN: your kernel "
               "wrote NaN there (they were written, not skipped). {value}", name=name,
               where=where, size=bad.size, size_2=got.size,
               value=why or T('Look for 0 / 0, inf - inf, or a value read from memory no thread had written yet.')), context)


def check_guards(g: "E.Guarded", hint: str, context: str = "") -> None:
    """``Guarded.check_guards``, naming an off-by-one guard (``i <= n``) as such."""
    host = g.buffer.copy_to_host()
    n = int(E._prod(g.shape))
    guard = (host.size - n) // 2
    sentinel = E._asarray(g.sentinel, host.dtype)
    after = E._flatnonzero(host[guard + n:] != sentinel)
    if after.size == 1 and after[0] == 0:
        fail("off_by_one_guard",
             T("off by one: the guard lets thread n write ({name}[{n}] was written, one past "
               "the last element {name}[{n_minus_1}]). Use `if i < n`, not `if i <= n`.",
               name=g.name, n=n, n_minus_1=n - 1),
             context)
    try:
        g.check_guards(hint)
    except E.CheckFailure as exc:
        if getattr(exc, "cause", None):
            raise
        fail("out_of_bounds_write", str(exc), context)


def off_by_one_index(exc: BaseException) -> tuple[int, int] | None:
    """(index, size) when a launch failed on an index exactly one past an axis' end."""
    import re

    ctx = getattr(exc, "context", None)
    if isinstance(ctx, dict) and "index" in ctx and "size" in ctx:
        i, s = int(ctx["index"]), int(ctx["size"])
    else:
        m = re.search(r"index (-?\d+) on an axis of size (\d+)", str(exc))
        if not m:
            return None
        i, s = int(m.group(1)), int(m.group(2))
    return (i, s) if i == s else None


# --- the simulator's observer ------------------------------------------------------------

_PAUSED = [0]  # > 0: launches are not observed (a launch's first run, ``_preflight``)


@contextlib.contextmanager
def unobserved() -> Iterator[None]:
    """Within the block, ``observing()``'s patches record nothing: the instrumented first
    run of a launch (``_preflight``) is not the launch the observation is about."""
    _PAUSED[0] += 1
    try:
        yield
    finally:
        _PAUSED[0] -= 1


@contextlib.contextmanager
def observing() -> Iterator[Observation]:
    """Instrument the simulator for the duration of the block (no-op on a GPU, except
    during a native-evidence session: then an instrumented build observes, see
    ``_instrument``)."""
    from . import _instrument

    native = _instrument.observation()
    _LAST[:] = [native]
    if native is not None:
        try:
            yield native
        finally:
            _instrument.release(native)
        return
    if not E.simulator():
        yield Observation(False)
        return
    if not _SIM[0]:
        _SIM[0] = _sim_dir()
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator import kernelapi

    obs = Observation(True)
    _LAST[:] = [obs]
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, new: Any) -> None:
        saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, new)

    orig_sync = sim_kernel.BlockThread.__dict__["syncthreads"]

    def syncthreads(self):
        if _PAUSED[0]:
            return orig_sync(self)
        fname, line = _kernel_site()
        with obs.lock:
            obs.barriers[_key(self)].append(line)
            obs.barrier_file.setdefault(line, fname)
        return orig_sync(self)

    patch(sim_kernel.BlockThread, "syncthreads", syncthreads)

    def shared_array(self, shape, dtype, alignment=None):
        if shape == 0 or _PAUSED[0]:
            return orig_shared(self, shape, dtype, alignment)
        simalign.validate(alignment)  # a GPU's rules; the simulator needs no alignment
        from numba.core import types
        from numba.np import numpy_support

        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        t = threading.current_thread()
        site = simalign.declaring_line()
        block = tuple(getattr(t, "blockIdx", ()))
        with obs.lock:
            per_block = self.__dict__.setdefault("_cc_alloc", {})
            res = per_block.get((block, site))
            if res is None:
                res, aid = obs._new_shared(shape, dtype, site)
                obs._shared_meta[aid]["block"] = block
                obs._shared_by_block[block].append(aid)
                per_block[(block, site)] = res
        return res

    orig_shared = kernelapi.FakeCUDAShared.__dict__["array"]
    simalign.PLUMBING.add(__file__)  # shared_array() is not the kernel's line
    patch(kernelapi.FakeCUDAShared, "array", shared_array)

    for name in ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync"):
        fn = kernelapi.FakeCUDAModule.__dict__.get(name)
        if fn is None:
            continue
        inner = fn.__func__ if isinstance(fn, staticmethod) else fn

        def counted(*args, _inner=inner, **kwargs):
            t = threading.current_thread()
            if hasattr(t, "threadIdx") and not _PAUSED[0]:
                with obs.lock:
                    obs.shuffles[_key(t)] += 1
            return _inner(*args, **kwargs)

        patch(kernelapi.FakeCUDAModule, name, staticmethod(counted))

    for name, fn in list(kernelapi.FakeCUDAAtomic.__dict__.items()):
        if name.startswith("_") or not callable(fn):
            continue

        def atomic(self, *args, _fn=fn, **kwargs):
            t = threading.current_thread()
            if not hasattr(t, "threadIdx") or _PAUSED[0]:
                return _fn(self, *args, **kwargs)
            k = _key(t)
            with obs.lock:
                obs.atomics[k[0]] += 1
                obs._in_atomic.add(k)
            try:
                return _fn(self, *args, **kwargs)
            finally:
                with obs.lock:
                    obs._in_atomic.discard(k)

        patch(kernelapi.FakeCUDAAtomic, name, atomic)

    orig_run = sim_kernel.BlockManager.__dict__["run"]

    def run(self, grid_point, *args):
        if _PAUSED[0]:
            return orig_run(self, grid_point, *args)
        f = self._f

        def kernel_body(*a):
            value = f(*a)
            if value is not None:
                t = threading.current_thread()
                with obs.lock:
                    if len(obs.returned) < 4:
                        obs.returned.append((_key(t), value))
            return value

        self._f = kernel_body
        try:
            return orig_run(self, grid_point, *args)
        finally:
            self._f = f
            obs._end_block(tuple(grid_point), tuple(self._block_dim))

    patch(sim_kernel.BlockManager, "run", run)
    try:
        yield obs
    finally:
        for owner, name, orig in reversed(saved):
            setattr(owner, name, orig)


# --- verdicts every checker shares --------------------------------------------------------

def no_return_value(obs: Observation, name: str, out: str, context: str = "") -> None:
    if obs.live and obs.returned:
        key, value = obs.returned[0]
        fail("kernel_returns_value",
             T("{name} returned a value ({thread_name} returned {value}), but a kernel returns "
               "nothing: the GPU throws the value away. Write the result into {out} instead of "
               "returning it.", name=name, thread_name=thread_name(key), value=_short(value),
               out=out), context)


def no_divergent_barrier(obs: Observation, name: str, context: str = "") -> None:
    if obs.live and obs.divergences:
        fail("divergent_barrier", T("{name}: {divergence_words}.", name=name,
                                    divergence_words=obs.divergence_words()), context)


def launch(kernel: Any, grid: Any, block: Any, *args: Any, name: str = "kernel",
           obs: Observation | None = None, context: Any = None, oob: Any = None,
           shared: int = 0, stream: Any = 0) -> None:
    """The one launch of the kit: validated against a GPU's limits, compiled for sm_90 in the
    simulator, crashes turned into one diagnosis (``_engine.launch``); with ``obs`` (from
    ``observing()``), then a precise diagnosis of any index outside a watched array.

    In the simulator the watched arrays behave like a GPU's memory (an index outside reads
    a sentinel and a write there lands nowhere), so the kernel runs to the end and every
    thread that went outside is known: exactly thread n is an off-by-one guard (i <= n);
    only threads past the end is a missing guard; a thread inside the array reaching outside
    is index arithmetic. ``oob(records, block)`` may return a better (cause, message)."""
    __tracebackhide__ = True
    if obs is None:
        E.launch(kernel, grid, block, *args, name=name, shared=shared, stream=stream)
        return
    from . import _instrument  # here: _instrument imports this module

    run = _instrument.runner(obs)  # an instrumented build during a native session
    try:
        run(kernel, grid, block, *args, name=name)
    except E.CheckFailure as exc:
        seen = _preflight_records(exc, args, obs)
        if seen:  # found by the launch's first run: said as this observation would have
            obs.oob[:] = seen
        elif getattr(exc, "cause", None):
            raise
        else:
            fail("kernel_raised", str(exc), context)
    if not (obs.live and obs.oob):
        return
    b = (block,) if isinstance(block, int) else tuple(block)
    recs = list(obs.oob)
    if recs[0].shared is not None:  # a shared array: its declared shape is the evidence
        better = oob(recs, b) if getattr(oob, "sees_shared", False) else None
        fail(*(better or shared_out_of_bounds_words(recs[0])), context)
    better = oob(recs, b) if oob is not None else None
    if not better:
        better = out_of_bounds_words(recs, b, name)
    fail(better[0], better[1], context)


def _preflight_records(exc: BaseException, args: tuple, obs: Observation) -> list:
    """The accesses outside that a launch's instrumented first run found (``_preflight``),
    as this (simulator) observation would have recorded them; [] when there are none."""
    if not getattr(exc, "records", None) or not obs.live:  # none, or the simulator's own
        return []
    out = []
    for r in exc.records:
        if r.shared is not None:  # shared arrays: always observed
            out.append(r)
            continue
        pos = exc.positions.get(r.array)
        buf = _buffers.buffer_of(args[pos]) if pos is not None and pos < len(args) else None
        if buf is None or buf.name not in obs.arrays:
            return []  # not watched: the simulator refuses the index itself, in E.launch
        out.append(dataclasses.replace(r, array=buf.name))
    return out


def shared_out_of_bounds_words(r: Any) -> tuple[str, Any]:
    """(cause, message) for an index outside a shared array: its shape is the one declared,
    whatever the input's size, so a bounds guard on the input is never the fix."""
    decl, shape = r.shared
    return ("out_of_bounds_write" if r.write else "out_of_bounds_read",
            T("{thread_name} {verb} {array} with index {index} on its axis {axis}, of size "
              "{size} (line {line}): outside the shared array {array}, declared at line {decl} "
              "with shape {shape}. A shared array has the shape the kernel declares, whatever "
              "the input's size, so a bounds guard on the input does not help: check the "
              "declared shape (rows first, then columns) against how this index is computed",
              thread_name=thread_name(r.thread), verb=_verb(r.write), array=r.array,
              index=r.index, axis=r.axis, size=r.size, line=r.line, decl=decl,
              shape=E.fmt(tuple(shape))))


def out_of_bounds_words(recs: list, block: tuple, name: str) -> tuple[str, str]:
    """(cause, message) for the out-of-bounds accesses of a 1D launch."""
    r = recs[0]
    verb = _verb(r.write)
    first = (T("{thread_name} {verb} {array}[{index}] (line {line}), outside the array (size "
               "{size})", thread_name=thread_name(r.thread), verb=verb, array=r.array,
               index=r.index, line=r.line, size=r.size))
    if r.index < 0:
        return ("out_of_bounds_read", T("{first}: a negative index. Numba wraps it around "
                                        "to the end of the axis, as Python does, so the "
                                        "kernel silently uses another element (CUDA C would "
                                        "touch memory before the array); check how the index "
                                        "is computed.", first=first))
    gids = {x.grid_index(block) for x in recs}
    if len(block) == 1 and all(x.index == x.size for x in recs) and             gids == {recs[0].size}:
        return ("off_by_one_guard",
                T("off by one: the guard lets thread n through. Only thread i = n = {size} "
                  "went outside: it {verb} {array}[{size}] (line {line}), one past the last "
                  "element. Use `if i < n`, not `if i <= n`.", size=r.size, verb=verb,
                  array=r.array, line=r.line))
    inside = [x for x in recs if x.grid_index(block) < x.size]
    if len(block) == 1 and inside:
        x = inside[0]
        g = x.grid_index(block)
        per = [k for k in (2, 3, 4) if g > 0 and k * g < x.size <= x.index < k * g + k]
        if per:  # thread i handles elements k i .. k i + k - 1: the last group is partial
            return ("out_of_bounds_write" if x.write else "out_of_bounds_read", T(
                "thread i = {g} handles {k} elements ({k} * i to {k} * i + {last}) and "
                "{verb} {array}[{index}] (line {line}), past the end (size {size}): with {k} "
                "elements per thread the last thread's group is only partly inside the array "
                "when n is not a multiple of {k}. Guard every element you touch: "
                "if j < n, for each j", g=g, k=per[0], last=per[0] - 1,
                verb=T("wrote") if x.write else T("read"), array=x.array, index=x.index,
                line=x.line, size=x.size))
        shift = x.index - g
        hint = (T("off by one in the index: element i is at index i, not i {value} {shift}",
                  value='+' if shift > 0 else '-', shift=abs(shift))
                if abs(shift) == 1 else T("check how the index is computed"))
        return ("off_by_one" if abs(shift) == 1 else "out_of_bounds_read",
                T("thread i = {g}, inside the array, {wrote} {array}[{index}] (line {line}), "
                  "past the end (size {size}): {hint}.", g=g,
                  wrote=_verb(x.write), array=x.array, index=x.index,
                  line=x.line, size=x.size, hint=hint))
    cause = "out_of_bounds_write" if r.write else "out_of_bounds_read"
    return (cause, T("{first}: missing bounds guard? This launch has more threads than "
                     "elements, and {n_gids} threads past the end used the array; guard with "
                     "`if i < n` (n = the array's length) before touching it.", first=first,
                     n_gids=len(gids)))


def spread(obs: Observation, out: str, n: int, threads: int, name: str, context: str,
           per_thread: str = T("one element")) -> None:
    """The work is spread over the threads: each element of ``out`` written once, and no
    thread writing more than its share (ceil(n / threads)) of the ``n`` elements."""
    if not obs.live or out not in obs.arrays:
        return
    log = obs.arrays[out]
    ew = log.element_writes
    share = -(-n // threads)
    if ew.size and int(ew.max()) > 1:
        i = int(E._flatnonzero(ew > 1)[0])
        fail("redundant_work",
             T("{out}[{i}] was written {ew} times, and {sum} of {n} elements more than once "
               "({total_writes} writes for {n} elements): several threads (or every block) "
               "redo the same elements. Each element belongs to one thread: start at "
               "cuda.grid(1) and step by cuda.gridsize(1).", out=out, i=i, ew=int(ew[i]),
               sum=int((ew > 1).sum()), n=n, total_writes=log.total_writes), context)
    who, most = log.busiest_writer()
    if most > share:
        fail("serial_work",
             T("{thread_name} wrote {most} elements of {out} by itself, while this launch has "
               "{threads} threads for {n} elements (at most {share} each): the work is not "
               "spread over the threads. Give each thread {per_thread} (i = cuda.grid(1)).",
               thread_name=thread_name(who), most=most, out=out, threads=threads, n=n,
               share=share, per_thread=per_thread),
             context)


def _short(v: Any) -> str:
    try:
        return f"{float(v):.6g}"
    except (TypeError, ValueError):
        return type(v).__name__


def kernel_cases(part: Any, kernel: Any, name: str, nparams: int, *, hidden: bool = False,
                 seed: int | None = None) -> list:
    """A kernel checker's common start: ``kernel`` must be the learner's @cuda.jit kernel
    of ``nparams`` parameters; on a GPU ``part`` (the checker's module-level cases) runs
    first in a simulator replay, so the observed verdict comes first; then ``part`` runs
    here on this device. Returns its cases, for the checker's summary."""
    __tracebackhide__ = True
    E.require_kernel(kernel, name, nparams)
    from . import _instrument

    with _instrument.session(kernel) as native:  # GPU: an instrumented build observes
        if not native.active:
            replay(part, kernel, hidden=hidden, seed=seed)  # GPU: the sim verdict first
        try:
            cases = part(kernel, hidden=hidden, seed=seed)
        except E.CheckFailure as exc:
            # (not after an endless loop, which the build bounded: the kernel itself would
            # spin in the simulator's re-run until its budget, to say the same)
            if native.active and native.warp and not native.gave_up \
                    and exc.cause != "endless_loop":
                # Warp-level undefined behaviour (lanes that left before a shuffle) is the
                # cause of what the GPU saw: the simulator's diagnosis of it comes first.
                _remaining(part, kernel, hidden, seed)
            raise
    if native.active and native.gave_up:  # a launch the instrumented build could not follow
        if E.simulator():  # native evidence asked for in the simulator: its own observation
            part(kernel, hidden=hidden, seed=seed)
        else:
            replay(part, kernel, hidden=hidden, seed=seed)
    elif native.active and native.warp:
        _remaining(part, kernel, hidden, seed)
    return cases


def _remaining(part: Any, kernel: Any, hidden: bool, seed: int | None) -> None:
    """What only the simulator sees (warp-level undefined behaviour), within its budget."""
    __tracebackhide__ = True
    from . import _replay

    _replay.run_remaining_sim_checks(
        T("warp-level undefined behaviour (a shuffle or vote that some lanes do not reach)"),
        part, kernel, hidden=hidden, seed=seed)


def replay(part: Any, *subjects: Any, **kwargs: Any) -> None:
    """On a GPU, run ``part(*subjects, **kwargs)`` (a checker's cases, a module-level
    function) in a simulator subprocess on the learner's code rebuilt from source, where the
    observations above are made, and re-raise its failure here: one verdict, and the same
    diagnosis, on every device. In the simulator it does nothing: the checker's own run is
    the observed one."""
    __tracebackhide__ = True
    if E.simulator():
        return
    from . import _replay

    _replay.run_sim_checks(part, *subjects, **kwargs)
