"""grader/runner.py: the walk of one submission visits each stage once, in order.

A spy walk: the services the stages call (intake's staging, the sandboxed feedback run and
verdicts, nbgrader autograde, the gradebook read-back) are replaced by recorders, so the
stages run as written and nothing is graded. Each spy names the stage it belongs to.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from cudacourse.grader import intake, prepare, runner

STAGE_NAMES = ["intake", "feedback run and verdicts", "record", "report"]


@pytest.fixture
def spied(tmp_path, monkeypatch):
    """A course with one master notebook and the stages' services replaced by spies; the
    list of stages visited, and knobs to make a spy fail."""
    root = tmp_path / "course"
    (root / "solutions" / "a1").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), root / "solutions" / "a1" / "one.ipynb")
    visited: list[str] = []
    fail: dict[str, str] = {}

    def stage(course_root, assignment, student, staging, **kw):
        visited.append("intake")
        if "intake" in fail:
            raise intake.NotGraded(fail["intake"])
        path = Path(staging) / student / assignment / "one.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nbformat.v4.new_notebook(), path)
        return intake.Staged(student, assignment, path.parent, {"one": path}, ["dup id"])

    def prepared(staged, master, **kw):
        visited.append("feedback run and verdicts")
        if "prepare" in fail:
            raise RuntimeError(fail["prepare"])
        return {"cells": {}, "outputs": None, "incidents": ["slow"], "isolation": ["bwrap"],
                "sources": []}

    def autograde(root_, assignment, students, o):
        visited.append("record")
        return {s: fail["record"] for s in students} if "record" in fail else {}

    def scores(db_url, assignment, student):
        visited.append("report")
        return {"q1": 2.0}, {"q1": 3.0}

    monkeypatch.setattr(intake, "stage", stage)
    monkeypatch.setattr(prepare, "prepare", prepared)
    monkeypatch.setattr(runner, "autograde", autograde)
    monkeypatch.setattr(runner, "_scores", scores)
    monkeypatch.setattr(runner, "_late_and_lost", lambda *a: {"late": None, "lost": None})
    marked: list[str] = []
    monkeypatch.setattr(runner, "mark_not_graded", lambda *a: marked.append(a[-2]))
    return {"root": root, "visited": visited, "fail": fail, "marked": marked}


def _grade(spied, **options):
    return runner.grade_submission(str(spied["root"]), "a1", "ada",
                                   {"db_url": "sqlite:///unused.db", **options})


def test_the_stages_are_the_documented_ones_in_order():
    assert [name for name, _ in runner.STAGES] == STAGE_NAMES


def test_one_submission_visits_each_stage_once_in_order(spied):
    out = _grade(spied)
    assert spied["visited"] == STAGE_NAMES
    assert out["status"] == "graded" and out["scores"] == {"q1": 2.0}
    assert out["max_scores"] == {"q1": 3.0}
    assert out["incidents"] == ["dup id", "one: slow"] and out["isolation"] == ["bwrap"]
    work = spied["root"] / ".cudacourse-grading" / "a1"
    assert not (work / "staged" / "ada").exists()  # report removed the staged copy
    assert not spied["marked"]


def test_the_prepared_results_reach_the_record_stage(spied, monkeypatch):
    seen = {}

    def autograde(root_, assignment, students, o):
        seen.update(json.loads((Path(o["work_dir"]) / "results" / "ada" / "a1"
                                / "one.json").read_text()))
        return {}

    monkeypatch.setattr(runner, "autograde", autograde)
    _grade(spied)
    assert seen["incidents"] == ["slow"]


@pytest.mark.parametrize("where, visited", [
    ("intake", STAGE_NAMES[:1]), ("prepare", STAGE_NAMES[:2]), ("record", STAGE_NAMES[:3])])
def test_a_stage_that_fails_ends_the_walk_as_not_graded(spied, where, visited):
    spied["fail"][where] = f"broken at {where}"
    out = _grade(spied)
    assert spied["visited"] == visited
    assert out["status"] == "not_graded" and where in out["reason"]
    assert out["scores"] == {} and spied["marked"] == [out["reason"]]


def test_a_class_job_pauses_after_the_verdicts_for_the_batch_record(spied):
    out = _grade(spied, defer_nbgrader=True)
    assert spied["visited"] == STAGE_NAMES[:2]
    assert out["status"] == "prepared"


# --- no submission can stop the class (issue 29) --------------------------------------------

def test_a_stage_past_its_deadline_is_not_graded_and_the_walk_ends_at_once(spied, monkeypatch):
    import threading
    import time

    release = threading.Event()

    def stuck(course_root, assignment, student, staging, **kw):
        spied["visited"].append("intake")
        release.wait(60)  # e.g. a notebook that takes minutes to parse
        raise AssertionError("not reached in time")

    monkeypatch.setattr(intake, "stage", stuck)
    start = time.monotonic()
    out = _grade(spied, deadlines={"intake": 0.5})
    release.set()
    assert time.monotonic() - start < 30  # the deadline, not the 60 s wait, ended it
    assert out["status"] == "not_graded"
    assert out["reason"] == "intake took longer than 0.5 s"
    assert spied["marked"] == [out["reason"]] and spied["visited"] == ["intake"]


def test_every_stage_has_a_deadline_the_options_can_shorten():
    d = runner.stage_deadlines({**runner.DEFAULT_OPTIONS, "deadlines": {"record": 7}})
    assert set(d) == set(STAGE_NAMES) and d["record"] == 7
    assert d["feedback run and verdicts"] > runner.DEFAULT_OPTIONS["notebook_timeout"]


@pytest.mark.parametrize("error", [RecursionError, MemoryError, KeyError])
def test_an_error_in_any_stage_is_that_submission_s_not_graded(spied, monkeypatch, error):
    def report(*a):
        spied["visited"].append("report")
        raise error("a secret the error quoted")

    monkeypatch.setattr(runner, "_scores", report)
    out = _grade(spied)
    assert out["status"] == "not_graded"
    assert out["reason"] == f"report failed: {error.__name__}"  # the type, never the text
    assert spied["marked"] == [out["reason"]]


def test_an_nbgrader_that_hangs_is_recorded_per_student(tmp_path, monkeypatch):
    import subprocess

    def hang(*a, **k):
        raise subprocess.TimeoutExpired("nbgrader", k.get("timeout"))

    monkeypatch.setattr(runner, "nbgrader", hang)
    o = {**runner.DEFAULT_OPTIONS, "db_url": f"sqlite:///{tmp_path}/gb.db",
         "work_dir": str(tmp_path / "work"), "nbgrader_timeout": 3, "record_each": 1.5}
    failed = runner.autograde(str(tmp_path), "a1", ["ada", "bob"], o)
    assert failed == {s: "record took longer than 6 s" for s in ("ada", "bob")}


def test_an_unreadable_resubmission_replaces_the_earlier_score(tmp_path, monkeypatch):
    """The first submission scored; the resubmission is nested 100,000 levels deep. It is
    "not graded" with its NOT_GRADED note, and the export no longer shows the earlier score."""
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.plugins.export import CsvExportPlugin

    from cudacourse.course import authoring

    import os
    import sys

    # nbgrader runs `alembic` as a subprocess: this environment's bin/ must be on PATH
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    root = tmp_path / "course"
    A = "01_gpu_vs_cpu"
    (root / "solutions").mkdir(parents=True)
    import shutil

    shutil.copytree(authoring.ROOT / "solutions" / A, root / "solutions" / A)
    db = f"sqlite:///{tmp_path}/gradebook.db"
    with Gradebook(db) as gb:  # the earlier grading: 3 of 3 on one cell
        gb.add_assignment(A)
        gb.add_student("ada")
        nb = gb.add_notebook(A, A)
        gb.add_grade_cell("q1", A, A, max_score=3, cell_type="code")
        sub = gb.add_submission(A, "ada")
        grade = sub.notebooks[0].grades[0]
        grade.auto_score = 3
        gb.db.commit()
        assert gb.find_submission(A, "ada").score == 3 and nb
    d = root / "submitted" / "ada" / A
    d.mkdir(parents=True)
    (d / f"{A}.ipynb").write_bytes(b'{"cells": [], "x": ' + b"[" * 100_000 + b"]" * 100_000
                                   + b"}")
    out = runner.grade_submission(str(root), A, "ada", {"db_url": db})
    assert out["status"] == "not_graded" and "nested too deeply" in out["reason"]
    note = (root / "feedback" / "ada" / A / "NOT_GRADED.txt").read_text()
    assert "nested too deeply" in note
    with Gradebook(db) as gb:
        with pytest.raises(MissingEntry):
            gb.find_submission(A, "ada")
        exported = tmp_path / "grades.csv"
        CsvExportPlugin(to=str(exported)).export(gb)
    rows = exported.read_text().splitlines()
    ada = [r for r in rows if ",ada," in r]
    assert ada and all(",3.0," not in r for r in ada), rows  # the earlier 3 points are gone


@pytest.mark.parametrize("student", ["..", "../other", "a/b"])
def test_a_student_name_that_climbs_writes_no_note_anywhere(tmp_path, student):
    with pytest.raises(ValueError, match="not a student or assignment name"):
        runner.mark_not_graded(str(tmp_path / "course"), "a1", student, "why",
                               f"sqlite:///{tmp_path}/gb.db")
    assert not (tmp_path / "feedback").exists() and not (tmp_path / "course").exists()


def test_one_slow_record_is_that_students_not_graded_and_the_rest_are_recorded(tmp_path,
                                                                              monkeypatch):
    """Issue 38, class 7: the batch record run stops at its deadline (its own plus a little
    per student); those it finished stand, the rest are recorded one by one, each with its
    own deadline, and only the slow one ends "not graded: record took longer than N s"."""
    import subprocess

    root = tmp_path / "course"
    (root / "solutions" / "a1").mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), root / "solutions" / "a1" / "one.ipynb")
    students = ["ada", "bob", "cy", "dee", "eve"]
    slow = "cy"
    calls: list[str] = []

    def record(student):
        path = root / "autograded" / student / "a1" / "one.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.v4.new_notebook(), path)

    def fake_nbgrader(course_root, *args, db=None, timeout=600):
        who = [a.split("=", 1)[1] for a in args if a.startswith("--student=")]
        calls.append(who[0] if who else "batch")
        for s in who or students:  # nbgrader records students in order
            if s == slow:
                raise subprocess.TimeoutExpired("nbgrader", timeout)
            record(s)
        return subprocess.CompletedProcess(args, 0, "", "")

    finished, marked = [], {}
    monkeypatch.setattr(runner, "nbgrader", fake_nbgrader)
    monkeypatch.setattr(runner, "finish", lambda r, o, root=None: finished.append(r["student"]))
    monkeypatch.setattr(runner, "mark_not_graded",
                        lambda root_, a, s, reason, db: marked.__setitem__(s, reason))
    o = {**runner.DEFAULT_OPTIONS, "db_url": f"sqlite:///{tmp_path}/gb.db",
         "work_dir": str(tmp_path / "work"), "nbgrader_timeout": 3, "record_each": 1}
    prepared = [{"student": s, "status": "prepared", "incidents": []} for s in students]
    said: list[str] = []
    runner._finish_batch(str(root), "a1", prepared, o, said.append)
    assert calls == ["batch", "cy", "dee", "eve"]  # ada and bob were recorded by the batch
    assert marked == {"cy": "record took longer than 3 s"}
    assert sorted(finished) == ["ada", "bob", "dee", "eve"]
    by = {r["student"]: r for r in prepared}
    assert by["cy"]["status"] == "not_graded" and by["cy"]["reason"] == marked["cy"]


def test_a_submission_past_its_memory_budget_is_not_graded_with_that_reason(spied,
                                                                            monkeypatch):
    """The sandbox's watchdog killed a run of this submission (all its processes together
    over the budget): "not graded: used more than N MiB", nothing recorded for it."""
    from cudacourse.grader import sandbox

    def over(*a, **k):
        spied["visited"].append("feedback run and verdicts")
        raise sandbox.OverBudget("used more than 3840 MiB")

    monkeypatch.setattr(prepare, "prepare", over)
    out = _grade(spied)
    assert spied["visited"] == STAGE_NAMES[:2]
    assert out["status"] == "not_graded" and out["reason"] == "used more than 3840 MiB"
    assert spied["marked"] == [out["reason"]]
