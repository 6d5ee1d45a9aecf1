"""The grader's words in a notebook's language: feedback and formgrader's summary.

A Japanese notebook (``metadata.cudacourse.lang == "ja"``) gets its summary, its late line
and its reworded test outputs in Japanese: every such string is a catalogue template
(``T("{k} of {n} graded cells to look at", k=..., n=...)``, extracted by Babel like the
package's other ``T`` calls), shown through :mod:`cudacourse.i18n` while :func:`language`
holds the notebook's language. Here ``T`` returns the shown text at once (a plain ``str``):
it is called inside :func:`language`, where the language is the notebook's.

The grader is an ordinary part of the package (nbgrader's config imports
``cudacourse.grader``): it uses :mod:`cudacourse.i18n` directly.
"""

from __future__ import annotations

import contextlib
import functools
import gettext
from typing import Any

from .. import i18n


def T(template: str, /, **values: Any) -> str:
    """``template`` in the current language with ``values`` filled in."""
    return i18n.T(template, **values).shown()


def english(template: str, /, **values: Any) -> str:
    """``template`` filled in, in English (the default where no language applies)."""
    return template.format(**values)


def of_notebook(nb: Any) -> str:
    """The notebook's language (``metadata.cudacourse.lang``); English when unset or unknown."""
    lang = ((nb.get("metadata") or {}).get("cudacourse") or {}).get("lang")
    try:
        return i18n.normalize(str(lang) if lang else None)
    except ValueError:
        return "en"


@functools.lru_cache(maxsize=None)
def _catalogue(lang: str) -> gettext.NullTranslations:
    if lang == i18n.DEFAULT:
        return gettext.NullTranslations()
    return gettext.translation(i18n.DOMAIN, localedir=str(i18n.LOCALE_DIR), languages=[lang],
                               fallback=True)


def shown_in(message: Any, lang: str) -> str:
    """``message`` (a catalogue :class:`cudacourse.i18n.Text`) in ``lang``, without changing
    the process's language: grading threads of one process grade notebooks of both editions
    at once. A plain string stays as it is."""
    if not isinstance(message, i18n.Text):
        return str(message)
    values = {k: shown_in(v, lang) if isinstance(v, i18n.Text) else v
              for k, v in message.values.items()}
    try:
        return _catalogue(lang).gettext(message.template).format(**values)
    except (KeyError, IndexError, ValueError):  # a translation that lost a placeholder
        return message.template.format(**values)


def template_in(template: str, lang: str) -> str:
    """The catalogue's ``template`` in ``lang``, placeholders unfilled (English without one)."""
    return _catalogue(lang).gettext(template) if template else template


def language(lang: str) -> contextlib.AbstractContextManager[str]:
    """Messages in ``lang`` inside the block; the process's language as it was after."""
    return i18n.speaking(lang)


__all__ = ["T", "english", "language", "of_notebook", "shown_in", "template_in"]
