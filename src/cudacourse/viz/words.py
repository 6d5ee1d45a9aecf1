"""The plots' words in the course's language, and a font that has their glyphs.

``T("time ({unit})", unit="ms")`` is the label in the language shown now (a plain ``str``:
matplotlib keeps what it is given). When that language is Japanese, the first label also
sets matplotlib's font to IPAexGothic, which the ``matplotlib-fontja`` package ships (the
default DejaVu Sans has no Japanese glyphs: each character would be drawn as an empty box);
back in English the default font returns. The font is set when the language is chosen
(``i18n.use`` calls :func:`use_font`) and when this module is imported: a figure's labels
take the font of the moment the figure is made, before its words are filled in.
"""

from __future__ import annotations

from .. import i18n

JAPANESE_FONT = "IPAexGothic"
_state: dict = {"saved": None}


def T(template: str, /, **values: object) -> str:
    """The label ``template`` filled with ``values``, in the course's language."""
    use_font(i18n.language())
    return i18n.Text(template, **values).shown()


def use_font(lang: str) -> None:
    """matplotlib's font for ``lang``: IPAexGothic for Japanese, the default otherwise."""
    if lang != "ja" and _state["saved"] is None:
        return  # English, and the default font never left: matplotlib need not be loaded
    import matplotlib

    rc = matplotlib.rcParams
    if lang == "ja":
        if _state["saved"] is None:
            saved = list(rc["font.family"])
            import matplotlib_fontja  # noqa: F401 - registers IPAexGothic with matplotlib

            _state["saved"] = saved
        rc["font.family"] = [JAPANESE_FONT, "sans-serif"]  # sans-serif: DejaVu's symbols
    elif _state["saved"] is not None:
        rc["font.family"] = _state["saved"]
        _state["saved"] = None


if use_font not in i18n.LISTENERS:
    i18n.LISTENERS.append(use_font)
use_font(i18n.language())
