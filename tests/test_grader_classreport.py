"""``cudacourse report``: score distributions, common diagnoses, near-identical kernels, the
LMS export -- on a small class graded for real (in the light course of tests/lightcourse.py:
lesson 1's graded cells, demos dropped, as they decide no score), and on hand-made cells for
the parsers."""

from __future__ import annotations

import csv
import json

import nbformat
import pytest

from cudacourse.grader import classreport, distributed
from test_grader_distributed import (ASSIGNMENT, FAST, KERNEL, WRONG_KERNEL, build, graded_cells,
                                     kernel_points, make_course, submit, totals, uses)

pytestmark = pytest.mark.grading

# bob's wrong kernel, handed in again by eve with other names, comments and layout
EVE_KERNEL = '''@cuda.jit
def vector_add(x, y,   result):
    """My very own kernel."""
    # one thread per element
    idx = cuda.grid(1)
    if idx < result.shape[0]:     # guard
        result[idx] = x[idx] - y[idx]
'''
CLASS = {"ada": "correct", "bob": "wrong_kernel", "cy": "blank"}
NAMES = {"ada": ("Ada", "Lovelace", "ada@example.edu", "lms-1"),
         "bob": ("Bob", "Kahn", "bob@example.edu", "lms-2")}


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    path = tmp_path_factory.mktemp("report_course")
    course = make_course(path)
    want = totals(submit(path, course, CLASS))
    nb, _ = build("wrong_kernel", course["learner"], course["master"])
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == KERNEL:
            cell.source = EVE_KERNEL
    (path / "submitted" / "eve" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(nb, path / "submitted" / "eve" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    want["eve"] = want["bob"]
    results, _ = distributed.grade_all(path, ASSIGNMENT, [*CLASS, "eve"],
                                       distributed._SerialExecutor(), FAST,
                                       job=distributed.autograde_one)
    assert all(r["ok"] for r in results), results
    from nbgrader.api import Gradebook

    with Gradebook(distributed.default_db(path)) as gb:  # a roster, as `nbgrader db student import` makes
        for sid, (first, last, email, lms) in NAMES.items():
            gb.update_or_create_student(sid, first_name=first, last_name=last, email=email,
                                        lms_user_id=lms)
    report = classreport.write(path, ASSIGNMENT)
    return {"path": path, "want": want, "report": report, "course": course}


def _kernel_test(reported) -> str:
    return next(g for g, _, src in graded_cells(reported["course"]["learner"])
                if uses(src, KERNEL))


def test_distribution_per_exercise(reported):
    summaries = {s.exercise: s for s in reported["report"].summaries}
    assert list(summaries) == [g for g, _, _ in graded_cells(reported["course"]["learner"])]
    s = summaries[_kernel_test(reported)]
    # ada right; bob and eve subtract; cy blank
    assert (s.graded, s.full, s.partial, s.zero) == (4, 1, 0, 3)
    assert s.max_score == kernel_points(reported["course"])
    assert s.distribution == {0.0: 3, s.max_score: 1}
    assert s.mean == pytest.approx(s.max_score / 4)


def test_common_diagnoses_count_the_same_mistake_together(reported):
    s = next(x for x in reported["report"].summaries if x.exercise == _kernel_test(reported))
    top, count = s.diagnoses[0]
    assert count == 2, s.diagnoses  # bob and eve: the same wrong formula
    assert "a[i] - b[i]" in top or "wrong_formula" in top, s.diagnoses
    assert len(s.diagnoses) == 2 and s.diagnoses[1][1] == 1, s.diagnoses  # cy's blank


def test_near_identical_kernels_are_paired(reported):
    pairs = [(p.exercise, p.a, p.b) for p in reported["report"].pairs]
    assert ("vector_add", "bob", "eve") in pairs
    assert reported["report"].as_master.get("vector_add") == ["ada"]
    assert not any("cy" in (a, b) for _, a, b in pairs)  # the untouched stub is no evidence
    text = reported["report"].files["similar"].read_text()
    assert "bob,eve" in text


def test_lms_export_has_names_emails_and_final_scores(reported):
    with open(reported["report"].files["lms"]) as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert sorted(rows) == ["ada", "bob", "cy", "eve"]
    assert (rows["ada"]["first_name"], rows["ada"]["email"], rows["ada"]["lms_user_id"]) == (
        "Ada", "ada@example.edu", "lms-1")
    for sid, want in reported["want"].items():
        assert float(rows[sid]["score"]) == pytest.approx(want), sid
        assert rows[sid]["status"] == "graded"
    most = float(rows["ada"]["max_score"])
    assert float(rows["ada"]["percent"]) == pytest.approx(100 * reported["want"]["ada"] / most,
                                                          abs=0.05)
    assert most == sum(p for _, p, _ in graded_cells(reported["course"]["learner"]))


def test_table_and_plot_come_out(reported):
    files = reported["report"].files
    text = files["summary"].read_text()
    assert "| exercise | points |" in text and "Near-identical kernels" in text
    import matplotlib.image

    img = matplotlib.image.imread(files["plot"])
    assert img.shape[0] > 100 and img.shape[1] > 100
    with open(files["exercises"]) as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(reported["report"].summaries)
    assert json.loads(rows[0]["distribution"])


def test_cli_report(reported, capsys):
    from cudacourse import cli

    assert cli.main(["report", ASSIGNMENT, "--course", str(reported["path"]),
                     "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "class report" in out and "lms.csv" in out


def test_cli_report_names_a_missing_gradebook(tmp_path, capsys):
    from cudacourse import cli

    (tmp_path / "solutions" / ASSIGNMENT).mkdir(parents=True)
    assert cli.main(["report", ASSIGNMENT, "--course", str(tmp_path)]) == 2
    assert "no gradebook" in capsys.readouterr().err
    assert not (tmp_path / "gradebook.db").exists()


# --- the parsers, on hand-made cells -------------------------------------------------------

def _cell(outputs, meta=None):
    return {"cell_type": "code", "outputs": outputs, "metadata": meta or {}}


def _err(ename, evalue):
    return {"output_type": "error", "ename": ename, "evalue": evalue,
            "traceback": [f"\x1b[0;31m{ename}\x1b[0m: {evalue}"]}


def test_diagnose_prefers_the_structured_cause():
    cell = _cell([_err("CheckFailure", "out[1000:] was never written")],
                 {"cudacourse": {"status": "fail", "cause": "unwritten"}})
    assert classreport.diagnose(cell) == "unwritten"
    assert classreport.diagnose(_cell([])) is None


def test_diagnose_without_a_cause_strips_numbers_and_the_case():
    a = classreport.diagnose(_cell([_err(
        "CheckFailure", "out[1000:] was never written: every thread past 999 returned early. "
        "[n=1000, blocks=9, threads_per_block=128]")]))
    b = classreport.diagnose(_cell([_err(
        "CheckFailure", "out[4096:] was never written: every thread past 4095 returned early. "
        "[n=5000, blocks=2, threads_per_block=64]")]))
    assert a == b and a.startswith("CheckFailure: out[N:] was never written")
    assert "blocks" not in a


def test_diagnose_names_grader_incidents_first():
    cell = _cell([_err("CellTimeoutError", "cell 'vector_add' did not finish within 20 s"),
                  _err("NameError", "name 'vector_add' is not defined")])
    assert classreport.diagnose(cell) == "CellTimeoutError"
    assert classreport.diagnose(_cell([_err("KeyError", "")])) == "KeyError"


def test_normalised_code_ignores_names_comments_layout_and_docstrings():
    a = classreport.normalise_code(WRONG_KERNEL)
    b = classreport.normalise_code(EVE_KERNEL)
    assert a == b
    added = classreport.normalise_code(WRONG_KERNEL.replace(" - ", " + "))
    assert added != a
    # does not parse: still compared, by tokens
    assert classreport.normalise_code("def f(:\n  x = 1 # c") == classreport.normalise_code(
        "def g(:\n      y = 1")


def test_similarity_threshold_is_checked():
    data = classreport.ClassData(ASSIGNMENT, [], {}, {}, {}, {})
    with pytest.raises(ValueError, match="must be in"):
        classreport.similar_kernels(data, 1.5)


# --- provenance: what graded, and what a regrade changed -----------------------------------

def test_stamp_names_version_commit_and_scoring_files(tmp_path):
    from cudacourse.grader import provenance

    s = provenance.stamp(tmp_path, ASSIGNMENT)
    assert s["cudacourse"] not in ("", "not installed") and s["nbgrader"] == "0.9.6"
    assert "cudacourse/check/vector.py" in s["scored_by"]
    assert "cudacourse/grader/verdict.py" in s["scored_by"]
    assert "cudacourse/grader/classreport.py" not in s["scored_by"]  # moves no score
    if s["code"]["commit"] is not None:  # a git checkout (not an installed wheel)
        assert len(s["code"]["commit"]) == 40 and isinstance(s["code"]["dirty"], bool)
    else:  # e.g. the tree copied to a GPU machine without its .git
        assert s["code"]["note"] == provenance.NO_GIT
    assert s["course"] == {"commit": None, "dirty": None, "note": provenance.NO_GIT}


def test_stamp_of_an_uninstalled_source_tree_reads_the_version_from_the_package(monkeypatch):
    """On the GPU machine cudacourse is imported from ./src, not pip-installed: no metadata."""
    from cudacourse import __version__
    from cudacourse.grader import provenance

    real = provenance._v
    monkeypatch.setattr(provenance, "_v",
                        lambda name: "not installed" if name == "cudacourse" else real(name))
    assert provenance.stamp()["cudacourse"] == f"{__version__} (source tree, not installed)"


def test_changes_name_the_cell_the_diagnoses_and_the_changed_checker():
    from cudacourse.grader import provenance

    def snap(score, diag, digest):
        return {"stamp": {"code": {"commit": "a" * 40}, "scored_by": {
            "cudacourse/check/vector.py": digest, "cudacourse/course/quiz.py": "same"}},
            "students": {"bob": {"status": "graded", "raw_score": score, "cells": {
                "test_vector_add": {"score": score, "diagnosis": diag},
                "test_answer_blocks": {"score": 1.0, "diagnosis": None}}}}}

    found = provenance.changes(snap(0.0, "wrong_formula", "old"), snap(3.0, None, "new"))
    assert len(found) == 1
    c = found[0]
    assert (c.student, c.cell, c.before, c.after) == ("bob", "test_vector_add", 0.0, 3.0)
    assert c.why.startswith("wrong_formula -> passed")
    assert "cudacourse/check/vector.py changed" in c.why and "quiz.py" not in c.why
    assert "1 student(s) changed" in provenance.format_changes(found)
    assert provenance.changes(snap(1.0, None, "x"), snap(1.0, None, "y")) == []


def test_a_regrade_after_a_checker_fix_lists_whose_scores_changed(reported):
    """Last in this file: it changes the course. The master's kernel test is "fixed" to
    accept bob's kernel; only bob is regraded; the record lists bob's cell and why."""
    from cudacourse.grader import provenance

    path = reported["path"]
    assert len(provenance.history(path, ASSIGNMENT)) == 1  # recorded by the report
    master_path = path / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    master = nbformat.read(master_path, 4)
    test_id = _kernel_test(reported)
    for cell in master.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == test_id:
            cell.source = "assert vector_add is not None  # the 'fixed' checker accepts all"
    nbformat.write(master, master_path)
    release = distributed.nbgrader(path, "generate_assignment", ASSIGNMENT, "--force",
                                   db=distributed.default_db(path))
    assert release.returncode == 0, release.stderr[-2000:]
    results, _ = distributed.grade_all(path, ASSIGNMENT, ["bob"],
                                       distributed._SerialExecutor(), FAST,
                                       job=distributed.autograde_one)
    assert results[0]["ok"], results
    report = classreport.write(path, ASSIGNMENT, plot_png=False)
    assert len(provenance.history(path, ASSIGNMENT)) == 2
    assert "1 student(s) changed since the previous grading run: bob" in report.text
    last = json.loads(provenance.history(path, ASSIGNMENT)[-1].read_text())
    (change,) = last["changes_since_previous"]
    assert (change["student"], change["cell"], change["before"]) == ("bob", test_id, 0.0)
    assert change["after"] == kernel_points(reported["course"])
    assert change["why"].endswith(f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.ipynb changed)")
    assert "-> passed" in change["why"]
    # reporting again without a regrade records nothing new
    again = classreport.write(path, ASSIGNMENT, plot_png=False)
    assert len(provenance.history(path, ASSIGNMENT)) == 2
    assert "Unchanged since the last record" in again.text
    assert "1 student(s) changed since the previous grading run: bob" in again.text


def _class_of_four() -> classreport.ClassData:
    """Hand-made: one exercise worth points, one formative question (0 points)."""
    C = classreport.CellResult
    students = {}
    for sid, (kernel, q, answer) in {
            "ada": ((3.0, None, True), (0.0, None, True), '"c"'),
            "bob": ((0.0, "wrong_formula", False), (0.0, "AssertionError: wrong", False), '"b"'),
            "cy": ((0.0, "unanswered", False), (0.0, "unanswered", False), None),
            "eve": ((0.0, "wrong_formula", False), (0.0, "AssertionError: wrong", False),
                    '"b"')}.items():
        st = classreport.Student(sid, submitted=True, status="graded", raw_score=kernel[0])
        st.cells = {"test_vector_add": C(kernel[0], 3.0, kernel[1], kernel[2]),
                    "test_answer_blocks": C(q[0], 0.0, q[1], q[2], answer)}
        students[sid] = st
    students["eve"].seconds_late, students["eve"].late_penalty = 2 * 86400 + 3600, 0.0
    return classreport.ClassData(
        "01_gpu_vs_cpu", ["test_answer_blocks", "test_vector_add"],
        {"test_answer_blocks": 0.0, "test_vector_add": 3.0}, students, {}, {},
        {"test_answer_blocks": "Question 2: Blocks", "test_vector_add": "Exercise 1: <b>add</b>"},
        {"test_answer_blocks"})


def test_formative_questions_count_who_got_them_and_the_report_names_students(tmp_path):
    data = _class_of_four()
    sums = {s.exercise: s for s in classreport.summarise(data)}
    q = sums["test_answer_blocks"]
    assert q.formative and (q.right, q.checked) == (1, 4)  # not "zero 4" for everyone
    assert q.wrong_answers == [('"b"', ["bob", "eve"])]
    assert sums["test_vector_add"].who == {"wrong_formula": ["bob", "eve"], "unanswered": ["cy"]}
    text = classreport.table(list(sums.values()), data)
    assert "| test_answer_blocks | formative | 4 | 1 | - | - | - | - |" in text
    assert "- **Question 2: Blocks** (formative question, test_answer_blocks): 1 of 4 got it." \
        in text
    assert '  - answered "b": 2 (bob, eve)' in text and "AssertionError" not in text
    assert "  - wrong\\_formula: 2 (bob, eve)" in text and "  - unanswered: 1 (cy)" in text
    assert "<b>" not in text  # submission-derived text is escaped
    assert "Late: eve (2 days 1 hour late, penalty -0)." in text


def test_the_plot_has_a_panel_only_where_there_is_data(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from unittest import mock

    data = _class_of_four()
    data.exercises.append("test_nobody")  # worth points, handed in by no one
    data.max_scores["test_nobody"] = 1.0
    sums = classreport.summarise(data)
    import matplotlib.pyplot as plt

    made = []
    real = plt.subplots

    def spy(*a, **k):
        fig, axes = real(*a, **k)
        made.append(axes)
        return fig, axes

    with mock.patch.object(plt, "subplots", spy):
        classreport.plot(sums, data, tmp_path / "scores.png")
    shown = [ax for row in made[0] for ax in row if ax.axison]
    # the exercise with points, the formative questions' bar chart, the totals: no empty panel
    assert [ax.get_title() for ax in shown] == ["test_vector_add (/3)",
                                                "formative questions (no points)", "total (/4)"]
    assert all(ax.patches for ax in shown)
