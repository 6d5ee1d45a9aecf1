"""What graded a class, and what changed when it was graded again.

Every grading run can be stamped (:func:`stamp`) with the cudacourse version, the git commit
of the code that graded it (and whether the tree had uncommitted changes), nbgrader's and
Python's versions, the host, and content hashes of what decides a score: the checker and
grader modules, and the assignment's master notebooks (their test cells). :func:`record`
stores the stamp with every student's score and diagnosis per test cell in
``<course>/grading/<assignment>/provenance/<time>.json``; recording again after a regrade
lists whose scores changed, cell by cell, with the diagnosis before and after and the
files whose hashes differ between the two runs -- a checker fix shows up as "cudacourse/
check/vector.py changed" beside every score it moved.

``cudacourse report`` records a snapshot whenever the gradebook differs from the last one
and prints the changes; ``python -m cudacourse.grader.provenance COURSE ASSIGNMENT`` does
the same on its own.

Imports nothing from the ``cudacourse`` package (its version comes from the installed
metadata), so it can run in nbgrader's process.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/cudacourse
# What decides a score, inside the package.
SCORED_BY = ("check/*.py", "grader/*.py", "quiz.py", "quizzes/*.toml")
# In grader/, but they only schedule, report or record: a change there moves no score.
NOT_SCORING = {"cudacourse/grader/classdata.py",
               "cudacourse/grader/classreport.py", "cudacourse/grader/course.py",
               "cudacourse/grader/distributed.py", "cudacourse/grader/provenance.py",
               "cudacourse/grader/quiz_mode.py", "cudacourse/grader/runrecord.py"}


def _v(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _own_version() -> str:
    """cudacourse's version: the installed metadata, else (imported from a source tree,
    e.g. with PYTHONPATH=src on a GPU machine) ``__version__`` read from the package's
    ``__init__.py`` as text -- importing it would choose the CUDA mode in nbgrader's process."""
    installed = _v("cudacourse")
    if installed != "not installed":
        return installed
    try:
        text = (PACKAGE_DIR / "__init__.py").read_text()
    except OSError:
        return "not installed"
    found = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return f"{found.group(1)} (source tree, not installed)" if found else "not installed"


def _git(where: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


NO_GIT = "commit unknown (not a git checkout)"


def git_state(where: Path) -> dict[str, Any]:
    """Commit and dirtiness of the git tree holding ``where`` (None, with ``note`` saying
    so, when not in one)."""
    commit = _git(where, "rev-parse", "HEAD")
    if commit is None:  # a copy without .git, an installed wheel, or no git at all
        return {"commit": None, "dirty": None, "note": NO_GIT}
    status = _git(where, "status", "--porcelain", "--untracked-files=no", "--", ".")
    return {"commit": commit, "dirty": bool(status)}


def file_hashes(base: Path, patterns: tuple[str, ...]) -> dict[str, str]:
    """sha256 (first 16 hex digits) of every file matching ``patterns`` under ``base``."""
    out = {}
    for pattern in patterns:
        for path in sorted(base.glob(pattern)):
            if path.is_file():
                out[str(path.relative_to(base.parent))] = hashlib.sha256(
                    path.read_bytes()).hexdigest()[:16]
    return out


def stamp(course_root: str | os.PathLike | None = None,
          assignment: str | None = None) -> dict[str, Any]:
    """Who and what graded: versions, commits, hashes of the scoring code and masters."""
    out: dict[str, Any] = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cudacourse": _own_version(), "nbgrader": _v("nbgrader"),
        "python": platform.python_version(), "host": socket.gethostname(),
        "code": git_state(PACKAGE_DIR),
        "scored_by": {k: v for k, v in file_hashes(PACKAGE_DIR, SCORED_BY).items()
                      if k not in NOT_SCORING},
    }
    if course_root is not None:
        root = Path(course_root).resolve()
        out["course"] = git_state(root)
        if assignment:
            out["masters"] = file_hashes(root / "solutions", (f"{assignment}/*.ipynb",))
    return out


# --- snapshots and their differences -------------------------------------------------------

def snapshot(course_root: str | os.PathLike, assignment: str,
             db_url: str | None = None) -> dict[str, Any]:
    """The stamp plus every student's score and diagnosis per test cell."""
    from . import classdata

    return snapshot_of(classdata.collect(course_root, assignment, db_url), course_root)


def snapshot_of(data: Any, course_root: str | os.PathLike) -> dict[str, Any]:
    """:func:`snapshot` of an already collected ``classreport.ClassData``."""
    assignment = data.assignment
    students = {}
    for sid, st in sorted(data.students.items()):
        if not st.submitted and st.status == "no submission":
            continue  # the gradebook's students of other assignments: not this one's
        students[sid] = {
            "status": st.status, "raw_score": st.raw_score, "late_penalty": st.late_penalty,
            "cells": {k: {"score": c.score, "diagnosis": c.diagnosis}
                      for k, c in st.cells.items()}}
    return {"assignment": assignment, "stamp": stamp(course_root, assignment),
            "students": students}


@dataclass
class Change:
    student: str
    cell: str  # a test cell's grade_id, or "-" for the whole submission
    before: float | None
    after: float | None
    why: str


def _said(diagnosis: str | None, score: float | None) -> str:
    if score is None:
        return "not graded"
    return diagnosis or "passed"


def changed_files(old: dict, new: dict) -> list[str]:
    """Scoring code and masters whose hashes differ between two stamps."""
    out = []
    for part in ("scored_by", "masters"):
        a, b = old.get(part, {}) or {}, new.get(part, {}) or {}
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                what = "added" if name not in a else "removed" if name not in b else "changed"
                out.append(f"{name} {what}")
    return out


def changes(old: dict, new: dict) -> list[Change]:
    """Every score that differs between two snapshots, with the diagnoses and the cause."""
    files = changed_files(old.get("stamp", {}), new.get("stamp", {}))
    code = ""
    a_code = (old.get("stamp", {}).get("code") or {}).get("commit")
    b_code = (new.get("stamp", {}).get("code") or {}).get("commit")
    if a_code != b_code:
        code = (f"graded by commit {str(a_code or 'unknown')[:10]} then "
                f"{str(b_code or 'unknown')[:10]}")
    context = "; ".join(x for x in (code, ", ".join(files[:6]) +
                                     (f" and {len(files) - 6} more" if len(files) > 6 else ""))
                        if x)
    out: list[Change] = []
    before, after = old.get("students", {}), new.get("students", {})
    for sid in sorted(set(before) | set(after)):
        a, b = before.get(sid), after.get(sid)
        if a is None or b is None:
            out.append(Change(sid, "-", None if a is None else a.get("raw_score"),
                              None if b is None else b.get("raw_score"),
                              "new submission" if a is None else "submission removed"))
            continue
        if a.get("status") != b.get("status") and "graded" in (a.get("status"),
                                                                 b.get("status")):
            out.append(Change(sid, "-", a.get("raw_score"), b.get("raw_score"),
                              f"{a.get('status')} -> {b.get('status')}"))
        for cell in sorted(set(a.get("cells", {})) | set(b.get("cells", {}))):
            ca = a.get("cells", {}).get(cell, {})
            cb = b.get("cells", {}).get(cell, {})
            if ca.get("score") == cb.get("score"):
                continue
            why = (f"{_said(ca.get('diagnosis'), ca.get('score'))} -> "
                   f"{_said(cb.get('diagnosis'), cb.get('score'))}")
            out.append(Change(sid, cell, ca.get("score"), cb.get("score"),
                              why + (f" ({context})" if context else "")))
    return out


def format_changes(items: list[Change]) -> str:
    if not items:
        return "No score changed since the previous grading run."
    who = sorted({c.student for c in items})
    lines = [f"{len(who)} student(s) changed since the previous grading run: "
             f"{', '.join(who)}"]
    for c in items:
        lines.append(f"- {c.student} {c.cell}: {c.before} -> {c.after}: {c.why}")
    from . import untrusted

    return "\n".join(untrusted.line(ln) for ln in lines)  # names come from submissions


def _scores_only(snap: dict) -> dict:
    return {sid: {"status": s["status"], "late_penalty": s.get("late_penalty"),
                  "cells": {k: c["score"] for k, c in s["cells"].items()}}
            for sid, s in snap.get("students", {}).items()}


def history(course_root: str | os.PathLike, assignment: str) -> list[Path]:
    """The recorded snapshots, oldest first."""
    folder = Path(course_root) / "grading" / assignment / "provenance"
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def record(course_root: str | os.PathLike, assignment: str, db_url: str | None = None,
           force: bool = False, snap: dict | None = None) -> tuple[Path | None, list[Change]]:
    """Snapshot the gradebook (or store ``snap``); return its file (None when nothing
    changed since the last one and ``force`` is off) and the changes since the previous."""
    snap = snap or snapshot(course_root, assignment, db_url)
    runs = history(course_root, assignment)
    previous = json.loads(runs[-1].read_text()) if runs else None
    if previous is not None and not force and _scores_only(previous) == _scores_only(snap):
        return None, []
    found = changes(previous, snap) if previous is not None else []
    folder = Path(course_root) / "grading" / assignment / "provenance"
    folder.mkdir(parents=True, exist_ok=True)
    name = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    path = folder / f"{name}.json"
    n = 1
    while path.exists():
        path = folder / f"{name}-{n}.json"
        n += 1
    snap["changes_since_previous"] = [asdict(c) for c in found]
    from . import untrusted
    from .runrecord import _private

    # student names and diagnoses quote submissions; no gradebook password; owner only
    safe = untrusted.deep(untrusted.redact(snap, untrusted.secrets_of(db_url)), untrusted.text)
    _private(path, json.dumps(safe, indent=1))
    return path, found


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m cudacourse.grader.provenance",
                                description="record what graded ASSIGNMENT; list changes")
    p.add_argument("course")
    p.add_argument("assignment")
    p.add_argument("--db")
    p.add_argument("--force", action="store_true", help="record even if nothing changed")
    args = p.parse_args(argv)
    path, found = record(args.course, args.assignment, args.db, force=args.force)
    print(f"recorded {path}" if path else "gradebook unchanged since the last record")
    print(format_changes(found))
    return 0


__all__ = ["Change", "changed_files", "changes", "format_changes", "git_state", "history",
           "record", "snapshot", "snapshot_of", "stamp"]

if __name__ == "__main__":
    sys.exit(main())
