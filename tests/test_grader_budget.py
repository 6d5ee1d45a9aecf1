"""A notebook's outputs have a total (issue 38, class 5): 40 large images in one cell, or a
little in each of many cells, end at the budget, with a note where something was cut; the
outputs that decide points are never cut."""

from __future__ import annotations

import base64

import nbformat
import pytest
from nbconvert import HTMLExporter

from cudacourse.grader import budget, untrusted
from cudacourse.grader.autograde import SanitizeSubmission

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2300).decode()  # ~785 KB


def _image(n: int = 1) -> list:
    return [nbformat.v4.new_output("display_data", data={"image/png": PNG,
                                                          "text/plain": "<Figure>"})
            for _ in range(n)]


def _graded_failure() -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell("check_x(x)")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "t1",
                                 "points": 2, "locked": True}
    cell.outputs = [nbformat.v4.new_output("error", ename="CheckFailed",
                                           evalue="x[3] is wrong " * 1000,
                                           traceback=["CheckFailed: x[3] is wrong"])]
    return cell


def _size(nb) -> tuple[int, int, int]:
    total = [0, 0, 0]
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            for i, v in enumerate(budget.measure(out)):
                total[i] += v
    return tuple(total)


def test_forty_large_images_in_one_cell_end_at_the_notebooks_budget():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("for _ in range(40): plt.show()")
    cell.outputs = _image(40)
    nb.cells = [cell, _graded_failure()]
    b = budget.OutputBudget()
    assert budget.measure(cell.outputs[0])[2] * 40 > 20 * budget.MIB  # the 23 MiB class
    incidents = budget.enforce(nb, b)
    size, images, image_bytes = _size(nb)
    assert size <= b.total_bytes + 10_000 and images <= b.images
    assert image_bytes <= b.image_bytes
    kept = [o for o in cell.outputs if o.output_type == "display_data"]
    assert 0 < len(kept) < 40
    assert "output(s) cut by the grader" in cell.outputs[-1].text
    assert incidents and "outputs cut" in incidents[0] and "1 cell(s)" in incidents[0]
    # the graded cell's verdict is untouched: its error decides the points
    assert nb.cells[1].outputs[0].ename == "CheckFailed"
    assert len(nb.cells[1].outputs[0].evalue) == len("x[3] is wrong " * 1000)


def test_a_little_in_each_of_many_cells_adds_up_to_the_same_total():
    nb = nbformat.v4.new_notebook()
    b = budget.OutputBudget(total_bytes=200_000, images=5, image_bytes=budget.MIB)
    for i in range(100):
        cell = nbformat.v4.new_code_cell(f"print({i})")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="y" * 19_000)]
        nb.cells.append(cell)
    incidents = budget.enforce(nb, b)
    assert _size(nb)[0] <= b.total_bytes + 100 * 200  # the notes themselves are short
    notes = [c for c in nb.cells if "cut by the grader" in c.outputs[-1].get("text", "")]
    assert len(notes) == 90 and incidents
    assert nb.cells[0].outputs[0].text == "y" * 19_000  # first come, first kept


def test_an_error_past_the_budget_stays_an_error_and_markdown_has_a_total_too():
    nb = nbformat.v4.new_notebook()
    b = budget.OutputBudget(total_bytes=50_000)
    big = nbformat.v4.new_code_cell("print()")
    big.outputs = [nbformat.v4.new_output("stream", name="stdout", text="z" * 49_000)]
    failing = nbformat.v4.new_code_cell("1/0")
    failing.outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError",
                                              evalue="division by zero" * 500,
                                              traceback=["frame"] * 2000)]
    md = nbformat.v4.new_markdown_cell("$\\href{javascript:alert(1)}{x}$" * 10_000)
    md.attachments = {"a.png": {"image/png": PNG}}
    nb.cells = [big, failing, md]
    budget.enforce(nb, b)
    assert failing.outputs[0].output_type == "error"
    assert failing.outputs[0].ename == "ZeroDivisionError"
    assert len(failing.outputs[0].evalue) <= 300 and len(failing.outputs[0].traceback) == 1
    assert "cut by the grader" in md.source and "href" not in md.source
    assert md.attachments == {}
    nbformat.validate(nb)


def test_the_feedback_runs_outputs_are_capped_per_notebook_before_they_are_saved():
    per_cell = [None, [{"output_type": "display_data", "data": {"image/png": PNG}}] * 10,
                [{"output_type": "stream", "name": "stdout", "text": "ok"}], None]
    b = budget.OutputBudget(images=3)
    capped, incidents = budget.cap_cells(per_cell, b)
    assert capped[0] is None and capped[3] is None
    assert sum(1 for o in capped[1] if o["output_type"] == "display_data") == 3
    assert capped[2] == per_cell[2]
    assert incidents and "3 images" in incidents[0]


def test_options_set_the_budget():
    b = budget.OutputBudget.from_options({"output_budget": {"images": "7", "bogus": 1}})
    assert b.images == 7 and b.total_bytes == budget.OutputBudget().total_bytes


def test_the_feedback_page_is_bounded_too():
    """What the feedback page is made from passes SanitizeSubmission: the budget first,
    then the sanitizer, so the page stays within the budget whatever the notebook held."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("show()")
    cell.outputs = _image(40)
    nb.cells = [cell, _graded_failure(),
                nbformat.v4.new_markdown_cell("<b>" * 100_000 + "\\href{x}" * 50_000)]
    nb, _ = SanitizeSubmission().preprocess(nb, {})
    html, _ = HTMLExporter().from_notebook_node(nb)
    b = budget.OutputBudget()
    assert len(html) < b.total_bytes + 2 * budget.MIB  # the template and MathJax loader
    assert "\\href" not in html.split("<body")[1]
    assert untrusted.FROZEN_CLASS in html


@pytest.mark.parametrize("bad", [None, 3, "x", [1, "y"], {"output_type": "stream"}])
def test_malformed_outputs_are_measured_without_error(bad):
    assert budget.measure(bad) == budget.measure(bad)  # total: no exception
    budget.cap_cells([[bad]], budget.OutputBudget())
