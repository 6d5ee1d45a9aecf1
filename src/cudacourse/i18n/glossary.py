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
