"""What a graded class tells its instructor: ``cudacourse report ASSIGNMENT``.

From the gradebook (scores, students' names and emails, lateness) and the autograded
notebooks (what each failing test cell said), per exercise (one autograded test cell):

* the distribution of scores: full, partial and zero counts, mean, and a histogram plot;
* the most common diagnoses: the checker's structured cause when the grader recorded it in
  the test cell's metadata (``metadata.cudacourse.cause``, from ``CheckFailure.cause``),
  otherwise the error output itself -- its name, and for checker failures the first
  sentence of the message with numbers and the case (``[n=1000, ...]``) taken out, so
  that "out[1000:] was never written" and "out[4096:] was never written" count together;
* pairs of submissions whose kernels are near-identical once names, whitespace, comments
  and docstrings are normalised away (the AST with every local name renamed in order of
  appearance): a hint for a human to look at, never a verdict. A kernel the same as the
  master's solution is counted apart; short kernels are often written the same way;
* an LMS export: one row per student with id, names, email, LMS id, raw score, late
  penalty, final score, maximum, percent, status.

Files go to ``<course>/grading/<assignment>/report/``: ``summary.md`` (the table),
``exercises.csv``, ``scores.png``, ``similar.csv``, ``lms.csv``, and the grade files Canvas
and Moodle import as they are, ``canvas.csv`` and ``moodle.csv`` (:mod:`lmsgrades`). Every
CSV cell goes through :mod:`csvout` (no cell is read as a formula).

Imports nothing from the ``cudacourse`` package.
"""

from __future__ import annotations

import ast
import difflib
import json
import keyword
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from urllib.parse import quote
from typing import Any

from . import csvout, feedbackview
from .classdata import (  # noqa: F401 - the report's names, as before the split
    ANSI, CASE, DIAGNOSIS_WIDTH, INCIDENTS, NUMBER, QUOTED, CellResult, ClassData, Student,
    _answers, _grade_cells, _status_csv, _verdict_causes, _verdicts, alembic_on_path, collect,
    diagnose, is_kernel_cell, normalise_message)

DEFAULT_SIMILARITY = 0.92


# --- kernels: the plagiarism hint ----------------------------------------------------------

class _Renamer(ast.NodeTransformer):
    """Every local name becomes v0, v1, ... in order of appearance; module names stay."""

    def __init__(self, keep: set[str]) -> None:
        self.keep, self.names = keep, {}

    def _new(self, name: str) -> str:
        if name in self.keep:
            return name
        return self.names.setdefault(name, f"v{len(self.names)}")

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._new(node.arg)
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._new(node.name)
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(
                getattr(body[0], "value", None), ast.Constant) and isinstance(
                body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]  # a docstring is a comment
        self.generic_visit(node)
        return node


# Names a kernel uses from outside: they carry meaning, so they are not renamed.
KEEP = {"cuda", "np", "numpy", "math", "numba", "float32", "float64", "int32", "int64",
        "range", "len", "min", "max", "abs", "print", "True", "False", "None"}


def normalise_code(source: str) -> list[str]:
    """Tokens of ``source`` with names, comments, docstrings and layout normalised."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return _tokens(source)
    tree = _Renamer(KEEP).visit(tree)
    dump = ast.dump(tree, annotate_fields=False, include_attributes=False)
    return re.findall(r"\w+|[^\w\s]", dump)


def _tokens(source: str) -> list[str]:
    """Fallback for code that does not parse: tokens without comments and layout, every
    name that is not a keyword or a kept module name as NAME."""
    text = re.sub(r"#[^\n]*", "", source)
    out = []
    for tok in re.findall(r"[A-Za-z_]\w*|\d+(?:\.\d*)?|[^\w\s]", text):
        if (tok[0].isalpha() or tok[0] == "_") and not keyword.iskeyword(tok) \
                and tok not in KEEP:
            tok = "NAME"
        out.append(tok)
    return out


@dataclass
class SimilarPair:
    exercise: str
    a: str
    b: str
    similarity: float


def similar_kernels(data: ClassData, threshold: float = DEFAULT_SIMILARITY
                    ) -> tuple[list[SimilarPair], dict[str, list[str]]]:
    """Pairs above ``threshold``, and per exercise who handed in the master's own kernel.

    Kernels equal to the learner copy's stub (no work) and unparseable noise are skipped.
    """
    if not 0 < threshold <= 1:
        raise ValueError(f"similarity threshold {threshold}: must be in (0, 1]")
    pairs: list[SimilarPair] = []
    as_master: dict[str, list[str]] = {}
    for gid in sorted({g for s in data.students.values() for g in s.kernels}):
        stub = normalise_code(data.stubs.get(gid, ""))
        ref = normalise_code(data.reference.get(gid, "")) if gid in data.reference else None
        norm = {}
        for sid, st in sorted(data.students.items()):
            src = st.kernels.get(gid)
            if not src or not src.strip():
                continue
            tokens = normalise_code(src)
            if tokens == stub or len(tokens) < 8:
                continue
            if ref is not None and tokens == ref:
                as_master.setdefault(gid, []).append(sid)
                continue
            norm[sid] = tokens
        for (sa, ta), (sb, tb) in combinations(sorted(norm.items()), 2):
            matcher = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
            if matcher.real_quick_ratio() < threshold or matcher.quick_ratio() < threshold:
                continue
            ratio = matcher.ratio()
            if ratio >= threshold:
                pairs.append(SimilarPair(gid, sa, sb, round(ratio, 3)))
    pairs.sort(key=lambda p: (-p.similarity, p.exercise, p.a, p.b))
    return pairs, as_master


# --- summaries -----------------------------------------------------------------------------

@dataclass
class ExerciseSummary:
    exercise: str
    max_score: float
    graded: int
    full: int
    partial: int
    zero: int
    mean: float
    distribution: dict[float, int]
    diagnoses: list[tuple[str, int]]
    title: str = ""
    question: bool = False
    right: int = 0  # students whose verdict passed ("got it"), formative questions included
    checked: int = 0  # students with a verdict for this cell
    wrong_answers: list[tuple[str, list[str]]] = field(default_factory=list)
    who: dict[str, list[str]] = field(default_factory=dict)  # diagnosis -> students

    @property
    def formative(self) -> bool:
        return self.max_score <= 0


def _got_it(cell: CellResult) -> bool:
    if cell.right is not None:
        return cell.right
    return cell.score is not None and cell.max_score > 0 and cell.score >= cell.max_score


def summarise(data: ClassData, top: int = 3) -> list[ExerciseSummary]:
    """Per exercise: the score distribution, who got it, the wrong answers and the causes,
    each with the students behind it (most common first)."""
    out = []
    for ex in data.exercises:
        scores, diags = [], Counter()
        who: dict[str, list[str]] = {}
        answers: dict[str, list[str]] = {}
        right = checked = 0
        for sid, st in sorted(data.students.items()):
            cell = st.cells.get(ex)
            if cell is None or cell.score is None:
                continue
            scores.append(cell.score)
            checked += 1
            if _got_it(cell):
                right += 1
                continue
            diagnosis = cell.diagnosis
            if ex in data.questions and cell.answer is not None:  # the answer says it all
                shown = " ".join(cell.answer.split())[:60]
                answers.setdefault(shown, []).append(sid)
                diagnosis = f"answered {shown}"
            if diagnosis:
                diags[diagnosis] += 1
                who.setdefault(diagnosis, []).append(sid)
        most = data.max_scores.get(ex, 0.0)
        out.append(ExerciseSummary(
            ex, most, len(scores),
            sum(1 for s in scores if most > 0 and s >= most),
            sum(1 for s in scores if 0 < s < most),
            sum(1 for s in scores if s <= 0),
            sum(scores) / len(scores) if scores else 0.0,
            dict(sorted(Counter(scores).items())), diags.most_common(top),
            title=data.titles.get(ex, ex), question=ex in data.questions, right=right,
            checked=checked,
            wrong_answers=sorted(answers.items(), key=lambda kv: (-len(kv[1]), kv[0])),
            who=who))
    return out


def reteach(summaries: list[ExerciseSummary]) -> str:
    """Markdown for teaching: per question and exercise, who got it, the common wrong answers
    and causes, and the students behind each. Submission text is escaped."""
    esc = feedbackview.md_escape
    lines = ["## What to re-teach", ""]
    for s in sorted(summaries, key=lambda s: (s.right / s.checked if s.checked else 1.0)):
        if not s.checked:
            continue
        kind = "formative question" if s.question and s.formative else \
            "question" if s.question else "exercise"
        lines.append(f"- **{esc(s.title)}** ({kind}, {s.exercise}): {s.right} of {s.checked} "
                     "got it.")
        for diag, n in s.diagnoses:
            lines.append(f"  - {esc(diag)}: {n} ({esc(', '.join(s.who.get(diag, [])))})")
    return "\n".join(lines) + "\n"


def table(summaries: list[ExerciseSummary], data: ClassData) -> str:
    """The report as Markdown: per exercise, then the class."""
    lines = [f"# {data.assignment}: class report", "",
             "| exercise | points | graded | got it | full | partial | zero | mean | most common "
             "diagnoses |", "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in summaries:
        diags = "; ".join(f"{feedbackview.md_escape(d)} ({n})" for d, n in s.diagnoses) or "-"
        if s.formative:  # no points: the score columns say nothing, "got it" does
            cols = f"formative | {s.graded} | {s.right} | - | - | - | -"
        else:
            cols = (f"{s.max_score:g} | {s.graded} | {s.right} | {s.full} | {s.partial} | "
                    f"{s.zero} | {s.mean:.2f}")
        lines.append(f"| {s.exercise} | {cols} | {diags} |")
    totals = [st.raw_score for st in data.students.values() if st.raw_score is not None]
    most = sum(data.max_scores.values())
    kinds = Counter(st.status for st in data.students.values())
    late = sorted((sid, st) for sid, st in data.students.items() if st.seconds_late > 0)
    lines += ["", f"Students: {len(data.students)} ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}); "
              f"late: {len(late)}."]
    if late:
        from .policy import duration

        lines.append("Late: " + "; ".join(
            f"{feedbackview.md_escape(sid)} ({duration(st.seconds_late)} late, penalty "
            f"-{st.late_penalty:g})" for sid, st in late) + ".")
    if totals:
        lines.append(f"Total (raw, out of {most:g}): mean {sum(totals) / len(totals):.2f}, "
                     f"min {min(totals):g}, max {max(totals):g}.")
    return "\n".join(lines) + "\n\n" + reteach(summaries)


def _needs(data: ClassData, st: Student) -> list[str]:
    """What one student still needs, in Markdown: each cell not got, the ones that lost
    points first (then formative questions), by the exercise's name, with the diagnosis."""
    esc = feedbackview.md_escape
    lost, formative = [], []
    for ex in data.exercises:
        cell = st.cells.get(ex)
        if cell is None or cell.score is None or _got_it(cell):
            continue
        title = data.titles.get(ex, ex)
        why = cell.diagnosis or "not right"
        if ex in data.questions and cell.answer is not None:
            why = f"answered {' '.join(cell.answer.split())[:60]}"
        most = data.max_scores.get(ex, 0.0)
        if most > 0:
            lost.append(f"{esc(title)} ({cell.score:g} / {most:g}): {esc(why)}")
        else:
            formative.append(f"{esc(title)} (formative): {esc(why)}")
    return lost + formative


def feedback_files(root: Path, assignment: str, sid: str) -> list[Path]:
    """The student's feedback pages (``feedback/<student>/<assignment>/*.html``)."""
    return sorted((root / "feedback" / sid / assignment).glob("*.html"))


def students_section(data: ClassData, root: Path, out: Path) -> str:
    """Markdown: a section per student, what each needs and a link to their feedback
    (relative to the report's folder ``out``). Submission text is escaped."""
    esc = feedbackview.md_escape
    most = sum(data.max_scores.values())
    lines = ["## Per student", ""]
    for sid, st in sorted(data.students.items()):
        if not st.submitted and st.status == "no submission":
            continue  # listed once, below
        lines.append(f"### {esc(sid)}")
        lines.append("")
        if st.status != "graded" or st.raw_score is None:
            lines += [f"Not graded: {esc(st.reason or st.status)}.", ""]
            continue
        score = max(0.0, st.raw_score - st.late_penalty)
        head = f"{score:g} / {most:g} points"
        if st.seconds_late > 0:
            from .policy import duration

            head += (f" (late {duration(st.seconds_late)}, penalty -{st.late_penalty:g}; "
                     f"{st.raw_score:g} before it)")
        links = [f"[{esc(p.name)}]({quote(os.path.relpath(p, out))})"
                 for p in feedback_files(root, data.assignment, sid)]
        head += ". Feedback: " + (", ".join(links) if links else
                                  "not generated yet (`nbgrader generate_feedback`)") + "."
        lines += [head, ""]
        needs = _needs(data, st)
        lines += [f"- {n}" for n in needs] if needs else ["Every graded cell right."]
        lines.append("")
    absent = sorted(sid for sid, st in data.students.items()
                    if not st.submitted and st.status == "no submission")
    if absent:
        lines += [f"Did not submit ({len(absent)}): {esc(', '.join(absent))}.", ""]
    return "\n".join(lines)


def plot(summaries: list[ExerciseSummary], data: ClassData, path: Path) -> Path:
    """One histogram per exercise and one of totals, in a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Panels only where there is data: a histogram per exercise worth points that someone
    # handed in, one bar chart of "got it" for the formative questions, and the totals.
    scored = [s for s in summaries if not s.formative and s.graded]
    formative = [s for s in summaries if s.formative and s.checked]
    totals = [st.raw_score for st in data.students.values() if st.raw_score is not None]
    n = len(scored) + bool(formative) + bool(totals)
    if n == 0:
        raise ValueError(f"{data.assignment}: no graded submission to plot")
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax, s in zip(flat, scored):
        xs = list(s.distribution)
        ax.bar([f"{x:g}" for x in xs], [s.distribution[x] for x in xs], color="#4c72b0")
        ax.set_title(f"{s.exercise} (/{s.max_score:g})", fontsize=9)
        ax.set_xlabel("points", fontsize=8)
        ax.set_ylabel("students", fontsize=8)
    k = len(scored)
    if formative:
        ax = flat[k]
        ax.barh([s.exercise for s in formative], [s.right for s in formative],
                color="#55a868", label="got it")
        ax.barh([s.exercise for s in formative], [s.checked - s.right for s in formative],
                left=[s.right for s in formative], color="#c44e52", label="not yet")
        ax.set_title("formative questions (no points)", fontsize=9)
        ax.set_xlabel("students", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.legend(fontsize=7)
        k += 1
    if totals:
        ax = flat[k]
        ax.hist(totals, bins=min(20, max(1, len(set(totals)))), color="#dd8452")
        ax.set_title(f"total (/{sum(data.max_scores.values()):g})", fontsize=9)
        ax.set_xlabel("points", fontsize=8)
    for ax in flat[n:]:
        ax.axis("off")
    fig.suptitle(f"{data.assignment}: scores of {len(totals)} graded submission(s)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


LMS_FIELDS = ["student_id", "first_name", "last_name", "email", "lms_user_id", "assignment",
              "submitted", "raw_score", "late_penalty", "score", "max_score", "percent",
              "status", "reason"]


def lms_rows(data: ClassData) -> list[dict[str, Any]]:
    most = sum(data.max_scores.values())
    rows = []
    for sid, st in sorted(data.students.items()):
        score = None if st.raw_score is None else max(0.0, st.raw_score - st.late_penalty)
        rows.append({
            "student_id": sid, "first_name": st.first_name, "last_name": st.last_name,
            "email": st.email, "lms_user_id": st.lms_user_id, "assignment": data.assignment,
            # "did not submit" in words, never a 0 (nbgrader's own export writes 0.0)
            "submitted": "yes" if st.submitted else "no",
            "raw_score": "" if st.raw_score is None else f"{st.raw_score:g}",
            "late_penalty": f"{st.late_penalty:g}" if st.submitted else "",
            # empty, never 0, for a student not graded or with no submission
            "score": "" if score is None else f"{score:g}",
            "max_score": f"{most:g}",
            "percent": "" if score is None or not most else f"{100 * score / most:.1f}",
            "status": st.status, "reason": st.reason})
    return rows


@dataclass
class Report:
    summaries: list[ExerciseSummary]
    pairs: list[SimilarPair]
    as_master: dict[str, list[str]]
    files: dict[str, Path]
    text: str


def write(course_root: str | Path, assignment: str, db_url: str | None = None,
          out_dir: str | Path | None = None, threshold: float = DEFAULT_SIMILARITY,
          plot_png: bool = True, provenance_record: bool = True,
          roster_file: str | Path | None = None, lms_assignment: str | None = None) -> Report:
    """Make every part of the report and write its files; with ``provenance_record``, also
    snapshot the scores (see :mod:`provenance`) and say what changed since the last run."""
    root = Path(course_root).resolve()
    data = collect(root, assignment, db_url)
    regrade = ""
    if provenance_record:
        from . import provenance

        recorded, found = provenance.record(root, assignment,
                                            snap=provenance.snapshot_of(data, root))
        runs = provenance.history(root, assignment)
        if recorded is None and runs:  # the last grading run recorded it: show its changes
            last = json.loads(runs[-1].read_text())
            found = [provenance.Change(**c) for c in last.get("changes_since_previous", [])]
            said = (f"Unchanged since the last record ({runs[-1].name}); that record "
                    "found:\n" + provenance.format_changes(found)) if len(runs) > 1 else \
                "Unchanged since the first record of this assignment."
        else:
            said = (provenance.format_changes(found) if len(runs) > 1 else
                    "First record of this assignment.")
        regrade = "\n## Since the previous grading run\n\n" + said + "\n"
    out = Path(out_dir) if out_dir else root / "grading" / assignment / "report"
    out.mkdir(parents=True, exist_ok=True)
    summaries = summarise(data)
    pairs, as_master = similar_kernels(data, threshold)
    text = table(summaries, data) + "\n" + students_section(data, root, out)
    text += "\n## Near-identical kernels (a hint to look, not a verdict)\n\n"
    if pairs:
        text += "".join(f"- {p.exercise}: {p.a} and {p.b}, similarity {p.similarity:.2f}\n"
                        for p in pairs[:50])
        if len(pairs) > 50:
            text += f"- ... {len(pairs) - 50} more in similar.csv\n"
    else:
        text += f"None above {threshold:.2f}.\n"
    for gid, who in sorted(as_master.items()):
        text += (f"- {gid}: {len(who)} submission(s) identical to the master's solution "
                 "after normalising (common for a short kernel)\n")
    text += regrade
    files = {"summary": out / "summary.md", "exercises": out / "exercises.csv",
             "similar": out / "similar.csv", "lms": out / "lms.csv"}
    files["summary"].write_text(text)
    with open(files["exercises"], "w", newline="") as fh:
        w = csvout.writer(fh)
        w.writerow(["exercise", "max_score", "graded", "full", "partial", "zero", "mean",
                    "distribution", "diagnoses", "title", "got_it", "wrong_answers",
                    "students_by_diagnosis"])
        for s in summaries:
            w.writerow([s.exercise, s.max_score, s.graded, s.full, s.partial, s.zero,
                        round(s.mean, 4), json.dumps({f"{k:g}": v for k, v in
                                                      s.distribution.items()}),
                        json.dumps(s.diagnoses), s.title, s.right,
                        json.dumps(s.wrong_answers), json.dumps(s.who)])
    with open(files["similar"], "w", newline="") as fh:
        w = csvout.writer(fh)
        w.writerow(["exercise", "student_a", "student_b", "similarity"])
        w.writerows([p.exercise, p.a, p.b, p.similarity] for p in pairs)
        w.writerows([gid, sid, "(master solution)", 1.0]
                    for gid, who in sorted(as_master.items()) for sid in who)
    rows = lms_rows(data)
    with open(files["lms"], "w", newline="") as fh:
        w = csvout.dict_writer(fh, LMS_FIELDS)
        w.writeheader()
        w.writerows(rows)
    from . import lmsgrades, roster

    graded, notes = lmsgrades.write(rows, out, lms_assignment or assignment,
                                    roster.find(root, roster_file))
    files.update(graded)
    if notes:
        text += "\n## Grade files\n\n" + "".join(f"- {n}\n" for n in notes)
        files["summary"].write_text(text)
    if plot_png:
        files["plot"] = plot(summaries, data, out / "scores.png")
    return Report(summaries, pairs, as_master, files, text)


__all__ = ["ClassData", "Report", "collect", "diagnose", "lms_rows", "normalise_code",
           "normalise_message", "plot", "reteach", "similar_kernels", "students_section",
           "summarise", "table", "write"]
