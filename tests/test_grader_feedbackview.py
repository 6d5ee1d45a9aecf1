"""The summary on top of an autograded notebook, and the cells it rewords (grader/feedbackview).

Built on lesson 1's real master with verdicts as the verdict processes report them (the
end-to-end run through nbgrader is in test_grading.py and test_browser.py)."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest

from cudacourse.grader import feedbackview as fv
from cudacourse.grader import policy

ROOT = Path(__file__).resolve().parents[1]
MASTER = ROOT / "solutions" / "01_gpu_vs_cpu" / "01_gpu_vs_cpu.ipynb"
RELEASE = ROOT / "notebooks" / "01_gpu_vs_cpu" / "01_gpu_vs_cpu.ipynb"
WRONG = ("out holds a[i] - b[i], but it should hold a[i] + b[i] [n=1000, blocks=4]. "
         "Add the inputs: out[i] = a[i] + b[i], and keep the bounds guard.")


def _error(ename: str, evalue: str) -> dict:
    return {"output_type": "error", "ename": ename, "evalue": evalue,
            "traceback": [f"\x1b[0;31m{ename}\x1b[0m: {evalue}"]}


def _graded(nb, verdicts):
    """What prepare.apply leaves: every test cell's outputs from its verdict."""
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("grade") and gid in verdicts:
            v = verdicts[gid]
            cell.outputs = [] if v["status"] == "pass" else [
                nbformat.from_dict(_error(v.get("ename") or "CheckFailure", v["message"]))]
    return nb


def _verdicts(nb, **special):
    out = {c.metadata["nbgrader"]["grade_id"]: {"status": "pass", "message": "",
                                                 "output": "Question: right. Because."}
           for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
    out.update(special)
    return out


@pytest.fixture
def master():
    return nbformat.read(MASTER, as_version=4)


def test_the_summary_opens_the_notebook_with_the_failing_cell_first(master):
    v = _verdicts(master, test_vector_add={"status": "fail", "ename": "CheckFailure",
                                           "message": WRONG, "cause": "wrong_values"})
    nb = _graded(copy.deepcopy(master), v)
    items = fv.annotate(nb, v)
    top = nb.cells[0]
    assert top.cell_type == "markdown" and top.metadata["cudacourse"]["summary"]
    text = top.source
    lines = [ln for ln in text.splitlines() if ln.startswith("- ")]
    # the wrong cell first, by its exercise's name, with points, cause, fix and a link
    assert lines[0].startswith("- **not right** (0 / 3): [Exercise 1: write vector\\_add]"
                               "(#test_vector_add)"), lines[0]
    assert "**Cause:** out holds a\\[i\\] - b\\[i\\], but it should hold a\\[i\\] + b\\[i\\] " \
        "\\[n=1000, blocks=4\\]." in lines[0] and "**Fix:** Add the inputs" in lines[0]
    assert "CheckFailure" not in text
    # questions by their header, right, with the learner's answer
    assert any("[Question 2: Blocks for 1,000 elements](#test_answer_blocks)" in ln and
               ln.startswith("- **right** (1 / 1)") for ln in lines), lines
    assert len(lines) == len(items) == 7
    total = sum(e.points for e in items) - 3
    assert text.startswith(f"## Summary: {total:g} / {total + 3:g} points, 1 of 7")


def test_test_cell_messages_are_wrapped_and_lose_the_class_prefix(master):
    long = "x" * 30 + " " + ("word " * 200)
    v = _verdicts(master, test_answer_blocks={"status": "fail", "ename": "AssertionError",
                                              "message": f"AssertionError: {long}"})
    nb = _graded(copy.deepcopy(master), v)
    fv.annotate(nb, v)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                == "test_answer_blocks")
    (err,) = cell.outputs
    assert err.output_type == "error"  # nbgrader still scores it 0
    shown = "".join(err.traceback)
    assert "AssertionError" not in shown and max(map(len, shown.splitlines())) <= fv.WIDTH


def test_a_blank_answer_is_unanswered_not_a_name_error():
    nb = nbformat.read(RELEASE, as_version=4)  # the learner copy: every answer a stub
    v = _verdicts(nb, test_answer_throughput={
        "status": "fail", "ename": "NameError",
        "message": "name 'answer_throughput' is not defined"}, test_vector_add={
        "status": "not_gradable", "ename": "NotGradable",
        "message": "not gradable: raise at line 3 of answer cell 'vector_add'"})
    nb = _graded(nb, v)
    items = {e.grade_id: e for e in fv.annotate(nb, v)}
    assert items["test_answer_throughput"].status == "unanswered"
    assert items["test_vector_add"].status == "unanswered"
    summary = nb.cells[0].source
    assert "NameError" not in summary and "NotGradable" not in summary
    assert "- **unanswered** (formative, no points): [Question 1: What a GPU is built for]" \
        in summary and "- **unanswered** (0 / 3): [Exercise 1" in summary
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id")
                == "test_answer_throughput")
    assert cell.outputs[0].ename == "Unanswered" and "NameError" not in cell.outputs[0].traceback[0]


def test_questions_render_as_questions_and_formative_ones_have_no_points(master):
    nb = copy.deepcopy(master)
    for c in nb.cells:  # formative: nbgrader's points are 0 (quiz_mode)
        if c.metadata.get("nbgrader", {}).get("grade") and "quiz" in c.source:
            c.metadata["nbgrader"]["points"] = 0.0
    v = _verdicts(nb, test_answer_blocks={"status": "fail", "ename": "AssertionError",
                                          "message": 'answer_blocks = "c" is not the right '
                                          "answer to Question 2. Round up, not down."})
    nb = _graded(nb, v)
    fv.annotate(nb, v)
    ask = next(c for c in nb.cells if c.source.startswith('quiz.ask("01_gpu_vs_cpu.blocks"'))
    (out,) = ask.outputs
    assert out.data["text/plain"].startswith("Question 2: Blocks for 1,000 elements")
    assert "(c) 4" in out.data["text/plain"] and "IPython" not in out.data["text/plain"]
    line = next(ln for ln in nb.cells[0].source.splitlines() if "test_answer_blocks" in ln)
    assert line.startswith("- **not right** (formative, no points)"), line
    assert 'Your answer: "' in line and "**Fix:** Round up, not down." in line


def test_submission_text_cannot_make_markup(master):
    evil = '<img src=x onerror=alert(1)> [click](javascript:alert(1)) # heading'
    v = _verdicts(master, test_vector_add={"status": "fail", "ename": "CheckFailure",
                                           "message": evil + ". more"})
    nb = _graded(copy.deepcopy(master), v)
    fv.annotate(nb, v)
    text = nb.cells[0].source
    assert "<img" not in text and "](javascript" not in text and "\n#" not in text
    html = nbformat.v4  # rendered by nbconvert's markdown renderer as formgrader does
    from nbconvert.filters.markdown import markdown2html

    rendered = markdown2html(text)
    assert "<img" not in rendered and 'href="javascript' not in rendered
    assert html is not None


@pytest.mark.parametrize("message,cause", [
    ("out[1000:] was never written [n=1000]. Guard with if i < n.",
     "out[1000:] was never written [n=1000]."),
    ("not gradable: open at line 2 of answer cell 'vector_add': files are not allowed",
     "not gradable: open at line 2 of answer cell 'vector_add'."),
    ("the kernel did all the work in one thread (e.g. a loop over i); spread it: one "
     "element per thread", "the kernel did all the work in one thread (e.g. a loop over i)."),
])
def test_split_cause_takes_the_first_sentence(message, cause):
    assert fv.split_cause(message)[0] == cause


def test_the_late_line_says_due_date_lateness_rule_and_cost():
    late = policy.LatePenalty(penalty_method="percent_per_day", percent_per_day=10)
    secs = 2 * 86400 + 3600
    info = {"due": "2026-01-10 23:59 UTC", "submitted": "2026-01-13 00:59 UTC",
            "seconds_late": secs, "late": True, "percent": late.percent(secs),
            "penalty": 2.1, "rule": policy.rule_text(late)}
    assert policy.late_line(info) == (
        "Handed in 2026-01-13 00:59 UTC, due 2026-01-10 23:59 UTC: 2 days 1 hour late. "
        "Rule: -10% per started day late, at most -100%; applied: -30% of the score "
        "(-2.1 points).")
    assert policy.late_line({**info, "late": False}) is None
    assert policy.duration(9.7) == "9 s" and policy.duration(3660) == "1 hour 1 min"
    assert policy.duration(61) == "1 min 1 s" and policy.duration(0.2) == "0 s"


def test_first_cause_names_the_cell_and_calls_a_blank_unanswered():
    v = {"test_a": {"status": "pass"},
         "test_b": {"status": "fail", "message": "name 'answer_b' is not defined"},
         "test_c": {"status": "fail", "message": f"CheckFailure: {WRONG}"}}
    assert fv.first_cause(v) == "test_b: unanswered (answer_b not written)"
    del v["test_b"]
    assert fv.first_cause(v) == ("test_c: out holds a[i] - b[i], but it should hold a[i] + b[i] "
                                 "[n=1000, blocks=4].")
    assert fv.first_cause({"test_a": {"status": "pass"}}) == ""
    v["test_b"] = {"status": "fail", "message": "name 'answer_b' is not defined"}
    # a cell worth points before a formative one, whatever the order
    assert fv.first_cause(v, {"test_b": 0.0, "test_c": 3.0}).startswith("test_c: out holds")


def test_the_cells_that_lost_points_come_first_then_formative_ones():
    """A blank submission: the exercise (3 points lost) heads the list, before the two
    formative questions left unanswered, which cost nothing."""
    nb = nbformat.read(RELEASE, as_version=4)
    for c in nb.cells:
        if c.metadata.get("nbgrader", {}).get("grade") and "quiz" in c.source:
            c.metadata["nbgrader"]["points"] = 0.0  # formative
    blank = {"status": "fail", "ename": "NameError", "message": "name 'x' is not defined"}
    v = {gid: dict(blank) for gid in _verdicts(nb)}
    v["test_vector_add"] = {"status": "not_gradable", "ename": "NotGradable",
                            "message": "not gradable: raise at line 3 of answer cell"}
    nb = _graded(nb, v)
    fv.annotate(nb, v)
    lines = [ln for ln in nb.cells[0].source.splitlines() if ln.startswith("- ")]
    assert "(#test_vector_add)" in lines[0], lines
    assert all("formative" in ln for ln in lines[1:]), lines


def test_a_late_summary_gives_the_score_after_the_penalty(master):
    v = _verdicts(master)
    nb = _graded(copy.deepcopy(master), v)
    late = {"late": True, "percent": 10.0, "seconds_late": 9.0, "penalty": 0.0,
            "due": "2026-12-01 10:00:00 UTC", "submitted": "2026-12-01 10:00:09 UTC",
            "rule": "-10% per started day late, at most -100%"}
    items = fv.annotate(nb, v, late=late)
    most = sum(e.points for e in items if e.points > 0)
    after = round(most * 0.9, 6)
    text = nb.cells[0].source
    assert text.startswith(f"## Summary: {after:g} / {most:g} points ({most:g} before the "
                           "late penalty)"), text.splitlines()[0]
    assert f"-{most * 0.1:g} points" in text  # the same penalty in the late line
    assert "Handed in 2026-12-01 10:00:09 UTC, due 2026-12-01 10:00:00 UTC: 9 s late" in text


JA_MASTER = ROOT / "solutions" / "ja" / "01_gpu_vs_cpu" / "01_gpu_vs_cpu.ipynb"


def test_cause_and_fix_come_from_the_checkers_parts_not_its_punctuation():
    """A CheckFailure's diagnosis and hint, as the verdict records them apart: a message
    whose first sentence break is inside the diagnosis is not cut there."""
    from cudacourse.check._failure import CheckFailure
    from cudacourse.grader import verdict
    from cudacourse.i18n import T

    exc = CheckFailure(T("out[{i}] is wrong: e.g. 3 vs. 4; the sum is off. Really", i=7),
                       cause="wrong_values", hint=T("add {a} and {b}", a="a[i]", b="b[i]"),
                       context={"n": 1000})
    parts = verdict._structure(exc)
    assert parts["diagnosis"] == "out[7] is wrong: e.g. 3 vs. 4; the sum is off. Really"
    assert parts["hint"] == "Add a[i] and b[i]" and parts["case"] == "n=1000"
    cause, fix = fv.checker_parts({"message": str(exc), **parts})
    assert cause == "out[7] is wrong: e.g. 3 vs. 4; the sum is off. Really [n=1000]"
    assert fix == "Add a[i] and b[i]"
    assert fv.checker_parts({"message": "AssertionError: x. y"}) is None  # not a checker's


def test_a_japanese_notebook_gets_its_summary_in_japanese():
    nb = nbformat.read(JA_MASTER, as_version=4)
    assert nb.metadata["cudacourse"]["lang"] == "ja"
    v = _verdicts(nb, test_vector_add={"status": "fail", "ename": "CheckFailure",
                                       "message": WRONG, "diagnosis": "out が違う",
                                       "hint": "a と b を足す"})
    nb = _graded(nb, v)
    late = {"late": True, "percent": 10.0, "seconds_late": 3700.0, "penalty": 0.0,
            "due": "2026-12-01 10:00:00 UTC", "submitted": "2026-12-01 11:01:40 UTC",
            "rule": "-10% per started day late, at most -100%",
            "rule_of": {"penalty_method": "percent_per_day", "percent_per_day": 10.0,
                        "max_percent": 100.0, "grace_minutes": 0.0}}
    fv.annotate(nb, v, late=late)
    text = nb.cells[0].source
    assert text.startswith("## 概要: ") and "点 (遅延ペナルティ前は" in text
    assert "**遅延提出。** 提出 2026-12-01 11:01:40 UTC" in text and "1 時間 1 分 の遅延" in text
    assert "**原因:** out が違う **修正:** a と b を足す" in text
    assert "- **不正解** (0 / 3)" in text and "**正解**" in text
    assert "[問題 1: GPU は何のために作られているか](#test_answer_throughput)" in text
    ask = next(c for c in nb.cells if c.source.startswith('quiz.ask("01_gpu_vs_cpu.blocks"'))
    assert "Blocks for" not in ask.outputs[0].data["text/plain"]  # the question in Japanese
    for english in ("Summary", "Cause", "Fix", "Late", "**right**", "points", "Handed in"):
        assert english not in text, english
    # the process's language is as it was: an English notebook after it is in English
    en = _graded(nbformat.read(MASTER, as_version=4), _verdicts(nbformat.read(MASTER, 4)))
    fv.annotate(en, _verdicts(en))
    assert en.cells[0].source.startswith("## Summary: ")


def test_the_grade_tables_reason_is_the_checkers_diagnosis():
    v = {"test_vector_add": {"status": "fail", "message": "CheckFailure: out differs: e.g. 3 "
                             "vs. 4. Add them.", "diagnosis": "out differs: e.g. 3 vs. 4",
                             "hint": "Add them."}}
    assert fv.first_cause(v) == "test_vector_add: out differs: e.g. 3 vs. 4"


@pytest.mark.parametrize("edition", ["en", "ja"])
def test_a_wrong_questions_cause_and_fix_are_whole_sentences(edition, master):
    """Issue 39: the summary cut a question's message at the colon of its title ("Fix:
    Blocks for 1,000 elements.";「answer_blocks = "b" は 問題 2.」). The cause is one whole
    sentence of the catalogue, the fix the key's why, in the notebook's language."""
    from cudacourse.course import quiz
    from cudacourse.grader.lang import language

    nb = nbformat.read(JA_MASTER if edition == "ja" else MASTER, as_version=4)
    with language(edition):  # the verdict process speaks the notebook's edition
        header = quiz.get("01_gpu_vs_cpu.blocks").header
        why = "256 スレッドなら 4 ブロック。" if edition == "ja" else "Round up: 4 blocks."
        message = fv.template_in(fv.QUIZ_WRONG, edition).format(
            var="answer_blocks", answer='"b"', header=header) + why
    assert ":" in header  # the title has the colon the old split cut at
    v = _verdicts(nb, test_answer_blocks={"status": "fail", "ename": "AssertionError",
                                          "message": message})
    nb = _graded(nb, v)
    fv.annotate(nb, v)
    line = next(ln for ln in nb.cells[0].source.splitlines() if "test_answer_blocks" in ln)
    if edition == "ja":
        assert '**原因:** answer\\_blocks = "b" は正しい答えではありません。 **修正:** ' \
            "256 スレッドなら 4 ブロック。" in line, line
        assert "は 問題 2." not in line
    else:
        assert '**Cause:** answer\\_blocks = "b" is not the right answer. **Fix:** ' \
            "Round up: 4 blocks." in line, line
        assert "**Fix:** Blocks for" not in line
    # the grade table's reason (the grader's language): the same whole sentence
    assert fv.first_cause(v) == 'test_answer_blocks: answer_blocks = "b" is not the right answer.'



def test_question_parts_recovers_the_why_of_generated_messages():
    """Seeded generated answers, titles (colons and commas included) and whys, in both
    editions: the cause is the one sentence, the fix exactly the why."""
    import random

    from cudacourse.grader.lang import language

    rng = random.Random(39)
    pieces = ["Blocks", "for", "1,000", "elements:", "a", "warp", "問題", "ブロック", "2:",
              "(c)", "threads;", "x.y"]
    for _ in range(200):
        var = rng.choice(["answer_blocks", "answer_x", "a1"])
        answer = rng.choice(['"b"', "'c'", "3", "1024", '"d"'])
        header = f"Question {rng.randint(1, 9)}: " + " ".join(
            rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        why = " ".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))).strip()
        for edition in ("en", "ja"):
            message = fv.template_in(fv.QUIZ_WRONG, edition).format(
                var=var, answer=answer, header=header) + why
            plain = ". " not in header  # no full stop of its own: found without knowing it
            with language(edition):
                for known in ([header, None] if plain else [header]):
                    cause, fix = fv.question_parts(message, known)
                    assert cause == fv.T("{var} = {answer} is not the right answer.",
                                         var=var, answer=answer)
                    assert fix == " ".join(why.split()), (edition, message, known, fix)
