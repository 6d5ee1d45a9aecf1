"""Run one mutant through its exercise's check and classify the verdict.

``evaluate`` runs in this process (the CI sample); ``run`` runs it in a child process with a
time box (the report: a mutant may loop forever, or leave the simulator in a bad state).
"""

from __future__ import annotations

import importlib.util
import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .masters import Exercise
from .operators import BY_NAME, GENERIC

VERDICTS = ("named", "rejected", "misleading", "equivalent", "survived", "timeout", "broken",
            "crashed")


@dataclass
class Outcome:
    exercise: str
    operator: str
    line: int
    verdict: str
    cause: str = ""
    message: str = ""
    english_in_ja: int = 0  # English words left in the Japanese diagnosis
    ja: str = ""


def _load(ex: Exercise, source: str, where: Path) -> Any:
    """The mutant's ``ex.name`` from a real file (checkers read kernels' source lines)."""
    path = where / f"mutant_{ex.name}.py"
    path.write_text(ex.prelude + "\n" + source + "\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_cc_mutant_{ex.name}_{id(path)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, ex.name)


def _english(text: str, exc: Any) -> int:
    """English words left in a Japanese diagnosis (the course's own detector when the
    repository's tests are beside the package; else none counted). Values filled into the
    message that are code (names, source lines, what the learner's code raised) are not
    English to translate."""
    detector = Path(__file__).resolve().parents[4] / "tests" / "japanese_edition.py"
    if not detector.exists():  # an installed package without the repository's tests
        return 0
    spec = importlib.util.spec_from_file_location("_cc_japanese_edition", detector)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except ImportError:  # it needs pytest: a machine without the test tools counts none
        return 0
    return len(mod.not_japanese(text, mod._names(exc.text_message) |
                                mod._names(exc.text_hint)))


def evaluate(ex: Exercise, source: str, operator: str, line: int = 0) -> Outcome:
    """Run the mutant ``source`` of ``ex`` through its visible check (then its hidden cases,
    when the visible check accepts it) and classify the verdict."""
    import cudacourse.check as check
    from cudacourse import i18n

    out = Outcome(ex.lesson + "/" + ex.name, operator, line, "broken")
    with tempfile.TemporaryDirectory() as tmp:
        try:
            subject = _load(ex, source, Path(tmp))
        except Exception as exc:  # noqa: BLE001 - a mutant that does not load
            out.message = f"{type(exc).__name__}: {exc}"[:300]
            return out
        try:
            getattr(check, ex.checker)(subject)
        except check.CheckFailure as exc:
            out.cause, out.message = exc.cause, str(exc)[:600]
            with i18n.speaking("ja"):
                message, _hint = exc.shown()
            out.ja = message[:600]
            out.english_in_ja = _english(message, exc)
            if exc.cause in GENERIC:
                out.verdict = "rejected"
            elif exc.cause in BY_NAME[operator].causes:
                out.verdict = "named"
            else:
                out.verdict = "misleading"
            return out
        except Exception as exc:  # noqa: BLE001 - the checker itself failed: a bug to report
            out.verdict, out.message = "crashed", f"{type(exc).__name__}: {exc}"[:300]
            return out
        if not ex.hidden:
            out.verdict = "equivalent"
            return out
        try:
            exec(compile(ex.hidden, "<hidden>", "exec"),  # noqa: S102 - the master's own cell
                 {"cudacourse": __import__("cudacourse"), ex.name: subject})
            out.verdict = "equivalent"
        except check.CheckFailure as exc:
            out.verdict, out.cause, out.message = "survived", exc.cause, str(exc)[:300]
        return out


MARK = "@@cudacourse-mutant@@"


class Workers:
    """Child processes that each evaluate mutant after mutant (``worker``). A mutant that
    overruns ``timeout`` seconds gets "timeout" and its child is replaced; one whose child dies
    gets "crashed" with the child's last words; a child is recycled after ``recycle`` mutants,
    so no simulator state lives long."""

    def __init__(self, timeout: float, recycle: int = 40) -> None:
        self.timeout, self.recycle = timeout, recycle
        self._free: list = []
        self._lock = threading.Lock()

    def _start(self) -> dict:
        err = tempfile.TemporaryFile()
        proc = subprocess.Popen([sys.executable, "-m", "cudacourse.check.mutate.worker"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                text=True, bufsize=1)
        return {"proc": proc, "err": err, "served": 0, "lines": queue.Queue()}

    @staticmethod
    def _reader(w: dict) -> None:
        for line in w["proc"].stdout:
            w["lines"].put(line)
        w["lines"].put(None)  # the child's end

    def _take(self) -> dict:
        with self._lock:
            w = self._free.pop() if self._free else None
        if w is None:
            w = self._start()
            threading.Thread(target=self._reader, args=(w,), daemon=True).start()
        return w

    def _end(self, w: dict) -> str:
        w["proc"].kill()
        w["proc"].wait()
        w["err"].seek(0)
        tail = w["err"].read()[-300:].decode("utf-8", "replace")
        w["err"].close()
        return tail

    def run(self, ex: Exercise, source: str, operator: str, line: int) -> Outcome:
        name = ex.lesson + "/" + ex.name
        w = self._take()
        job = json.dumps({"exercise": asdict(ex), "source": source, "operator": operator,
                          "line": line})
        try:
            w["proc"].stdin.write(job + "\n")
            w["proc"].stdin.flush()
        except OSError:
            return Outcome(name, operator, line, "crashed", message=self._end(w))
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                text = w["lines"].get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self._end(w)
                return Outcome(name, operator, line, "timeout")
            if text is None:
                return Outcome(name, operator, line, "crashed", message=self._end(w))
            if text.startswith(MARK):
                break
        w["served"] += 1
        if w["served"] >= self.recycle:
            self._end(w)
        else:
            with self._lock:
                self._free.append(w)
        return Outcome(**json.loads(text[len(MARK):]))

    def close(self) -> None:
        with self._lock:
            free, self._free = self._free, []
        for w in free:
            w["proc"].stdin.close()
            self._end(w)


def run(ex: Exercise, source: str, operator: str, line: int, timeout: float) -> Outcome:
    """``evaluate`` in a child process of its own, killed after ``timeout`` seconds."""
    workers = Workers(timeout, recycle=1)
    try:
        return workers.run(ex, source, operator, line)
    finally:
        workers.close()
