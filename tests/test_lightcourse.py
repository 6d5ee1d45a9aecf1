"""The light course (tests/lightcourse.py) grades as lesson 1 does: its trimmed master keeps
every graded cell of the real one, unchanged, drops the demos, and gets full marks."""

from __future__ import annotations

import nbformat
import pytest

import lightcourse
from cudacourse.grader import prepare


def _nbgrader_cells(nb) -> list[tuple[str, object, str]]:
    return [(c.metadata["nbgrader"]["grade_id"], c.metadata["nbgrader"].get("points"),
             c.source) for c in nb.cells if "nbgrader" in c.metadata]


@pytest.fixture(scope="module")
def master():
    return nbformat.read(lightcourse.MASTER, 4)


def test_every_graded_cell_is_kept_unchanged_and_in_order(master):
    light = lightcourse.trim(master)
    assert _nbgrader_cells(light) == _nbgrader_cells(master)
    full = {c.source for c in master.cells}
    assert all(c.source in full for c in light.cells)  # nothing new, nothing rewritten


def test_demos_and_benchmarks_are_dropped_and_quiz_asks_kept(master):
    light = lightcourse.trim(master)
    sources = [c.source for c in light.cells]
    assert not any("cpu_vs_gpu.measure" in s or "plt.show" in s or "vector_add_no_guard" in s
                   for s in sources)
    asked = [s for s in sources if s.startswith("quiz.ask(")]
    graded = [g for g, _, s in _nbgrader_cells(master) if s.startswith("quiz.grade(")]
    assert len(asked) == len(graded) > 0
    assert len(light.cells) < len(master.cells)


def _cell(source: str, grade_id: str | None = None) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    if grade_id:
        cell.metadata["nbgrader"] = {"grade_id": grade_id, "grade": True, "points": 1,
                                     "solution": False, "locked": True}
    return cell


def test_a_cell_defining_a_name_a_graded_cell_uses_is_kept():
    nb = nbformat.v4.new_notebook(cells=[
        _cell("size = 8\nunused = 1"),          # defines `size`: used by the helper below
        _cell("def helper(a):\n    x = a\n    return x * size"),
        _cell("x = 3\na = 4"),                  # binds a and x, only locals elsewhere: dropped
        _cell("print(unused)"),                 # a demo: dropped
        _cell("assert helper(2) == 16", "t")])
    kept = [c.source for c in lightcourse.trim(nb).cells]
    assert kept == [nb.cells[0].source, nb.cells[1].source, nb.cells[4].source]


@pytest.mark.grading
def test_the_trimmed_master_gets_full_marks(master, tmp_path):
    light = lightcourse.trim(master)
    result = prepare.prepare(light, light, course_root=str(tmp_path),
                             options={"timeout": 300, "feedback_run": False})
    graded = {c.metadata["nbgrader"]["grade_id"] for c in master.cells
              if c.metadata.get("nbgrader", {}).get("grade")}
    assert set(result["cells"]) == graded  # every test cell of the real lesson, verdicts
    failing = {g: (v["status"], v.get("message", "")[:300])
               for g, v in result["cells"].items() if v["status"] != "pass"}
    assert not failing
