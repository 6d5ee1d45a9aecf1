"""The course's language: English by default, Japanese with ``CUDACOURSE_LANG=ja``.

Messages (checker diagnoses and pass lines, quiz feedback, ``cudacourse doctor``) go through
Python's :mod:`gettext` with the catalogue ``cudacourse/locale/<lang>/LC_MESSAGES/cudacourse.mo``
(extracted and compiled with Babel: :mod:`cudacourse.i18n.catalog`). A message the catalogue
does not hold is shown in English. Lesson text and question texts have their own translation
files, one per lesson (:mod:`cudacourse.i18n.translations`).

The language is chosen, in this order, by :func:`use` (the Japanese notebooks' setup cell
calls ``cudacourse.i18n.use("ja")``), then ``CUDACOURSE_LANG`` (``./course lab --lang ja``
sets it for the notebooks' kernels). This module imports nothing else from the package.
"""

from __future__ import annotations

import gettext as _gettext
import os
from functools import lru_cache
from pathlib import Path

LANGUAGES = ("en", "ja")
DEFAULT = "en"
DOMAIN = "cudacourse"
LOCALE_DIR = Path(__file__).resolve().parent.parent / "locale"

_chosen: str | None = None


def normalize(lang: str | None) -> str:
    """``"ja"`` for ``ja``, ``ja_JP.UTF-8`` or ``JA``; the default for an empty value.

    An unknown language is an error naming the ones there are.
    """
    code = (lang or "").strip().lower().replace("-", "_").split(".")[0].split("_")[0]
    if not code:
        return DEFAULT
    if code not in LANGUAGES:
        raise ValueError(f"unknown course language {lang!r}: choose one of "
                         f"{', '.join(LANGUAGES)} (CUDACOURSE_LANG or --lang)")
    return code


def language() -> str:
    """The language messages are shown in now."""
    if _chosen is not None:
        return _chosen
    try:
        return normalize(os.environ.get("CUDACOURSE_LANG"))
    except ValueError:
        return DEFAULT  # a stray value never breaks a notebook; `cudacourse doctor` names it


def use(lang: str) -> str:
    """Show messages in ``lang`` from now on, in this process and the processes it starts
    (the checkers' replay children inherit ``CUDACOURSE_LANG``). Returns the language."""
    global _chosen
    _chosen = normalize(lang)
    os.environ["CUDACOURSE_LANG"] = _chosen
    return _chosen


@lru_cache(maxsize=None)
def _translations(lang: str) -> _gettext.NullTranslations:
    if lang == DEFAULT:
        return _gettext.NullTranslations()
    return _gettext.translation(DOMAIN, localedir=str(LOCALE_DIR), languages=[lang],
                                fallback=True)


def gettext(message: str) -> str:
    """``message`` in the current language; the English itself when there is no translation."""
    if not message:
        return message
    return _translations(language()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    return _translations(language()).ngettext(singular, plural, n)


_ = gettext


def N_(message: str) -> str:
    """Mark ``message`` for extraction without translating it yet (tables built at import)."""
    return message


__all__ = ["LANGUAGES", "DEFAULT", "language", "use", "normalize", "gettext", "ngettext",
           "_", "N_"]
