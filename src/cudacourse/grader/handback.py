"""Feedback back to the students: the two records nbgrader's ``release_feedback`` reads.

``nbgrader release_feedback`` (and formgrader's "Release feedback", which calls it) reads
``feedback/<student>/<assignment>/timestamp.txt`` and ``submission_secret.txt`` for every
student and stops at the first one missing. nbgrader's own autograde copies them there from
the submission; the grader does not: intake puts a learner's files under ``learner-files/``,
so that the top of ``autograded/`` and ``feedback/`` holds only what the grader wrote
(:mod:`intake`), and a submission from an LMS zip or a copied home folder never had them.
Here the grader writes both, at the top of ``autograded/<student>/<assignment>/`` (from where
``nbgrader generate_feedback``, run by hand or by formgrader, copies them into ``feedback/``)
and of ``feedback/`` when it exists, from its own records:

* ``timestamp.txt``: the hand-in time in the gradebook (what the collector recorded and
  autograde read); where there is none, the time the grader graded it (said in the record).
* ``submission_secret.txt``: the name of the released file is a hash of this secret and
  the notebook's name; ``nbgrader fetch_feedback`` finds it with the secret that ``nbgrader
  submit`` kept in the student's own cache. So for a submission through the exchange the
  secret is the one its submit wrote (the only one the student's fetch can match), taken
  from the grader's copy and accepted only in the form nbgrader writes (128 hexadecimal
  digits); a secret in any other form, one that two students share (one of them would fetch
  the other's feedback), or none at all (an LMS zip, a home folder) is replaced by one the
  grader makes. Those students get their feedback as the HTML file in ``feedback/``
  through the LMS; release still works for the whole class.

What was chosen for each student is kept in ``grading/<assignment>/handback.json``, so a
grader-made secret stays the same from one release to the next.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from . import intake, safefs
from .lang import T

SECRET = "submission_secret.txt"
STAMP = "timestamp.txt"
_NBGRADER_SECRET = re.compile(r"[0-9a-f]{128}")  # nbgrader submit: secrets.token_hex(64)
MAX_SECRET_BYTES = 1024


@dataclass
class Handback:
    """What :func:`keep` wrote: per student, where the secret and the time came from."""

    students: dict[str, dict[str, str]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        out = []
        for student, r in sorted(self.students.items()):
            if r["secret_from"] != "exchange":
                out.append(T("{student}: feedback to hand back through the LMS (no "
                             "exchange secret: {why}); nbgrader fetch_feedback will not find "
                             "it", student=student, why=r["why"]))
            if r["time_from"] != "gradebook":
                out.append(T("{student}: no hand-in time in the gradebook; timestamp.txt "
                             "holds the time it was graded", student=student))
        return out


def _learner_secret(root: Path, student: str, assignment: str) -> tuple[str | None, str]:
    """The secret ``nbgrader submit`` wrote, from the grader's copy of the submission's
    files, or None and why not."""
    try:
        with safefs.real_folder_inside(root / "autograded", student, assignment,
                                       intake.LEARNER_FILES) as folder:
            entry = folder.entry(SECRET)
            if entry is None:
                return None, T("none was handed in")
            raw = folder.read(entry, MAX_SECRET_BYTES)
    except FileNotFoundError:
        return None, T("none was handed in")
    except (safefs.Refused, OSError):
        return None, T("{name} is not a regular file", name=SECRET)
    try:
        text = raw.decode("ascii").strip()
    except UnicodeDecodeError:
        text = ""
    if not _NBGRADER_SECRET.fullmatch(text):
        return None, T("{name} is not in nbgrader's form", name=SECRET)
    return text, ""


def _gradebook_times(db_url: str, assignment: str) -> dict[str, datetime]:
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with Gradebook(db_url) as gb:
        try:
            subs = gb.find_assignment(assignment).submissions
        except MissingEntry:
            return {}
        for sub in subs:
            if sub.timestamp is not None:
                out[sub.student.id] = sub.timestamp
    return out


def graded_students(root: Path, assignment: str) -> list[str]:
    """Students with an autograded copy of ``assignment`` (real folders only)."""
    top = root / "autograded"
    if not top.is_dir():
        return []
    return sorted(p.name for p in top.iterdir()
                  if not p.is_symlink() and (p / assignment).is_dir()
                  and not (p / assignment).is_symlink())


def keep(course_root: str | Path, assignment: str, db_url: str | None = None) -> Handback:
    """Write ``timestamp.txt`` and ``submission_secret.txt`` for every graded student of
    ``assignment`` into ``autograded/`` and ``feedback/`` (module docstring)."""
    from .course import default_db
    from .policy import utc_timestamp

    root = Path(course_root).resolve()
    record_path = root / "grading" / assignment / "handback.json"
    try:
        before = json.loads(record_path.read_text())
    except (OSError, ValueError):
        before = {}
    times = _gradebook_times(db_url or default_db(root), assignment)
    students = graded_students(root, assignment)
    found = {s: _learner_secret(root, s, assignment) for s in students}
    count: dict[str, int] = {}
    for secret, _ in found.values():
        if secret:
            count[secret] = count.get(secret, 0) + 1
    done = Handback()
    for student in students:
        secret, why = found[student]
        if secret and count[secret] > 1:
            secret, why = None, T("another student's submission holds the same secret")
        old = before.get(student, {}) if isinstance(before.get(student), dict) else {}
        record = {"secret_from": "exchange" if secret else "grader", "why": why}
        if not secret:  # the grader's own, the same on every release
            kept = old.get("secret", "")
            secret = kept if (old.get("secret_from") == "grader"
                              and _NBGRADER_SECRET.fullmatch(str(kept))) else \
                secrets.token_hex(64)
        graded = root / "autograded" / student / assignment
        if student in times:
            when, record["time_from"] = times[student], "gradebook"
        else:
            notebooks = sorted(graded.glob("*.ipynb"))
            mtime = notebooks[0].stat().st_mtime if notebooks else graded.stat().st_mtime
            when, record["time_from"] = datetime.fromtimestamp(mtime, timezone.utc), "graded"
        record.update(secret=secret, timestamp=utc_timestamp(when))
        for step in ("autograded", "feedback"):
            folder = root / step / student / assignment
            if folder.is_dir() and not folder.is_symlink():
                for name, text in ((SECRET, secret), (STAMP, record["timestamp"])):
                    target = folder / name
                    if target.is_symlink():
                        target.unlink()
                    target.write_text(text)
        done.students[student] = record
    record_path.parent.mkdir(parents=True, exist_ok=True)
    # 0600 from the start: the secrets name every student's released feedback
    fd = os.open(record_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({**before, **done.students}, fh, indent=1, sort_keys=True)
    return done


__all__ = ["Handback", "keep", "graded_students", "SECRET", "STAMP"]
