"""check/_variants.py: the one change of a small reference computation that reproduces a
wrong result is found by its statement, and nothing is found for the right one or for a
result no single change gives (pure NumPy: no kernel runs)."""

from __future__ import annotations

import numpy as np
import pytest

from cudacourse.check import _variants

PROGRAM = """m_new = maximum(m, s)
p = exp(s - m_new)
return (m_new, p)
"""
FUNCS = {"maximum": np.maximum, "exp": np.exp}


@pytest.fixture
def inputs():
    gen = np.random.default_rng(3)
    return {"m": gen.uniform(-2, 2, 50), "s": gen.uniform(-2, 2, 50)}


def test_the_reference_itself_matches_nothing(inputs):
    m_new = np.maximum(inputs["m"], inputs["s"])
    assert _variants.match(PROGRAM, inputs, (m_new, np.exp(inputs["s"] - m_new)), FUNCS) is None


@pytest.mark.parametrize("wrong, statement, part", [
    (lambda m, s: (np.maximum(m, s), np.exp(m - np.maximum(m, s))), "p = exp(m - m_new)", "m"),
    (lambda m, s: (np.maximum(m, s), np.exp(s + np.maximum(m, s))), "p = exp(s + m_new)",
     "s + m_new"),
    (lambda m, s: (np.maximum(m, s), np.exp(np.maximum(m, s) - s)), "p = exp(m_new - s)",
     "m_new - s"),
])
def test_one_change_is_named_by_its_statement(inputs, wrong, statement, part):
    found = _variants.match(PROGRAM, inputs, wrong(inputs["m"], inputs["s"]), FUNCS)
    assert found is not None and found.wrong == statement and found.wrong_part == part
    assert found.right == "p = exp(s - m_new)" and not found.in_index


def test_two_changes_are_not_named(inputs):
    m, s = inputs["m"], inputs["s"]
    assert _variants.match(PROGRAM, inputs, (np.minimum(m, s), np.exp(m + s)), FUNCS) is None


def test_an_index_one_off_reads_as_the_learner_writes_it():
    a = np.arange(40.0).reshape(8, 5)
    rows = np.arange(4)
    found = _variants.match("x = a[r + 3, 1]\nreturn (x,)", {"a": a, "r": rows},
                            (a[rows + 2, 1],), {})
    assert found.wrong_part == "a[r + 2, 1]" and found.in_index


def test_a_loop_carries_its_state_and_skips_inactive_steps():
    xs = [np.full(3, float(k)) for k in range(5)]
    steps = [({"x": x}, np.array([True, True, k < 3])) for k, x in enumerate(xs)]
    right = (np.array([10.0, 10.0, 3.0]),)  # row 2 takes the first three steps only
    assert _variants.match_loop("total = total + x\n", "return (total,)",
                                {"total": np.zeros(3)}, steps, {}, right, {}) is None
    found = _variants.match_loop("total = total + x\n", "return (total,)",
                                 {"total": np.zeros(3)}, steps, {}, (-right[0],), {})
    assert found is not None and found.wrong == "total = total - x"
