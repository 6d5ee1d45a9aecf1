"""Warp-level intrinsics for Numba's CUDA simulator, with real warp semantics.

The stock simulator runs every GPU thread of a block as its own OS thread and has no notion
of a warp, so ``cuda.shfl_down_sync`` and friends do not exist there. ``install()`` adds them
to the simulator's fake ``cuda`` module (and to ``numba.cuda`` itself, so ``hasattr`` works):

    shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync,
    ballot_sync, all_sync, any_sync, eq_sync, match_any_sync, match_all_sync,
    syncwarp, activemask, lanemask_lt            (laneid and warpsize exist already)

It also gives ``cuda.pinned`` Numba's real signature, ``cuda.pinned(*arrays)``.

The model, taken from the CUDA programming guide and the PTX ``shfl.sync`` / ``vote.sync``
pseudocode:

* the lanes of a warp are consecutive linear thread ids of a block
  (``x + blockDim.x * (y + blockDim.y * z)``), 32 per warp; the last warp of a block whose
  size is not a multiple of 32 simply has fewer lanes;
* a call is a rendezvous: it returns once every lane named in ``mask`` that has not exited
  (or does not exist) has made a warp call with the same mask; lanes that exited are not
  waited for, exactly as on a GPU;
* ``shfl_*``: each lane reads ``value`` of a source lane computed from its own offset
  (``b & 31``, as PTX takes the low 5 bits); a source outside the warp gives the caller's
  own value (defined behaviour). A source lane that is not taking part (exited, or outside
  ``mask``) is undefined on a GPU; here the caller gets its own value back;
* a lane calling with a mask that does not include itself, lanes waiting on each other with
  different masks, or a lane waiting at ``cuda.syncthreads()`` while its warp-mates wait in
  a warp call are errors here (undefined behaviour or a hang on a GPU), raised with a message
  that says which lanes did what.

``activemask()`` has no convergence to report in the simulator: it waits until every lane of
the warp that has not exited is waiting somewhere, then returns the lanes that have not exited
(right for converged code such as after ``if i >= n: return``; a diverged warp on a GPU
reports only the lanes of its branch).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from .._numba_private import simulator_patch

FULL_MASK = 0xFFFFFFFF
WARP_SIZE = 32
_POLL_S = 0.05  # how often a waiting lane looks for an abort or a deadlock



class WarpError(RuntimeError):
    """A warp intrinsic was used in a way that is undefined (or hangs) on a GPU."""


# --- per-block state ------------------------------------------------------------------------

class _Meeting:
    """One rendezvous of the lanes that called a warp intrinsic with the same mask."""

    __slots__ = ("mask", "arrived", "done", "results", "error", "event")

    def __init__(self, mask: int) -> None:
        self.mask = mask
        self.arrived: dict[int, tuple[str, Any, Any]] = {}  # lane -> (op, value, arg)
        self.done = False
        self.event = threading.Event()  # set when done: wakes only this meeting's lanes
        self.results: dict[int, Any] = {}
        self.error: str | Exception | None = None


class _Warp:
    def __init__(self, index: int, nlanes: int) -> None:
        self.index = index
        self.nlanes = nlanes  # lanes that exist (the last warp of a block may be partial)
        self.threads: dict[int, Any] = {}  # lane -> BlockThread, once created
        self.exited = 0  # bit mask of lanes whose thread has finished
        self.meetings: dict[int, _Meeting] = {}  # open meetings by mask
        self.waiting: dict[int, _Meeting] = {}  # lane -> the meeting it waits in
        self.deadlock = ""  # set once, so every stuck lane reports the same diagnosis
        self.suspect = ("", 0.0, 0)  # (diagnosis, first seen, polls seen) before it is set
        self.active: _Meeting | None = None  # lanes waiting in activemask()

    def existing(self) -> int:
        return (1 << self.nlanes) - 1

    def alive(self) -> int:
        return self.existing() & ~self.exited


class _BlockWarps:
    """Warp bookkeeping for one simulated block (one ``BlockManager``)."""

    def __init__(self, block_dim: tuple) -> None:
        n = int(np.prod(block_dim))
        self.lock = threading.Lock()
        self.warps = [_Warp(w, min(WARP_SIZE, n - w * WARP_SIZE))
                      for w in range((n + WARP_SIZE - 1) // WARP_SIZE)]

    def warp_of(self, thread: Any) -> tuple[_Warp, int]:
        return self.warps[thread.thread_id // WARP_SIZE], thread.thread_id % WARP_SIZE

    def register(self, thread: Any) -> None:
        warp, lane = self.warp_of(thread)
        with self.lock:
            warp.threads[lane] = thread

    def exited(self, thread: Any) -> None:
        warp, lane = self.warp_of(thread)
        with self.lock:
            warp.exited |= 1 << lane
            _complete_ready(warp)


# --- the rendezvous --------------------------------------------------------------------------

def _lanes(mask: int) -> list[int]:
    return [lane for lane in range(WARP_SIZE) if mask >> lane & 1]


def _complete_ready(warp: _Warp) -> None:
    """Finish every open meeting whose living named lanes have all arrived (lock held)."""
    for mask, meeting in list(warp.meetings.items()):
        needed = mask & warp.alive()
        have = sum(1 << lane for lane in meeting.arrived)
        if needed & ~have == 0:
            _resolve(meeting)
            if isinstance(meeting.error, Exception):
                # a warp-wide instruction refused because lanes are missing: a lane that left
                # by raising (an index outside an array) is the cause; its own exception, the
                # same whichever thread the simulator reports first (a GPU's instrumented
                # build records that access too)
                gone = [warp.threads.get(lane) for lane in _lanes(mask & ~have)]
                raised = [t.exception[0] for t in gone
                          if t is not None and getattr(t, "exception", None)]
                if raised:
                    meeting.error = raised[0]
            meeting.done = True
            meeting.event.set()
            del warp.meetings[mask]
            for lane in meeting.arrived:
                warp.waiting.pop(lane, None)
    m = warp.active
    if m is not None and all(_blocked(warp, lane) for lane in _lanes(warp.alive())):
        # Every lane that has not exited is now waiting somewhere: those are the lanes that
        # are still running, which is what a converged warp reports.
        alive = np.int32(np.uint32(warp.alive()).view(np.int32))
        for lane in m.arrived:
            m.results[lane] = alive
            warp.waiting.pop(lane, None)
        m.done = True
        m.event.set()
        warp.active = None


def _blocked(warp: _Warp, lane: int) -> bool:
    """The lane waits in a warp call or at cuda.syncthreads() (lock held)."""
    if lane in warp.waiting:
        return True
    t = warp.threads.get(lane)
    return t is not None and bool(getattr(t, "syncthreads_blocked", False))


def _resolve(m: _Meeting) -> None:
    """Compute every participant's result from what all of them brought."""
    ops = {op for op, _, _ in m.arrived.values()}
    if len(ops) > 1:
        who = ", ".join(f"lane {lane}: {op}" for lane, (op, _, _) in sorted(m.arrived.items()))
        m.error = (f"lanes met with mask {m.mask:#010x} in different warp intrinsics ({who}); "
                   "every lane named in a mask must make the same call")
        return
    op = ops.pop()
    values = {lane: v for lane, (_, v, _) in m.arrived.items()}
    if op in _COLLECTIVES:  # a warp-wide instruction emulated elsewhere (tensorcore)
        try:
            m.results.update(_COLLECTIVES[op](values))
        except Exception as exc:  # noqa: BLE001 - reported to every lane of the meeting
            m.error = exc
        return
    preds = {lane: bool(v) for lane, v in values.items()}
    ballot = sum(1 << lane for lane, p in preds.items() if p)
    for lane, (_, value, arg) in m.arrived.items():
        if op == "syncwarp":
            m.results[lane] = None
        elif op.startswith("shfl"):
            b = int(arg) & 31  # PTX uses the low 5 bits of the lane or offset
            src = {"shfl_sync": b, "shfl_up_sync": lane - b, "shfl_down_sync": lane + b,
                   "shfl_xor_sync": lane ^ b}[op]
            # Outside the warp: the caller's own value (defined). A source lane not taking
            # part: undefined on a GPU; the caller's own value here.
            m.results[lane] = values.get(src, value) if 0 <= src < WARP_SIZE else value
        elif op == "ballot_sync":
            m.results[lane] = np.int32(np.uint32(ballot).view(np.int32))  # numba: int32
        elif op == "all_sync":
            m.results[lane] = all(preds.values())
        elif op == "any_sync":
            m.results[lane] = any(preds.values())
        elif op == "eq_sync":
            m.results[lane] = len(set(preds.values())) == 1
        elif op == "match_any_sync":
            same = sum(1 << other for other, v in values.items() if v == value)
            m.results[lane] = np.int32(np.uint32(same).view(np.int32))
        elif op == "match_all_sync":
            ok = len({v for v in values.values()}) == 1
            have = sum(1 << other for other in values) if ok else 0
            m.results[lane] = (np.int32(np.uint32(have).view(np.int32)), ok)
        else:  # pragma: no cover - every op above is listed in _OPS
            raise AssertionError(op)


def _lane_ranges(lanes: list[int]) -> str:
    """[0, 1, 2, 5] -> "lanes 0-2, 5"."""
    runs: list[list[int]] = []
    for lane in lanes:
        if runs and lane == runs[-1][-1] + 1:
            runs[-1].append(lane)
        else:
            runs.append([lane])
    text = ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs)
    return ("lane " if len(lanes) == 1 else "lanes ") + text


def _deadlock(warp: _Warp) -> str:
    """A description of the deadlock when no lane of the warp can move on, else ""."""
    for lane in _lanes(warp.alive()):
        if not _blocked(warp, lane):
            return ""  # this lane is still running (or not started): it may yet arrive
    groups: dict[str, list[int]] = {}
    for lane in range(warp.nlanes):
        if warp.exited >> lane & 1:
            continue
        m = warp.waiting.get(lane)
        where = (f"in cuda.{m.arrived[lane][0]}(mask={m.mask:#010x})" if m is not None
                 else "at cuda.syncthreads()")
        groups.setdefault(where, []).append(lane)
    parts = [f"{_lane_ranges(lanes)} {where}" for where, lanes in groups.items()]
    return ("warp %d of the block can never continue: %s. A warp call waits for every lane "
            "named in its mask; every such lane must reach a warp call with the same mask "
            "(on a GPU this hangs or is undefined)." % (warp.index, "; ".join(parts)))


_CONFIRM_POLLS = 4  # a deadlock must be seen this many polls in a row...
_CONFIRM_S = 0.5  # ...and for this long: the simulator releases a barrier's threads one by
# one, so for a moment some lanes are past cuda.syncthreads() (in a warp call) while others
# still look blocked at it; on a busy machine that moment can last several polls


def _confirmed(warp: _Warp, seen: str) -> str:
    """``seen`` (a deadlock's diagnosis, or "") once it has persisted; else "" (lock held)."""
    if not seen:
        warp.suspect = ("", 0.0, 0)
        return ""
    what, since, polls = warp.suspect
    now = time.monotonic()
    if what != seen:
        warp.suspect = (seen, now, 1)
        return ""
    warp.suspect = (what, since, polls + 1)
    return seen if polls + 1 >= _CONFIRM_POLLS and now - since >= _CONFIRM_S else ""


def _warp_call(op: str, mask: int, value: Any = None, arg: Any = None) -> Any:
    thread = threading.current_thread()
    state = getattr(getattr(thread, "_manager", None), "_simwarp", None)
    if state is None:
        raise WarpError(f"cuda.{op} can only be called inside a kernel running in the simulator")
    warp, lane = state.warp_of(thread)
    mask = int(mask) & FULL_MASK
    if op != "activemask" and not mask >> lane & 1:
        raise WarpError(f"lane {lane} of warp {warp.index} called cuda.{op} with mask "
                        f"{mask:#010x}, which does not include the lane itself: a lane must "
                        "name itself in the mask (undefined behaviour on a GPU)")
    with state.lock:
        if op == "activemask":
            meeting = warp.active = warp.active or _Meeting(mask)
        else:
            meeting = warp.meetings.get(mask)
            if meeting is None:
                meeting = warp.meetings[mask] = _Meeting(mask)
        meeting.arrived[lane] = (op, value, arg)
        warp.waiting[lane] = meeting
        _complete_ready(warp)
    # Wait outside the lock; every so often look for an abort, a lane that can no longer
    # arrive, or a deadlock.
    while not meeting.event.wait(_POLL_S):
        if getattr(thread, "abort", False):  # another thread failed: stop quietly
            raise RuntimeError("abort flag set while waiting in a warp intrinsic")
        with state.lock:
            _complete_ready(warp)
            if not meeting.done:
                warp.deadlock = warp.deadlock or _confirmed(warp, _deadlock(warp))
                if warp.deadlock:
                    raise WarpError(warp.deadlock)
    if isinstance(meeting.error, Exception):  # from a collective: its own kind, per lane
        raise type(meeting.error)(*meeting.error.args)
    if meeting.error:
        raise WarpError(meeting.error)
    return meeting.results[lane]


# --- the intrinsics, as the kernel sees them ----------------------------------------------

_COLLECTIVES: dict[str, Any] = {}  # op -> resolve(values by lane) -> results by lane


def collective(op: str, resolve: Any, value: Any, mask: int = FULL_MASK) -> Any:
    """A warp-wide operation defined by ``resolve``: every lane named in ``mask`` brings
    ``value``; once all have arrived, ``resolve({lane: value})`` gives ``{lane: result}``
    and each lane gets its own. An exception in ``resolve`` is raised in every lane as a
    ``WarpError`` carrying its message (``cudacourse.runtime.tensorcore`` builds ``mma`` and
    ``ldmatrix`` on this)."""
    _COLLECTIVES[op] = resolve
    return _warp_call(op, mask, value)


def shfl_sync(mask, value, src_lane):
    """``value`` of lane ``src_lane`` (low 5 bits)."""
    return _warp_call("shfl_sync", mask, value, src_lane)


def shfl_up_sync(mask, value, delta):
    """``value`` of lane ``laneid - delta``; the caller's own below lane 0."""
    return _warp_call("shfl_up_sync", mask, value, delta)


def shfl_down_sync(mask, value, delta):
    """``value`` of lane ``laneid + delta``; the caller's own past lane 31."""
    return _warp_call("shfl_down_sync", mask, value, delta)


def shfl_xor_sync(mask, value, lane_mask):
    """``value`` of lane ``laneid ^ lane_mask`` (a butterfly exchange)."""
    return _warp_call("shfl_xor_sync", mask, value, lane_mask)


def _lane_op(op: str, doc: str) -> Any:
    """The intrinsic ``op(mask, x)``, where each lane gives one value ``x`` (a predicate for
    the votes, a value for the matches) and gets the warp's answer back."""
    def intrinsic(mask, x):
        return _warp_call(op, mask, x)

    intrinsic.__name__ = intrinsic.__qualname__ = op
    intrinsic.__doc__ = doc
    return intrinsic


ballot_sync = _lane_op("ballot_sync", "Bit i set when lane i takes part and its predicate is "
                       "true (int32, like Numba's).")
all_sync = _lane_op("all_sync", "True when the predicate is true on every taking part lane.")
any_sync = _lane_op("any_sync", "True when the predicate is true on any taking part lane.")
eq_sync = _lane_op("eq_sync", "True when the predicate is the same on every taking part lane.")
match_any_sync = _lane_op("match_any_sync", "Mask of the taking part lanes whose value equals "
                          "the caller's.")
match_all_sync = _lane_op("match_all_sync", "(mask of the taking part lanes, True) when all "
                          "values are equal, else (0, False).")


def syncwarp(mask=FULL_MASK):
    """Wait for the lanes named in ``mask`` (that have not exited)."""
    _warp_call("syncwarp", mask)


def activemask():
    """Lanes of the caller's warp that are still running.

    The simulator has no convergence to report, so it waits until every lane of the warp
    that has not exited is waiting somewhere (here, in another warp call or at
    ``syncthreads``) and returns the lanes that have not exited. That matches a GPU for
    converged code, e.g. after ``if i >= n: return``; inside a divergent branch a GPU
    reports only the lanes of that branch.
    """
    return _warp_call("activemask", FULL_MASK)


def lanemask_lt():
    """Bits of the lanes below the caller's lane."""
    lane = threading.current_thread().thread_id % WARP_SIZE
    return np.int32(np.uint32((1 << lane) - 1).view(np.int32))


_OPS = {f.__name__: f for f in (shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync,
                                ballot_sync, all_sync, any_sync, eq_sync, match_any_sync,
                                match_all_sync, syncwarp, activemask, lanemask_lt)}
NAMES = tuple(_OPS)


# --- installing into the simulator -----------------------------------------------------------

@simulator_patch
def install() -> None:
    """Add the warp intrinsics to the simulator (idempotent; does nothing on a GPU)."""
    import numba.cuda as cuda_module
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator import kernelapi

    manager_init = sim_kernel.BlockManager.__init__
    thread_init = sim_kernel.BlockThread.__init__
    thread_run = sim_kernel.BlockThread.run

    def block_manager_init(self, f, grid_dim, block_dim, debug):
        manager_init(self, f, grid_dim, block_dim, debug)
        self._simwarp = _BlockWarps(tuple(block_dim))

    def block_thread_init(self, f, manager, blockIdx, threadIdx, debug):
        thread_init(self, f, manager, blockIdx, threadIdx, debug)
        manager._simwarp.register(self)

    def block_thread_run(self):
        try:
            thread_run(self)
        finally:  # an exited lane is no longer waited for by its warp-mates
            self._manager._simwarp.exited(self)

    sim_kernel.BlockManager.__init__ = block_manager_init
    sim_kernel.BlockThread.__init__ = block_thread_init
    sim_kernel.BlockThread.run = block_thread_run
    for name, fn in _OPS.items():
        setattr(kernelapi.FakeCUDAModule, name, staticmethod(fn))
        if not hasattr(cuda_module, name):
            setattr(cuda_module, name, fn)
    cuda_module.pinned = _pinned_many(cuda_module.pinned)


def _pinned_many(one: Any) -> Any:
    """``cuda.pinned(*arrays)`` with Numba's real signature (the simulator's takes one
    array): ``with cuda.pinned(x, out):`` is right code on a GPU, so it runs here too."""
    import contextlib

    @contextlib.contextmanager
    def pinned(*arrays):
        with contextlib.ExitStack() as stack:
            for a in arrays:
                stack.enter_context(one(a))
            yield

    pinned.__doc__ = "A context manager pinning host arrays (any number) while inside it."
    return pinned


def installed() -> bool:
    return install.installed()
