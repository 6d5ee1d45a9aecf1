"""One course grades both editions: each notebook in its own language, no false tampering.

A course made as ``cudacourse new-course --lang ja`` makes it (the Japanese master of lesson
1 as the assignment, trimmed to its graded cells: tests/lightcourse.py), and a class of three:
``hana`` (the Japanese edition, every answer right), ``kenji`` (Japanese, one question
answered wrong) and ``emma`` (the English edition, every answer right: a mixed class).
Graded with ``cudacourse grade``, feedback with ``cudacourse feedback``.

Shown (issue 39): no incident for anyone (every honest Japanese-edition learner was flagged
"tampering: the answer to 01_gpu_vs_cpu.throughput was replaced", because the audit compared
the English question bank of its baseline with the Japanese one the setup cell loads); full
marks for the right answers of both editions; each learner's feedback in the notebook's own
language, a wrong question's cause and fix as whole sentences, and no escaped quote
(``&#x27;``) shown as text.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import nbformat
import pytest

from cudacourse.course import authoring
from cudacourse.grader import intake

import lightcourse
from gradingclass import env, gradebook_scores, nbgrader
from test_grader_distributed import about_the_submission, build

pytestmark = [pytest.mark.grading]

A = "01_gpu_vs_cpu"
NB = f"{A}.ipynb"
ROOT = authoring.ROOT
WRONG_QUESTION = "answer_blocks"


def _cli(course, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "cudacourse.cli", *args, "--course",
                           str(course)], cwd=course, env=env(), capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict:
    course = tmp_path_factory.mktemp("editions") / "gpu-ja"
    (course / "solutions" / A).mkdir(parents=True)
    ja_master = nbformat.read(ROOT / "solutions" / "ja" / A / NB, 4)
    nbformat.write(lightcourse.trim(ja_master), course / "solutions" / A / NB)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    release = nbgrader(course, "generate_assignment", A, "--force")
    assert release.returncode == 0, release.stderr[-3000:]
    master = nbformat.read(course / "solutions" / A / NB, 4)
    learner_ja = nbformat.read(course / "notebooks" / A / NB, 4)
    assert learner_ja.metadata["cudacourse"]["lang"] == "ja"
    en_master = nbformat.read(ROOT / "solutions" / A / NB, 4)
    learner_en = nbformat.read(ROOT / "notebooks" / A / NB, 4)
    subs = {"hana": build("correct", learner_ja, master)[0],
            "kenji": build("correct", learner_ja, master)[0],
            "emma": build("correct", learner_en, en_master)[0]}
    cell = next(c for c in subs["kenji"].cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == WRONG_QUESTION)
    cell.source = re.sub(r'=\s*"\w"', '= "a"', cell.source)
    for student, nb in subs.items():
        d = course / "submitted" / student / A
        d.mkdir(parents=True)
        nbformat.write(nb, d / NB)
    proc = _cli(course, "grade", A, "--workers", "2", "--timeout", "60", "--no-progress")
    _cli(course, "feedback", A)
    return {"course": course, "grade": proc.stdout}


def _feedback(graded, student) -> str:
    return (graded["course"] / "feedback" / student / A / f"{A}.html").read_text()


def test_no_learner_of_either_edition_is_flagged(graded):
    run = json.loads((graded["course"] / "grading" / A / "latest.json").read_text())
    rows = {r["student"]: r for r in run["results"]}
    assert set(rows) == {"hana", "kenji", "emma"}
    for student, r in rows.items():
        assert r["status"] == "graded", r
        assert about_the_submission(r["incidents"]) == [], (student, r["incidents"])
    assert "tamper" not in graded["grade"] and "改ざん" not in graded["grade"]


def test_right_answers_of_both_editions_get_full_marks(graded):
    scores = gradebook_scores(graded["course"])
    full = {g: s for g, s in scores["hana"].items()}
    assert scores["emma"] == full
    assert full["test_vector_add"] == 3.0, full  # the kernel, in both editions
    assert scores["kenji"] == full  # a formative question costs no points


def test_each_learner_reads_feedback_in_the_notebooks_language(graded):
    for student in ("hana", "kenji"):
        page = _feedback(graded, student)
        assert "概要" in page, student
        for english in ("Summary:", "Grading note", "tampering", "&amp;#x27;", "&#x27;"):
            assert english not in page, (student, english)
    kenji = _feedback(graded, "kenji")
    assert "は正しい答えではありません。" in kenji
    assert not re.search(r"は 問題 \d+\.", kenji)  # not cut inside the question's title
    emma = _feedback(graded, "emma")
    assert "Summary:" in emma and "概要" not in emma
    assert not re.search(r"[\u3040-\u30ff]", emma.split("Summary:")[1].split("</h2>")[0])


def test_the_grader_writes_what_release_feedback_reads(graded):
    for student in ("hana", "kenji", "emma"):
        d = graded["course"] / "feedback" / student / A
        assert (d / "timestamp.txt").is_file() and (d / "submission_secret.txt").is_file()
        assert not (d / intake.LEARNER_FILES / "submission_secret.txt").exists()
