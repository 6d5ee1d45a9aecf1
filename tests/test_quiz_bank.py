"""The question banks as teaching material: enough questions, enough that make learners
compute, right answers that cannot be guessed from their position or length, and questions
placed where the lesson has taught what they need (and has not just printed the answer)."""

from __future__ import annotations

import json
import re

import pytest

from cudacourse.course import lessonrules, quiz
from cudacourse.course.authoring import ROOT, lessons

LESSONS = [p.stem for p in lessons() if p.stem in quiz.lessons()]


class _Cell:
    """A cell of the master notebook: kind ("markdown", "solution", "tests", "code"), id."""

    def __init__(self, cell: dict):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        self.source = "".join(cell["source"])
        self.id = meta.get("grade_id")
        self.kind = ("markdown" if cell["cell_type"] == "markdown" else "solution"
                     if meta.get("solution") else "tests" if meta.get("grade") else "code")


def _cells(lesson: str) -> list[_Cell]:
    """The master notebook (kept equal to lessons/<lesson>.py by tests/test_notebooks.py)."""
    master = ROOT / "solutions" / lesson / f"{lesson}.ipynb"
    return [_Cell(c) for c in json.loads(master.read_text())["cells"]]


def _source(cell: _Cell) -> str:
    return cell.source


def test_every_lesson_has_a_bank():
    assert LESSONS == [p.stem for p in lessons()], "a lesson without a question bank"


@pytest.mark.parametrize("lesson", LESSONS)
def test_the_bank_keeps_the_rules_of_lesson_check(lesson):
    """The rules docs/authoring.md states for a bank (cudacourse.course.lessonrules, the validator
    of `cudacourse lesson check`): every question keyed and explained, most of them predict
    or compute, right letters spread and the right choice rarely the longest."""
    problems = lessonrules.check(lesson, ROOT, ("questions", "predict", "letters"))
    assert not problems, "\n".join(map(str, problems))


def test_known_throwaway_choices_are_gone():
    """Wrong choices a learner dismisses without thinking teach nothing."""
    text = " ".join(v for lesson in LESSONS for q in quiz.keyed(lesson, ROOT).values()
                    for v in q.choices.values()).lower()
    for silly in ("is compressed", "larger than gpu memory", "runs softmax on the cpu"):
        assert silly not in text


def test_lesson_1_explains_before_it_says_warp():
    """Warps arrive in lesson 2; lesson 1's questions must not lean on the word."""
    for q in quiz.keyed("01_gpu_vs_cpu", ROOT).values():
        words = " ".join([q.prompt, q.explain, q.hint, *q.choices.values(), *q.why.values(),
                          *(w for _, w in q.wrong)])
        assert "warp" not in words.lower(), q.qid


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_asks_the_bank_in_order_with_named_answers(lesson):
    """Headers are numbered by bank order, so the lesson must ask in that order; every
    question has its answer cell (naming the variable and format) and its test cell (the
    rule asked_in_order); the master's test cell carries the key token."""
    problems = lessonrules.check(lesson, ROOT, ("asked_in_order",))
    assert not problems, "\n".join(map(str, problems))
    ids = {c.id: c for c in _cells(lesson)}
    for q in quiz.keyed(lesson, ROOT).values():
        assert f"# {q.header}. Answer as: {q.answer_format()}" in _source(ids[q.var]), q.var
        assert f'quiz.grade("{q.qid}", {q.var}, key="' in _source(ids[f"test_{q.var}"])


def _bold_before(cells, qid: str) -> list[str]:
    """Bold phrases of the markdown between the previous question and this one."""
    out: list[str] = []
    for c in cells:
        src = _source(c)
        if re.search(rf'quiz\.ask\("{re.escape(qid)}"', src):
            return out
        if "quiz.ask(" in src:
            out = []
        if c.kind == "markdown":
            out += re.findall(r"\*\*(.+?)\*\*", src.replace("\n", " "))
    raise AssertionError(f"{qid} is never asked")


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


@pytest.mark.parametrize("lesson", LESSONS)
def test_no_question_restates_a_bold_sentence_just_above(lesson):
    cells = _cells(lesson)
    master = "\n".join(_source(c) for c in cells if c.kind == "solution")
    for q in quiz.keyed(lesson, ROOT).values():
        bold = [_norm(b) for b in _bold_before(cells, q.qid) if len(_norm(b)) >= 3]
        if q.kind == "number":
            value = re.search(rf"^{q.var}\s*=\s*(.+)$", master, re.M).group(1).strip()
            rights = [_norm(value)]
        else:
            rights = [_norm(q.choices[k]) for k in q.right_choices()]
        for b in bold:
            for r in rights:
                assert not (r and (r in b or (len(b) >= 6 and b in r))), \
                    f"{q.qid}: the answer {r!r} is printed in bold just above ({b!r})"


def test_barrier_question_comes_before_the_tiled_matmul():
    """Issue 32: asked after the exercise, the question was answered by the kernel just
    written (and the master's comment on its second barrier): it is a prediction now."""
    cells = _cells("04_shared_memory")
    order = [c.id for c in cells]
    assert order.index("answer_barrier_purpose") < order.index("tiled_matmul")
