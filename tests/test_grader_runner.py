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
