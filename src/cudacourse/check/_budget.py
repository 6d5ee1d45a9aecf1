"""A time budget for every check: no check runs longer than 30 s, whatever the answer.

In the simulator a kernel runs as thousands of Python threads (about 4,400 GPU threads a
second on the course's machines), so an answer that loops far longer than it should, or
never ends, would keep a check cell busy until a grading timeout and lose the marks
without a word. ``budget()`` wraps one public check: past ``BUDGET_S`` seconds of CPU time spent by
the check itself (so that a busy machine does not fail right answers) a watchdog
stops the simulated threads still running (an exception raised inside each, which the
simulator turns into the end of the launch, as a GPU's watchdog ends a kernel), and the
check fails with cause ``not_checked`` and a sentence that says so. The observation costs
of the checkers grow with the work a kernel does (``_buffers``, ``_observe``), so right
answers finish far below the budget; the budget is the guarantee for the others.

On a GPU nothing is simulated in this process and the watchdog finds nothing to stop.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import linecache
import os
import sys
import threading
import time
from typing import Any, Iterator

from ..i18n import T

BUDGET_S = 25.0  # what a check may spend simulating; its own work afterwards fits in 30 s
_POLL_S = 0.05

# run-time state (the grading audit compares module values: only this dict changes)
_STATE: dict = {"deadline": None, "expired": False, "stuck": None, "start": 0.0,
                "seconds": 0.0, "account": None, "checker": None, "checker_start": 0.0}
_LOOK_GAP_S = 0.3  # between the two looks at the threads a stopped check takes


def _clock() -> float:
    """The process's CPU time: a bound on what the check spent (every thread together).
    Wall time would also count the other programs sharing the machine's cores (a grading
    run of a class, eight notebooks at once), and fail right answers on a busy machine."""
    return time.process_time()


_TASKS = "/proc/self/task"
_TICK_S = 1.0 / (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)


def _thread_cpu(native_id: int | None) -> float:
    """CPU seconds one thread of this process has spent (Linux; 0 when it has ended)."""
    try:
        with open(f"{_TASKS}/{native_id}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * _TICK_S  # utime, stime
    except (OSError, ValueError, IndexError):
        return 0.0


def _spent() -> float:
    """CPU seconds the running check has spent: the process's, and where Linux tells the
    threads apart, only those of the thread that runs the check and of the simulated
    threads its launches started. Another thread of the process (a kernel an earlier check
    left spinning, a server a notebook started) then costs this check nothing: in CI, a
    right diagnosis was once cut at 25 s although it needs about 2."""
    total = _clock() - _STATE["start"]
    if total < _STATE["seconds"] or not os.path.isdir(_TASKS):
        return total  # the cheap bound is enough while it is under the budget
    account = _STATE["account"]
    own = _thread_cpu(_STATE["checker"]) - _STATE["checker_start"] + account.ended
    # a simulated thread without an account (the block scheduler not installed) counts too:
    # an endless loop must never go uncounted
    own += sum(_thread_cpu(t.native_id) for t in _simulated()
               if getattr(t, "_cc_account", account) is account)
    return min(total, own)


class OverBudget(Exception):
    """Raised inside a simulated GPU thread when the check's time is up."""


def expired() -> bool:
    return bool(_STATE["expired"])


def _stop_simulated_threads() -> int:
    """Raise OverBudget in every simulated GPU thread that is running Python code (those
    waiting at a barrier are released by the simulator when one of their block ends);
    returns how many were told."""
    told = 0
    for t in threading.enumerate():
        if hasattr(t, "threadIdx") and t.is_alive() and t.ident is not None:
            told += ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(t.ident),
                                                               ctypes.py_object(OverBudget))
    return told


def _end_leftovers(wait_s: float = 5.0) -> None:
    """Stop simulated threads still alive outside a launch: the simulator ends a launch at
    its first failing thread and leaves the others of the block running (it only tells
    them at a barrier), so a stopped endless loop would go on spinning and eat the next
    check's budget."""
    end = time.monotonic() + wait_s
    while _stop_simulated_threads() and time.monotonic() < end:
        time.sleep(_POLL_S)


def _simulated() -> list:
    return [t for t in threading.enumerate()
            if hasattr(t, "threadIdx") and t.is_alive() and t.ident is not None]


def _kernel_frame(frame: Any) -> Any:
    """The innermost frame of ``frame``'s stack that runs the learner's code (not Numba's,
    the course's, Python's own or an installed package's)."""
    from ._origin import library_file

    while frame is not None:
        if not library_file(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


def _look() -> dict:
    """Where each simulated thread is: ident -> (file, function, line, its numbers)."""
    frames = sys._current_frames()
    seen = {}
    for t in _simulated():
        f = _kernel_frame(frames.get(t.ident))
        if f is not None:
            numbers = {k: v for k, v in dict(f.f_locals).items()
                       if isinstance(v, (int, float)) and not isinstance(v, bool)}
            seen[t.ident] = (f.f_code.co_filename, f.f_code.co_name, f.f_lineno, numbers)
    return seen


def _loop_at(filename: str, function: str, line: int) -> tuple[int, str, set] | None:
    """(first line, header, names its condition reads) of the innermost ``while`` loop of
    ``function`` holding ``line``, or None."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except SyntaxError:
        return None
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.While) and node.lineno <= line <= node.end_lineno:
            if best is None or node.lineno > best.lineno:
                best = node
    if best is None:
        return None
    names = {n.id for n in ast.walk(best.test) if isinstance(n, ast.Name)}
    header = linecache.getline(filename, best.lineno).strip()
    return best.lineno, header, names


def stuck_loop(first: dict, second: dict) -> dict | None:
    """The evidence of a loop that never ends, from two looks at the threads: every thread
    seen both times is inside one ``while`` loop whose condition reads only numbers that did
    not change between the looks. None when the looks do not single that out (a loop still
    making progress, threads in different places)."""
    both = [k for k in first if k in second]
    if not both:
        return None
    loops = set()
    for k in both:
        filename, function, line, after = second[k]
        loop = _loop_at(filename, function, line)
        if loop is None:
            return None
        start, header, names = loop
        before = first[k][3]
        if not names or any(n not in before or n not in after for n in names):
            return None
        if any(before[n] != after[n] for n in names):
            return None  # the loop moves: far too much work, not a loop without end
        loops.add((start, header, tuple(sorted((n, after[n]) for n in names))))
    if len(loops) != 1:
        return None
    (start, header, values), = loops
    return {"line": start, "code": header, "threads": len(both),
            "values": ", ".join(f"{n} = {v}" for n, v in values)}


def _watch(seconds: float, done: threading.Event) -> None:
    while not done.wait(_POLL_S):
        if _simulated() and _spent() >= seconds:
            first = _look()
            time.sleep(_LOOK_GAP_S)  # a loop that moves changes its numbers meanwhile
            _STATE["stuck"] = stuck_loop(first, _look())
            if _stop_simulated_threads():
                _STATE["expired"] = True


@contextlib.contextmanager
def budget(seconds: float | None = None) -> Iterator[None]:
    """Give the enclosed check ``seconds`` of simulation (nested calls share the outer
    budget). Failures raised after the budget ran out are re-raised as ``not_checked``."""
    __tracebackhide__ = True
    if _STATE["deadline"] is not None:
        yield
        return
    from . import _engine as E

    from ..runtime import simblock

    seconds = BUDGET_S if seconds is None else seconds
    _end_leftovers()  # no launch runs between checks: any simulated thread is a leftover
    checker = threading.get_native_id()
    _STATE.update(start=_clock(), seconds=seconds, account=simblock.Account(),
                  checker=checker, checker_start=_thread_cpu(checker))
    _STATE["deadline"] = _STATE["start"] + seconds
    _STATE["expired"] = False
    done = threading.Event()
    watcher = threading.Thread(target=_watch, args=(seconds, done),
                               name="cudacourse-check-budget", daemon=True)
    watcher.start()
    try:
        with simblock.accounting(_STATE["account"]):
            yield
        if _STATE["expired"]:  # a kernel was stopped, and the check swallowed its failure
            raise OverBudget()
    except Exception as exc:  # noqa: BLE001 - whatever ended the check, once time ran out
        if not _STATE["expired"] and not isinstance(exc, OverBudget):
            raise
        stuck = _STATE["stuck"]
        if stuck:
            E.fail("endless_loop", T("the loop at line {line} (`{code}`) never ends: after "
                                     "{seconds:.0f} s of work, {threads} threads were still in "
                                     "it, and the numbers its condition reads did not change "
                                     "between two looks ({values}), so its condition stays "
                                     "true. Check how the loop's variable moves towards the "
                                     "end.", line=stuck["line"], code=stuck["code"],
                                     seconds=seconds, threads=stuck["threads"],
                                     values=stuck["values"]))
        E.fail("not_checked", T("not checked: the check was stopped after {seconds:.0f} s of work, with your "
                 "kernel still running in the simulator (which runs about 4,400 GPU threads a "
                 "second). A right answer to this exercise finishes well within that. Look for "
                 "a loop that never ends, or one that does far more work than the exercise "
                 "needs (a loop over every element in every thread), then run the check again.",
                 seconds=seconds))
    finally:
        done.set()
        watcher.join()
        if _STATE["expired"]:
            _end_leftovers()
        _STATE["deadline"] = None
        _STATE["expired"] = False
        _STATE["stuck"] = None
