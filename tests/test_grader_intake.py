"""Intake: broken submissions are named, duplicates graded by first occurrence, files untouched.

In-process and fast: a scratch course with lesson 1's master and hand-made submissions.
"""

from __future__ import annotations

import copy
import json
import shutil

import nbformat
import pytest

from cudacourse import authoring
from cudacourse.grader import intake

ROOT = authoring.ROOT
A = "01_gpu_vs_cpu"


@pytest.fixture
def course(tmp_path):
    shutil.copytree(ROOT / "solutions" / A, tmp_path / "solutions" / A)
    return tmp_path


def _submit(course, student, data: bytes, name: str = f"{A}.ipynb", timestamp=None):
    d = course / "submitted" / student / A
    d.mkdir(parents=True)
    (d / name).write_bytes(data)
    if timestamp is not None:
        (d / "timestamp.txt").write_text(timestamp)
    return d


def _master(course):
    return nbformat.read(course / "solutions" / A / f"{A}.ipynb", 4)


def _ids(nb, key="grade_id"):
    return [c.metadata.get("nbgrader", {}).get(key) for c in nb.cells]


@pytest.mark.parametrize("data, phrase", [
    (b'{"cells": [', "is not valid JSON: Expecting value at line 1, column 12"),
    (b'{"cells": [], "x": "\xff"}', "is not UTF-8 text: byte 0xff at offset 20"),
    (b'[1, 2]', "is JSON but not a notebook"),
    (b'{"cells": [{"cell_type": "weird"}], "metadata": {}, "nbformat": 4, '
     b'"nbformat_minor": 5}', "is not a valid notebook"),
])
def test_broken_files_are_not_graded_with_the_reason(course, data, phrase):
    _submit(course, "s", data)
    with pytest.raises(intake.NotGraded, match=phrase.replace("(", r"\(")):
        intake.stage(course, A, "s", course / "staging")


def test_renamed_and_missing_notebooks(course):
    text = nbformat.writes(_master(course)).encode()
    _submit(course, "renamer", text, name=f"{A} (1).ipynb")
    with pytest.raises(intake.NotGraded, match=r"notebook renamed: found 01_gpu_vs_cpu \(1\)"):
        intake.stage(course, A, "renamer", course / "staging")
    with pytest.raises(intake.NotGraded, match="nothing submitted"):
        intake.stage(course, A, "nobody", course / "staging")


@pytest.mark.parametrize("stamp, ok", [("2026-12-01 10:00:00.000000 UTC", True), ("", True),
                                       ("yesterday-ish 25:99", False)])
def test_timestamps(course, stamp, ok):
    _submit(course, "t", nbformat.writes(_master(course)).encode(), timestamp=stamp)
    if ok:
        intake.stage(course, A, "t", course / "staging")
    else:
        with pytest.raises(intake.NotGraded, match="timestamp.txt does not hold a date") as e:
            intake.stage(course, A, "t", course / "staging")
        assert "yesterday" not in str(e.value)  # never quoted: a link could have put a secret


def test_duplicates_graded_by_first_occurrence_and_locked_cells_restored(course):
    nb = _master(course)
    kernel = _ids(nb).index("vector_add")
    test = _ids(nb).index("test_vector_add")
    dup = copy.deepcopy(nb.cells[kernel])
    dup.source = "# a copy, wrong\n"
    dup["id"] = "copied-cell"
    nb.cells.insert(test + 1, dup)
    nb.cells[test].source = "pass  # the learner made the test pass"
    data = nbformat.writes(nb).encode()
    d = _submit(course, "dup", data)
    staged = intake.stage(course, A, "dup", course / "staging")
    out = nbformat.read(staged.notebooks[A], 4)
    assert _ids(out).count("vector_add") == 1
    assert out.cells[test + 1].source == "# a copy, wrong\n"  # kept, as a plain cell
    assert "check_vector_add" in out.cells[test].source  # restored from the master
    assert any("appears again" in p for p in staged.problems)
    assert (d / f"{A}.ipynb").read_bytes() == data  # the submission itself is untouched


def test_a_test_cell_turned_into_an_answer_is_not_graded(course):
    nb = _master(course)
    nb.cells[_ids(nb).index("test_vector_add")].metadata["nbgrader"]["solution"] = True
    _submit(course, "sneaky", nbformat.writes(nb).encode())
    with pytest.raises(intake.NotGraded, match="test cell 'test_vector_add' was turned into"):
        intake.stage(course, A, "sneaky", course / "staging")


def test_file_hashes_see_every_change(tmp_path):
    (tmp_path / "a").write_text("1")
    before = intake.file_hashes(tmp_path)
    (tmp_path / "a").write_text("2")
    assert intake.file_hashes(tmp_path) != before
    assert json.dumps(before)


def test_an_answer_cell_without_metadata_is_found_by_what_it_defines(course):
    nb = _master(course)
    kernel = _ids(nb).index("vector_add")
    nb.cells[kernel].metadata.pop("nbgrader")  # right answer, its metadata removed
    _submit(course, "lost", nbformat.writes(nb).encode())
    staged = intake.stage(course, A, "lost", course / "staging")
    out = nbformat.read(staged.notebooks[A], 4)
    assert _ids(out)[kernel] == "vector_add" and _ids(out, "solution")[kernel] is True
    assert out.cells[kernel].source == nb.cells[kernel].source
    assert any("lost its nbgrader metadata" in p for p in staged.problems)


def test_a_missing_answer_cell_is_named_in_every_verdict_that_needs_it(course):
    from cudacourse.grader import allowlist

    nb = _master(course)
    del nb.cells[_ids(nb).index("vector_add")]  # gone altogether
    _submit(course, "gone", nbformat.writes(nb).encode())
    staged = intake.stage(course, A, "gone", course / "staging")
    out = nbformat.read(staged.notebooks[A], 4)
    assert _ids(out).index("vector_add") < _ids(out).index("test_vector_add")
    assert "answer cell 'vector_add' is missing (its metadata was removed?)" in staged.problems
    cell = out.cells[_ids(out).index("vector_add")]
    sel = allowlist.select([("vector_add", cell.source)], {})
    assert "answer cell 'vector_add' is missing (its metadata was removed?)" in \
        sel.reason_for(["vector_add"])


def test_a_demo_that_binds_the_answer_s_name_is_not_taken_for_it(course):
    nb = _master(course)
    kernel = _ids(nb).index("vector_add")
    demo = next(c for c in nb.cells if c.cell_type == "code" and
                not c.metadata.get("nbgrader", {}).get("solution"))
    nb.cells[kernel].metadata.pop("nbgrader")
    nb.cells[kernel].source = "x = 1\n"  # the answer is not there at all
    _submit(course, "demo", nbformat.writes(nb).encode())
    staged = intake.stage(course, A, "demo", course / "staging")
    out = nbformat.read(staged.notebooks[A], 4)
    assert out.cells[_ids(out).index("vector_add")].source.startswith(intake.MISSING_MARK)
    assert demo.source in [c.source for c in out.cells]
