"""Partial credit of a test cell: the rule on outcomes, the statements as the verdict process
runs them (real checkers, in the simulator, on lesson 1's exercise), and nbgrader's score of
the outputs."""

from __future__ import annotations

import ast
import inspect

import nbformat
import pytest
from nbgrader.utils import determine_grade

from cudacourse.grader import partial, verdict
from cudacourse.grader.partial import Outcome

TEST_CELL = ("cudacourse.check.check_vector_add(vector_add)\n"
             "### BEGIN HIDDEN TESTS\n"
             "cudacourse.check.check_vector_add(vector_add, hidden=cudacourse.check.Cases(\n"
             "    seed=5, sizes=[(1601, 64), (113, 96), (650, 512)]))\n"
             "### END HIDDEN TESTS\n")
CONTEXT = ["import cudacourse\nimport cudacourse.check\nfrom numba import cuda\n"]

RIGHT = '''@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]
'''
SERIAL = '''@cuda.jit
def vector_add(a, b, out):
    if cuda.grid(1) == 0:  # one thread does the whole vector: right sums, no parallelism
        for i in range(out.shape[0]):
            out[i] = a[i] + b[i]
'''
SMALL_ONLY = '''@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0] and i < 1500:  # right for the visible sizes (<= 1000) only
        out[i] = a[i] + b[i]
'''
WRONG = RIGHT.replace("a[i] + b[i]", "a[i] - b[i]")

V, H = "visible", "hidden"


def ok(kind, checker="check_vector_add"):
    return Outcome(kind, checker, True)


def bad(kind, cause, checker="check_vector_add"):
    return Outcome(kind, checker, False, cause)


# --- the rule -------------------------------------------------------------------------------

def test_classify_names_visible_hidden_and_other_statements():
    body = ast.parse(TEST_CELL + "quiz.grade('x', answer_x)\nn = 3\n"
                     "check_x(k, hidden=flag)\n").body
    assert [partial.classify(s) for s in body] == [
        (V, "check_vector_add"), (H, "check_vector_add"), ("other", None), ("other", None),
        ("other", None)]


@pytest.mark.parametrize("outcomes, want", [
    ([ok(V), ok(H)], 1.0),
    ([bad(V, "serial_work"), bad(H, "serial_work")], 2 / 3),  # values right, technique wrong
    ([ok(V), bad(H, "unwritten")], 2 / 3),  # technique seen right on the visible cases
    ([bad(V, "redundant_work"), bad(H, "wrong_values")], 1 / 3),
    ([ok(V), bad(H, "redundant_work")], 2 / 3),
    ([bad(V, "wrong_values"), ok(H)], 0.0),  # visible cases wrong: nothing
    ([bad(V, "missing_barrier", "check_block_sum"), ok(H, "check_block_sum")], 0.0),  # a race
    ([bad(V, "no_tiles", "check_flash_rows"), ok(H, "check_flash_rows")], 0.0),  # before values
    ([bad(V, "serial_work", "check_unknown"), bad(H, "serial_work", "check_unknown")], 0.0),
    ([bad(V, None), bad(H, None)], 0.0),  # no trusted cause
    ([bad(V, "serial_work")], 0.0),  # no hidden partner: all or nothing
    ([Outcome("other", None, False)], 0.0),  # a quiz cell
    ([Outcome("other", None, True)], 1.0),
    ([Outcome("other", None, True), bad(V, "serial_work"), ok(H)], 0.0),
    ([], 0.0),
])
def test_credit_follows_the_three_thirds(outcomes, want):
    assert partial.credit(outcomes) == pytest.approx(want)


def test_every_technique_cause_is_raised_by_its_checker():
    """The table names real checkers and causes they (or the observation helpers) raise."""
    from cudacourse import check
    from cudacourse.check import _observe

    for name, causes in partial.TECHNIQUE.items():
        fn = getattr(check, name)
        text = inspect.getsource(inspect.getmodule(fn)) + inspect.getsource(_observe)
        for cause in causes:
            assert f'"{cause}"' in text, (name, cause)


def test_a_cause_from_learner_code_or_another_exception_is_not_trusted():
    from cudacourse.check._failure import CheckFailure

    class Fake(Exception):
        cause = "serial_work"

    assert partial.trusted_cause(Fake(), CheckFailure) is None
    assert partial.trusted_cause(CheckFailure("x", cause="serial_work"), CheckFailure) == \
        "serial_work"
    code = compile("def f():\n    raise ValueError('learner')\n", "<answer cell 'k'>", "exec")
    ns: dict = {}
    exec(code, ns)  # noqa: S102 - a stand-in for a learner function
    try:
        try:
            ns["f"]()
        except ValueError:
            raise CheckFailure("wrapped", cause="serial_work")
    except CheckFailure as exc:
        assert partial.trusted_cause(exc, CheckFailure) is None  # an answer frame in the chain


# --- the verdict process, on real checks ---------------------------------------------------

def _judge(kernel: str) -> dict:
    return verdict.judge({"grade_id": "test_vector_add", "context": CONTEXT,
                          "answers": [["vector_add", kernel]], "test": TEST_CELL})


def test_a_serial_kernel_keeps_the_value_thirds():
    v = _judge(SERIAL)
    assert v["status"] == "fail" and v["cause"] == "serial_work"
    assert [s["cause"] for s in v["statements"]] == ["serial_work", "serial_work"]
    assert v["credit"] == pytest.approx(2 / 3)


def test_a_kernel_right_on_visible_sizes_only_loses_the_hidden_third():
    v = _judge(SMALL_ONLY)
    assert v["status"] == "fail" and [s["passed"] for s in v["statements"]] == [True, False]
    assert v["credit"] == pytest.approx(2 / 3)


def test_a_wrong_kernel_gets_nothing_and_a_right_one_everything():
    wrong = _judge(WRONG)
    assert wrong["status"] == "fail" and wrong["credit"] == 0.0
    right = _judge(RIGHT)
    assert right["status"] == "pass" and "credit" not in right


def test_a_printed_number_or_a_failed_quiz_earns_no_credit():
    cheat = ("f", "def f():\n    print(2.0)\n    return 3.0\n")
    v = verdict.judge({"grade_id": "q", "context": [], "answers": [cheat],
                       "test": "assert f() == 4\nf()\n"})
    assert v["status"] == "fail" and v["credit"] == 0.0


# --- what nbgrader scores ------------------------------------------------------------------

def _score(outs: list[dict], points: float = 3.0) -> float:
    cell = nbformat.v4.new_code_cell("check_vector_add(vector_add)")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "points": points,
                                 "grade_id": "test_vector_add"}
    cell.outputs = [nbformat.from_dict(o) for o in outs]
    return determine_grade(cell)[0]


def test_nbgrader_scores_the_credit_and_the_learner_still_reads_the_diagnosis():
    from cudacourse.grader.prepare import verdict_outputs

    v = _judge(SERIAL)
    outs = partial.outputs(v, verdict_outputs(v, 10_000), 3.0)
    assert _score(outs) == pytest.approx(2.0)
    text = "".join(o.get("text", "") for o in outs)
    assert "wrote" in text and "partial credit: 2 of 3 points" in text
    assert not any(o["output_type"] == "error" for o in outs)


def test_outputs_stay_all_or_nothing_without_a_credit_in_between():
    from cudacourse.grader.prepare import verdict_outputs

    wrong = _judge(WRONG)
    assert _score(partial.outputs(wrong, verdict_outputs(wrong, 10_000), 3.0)) == 0
    right = {"status": "pass", "output": "vector_add passes"}
    assert _score(partial.outputs(right, verdict_outputs(right, 10_000), 3.0)) == 3.0
    forged = {"status": "fail", "credit": 5.0, "ename": "CheckFailure", "message": "x"}
    assert _score(partial.outputs(forged, verdict_outputs(forged, 10_000), 3.0)) == 0
    assert partial.outputs(wrong, ["kept"], None) == ["kept"]  # no points: untouched
