"""A time budget for every check: no check runs longer than 30 s, whatever the answer.

In the simulator a kernel runs as thousands of Python threads (about 4,400 GPU threads a
second on the course's machines), so an answer that loops far longer than it should, or
never ends, would keep a check cell busy until a grading timeout and lose the marks
without a word. ``budget()`` wraps one public check: past ``BUDGET_S`` seconds of the
process's CPU time (so that a busy machine does not fail right answers) a watchdog
stops the simulated threads still running (an exception raised inside each, which the
simulator turns into the end of the launch, as a GPU's watchdog ends a kernel), and the
check fails with cause ``not_checked`` and a sentence that says so. The observation costs
of the checkers grow with the work a kernel does (``_buffers``, ``_observe``), so right
answers finish far below the budget; the budget is the guarantee for the others.

On a GPU nothing is simulated in this process and the watchdog finds nothing to stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time
from typing import Iterator
from ..i18n import T

BUDGET_S = 25.0  # what a check may spend simulating; its own work afterwards fits in 30 s
_POLL_S = 0.05

# run-time state (the grading audit compares module values: only this dict changes)
_STATE: dict = {"deadline": None, "expired": False}


def _clock() -> float:
    """The process's CPU time: what the check itself spent, all simulated threads together.
    Wall time would also count the other programs sharing the machine's cores (a grading
    run of a class, eight notebooks at once), and fail right answers on a busy machine."""
    return time.process_time()


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


def _watch(deadline: float, done: threading.Event) -> None:
    while not done.wait(_POLL_S):
        if _clock() >= deadline and _stop_simulated_threads():
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

    seconds = BUDGET_S if seconds is None else seconds
    _end_leftovers()  # no launch runs between checks: any simulated thread is a leftover
    _STATE["deadline"] = _clock() + seconds
    _STATE["expired"] = False
    done = threading.Event()
    watcher = threading.Thread(target=_watch, args=(_STATE["deadline"], done),
                               name="cudacourse-check-budget", daemon=True)
    watcher.start()
    try:
        yield
        if _STATE["expired"]:  # a kernel was stopped, and the check swallowed its failure
            raise OverBudget()
    except Exception as exc:  # noqa: BLE001 - whatever ended the check, once time ran out
        if not _STATE["expired"] and not isinstance(exc, OverBudget):
            raise
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
