"""Hidden cases passed in by the master's hidden test cell (issue 19, class 7): check/_cases."""

from __future__ import annotations

import json

import pytest

from cudacourse.check._cases import Cases, resolve, visible_seed, wire

VISIBLE = [(1000, 256, 0), (1, 32, 1)]


def test_visible_cases_and_seed_unless_hidden_cases_are_given():
    assert resolve(False, VISIBLE, 7) == (VISIBLE, 7)
    assert resolve(None, VISIBLE, None, name="check_x") == (VISIBLE, visible_seed("check_x"))
    cases = Cases(seed=123, sizes=[[5, 64, 1], (77, 32, 0)])
    assert resolve(cases, VISIBLE, 7) == ([(5, 64, 1), (77, 32, 0)], 123)


def test_hidden_true_draws_nothing_and_says_where_hidden_cases_come_from():
    with pytest.raises(TypeError, match="chosen by the master's hidden test cell"):
        resolve(True, VISIBLE, None, name="check_vector_add")


def test_cases_cross_json_unchanged():
    cases = Cases(seed=9, sizes=[((27, 35), (8, 8), 1)])
    back = json.loads(json.dumps(wire(cases)))
    assert resolve(back, [((1, 1), (1, 1), 0)], None) == ([((27, 35), (8, 8), 1)], 9)
    assert wire(False) is False


@pytest.mark.parametrize("bad, match", [
    (dict(seed=-1, sizes=[(1, 2, 3)]), "seed must be an int"),
    (dict(seed=True, sizes=[(1, 2, 3)]), "seed must be an int"),
    (dict(seed=1.5, sizes=[(1, 2, 3)]), "seed must be an int"),
    (dict(seed=1, sizes=[]), "sizes must list"),
    (dict(seed=1, sizes=[(1, "2", 3)]), "numbers only"),
    (dict(seed=1, sizes=[(1, float("nan"), 3)]), "numbers only"),
])
def test_malformed_cases_are_refused_clearly(bad, match):
    with pytest.raises((TypeError, ValueError), match=match):
        Cases(**bad)


def test_a_case_of_the_wrong_length_names_the_checker():
    with pytest.raises(ValueError, match="check_saxpy: each hidden case is a tuple of 3"):
        resolve(Cases(1, [(5, 64)]), VISIBLE, None, name="check_saxpy")
    with pytest.raises(TypeError, match="hidden must be a Cases"):
        resolve("big", VISIBLE, None)


def test_cases_of_one_number_each():
    assert resolve(Cases(4, [260, 1]), [300, 77], None) == ([260, 1], 4)
    with pytest.raises(ValueError, match="check_block_sum: each hidden case is one number"):
        resolve(Cases(4, [(260, 1)]), [300, 77], None, name="check_block_sum")


def test_visible_inputs_are_fixed_per_check_so_the_same_answer_gets_the_same_numbers():
    """Issue 45, stable evidence: two runs of a visible check draw the same inputs; two
    checks draw different ones; a given seed and the hidden cases keep theirs."""
    assert resolve(None, VISIBLE, None, name="check_a")[1] == \
        resolve(False, VISIBLE, None, name="check_a")[1]
    assert visible_seed("check_a") != visible_seed("check_b")
    assert resolve(None, VISIBLE, 5, name="check_a")[1] == 5
    assert resolve(Cases(seed=3, sizes=[(1, 2, 3)]), VISIBLE, None, name="check_a")[1] == 3


def test_a_wrong_kernel_gets_the_same_diagnosis_on_two_runs():
    from numba import cuda

    from cudacourse.check import CheckFailure, check_vector_add

    @cuda.jit
    def minus(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] - b[i] + 0.5

    seen = []
    for _ in range(2):
        with pytest.raises(CheckFailure) as info:
            check_vector_add(minus)
        seen.append(str(info.value))
    assert seen[0] == seen[1]
