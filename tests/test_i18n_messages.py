"""The checkers' messages in Japanese: causes, diagnoses, pass lines, and the test that reads
them (tests/japanese_edition.py, run on every mutant of the check catalogues)."""

from __future__ import annotations


import pytest

from cudacourse import i18n
from cudacourse.check import _failure
from cudacourse.check._failure import CAUSES, CheckFailure, passes
from cudacourse.i18n import T
from japanese_edition import japanese, not_japanese, problems


def test_every_cause_the_checkers_use_is_listed():
    """The rule `causes` of `cudacourse lesson check`, over the machinery's modules too."""
    from pathlib import Path

    from cudacourse.course import lessonrules
    from cudacourse.course.authoring import ROOT

    used = set()
    for path in (Path(_failure.__file__).parent).glob("*.py"):
        used |= lessonrules.causes_used(path.read_text())
    assert used - set(lessonrules.known_causes(ROOT)) == set()
    assert set(lessonrules.known_causes(ROOT)) <= set(CAUSES)  # specs registered theirs


def test_every_cause_has_a_japanese_heading():
    with japanese():
        missing = [c for c, text in CAUSES.items()
                   if i18n.gettext(text) == text or not_japanese(i18n.gettext(text))]
    assert missing == []


def test_a_diagnosis_and_its_fix_are_japanese_whole():
    f = CheckFailure(T("wrote past the end of {name} (size {n}) at index {n_plus_after}: "
                       "{hint}", name="out", n=1000, n_plus_after=1000,
                       hint=T("missing bounds guard (if i < n)?")),
                     cause="out_of_bounds_write", hint=T("check how the index is computed"))
    assert str(f).startswith("wrote past the end of out (size 1000)")  # English by default
    with japanese():
        message, hint = f.shown()
        wrapped = f.wrapped()
    assert "out" in message and "1000" in message and "境界チェック" in message
    assert not_japanese(message, {"out"}) == [] and not_japanese(hint) == []
    assert "\n直し方: インデックスの計算方法を確認してください" in wrapped


def test_simulator_words_in_the_learners_language():
    f = CheckFailure(T("{name} raised `{first_line}`{who}{more}.", name="k",
                       first_line="ZeroDivisionError", who=T(" in {thread}", thread="x"),
                       more=""), cause="kernel_raised")
    assert _failure.plain("tid=[1, 0, 0] ctaid=[2, 0, 0]") == "thread (1, 0, 0) of block (2, 0, 0)"
    with japanese():
        assert _failure.plain("tid=[1, 0, 0] ctaid=[2, 0, 0]", translate=True) == \
            "ブロック (2, 0, 0) のスレッド (1, 0, 0)"
        assert not_japanese(f.shown()[0], {"k"}) == []


def test_a_pass_line_is_in_one_language():
    facts = (T("{n_cases} sizes ({cases})", n_cases=3, cases="1000, 257, 1"),
             T("a spare block each"))
    english = passes("vector_add", *facts)
    assert english.startswith("vector_add passes: 3 sizes (1000, 257, 1), a spare block each;")
    with japanese():
        line = passes("vector_add", *facts)
    assert "合格" in line and not_japanese(line, {"vector_add"}) == []


@pytest.mark.parametrize("text", [
    "missing bounds guard (if i < n)?",
    "out[3] は missing bounds guard です",
    "vector_add passes: 3 sizes",
    "img そのもの (nothing mirrored)",
])
def test_the_reader_finds_english(text):
    assert not_japanese(text, {"vector_add"})


@pytest.mark.parametrize("text", [
    "境界チェック（if i < n）がありませんか。",
    "ブロック 7 のスレッド 104 が a[1000] を読みました: `if i < n` でチェックしてください",
    "cuda.grid(1) から始め、cuda.gridsize(1) ずつ進めてください。",
    "チャンク k を kernel[blocks, threads, streams[k % n_streams]] で起動してください",
])
def test_the_reader_passes_japanese(text):
    assert not_japanese(text) == []


def test_the_catalogue_hook_reports_an_english_failure():
    english = CheckFailure("the kernel wrote garbage", cause="wrong_values")
    japanese_one = CheckFailure(T("the result"), cause="wrong_values")
    found = problems([english, japanese_one], [("vector_add", ("3 sizes",), True)])
    assert len(found) == 2
    assert "the kernel wrote garbage" in found[0] and "pass line" in found[1]
