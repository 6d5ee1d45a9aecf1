"""A block scheduler for Numba's CUDA simulator that waits instead of spinning.

The stock simulator runs each GPU thread of a block as an OS thread, and the launching
thread watches them in a busy loop (``BlockManager.run`` polls every thread's
``is_alive()`` and barrier flag, over and over). Under the GIL that loop competes with
the simulated threads for the one interpreter: on the course's 2-core machines it took
about half of the time of a shared-memory kernel's launch (lesson 5's check ran 2-3 times
slower than it needs to).

``install()`` replaces the loop with a condition variable: a simulated thread notifies its
block when it arrives at ``cuda.syncthreads()`` and when it ends, and the launching thread
sleeps until then. The semantics are the simulator's own, unchanged:

* the barrier opens when every thread that has not exited waits at it (a thread that
  returned early is not waited for, as in the stock simulator);
* the first failing thread ends the launch, with its exception (thread and block named),
  after the others are told to abort;
* the block is done when every thread has ended.

A periodic wake-up (``_SAFETY_S``) keeps the loop correct should anything change a flag
without notifying. Nothing here runs on a GPU.

Each simulated thread also carries the CPU account open when its block started
(:func:`accounting`): when it ends it adds its own CPU time there, so a check's time budget
(``check/_budget.py``) counts the work of its own kernels, never a thread some earlier check
left running or another part of the process.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Iterator

import numpy as np

from .._numba_private import simulator_patch

_SAFETY_S = 0.05


class Account:
    """CPU seconds the simulated threads of one check spent, added as each one ends."""

    def __init__(self) -> None:
        self.ended = 0.0
        self._lock = threading.Lock()

    def add(self, seconds: float) -> None:
        with self._lock:
            self.ended += seconds


_OPEN: list = [None]  # the account threads started now belong to


@contextlib.contextmanager
def accounting(account: Account) -> Iterator[Account]:
    """Charge the simulated threads started inside to ``account``."""
    before, _OPEN[0] = _OPEN[0], account
    try:
        yield account
    finally:
        _OPEN[0] = before


@simulator_patch
def install() -> None:
    """Patch the simulator's block scheduler (idempotent; the simulator only)."""
    from numba.cuda.simulator import kernel as sim_kernel

    thread_run = sim_kernel.BlockThread.run

    def syncthreads(self: Any) -> None:
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads call")
        cond = self._manager._cc_wake
        with cond:  # the flag and the wake-up together: the scheduler never misses one
            self.syncthreads_blocked = True
            cond.notify()
        self.syncthreads_event.wait()
        self.syncthreads_event.clear()
        if self.abort:
            raise RuntimeError("abort flag set on syncthreads clear")

    def block_thread_run(self: Any) -> None:
        try:
            thread_run(self)  # records a failure in self.exception, as before
        finally:
            account = getattr(self, "_cc_account", None)
            if account is not None:
                account.add(time.thread_time())  # this thread's own CPU, read by itself
            cond = self._manager._cc_wake
            with cond:
                self._cc_ended = True
                cond.notify()

    def block_manager_run(self: Any, grid_point: Any, *args: Any) -> None:
        self._cc_wake = cond = threading.Condition()
        self._cc_wakeups = 0

        def target() -> None:
            self._f(*args)

        threads = [sim_kernel.BlockThread(target, self, grid_point, point, self._debug)
                   for point in np.ndindex(*self._block_dim)]
        for t in threads:
            t._cc_ended = False
            t._cc_account = _OPEN[0]
            t.start()
        with cond:
            while True:
                failed = next((t for t in threads if t.exception), None)
                if failed is not None:
                    _abort(threads)  # the others stop at their next barrier
                    raise failed.exception[0].with_traceback(failed.exception[1])
                live = [t for t in threads if not t._cc_ended]
                if not live:
                    break
                if all(t.syncthreads_blocked for t in live):
                    for t in live:  # everyone still running has arrived: open the barrier
                        t.syncthreads_blocked = False
                        t.syncthreads_event.set()
                cond.wait(_SAFETY_S)
                self._cc_wakeups += 1
        for t in threads:  # each has ended its kernel code; let the OS threads finish
            t.join()
            if t.exception:
                raise t.exception[0].with_traceback(t.exception[1])

    sim_kernel.BlockThread.syncthreads = syncthreads
    sim_kernel.BlockThread.run = block_thread_run
    sim_kernel.BlockManager.run = block_manager_run


def _abort(threads: list) -> None:
    for t in threads:
        t.abort = True
        t.syncthreads_blocked = False
        t.syncthreads_event.set()
