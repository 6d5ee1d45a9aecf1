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

import contextlib
import gettext as _gettext
import os
from functools import lru_cache
from pathlib import Path
from typing import Iterator

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


@contextlib.contextmanager
def speaking(lang: str) -> Iterator[str]:
    """Messages in ``lang`` inside the block; the process's language (and
    ``CUDACOURSE_LANG``) as it was after."""
    chosen, env = _chosen, os.environ.get("CUDACOURSE_LANG")
    try:
        yield use(lang)
    finally:
        _restore(chosen, env)


def _restore(chosen: str | None, env: str | None) -> None:
    global _chosen
    _chosen = chosen
    if env is None:
        os.environ.pop("CUDACOURSE_LANG", None)
    else:
        os.environ["CUDACOURSE_LANG"] = env


def use(lang: str) -> str:
    """Show messages in ``lang`` from now on, in this process and the processes it starts
    (the checkers' replay children inherit ``CUDACOURSE_LANG``). Returns the language."""
    global _chosen
    _chosen = normalize(lang)
    os.environ["CUDACOURSE_LANG"] = _chosen
    for listener in LISTENERS:  # e.g. the plots' font (viz.words), set before a figure is made
        listener(_chosen)
    return _chosen


LISTENERS: list = []  # called with the language by use(); a module adds itself on import


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


class Text(str):
    """A message with named placeholders, translated when it is shown, not when it is made.

    ``T("wrote past the end of {name} (size {n})", name="c", n=1000)`` is, as a ``str``, the
    English with its values filled in, so it prints, compares and logs as before; it also
    keeps its template and values, so :meth:`shown` looks the *template* up in the catalogue
    (``cudacourse.po`` holds ``"wrote past the end of {name} (size {n})"`` once, extracted by
    Babel through the keyword ``T``) and fills the translation with the same values. Values
    that are themselves :class:`Text` are shown in the same language. A value is never part
    of the lookup, so one entry serves every case.
    """

    template: str
    values: dict

    def __new__(cls, template: str, /, **values: object) -> "Text":
        self = super().__new__(cls, _fill(template, values, None))
        self.template = template
        self.values = values
        return self

    def shown(self) -> str:
        """The message in the current language (the English where the catalogue has none)."""
        return _fill(self.template, self.values, gettext)

    def to_dict(self) -> dict:
        """Plain data (JSON): the template and the values, nested texts as dicts too."""
        return {"template": self.template,
                "values": {k: (v.to_dict() if isinstance(v, Text) else _plain_value(v))
                           for k, v in self.values.items()}}

    @classmethod
    def from_dict(cls, d: object) -> "Text | str":
        """The inverse of :meth:`to_dict`; a plain string stays a string."""
        if not isinstance(d, dict) or "template" not in d:
            return d if isinstance(d, str) else str(d)
        values = {str(k): (cls.from_dict(v) if isinstance(v, dict) else v)
                  for k, v in dict(d.get("values") or {}).items()}
        try:
            return cls(str(d["template"]), **values)
        except (KeyError, IndexError, ValueError):
            return str(d["template"])

    def __reduce__(self):  # pickles with its template (multiprocessing, pytest-xdist)
        return (_rebuild_text, (self.to_dict(),))


def _rebuild_text(d: dict) -> "Text | str":
    return Text.from_dict(d)


def _plain_value(v: object) -> object:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    return str(v)


def _fill(template: str, values: dict, translate) -> str:
    """``template`` through ``translate`` (gettext; None for the English), with ``values``
    filled in; nested texts take the same road."""
    filled = {k: ((v.shown() if translate else str(v)) if isinstance(v, Text) else v)
              for k, v in values.items()}
    text = translate(template) if (translate and template) else template
    try:
        return text.format(**filled)
    except (KeyError, IndexError, ValueError):  # a translation that lost a placeholder
        return template.format(**filled)


def shown(message: object) -> str:
    """Any message in the current language: a :class:`Text` by its template, a plain string
    by the whole string (older entries), anything else as ``str``."""
    if isinstance(message, Text):
        return message.shown()
    return gettext(str(message)) if message else ""


T = Text


__all__ = ["LANGUAGES", "DEFAULT", "language", "use", "normalize", "gettext", "ngettext",
           "_", "N_", "T", "Text", "shown", "speaking"]
