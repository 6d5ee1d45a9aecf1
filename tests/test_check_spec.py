"""check/spec.py: an exercise stated as data makes its whole check.

The reference's NumPy functions are derived from its text and captured at once (a learner
cell that rebinds them changes nothing); an integer output starts zeroed for atomics; a
spec with a wrong field is refused naming it; and a histogram exercise, which no hand-written
checker covers, rejects its usual mistakes and passes right kernels written differently.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import cudacourse.check as check
from cudacourse.check import kit as K
from cudacourse.check import spec

BINS = 16


def histogram_ref(x, xp=np):
    """Counts of each value of x in 0..BINS-1."""
    return xp.bincount(x, minlength=BINS)


check_histogram = K.exercise(
    "histogram", params=("x", "hist"),
    inputs={"x": K.Random(0, BINS, "int32")},
    outputs={"hist": K.Output("int32", shape=BINS, fill="zero")},
    reference=histogram_ref, formula="bincount(x)",
    cases=[(1000, 128), (77, 32)], seed=5,
    alternatives={"(bincount(x) > 0)": lambda x: (np.bincount(x, minlength=BINS) > 0)
                  .astype(np.int32)},
    observe=(), causes={"wrong_formula": K.CAUSES["wrong_formula"]},  # a known one, same words
    points=2)


@cuda.jit
def atomic_histogram(x, hist):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(hist, x[i], 1)


@cuda.jit
def grid_stride_histogram(x, hist):
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(hist, x[i], 1)


@cuda.jit
def marks_presence(x, hist):
    i = cuda.grid(1)
    if i < x.size:
        hist[x[i]] = 1


@cuda.jit
def unguarded_histogram(x, hist):
    i = cuda.grid(1)
    cuda.atomic.add(hist, x[i], 1)


def test_the_protected_functions_are_what_the_reference_uses():
    assert spec.protected_names(histogram_ref) == {"bincount"}
    from cudacourse.kernels.stencil import diffuse_ref, heat_step_ref

    # diffuse_ref calls heat_step_ref with xp: its functions count too
    assert spec.protected_names(heat_step_ref)
    assert spec.protected_names(diffuse_ref) >= spec.protected_names(heat_step_ref)


def test_a_reference_is_immune_to_a_rebound_numpy(monkeypatch):
    ref = spec.trusted(histogram_ref)
    x = np.array([1, 1, 3], dtype=np.int32)
    monkeypatch.setattr(np, "bincount", lambda *a, **k: np.zeros(BINS, np.int64))
    assert ref(x).tolist()[:4] == [0, 2, 0, 1]


def test_right_histograms_pass_with_the_cases_they_ran():
    for kernel in (atomic_histogram, grid_stride_histogram):
        line = check_histogram(kernel)
        assert line.startswith("histogram passes: 2 sizes (1000, 77), 2 block sizes"), line
    assert check_histogram.exercise.points == 2 and check_histogram.exercise.technique == ()


@pytest.mark.parametrize("kernel, cause, phrase", [
    (marks_presence, "wrong_formula", "(bincount(x) > 0)"),
    (unguarded_histogram, "out_of_bounds_read", "guard"),
], ids=["presence", "unguarded"])
def test_wrong_histograms_are_named(kernel, cause, phrase):
    with pytest.raises(check.CheckFailure) as info:
        check_histogram(kernel)
    assert info.value.cause == cause and phrase in str(info.value), str(info.value)


def test_a_spec_registers_its_cases_where_it_is_made_and_keeps_causes_meaning():
    assert globals()["_histogram_cases"].__module__ == __name__
    with pytest.raises(ValueError, match="already means"):
        K.exercise("bad", params=("x", "out"), inputs={"x": K.Random()},
                   outputs={"out": K.Output()}, reference=histogram_ref, cases=[(10, 32)],
                   causes={"wrong_formula": "something else"})
    with pytest.raises(ValueError, match="lower_snake_case"):
        K.exercise("bad", params=("x", "out"), inputs={"x": K.Random()},
                   outputs={"out": K.Output()}, reference=histogram_ref, cases=[(10, 32)],
                   causes={"Bad-Cause": "x"})


def test_an_integer_output_starts_zeroed_or_poisoned():
    zero = K.output(5, "hist", dtype=np.int32, fill="zero")
    assert zero.result().tolist() == [0] * 5
    poisoned = K.output(5, "hist", dtype=np.int32)
    assert poisoned.result().tolist() == [-999999] * 5
    with pytest.raises(ValueError, match="fill must be"):
        K.output(5, "hist", fill="ones")


def test_a_spec_naming_a_parameter_twice_or_an_unknown_technique_is_refused():
    with pytest.raises(ValueError, match="params"):
        K.exercise("bad", params=("x",), inputs={"x": K.Random()},
                   outputs={"out": K.Output()}, reference=histogram_ref, cases=[(10, 32)])
    with pytest.raises(ValueError, match="observe"):
        K.exercise("bad", params=("x", "out"), inputs={"x": K.Random()},
                   outputs={"out": K.Output()}, reference=histogram_ref, cases=[(10, 32)],
                   observe=("telepathy",))


def test_the_kit_serves_any_numpy_function_as_captured(monkeypatch):
    """K.bincount (no list names it) is NumPy's, taken when the kit was imported."""
    real = np.bincount
    monkeypatch.setattr(np, "bincount", lambda *a, **k: "rebound")
    assert K.bincount is real and K.cumsum is np.cumsum
    with pytest.raises(AttributeError, match="no 'nonesuch'"):
        K.nonesuch


def twice_ref(a, xp=np):
    return xp.multiply(a, 2.0)


check_twice_tile = K.exercise(
    "twice_tile", params=("a", "out"),
    inputs={"a": K.Random(dtype="float16", shape=(16, 16))},  # a tensor-core-sized tile
    outputs={"out": K.Output("float32", shape=(16, 16))}, reference=twice_ref,
    formula="2 * a[y, x]", cases=[((16, 16), (16, 16))], spare_blocks=0, observe=(),
    rtol=1e-3, atol=1e-3)


@cuda.jit
def twice_tile(a, out):
    x, y = cuda.grid(2)
    if y < out.shape[0] and x < out.shape[1]:
        out[y, x] = 2.0 * a[y, x]


@cuda.jit
def twice_tile_first_rows(a, out):
    x, y = cuda.grid(2)
    if y < 8 and x < out.shape[1]:
        out[y, x] = 2.0 * a[y, x]


def test_a_float16_tile_in_2d_is_checked_without_overflowing_its_guards():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a float16 guard zone of 3.25e30 would overflow
        assert check_twice_tile(twice_tile).startswith("twice_tile passes: 1 sizes ((16, 16))")
        with pytest.raises(check.CheckFailure) as info:
            check_twice_tile(twice_tile_first_rows)
    assert info.value.cause == "unwritten", str(info.value)
