"""Whose folder is it: the names Moodle's and Canvas's "download all submissions" give.

* **Moodle** (assignment, "Download all submissions"): one folder per student and plugin,
  ``<Full Name>_<participant id>_assignsubmission_file_`` (files inside it), or with "download
  submissions in folders" off, files named ``<Full Name>_<id>_assignsubmission_file_<file>``.
  The number is the participant id Moodle shows in the assignment's grading table (the
  user id, or the blind-marking participant number): the roster's ``moodle_id``. Only the
  ``file`` plugin's submissions are collected (``onlinetext`` and others hold no notebook).
  A full name is the learner's own profile text: a name that itself holds
  ``_<digits>_assignsubmission_`` would make the folder name ambiguous, and is refused.
* **Canvas** (assignment, "Download Submissions"): a flat zip of files named
  ``<name>_<user id>_<submission id>_<file>``, with ``late_`` after the name when Canvas
  marked the submission late (``<name>_late_<user id>_...``); ``<name>`` is the sortable name
  in lower case without spaces or punctuation (no ``_``); a resubmitted file's name carries
  ``-<n>`` before its extension (``lesson-1.ipynb``), which is taken off. The user id is the
  roster's ``canvas_id``.

Neither name carries a hand-in time; Canvas's carries a late mark, recorded and shown. A
zip's own entry times are the LMS's (not the learner's), in the LMS server's local zone:
:mod:`collect` uses them as hand-in times only when the instructor names that zone
(``--archive-times ZONE``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .roster import Roster
from .safefs import T, shown

_MOODLE = re.compile(r"(?P<name>.+)_(?P<id>[0-9]+)_assignsubmission_(?P<plugin>[a-z]+)_?"
                     r"(?P<rest>.*)", re.S)
_MOODLE_MARK = re.compile(r"_[0-9]+_assignsubmission_")
_CANVAS = re.compile(r"(?P<name>[a-z0-9]+)_(?P<late>late_)?(?P<id>[0-9]+)_(?P<sub>[0-9]+)_"
                     r"(?P<file>.+)", re.S)
_RESUBMITTED = re.compile(r"(?P<stem>.+)-[0-9]+(?P<ext>\.[A-Za-z0-9]+)")


class Unmatched(Exception):
    """A folder or file name of an LMS download that maps to no student of the roster."""


@dataclass(frozen=True)
class Owner:
    student: str  # the roster's student_id
    lms: str  # "moodle", "canvas" or "" (a folder named by the student id)
    file: str | None  # for a flat entry, the file's own name; None for a folder
    late: bool = False  # the LMS marked it late (Canvas)
    skip: bool = False  # not a notebook submission (Moodle's online text, ...)


def kind(name: str) -> str:
    """Which LMS made the top-level ``name`` of a download: moodle, canvas or ""."""
    if _MOODLE.fullmatch(name):
        return "moodle"
    if _CANVAS.fullmatch(name):
        return "canvas"
    return ""


def owner(name: str, roster: Roster | None, *, folder: bool) -> Owner:
    """The student a top-level ``name`` of a download belongs to; Unmatched naming it.

    ``folder``: whether ``name`` is a folder of the zip (files inside) or a file."""
    m = _MOODLE.fullmatch(name)
    if m:
        if len(_MOODLE_MARK.findall(name)) > 1:
            raise Unmatched(T("{name}: a Moodle name with two participant ids (the full name "
                              "holds one); not collected", name=shown(name)))
        person = roster.by("moodle_id", m["id"]) if roster else None
        if person is None:
            raise Unmatched(T("{name}: no student of the roster has moodle_id {id}",
                              name=shown(name), id=m["id"]))
        rest = m["rest"]
        return Owner(person.student_id, "moodle", None if folder or not rest else rest,
                     skip=m["plugin"] != "file")
    m = _CANVAS.fullmatch(name)
    if m and not folder:
        person = roster.by("canvas_id", m["id"]) if roster else None
        if person is None:
            raise Unmatched(T("{name}: no student of the roster has canvas_id {id}",
                              name=shown(name), id=m["id"]))
        file = m["file"]
        r = _RESUBMITTED.fullmatch(file)
        if r and file.endswith(".ipynb"):
            file = r["stem"] + r["ext"]
        return Owner(person.student_id, "canvas", file, late=bool(m["late"]))
    if not folder:
        raise Unmatched(T("{name}: a file outside any student folder, not named as Canvas "
                          "names its files", name=shown(name)))
    if roster is not None and roster.get(name) is None:
        raise Unmatched(T("{name}: not a student of the roster, nor a Moodle or Canvas name",
                          name=shown(name)))
    return Owner(name, "", None)


__all__ = ["Owner", "Unmatched", "kind", "owner"]
