"""The terminology a translation follows: ``locale/<lang>/glossary.toml``.

:func:`problems` names, for one English text and its translation, every term the glossary
requires that the translation lacks, and every spelling it says to avoid that the
translation uses. Code (``inline`` spans and fenced blocks) and figure placeholders are not prose: it is left out
of the English before matching, so ``threadIdx`` or ``blocks = ...`` ask for nothing.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import LOCALE_DIR

# code and figure placeholders ({{const.occupancy.H200_SM.registers}}) are not prose
# code, figures and a message's named placeholders ({thread}: a value, not an English word)
# and code outside backticks: a dotted name or call (cuda.atomic.add(hist, b, 1)), an
# indented line of a markdown code block
_CODE = re.compile(r"```.*?```|`[^`\n]*`|\{\{.*?\}\}|\{\w+(?:[:!][^{}]*)?\}"
                   r"|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\([^()\n]*\))?|^(?: {4}|\t).*$",
                   re.S | re.M)


@dataclass(frozen=True)
class Term:
    en: str
    ja: str
    avoid: tuple[str, ...]
    required: bool

    @property
    def pattern(self) -> re.Pattern:
        words = [re.escape(w) for w in re.split(r"[\s-]+", self.en)]
        # whole words, any case, an English plural (thread, threads; bank conflicts)
        return re.compile(r"\b" + r"[\s-]+".join(words) + r"(?:s|es)?\b", re.I)


def path(lang: str) -> Path:
    return LOCALE_DIR / lang / "glossary.toml"


@lru_cache(maxsize=None)
def terms(lang: str) -> tuple[Term, ...]:
    data = tomllib.loads(path(lang).read_text())
    out = []
    for t in data.get("term", []):
        if t["ja"] in t.get("avoid", []):
            raise ValueError(f"glossary {lang}: {t['en']!r} avoids its own term {t['ja']!r}")
        out.append(Term(t["en"], t["ja"], tuple(t.get("avoid", [])), bool(t["required"])))
    return tuple(out)


def prose(text: str) -> str:
    return _CODE.sub(" ", text)


def problems(english: str, translation: str, lang: str) -> list[str]:
    out = []
    for t in terms(lang):
        for bad in t.avoid:
            if bad in translation:
                out.append(f"uses {bad!r}; the glossary's term for {t.en!r} is {t.ja!r}")
        if t.required and t.pattern.search(prose(english)) and t.ja not in translation:
            out.append(f"the English says {t.en!r}, the translation lacks {t.ja!r}")
    return out


# --- English left in a Japanese text --------------------------------------------------------

# Names that stay as they are in Japanese text: products, libraries, units, acronyms, the
# course's own identifiers. Everything else written in Latin letters, in a Japanese text, is
# English that was not translated.
KEEP = frozenset("""
numpy cupy pytorch numba triton cublas cudnn cuda nvidia jupyterlab jupyter nbgrader python
flexattention flashattention sdpa nsight ncu pcie nvlink hopper h100 h200 rtx naca bgk lbm
d2q9 float32 float64 bfloat16 bf16 fp32 fp16 int32 ms us ns gb tb mb kb gib mib kib gb/s tb/s
tflop/s gflop/s flop flops mlups ghz re tau nu rho exp max sum log ipaexgothic softmax
""".split())
KEPT_PHRASES = ("Compute Capability",)  # NVIDIA's own term, kept in Japanese documentation
_LATIN_WORD = re.compile(r"(?<![\w/.])[A-Za-z][A-Za-z'’]+(?![\w/])")
_NOT_WORDS = re.compile(r"```.*?```|`[^`\n]*`|\{\{.*?\}\}|\{\w+(?:[:!][^{}]*)?\}|\$[^$]*\$|"
                        r"https?://\S+|\]\([^)]*\)|\b\w+(?:[._]\w+)+\b|\b\w*\d\w*\b|"
                        r"<[^>]+>|^(?: {4}|\t).*$", re.S | re.M)  # last: an indented code line


def _english_word(word: str) -> bool:
    w = word.lower().strip("'’")
    if w in KEEP or len(w) < 2:
        return False
    if word.isupper() or (word[0].isupper() and any(c.isupper() for c in word[1:])):
        return False  # an acronym (GPU, SM, DRAM) or a product's CamelCase name (CuPy)
    return True


def english_left(text: str, *, strict: bool = False) -> list[str]:
    """English words or phrases in a Japanese ``text``: runs of three or more English words
    (a sentence left untranslated), or, with ``strict`` (a short label: a plot's title, a
    legend, a line printed), any English word at all. Code, placeholders, formulas, links,
    identifiers, acronyms and the names of :data:`KEEP` are not English to translate."""
    bare = _NOT_WORDS.sub(" ", text)
    for phrase in KEPT_PHRASES:
        bare = bare.replace(phrase, " ")
    found, run, last_end = [], [], None
    for m in _LATIN_WORD.finditer(bare):
        word = m.group(0)
        if not _english_word(word):
            if len(run) >= 3:
                found.append(" ".join(run))
            run, last_end = [], None
            continue
        gap = bare[last_end:m.start()] if last_end is not None else ""
        if run and not re.fullmatch(r"[\s,;:()'\-]*", gap):  # "a / b / c": names, one by one
            if len(run) >= 3:
                found.append(" ".join(run))
            run = []
        run.append(word)
        last_end = m.end()
        if strict:
            found.append(word)
    if not strict and len(run) >= 3:
        found.append(" ".join(run))
    # an acronym's expansion beside it ("SIMT、single instruction multiple threads") is the
    # way Japanese documentation introduces the acronym, not English left over
    acronyms = set(re.findall(r"\b[A-Z]{2,}\b", text))
    return [f for f in found
            if "".join(w[0] for w in f.split()).upper() not in acronyms]


# --- the house style of the Japanese edition (docs/japanese-style.md) ---------------------------

_JA = r"\u3040-\u30ff\u3400-\u9fff\uff66-\uff9fー"  # kana, kanji, half-width kana
_JA_CHAR = re.compile(f"[{_JA}]")
# Phrasings a native reader stops at, and what the edition writes instead (whole phrases:
# each replacement keeps the sentence around it grammatical).
PHRASINGS: tuple[tuple[str, str], ...] = (
    ("メモリに毒値を仕込んで、見つけられるものは見つけます",
     "メモリにあらかじめ NaN を書き込んでおき、見つけられる誤りはできるだけ見つけます"),
    ("GPU の速さについて何も語りません", "GPU の速さを表しません"),
    ("本物の GPU については何も語りません", "本物の GPU の速さを表すものではありません"),
    ("その数値は GPU について何も語りません", "その数値は GPU の性能を表しません"),
    ("何も語りません", "何も表しません"),
    ("n 個の数を並列に足すのは木です。", "n 個の数を並列に足すには、ツリー状に足し合わせます。"),
    ("木は共有メモリに置かれます", "ツリーは共有メモリ上に作られます"),
    ("共有メモリ上の木", "共有メモリ上のツリー"),
    ("木はブロックごとに", "ツリーはブロックごとに"),
    ("木の最初の", "ツリーの最初の"),
    ("同じ木で", "同じツリーで"),
    ("測定を誠実なものにするものが 2 つあります。", "公正な測定のために、次の 2 点に注意します。"),
    ("百万回の格子更新 (MLUPS) です", "MLUPS (毎秒百万回の格子更新を単位とする値) です"),
    ("<{unit} 単位の数値>", "<数値 (単位: {unit})>"),
    ("がありませんか。", "が抜けていませんか。"),
    ("バッファー", "バッファ"),
    ("(競合なし)", "(バンクコンフリクトなし)"),
)


def _outside_code(text: str, fix) -> str:
    """``fix`` applied to the prose of ``text``, leaving code spans and blocks as they are."""
    parts = re.split(r"(```.*?```|`[^`\n]*`)", text, flags=re.S)
    return "".join(p if i % 2 else fix(p) for i, p in enumerate(parts))


def _brackets(text: str) -> str:
    # full-width parentheses become half-width ones, a space outside them where a word
    # touches them, none before the punctuation that follows
    text = re.sub(r"(?<=[^\s(\[「（])（", " (", text)
    text = text.replace("（", "(")
    text = re.sub(r"）(?=[^\s)\]」、。，．:：,.!?！？）\n])", ") ", text)
    return text.replace("）", ")")


def restyle(english: str, translation: str) -> str:
    """``translation`` in the house style (what tools/ja_style.py writes)."""
    def fix(t: str) -> str:
        for bad, good in PHRASINGS:
            t = t.replace(bad, good)
        t = _brackets(t)
        t = re.sub(r"第\s*(\d+)\s*(回|節)", r"第 \1 \2", t)
        t = re.sub(f"(?<=[{_JA}、。]) +(?=[{_JA}])", "", t)  # no space between Japanese words
        t = re.sub(f"(?<=[{_JA}])\\.(?=\\s|$)", "", t)  # no ASCII period after Japanese
        return t
    if _JA_CHAR.search(translation):  # a Japanese sentence ends with 。
        translation = re.sub(r"(?<![.\s])\.(\s*)$", r"。\1", translation)
    out = _outside_code(translation, fix)
    # a sentence appended to another: Japanese puts no space after 。
    if english.startswith(" ") and re.match(f" [{_JA}]", out):
        out = out[1:]
    # a bracketed aside appended to a word: the space the English has before it
    if english.startswith(" (") and out.startswith("("):
        out = " " + out
    return out


def style_problems(english: str, translation: str) -> list[str]:
    """Where ``translation`` departs from docs/japanese-style.md (each as a phrase)."""
    out = []
    # code stands as one symbol: what touches it is judged, what is inside it is not
    code_free = re.sub(r"```.*?```|`[^`\n]*`|\{\{.*?\}\}|\{\w+(?:[:!][^{}]*)?\}", "\ue000",
                       translation, flags=re.S)
    if "（" in code_free or "）" in code_free:
        out.append("full-width parentheses: the edition uses half-width ( ) (style: brackets)")
    no_code = re.sub(r"```.*?```|`[^`\n]*`", "\ue000", translation, flags=re.S)
    for bad, good in PHRASINGS:
        if bad in no_code:
            out.append(f"writes {bad!r}: the style guide writes {good!r}")
    if re.search(r"第(?! \d+ [回節])\s*\d+\s*[回節]", code_free):
        out.append("第N回 / 第N節 without spaces: write 第 N 回, 第 N 節")
    m = re.search(f"[{_JA}、。] +[{_JA}]", code_free)
    if m:
        out.append(f"a space between Japanese words: {m.group(0)!r}")
    m = re.search(f"[{_JA}]\\.(?=\\s|$)", code_free)
    if m or (_JA_CHAR.search(code_free) and re.search(r"(?<!\.)\.\s*$", code_free)):
        out.append("an ASCII period after Japanese: a Japanese text ends with 。 or nothing")
    if english.startswith(" ") and re.match(f" [{_JA}]", translation):
        out.append("a space opening a sentence that follows another (。 needs none)")
    if english.startswith(" (") and translation.startswith("("):
        out.append("an aside appended to a word needs the space before its '('")
    return out
