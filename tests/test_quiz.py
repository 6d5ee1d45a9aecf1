"""Question banks: well-formed, one right answer each, and the masters answer them right."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cudacourse import quiz
from cudacourse.authoring import ROOT

BANKS = quiz.lessons()
QUESTIONS = [q for lesson in BANKS for q in quiz.bank(lesson).values()]


def test_every_lesson_with_a_notebook_has_a_bank_of_three_or_more():
    for master in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        lesson = master.parent.name
        assert lesson in BANKS, f"{lesson} has no question bank"
        assert len(quiz.bank(lesson)) >= 3, f"{lesson} has fewer than 3 questions"


@pytest.mark.parametrize("q", QUESTIONS, ids=[q.qid for q in QUESTIONS])
def test_exactly_one_choice_is_right(q):
    right = [k for k in q.choices if q.is_right(k)]
    assert len(right) == 1, f"{q.qid}: right choices {right}"
    assert len(q.choices) >= 3 and q.prompt and q.explain


@pytest.mark.parametrize("q", QUESTIONS, ids=[q.qid for q in QUESTIONS])
def test_grade_accepts_only_the_right_choice(q):
    right = next(k for k in q.choices if q.is_right(k))
    quiz.grade(q.qid, right)
    quiz.grade(q.qid, f" ({right.upper()}) ")  # forgiving about case, spaces, parentheses
    for k in q.choices:
        if k != right:
            with pytest.raises(AssertionError, match="not the right answer"):
                quiz.grade(q.qid, k)
    with pytest.raises(AssertionError, match="not one of the choices"):
        quiz.grade(q.qid, "zz")
    with pytest.raises(AssertionError, match="must be one of the letters"):
        quiz.grade(q.qid, 2)


def test_feedback_explains_right_and_hints_wrong():
    ok, text = quiz.feedback("01_gpu_vs_cpu.blocks", "b")
    assert ok and text.startswith("Right.")
    ok, text = quiz.feedback("01_gpu_vs_cpu.blocks", "a")
    assert not ok and text.startswith("Not quite.")
    assert quiz.answer("01_gpu_vs_cpu.blocks", "b") is True


def test_unknown_question_is_named():
    with pytest.raises(KeyError, match="no question '01_gpu_vs_cpu.nope'"):
        quiz.get("01_gpu_vs_cpu.nope")
    with pytest.raises(KeyError, match="no question bank"):
        quiz.get("99_nothing.q")


def _quiz_cells(nb_path: Path):
    """(qid, answer variable, solution source) for every graded question of a notebook."""
    nb = json.loads(nb_path.read_text())
    sources = {c["id"]: "".join(c["source"]) for c in nb["cells"]}
    found = []
    for c in nb["cells"]:
        src = "".join(c["source"])
        m = re.search(r'quiz\.grade\("([\w.]+)",\s*(\w+)\)', src)
        if m:
            found.append((m.group(1), m.group(2), sources))
    return found


@pytest.mark.parametrize("master", sorted((ROOT / "solutions").glob("*/*.ipynb")),
                         ids=lambda p: p.parent.name)
def test_masters_answer_every_question_right_and_learner_copies_hide_it(master):
    found = _quiz_cells(master)
    assert len(found) >= 3, f"{master.name}: fewer than 3 graded questions"
    release = ROOT / "notebooks" / master.parent.name / master.name
    learner_text = release.read_text() if release.exists() else ""
    for qid, var, sources in found:
        src = next(s for s in sources.values() if re.search(rf"^{var}\s*=", s, re.M))
        choice = re.search(rf'^{var}\s*=\s*"(\w)"', src, re.M).group(1)
        quiz.grade(qid, choice)
        assert not re.search(rf'{var}\s*=\s*\\"{choice}\\"', learner_text), \
            f"the learner copy gives away {qid}"
