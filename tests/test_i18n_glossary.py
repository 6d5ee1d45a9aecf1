"""Every translation follows the glossary (cudacourse.i18n.glossary)."""

from __future__ import annotations

import pytest

from cudacourse.course import authoring
from cudacourse.i18n import catalog, glossary, translations

ROOT = authoring.ROOT
# the package's files and the instructor-side ones of the answer keys (explanations, whys)
FILES = sorted(translations.po_path("x", "ja", ROOT).parent.glob("*.po")) + sorted(
    translations.key_po_path("x", "ja", ROOT).parent.glob("*.po"))


def test_a_required_term_missing_is_named():
    assert glossary.problems("Each thread adds one element.", "各要素を足します。", "ja") == [
        "the English says 'thread', the translation lacks 'スレッド'"]


def test_a_spelling_to_avoid_is_named():
    got = glossary.problems("Shared memory is fast.", "シェアードメモリは速い。", "ja")
    assert "uses 'シェアードメモリ'; the glossary's term for 'shared memory' is '共有メモリ'" in got
    assert "the English says 'shared memory', the translation lacks '共有メモリ'" in got


def test_code_asks_for_no_term():
    assert glossary.problems("Use `threadIdx.x` and `threads`.", "`threadIdx.x` と `threads` を使います。",
                             "ja") == []


def test_code_outside_backticks_asks_for_no_term():
    """A dotted name or call, or an indented code line, is code although not in backticks."""
    assert glossary.problems("Add with cuda.atomic.add(hist, b, 1).",
                             "cuda.atomic.add(hist, b, 1) で足します。", "ja") == []
    assert glossary.problems("Add:\n\n    cuda.atomic.add(hist, b, 1)\n",
                             "足します:\n\n    cuda.atomic.add(hist, b, 1)\n", "ja") == []
    assert glossary.problems("An atomic add.", "足します。", "ja") == [
        "the English says 'atomic', the translation lacks 'アトミック'"]


def test_plurals_and_hyphens_match():
    assert glossary.problems("Two warps are memory-bound.", "2 つのワープはメモリ律速です。", "ja") == []
    assert glossary.problems("Bank conflicts hurt.", "痛い。", "ja") == [
        "the English says 'bank conflict', the translation lacks 'バンクコンフリクト'"]


def test_the_glossary_has_the_issues_terms():
    ja = {t.en: t.ja for t in glossary.terms("ja")}
    assert {ja[k] for k in ("thread", "block", "warp", "shared memory", "global memory",
                            "kernel", "occupancy")} == {
        "スレッド", "ブロック", "ワープ", "共有メモリ", "グローバルメモリ", "カーネル", "占有率"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_lesson_translations_follow_the_glossary(path):
    bad = {key: glossary.problems(m.id, m.string, "ja")
           for key, m in translations.entries(translations.read(path)).items() if m.string}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, bad


def test_message_catalogue_follows_the_glossary():
    bad = {}
    for m in catalog.read(catalog.po_path(ROOT, "ja")):
        if m.id and isinstance(m.id, str) and m.string:
            p = glossary.problems(m.id, m.string, "ja")
            if p:
                bad[m.id] = p
    assert not bad, bad


def test_figure_placeholders_ask_for_no_term():
    assert glossary.problems("{{const.occupancy.H200_SM.registers:,}} registers",
                             "{{const.occupancy.H200_SM.registers:,}} 個のレジスタ", "ja") == []
