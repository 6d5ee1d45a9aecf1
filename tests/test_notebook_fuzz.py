"""Generated notebooks through the record and feedback path (issue 38, class 5 and 7).

Hypothesis builds notebooks a hostile class could hand in: many cells, outputs of any size,
images by the dozen, Markdown, TeX and HTML payloads, graded cells that pass or fail. Each
goes through what the record stage does with it (``autograde.ResilientExecute`` putting the
prepared outputs in, within the notebook's budget) and what the feedback page is made from
(``SanitizeSubmission``, then nbconvert's HTML), and a class of them through the run record.
The invariants: it ends; every graded cell keeps the outcome its verdict gave (a failure is an
error output, a pass is none); every output within the notebook's budget; nothing live
reaches a page (no script, handler, remote image or TeX command); every student recorded.

Cheap by default (a few dozen examples, seconds); CUDACOURSE_NIGHTLY=1 runs many more.
"""

from __future__ import annotations

import csv
import json
import os
import re
import string

import nbformat
import pytest
from nbconvert import HTMLExporter
from traitlets.config import Config

from cudacourse.grader import budget, runrecord, untrusted
from cudacourse.grader.autograde import ResilientExecute, SanitizeSubmission

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is in the test extra")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

NIGHTLY = bool(os.environ.get("CUDACOURSE_NIGHTLY"))
SETTINGS = settings(max_examples=300 if NIGHTLY else 8, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])
# A small budget, so that generated notebooks of modest size (fast to build) cross it
BUDGET = budget.OutputBudget(total_bytes=300_000, images=6, image_bytes=120_000, notes=20)

PAYLOADS = st.sampled_from([
    r"$\href{javascript:alert(1)}{x}$", r"\(\class{x}{y}\)", r"$$\style{color:red}{x}$$",
    r"\require{x}", r"$\def\h{\hr}\h ef{x}$", "&#92;href{x}", "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>", "<img src='https://example.org/beacon.png'>",
    "<a href='javascript:x'>y</a>", "<svg onload=alert(1)>", "<b>" * 50, "<", "<!--",
    "[x](javascript:y)", "![x](data:image/svg+xml;base64,PHN2Zz4=)", "# title", "*a* _b_",
    "<iframe src='/formgrader'></iframe>", "<style>body{display:none}</style>", "x" * 500,
    "\u202e", "`code`", "\n\n", "$x$",
])
MARKDOWN = st.lists(PAYLOADS, min_size=1, max_size=12).map("".join)


@st.composite
def outputs(draw):
    """Outputs of one ordinary code cell, as the feedback run would hand them over."""
    outs = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["stream", "image", "images", "error", "html"]))
        if kind == "stream":
            outs.append({"output_type": "stream", "name": "stdout",
                         "text": draw(st.sampled_from(string.ascii_letters)) *
                         draw(st.integers(0, 120_000))})
        elif kind in ("image", "images"):
            n = 1 if kind == "image" else draw(st.integers(2, 15))
            size = draw(st.integers(100, 60_000))
            outs += [{"output_type": "display_data", "metadata": {},
                      "data": {"image/png": "iVBO" + "A" * size, "text/plain": "<Figure>"}}
                     for _ in range(n)]
        elif kind == "error":
            outs.append({"output_type": "error", "ename": "ValueError",
                         "evalue": "bad " * draw(st.integers(0, 3000)),
                         "traceback": ["frame"] * draw(st.integers(0, 50))})
        else:
            outs.append({"output_type": "display_data", "metadata": {},
                         "data": {"text/html": draw(MARKDOWN), "text/plain": "html"}})
    return outs


@st.composite
def submissions(draw):
    """A notebook and the prepared results the record stage reads for it."""
    nb = nbformat.v4.new_notebook()
    cells_outputs, verdicts = [], {}
    for i in range(draw(st.integers(1, 40 if not NIGHTLY else 150))):
        kind = draw(st.sampled_from(["markdown", "code", "code", "graded", "raw"]))
        if kind == "markdown":
            cell = nbformat.v4.new_markdown_cell(draw(MARKDOWN))
            if draw(st.booleans()):
                cell.attachments = {f"a{j}.png": {"image/png": "iVBO" + "B" * 20_000}
                                    for j in range(draw(st.integers(1, 5)))}
        elif kind == "raw":
            cell = nbformat.v4.new_raw_cell(draw(MARKDOWN))
        elif kind == "graded":
            cell = nbformat.v4.new_code_cell(f"check_{i}()")
            gid = f"test_{i}"
            cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True,
                                         "grade_id": gid, "points": 1, "schema_version": 3}
            passed = draw(st.booleans())
            verdicts[gid] = ({"status": "pass"} if passed else
                             {"status": "fail", "ename": "CheckFailed",
                              "message": draw(MARKDOWN)})
        else:
            cell = nbformat.v4.new_code_cell(f"x_{i} = {i}")
        nb.cells.append(cell)
        cells_outputs.append(draw(outputs()) if kind == "code" else None)
    prepared = {"cells": verdicts, "outputs": cells_outputs, "incidents": [],
                "isolation": ["bwrap"], "sources": [c.source for c in nb.cells],
                "seconds": 0.0}
    return nb, prepared, verdicts


# live markup in the tags left (text is escaped): an https link whose path spells
# "javascript:" (Markdown autolinks a URL in a message) is a link, not a script
LIVE = re.compile(r"<(script|iframe|svg|style|form|object|embed|meta|base)\b|"
                  r"\son\w+\s*=|(href|src)\s*=\s*[\"']?\s*(javascript|data:text|vbscript):|"
                  r"\sstyle\s*=|<img\b[^>]*\ssrc=\"(?!data:image/)", re.I)
TEX_LIVE = re.compile(r"\\(?=(%s)(?![A-Za-z]))" % "|".join(untrusted.TEX_MARKUP), re.I)


def _record(nb, prepared, tmp_path):
    """The record stage's step: ResilientExecute with the prepared results on disk."""
    results = tmp_path / "results"
    path = results / "ada" / "a1" / "one.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(prepared))
    c = Config()
    c.ResilientExecute.results_dir = str(results)
    c.ResilientExecute.output_budget = {k: getattr(BUDGET, k) for k in
                                        ("total_bytes", "images", "image_bytes", "notes")}
    resources = {"nbgrader": {"student": "ada", "assignment": "a1", "notebook": "one"}}
    return ResilientExecute(config=c).preprocess(nb, resources)


@SETTINGS
@given(sub=submissions())
def test_a_generated_notebook_is_recorded_within_its_budget_and_renders_inert(sub, tmp_path):
    nb, prepared, verdicts = sub
    nb, resources = _record(nb, prepared, tmp_path)
    assert "one.grading.json" in resources["outputs"]  # the record of this notebook
    # every graded cell keeps its verdict's outcome: what nbgrader scores
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in verdicts:
            errors = [o for o in cell.outputs if o.output_type == "error"]
            assert bool(errors) == (verdicts[gid]["status"] != "pass"), (gid, cell.outputs)
    # every ordinary output within the notebook's budget (graded ones count, never cut)
    used = [0, 0, 0]
    for cell in nb.cells:
        if cell.cell_type == "code" and not cell.metadata.get("nbgrader", {}).get("grade"):
            for out in cell.outputs:
                used = [a + b for a, b in zip(used, budget.measure(out))]
    notes = 250 * len(nb.cells)  # a note per cell at most, each short
    assert used[0] <= BUDGET.total_bytes + notes and used[1] <= BUDGET.images
    assert used[2] <= BUDGET.image_bytes
    # the feedback page and formgrader's view: sanitized, bounded, nothing live
    nb, _ = SanitizeSubmission().preprocess(nb, {})
    html, _ = HTMLExporter().from_notebook_node(nb)
    body = html.split("<body", 1)[1]
    main = body.split("<script", 1)[0] if "<script" in body else body
    tags_only = re.sub(r">[^<]*<", "><", main)
    assert not LIVE.search(tags_only), LIVE.search(tags_only)
    text = untrusted.html.unescape(re.sub(r"<[^>]*>", "", main))
    assert not TEX_LIVE.search(text), TEX_LIVE.search(text)
    assert len(html) < budget.OutputBudget().total_bytes + 2 * budget.MIB


def _number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


STUDENT = st.text(alphabet=string.ascii_lowercase + string.digits + "_-", min_size=1,
                  max_size=12).filter(lambda s: s[0] not in "-_")


@SETTINGS
@given(students=st.lists(STUDENT, min_size=1, max_size=60, unique=True),
       reasons=st.lists(st.one_of(st.none(), MARKDOWN, st.sampled_from(
           ["=HYPERLINK(\"x\")", "+1", "@SUM(A1)", "\x1b[31mred", "used more than 2048 MiB"])),
           min_size=1, max_size=60))
def test_every_student_of_a_generated_class_is_recorded(students, reasons, tmp_path_factory):
    """The run record: one row per student whatever their texts hold, no cell a formula."""
    results = []
    for i, s in enumerate(students):
        reason = reasons[i % len(reasons)]
        results.append({"student": s, "assignment": "a1",
                        "status": "not_graded" if reason else "graded", "reason": reason,
                        "scores": {} if reason else {"q": 1.0},
                        "max_scores": {} if reason else {"q": 2.0},
                        "incidents": [r for r in reasons[:3] if r], "seconds": 1.0})
    run = {"assignment": "a1", "started": "2026-12-04T00:00:00Z", "results": results,
           "isolation": "bwrap", "seconds": 1}
    out = runrecord.write(run, tmp_path_factory.mktemp("grading"))
    with open(out["csv"], newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted(r["student_id"] for r in rows) == sorted(students)
    for row in rows:
        for value in row.values():  # a number ("+1") is a number, not a formula
            assert value[:1] not in ("=", "+", "@") or _number(value), row
            assert "\x1b" not in value, row
    summary = out["summary"].read_text(encoding="utf-8")
    assert all(s in summary for s in students)
