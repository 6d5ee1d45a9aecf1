"""Every figure a lesson's prose states comes from its source, rendered, never retyped.

A placeholder ``{{source.path:format}}`` names where the figure lives:

    {{bench.copy.gb_s:,.0f}}          docs/benchmarks.json: a measurement's field
    {{bench.ratio.stencil_vs_copy:.2f}}  its ratios
    {{bench.ratio_min.attention_sdpa_bf16_vs_sdpa_f32:.1f}}  the least (``ratio_max``: the
                                      greatest) of a ratio and its variants (``<name>_*``)
    {{bench.ceiling.copy_gb_s:,.0f}}  its ceilings (copy_gb_s, cublas_sgemm_tflop_s)
    {{bench.date}} {{bench.gpu}}      the run's date (YYYY-MM-DD) and GPU; {{bench.sm_count}}
    {{gpu_run.some.key}}              docs/gpu_run.json (the verified GPU run), a dotted path
    {{const.hardware.H200.sms}}       a constant of the package: cudacourse.<module>.<attr>...
    {{name:.1f}}                      (``show`` only) a value of the run, passed as name=value

A path may end in ``/N`` or ``*N`` to change units (``{{const.occupancy.H200_SM.shared_memory
/1024:.0f}}`` KiB), or in ``/other.key`` for the ratio of two figures
(``{{bench.ceiling.cublas_sgemm_tflop_s / const.hardware.H200.fp32_tflop_s:.2f}}``), applied
left to right; the format is Python's format spec.

Two ways in, one resolver:

- **markdown cells** of ``lessons/NN_topic.py`` hold placeholders; ``./course build`` fills
  them from the files (``fill``), so the master and the learner copy show the numbers, and a
  new benchmark file makes the masters stale until rebuilt;
- **code cells** that state a figure of the run call ``show(template, name=value, ...)``,
  which displays the filled text as Markdown.

A placeholder whose source lacks the figure raises ``MissingFigure`` naming it and the
command that produces it: a lesson never prints a stale or invented number.
"""

from __future__ import annotations

import importlib
import json
import os
import re
from pathlib import Path
from typing import Any

from .. import i18n
from . import lessons

PLACEHOLDER = re.compile(
    r"\{\{\s*(?P<key>[A-Za-z_][\w.\-]*)\s*(?P<scale>(?:\s*[/*]\s*[\w.+\-]+)*)\s*(?::(?P<spec>[^}]*))?\}\}")


class MissingFigure(KeyError):
    """A placeholder names a figure its source does not have."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


def _find(name: str, root: Path | None) -> Path | None:
    here = Path(__file__).resolve()
    bases = [root] if root else [Path.cwd(), *Path.cwd().parents, *here.parents]
    for base in bases:
        place = base / "docs" / name
        if place.is_file():
            return place
    return None


def _load(name: str, root: Path | None) -> dict[str, Any]:
    place = _find(name, root)
    if place is None:
        raise MissingFigure(f"docs/{name} not found (looked above {Path.cwd()}): "
                            + ("run `cudacourse bench` on a GPU" if name == "benchmarks.json"
                               else "run tools/gpu/verify.sh on a GPU"))
    return json.loads(place.read_text())


def _walk(data: Any, parts: list[str], what: str) -> Any:
    for p in parts:
        if isinstance(data, dict) and p in data:
            data = data[p]
        elif isinstance(data, list) and p.isdigit() and int(p) < len(data):
            data = data[int(p)]
        else:
            raise MissingFigure(f"{what} has no {'.'.join(parts)!r} (stopped at {p!r})")
    return data


def _bench(parts: list[str], root: Path | None) -> Any:
    report = _load("benchmarks.json", root)
    if report.get("mode") != "gpu":
        raise MissingFigure("docs/benchmarks.json is not a GPU run: run `cudacourse bench` on a GPU")
    head, rest = parts[0], parts[1:]
    if head == "date" and not rest:
        return str(report["date"])[:10]
    if head in ("ratio", "ratios") and len(rest) == 1:
        value = report.get("ratios", {}).get(rest[0])
    elif head in ("ratio_min", "ratio_max") and len(rest) == 1:  # over every shape measured
        found = [v for k, v in report.get("ratios", {}).items()
                 if (k == rest[0] or k.startswith(rest[0] + "_")) and v is not None]
        value = (min if head == "ratio_min" else max)(found) if found else None
    elif head in ("ceiling", "ceilings") and len(rest) == 1:
        value = report.get("ceilings", {}).get(rest[0])
    elif head in report.get("environment", {}) and not rest:
        value = report["environment"][head]
    elif head in report and head not in ("measurements", "ratios", "ceilings"):
        value = _walk(report[head], rest, "docs/benchmarks.json")
    else:
        value = _walk(report.get("measurements", {}), parts, "docs/benchmarks.json measurements")
    if value is None:
        raise MissingFigure(f"docs/benchmarks.json has no figure for bench.{'.'.join(parts)}: "
                            "run `cudacourse bench` on a GPU")
    return value


def _const(parts: list[str]) -> Any:
    if len(parts) < 2:
        raise MissingFigure(f"const.{'.'.join(parts)}: name a module and a constant")
    try:  # the module by its short name, in whichever layer of the package holds it
        module = lessons.module_of(parts[0])
        obj: Any = importlib.import_module(module)
    except (ImportError, lessons.RegistryError) as exc:
        raise MissingFigure(f"const.{'.'.join(parts)}: no module cudacourse.{parts[0]}") from exc
    for p in parts[1:]:
        if not hasattr(obj, p):
            raise MissingFigure(f"const.{'.'.join(parts)}: {module} has no {p!r}")
        obj = getattr(obj, p)
    return obj


def value(key: str, values: dict[str, Any] | None = None, root: Path | None = None) -> Any:
    """The figure a placeholder key names (``bench.copy.gb_s``, ``const.hardware.H200.sms``)."""
    source, _, path = key.partition(".")
    parts = path.split(".") if path else []
    if values and key in values:
        return values[key]
    if source == "bench" and parts:
        return _bench(parts, root)
    if source == "gpu_run" and parts:
        return _walk(_load("gpu_run.json", root), parts, "docs/gpu_run.json")
    if source == "const":
        return _const(parts)
    raise MissingFigure(f"{{{{{key}}}}}: not a figure of the run (pass {source}=...) and not "
                        "bench.*, gpu_run.* or const.*")


def measured(key: str, spec: str = "") -> str:
    """The figure ``key`` names, formatted with ``spec``, or "not measured yet on a GPU" (in
    the course's language) when its source has none: for figures a later GPU run adds
    (a new kernel's ratio), stated in a code cell without inventing a number."""
    from ..i18n import T  # the catalogue only when a lesson asks: prose itself is stdlib

    try:
        return format(value(key), spec)
    except MissingFigure:
        return T("not measured yet on a GPU").shown()


def _render(match: re.Match, values: dict[str, Any] | None, root: Path | None) -> str:
    v = value(match["key"], values, root)
    for op, operand in re.findall(r"([/*])\s*([\w.+\-]+)", match["scale"] or ""):
        try:
            factor = float(operand)
        except ValueError:  # another figure: a ratio of two sources
            factor = value(operand, values, root)
        v = v / factor if op == "/" else v * factor
    return format(v, match["spec"] or "")


def fill(text: str, values: dict[str, Any] | None = None, root: str | Path | None = None) -> str:
    """``text`` with every ``{{...}}`` placeholder replaced by its figure."""
    base = Path(root) if root is not None else None
    return PLACEHOLDER.sub(lambda m: _render(m, values, base), text)


def shown(template: str, **values: Any) -> str:
    """``template`` in the course's language, filled: a whole sentence (or several) looked
    up in the message catalogue as written, so a translation orders its words freely; the
    English where the catalogue has none. ``cudacourse i18n update`` extracts the templates of
    the lessons' ``prose.show`` calls into the catalogue (``cudacourse.i18n.catalog``)."""
    return fill(i18n.gettext(template), values)


def show(template: str, **values: Any) -> None:
    """Display ``template`` translated and filled (figures of the run passed by name) as
    Markdown. Pass each alternative sentence as its own literal template (``show(A) if ...
    else show(B)``), never a template assembled from pieces: the catalogue holds whole ones."""
    from IPython.display import Markdown, display

    display(Markdown(shown(template, **values)))


# --- the check that prose holds no typed figure ---------------------------------------------

# A number in markdown is a typed figure unless it is one of these: counts up to 16 (four
# bytes, nine lattice velocities), sizes that are powers of two up to 65,536 (a warp's 32
# lanes, 1,024 threads per block, a 4096-long sequence), 100%, the stability limit 0.5 of
# the lattice Boltzmann relaxation time, years up to 2025 (papers), and the coefficients of
# formulas ($...$). Everything else, and any benchmark date, comes through a placeholder.
ALLOWED_DECIMALS = frozenset({"0.5"})
_NUMBER = re.compile(r"(?<![\w.^/\-])(\d[\d,]*(?:\.\d+)?)(x|×|%)?(?!\w)")
_NOT_FIGURES = [
    PLACEHOLDER,  # first: a format spec such as :.2f is not a figure either
    re.compile(r"```.*?```", re.S),  # code blocks and spans: code, not claims
    re.compile(r"`[^`]*`"),
    re.compile(r"\$\$.*?\$\$", re.S),  # formulas: their coefficients are the equation's
    re.compile(r"\$[^$]*\$"),
    re.compile(r"https?://\S+"),
    re.compile(r"\]\([^)]*\)"),  # link targets
    re.compile(r"\b(RTX|GTX) \d+"),  # product names
    re.compile(r"(?m)^\s*#+\s*\d+\."),  # section numbers
    re.compile(r"(?m)^\s*\d+\.\s"),  # numbered lists
    re.compile(r"(?i)\b(lessons?|exercises?|questions?|sections?|§|Q|part|steps?|cells?)"
               r"\s*\d+((,|,? and| or| to)\s*\d+)*"),  # cross-references
]


def _allowed(token: str, unit: str | None) -> bool:
    plain = token.replace(",", "")
    if unit == "%":
        return plain == "100"
    if "." in plain:
        return plain in ALLOWED_DECIMALS
    v = int(plain)
    if unit:  # "3x": a ratio, always measured
        return False
    return v <= 16 or (v & (v - 1) == 0 and v <= 65536) or 1900 <= v <= 2025


# A number with a unit of time or of a rate is a measurement whatever its size ("9 us"):
# never a count or a size that may be typed.
_MEASURED_UNIT = re.compile(r"\s?(us|µs|ms|s|ns|seconds?|microseconds?|milliseconds?|"
                            r"[GTMk]B/s|[GT]FLOP/s|MLUPS|GHz)(?![\w/])")


def typed_figures(markdown: str) -> list[str]:
    """The numbers in ``markdown`` that were typed rather than filled from a source."""
    text = markdown
    for pattern in _NOT_FIGURES:
        text = pattern.sub(" ", text)
    return [m.group(0) for m in _NUMBER.finditer(text)
            if not _allowed(m.group(1), m.group(2))
            or (m.group(2) is None and _MEASURED_UNIT.match(text, m.end()))]


# --- figures in documents (README.md): each one carries its source ---------------------------

# In a Markdown document that is not a lesson (README.md), a figure is written with its
# placeholder beside it, in comments a reader of the rendered page does not see:
#
#     the sum of 256M float32 at <!-- {{bench.ratio.reduce_sum_vs_copy:.2f}} -->0.97<!-- / -->x
#
# ``refresh`` re-renders every such figure from its source (``python -m cudacourse.course.prose
# refresh README.md``); ``stale_figures`` lists those that differ from their source, and
# ``untraced_figures`` the numbers the document states without one.
INLINE = re.compile(r"(<!--\s*(\{\{.*?\}\})\s*-->)(.*?)(<!--\s*/\s*-->)", re.S)
_GENERATED_BLOCK = re.compile(r"<!-- (\w+): rendered from .*?-->.*?<!-- /\1 -->", re.S)
_VERSIONS = re.compile(r"(?i)\b(python|numpy|numba-cuda|numba|cuda|cupy|cu|nbgrader|sm_|"
                       r"compute capability|ipykernel|alembic)\s*[\d.]+(\s*(or|and|to)\s*[\d.]+)?")


def refresh(text: str, root: str | Path | None = None) -> str:
    """``text`` with every inline figure re-rendered from its placeholder."""
    base = Path(root) if root is not None else None
    return INLINE.sub(lambda m: m[1] + fill(m[2], root=base) + m[4], text)


def stale_figures(text: str, root: str | Path | None = None) -> list[tuple[str, str, str]]:
    """(placeholder, what the document shows, what its source renders) for each figure that
    differs from its source."""
    base = Path(root) if root is not None else None
    return [(m[2], m[3], fill(m[2], root=base)) for m in INLINE.finditer(text)
            if m[3] != fill(m[2], root=base)]


def untraced_figures(text: str) -> list[str]:
    """The figures a document states with no source beside them: :func:`typed_figures` of
    the text outside inline figures, generated blocks (``gpu_run``), HTML comments and
    version numbers."""
    for pattern in (INLINE, _GENERATED_BLOCK, re.compile(r"<!--.*?-->", re.S), _VERSIONS):
        text = pattern.sub(" ", text)
    text = re.sub(r"(?m)^    .*$", " ", text)  # indented code (commands)
    return typed_figures(text)


# --- sentences that compare figures must agree with them -------------------------------------

# "{{r}}x faster" / "{{r}} times slower" claim r > 1; "{{a}}x to {{b}}x" claims a <= b and,
# when both are ratios of one family (``attention_sdpa_bf16_vs_sdpa_f32`` and its shapes), the
# family's extremes: a range that leaves out measured shapes misstates the table beside it.
_FIGURE = r"(?:<!--\s*)?(\{\{[^}]*\}\})(?:\s*-->[^<]*<!--\s*/\s*-->)?"
_MORE_THAN_ONE = re.compile(_FIGURE + r"\s*(?:x|×|times)\s+(?:faster|slower|longer|more|as long|"
                            r"higher|larger|as many)\b")
_RANGE = re.compile(_FIGURE + r"\s*(?:x|×)?\s+to\s+" + _FIGURE)


def _figure_of(placeholder: str, root: Path | None) -> float | None:
    m = PLACEHOLDER.fullmatch(placeholder)
    if m is None or m["key"].split(".")[0] not in ("bench", "gpu_run", "const"):
        return None  # a value of the run: judged where the run shows it
    try:
        return float(_render(m, None, root).replace(",", ""))
    except (MissingFigure, ValueError):
        return None


def _family(placeholder: str) -> str | None:
    m = PLACEHOLDER.fullmatch(placeholder)
    if m is None or m["scale"]:
        return None
    parts = m["key"].split(".")
    return parts[2] if len(parts) == 3 and parts[:2] == ["bench", "ratio"] else None


def contradictions(text: str, root: str | Path | None = None) -> list[str]:
    """The comparisons ``text`` states that its own figures contradict, each as a phrase."""
    base = Path(root) if root is not None else None
    found = []
    for m in _MORE_THAN_ONE.finditer(text):
        v = _figure_of(m[1], base)
        if v is not None and v <= 1:
            found.append(f"{m[0]!r}: the figure is {v:g}, not more than 1")
    for m in _RANGE.finditer(text):
        lo, hi = _figure_of(m[1], base), _figure_of(m[2], base)
        if lo is None or hi is None:
            continue
        if lo > hi:
            found.append(f"{m[0]!r}: the range runs backwards ({lo:g} > {hi:g})")
        a, b = _family(m[1]), _family(m[2])
        if a and b:
            family = os.path.commonprefix([a, b]).rstrip("_")
            ratios = {k: v for k, v in _load("benchmarks.json", base).get("ratios", {}).items()
                      if (k == family or k.startswith(family + "_")) and v is not None}
            if family and len(ratios) > 2 and (min(ratios.values()) < min(lo, hi) - 1e-9
                                               or max(ratios.values()) > max(lo, hi) + 1e-9):
                found.append(f"{m[0]!r}: {family}* runs from {min(ratios.values()):.3g} to "
                             f"{max(ratios.values()):.3g}: say bench.ratio_min / ratio_max")
    return found


def main(argv: list[str] | None = None) -> int:
    """``python -m cudacourse.course.prose refresh DOC...``: re-render the inline figures of each
    document in place."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2 or args[0] != "refresh":
        print("usage: python -m cudacourse.course.prose refresh DOC [DOC...]", file=sys.stderr)
        return 2
    for doc in map(Path, args[1:]):
        doc.write_text(refresh(doc.read_text()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
