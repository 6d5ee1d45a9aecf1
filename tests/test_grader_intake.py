"""Intake: broken submissions are named, duplicates graded by first occurrence, files untouched.

In-process and fast: a scratch course with lesson 1's master and hand-made submissions.
"""

from __future__ import annotations

import copy
import os
import json
import shutil

import nbformat
import pytest

from cudacourse.course import authoring
from cudacourse.grader import intake, safefs

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


# --- the submission folder as it arrives (issue 29) ---------------------------------------

def _samples():
    import importlib.util
    import sys

    if "grading_samples" in sys.modules:
        return sys.modules["grading_samples"]
    spec = importlib.util.spec_from_file_location(
        "grading_samples", ROOT / "tests" / "submissions" / "samples.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["grading_samples"] = module
    spec.loader.exec_module(module)
    return module


samples = _samples()


def _stage_soon(course, student, seconds=30):
    """intake.stage in a thread: a read that waits (a named pipe) fails the test, not CI."""
    import threading

    box = {}

    def run():
        try:
            box["staged"] = intake.stage(course, A, student, course / "staging")
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"intake of {student} is still reading after {seconds} s"
    return box


@pytest.fixture
def hostile(course):
    """Every FILES sample of tests/submissions/samples.py, planted beside a classmate."""
    secret = samples.plant_secret(course)
    text = nbformat.writes(_master(course)).encode()
    _submit(course, "correct", text)
    for name, (_doc, plant, _phrase) in samples.FILES.items():
        plant(course, _submit(course, name, text), secret)
    return course


@pytest.mark.parametrize("name", sorted(samples.FILES))
def test_a_hostile_folder_is_not_graded_naming_the_entry_and_nothing_else(hostile, name):
    box = _stage_soon(hostile, name)
    assert isinstance(box.get("error"), intake.NotGraded), box
    reason = str(box["error"])
    assert samples.FILES[name][2] in reason, reason
    # never the target, never the content: no path of the course or of the instructor file
    for leak in (samples.SECRET, "hunter2", samples.SECRET_FILE, str(hostile), "solutions/",
                 "correct/", "\x1b"):
        assert leak not in reason, (leak, reason)
    assert not (hostile / "staging" / name).exists()  # nothing half-staged
    assert intake.stage(hostile, A, "correct", hostile / "staging").notebooks  # classmate fine


def test_forged_records_cannot_land_where_the_grader_writes(course):
    """Every name the grader writes, forged: the copy's top level holds only the grader's
    files; the learner's land under learner-files/, and an oversize one is not copied."""
    _submit(course, "forger", nbformat.writes(_master(course)).encode())
    samples._forge_records(course, course / "submitted" / "forger" / A, None)
    staged = intake.stage(course, A, "forger", course / "staging")
    top = sorted(p.name for p in staged.directory.iterdir())
    assert top == [f"{A}.ipynb", intake.LEARNER_FILES]
    kept = sorted(p.name for p in (staged.directory / intake.LEARNER_FILES).iterdir())
    assert f"{A}.grading.json" in kept and "NOT_GRADED.html" in kept and "big.bin" not in kept
    assert any("big.bin is larger than 20 MiB" in p for p in staged.problems)


def test_a_reader_of_records_never_takes_a_learner_file_for_one(course, tmp_path):
    from cudacourse.grader import feedbackview

    graded = tmp_path / "autograded"
    (graded / intake.LEARNER_FILES).mkdir(parents=True)
    nbformat.write(_master(course), graded / f"{A}.ipynb")
    forged = {"verdicts": {"test_vector_add": {"status": "fail", "message": samples.FORGED}}}
    (graded / intake.LEARNER_FILES / "00.grading.json").write_text(json.dumps(forged))
    assert feedbackview.first_lost(graded) == ""
    (graded / f"{A}.grading.json").write_text(json.dumps(forged))  # the grader's own name
    assert samples.FORGED in feedbackview.first_lost(graded)  # (a control: it is read there)


def test_folders_inside_are_never_entered(course):
    d = _submit(course, "home", nbformat.writes(_master(course)).encode())
    (d / ".ipynb_checkpoints").mkdir()
    os.mkfifo(d / ".ipynb_checkpoints" / "pipe")  # would block a reader; never opened
    (d / "data").mkdir()
    (d / "data" / "link").symlink_to("/etc/passwd")
    staged = intake.stage(course, A, "home", course / "staging")
    assert staged.notebooks and not (staged.directory / "data").exists()
    assert any("folder data not copied" in p for p in staged.problems)
    assert not any("ipynb_checkpoints" in p for p in staged.problems)


@pytest.mark.parametrize("name, phrase", [
    (".", "dot name"), ("..", "'..'"), ("a..b", "'..'"), ("a\\b", "slash"), ("x\x1b[31m", "control"),
    ("bad\udcff", "control or undecodable"), ("rtl\u202etxt", "control"), ("", "empty"),
    ("a" * 300, "more than 255 bytes")])
def test_names_that_climb_or_hide_are_refused(name, phrase):
    assert phrase in safefs.name_problem(name)
    shown = safefs.shown(name)
    assert shown.isprintable() and "\x1b" not in shown and len(shown) <= 80


def test_ordinary_names_pass():
    for name in ("data.csv", "01_gpu_vs_cpu.ipynb", ".DS_Store", "データ.txt", "a b.txt"):
        assert safefs.name_problem(name) is None, name


def test_bad_student_and_assignment_names_are_refused(course):
    for student in ("../correct", "a/b", "x\x00"):
        with pytest.raises(intake.NotGraded, match="is not a regular file"):
            intake.stage(course, A, student, course / "staging")


def test_a_device_is_refused_by_its_kind():
    with safefs.Folder.at("/dev") as dev:
        null = next(e for e in dev.entries() if e.name == "null")
        assert null.kind == "device"
        assert safefs.not_regular(null) == "null is not a regular file (a device)"
        with pytest.raises(safefs.Refused, match="a device"):
            dev.read(null, 10)


def test_a_file_swapped_or_grown_after_listing_is_refused(tmp_path):
    (tmp_path / "a.txt").write_text("short")
    (tmp_path / "b.txt").write_text("short")
    with safefs.Folder.at(tmp_path) as folder:
        a, b = [e for e in folder.entries()]
        (tmp_path / "a.txt").unlink()
        (tmp_path / "a.txt").symlink_to(tmp_path / "b.txt")  # a link swapped in: ELOOP
        with pytest.raises(safefs.Refused, match="changed while read"):
            folder.read(a, 100)
        (tmp_path / "b.txt").write_text("x" * 200)  # grew past the bound: never read on
        with pytest.raises(safefs.Refused, match="more than the 100 bytes"):
            folder.read(b, 100)


def test_a_notebook_nested_too_deeply_is_not_graded(course):
    deep = b'{"cells": [], "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    _submit(course, "deep", deep)
    with pytest.raises(intake.NotGraded, match="nested too deeply"):
        intake.stage(course, A, "deep", course / "staging")
    # deep enough for the copies and the validator to recurse too far, not the JSON parser
    text = nbformat.writes(_master(course))
    deep_meta = '"metadata": {"deep": ' + '{"k": ' * 600 + "1" + "}" * 600 + ", "
    _submit(course, "deeper", text.replace('"metadata": {', deep_meta, 1).encode())
    box = _stage_soon(course, "deeper")
    assert "staged" in box or isinstance(box["error"], intake.NotGraded), box


def test_students_are_listed_without_following_links(hostile):
    from cudacourse.grader import runner

    listed = runner.students_of(str(hostile), A)
    assert "files_student_folder_link" in listed  # listed, so that it is said why
    assert set(samples.FILES) | {"correct"} == set(listed)


def test_file_hashes_do_not_open_pipes_or_follow_links(hostile):
    hashes = intake.file_hashes(hostile / "submitted")
    assert hashes[f"files_timestamp_fifo/{A}/timestamp.txt"].startswith("mode:")
    assert hashes[f"files_link_outside/{A}/{A}.ipynb"].startswith("link:")


def test_a_student_or_assignment_entry_that_is_no_folder_is_named(course):
    (course / "submitted").mkdir()
    os.mkfifo(course / "submitted" / "piper")  # O_DIRECTORY | O_NONBLOCK: never waits
    (course / "submitted" / "filer").mkdir()
    (course / "submitted" / "filer" / A).write_text("a file, not a folder")
    box = _stage_soon(course, "piper")
    assert str(box["error"]) == "piper is not a regular folder (a named pipe)"
    box = _stage_soon(course, "filer")
    assert str(box["error"]) == f"{A} is not a regular folder (a file)"


# --- the collector's time, not the learner's (issue #38 item 2) ------------------------------

def _record(course, student, handed_in):
    from cudacourse.grader import handins

    data = {"version": 1, "students": {student: {"handed_in": handed_in, "source": "exchange"}}}
    return handins.save(course, A, data)


def test_with_a_collector_record_its_time_is_graded_and_the_learners_is_not_read(course):
    from nbgrader.utils import parse_utc

    text = nbformat.writes(_master(course)).encode()
    _submit(course, "s", text, timestamp="2001-01-01 00:00:00 UTC")
    _record(course, "s", "2026-01-12T08:30:00+00:00")
    staged = intake.stage(course, A, "s", course / "staging")
    assert parse_utc((staged.directory / "timestamp.txt").read_text()).isoformat() == \
        "2026-01-12T08:30:00"
    # a garbage learner timestamp no longer matters once the collector has a time
    shutil.rmtree(course / "submitted")
    _submit(course, "s", text, timestamp="not a time at all")
    assert intake.stage(course, A, "s", course / "staging").notebooks
    # an LMS download without a time: no timestamp.txt, so no lateness from the learner
    _record(course, "s", None)
    assert not (intake.stage(course, A, "s", course / "staging").directory /
                "timestamp.txt").exists()


def test_a_record_that_is_not_the_graders_own_file_is_not_believed(course, tmp_path):
    from cudacourse.grader import handins

    _submit(course, "s", nbformat.writes(_master(course)).encode())
    path = handins.path_of(course, A)
    path.parent.mkdir(parents=True)
    elsewhere = tmp_path / "forged.json"
    elsewhere.write_text(json.dumps({"students": {"s": {"handed_in": "2001-01-01T00:00:00"}}}))
    path.symlink_to(elsewhere)
    with pytest.raises(intake.NotGraded, match="cannot be read"):
        intake.stage(course, A, "s", course / "staging")
    path.unlink()
    path.write_text("{not json")
    with pytest.raises(intake.NotGraded, match="not a hand-in record"):
        intake.stage(course, A, "s", course / "staging")
    if os.geteuid() == 0:  # only root can give the grader's file to someone else
        _record(course, "s", "2001-01-01T00:00:00+00:00")
        os.chown(path, 4242, 4242)
        with pytest.raises(intake.NotGraded, match="not the grader's own file"):
            intake.stage(course, A, "s", course / "staging")
