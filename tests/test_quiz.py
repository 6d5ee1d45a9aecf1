"""Question banks: well-formed, one key each, feedback that teaches, and the masters answer
every question right."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cudacourse.course import quiz
from cudacourse.course.authoring import ROOT

# Banks whose lesson source exists (a bank may land a little before its lesson).
BANKS = [lesson for lesson in quiz.lessons() if (ROOT / "lessons" / f"{lesson}.py").exists()]
# The questions with their instructor-side keys (lessons/quizkeys), and each key's token as
# ``cudacourse build`` writes it into the master's cells.
KEYED = {qid: q for lesson in BANKS for qid, q in quiz.keyed(lesson, ROOT).items()}
TOKENS = {qid: quiz.token(q) for qid, q in KEYED.items()}
QUESTIONS = list(KEYED.values())


def _grade(qid: str, choice: object, **kw) -> None:
    """A master's test cell: the check with the key token it carries."""
    __tracebackhide__ = True
    quiz.grade(qid, choice, key=TOKENS[qid], **kw)


def _master_answers() -> dict[str, object]:
    """qid -> the master notebook's answer (the Python value of `answer_x = ...`)."""
    out: dict[str, object] = {}
    for lesson in BANKS:
        text = (ROOT / "lessons" / f"{lesson}.py").read_text()
        for q in quiz.bank(lesson).values():
            m = re.search(rf"^{q.var}\s*=\s*(.+)$", text, re.M)
            assert m, f"{lesson}.py has no answer for {q.qid}"
            out[q.qid] = eval(m.group(1))  # noqa: S307 - a literal in our own lesson source
    return out


ANSWERS = _master_answers()


def _flat(text: str) -> str:
    """Whitespace-insensitive: messages are wrapped to the page."""
    return " ".join(str(text).split())


@pytest.mark.parametrize("q", QUESTIONS, ids=[q.qid for q in QUESTIONS])
def test_the_master_answer_is_the_key(q):
    assert q.is_right(ANSWERS[q.qid]), f"{q.qid}: the master's answer is not the key"
    _grade(q.qid, ANSWERS[q.qid])
    if q.kind == "choice":
        assert len(q.right_choices()) == 1
    if q.kind == "multi":
        assert 1 <= len(q.right_choices()) < len(q.choices)


@pytest.mark.parametrize("q", [q for q in QUESTIONS if q.kind != "number"],
                         ids=[q.qid for q in QUESTIONS if q.kind != "number"])
def test_wrong_choices_fail_with_their_own_explanation(q):
    right = set(q.right_choices())
    first = next(iter(right))
    # forgiving about case, spaces, parentheses and order
    _grade(q.qid, f" ({', '.join(sorted(right, reverse=True)).upper()}) ")
    for k in q.choices:
        if {k} == right:
            continue
        with pytest.raises(AssertionError, match="not the right answer") as err:
            _grade(q.qid, k)
        msg = _flat(err.value)
        assert msg.startswith(f'{q.var} = "{k}" is not the right answer to {q.header}')
        if k not in right:
            assert _flat(q.why[k]) in msg, f"{q.qid}: ({k}) must be explained"
        assert err.value.__suppress_context__ and err.value.__cause__ is None
    with pytest.raises(AssertionError, match="not one of the choices"):
        _grade(q.qid, "zz")
    with pytest.raises(AssertionError, match="must be a letter in quotes"):
        _grade(q.qid, 2)
    if q.kind == "choice":
        with pytest.raises(AssertionError, match="pick one letter only"):
            _grade(q.qid, f"{first}, {next(k for k in q.choices if k != first)}")


@pytest.mark.parametrize("q", [q for q in QUESTIONS if q.kind == "number"],
                         ids=[q.qid for q in QUESTIONS if q.kind == "number"])
def test_numbers_within_tolerance_pass_and_known_mistakes_are_named(q):
    v = float(ANSWERS[q.qid])
    _grade(q.qid, v + 0.4 * q.tol)
    _grade(q.qid, str(v - 0.4 * q.tol))  # a string holding a number is accepted
    for far in (v + 3 * q.tol, v * 10 + 1):
        assert not q.is_right(far)
    for value, why in q.wrong:
        with pytest.raises(AssertionError) as err:
            _grade(q.qid, value)
        assert _flat(why) in _flat(err.value)
    with pytest.raises(AssertionError, match="must be a number"):
        _grade(q.qid, "b")


def test_right_answer_says_so_with_the_one_line_why(capsys):
    _grade("01_gpu_vs_cpu.blocks", "c")
    out = capsys.readouterr().out
    assert out.startswith("Question 2: Blocks for 1,000 elements: right.")
    assert KEYED["01_gpu_vs_cpu.blocks"].why["c"] in out
    assert KEYED["01_gpu_vs_cpu.blocks"].explain not in out
    _grade("01_gpu_vs_cpu.blocks", "c", reveal=True)  # graded feedback: the full story
    assert KEYED["01_gpu_vs_cpu.blocks"].explain in capsys.readouterr().out


def test_graded_reveal_adds_the_explanation_to_a_wrong_answer():
    q = KEYED["01_gpu_vs_cpu.blocks"]
    with pytest.raises(AssertionError) as err:
        _grade(q.qid, "b", reveal=True)
    assert _flat(q.why["b"]) in _flat(err.value) and _flat(q.explain) in _flat(err.value)


def test_in_grading_a_wrong_answer_gets_the_full_explanation(monkeypatch):
    """`cudacourse grade` runs the master's (formative) test cell after submission: the
    feedback must still explain."""
    q = KEYED["01_gpu_vs_cpu.blocks"]
    with pytest.raises(AssertionError) as err:
        _grade(q.qid, "b")
    assert _flat(q.explain) not in _flat(err.value)  # before submission: the choice's why only
    monkeypatch.setenv("CUDACOURSE_GRADING", "1")
    with pytest.raises(AssertionError) as err:
        _grade(q.qid, "b")
    assert _flat(q.explain) in _flat(err.value)


def test_multi_feedback_names_wrong_picks_and_counts_missing_ones():
    ok, text = quiz.feedback("03_memory.streams", "a, c", TOKENS["03_memory.streams"])
    q = KEYED["03_memory.streams"]
    assert not ok and q.why["c"] in text and "1 more choice applies" in text
    assert q.why["a"] not in text  # a right pick is not explained away
    assert quiz.feedback("03_memory.streams", "B,A", TOKENS["03_memory.streams"])[0]


def test_record_checks_the_form_and_reveals_nothing(capsys):
    quiz.record("01_gpu_vs_cpu.blocks", "a")  # wrong, yet only recorded
    out = capsys.readouterr().out
    assert "Recorded answer_blocks = \"a\"" in out and "graded after you submit" in out
    assert "right" not in out.lower().replace("write", "")
    with pytest.raises(AssertionError, match="not one of the choices"):
        quiz.record("01_gpu_vs_cpu.blocks", "q")


def test_grade_error_shows_no_frame_of_quiz_py(capsys):
    """In IPython (JupyterLab, nbgrader) a wrong answer prints the explanation, and no
    traceback line inside cudacourse/course/quiz.py."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell("from cudacourse import quiz\nquiz.grade('01_gpu_vs_cpu.blocks', 'b', "
                       f"key={TOKENS['01_gpu_vs_cpu.blocks']!r})")
        out = capsys.readouterr()
        text = re.sub(r"\x1b\[[0-9;]*m", "", out.out + out.err)
    finally:
        InteractiveShell.clear_instance()
    assert "AssertionError" in text and _flat(KEYED["01_gpu_vs_cpu.blocks"].why["b"]) in _flat(text)
    assert "quiz.py" not in text, text


def test_answer_hash_knows_the_question_kind():
    q = KEYED["01_gpu_vs_cpu.global_index"]
    assert quiz.answer_hash(q.qid, "677") == q.answer_hash
    assert quiz.answer_hash("03_memory.streams", "b, a") == KEYED["03_memory.streams"].answer_hash


def test_unknown_question_is_named():
    with pytest.raises(KeyError, match="no question '01_gpu_vs_cpu.nope'"):
        quiz.get("01_gpu_vs_cpu.nope")
    with pytest.raises(KeyError, match="no question bank"):
        quiz.get("99_nothing.q")


class _Display:
    """Collects what ``quiz.ask`` displays."""

    def __init__(self):
        self.items: list[object] = []

    def __call__(self, *objs, **_):
        self.items += objs


def _ask(monkeypatch, qid, graded=False):
    pytest.importorskip("ipywidgets")
    import IPython.display

    shown = _Display()
    monkeypatch.setattr(IPython.display, "display", shown)
    quiz.ask(qid, graded=graded, key=None if graded else TOKENS[qid])
    md = next(o for o in shown.items if type(o).__name__ == "Markdown").data
    box = next(o for o in shown.items if type(o).__name__ == "VBox")
    return md, box


def _widgets(box):
    kids = list(box.children)
    return kids[:-2], kids[-2], kids[-1]  # inputs, button, output


def test_widget_names_number_title_variable_and_format(monkeypatch):
    q = KEYED["01_gpu_vs_cpu.blocks"]
    md, _ = _ask(monkeypatch, q.qid)
    assert md.startswith("**Question 2: Blocks for 1,000 elements.**")
    assert "01_gpu_vs_cpu" not in md.split("\n")[0]  # no internal id in the header
    assert q.answer_format() in md


def test_formative_widget_judges_a_click(monkeypatch):
    _, box = _ask(monkeypatch, "01_gpu_vs_cpu.blocks")
    (pick,), button, out = _widgets(box)
    pick.value = "b"
    button.click()
    assert "Not right" in out.value and "rounds down" in out.value  # a wrong letter: not "quite"
    pick.value = "c"
    button.click()
    assert "Right" in out.value and "answer_blocks = &quot;c&quot;" in out.value.replace('"', "&quot;")


def test_graded_widget_records_without_judging(monkeypatch):
    md, box = _ask(monkeypatch, "01_gpu_vs_cpu.blocks", graded=True)
    assert "graded after you submit" in md
    (pick,), button, out = _widgets(box)
    assert button.description == "Record"
    for choice in ("b", "c"):
        pick.value = choice
        button.click()
        assert "Right" not in out.value and "Not " not in out.value
        assert f"answer_blocks = " in out.value


def test_number_and_multi_widgets(monkeypatch):
    _, box = _ask(monkeypatch, "01_gpu_vs_cpu.global_index")
    (num,), button, out = _widgets(box)
    num.value = "640"
    button.click()
    assert "where block 5 starts" in out.value
    _, box = _ask(monkeypatch, "04_shared_memory.race_lines")
    boxes, button, out = _widgets(box)
    for b in boxes:
        b.value = b.description in ("(d)", "(e)")
    button.click()
    assert "Right" in out.value


def _quiz_cells(nb_path: Path):
    nb = json.loads(nb_path.read_text())
    return [m.groups() for c in nb["cells"]
            for m in [re.search(r'quiz\.grade\("([\w.]+)",\s*(\w+)', "".join(c["source"]))] if m]


@pytest.mark.parametrize("master", sorted((ROOT / "solutions").glob("*/*.ipynb")),
                         ids=lambda p: p.parent.name)
def test_masters_grade_every_question_and_learner_copies_hide_the_answers(master):
    found = _quiz_cells(master)
    lesson = master.parent.name
    assert [qid for qid, _ in found] == list(quiz.bank(lesson)), f"{lesson}: stale master?"
    release = ROOT / "notebooks" / lesson / master.name
    learner_text = release.read_text() if release.exists() else ""
    for qid, var in found:
        answer = ANSWERS[qid]
        shown = json.dumps(f"{var} = {answer!r}".replace("'", '"'))[1:-1]
        assert shown not in learner_text, f"the learner copy gives away {qid}"


def test_numbers_are_read_the_way_people_type_them():
    q = KEYED["01_gpu_vs_cpu.bytes_moved"]  # 1.2 GB
    for typed in ("1.2", "1,2", " 1.20 ", 1.2, "1.23"):
        assert q.is_right(typed), typed
    q = KEYED["01_gpu_vs_cpu.global_index"]  # 677
    assert q.is_right("677") and not q.is_right("6,77") and not q.is_right(True)
    assert KEYED["03_memory.implicit"].is_right("2_00")


def test_wrong_answers_open_by_how_far_off_they_are():
    """Issue 33: "Not quite" only for a near miss; a far-off answer or a wrong letter is told
    it is not right (in Japanese, 惜しい only when it is close)."""
    qid = "01_gpu_vs_cpu.global_index"  # the key is 677
    assert quiz.feedback(qid, 640, TOKENS[qid])[1].startswith("Not quite. ")  # within 10%
    assert quiz.feedback(qid, 42, TOKENS[qid])[1].startswith("Not right. ")
    assert quiz.feedback(qid, 1e12, TOKENS[qid])[1].startswith("Not right. ")
    assert quiz.feedback("01_gpu_vs_cpu.blocks", "b", TOKENS["01_gpu_vs_cpu.blocks"]
                         )[1].startswith("Not right. ")
    multi = "03_memory.streams"  # the key is "a, b"
    assert quiz.feedback(multi, "a", TOKENS[multi])[1].startswith("Not quite. ")
    assert quiz.feedback(multi, "c, d", TOKENS[multi])[1].startswith("Not right. ")
