"""Formative or graded questions per assignment, applied by nbgrader generate_assignment."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from cudacourse.course import authoring, quiz
from cudacourse.grader.quiz_mode import QuizMode, graded_source, learner_token

LESSON = '''# %% [readonly] id=setup
from cudacourse import quiz

# %%
quiz.ask("01_gpu_vs_cpu.blocks")

# %% [solution] id=answer_blocks
### BEGIN SOLUTION
answer_blocks = "c"
### END SOLUTION

# %% [tests] id=test_answer_blocks points=1
quiz.grade("01_gpu_vs_cpu.blocks", answer_blocks)
'''


def _master():
    """The lesson above as ``cudacourse build`` writes its master: with the key tokens."""
    return quiz.embed_keys(authoring.to_notebook(LESSON), authoring.ROOT)


TOKEN = quiz.token(quiz.keyed("01_gpu_vs_cpu", authoring.ROOT)["01_gpu_vs_cpu.blocks"])
# A formative learner copy's token: the same sealed entries, without the explanation
LEARNER_TOKEN = learner_token(TOKEN)


def _cells(nb):
    return {c.get("id"): c for c in nb["cells"]}


def test_a_learner_token_keeps_the_sealed_feedback_and_drops_the_explanation():
    """Issue 32: the explanation names the answer, so only the master's token holds it; the
    learner's token still judges and explains each choice it is given."""
    key = quiz.keyed("01_gpu_vs_cpu", authoring.ROOT)["01_gpu_vs_cpu.blocks"]
    assert LEARNER_TOKEN != TOKEN and len(LEARNER_TOKEN) < len(TOKEN)
    assert quiz.with_token(key.qid, TOKEN).explain == key.explain
    learner = quiz.with_token(key.qid, LEARNER_TOKEN)
    assert learner.explain == "" and learner.is_right("c") and not learner.is_right("b")
    ok, text = quiz.feedback(key.qid, "c", LEARNER_TOKEN)
    assert ok and key.why["c"] in text
    assert learner_token(LEARNER_TOKEN) == LEARNER_TOKEN  # idempotent
    assert learner_token("not-a-token") == "not-a-token"  # quiz.with_token names the problem


def test_graded_source_hides_the_check_and_keeps_a_form_check():
    src = graded_source(f'quiz.grade("01_gpu_vs_cpu.blocks", answer_blocks, key="{TOKEN}")')
    visible, hidden = src.split("### BEGIN HIDDEN TESTS")
    assert 'quiz.record("01_gpu_vs_cpu.blocks", answer_blocks)' in visible
    assert "quiz.grade(" not in visible and TOKEN not in visible
    assert (f'quiz.grade("01_gpu_vs_cpu.blocks", answer_blocks, key="{TOKEN}", reveal=True)'
            in hidden)
    assert hidden.strip().endswith("### END HIDDEN TESTS")


@pytest.mark.parametrize("mode", ["formative", "graded"])
def test_preprocessor_rewrites_question_cells(mode):
    nb = _master()
    pp = QuizMode(graded=["01_x"] if mode == "graded" else [])
    nb, _ = pp.preprocess(nb, {"nbgrader": {"assignment": "01_x"}})
    cells = _cells(nb)
    test = cells["test_answer_blocks"]
    ask = next(c for c in nb.cells if "quiz.ask" in c.source)
    assert nb.metadata["cudacourse"]["quiz_mode"] == mode
    if mode == "graded":
        assert test.metadata["nbgrader"]["points"] == 1
        assert "BEGIN HIDDEN TESTS" in test.source and "quiz.record(" in test.source
        assert ask.source == 'quiz.ask("01_gpu_vs_cpu.blocks", graded=True)'
    else:
        assert test.metadata["nbgrader"]["points"] == 0
        assert test.source == (
            f'quiz.grade("01_gpu_vs_cpu.blocks", answer_blocks, key="{LEARNER_TOKEN}")')
        assert ask.source == f'quiz.ask("01_gpu_vs_cpu.blocks", key="{LEARNER_TOKEN}")'
    assert cells["answer_blocks"].source.count('answer_blocks = "c"') == 1  # untouched


def _generate(tmp_path: Path, graded: list[str]) -> tuple[dict, Path]:
    course = tmp_path / "course"
    (course / "solutions" / "01_x").mkdir(parents=True)
    (course / "solutions" / "01_x" / "01_x.ipynb").write_text(
        authoring.render(_master()))
    config = (authoring.ROOT / "nbgrader_config.py").read_text()
    (course / "nbgrader_config.py").write_text(config + f"\nc.QuizMode.graded = {graded!r}\n")
    env = {**os.environ,
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "01_x",
                           "--force", f"--db=sqlite:///{course}/gradebook.db"],
                          cwd=course, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    release = json.loads((course / "notebooks" / "01_x" / "01_x.ipynb").read_text())
    return release, course / "gradebook.db"


def test_generate_assignment_in_graded_mode_keeps_the_key_for_autograding(tmp_path):
    release, db = _generate(tmp_path, ["01_x"])
    test = _cells(release)["test_answer_blocks"]
    source = "".join(test["source"])
    # the learner copy checks the form only ...
    assert "quiz.record(" in source and "quiz.grade(" not in source
    assert TOKEN not in json.dumps(release) and "key=" not in json.dumps(release)
    assert test["metadata"]["nbgrader"]["points"] == 1
    # ... and the gradebook keeps the hidden grading, which autograde puts back
    with sqlite3.connect(db) as con:
        (stored,) = con.execute("select source from source_cell where name = "
                                "'test_answer_blocks'").fetchone()
    assert (f'quiz.grade("01_gpu_vs_cpu.blocks", answer_blocks, key="{TOKEN}", reveal=True)'
            in stored)


def test_generate_assignment_formative_by_default(tmp_path):
    release, _ = _generate(tmp_path, [])
    test = _cells(release)["test_answer_blocks"]
    assert "".join(test["source"]) == (
        f'quiz.grade("01_gpu_vs_cpu.blocks", answer_blocks, key="{LEARNER_TOKEN}")')
    assert test["metadata"]["nbgrader"]["points"] == 0


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ,
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "nbgrader", *args,
                           f"--db=sqlite:///{course}/gradebook.db"],
                          cwd=course, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.grading
def test_graded_questions_are_scored_at_autograding_with_the_explanation_in_feedback(tmp_path):
    """The whole graded path: generate, submit a right and a wrong answer, autograde,
    feedback. The learner copy never judged; the gradebook and the feedback do."""
    from cudacourse.course import quiz

    release, db = _generate(tmp_path, ["01_x"])
    course = db.parent
    for student, answer in (("alice", '"c"'), ("bob", '"b"')):
        nb = json.loads(json.dumps(release))
        for cell in nb["cells"]:
            if cell.get("id") == "answer_blocks":
                cell["source"] = f"answer_blocks = {answer}\n"
        sub = course / "submitted" / student / "01_x"
        sub.mkdir(parents=True)
        (sub / "01_x.ipynb").write_text(json.dumps(nb))
    graded = _nbgrader(course, "autograde", "01_x", "--force")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{db}") as gb:
        scores = {s: gb.find_grade("test_answer_blocks", "01_x", "01_x", s).score
                  for s in ("alice", "bob")}
    assert scores == {"alice": 1.0, "bob": 0.0}
    feedback = _nbgrader(course, "generate_feedback", "01_x", "--force")
    assert feedback.returncode == 0, feedback.stdout + feedback.stderr
    html = (course / "feedback" / "bob" / "01_x" / "01_x.html").read_text()
    q = quiz.keyed("01_gpu_vs_cpu", authoring.ROOT)["01_gpu_vs_cpu.blocks"]
    flat = " ".join(html.split())
    assert " ".join(q.why["b"].split()[:6]) in flat  # the why of bob's choice
    assert " ".join(q.explain.split()[:6]) in flat  # and the full explanation
