"""One compile child per checking process, kept alive between kernels.

The sm_90 compile gate (``_compile.py``) needs a process of its own: the simulator replaces
``numba.cuda``'s compiler in the process that simulates. Started per kernel, that child spent
most of its time starting: Python, NumPy, Numba and the toolkit's set-up (about 1.2 s of CPU)
against about 0.3 s to compile and run ptxas. A class of mutants, a lesson's checks or the
test suite compile hundreds of distinct kernels, so the child now stays: ``ask()`` sends one
request a line to ``_child.py serve`` and reads the line that carries the request's nonce.

What it keeps, and what it does not:

* a request that takes longer than its timeout, or a child that dies, ends that child (its
  whole process group); the next request starts a fresh one;
* the child is replaced after ``RECYCLE`` requests (Numba keeps what it compiled);
* a forked process (the mutation runner's workers) never talks to its parent's child: a
  child belongs to the process id that started it, and another process starts its own;
* it ends with this process: its stdin closes, and ``serve`` returns at end of input.

The child rebuilds each kernel in a namespace of its own. Whatever a kernel's module-level
code changes in the child can only touch later compiles of the same process: the same
learner's kernels (grading runs each notebook in a process of its own).
``CUDACOURSE_COMPILE_SERVER=0`` goes back to one child per kernel.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import queue
import secrets
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from ..i18n import T

RECYCLE = 200
ENABLED = os.environ.get("CUDACOURSE_COMPILE_SERVER", "1") != "0"


class Server:
    """A ``_child.py serve`` process and the thread that reads its stdout."""

    def __init__(self, child: str, env: dict, mark: str) -> None:
        self.proc = subprocess.Popen([sys.executable, child, "serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     # what a learner's code prints may be any bytes: never
                                     # let decoding end the reader (requests and answers are
                                     # ASCII JSON)
                                     encoding="utf-8", errors="replace", env=env,
                                     start_new_session=True)
        self.pid = os.getpid()
        self.mark = mark
        self.lines: queue.Queue = queue.Queue()
        self.tail: collections.deque = collections.deque(maxlen=6)
        self.served = 0
        threading.Thread(target=self._read, args=(self.proc.stdout, self.lines),
                         name="cudacourse-compile-server-out", daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, None),
                         name="cudacourse-compile-server-err", daemon=True).start()

    def _read(self, pipe: Any, into: queue.Queue | None) -> None:
        for line in pipe:
            if into is not None and line.startswith(self.mark):
                into.put(line)
            elif line.strip():
                self.tail.append(line.rstrip()[-300:])
        if into is not None:
            into.put(None)  # end of output: the child is gone

    def ask(self, req: dict, timeout: float) -> dict:
        nonce = secrets.token_hex(16)
        self.proc.stdin.write(json.dumps({**req, "nonce": nonce}) + "\n")
        self.proc.stdin.flush()
        self.served += 1
        end = time.monotonic() + timeout
        want = self.mark + nonce
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                self.end()
                return {"child_error": T("it took longer than {timeout:.0f} s", timeout=timeout)}
            if line is None:
                self.end()
                return {"child_error": T("exit status {returncode}: {tail}",
                                         returncode=self.proc.poll(),
                                         tail=" | ".join(self.tail))}
            if line.startswith(want):  # any other marked line is printed text: skipped
                return json.loads(line[len(want):])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def end(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            try:  # the child and anything it started (its own session, POSIX)
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (AttributeError, OSError):  # Windows has no process groups
                self.proc.kill()
            self.proc.wait()


_LOCK = threading.Lock()
_HELD: dict = {"server": None, "hooked": False}


def _end_at_exit() -> None:
    server = _HELD["server"]
    if server is not None and server.pid == os.getpid():
        server.end()


def _hook_once() -> None:
    """At the first child, not at import (importing the package changes nothing)."""
    if not _HELD["hooked"]:
        _HELD["hooked"] = True
        atexit.register(_end_at_exit)


def ask(child: str, env: dict, mark: str, req: dict, timeout: float) -> dict:
    """The answer of the process's compile child to ``req`` (a ``compile`` request), or
    ``{"child_error": why}``."""
    with _LOCK:
        for attempt in (1, 2):  # a child that died since its last answer: one fresh try
            server = _HELD["server"]
            # another process's child (this one was forked) is left alone, never polled
            if server is not None and (server.pid != os.getpid() or not server.alive()
                                       or server.served >= RECYCLE):
                if server.pid == os.getpid():
                    server.end()
                server = None
            if server is None:
                _hook_once()
                try:
                    server = Server(child, env, mark)
                except OSError as exc:  # e.g. a sandbox that forbids starting processes
                    return {"child_error": T("a child process could not be started "
                                             "(`{exc}`)", exc=exc)}
                _HELD["server"] = server
            try:
                answer = server.ask(req, timeout)
            except (BrokenPipeError, OSError, ValueError) as exc:  # it died before reading
                server.end()
                _HELD["server"] = None
                if attempt == 2:
                    return {"child_error": T("a child process could not be started "
                                             "(`{exc}`)", exc=exc)}
                continue
            if "child_error" in answer and not server.alive():
                _HELD["server"] = None
            return answer
    return {"child_error": "unreachable"}  # pragma: no cover - the loop always returns


__all__ = ["ask", "Server", "RECYCLE", "ENABLED"]
