"""When each student handed in: the collector's record, never the learner's word.

A learner writes the exchange folder's name (``<student>+<assignment>+<time>+<random>``) and
its ``timestamp.txt`` (``nbgrader submit`` runs as the learner), and can backdate both. So
:mod:`collect` records, in ``<course>/grading/<assignment>/handins.json`` (the grader's file,
0600, which no learner can write), per student:

* ``handed_in``: the trusted hand-in time, from the exchange, the earlier of

  - the time the collector first saw this content (``first_seen``, per digest of the files,
    kept across re-collections: collecting again does not move it; new content is new), and
  - the latest change time (``st_ctime``) of the inbound folder and of its files, which the
    kernel sets and a learner cannot set back (``touch`` sets ``st_mtime`` only; changing a
    file after the deadline moves ``st_ctime`` forward);

  from an LMS download, the time the export carries (see :mod:`lmsnames`), or none: the LMS
  keeps its own deadlines (a student's lateness is then the LMS's to apply);
* ``learner_time``: the learner's ``timestamp.txt``, kept for display only;
* ``source``, ``entry`` and ``digest``: where the collected copy came from.

:mod:`intake` writes the staged copy's ``timestamp.txt`` (what nbgrader reads for lateness)
from ``handed_in`` whenever a record exists for the student.
"""

from __future__ import annotations

import json
import os
import stat
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .safefs import T

RECORD = "handins.json"
VERSION = 1


class HandinError(Exception):
    """The record cannot be trusted or read (the message says why)."""


def path_of(course_root: str | os.PathLike, assignment: str) -> Path:
    return Path(course_root) / "grading" / assignment / RECORD


def iso(when: datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc).isoformat()


def parse(text: str) -> datetime:
    when = datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def load(course_root: str | os.PathLike, assignment: str) -> dict[str, Any]:
    """The record (empty when there is none). Refused (HandinError) unless it is a regular
    file owned by this process's user, read without following a link."""
    path = path_of(course_root, assignment)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return {"version": VERSION, "students": {}}
    except OSError as exc:
        raise HandinError(T("{file} cannot be read ({error})", file=str(path),
                            error=type(exc).__name__)) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise HandinError(T("{file} is not the grader's own file (owner uid {uid}); "
                                "remove it and collect again", file=str(path), uid=st.st_uid))
        try:
            data = json.loads(fh.read(64 << 20))
        except (ValueError, UnicodeDecodeError):
            raise HandinError(T("{file} is not a hand-in record (not JSON); remove it and "
                                "collect again", file=str(path))) from None
    if not isinstance(data, dict) or not isinstance(data.get("students"), dict):
        raise HandinError(T("{file} is not a hand-in record; remove it and collect again",
                            file=str(path)))
    return data


def save(course_root: str | os.PathLike, assignment: str, data: dict[str, Any]) -> Path:
    """Write the record whole (a new file renamed over the old one), readable by its owner."""
    path = path_of(course_root, assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{RECORD}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=1, sort_keys=True, ensure_ascii=True)
    os.replace(tmp, path)
    return path


def note(data: dict[str, Any], student: str, *, source: str, entry: str, digest: str,
         now: datetime, changed: datetime | None = None, exported: datetime | None = None,
         learner_time: str | None = None, flags: dict[str, Any] | None = None) -> datetime | None:
    """Record what was collected for ``student``; returns the trusted hand-in time (None when
    the source carries none). ``changed``: the kernel's latest change time of the entry
    (exchange); ``exported``: the LMS export's own time."""
    rec = data["students"].setdefault(student, {})
    seen = rec.setdefault("first_seen", {})
    first = parse(seen.setdefault(digest, iso(now)))
    if source == "exchange":
        when: datetime | None = min(first, changed) if changed else first
    else:
        when = exported
    rec.update({"source": source, "entry": entry, "digest": digest,
                "handed_in": iso(when) if when else None, "learner_time": learner_time,
                "flags": flags or {}})
    return when


def lookup(course_root: str | os.PathLike, assignment: str, student: str
           ) -> tuple[bool, datetime | None]:
    """(whether the collector recorded ``student``, their trusted hand-in time or None)."""
    rec = load(course_root, assignment)["students"].get(student)
    if not isinstance(rec, dict):
        return False, None
    when = rec.get("handed_in")
    try:
        return True, parse(when) if isinstance(when, str) else None
    except ValueError:
        raise HandinError(T("{file}: the time recorded for {name} is not a time",
                            file=str(path_of(course_root, assignment)), name=student)) from None


__all__ = ["HandinError", "load", "save", "note", "lookup", "path_of", "RECORD"]
