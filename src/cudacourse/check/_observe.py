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
False) and the checkers have the same kernel re-checked in a simulator subprocess.
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import linecache
import os
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterator, NoReturn

from . import _buffers as _B
from . import _engine as E

_np = E._np
# trusted references, captured at import (before any learner cell can rebind them)
_zeros = _np.zeros
_arange = _np.arange
_uint32 = _np.uint32
_uint64 = _np.uint64
_integer = _np.integer
_ndindex = _np.ndindex
_unravel = _np.unravel_index
_dtype = _np.dtype
POISON = 1.0e30  # what unwritten shared memory holds during a check
POISON_INT = -999999
_HERE = os.path.abspath(__file__)
_BUFFERS = os.path.abspath(_B.__file__)

# A NaN with a payload: what outputs hold before the kernel runs. A kernel that computes NaN
# (0/0, inf - inf) writes the canonical NaN instead, so the two can be told apart.
_NAN_BITS32 = _np.uint32(0x7FE0DEAD)  # quiet, so arithmetic on it keeps the payload
_NAN_BITS64 = _np.uint64(0x7FFCDEAD0000DEAD)


# --- failures ----------------------------------------------------------------------------

def fail(cause: str, message: str, context: Any = None, hint: str = "") -> NoReturn:
    """Raise a structured CheckFailure: ``cause`` is a stable id (counted by reports),
    ``message`` the diagnosis a learner reads, ``context`` the case it happened in (a dict,
    or a sentence kept as ``case``)."""
    __tracebackhide__ = True
    if isinstance(context, str):
        context = {"case": context} if context else {}
    try:
        exc = E.CheckFailure(message, cause=cause, hint=hint, context=context or {})
    except TypeError:  # an engine without fields: keep the same text and attach them
        exc = E.CheckFailure(message + (f" [{context}]" if context else ""))
        for k, v in (("cause", cause), ("hint", hint), ("context", context)):
            try:
                setattr(exc, k, v)
            except AttributeError:
                pass
    raise exc


def ctx_text(context: Any) -> str:
    if isinstance(context, dict):
        fmt = getattr(E, "fmt", str)
        return ", ".join(f"{k}={fmt(v)}" for k, v in context.items())
    return str(context or "")


def compare(got: Any, want: Any, *, context: Any = None, **kwargs: Any) -> None:
    """``E.compare`` with this module's dict contexts, re-raised as a structured failure."""
    __tracebackhide__ = True
    try:
        E.compare(got, want, context=context if isinstance(context, dict) else
                  ctx_text(context), **kwargs)
    except E.CheckFailure as exc:
        if getattr(exc, "cause", None) and getattr(exc, "context", None) is not None:
            raise
        fail("wrong_values", str(exc), None)


def cause_of(exc: BaseException) -> str:
    return str(getattr(exc, "cause", "") or "")


def passed(name: str, *facts: str, hidden: bool = False) -> str:
    """The one success line a checker returns (a notebook cell shows it), naming what was
    verified."""
    make = getattr(E, "passes", None)
    if make is not None:
        return make(name, *facts, hidden=hidden)
    return f"{name} passes: {', '.join(facts)}" + ("" if hidden else "; hidden cases next")


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


def output(shape: Any, name: str, dtype: Any = None) -> "E.Guarded":
    return poison(E.Guarded.make(shape, dtype or E._float32, name))


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
    bad = E._flatnonzero(computed_nan(got))
    if bad.size:
        got = E._asarray(got)
        idx = E._unravel_index(int(bad[0]), got.shape) if got.ndim > 1 else (int(bad[0]),)
        where = ", ".join(str(int(i)) for i in idx)
        fail("nan_result",
             f"{name}[{where}] = nan, and {bad.size} of {got.size} elements are NaN: your "
             "kernel wrote NaN there (they were written, not skipped). "
             + (why or "Look for 0 / 0, inf - inf, or a value read from memory no thread "
                       "had written yet."), context)


def check_guards(g: "E.Guarded", hint: str, context: str = "") -> None:
    """``Guarded.check_guards``, naming an off-by-one guard (``i <= n``) as such."""
    host = g.buffer.copy_to_host()
    n = int(E._prod(g.shape))
    guard = (host.size - n) // 2
    sentinel = E._asarray(g.sentinel, host.dtype)
    after = E._flatnonzero(host[guard + n:] != sentinel)
    if after.size == 1 and after[0] == 0:
        fail("off_by_one_guard",
             f"off by one: the guard lets thread n write ({g.name}[{n}] was written, one past "
             f"the last element {g.name}[{n - 1}]). Use `if i < n`, not `if i <= n`.",
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


# --- the observation ----------------------------------------------------------------------

def _key(thread: Any) -> tuple:
    k = getattr(thread, "_cc_key", None)
    if k is None:
        k = (tuple(thread.blockIdx), tuple(thread.threadIdx))
        thread._cc_key = k
    return k


def _sim_dir() -> str:
    import numba.cuda.simulator as sim

    return os.path.dirname(os.path.abspath(sim.__file__))


def _kernel_site() -> tuple[str, int]:
    """(file, line) of the innermost frame that is the learner's code, not the simulator's."""
    if not _SIM[0]:
        _SIM[0] = _sim_dir()
    f = sys._getframe(2)
    while f is not None:
        fn = f.f_code.co_filename
        ours = _OURS.get(fn)
        if ours is None:  # decided once per file: this runs on every observed access
            ours = _OURS[fn] = bool(fn.startswith(_SIM[0]) or "simwarp" in fn or
                                    os.path.abspath(fn) in (_HERE, _BUFFERS))
        if not ours:
            return fn, f.f_lineno
        f = f.f_back
    return "?", 0


_OURS: dict[str, bool] = {}


_SIM = [""]


@dataclass
class ArrayLog:
    """Reads and writes of one watched global array."""

    name: str
    size: int
    reads: dict = field(default_factory=lambda: defaultdict(int))  # thread -> elements
    writes: dict = field(default_factory=lambda: defaultdict(int))
    element_writes: Any = None

    @property
    def total_reads(self) -> int:
        return sum(self.reads.values())

    @property
    def total_writes(self) -> int:
        return sum(self.writes.values())

    def busiest_writer(self) -> tuple[tuple, int]:
        if not self.writes:
            return ((), 0)
        k = max(self.writes, key=self.writes.get)
        return k, self.writes[k]

    def busiest_reader(self) -> tuple[tuple, int]:
        if not self.reads:
            return ((), 0)
        k = max(self.reads, key=self.reads.get)
        return k, self.reads[k]


@dataclass
class OutOfBounds:
    """The first index outside a watched array, and the thread that used it."""

    thread: tuple
    array: str
    axis: int
    index: int
    size: int
    line: int
    write: bool = False

    def grid_index(self, block: tuple, dim: int = 0) -> int:
        """The thread's cuda.grid(...) along ``dim`` for a launch with blocks ``block``."""
        return block[dim] * self.thread[0][dim] + self.thread[1][dim]


@dataclass
class Race:
    array: str  # "the shared array allocated at line 5"
    slot: tuple
    first: tuple  # (thread, "wrote" | "read", line)
    second: tuple
    between: str  # "before the first cuda.syncthreads()" or "between barriers 2 and 3"


@dataclass
class Fill:
    """A block's shared array that threads read in slots no thread of the block stored."""

    array: str
    block: tuple
    stored: int  # slots stored at least once
    total: int  # slots of the allocation
    read_unstored: int  # distinct slots read that were never stored

    def words(self) -> str:
        return (f"in block {_dims(self.block)}, {self.stored} of the {self.total} cells of "
                f"{self.array} were stored and {self.total - self.stored} never were; "
                f"{self.read_unstored} of those were read")


@dataclass
class Divergence:
    block: tuple
    line: int
    reached: list  # threads that reached the barrier at ``line``
    others: list  # threads that did not (went elsewhere or exited)
    other_line: int  # where the others went (0: they exited)
    condition: str  # source of the enclosing ``if``, when found


def _flat_slots(shape: tuple, idx: Any) -> list[int]:
    if not isinstance(idx, tuple):
        idx = (idx,)
    if len(idx) == len(shape) and all(isinstance(i, (int, _integer)) for i in idx):
        flat = 0
        for i, s in zip(idx, shape):
            i = int(i)
            if i < 0:
                i += s
            flat = flat * s + i
        return [flat]
    return [int(v) for v in _arange(int(E._prod(shape))).reshape(shape)[idx].ravel()]


def _dims(v: tuple) -> Any:
    """(5,) or (5, 0, 0) -> 5; (0, 3, 0) -> (0, 3): a thread or block index as written."""
    v = tuple(int(i) for i in v)
    while len(v) > 1 and v[-1] == 0:
        v = v[:-1]
    return v[0] if len(v) == 1 else v


def _thread_words(threads: list, total: int = 0) -> str:
    """'threads 64 to 127 of block 0' for a list of (block, thread) keys."""
    if not threads:
        return "no thread"
    ids = sorted(tuple(t[1]) for t in threads)
    b = _dims(threads[0][0])
    one_d = all(i[1:] == (0,) * (len(i) - 1) for i in ids)
    if one_d:
        flat = [i[0] for i in ids]
        if flat == list(range(flat[0], flat[0] + len(flat))):
            who = f"thread {flat[0]}" if len(flat) == 1 else f"threads {flat[0]} to {flat[-1]}"
        else:
            who = "threads " + ", ".join(map(str, flat[:6])) + (", ..." if len(flat) > 6 else "")
        return f"{who} of block {b}"
    eg = _dims(ids[0])
    return f"{len(ids)} threads of block {b} (thread {eg} among them)"


def thread_name(key: tuple) -> str:
    block, thread = key
    return f"thread {_dims(thread)} of block {_dims(block)}"


def _enclosing_if(filename: str, line: int) -> str:
    """The condition of the innermost ``if`` around ``line`` in the learner's source."""
    src = "".join(linecache.getlines(filename)) if filename else ""
    if not src:
        return ""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return ""
    best = ""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and node.body:
            lo = node.body[0].lineno
            hi = max(getattr(n, "end_lineno", lo) or lo for n in node.body)
            in_else = bool(node.orelse) and node.orelse[0].lineno <= line <= max(
                getattr(n, "end_lineno", 0) or 0 for n in node.orelse)
            if lo <= line <= hi or in_else:
                cond = ast.unparse(node.test)
                best = f"else of `if {cond}`" if in_else and not lo <= line <= hi else \
                    f"`if {cond}:`"
    return best


class Observation:
    """Everything recorded during one ``observing()`` block (simulator only)."""

    def __init__(self, live: bool) -> None:
        self.live = live
        self.lock = threading.RLock()
        self.arrays: dict[str, ArrayLog] = {}
        self.barriers: dict[tuple, list] = defaultdict(list)  # thread -> barrier lines
        self.barrier_file: dict[int, str] = {}
        self.shuffles: dict[tuple, int] = defaultdict(int)
        self.atomics: dict[tuple, int] = defaultdict(int)  # block -> atomic operations
        self._in_atomic: set = set()  # threads inside an atomic (its accesses do not race)
        self.shared_reads: dict[tuple, int] = defaultdict(int)
        self.shared_writes: dict[tuple, int] = defaultdict(int)
        self.returned: list[tuple[tuple, Any]] = []
        self.races: list[Race] = []
        self.divergences: list[Divergence] = []
        self.unfilled: list[tuple] = []  # (array, slot, reader, line): read, never stored
        self.stale: list[tuple] = []  # (array, slot, reader, line): left over from a reload
        self.fill: list[Fill] = []  # per block and shared array read where never stored
        self.blocks: list[tuple] = []
        self.oob: list[OutOfBounds] = []
        self._shared_state: dict[int, dict] = {}
        self._shared_meta: dict[int, dict] = {}
        self._shared_by_block: dict[tuple, list] = defaultdict(list)  # block -> ids
        self._shared_keep: list = []

    # --- global arrays ---------------------------------------------------------------
    def watch(self, view: Any, name: str) -> Any:
        """The array to pass to the kernel instead of ``view`` (same memory); on a GPU,
        ``view`` itself. Accesses are observed by buffer (``_buffers``): through ``view``
        and through every view of it the kernel makes (``.T``, a slice, a reshape, a row,
        ``.real``), all counted as accesses to ``name``."""
        if not self.live:
            return view
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        ary = view._ary if isinstance(view, FakeCUDAArray) else view
        if isinstance(ary, FakeCUDAArray):
            ary = ary._ary
        ary = _np.asarray(ary).view(_np.ndarray)
        log = ArrayLog(name, int(ary.size))
        log.element_writes = _zeros(ary.size, dtype=_np.int64)
        self.arrays[name] = log
        obs = self

        def report(buf: Any, slots: list, write: bool) -> None:
            k = _key(threading.current_thread())
            with obs.lock:
                if write:
                    log.writes[k] += len(slots)
                    for s in slots:
                        if 0 <= s < log.size:
                            log.element_writes[s] += 1
                else:
                    log.reads[k] += len(slots)

        def outside(v: Any, axis: int, index: int, size: int, write: bool) -> bool:
            # Outside the array, a GPU reads whatever lies there (here: the sentinel of an
            # input's guard zone) and carries on; so does the probe, recording it.
            if not _B.in_kernel():
                return False
            with obs.lock:
                if len(obs.oob) < 4096:
                    obs.oob.append(OutOfBounds(_key(threading.current_thread()), name, axis,
                                               index, size, _kernel_site()[1], write))
            return True

        sentinel = (ary.dtype.type(E.INPUT_SENTINEL) if ary.dtype.kind == "f" else
                    ary.dtype.type(0))
        buf = _B.Buffer(ary, name, report, outside, sentinel)
        return FakeCUDAArray(_B.probe(ary, buf))

    def log(self, name: str) -> ArrayLog:
        return self.arrays[name]

    # --- shared memory ---------------------------------------------------------------
    def _new_shared(self, shape: Any, dtype: Any, site: tuple) -> Any:
        fill = POISON if _dtype(dtype).kind == "f" else POISON_INT
        base = E._full(shape, fill, dtype=dtype)
        obs = self
        aid = len(self._shared_meta)

        def report(buf: Any, slots: list, write: bool) -> None:
            obs._shared_access(aid, slots, write)

        arr = _B.probe(base, _B.Buffer(base, f"shared@{site[1]}", report))
        self._shared_meta[aid] = {"site": site, "shape": tuple(base.shape)}
        self._shared_state[aid] = {}
        self._shared_keep.append(arr)
        return arr, aid

    def _shared_access(self, aid: int, slots: list, write: bool) -> None:
        """Record an access to shared array ``aid`` (through the array or any view of it:
        ``slots`` are the elements of the allocation it touched)."""
        t = threading.current_thread()
        if not hasattr(t, "threadIdx"):
            return
        meta = self._shared_meta[aid]
        k = _key(t)
        if k in self._in_atomic:  # an atomic read-modify-write is ordered by the hardware
            return
        # the kernel's line: 4 frames up on the usual path (kernel -> probe's __getitem__
        # -> _tell -> report -> here), else found by walking out of the course's frames
        f = sys._getframe(4)
        line = f.f_lineno if _OURS.get(f.f_code.co_filename) is False else _kernel_site()[1]
        with self.lock:
            epoch = len(self.barriers[k])
            state = self._shared_state[aid]
            if write:
                self.shared_writes[k] += len(slots)
            else:
                self.shared_reads[k] += len(slots)
            for s in slots:
                st = state.get(s)
                if st is None:
                    st = state[s] = {"epoch": epoch, "writer": None, "readers": {},
                                     "last_write": -1}
                elif st["epoch"] != epoch:
                    st["epoch"], st["writer"], st["readers"] = epoch, None, {}
                if write:
                    if not self.races:
                        if st["writer"] is not None and st["writer"][0] != k:
                            self._race(meta, s, st["writer"], (k, "wrote", line), epoch)
                        else:
                            for r, rl in st["readers"].items():
                                if r != k:
                                    self._race(meta, s, (r, "read", rl), (k, "wrote", line),
                                               epoch)
                                    break
                    st["writer"] = (k, "wrote", line)
                    st["last_write"] = epoch
                    eps = meta.setdefault("write_list", [])
                    if not eps or eps[-1] != epoch:
                        bisect.insort(eps, epoch)
                else:
                    if not self.races and st["writer"] is not None and st["writer"][0] != k:
                        self._race(meta, s, st["writer"], (k, "read", line), epoch)
                    if st["last_write"] < 0:
                        # the first read of a slot never stored is enough to name it: a
                        # list per read would grow with the kernel's loops
                        seen = meta.setdefault("unwritten_seen", set())
                        if s not in seen:
                            seen.add(s)
                            meta.setdefault("unwritten_reads", []).append((s, k, line, epoch))
                    elif len(self.stale) < 8:
                        # a write to this array in an epoch after the slot's last store and
                        # before this read: the slot was left over from an earlier reload.
                        # Epochs are appended in order, so a bisection finds it (a scan of
                        # every epoch per read grew with the number of tiles squared)
                        eps = meta.get("write_list", ())
                        j = bisect.bisect_right(eps, st["last_write"])
                        if j < len(eps) and eps[j] < epoch:
                            self.stale.append((self._shared_name(meta), s, k, line))
                    st["readers"].setdefault(k, line)

    def _shared_name(self, meta: dict) -> str:
        return f"the shared array allocated at line {meta['site'][1]}"

    def _race(self, meta: dict, slot: int, first: tuple, second: tuple, epoch: int) -> None:
        idx = tuple(int(i) for i in _unravel(slot, meta["shape"]))
        between = ("before the first cuda.syncthreads()" if epoch == 0 else
                   f"between the block's barriers number {epoch} and {epoch + 1}")
        self.races.append(Race(self._shared_name(meta), idx, first, second, between))

    def _end_block(self, block: tuple, block_dim: tuple) -> None:
        """Called when a block finished: barriers every thread reached, slots never written."""
        keys = [(tuple(block), tuple(t)) for t in _ndindex(*block_dim)]
        self.blocks.append(tuple(block))
        seqs = {k: self.barriers.get(k, []) for k in keys}
        if not self.divergences:
            longest = max((len(s) for s in seqs.values()), default=0)
            for p in range(longest):
                at = defaultdict(list)
                for k, s in seqs.items():
                    at[s[p] if p < len(s) else 0].append(k)
                if len(at) > 1:
                    # Name the barrier inside a branch when there is one: that is the fix.
                    conds = {ln: _enclosing_if(self.barrier_file.get(ln, ""), ln)
                             for ln in at if ln}
                    lines = sorted((ln for ln in at if ln),
                                   key=lambda ln: (not conds[ln], -len(at[ln])))
                    line = lines[0]
                    others = [k for ln, ks in at.items() if ln != line for k in ks]
                    other_line = next((ln for ln in at if ln not in (0, line)), 0)
                    self.divergences.append(Divergence(
                        tuple(block), line, at[line], others, other_line, conds[line]))
                    break
        for aid in self._shared_by_block.pop(tuple(block), ()):
            meta = self._shared_meta[aid]
            state = self._shared_state[aid]
            never = {s for s, k, line, epoch in meta.get("unwritten_reads", [])
                     if state.get(s, {}).get("last_write", -1) < 0}
            if never and len(self.fill) < 64:
                stored = sum(1 for st in state.values() if st["last_write"] >= 0)
                self.fill.append(Fill(self._shared_name(meta), tuple(block), stored,
                                      int(E._prod(meta["shape"])), len(never)))
            for s, k, line, epoch in meta.get("unwritten_reads", []):
                if state.get(s, {}).get("last_write", -1) < 0 and len(self.unfilled) < 8:
                    idx = tuple(int(i) for i in _unravel(s, meta["shape"]))
                    self.unfilled.append((self._shared_name(meta), idx, k, line))

    # --- summaries -------------------------------------------------------------------
    def race_words(self) -> str:
        r = self.races[0]
        (t1, what1, l1), (t2, what2, l2) = r.first, r.second
        slot = ", ".join(map(str, r.slot))
        return (f"{thread_name(t1)} {what1} slot [{slot}] of {r.array} (line {l1}) and "
                f"{thread_name(t2)} {what2} it (line {l2}), {r.between}: nothing orders "
                "the two, so on a GPU either can happen first")

    def divergence_words(self) -> str:
        d = self.divergences[0]
        where = f" inside {d.condition}" if d.condition else ""
        went = (f"went on to the cuda.syncthreads() at line {d.other_line}" if d.other_line
                else "never reached it")
        return (f"the cuda.syncthreads() at line {d.line}{where} was reached by "
                f"{_thread_words(d.reached)} but {_thread_words(d.others)} {went}. Every "
                "thread of a block must reach the same barrier: one inside a branch that "
                "only some threads take is undefined behaviour (a GPU may hang, or let the "
                "threads run on past it). Move cuda.syncthreads() out of the `if`, to a line "
                "every thread reaches")


@contextlib.contextmanager
def observing() -> Iterator[Observation]:
    """Instrument the simulator for the duration of the block (no-op on a GPU, except
    during a native-evidence session: then an instrumented build observes, see
    ``_instrument``)."""
    from . import _instrument

    native = _instrument.observation()
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
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, new: Any) -> None:
        saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, new)

    orig_sync = sim_kernel.BlockThread.__dict__["syncthreads"]

    def syncthreads(self):
        fname, line = _kernel_site()
        with obs.lock:
            obs.barriers[_key(self)].append(line)
            obs.barrier_file.setdefault(line, fname)
        return orig_sync(self)

    patch(sim_kernel.BlockThread, "syncthreads", syncthreads)

    def shared_array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:
            return orig_shared(self, shape, dtype, alignment)
        from numba.core import types
        from numba.np import numpy_support

        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        t = threading.current_thread()
        f = sys._getframe(1)
        site = (f.f_code.co_filename, f.f_lineno)
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
    patch(kernelapi.FakeCUDAShared, "array", shared_array)

    for name in ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync"):
        fn = kernelapi.FakeCUDAModule.__dict__.get(name)
        if fn is None:
            continue
        inner = fn.__func__ if isinstance(fn, staticmethod) else fn

        def counted(*args, _inner=inner, **kwargs):
            t = threading.current_thread()
            if hasattr(t, "threadIdx"):
                with obs.lock:
                    obs.shuffles[_key(t)] += 1
            return _inner(*args, **kwargs)

        patch(kernelapi.FakeCUDAModule, name, staticmethod(counted))

    for name, fn in list(kernelapi.FakeCUDAAtomic.__dict__.items()):
        if name.startswith("_") or not callable(fn):
            continue

        def atomic(self, *args, _fn=fn, **kwargs):
            t = threading.current_thread()
            if not hasattr(t, "threadIdx"):
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
             f"{name} returned a value ({thread_name(key)} returned {_short(value)}), but a "
             f"kernel returns nothing: the GPU throws the value away. Write the result into "
             f"{out} instead of returning it.", context)


def no_divergent_barrier(obs: Observation, name: str, context: str = "") -> None:
    if obs.live and obs.divergences:
        fail("divergent_barrier", f"{name}: {obs.divergence_words()}.", context)


def launch(obs: Observation, kernel: Any, grid: Any, block: Any, *args: Any, name: str,
           context: Any = None, oob: Any = None) -> None:
    """``E.launch``, then a precise diagnosis of any index outside a watched array.

    In the simulator the watched arrays behave like a GPU's memory (an index outside reads
    a sentinel and a write there lands nowhere), so the kernel runs to the end and every
    thread that went outside is known: exactly thread n is an off-by-one guard (i <= n);
    only threads past the end is a missing guard; a thread inside the array reaching outside
    is index arithmetic. ``oob(records, block)`` may return a better (cause, message)."""
    __tracebackhide__ = True
    from . import _instrument

    run = _instrument.runner(obs)  # an instrumented build during a native session
    try:
        run(kernel, grid, block, *args, name=name)
    except E.CheckFailure as exc:
        if getattr(exc, "cause", None):
            raise
        fail("kernel_raised", str(exc), context)
    if not (obs.live and obs.oob):
        return
    b = (block,) if isinstance(block, int) else tuple(block)
    recs = list(obs.oob)
    better = oob(recs, b) if oob is not None else None
    if not better:
        better = out_of_bounds_words(recs, b, name)
    fail(better[0], better[1], context)


def out_of_bounds_words(recs: list, block: tuple, name: str) -> tuple[str, str]:
    """(cause, message) for the out-of-bounds accesses of a 1D launch."""
    r = recs[0]
    verb = "wrote" if r.write else "read"
    first = (f"{thread_name(r.thread)} {verb} {r.array}[{r.index}] (line {r.line}), outside "
             f"the array (size {r.size})")
    if r.index < 0:
        return ("out_of_bounds_read", f"{first}: a negative index. On a GPU that reads or "
                "writes memory before the array; check how the index is computed.")
    gids = {x.grid_index(block) for x in recs}
    if len(block) == 1 and all(x.index == x.size for x in recs) and             gids == {recs[0].size}:
        return ("off_by_one_guard",
                f"off by one: the guard lets thread n through. Only thread i = n = {r.size} "
                f"went outside: it {verb} {r.array}[{r.size}] (line {r.line}), one past the "
                "last element. Use `if i < n`, not `if i <= n`.")
    inside = [x for x in recs if x.grid_index(block) < x.size]
    if len(block) == 1 and inside:
        x = inside[0]
        g = x.grid_index(block)
        shift = x.index - g
        hint = (f"off by one in the index: element i is at index i, not i {'+' if shift > 0 else '-'} {abs(shift)}"
                if abs(shift) == 1 else "check how the index is computed")
        return ("off_by_one" if abs(shift) == 1 else "out_of_bounds_read",
                f"thread i = {g}, inside the array, {'wrote' if x.write else 'read'} "
                f"{x.array}[{x.index}] (line {x.line}), past the end (size {x.size}): {hint}.")
    cause = "out_of_bounds_write" if r.write else "out_of_bounds_read"
    return (cause, f"{first}: missing bounds guard? This launch has more threads than "
            f"elements, and {len(gids)} threads past the end used the array; guard with "
            "`if i < n` (n = the array's length) before touching it.")


def spread(obs: Observation, out: str, n: int, threads: int, name: str, context: str,
           per_thread: str = "one element") -> None:
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
             f"{out}[{i}] was written {int(ew[i])} times, and {int((ew > 1).sum())} of {n} "
             f"elements more than once ({log.total_writes} writes for {n} elements): several "
             "threads (or every block) redo the same elements. Each element belongs to one "
             "thread: start at cuda.grid(1) and step by cuda.gridsize(1).", context)
    who, most = log.busiest_writer()
    if most > share:
        fail("serial_work",
             f"{thread_name(who)} wrote {most} elements of {out} by itself, while this launch "
             f"has {threads} threads for {n} elements (at most {share} each): the work is not "
             f"spread over the threads. Give each thread {per_thread} (i = cuda.grid(1)).",
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
        except E.CheckFailure:
            if native.active and native.warp and not native.gave_up:
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
        "warp-level undefined behaviour (a shuffle or vote that some lanes do not reach)",
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
