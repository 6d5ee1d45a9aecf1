"""Who is who: the instructor's roster, the students' accounts, and the LMS's names for them.

A roster is a CSV file the instructor writes (``<course>/roster.csv`` is read when present;
``--roster FILE`` names another), one row per student, the header naming the columns:

=================  ==========================================================================
``student_id``     the id in nbgrader's gradebook and in ``submitted/`` (required)
``login``          the student's account on the hub (the owner of their exchange folders)
``uid``            that account's numeric id, where it has no name on the grading machine
``first_name``,    for the grade files (Canvas's ``Student`` column is ``Last, First``)
``last_name``
``email``          Moodle's grade import can match on it
``id_number``      Moodle's "ID number" (the other match Moodle's grade import offers)
``moodle_id``      the number in Moodle's download folders (``Full Name_1001_assignsub...``)
``canvas_id``      the Canvas user id (the number in Canvas's download file names and the
                   ``ID`` column of its gradebook)
``sis_user_id``,   Canvas's gradebook columns of the same names
``sis_login_id``,
``section``
=================  ==========================================================================

Any other column is refused by name (a typo in a header would otherwise map no one).

Accounts: an exchange entry is a student's when its owner (``st_uid``) is the student's
account: the roster's ``uid``, else the roster's ``login`` looked up with :mod:`pwd`, else an
account named like the student id. :func:`account_of` answers that; :mod:`collect` takes it
as a parameter, so that tests (and sites with their own directory) can give another.
"""

from __future__ import annotations

import csv
import os
import pwd
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Callable

from .safefs import T, name_problem, shown

ROSTER_FILE = "roster.csv"
MAX_ROSTER_BYTES = 16 << 20


class RosterError(ValueError):
    """A roster that cannot be used; the message names the file, the line and the column."""


@dataclass(frozen=True)
class Person:
    student_id: str
    login: str = ""
    uid: str = ""
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    id_number: str = ""
    moodle_id: str = ""
    canvas_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""


COLUMNS = tuple(f.name for f in fields(Person))


@dataclass
class Roster:
    people: dict[str, Person]
    source: str = ""

    def by(self, column: str, value: str) -> Person | None:
        """The one person whose ``column`` is ``value`` (None when no one's is)."""
        for p in self.people.values():
            if value and getattr(p, column) == value:
                return p
        return None

    def get(self, student: str) -> Person | None:
        return self.people.get(student)


def load(path: str | os.PathLike) -> Roster:
    """The roster at ``path``; RosterError naming what is wrong (file, line, column)."""
    path = Path(path)
    try:
        raw = path.read_bytes()[:MAX_ROSTER_BYTES + 1]
    except OSError as exc:
        raise RosterError(T("the roster {file} cannot be read ({error})", file=str(path),
                            error=type(exc).__name__)) from None
    if len(raw) > MAX_ROSTER_BYTES:
        raise RosterError(T("the roster {file} is larger than {n} MiB", file=str(path),
                            n=MAX_ROSTER_BYTES >> 20))
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RosterError(T("the roster {file} is not UTF-8 text", file=str(path))) from None
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in (reader.fieldnames or [])]
    if "student_id" not in header:
        raise RosterError(T("the roster {file} has no student_id column (its header: {header})",
                            file=str(path), header=", ".join(shown(h) for h in header)))
    unknown = [h for h in header if h not in COLUMNS]
    if unknown:
        raise RosterError(T("the roster {file} has unknown columns: {names} (known: {known})",
                            file=str(path), names=", ".join(shown(h) for h in unknown),
                            known=", ".join(COLUMNS)))
    people: dict[str, Person] = {}
    for lineno, row in enumerate(reader, start=2):
        values = {k.strip(): (v or "").strip() for k, v in row.items() if k}
        sid = values.get("student_id", "")
        why = name_problem(sid)
        if why:
            raise RosterError(T("the roster {file}, line {line}: student_id {name} cannot be "
                                "a student id ({why})", file=str(path), line=lineno,
                                name=shown(sid), why=why))
        if sid in people:
            raise RosterError(T("the roster {file}, line {line}: {name} is listed twice",
                                file=str(path), line=lineno, name=shown(sid)))
        if values.get("uid") and not values["uid"].isdigit():
            raise RosterError(T("the roster {file}, line {line}: uid {uid} is not a number",
                                file=str(path), line=lineno, uid=shown(values["uid"])))
        people[sid] = Person(**{k: v for k, v in values.items() if k in COLUMNS})
    for column in ("moodle_id", "canvas_id"):  # an LMS id names one student (a shared
        seen: dict[str, str] = {}  # login or uid is allowed: collect says it cannot tell)
        for p in people.values():
            v = getattr(p, column)
            if v and v in seen:
                raise RosterError(T("the roster {file}: {column} {value} is given to both {a} "
                                    "and {b}", file=str(path), column=column, value=shown(v),
                                    a=seen[v], b=p.student_id))
            seen.setdefault(v, p.student_id)
    return Roster(people, str(path))


def find(course_root: str | os.PathLike, path: str | os.PathLike | None = None
         ) -> Roster | None:
    """The roster named by ``path``, else ``<course>/roster.csv`` when there is one."""
    if path:
        return load(path)
    default = Path(course_root) / ROSTER_FILE
    return load(default) if default.is_file() else None


def system_account(name: str) -> int | None:
    """The uid of the account ``name`` on this machine (:mod:`pwd`), None if there is none."""
    try:
        return pwd.getpwnam(name).pw_uid
    except (KeyError, ValueError, UnicodeEncodeError):
        return None


def account_of(roster: Roster | None, lookup: Callable[[str], int | None] = system_account
               ) -> Callable[[str], int | None]:
    """``student -> uid`` of their account: the roster's ``uid``, else its ``login`` looked
    up, else an account named like the student; None when there is none."""
    def uid(student: str) -> int | None:
        person = roster.get(student) if roster else None
        if person and person.uid:
            return int(person.uid)
        if person and person.login:
            return lookup(person.login)
        return lookup(student)
    return uid


__all__ = ["Person", "Roster", "RosterError", "load", "find", "account_of", "system_account",
           "COLUMNS", "ROSTER_FILE"]
