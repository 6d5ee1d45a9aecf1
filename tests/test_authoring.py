"""Lesson sources -> masters: the cell markers and their nbgrader metadata."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudacourse.course import authoring


SRC = '''# %% [markdown]
# # Title
#
# text
# %% [readonly] id=setup
import cudacourse
# %%
x = 1
# %% [solution] id=ex
def f():
    ### BEGIN SOLUTION
    return 1
    ### END SOLUTION
# %% [tests] id=test_ex points=2.5
assert f() == 1
'''


def test_cells_get_the_right_nbgrader_metadata():
    nb = authoring.to_notebook(SRC)
    kinds = [c.cell_type for c in nb.cells]
    assert kinds == ["markdown", "code", "code", "code", "code"]
    assert nb.cells[0].source == "# Title\n\ntext"
    setup, demo, sol, test = nb.cells[1:]
    assert setup.metadata["nbgrader"]["locked"] and not setup.metadata["nbgrader"]["grade"]
    assert "nbgrader" not in demo.metadata
    assert sol.metadata["nbgrader"]["solution"] and sol.id == "ex"
    assert test.metadata["nbgrader"]["grade"] and test.metadata["nbgrader"]["points"] == 2.5
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("bad, why", [
    ("x = 1\n# %%\n", "text before the first"),
    ("# %% [magic]\nx\n", "unknown cell kind"),
    ("# %% [tests]\nx\n", "need id="),
    ("# %% [solution] id=a\nx = 1\n", "without ### BEGIN SOLUTION"),
    ("# %% [readonly] id=a\nx\n# %% [readonly] id=a\ny\n", "duplicate id a"),
])
def test_malformed_sources_are_refused_with_the_line(bad, why):
    with pytest.raises(authoring.LessonSyntaxError, match=why):
        authoring.to_notebook(bad, "lesson.py")


def test_render_is_deterministic():
    assert authoring.render(authoring.to_notebook(SRC)) == \
        authoring.render(authoring.to_notebook(SRC))


def test_every_lesson_source_has_its_master_and_learner_copy():
    for lesson in authoring.lessons():
        assert authoring.master_path(lesson).exists(), lesson
        assert authoring.release_path(lesson).exists(), lesson
        text = lesson.read_text()
        assert "# %% [readonly] id=setup\nimport cudacourse" in text, \
            f"{lesson.name}: the first code cell must import cudacourse (it picks the device)"


def test_cell_attributes_and_kinds_come_through_jupytext():
    cells = authoring.parse(SRC)
    assert [c.kind for c in cells] == ["markdown", "readonly", None, "solution", "tests"]
    assert cells[4].attrs == {"id": "test_ex", "points": "2.5"}
    assert [c.lineno for c in cells] == [1, 5, 7, 9, 14]


def test_a_lesson_source_round_trips_through_jupytext_unchanged():
    """What pairing needs: opening the source as a notebook and saving it gives it back."""
    import jupytext

    for lesson in authoring.lessons():
        text = lesson.read_text()
        assert jupytext.writes(jupytext.reads(text, fmt="py:percent"), fmt="py:percent") == text


def test_the_course_root_is_found_from_below_and_refused_elsewhere(tmp_path, monkeypatch):
    (tmp_path / "lessons").mkdir()
    (tmp_path / "nbgrader_config.py").write_text("")
    monkeypatch.chdir(tmp_path / "lessons")
    assert authoring.find_root() == tmp_path
    assert authoring.lessons() == []
    other = tmp_path.parent / (tmp_path.name + "_elsewhere")
    other.mkdir()
    with pytest.raises(authoring.CourseRootNotFound, match="no course here"):
        authoring.find_root(other)


def test_nbgrader_release_leaves_the_tracked_learner_copy_byte_for_byte(tmp_path):
    """`nbgrader generate_assignment` (docs/instructors.md, step 1) rewrites notebooks/: it
    must write what is committed, or the tree is dirty and provenance says so."""
    import os
    import shutil
    import subprocess
    import sys

    root = authoring.find_root()
    a = "01_gpu_vs_cpu"
    shutil.copytree(root / "solutions" / a, tmp_path / "solutions" / a)
    shutil.copy(root / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    tracked = (root / "notebooks" / a / f"{a}.ipynb").read_bytes()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", a, "--force",
                           f"--db=sqlite:///{tmp_path}/gradebook.db"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "notebooks" / a / f"{a}.ipynb").read_bytes() == tracked
