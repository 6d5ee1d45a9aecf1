"""The Japanese plots: labels from the catalogue, drawn with a font that has every glyph."""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from cudacourse import i18n  # noqa: E402
from cudacourse.viz import words as _words  # noqa: E402
from cudacourse.viz.memory import plot_offload  # noqa: E402


@pytest.fixture()
def japanese():
    saved = i18n._chosen
    i18n.use("ja")
    yield
    i18n.use(saved or "en")
    _words.use_font(i18n.language())


def _texts(fig) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_text().strip()]


def test_a_japanese_figure_has_a_glyph_for_every_character(japanese):
    model = {"intensity": [0.1, 1.0, 10.0, 100.0], "cpu": [1.0, 2.0, 3.0, 4.0],
             "gpu": [3.0, 2.0, 1.0, 0.5], "break_even": 2.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)"
        ax = plot_offload(model)
        fig = ax.figure
        fig.canvas.draw()
    texts = _texts(fig)
    labels = [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
    assert all(any("\u3040" <= ch <= "\u9fff" for ch in s) for s in labels), labels
    for t in texts:
        font = font_manager.get_font(font_manager.findfont(t.get_fontproperties(),
                                                           fallback_to_default=False))
        for ch in t.get_text():
            if ch.isspace() or ch == "$":
                continue
            assert font.get_char_index(ord(ch)) != 0, (
                f"{ch!r} of {t.get_text()!r} has no glyph in {font.fname}")
    plt.close(fig)


def test_the_japanese_font_only_for_japanese(japanese):
    _words.T("temperature")
    assert matplotlib.rcParams["font.family"][0] == _words.JAPANESE_FONT
    i18n.use("en")
    assert _words.T("temperature") == "temperature"
    assert _words.JAPANESE_FONT not in matplotlib.rcParams["font.family"]
