"""A lesson source read into cells: kinds, attributes and line numbers, by jupytext.

``lessons/NN_topic.py`` (percent format) gives one :class:`Cell` per ``# %%`` marker (the
markers are listed in ``authoring``). Below ``authoring``, which builds masters from the
cells, and ``i18n.translations``, which keys each markdown cell for its translation, so
that neither imports the other for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_KINDS = {None, "markdown", "readonly", "solution", "tests"}
_TITLE = re.compile(r"^\[(?P<kind>[\w-]+)\]$")
# Keys jupytext adds to a cell's metadata for its own round trip, not lesson attributes.
_JUPYTEXT_KEYS = {"title", "lines_to_next_cell", "incorrectly_encoded_metadata",
                  "cell_marker", "region_name"}


class LessonSyntaxError(ValueError):
    pass


@dataclass
class Cell:
    kind: str | None
    attrs: dict[str, str]
    source: str
    lineno: int


def _attrs(metadata: dict[str, Any]) -> dict[str, str]:
    """``key=value`` words after the kind: jupytext parses the JSON-like ones (points=3)
    itself and keeps the rest (id=setup) as one string."""
    attrs = {k: str(v) for k, v in metadata.items() if k not in _JUPYTEXT_KEYS}
    for word in metadata.get("incorrectly_encoded_metadata", "").split():
        key, sep, value = word.partition("=")
        if not sep:
            raise LessonSyntaxError(f"cell attribute {word!r} is not key=value")
        attrs[key] = value
    return attrs


def parse(text: str, name: str = "<lesson>") -> list[Cell]:
    """The cells of a percent-format lesson source, read by jupytext."""
    import jupytext

    lines = text.splitlines()
    marks = [k for k, line in enumerate(lines, 1) if line.startswith("# %%")]
    first_text = next((k for k, line in enumerate(lines, 1) if line.strip()), None)
    if first_text is not None and (not marks or first_text < marks[0]):
        raise LessonSyntaxError(f"{name}:{first_text}: text before the first '# %%' marker")
    nb = jupytext.reads(text, fmt="py:percent")
    if len(nb.cells) != len(marks):
        raise LessonSyntaxError(f"{name}: {len(marks)} '# %%' markers but jupytext read "
                                f"{len(nb.cells)} cells")
    cells = []
    for lineno, c in zip(marks, nb.cells):
        title = c.metadata.get("title", "")
        m = _TITLE.match(title)
        if c.cell_type == "markdown":
            kind = "markdown"
        elif m:
            kind = m.group("kind")
        elif title:
            raise LessonSyntaxError(f"{name}:{lineno}: unknown cell marker text {title!r}")
        else:
            kind = None
        if kind not in _KINDS:
            raise LessonSyntaxError(f"{name}:{lineno}: unknown cell kind [{kind}]")
        cells.append(Cell(kind, _attrs(c.metadata), _strip(c.source), lineno))
    return cells


def _strip(source: str) -> str:
    """The source without its leading and trailing blank lines."""
    lines = source.split("\n")
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return "\n".join(lines)
