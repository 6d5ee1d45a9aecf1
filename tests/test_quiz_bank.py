"""The question banks as teaching material: enough questions, enough that make learners
compute, right answers that cannot be guessed from their position or length, and questions
placed where the lesson has taught what they need (and has not just printed the answer)."""

from __future__ import annotations

import json
import re

import pytest

from cudacourse import quiz
from cudacourse.authoring import ROOT, lessons

LESSONS = [p.stem for p in lessons() if p.stem in quiz.lessons()]
MAX_SHARE = 0.40


def _choice_questions(lesson: str) -> list[quiz.Question]:
    return [q for q in quiz.keyed(lesson, ROOT).values() if q.kind == "choice"]


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
def test_five_questions_four_of_them_predict_or_compute(lesson):
    qs = list(quiz.keyed(lesson, ROOT).values())
    assert len(qs) >= 5, f"{lesson}: {len(qs)} questions, want at least 5"
    predict = [q.qid for q in qs if q.predict]
    assert len(predict) >= 4, f"{lesson}: only {predict} ask to predict or compute"
    # enough multiple-choice questions for the position rule below to mean something
    assert len(_choice_questions(lesson)) >= 3, f"{lesson}: fewer than 3 multiple-choice"


@pytest.mark.parametrize("lesson", LESSONS)
def test_right_letters_are_spread(lesson):
    qs = _choice_questions(lesson)
    letters = [q.right_choices()[0] for q in qs]
    for letter in set(letters):
        share = letters.count(letter) / len(qs)
        assert share <= MAX_SHARE, (f"{lesson}: ({letter}) is right in {letters.count(letter)} "
                                    f"of {len(qs)} multiple-choice questions")


@pytest.mark.parametrize("lesson", LESSONS)
def test_right_choice_is_rarely_the_longest(lesson):
    qs = _choice_questions(lesson)
    longest = []
    for q in qs:
        right = q.right_choices()[0]
        others = [len(v) for k, v in q.choices.items() if k != right]
        if len(q.choices[right]) >= max(others):
            longest.append(q.qid)
    assert len(longest) / len(qs) <= MAX_SHARE, f"{lesson}: the right choice is longest in {longest}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_choice_explains_itself(lesson):
    for q in quiz.keyed(lesson, ROOT).values():
        assert q.title and q.explain and q.hint, f"{q.qid}: title, explain and hint needed"
        if q.kind == "number":
            assert q.tol > 0 and len(q.wrong) >= 2, f"{q.qid}: tol and common wrong values"
            assert not any(q.is_right(v) for v, _ in q.wrong), f"{q.qid}: a 'wrong' value is right"
        else:
            assert set(q.why) == set(q.choices), f"{q.qid}: a why for every choice"


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
    question has its answer cell (naming the variable and format) and its test cell."""
    cells = _cells(lesson)
    asked = [m for c in cells for m in re.findall(r'quiz\.ask\("([\w.]+)"', _source(c))]
    assert asked == list(quiz.keyed(lesson, ROOT)), f"{lesson}: asked {asked}"
    ids = {c.id: c for c in cells}
    for q in quiz.keyed(lesson, ROOT).values():
        answer_cell = ids.get(q.var)
        assert answer_cell is not None and answer_cell.kind == "solution", q.var
        src = _source(answer_cell)
        assert f"# {q.header}. Answer as: {q.answer_format()}" in src, q.var
        test_cell = ids.get(f"test_{q.var}")
        assert test_cell is not None and f'quiz.grade("{q.qid}", {q.var}, key="' in _source(test_cell)


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
