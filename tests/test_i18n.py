"""cudacourse.i18n: the language chosen, messages through the catalogue, English fallback."""

from __future__ import annotations

import pytest

from cudacourse import i18n
from cudacourse.course import quiz
from cudacourse.course.authoring import ROOT
from cudacourse.check import _failure as F


@pytest.fixture
def lang():
    """Set the language for one test; restore the process's own after it (i18n.use also
    writes CUDACOURSE_LANG, which monkeypatch would not undo for a variable it never set)."""
    import os

    before = os.environ.get("CUDACOURSE_LANG")

    def set_(value: str | None) -> None:
        i18n._chosen = None
        if value is None:
            os.environ.pop("CUDACOURSE_LANG", None)
        else:
            os.environ["CUDACOURSE_LANG"] = value
    yield set_
    i18n._chosen = None
    if before is None:
        os.environ.pop("CUDACOURSE_LANG", None)
    else:
        os.environ["CUDACOURSE_LANG"] = before


def test_english_is_the_default(lang):
    lang(None)
    assert i18n.language() == "en"
    assert i18n.gettext("Right. ") == "Right. "


@pytest.mark.parametrize("value", ["ja", "JA", "ja_JP.UTF-8", "ja-JP"])
def test_cudacourse_lang_chooses_japanese(lang, value):
    lang(value)
    assert i18n.language() == "ja"
    assert i18n.gettext("Right. ") == "正解。"


def test_an_unknown_language_is_named_and_falls_back(lang):
    with pytest.raises(ValueError, match="unknown course language 'fr'.*en, ja"):
        i18n.normalize("fr")
    lang("fr")
    assert i18n.language() == "en"  # a notebook never breaks on a stray value


def test_a_message_without_translation_stays_english(lang):
    lang("ja")
    assert i18n.gettext("a message nobody translated") == "a message nobody translated"


def test_use_sets_the_language_for_child_processes(lang):
    lang(None)
    assert i18n.use("ja") == "ja"
    import os
    assert os.environ["CUDACOURSE_LANG"] == "ja"
    assert i18n.language() == "ja"


def test_check_failure_renders_in_japanese_with_the_cause_first(lang):
    lang("ja")
    e = F.CheckFailure("out[3] was never written", cause="unwritten", hint="guard the index",
                       context={"n": 5})
    assert str(e).startswith("[一部の出力が書き込まれていない] out[3] was never written")
    assert "直し方: Guard the index" in e.wrapped()
    assert "ケース: n=5" in e.wrapped()
    # the fields stay English: causes and messages are data for tests and checkers
    assert e.message == "out[3] was never written" and e.cause == "unwritten"
    lang(None)
    assert str(F.CheckFailure("x", cause="unwritten")) == "x"


def test_a_cause_the_catalogue_lacks_adds_no_header(lang):
    lang("ja")
    assert str(F.CheckFailure("odd", cause="some_new_cause")) == "odd"


def test_pass_line_in_japanese(lang):
    lang("ja")
    assert F.passes("vector_add", "3 sizes") == "vector_add は合格: 3 sizes。採点では隠しケース (別のサイズとシード) でもう一度確かめます"
    assert F.passes("vector_add", hidden=True) == "vector_add は合格"
    lang(None)
    assert F.passes("vector_add", "3 sizes") == "vector_add passes: 3 sizes; grading reruns it on hidden cases (other sizes and seeds)"


def test_quiz_texts_and_feedback_in_japanese(lang):
    lang("ja")
    q = quiz.get("01_gpu_vs_cpu.blocks")
    assert q.header == "問題 2: 1,000 要素に必要なブロック数"
    # the key token, as the master's cells carry it (its texts English, shown translated)
    key = quiz.token(quiz.keyed("01_gpu_vs_cpu", ROOT)["01_gpu_vs_cpu.blocks"])
    ok, text = quiz.feedback("01_gpu_vs_cpu.blocks", "b", key)
    assert not ok and text.startswith("違います。1000 // 256 = 3 は切り捨てです")
    ok, text = quiz.feedback("01_gpu_vs_cpu.blocks", "C", key)
    assert ok and text.startswith("正解。ceil(1000 / 256) = 4")
    with pytest.raises(AssertionError, match="正しい答えではありません"):
        quiz.grade("01_gpu_vs_cpu.blocks", "a", key=key)


def test_scores_do_not_depend_on_the_language(lang):
    """The same answers are right and wrong in both languages, for every question."""
    verdicts = {}
    for value in (None, "ja"):
        lang(value)
        got = {}
        for lesson in quiz.lessons():
            for qid, q in quiz.keyed(lesson, ROOT).items():
                tries = list(q.choices) if q.kind != "number" else \
                    [v for v, _why in q.wrong] + [0.0]
                got[qid] = [q.is_right(t) for t in tries]
        verdicts[value] = got
    assert verdicts[None] == verdicts["ja"]


def test_a_stale_question_translation_shows_the_english(lang, monkeypatch):
    """A translation of older English never hides a correction of the English."""
    from cudacourse.i18n import translations

    texts = {"q.x.prompt": (translations.english_hash("old English"), "古い訳")}
    assert translations.pick(texts, "q.x.prompt", "old English") == "古い訳"
    assert translations.pick(texts, "q.x.prompt", "corrected English") == "corrected English"
    assert translations.pick(texts, "q.y.prompt", "no entry") == "no entry"
