"""Every output has a total: what one notebook's outputs may hold, all cells together.

Per-cell caps (``output_cap``, ``kernelrun.KernelExecute.max_outputs``) bound one cell; a
submission with many cells, or 40 large images in one, still made a 23 MiB autograded
notebook and a 23 MiB feedback page (issue 38, class 5). An :class:`OutputBudget` is the
notebook's total: bytes of all outputs (text, images, Markdown sources and attachments),
the number of images and their bytes. :func:`cap_cells` and :func:`enforce` walk the cells in
order and admit each output while it fits; what does not is replaced, per cell, by one short
note saying so. They run before anything is written or rendered: on the feedback run's
outputs (``prepare.feedback_run``), on the notebook nbgrader writes
(``autograde.ResilientExecute``) and on any notebook a page is made from
(``autograde.SanitizeSubmission``).

Graded test cells are never cut: their outputs come from the verdicts (grader-made, capped)
and decide the points; they count toward the total all the same. An error output elsewhere
past the budget is shortened, never removed (it stays an error).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from nbformat import NotebookNode, from_dict

from ..i18n import T

MIB = 1 << 20


@dataclass(frozen=True)
class OutputBudget:
    """A notebook's totals. ``from_options`` reads ``options["output_budget"]``."""

    total_bytes: int = 6 * MIB  # every output, Markdown source and attachment together
    images: int = 40  # images (outputs and attachments) in the notebook
    image_bytes: int = 4 * MIB  # bytes of those images (base64, as stored)
    notes: int = 100  # cells that get a note; later cuts are counted, not noted

    @classmethod
    def from_options(cls, options: dict[str, Any] | None) -> "OutputBudget":
        given = (options or {}).get("output_budget") or {}
        names = {f.name for f in fields(cls)}
        return cls(**{k: int(v) for k, v in given.items() if k in names})


def _joined(v: Any) -> str:
    if isinstance(v, list):
        return "".join(x if isinstance(x, str) else str(x) for x in v)
    return v if isinstance(v, str) else str(v)


def measure(out: Any) -> tuple[int, int, int]:
    """(bytes, images, image bytes) of one output, as stored (characters of its strings)."""
    if not isinstance(out, dict):
        return 0, 0, 0
    kind = out.get("output_type")
    if kind == "stream":
        return len(_joined(out.get("text", ""))), 0, 0
    if kind == "error":
        tb = out.get("traceback")
        n = sum(len(_joined(t)) for t in tb) if isinstance(tb, list) else 0
        return n + len(_joined(out.get("ename", ""))) + len(_joined(out.get("evalue", ""))), 0, 0
    data = out.get("data")
    if not isinstance(data, dict):
        return 0, 0, 0
    size = images = image_bytes = 0
    for mime, value in data.items():
        n = len(_joined(value)) if isinstance(value, (str, list)) else len(str(value))
        size += n
        if isinstance(mime, str) and mime.startswith("image/"):
            images += 1
            image_bytes += n
    return size, images, image_bytes


class Meter:
    """What a notebook has used of its budget so far."""

    def __init__(self, budget: OutputBudget) -> None:
        self.budget = budget
        self.bytes = self.images = self.image_bytes = 0
        self.cut = 0  # outputs (or sources, attachments) cut
        self.cells: set[int] = set()  # cells where something was cut
        self.noted = 0

    def fits(self, size: tuple[int, int, int]) -> bool:
        b = self.budget
        return (self.bytes + size[0] <= b.total_bytes and self.images + size[1] <= b.images
                and self.image_bytes + size[2] <= b.image_bytes)

    def take(self, size: tuple[int, int, int]) -> None:
        self.bytes += size[0]
        self.images += size[1]
        self.image_bytes += size[2]

    def admit(self, size: tuple[int, int, int]) -> bool:
        if self.fits(size):
            self.take(size)
            return True
        return False

    def note(self, cell: int, n: int) -> dict[str, Any] | None:
        """The note that replaces ``n`` outputs cut in ``cell`` (None past ``notes``)."""
        self.cut += n
        self.cells.add(cell)
        if self.noted >= self.budget.notes:
            return None
        self.noted += 1
        return {"output_type": "stream", "name": "stdout", "text": "\n" + note_text(
            self.budget, n) + "\n"}

    def incident(self) -> list[str]:
        """One line for the grading note and the run record; empty when nothing was cut."""
        if not self.cut:
            return []
        return [T("outputs cut: {n} output(s) in {cells} cell(s) went past the notebook's "
                  "budget ({mib} MiB of outputs, {images} images, {image_mib} MiB of images)",
                  n=self.cut, cells=len(self.cells), mib=_mib(self.budget.total_bytes),
                  images=self.budget.images, image_mib=_mib(self.budget.image_bytes))]


def _mib(n: int) -> str:
    return "{:g}".format(round(n / MIB, 2))


def note_text(budget: OutputBudget, n: int) -> str:
    return T("[... {n} output(s) cut by the grader: this notebook's outputs went past their "
             "total of {mib} MiB and {images} images]", n=n, mib=_mib(budget.total_bytes),
             images=budget.images)


def _short_error(out: dict[str, Any]) -> dict[str, Any]:
    """An error output past the budget: still an error, a few hundred characters long."""
    ename = _joined(out.get("ename", "Error"))[:100]
    evalue = _joined(out.get("evalue", ""))[:300]
    return {"output_type": "error", "ename": ename, "evalue": evalue,
            "traceback": [f"{ename}: {evalue}"]}


def _like(template: Any, made: dict[str, Any]) -> Any:
    """``made`` as the same kind of mapping as ``template`` (nbformat's nodes in a notebook)."""
    return from_dict(made) if isinstance(template, NotebookNode) else made


def _cap_list(outputs: list, meter: Meter, index: int) -> list:
    kept: list = []
    cut = 0
    for out in outputs:
        size = measure(out)
        if meter.admit(size):
            kept.append(out)
        elif isinstance(out, dict) and out.get("output_type") == "error":
            short = _short_error(out)
            meter.take(measure(short))  # an error is kept whatever it costs (it is small)
            kept.append(_like(out, short))
            cut += 1
        else:
            cut += 1
    if cut:
        note = meter.note(index, cut)
        if note is not None:
            kept.append(_like(outputs[0], note))
    return kept


def cap_cells(cells_outputs: list, budget: OutputBudget) -> tuple[list, list[str]]:
    """Outputs per cell (a list, or None for a cell without) within ``budget``, in order;
    and the incident line when something was cut."""
    meter = Meter(budget)
    out = [None if outs is None else _cap_list(outs if isinstance(outs, list) else [], meter, i)
           for i, outs in enumerate(cells_outputs)]
    return out, meter.incident()


def _graded(cell: Any) -> bool:
    md = cell.get("metadata") if isinstance(cell, dict) else None
    grading = md.get("nbgrader") if isinstance(md, dict) else None
    return isinstance(grading, dict) and bool(grading.get("grade"))


def enforce(nb: Any, budget: OutputBudget | None = None) -> list[str]:
    """In place: every cell of ``nb`` within the notebook's ``budget`` (Markdown and raw
    sources, attachments, outputs), graded cells untouched (counted). Returns the incident
    line when something was cut."""
    budget = budget or OutputBudget()
    meter = Meter(budget)
    cells = nb.get("cells") if isinstance(nb, dict) else None
    for i, cell in enumerate(cells if isinstance(cells, list) else []):
        if not isinstance(cell, dict):
            continue
        kind = cell.get("cell_type")
        if kind in ("markdown", "raw"):
            source = _joined(cell.get("source", ""))
            if not meter.admit((len(source), 0, 0)):
                meter.note(i, 1)
                cell["source"] = note_text(budget, 1)
            atts = cell.get("attachments")
            if isinstance(atts, dict):
                for name in list(atts):
                    bundle = atts[name]
                    size = measure({"output_type": "display_data", "data": bundle}) \
                        if isinstance(bundle, dict) else (0, 0, 0)
                    if not meter.admit(size):
                        meter.note(i, 1)
                        del atts[name]
        elif kind == "code":
            outputs = cell.get("outputs")
            if not isinstance(outputs, list):
                continue
            if _graded(cell):  # the verdict's outputs: they decide the points
                for out in outputs:
                    meter.take(measure(out))
                continue
            cell["outputs"] = _cap_list(outputs, meter, i)
    return meter.incident()


__all__ = ["OutputBudget", "Meter", "measure", "cap_cells", "enforce", "note_text"]
