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


def language(lang: str) -> contextlib.AbstractContextManager[str]:
    """Messages in ``lang`` inside the block; the process's language as it was after."""
    return i18n.speaking(lang)


__all__ = ["T", "english", "language", "of_notebook"]
