"""The record of what each thread of a learner's kernel did: one :class:`Observation`.

Both observers fill the same record, so every verdict on it is the same on both devices:
``_observe.observing()`` fills it inside Numba's CUDA simulator (its probes call the
recording methods here: ``watch``'s views, ``_new_shared``/``_shared_access`` for shared
memory, ``_end_block`` when a block finishes), and ``_instrument.NativeObservation`` fills
it from an instrumented build's shadow arrays on any device. This module owns the record
and its parts (per-array logs, out-of-bounds accesses, races, unfilled reads, divergent
barriers), the words that name a thread, and finding the learner's line in the stack; it
launches nothing and decides no verdict (``_observe`` does). It sits below both observers,
so neither imports the other to share it.
"""

from __future__ import annotations

import ast
import bisect
import linecache
import os
import sys
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from . import _buffers as _B
from . import _engine as E
from ..i18n import T

_np = E._np
# trusted references, captured at import (before any learner cell can rebind them)
_zeros = _np.zeros
_ndindex = _np.ndindex
_unravel = _np.unravel_index
_dtype = _np.dtype
POISON = 1.0e30  # what unwritten shared memory holds during a check
POISON_INT = -999999
# Frames in these files are the course's, not the learner's (see _kernel_site); the
# observer's patches live in _observe, the record's probes here and in _buffers.
_OURS_FILES = tuple(os.path.abspath(os.path.join(os.path.dirname(__file__), f))
                    for f in ("_observation.py", "_observe.py", "_buffers.py"))

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
                                    os.path.abspath(fn) in _OURS_FILES)
        if not ours:
            return fn, f.f_lineno
        f = f.f_back
    return "?", 0


_OURS: dict[str, bool] = {}


def _shared_name(site: tuple) -> str:
    """The name a kernel gave a shared array (``sh = cuda.shared.array(...)``), from the line
    that declares it; ``shared`` when the line does not say."""
    import linecache
    import re

    m = re.match(r"\s*([A-Za-z_]\w*)\s*=\s*cuda\.shared\.array", linecache.getline(*site))
    return m.group(1) if m else "shared"


_SIM = [""]
_DETAIL_MAX = 1 << 16  # arrays up to this many elements keep the per-element record


@dataclass
class ArrayLog:
    """Reads and writes of one watched global array."""

    name: str
    size: int
    reads: dict = field(default_factory=lambda: defaultdict(int))  # thread -> elements
    writes: dict = field(default_factory=lambda: defaultdict(int))
    element_writes: Any = None
    shape: tuple = ()
    # the record a wrong value is explained from (the simulator's, for small arrays): the
    # last writer of each element and its line, and every thread's reads (element, line)
    writer: dict = field(default_factory=dict)  # element -> (thread, line)
    read_log: dict = field(default_factory=lambda: defaultdict(list))  # thread -> [(el, line)]

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
    shared: tuple | None = None  # a shared array's (declaring line, declared shape)

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
        return (T("in block {block}, {stored} of the {total} cells of {array} were stored and "
                  "{total_minus_stored} never were; {read_unstored} of those were read",
                  block=_dims(self.block), stored=self.stored, total=self.total,
                  array=self.array, total_minus_stored=self.total - self.stored,
                  read_unstored=self.read_unstored))


@dataclass
class Divergence:
    block: tuple
    line: int
    reached: list  # threads that reached the barrier at ``line``
    others: list  # threads that did not (went elsewhere or exited)
    other_line: int  # where the others went (0: they exited)
    condition: str  # source of the enclosing ``if``, when found


def _dims(v: tuple) -> Any:
    """(5,) or (5, 0, 0) -> 5; (0, 3, 0) -> (0, 3): a thread or block index as written."""
    v = tuple(int(i) for i in v)
    while len(v) > 1 and v[-1] == 0:
        v = v[:-1]
    return v[0] if len(v) == 1 else v


def _thread_words(threads: list, total: int = 0) -> str:
    """'threads 64 to 127 of block 0' for a list of (block, thread) keys."""
    if not threads:
        return T("no thread")
    ids = sorted(tuple(t[1]) for t in threads)
    b = _dims(threads[0][0])
    one_d = all(i[1:] == (0,) * (len(i) - 1) for i in ids)
    if one_d:
        flat = [i[0] for i in ids]
        if flat == list(range(flat[0], flat[0] + len(flat))):
            who = T("thread {flat}",
                    flat=flat[0]) if len(flat) == 1 else T("threads {flat} to {flat_2}",
                                                               flat=flat[0], flat_2=flat[-1])
        else:
            who = T("threads {ids}", ids=", ".join(map(str, flat[:6])) + (
                ", ..." if len(flat) > 6 else ""))
        return T("{who} of block {b}", who=who, b=b)
    eg = _dims(ids[0])
    return T("{n_ids} threads of block {b} (thread {eg} among them)", n_ids=len(ids), b=b,
             eg=eg)


def verb(write: bool) -> str:
    """What a thread did to an element, as a message's verb: ``wrote`` or ``read``."""
    # TRANSLATORS: the verb of "thread 3 wrote a[4]" / "thread 3 read a[4]"
    return T("wrote") if write else T("read")


def thread_name(key: tuple) -> str:
    block, thread = key
    return T("thread {thread} of block {block}", thread=_dims(thread), block=_dims(block))


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
                best = T("else of `if {cond}`",
                         cond=cond) if in_else and not lo <= line <= hi else \
                    f"`if {cond}:`"
    return best


class Observation:
    """Everything recorded during one ``observing()`` block: by the simulator's patches
    (``_observe``), or from an instrumented build (``_instrument.NativeObservation``)."""

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
        log.shape = tuple(int(d) for d in ary.shape)
        self.arrays[name] = log
        obs = self
        detail = ary.size <= _DETAIL_MAX  # who wrote and read what: small cases only

        def report(buf: Any, slots: list, write: bool) -> None:
            k = _key(threading.current_thread())
            line = _kernel_site()[1] if detail and len(slots) == 1 else 0
            with obs.lock:
                if write:
                    log.writes[k] += len(slots)
                    for s in slots:
                        if 0 <= s < log.size:
                            log.element_writes[s] += 1
                            if detail:
                                log.writer[s] = (k, line)
                else:
                    log.reads[k] += len(slots)
                    if detail and len(log.read_log[k]) < 4096:
                        log.read_log[k].extend((s, line) for s in slots)

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

        sentinel = (E.fitted(E.INPUT_SENTINEL, ary.dtype) if ary.dtype.kind == "f" else
                    ary.dtype.type(0))
        buf = _B.Buffer(ary, name, report, outside, sentinel)
        return FakeCUDAArray(_B.probe(ary, buf))

    def log(self, name: str) -> ArrayLog:
        return self.arrays[name]

    # --- shared memory ---------------------------------------------------------------
    def _new_shared(self, shape: Any, dtype: Any, site: tuple) -> Any:
        fill = POISON if _dtype(dtype).kind == "f" else POISON_INT
        if _dtype(dtype).kind in "ub":  # unsigned (bf16 bits in uint16): the largest value
            fill = _np.iinfo(dtype).max if _dtype(dtype).kind == "u" else True
        base = E._full(shape, fill, dtype=dtype)
        obs = self
        aid = len(self._shared_meta)

        def report(buf: Any, slots: list, write: bool) -> None:
            obs._shared_access(aid, slots, write)

        label = _shared_name(site)
        shape = tuple(base.shape)

        def outside(v: Any, axis: int, index: int, size: int, write: bool) -> bool:
            # Like a GPU, go on (reading a sentinel, dropping a write) and record the index:
            # the diagnosis then names the shared array, its declared shape and the thread.
            if not _B.in_kernel():
                return False
            with obs.lock:
                if len(obs.oob) < 4096:
                    obs.oob.append(OutOfBounds(_key(threading.current_thread()), label, axis,
                                               index, size, _kernel_site()[1], write,
                                               (site[1], shape)))
            return True

        arr = _B.probe(base, _B.Buffer(base, f"shared@{site[1]}", report, outside,
                                       base.dtype.type(fill)))
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
        return T("the shared array allocated at line {site}", site=meta['site'][1])

    def _race(self, meta: dict, slot: int, first: tuple, second: tuple, epoch: int) -> None:
        idx = tuple(int(i) for i in _unravel(slot, meta["shape"]))
        between = (T("before the first cuda.syncthreads()") if epoch == 0 else
                   T("between the block's barriers number {epoch} and {epoch_plus_1}",
                     epoch=epoch, epoch_plus_1=epoch + 1))
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
        return (T("{thread_name} {what1} slot [{slot}] of {array} (line {l1}) and "
                  "{thread_name_2} {what2} it (line {l2}), {between}: nothing orders the two, "
                  "so on a GPU either can happen first", thread_name=thread_name(t1),
                  what1=verb(what1 == "wrote"), slot=slot, array=r.array, l1=l1,
                  thread_name_2=thread_name(t2),
                  what2=verb(what2 == "wrote"), l2=l2, between=r.between))

    def divergence_words(self) -> str:
        d = self.divergences[0]
        where = T(" inside {condition}", condition=d.condition) if d.condition else ""
        went = (T("went on to the cuda.syncthreads() at line {other_line}",
                  other_line=d.other_line) if d.other_line
                else T("never reached it"))
        return (T("the cuda.syncthreads() at line {line}{where} was reached by {thread_words} "
                  "but {thread_words_2} {went}. Every thread of a block must reach the same "
                  "barrier: one inside a branch that only some threads take is undefined "
                  "behaviour (a GPU may hang, or let the threads run on past it). Move "
                  "cuda.syncthreads() out of the `if`, to a line every thread reaches",
                  line=d.line, where=where, thread_words=_thread_words(d.reached),
                  thread_words_2=_thread_words(d.others), went=went))
