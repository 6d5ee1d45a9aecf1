"""A graded class read back: per student and exercise, the score, the diagnosis, the answer.

:func:`collect` reads the gradebook (scores, students, lateness) and the autograded
notebooks with the grader's records beside them (what each failing test cell said, the
checker's cause) into a :class:`ClassData`. The class report (``classreport``) summarises
it for the instructor; ``provenance`` snapshots it to say what a regrade changed. Below
both, so that neither imports the other for it.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import feedbackview
from .course import default_db

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
NUMBER = re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")
CASE = re.compile(r"\s*\[[^\[\]]*=[^\[\]]*\]\s*$")  # the trailing "[n=1000, blocks=9]"
QUOTED = re.compile(r"(['\"]).*?\1")
# Error names that are the diagnosis by themselves (the grader's own incidents).
INCIDENTS = {"CellTimeoutError", "DeadKernelError", "CheckerTampered", "NotGraded",
             "NotGradable", "GraderError"}
DIAGNOSIS_WIDTH = 110


@dataclass
class CellResult:
    """One student's result on one exercise (an autograded test cell)."""

    score: float | None
    max_score: float
    diagnosis: str | None = None  # None: passed (or not graded)
    right: bool | None = None  # the verdict passed (formative questions too: 0 points)
    answer: str | None = None  # a question's answer as written (untrusted text)


@dataclass
class Student:
    id: str
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""
    submitted: bool = False
    raw_score: float | None = None
    late_penalty: float = 0.0
    seconds_late: float = 0.0
    status: str = "no submission"
    reason: str = ""
    cells: dict[str, CellResult] = field(default_factory=dict)
    kernels: dict[str, str] = field(default_factory=dict)  # answer grade_id -> source


@dataclass
class ClassData:
    assignment: str
    exercises: list[str]  # test cells' grade_ids, notebook order
    max_scores: dict[str, float]
    students: dict[str, Student]
    reference: dict[str, str]  # the master's answer per code answer cell
    stubs: dict[str, str]  # the learner copy's answer cell before any work
    titles: dict[str, str] = field(default_factory=dict)  # "Question 2: ...", "Exercise 1: ..."
    questions: set[str] = field(default_factory=set)  # exercises that are quiz questions


# --- diagnoses -----------------------------------------------------------------------------

def normalise_message(text: str) -> str:
    """The stable part of a checker message: first line, no case, numbers as N."""
    text = ANSI.sub("", text or "").strip()
    first = text.splitlines()[0] if text else ""
    first = CASE.sub("", first)
    first = QUOTED.sub(r"\1…\1", first) if len(first) > 60 else first
    first = NUMBER.sub("N", first)
    # the first sentence: checker messages put the diagnosis first, the fix after
    m = re.search(r"(?<=[a-z\)\]])[.;:] ", first)
    if m and m.start() > 25:
        first = first[:m.start()]
    first = re.sub(r"\s+", " ", first).strip()
    return first[:DIAGNOSIS_WIDTH] + ("…" if len(first) > DIAGNOSIS_WIDTH else "")


def diagnose(cell: dict) -> str | None:
    """What a graded test cell's outputs say went wrong; None when nothing did."""
    meta = (cell.get("metadata") or {}).get("cudacourse") or {}
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    cause = meta.get("cause") if isinstance(meta, dict) else None
    if cause:
        return str(cause)
    if not errors:
        return None
    # The grader's own incidents first (a timeout explains the assertion after it).
    for out in errors:
        if out.get("ename") in INCIDENTS:
            return out["ename"]
    out = errors[-1]
    ename = str(out.get("ename") or "Error")
    evalue = str(out.get("evalue") or "")
    if not evalue.strip():
        tb = [ANSI.sub("", line) for line in out.get("traceback", [])]
        evalue = next((ln.split(":", 1)[-1] for ln in reversed(tb) if ":" in ln), "")
    message = normalise_message(evalue)
    return f"{ename}: {message}" if message else ename


def is_kernel_cell(source: str) -> bool:
    """An answer cell that defines code (a kernel, a function), not a quiz answer."""
    return bool(re.search(r"^\s*(@|def |class )", source or "", re.M))


# --- reading the class ---------------------------------------------------------------------

def _grade_cells(nb: nbformat.NotebookNode) -> list[tuple[str, float]]:
    return [(c.metadata["nbgrader"]["grade_id"], float(c.metadata["nbgrader"].get("points", 0)))
            for c in nb.cells if c.cell_type == "code" and
            c.metadata.get("nbgrader", {}).get("grade")]


def _answers(nb: nbformat.NotebookNode) -> dict[str, str]:
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")}


def _status_csv(root: Path, assignment: str) -> dict[str, dict]:
    """The isolated grader's status.csv, when it wrote one (not graded: the reason)."""
    path = root / "grading" / assignment / "status.csv"
    if not path.exists():
        return {}
    with open(path, newline="") as fh:
        return {r.get("student_id", ""): r for r in csv.DictReader(fh)}


def alembic_on_path() -> None:
    """nbgrader's Gradebook runs ``alembic`` by name: put this environment's bin/ on PATH."""
    import os
    import shutil
    import sys

    if shutil.which("alembic") is None:
        os.environ["PATH"] = (str(Path(sys.executable).parent) + os.pathsep +
                              os.environ.get("PATH", ""))


def _verdicts(path: Path) -> dict[str, dict]:
    try:
        verdicts = json.loads(path.read_text()).get("verdicts") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return {g: v for g, v in verdicts.items() if isinstance(v, dict)} \
        if isinstance(verdicts, dict) else {}


def _verdict_causes(path: Path) -> dict[str, str]:
    """Structured causes the grader recorded beside the notebook (``verdicts[gid].cause``)."""
    try:
        verdicts = json.loads(path.read_text()).get("verdicts") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return {g: str(v["cause"]) for g, v in verdicts.items()
            if isinstance(v, dict) and v.get("cause") and v.get("status") != "pass"}


def collect(course_root: str | Path, assignment: str, db_url: str | None = None
            ) -> ClassData:
    """Everything the report needs, from the gradebook and the autograded notebooks."""
    from nbgrader.api import Gradebook, MissingEntry

    alembic_on_path()

    root = Path(course_root).resolve()
    if not db_url:
        db_url = default_db(root)
    if db_url.startswith("sqlite:///") and not Path(db_url[len("sqlite:///"):]).exists():
        # nbgrader would create an empty gradebook there; say what is missing instead
        raise FileNotFoundError(f"no gradebook at {db_url[len('sqlite:///'):]}: grade the "
                                "assignment first, or pass --db")
    masters = sorted((root / "solutions" / assignment).glob("*.ipynb"))
    if not masters:
        raise FileNotFoundError(f"no master notebooks in {root / 'solutions' / assignment}")
    exercises: list[str] = []
    max_scores: dict[str, float] = {}
    reference: dict[str, str] = {}
    stubs: dict[str, str] = {}
    multi = len(masters) > 1

    def key(nb_name: str, gid: str) -> str:
        return f"{nb_name}:{gid}" if multi else gid

    for path in masters:
        master = nbformat.read(path, as_version=4)
        for gid, points in _grade_cells(master):
            exercises.append(key(path.stem, gid))
            max_scores[key(path.stem, gid)] = points
        reference.update({key(path.stem, g): s for g, s in _answers(master).items()
                          if is_kernel_cell(s)})
        release = root / "notebooks" / assignment / path.name
        if release.exists():
            stubs.update({key(path.stem, g): s for g, s in
                          _answers(nbformat.read(release, as_version=4)).items()})
    titles: dict[str, str] = {}
    questions: set[str] = set()
    for path in masters:
        for e in feedbackview.entries(nbformat.read(path, as_version=4), {}):
            titles[key(path.stem, e.grade_id)] = e.title
            if e.question:
                questions.add(key(path.stem, e.grade_id))
    status = _status_csv(root, assignment)
    students: dict[str, Student] = {}
    with Gradebook(db_url) as gb:
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise LookupError(f"assignment {assignment!r} is not in the gradebook {db_url}; "
                              "run `nbgrader generate_assignment` and grade first") from None
        # the points nbgrader grades with (generate_assignment may change the master's)
        for nb in gb.find_assignment(assignment).notebooks:
            for gc in nb.grade_cells:
                if key(nb.name, gc.name) in max_scores:
                    max_scores[key(nb.name, gc.name)] = float(gc.max_score or 0.0)
        for s in gb.students:
            students[s.id] = Student(s.id, s.first_name or "", s.last_name or "",
                                     s.email or "", s.lms_user_id or "")
        for sub in gb.assignment_submissions(assignment):
            st = students.setdefault(sub.student_id, Student(sub.student_id))
            st.submitted, st.status = True, "graded"
            st.raw_score = float(sub.score)
            st.late_penalty = float(sub.late_submission_penalty or 0.0)
            st.seconds_late = float(sub.total_seconds_late or 0.0)
            for nb in sub.notebooks:
                for g in nb.grades:
                    k = key(nb.name, g.name)
                    st.cells[k] = CellResult(None if g.score is None else float(g.score),
                                             float(g.max_score or max_scores.get(k, 0)))
    for sid, row in status.items():
        if sid in students and row.get("status") == "not_graded":
            st = students[sid]
            st.status, st.reason, st.raw_score = "not graded", row.get("reason", ""), None
            st.cells = {}
    for sid, st in students.items():
        if st.status != "graded":
            continue
        for path in masters:
            graded = root / "autograded" / sid / assignment / path.name
            if not graded.exists():
                continue
            try:
                nb = nbformat.read(graded, as_version=4)
            except (OSError, ValueError) as exc:
                st.reason = f"autograded notebook unreadable: {exc}"
                continue
            record = graded.with_name(f"{path.stem}.grading.json")
            causes = _verdict_causes(record)
            verdicts = _verdicts(record)
            for e in feedbackview.entries(nb, verdicts):
                k = key(path.stem, e.grade_id)
                if k in st.cells and e.grade_id in verdicts:
                    st.cells[k].right = e.right
                    st.cells[k].answer = e.answer
                    if e.status == "unanswered":
                        st.cells[k].diagnosis = "unanswered"
            for cell in nb.cells:
                meta = cell.get("metadata", {}).get("nbgrader", {})
                gid = meta.get("grade_id")
                if not gid:
                    continue
                k = key(path.stem, gid)
                if meta.get("grade") and cell.cell_type == "code" and k in st.cells:
                    if st.cells[k].diagnosis == "unanswered":
                        continue
                    st.cells[k].diagnosis = diagnose(cell)
                    if st.cells[k].diagnosis and causes.get(gid):
                        st.cells[k].diagnosis = causes[gid]
                elif meta.get("solution") and cell.cell_type == "code" and k in reference:
                    st.kernels[k] = cell.source
    return ClassData(assignment, exercises, max_scores, students, reference, stubs,
                     titles, questions)
