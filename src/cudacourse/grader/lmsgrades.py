"""Grade files an LMS imports as they are: Canvas's gradebook CSV and Moodle's CSV import.

* ``canvas.csv``: the columns of Canvas's gradebook export, which its "Import" reads back:
  ``Student`` (``Last, First``), ``ID`` (the Canvas user id), ``SIS User ID``,
  ``SIS Login ID``, ``Section``, then one column per assignment; a second row
  ``Points Possible`` as the export writes it. Canvas matches a student by ``ID`` or the SIS
  ids and an assignment by the ``(<assignment id>)`` at the end of its column's name (a name
  without one makes a new assignment): give the column with ``--lms-assignment
  "Lesson 1 (12345)"``.
* ``moodle.csv``: ``ID number``, ``Email address``, ``First name``, ``Last name`` and one
  grade column. Moodle's "Import > CSV file" maps a user by a column the instructor picks
  ("Map from" ``Email address`` to ``useremail``, or ``ID number`` to ``useridnumber``) and
  the grade column to a grade item.

A student not graded, or with no submission, has an empty cell (never 0): both LMSs leave an
empty cell's grade as it is. Scores are points after the late penalty (``lms.csv``'s
``score``). Names and ids come from the roster (:mod:`roster`), else from the gradebook.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import csvout
from .roster import Roster

CANVAS_FIXED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_FIXED = ["ID number", "Email address", "First name", "Last name"]


def _who(row: dict[str, Any], roster: Roster | None) -> dict[str, str]:
    p = roster.get(row["student_id"]) if roster else None
    first = (p.first_name if p and p.first_name else row.get("first_name")) or ""
    last = (p.last_name if p and p.last_name else row.get("last_name")) or ""
    return {"first": first, "last": last,
            "email": (p.email if p and p.email else row.get("email")) or "",
            "canvas": (p.canvas_id if p and p.canvas_id else row.get("lms_user_id")) or "",
            "sis_user": p.sis_user_id if p else "", "sis_login": p.sis_login_id if p else "",
            "section": p.section if p else "",
            "id_number": (p.id_number if p and p.id_number else "") or row["student_id"]}


def write(rows: list[dict[str, Any]], out: Path, column: str, roster: Roster | None
          ) -> tuple[dict[str, Path], list[str]]:
    """``canvas.csv`` and ``moodle.csv`` in ``out`` from :func:`classreport.lms_rows`; with
    the students whom Canvas cannot match (no Canvas or SIS id) named in the notes."""
    files = {"canvas": out / "canvas.csv", "moodle": out / "moodle.csv"}
    notes: list[str] = []
    most = rows[0]["max_score"] if rows else ""
    with open(files["canvas"], "w", newline="", encoding="utf-8") as fh:
        w = csvout.writer(fh)
        w.writerow(CANVAS_FIXED + [column])
        w.writerow(["Points Possible", "", "", "", "", most])
        unmatched = []
        for row in rows:
            who = _who(row, roster)
            if not (who["canvas"] or who["sis_user"] or who["sis_login"]):
                unmatched.append(row["student_id"])
            name = f"{who['last']}, {who['first']}" if who["last"] or who["first"] \
                else row["student_id"]
            w.writerow([name, who["canvas"], who["sis_user"], who["sis_login"],
                        who["section"], row["score"]])
    if unmatched:
        notes.append(f"canvas.csv: {len(unmatched)} student(s) without a Canvas id or SIS id "
                     f"(give canvas_id in the roster): {', '.join(unmatched[:20])}")
    with open(files["moodle"], "w", newline="", encoding="utf-8") as fh:
        w = csvout.writer(fh)
        w.writerow(MOODLE_FIXED + [column])
        for row in rows:
            who = _who(row, roster)
            w.writerow([who["id_number"], who["email"], who["first"], who["last"],
                        row["score"]])
    return files, notes


__all__ = ["write", "CANVAS_FIXED", "MOODLE_FIXED"]
