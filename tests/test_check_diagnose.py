"""The named families of check/_diagnose.py, tried by _engine.compare before its fallback:
each footprint is named with its phrase and cause, right outputs (also within tolerance)
pass, and the fallback says what it ruled out. Pure NumPy: no kernel runs here."""

from __future__ import annotations

import numpy as np
import pytest

from cudacourse.check import _engine as E
from cudacourse.check._engine import CheckFailure


def _field(ny=9, nx=21, seed=0):
    return np.random.default_rng(seed).uniform(1.0, 4.0, (ny, nx))


def diagnosis(got, want, **kw):
    with pytest.raises(CheckFailure) as info:
        E.compare(got, want, name="out", **kw)
    return info.value


def test_right_outputs_pass_also_within_tolerance():
    want = _field()
    E.compare(want.copy(), want, name="out")
    E.compare(want * (1 + 1e-7), want, name="out", tile=(8, 16), factors={"alpha": 0.2})


@pytest.mark.parametrize("axis, sign, letter", [(1, 1, "x + 1"), (1, -1, "x - 1"),
                                                (0, 1, "y + 1"), (0, -1, "y - 1")])
def test_off_by_one_on_each_axis(axis, sign, letter):
    want = _field()
    got = np.roll(want, -sign, axis=axis)  # got[y, x] = want at one step along the axis
    exc = diagnosis(got, want)
    assert exc.cause == "off_by_one" and f"expected at {letter}" in str(exc), str(exc)
    assert ("columns" if axis == 1 else "rows") in str(exc)


def test_swapped_axes_square_and_layout():
    sq = _field(12, 12)
    assert diagnosis(sq.T.copy(), sq).cause == "swapped_axes"
    wide = _field(6, 10)
    exc = diagnosis(wide.T.copy().reshape(6, 10), wide)
    assert exc.cause == "swapped_axes" and "rows and columns swapped" in str(exc)
    got = np.zeros_like(wide)
    got[:, :6] = wide[:, :6].T  # out[x, y] stored where both indices fit
    assert diagnosis(got, wide).cause == "swapped_axes"


@pytest.mark.parametrize("k, phrase", [(2.0, "a factor applied twice"),
                                       (0.5, "a factor of 2 missing"),
                                       (-1.0, "the sign is flipped"),
                                       (3.7, "applied twice, or missing")])
def test_constant_factor(k, phrase):
    want = _field()
    exc = diagnosis(want * k, want)
    assert exc.cause == "wrong_scale" and phrase in str(exc), str(exc)


def test_named_factor_twice_or_missing():
    want = _field(1, 50)[0]
    exc = diagnosis(want * 0.3, want, factors={"alpha": 0.3})
    assert "alpha is applied once more than it should be" in str(exc), str(exc)
    exc = diagnosis(want / 0.3, want, factors={"alpha": 0.3})
    assert "alpha is missing" in str(exc), str(exc)


def test_computed_nan_names_the_first_element_and_its_inputs():
    m = np.array([-np.inf, 1.0, 2.0, 0.5])
    want = np.array([1.0, 2.0, 3.0, 4.0])
    got = np.array([np.nan, 2.0, 3.5, np.nan])
    exc = diagnosis(got, want, computed=True, inputs={"m": m})
    assert exc.cause == "nonfinite", str(exc)
    assert "holds NaN where the reference is finite, first at out[0], where m = -inf" in str(exc)
    assert "never written" not in str(exc)
    # without computed=True a NaN is an element never written (a kernel's poisoned output)
    assert diagnosis(got, want).cause == "unwritten"


def test_inf_is_named_with_its_first_element():
    want = _field(1, 30)[0]
    got = want.copy()
    got[7] = np.inf
    exc = diagnosis(got, want)
    assert exc.cause == "nonfinite" and "out[7]" in str(exc), str(exc)


def test_guard_on_the_wrong_axis():
    want = _field(9, 21)
    got = want.copy()
    got[:, 9:] = np.nan  # x guarded with the number of rows
    exc = diagnosis(got, want)
    assert exc.cause == "guard_wrong_axis" and "columns 9 to 20" in str(exc), str(exc)
    tall = _field(21, 9)
    got = tall.copy()
    got[9:] = np.nan
    assert "rows 9 to 20" in str(diagnosis(got, tall))


@pytest.mark.parametrize("where, phrase", [
    ((slice(None), -1), "all in the last column"),
    ((0, slice(None)), "all in the first row"),
    ((slice(None), 0), "all in the first column"),
])
def test_fallback_says_where_the_wrong_cells_are(where, phrase):
    want = _field(17, 33)
    got = want.copy()
    got[where] += np.random.default_rng(1).uniform(0.5, 1.0, got[where].shape)
    exc = diagnosis(got, want, tile=(8, 16))
    assert exc.cause == "wrong_values" and phrase in str(exc), str(exc)
    assert "check the arithmetic (ruled out:" in str(exc)


def test_fallback_names_tile_regions():
    want = _field(16, 32)
    y, x = np.mgrid[0:16, 0:32]
    corners = ((y % 8 == 0) | (y % 8 == 7)) & ((x % 16 == 0) | (x % 16 == 15))
    centre = ~(((y % 8 == 0) | (y % 8 == 7)) | ((x % 16 == 0) | (x % 16 == 15)))
    for mask, phrase in ((corners, "at the corners of the 8 x 16 tiles"),
                         (centre, "inside the tiles (the centre)")):
        got = np.where(mask, want + 1.5 + np.sin(x + y), want)
        assert phrase in str(diagnosis(got, want, tile=(8, 16)))


def test_fallback_lists_the_families_it_ruled_out():
    want = _field()
    got = want + np.random.default_rng(2).uniform(0.5, 1.0, want.shape)
    text = str(diagnosis(got, want, alternatives={"x * 2": want * 2}))
    for family in ("elements never written", "NaN or inf", "off by one (on each axis)",
                   "swapped axes", "a constant factor", "a formula the checker knows"):
        assert family in text, (family, text)
    one_d = str(diagnosis(got[0], want[0]))
    assert "swapped axes" not in one_d and "a formula the checker knows" not in one_d


def test_diagnoses_keep_their_template_for_translation():
    want = _field()
    exc = diagnosis(want * 2, want, context={"n": 3})
    assert exc.text_message is not None and "{k}" in exc.text_message.template
    assert exc.context["n"] == 3
