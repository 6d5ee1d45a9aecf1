"""The clean process that scores one test cell. Run inside the sandbox:

    python -P -m cudacourse.grader.verdict < job.json    (the result is the only thing on the
                                                           original stdout)

The job (JSON on stdin) holds the master's context sources, the answer cells' sources, the
master test cell's source and its grade_id. The process

1. runs the context (the instructor's setup and definitions: trusted code);
2. applies the static allow-list (:mod:`allowlist`) to the answer cells and binds only what
   it accepts -- no learner statement runs as such, so no learner hook, thread, patch,
   display hook or input transformer exists in this process;
3. runs the master test cell, with every print of the checkers and of learner kernels going
   to a capped buffer;
4. writes one JSON verdict to a duplicate of the original stdout, taken before step 1. The
   learner's functions cannot reach it: they cannot name ``os``, ``sys`` or file objects.

A test cell whose names are refused by the allow-list is "not gradable: <construct> at line N"
and gets no points, without running anything of the learner's.
"""

from __future__ import annotations

import ast
import io
import json
import os
import sys
import traceback
from typing import Any

from . import allowlist, partial

DEFAULT_CAP = 20_000  # characters of printed output kept per test cell


class CappedText(io.TextIOBase):
    """A text stream that keeps the first ``cap`` characters and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap, self.parts, self.kept, self.dropped = cap, [], 0, 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        s = str(s)
        room = self.cap - self.kept
        if room > 0:
            self.parts.append(s[:room])
            self.kept += min(room, len(s))
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def text(self) -> str:
        out = "".join(self.parts)
        if self.dropped:
            out += f"\n[... {self.dropped} more characters of output cut by the grader]\n"
        return out


def _names_loaded(source: str) -> list[str]:
    return [n.id for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)]


def _bind(sel: allowlist.Selection, ns: dict[str, Any], sources: dict[str, str]) -> None:
    import importlib
    import linecache

    for d in sel.accepted.values():
        if d.kind == "literal":
            ns[d.name] = d.value
        elif d.kind == "import":
            module, name, _ = d.value
            mod = importlib.import_module(module)
            ns[d.name] = getattr(mod, name) if name and name != module else (
                mod if d.value[2] else importlib.import_module(module.split(".")[0]))
        else:
            # The cell's text under the name the code is compiled with, so that checkers
            # can read a kernel's source (inspect.getsource) as they do in a notebook.
            name = f"<answer cell '{d.cell}'>"
            text = sources.get(d.cell, "")
            linecache.cache[name] = (len(text), None, text.splitlines(True), name)
            code = compile(ast.Module(body=[d.node], type_ignores=[]), name, "exec")
            exec(code, ns)  # noqa: S102 - an allow-listed definition: binds a function only


def judge(job: dict[str, Any], ns: dict[str, Any] | None = None, done: int = 0) -> dict[str, Any]:
    """Score one test cell (in this process: call it only in a process made for it).

    ``ns`` is a namespace where the first ``done`` context sources already ran (the
    batch's shared setup, run once before forking)."""
    grade_id = job["grade_id"]
    out = CappedText(int(job.get("cap", DEFAULT_CAP)))
    result: dict[str, Any] = {"grade_id": grade_id, "status": "fail", "ename": None,
                              "message": "", "partial": None, "notes": []}
    if ns is None:
        ns = {"__name__": "__main__", "__builtins__": __builtins__}
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = out
    try:
        try:
            for i, src in enumerate(job.get("context", [])[done:], start=done):
                exec(compile(src, f"<master context {i}>", "exec"), ns)  # noqa: S102
        except BaseException as exc:  # noqa: BLE001 - the instructor's code: report it
            result.update(status="error", ename=type(exc).__name__,
                          message=f"the master's context failed: {type(exc).__name__}: {exc}")
            return result
        sel = allowlist.select([tuple(c) for c in job.get("answers", [])], ns)
        result["notes"] = sel.ignored[:20]
        why = sel.reason_for(_names_loaded(job["test"]))
        if why:
            result.update(status="not_gradable", ename="NotGradable",
                          message=f"not gradable: {why}")
            return result
        for value in list(ns.values()):  # constant tables stay constant (see allowlist)
            if type(value).__name__ == "ndarray" and hasattr(value, "setflags"):
                value.setflags(write=False)
        try:
            _bind(sel, ns, {c[0]: c[1] for c in job.get("answers", [])})
            # One statement at a time, each outcome kept: a failing cell's "credit"
            # (partial.py) says what its checks still established.
            value = partial.run_cell(job["test"], ns, grade_id, result)
        except BaseException as exc:  # noqa: BLE001 - every failure is a verdict
            tb = traceback.extract_tb(exc.__traceback__)
            frames = [f"{f.filename}:{f.lineno}" for f in tb if f.filename.startswith("<")]
            # CheckFailure.cause: the checker's stable diagnosis id (cudacourse report
            # counts them); None for an exception that carries none.
            cause = getattr(exc, "cause", None)
            result.update(status="fail", ename=type(exc).__name__,
                          message=str(exc)[:4000], where=frames[-3:],
                          cause=str(cause)[:100] if cause is not None else None)
            result.update(_structure(exc))
            return result
        result["status"] = "pass"
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            result["partial"] = float(value)
        return result
    finally:
        sys.stdout, sys.stderr = saved
        result["output"] = out.text()


def _structure(exc: BaseException) -> dict[str, Any]:
    """A checker's failure as its parts (CheckFailure: the diagnosis, the fix, the case, and
    their catalogue templates), so the feedback says cause and fix as the checker split them
    and in the notebook's language, never by cutting the message at its punctuation."""
    if not (hasattr(exc, "shown") and hasattr(exc, "hint") and hasattr(exc, "to_dict")):
        return {}
    try:
        diagnosis, hint = exc.shown()
        data = exc.to_dict()
        text = str(exc)
    except Exception:  # noqa: BLE001 - a learner's look-alike: the message is enough
        return {}
    out = {"diagnosis": str(diagnosis)[:4000], "hint": str(hint)[:2000],
           "case": text[text.rfind(" [") + 2:-1][:500]
           if getattr(exc, "context", None) and text.endswith("]") else ""}
    for key in ("message_text", "hint_text"):
        if isinstance(data.get(key), dict):
            out[key] = data[key]
    return out


STATUSES = ("pass", "fail", "error", "not_gradable", "timeout")


def normalise(v: Any, grade_id: str) -> dict[str, Any]:
    """A verdict as read back from its process, with every field of the type the grader
    uses: parsing is total, whatever the line held. Anything malformed is a failing
    verdict that says so (no points), never an exception in the grader."""
    if not isinstance(v, dict):
        return {"grade_id": grade_id, "status": "error", "ename": "MalformedVerdict",
                "message": f"the check's result was not a verdict ({type(v).__name__})",
                "partial": None, "credit": None, "notes": [], "where": [],
                "statements": [], "cause": None, "output": ""}

    def text(x: Any, cap: int) -> str:
        s = x if isinstance(x, str) else "" if x is None else json.dumps(x, default=str)
        return s[:cap]

    status = v.get("status") if v.get("status") in STATUSES else None
    out: dict[str, Any] = {
        "grade_id": grade_id, "status": status or "error",
        "ename": text(v.get("ename"), 200) or None,
        "message": text(v.get("message"), 4000),
        "output": text(v.get("output"), 1 << 20),
        "notes": [text(n, 500) for n in v.get("notes", [])[:20]]
        if isinstance(v.get("notes"), list) else [],
        "where": [text(w, 200) for w in v.get("where", [])[:3]]
        if isinstance(v.get("where"), list) else [],
        "cause": text(v.get("cause"), 100) or None,
        # a CheckFailure's parts (see _structure); absent for other exceptions
        "diagnosis": text(v.get("diagnosis"), 4000), "hint": text(v.get("hint"), 2000),
        "case": text(v.get("case"), 500),
        **{k: v[k] for k in ("message_text", "hint_text")
           if isinstance(v.get(k), dict) and len(json.dumps(v[k], default=str)) < 8000},
        "partial": None, "credit": None,
        "statements": [d for d in v.get("statements", [])[:200] if isinstance(d, dict) and
                       isinstance(d.get("kind"), str) and isinstance(d.get("passed"), bool)]
        if isinstance(v.get("statements"), list) else [],
    }
    c = v.get("credit")
    if isinstance(c, (int, float)) and not isinstance(c, bool) and 0.0 <= c <= 1.0:
        out["credit"] = float(c)
    for key in ("fork", "seconds", "isolation"):
        if key in v:
            out[key] = v[key]
    p = v.get("partial")
    if isinstance(p, (int, float)) and not isinstance(p, bool) and p == p and \
            abs(p) != float("inf"):
        out["partial"] = float(p)
    elif p is not None and out["status"] == "pass":
        out.update(status="error", ename="MalformedVerdict",
                   message=f"the check's partial score is not a number ({type(p).__name__})")
    if status is None:
        out.update(ename="MalformedVerdict",
                   message=f"the check's result had no valid status ({text(v.get('status'), 60)})")
    return out


def _shared_prefix(jobs: list[dict[str, Any]]) -> list[str]:
    first = jobs[0].get("context", [])
    n = len(first)
    for job in jobs[1:]:
        ctx = job.get("context", [])
        n = min(n, len(ctx))
        while n and ctx[:n] != first[:n]:
            n -= 1
    return first[:n]


def _fork_one(job: dict[str, Any], ns: dict[str, Any], done: int, timeout: float) -> dict:
    """Judge ``job`` in a forked child of this (clean) process; the child's verdict comes
    back on a pipe of its own, and a child that overruns ``timeout`` is killed."""
    import select
    import signal
    import time

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: judge, send, leave without running any finaliser
        os.close(r)
        try:
            result = judge(job, ns, done)
            data = json.dumps(result).encode()
        except BaseException as exc:  # noqa: BLE001
            data = json.dumps({"grade_id": job.get("grade_id"), "status": "error",
                               "ename": type(exc).__name__,
                               "message": f"grader error: {exc}"}).encode()
        with os.fdopen(w, "wb") as fh:
            fh.write(data)
        os._exit(0)
    os.close(w)
    chunks, deadline = [], time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return {"grade_id": job["grade_id"], "status": "timeout",
                    "ename": "CellTimeoutError",
                    "message": f"the check did not finish within {timeout:g} s"}
        ready, _, _ = select.select([r], [], [], min(left, 1.0))
        if ready:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"grade_id": job["grade_id"], "status": "error", "ename": "GraderError",
                "message": f"the check's process ended without a verdict (wait status "
                           f"{status})"}


def _probe_in_child(code: str, timeout: float = 60.0) -> str | None:
    """Run ``code`` (which sets ``out``) in a forked child; its ``out`` (a string), or None
    if the child failed or overran. Used so that this process never initialises CUDA."""
    import select
    import time

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            ns: dict[str, Any] = {}
            exec(code, ns)  # noqa: S102 - the grader's own probe
            data = str(ns.get("out", "")).encode()
        except BaseException:  # noqa: BLE001
            data = b""
        with os.fdopen(w, "wb") as fh:
            fh.write(data)
        os._exit(0)
    os.close(w)
    chunks, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([r], [], [], 1.0)
        if ready:
            chunk = os.read(r, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    else:  # overran: whatever it wrote is not an answer
        import signal

        os.kill(pid, signal.SIGKILL)
        chunks = []
    os.close(r)
    os.waitpid(pid, 0)
    return b"".join(chunks).decode() or None


# In a child: import the course's device choice (which asks the driver: cuInit, there only).
_PROBE = "from cudacourse import device\nout = device.probe_json()"
# In a child of a server that never initialised CUDA: can it create a context and run?
_GPU_WORKS = ("from numba import cuda\nimport numpy as np\n"
              "d = cuda.to_device(np.arange(4, dtype=np.float32))\n"
              "out = 'ok' if float(d.copy_to_host().sum()) == 6.0 else 'wrong'")


def _gpu_wanted() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM") != "1" and \
        os.environ.get("CUDACOURSE_DEVICE", "auto") != "sim"


def _cuda_initialised() -> bool:
    """Whether this process initialised the CUDA driver (then a forked child cannot use it)."""
    if "numba.cuda" not in sys.modules:
        return False
    try:
        from cudacourse._numba_private import driver_initialized
    except Exception:  # noqa: BLE001 - cannot tell: assume it was
        return True
    return driver_initialized()


def main() -> None:
    # The verdict's own channel: a duplicate of stdout, taken before anything else runs.
    # Then fd 1 and 2 point at /dev/null, so output written below Python (a GPU kernel's
    # printf, a C library) can neither reach the channel nor fill a disk.
    channel = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    req = json.loads(sys.stdin.read())
    jobs = req.get("jobs") or [req]
    results = []
    try:
        if len(jobs) == 1:
            results.append(judge(jobs[0]))
        else:
            # One process per test cell, forked from this one, which ran only the master's
            # shared setup: one process start for the whole submission. On a GPU this process
            # must never initialise CUDA (a driver initialised before fork is unusable in the
            # child): it takes the device probe from a short-lived child, runs the setup
            # (imports; CUDA stays uninitialised), and checks in one more child that a fresh
            # context works there. If any of that fails, it says {"fork": false} and the
            # caller starts one sandboxed process per cell instead.
            gpu = _gpu_wanted() and hasattr(os, "fork")
            if gpu and "CUDACOURSE_GPU_PROBED" not in os.environ:
                probed = _probe_in_child(_PROBE)
                if probed:
                    os.environ["CUDACOURSE_GPU_PROBED"] = probed
            shared = _shared_prefix(jobs)
            ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
            sink = CappedText(0)
            sys.stdout = sys.stderr = sink
            partial._failure_type()  # imports the checkers' failure type once, not per child
            for i, src in enumerate(shared):
                exec(compile(src, f"<master context {i}>", "exec"), ns)  # noqa: S102
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
            # the setup's choice, if it made one (asking cudacourse.MODE would make one here)
            chose = sys.modules.get("cudacourse.runtime.device")
            on_gpu = (chose is not None and chose.chosen() and chose.mode() == "gpu") or (
                "numba.cuda" in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1")
            forkable = hasattr(os, "fork") and (
                not on_gpu or (not _cuda_initialised() and _probe_in_child(_GPU_WORKS) == "ok"))
            if not forkable:
                channel.write(json.dumps({"fork": False}) + "\n")
                channel.flush()
                os._exit(0)
            for job in jobs:
                results.append(_fork_one(job, ns, len(shared), float(req.get("timeout", 120))))
    except BaseException as exc:  # noqa: BLE001 - never die without a verdict
        done = {r.get("grade_id") for r in results}
        results += [{"grade_id": j.get("grade_id"), "status": "error",
                     "ename": type(exc).__name__, "message": f"grader error: {exc}"}
                    for j in jobs if j.get("grade_id") not in done]
    for result in results:
        channel.write(json.dumps(result) + "\n")
    channel.flush()
    os._exit(0)  # no atexit handlers, no finalisers


if __name__ == "__main__":
    main()
