"""tests/conftest.py's sharing: every test that reads a fixture in SHARED is in that fixture's
pytest-xdist group (one worker builds it once under ``--dist loadgroup``); other tests are in
none. Checked on the real collection of the class-building files, in a pytest subprocess
(collection only: nothing is built)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudacourse.course import authoring

# A plugin for the subprocess: each collected test's xdist groups and fixtures, as JSON
# (in an xdist worker too, where only a run collects: there -k deselects every test).
DUMP = '''
import json, os
SEEN = []
def pytest_deselected(items):  # -k: the worker's tests, none of them run
    SEEN.extend(items)
def pytest_collection_finish(session):
    out = {i.nodeid: {"groups": [m.args[0] for m in i.iter_markers("xdist_group")],
                      "fixtures": list(i.fixturenames)} for i in [*session.items, *SEEN]}
    with open(os.environ["SHARING_DUMP"], "w") as fh:
        json.dump(out, fh)
'''
FILES = ["tests/test_arrays.py",  # (no slow test: collected after the others)
         "tests/test_grader_postgres.py", "tests/test_grader_distributed.py",
         "tests/test_exchange.py", "tests/test_notebooks.py",
         "tests/test_grading.py"]  # (reads the graded class: collected first)


def _collected(tmp_path: Path, *xdist: str) -> dict[str, dict]:
    (tmp_path / "sharing_dump.py").write_text(DUMP)
    env = {**os.environ, "SHARING_DUMP": str(tmp_path / "dump.json"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    how = list(xdist) or ["--collect-only"]  # (xdist collects in its workers, for a run)
    p = subprocess.run([sys.executable, "-m", "pytest", *how, "-q", "-p", "sharing_dump",
                        "-p", "no:cacheprovider", *FILES],
                       cwd=authoring.ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode in (0, 5), p.stdout[-2000:] + p.stderr[-2000:]  # 5: none selected
    return json.loads((tmp_path / "dump.json").read_text())


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> dict[str, dict]:
    return _collected(tmp_path_factory.mktemp("sharing"))


def test_readers_of_a_shared_fixture_are_one_group_and_others_none(collected):
    items = collected
    grading = {k: v for k, v in items.items() if k.startswith("tests/test_grading.py::")}
    assert grading and all(v["groups"] == ["graded_class"] for v in grading.values())
    # a module's server and the class graded into it: one group, that file's
    pg = {k: v for k, v in items.items() if k.startswith("tests/test_grader_postgres.py::")
          and "postgres" in v["fixtures"]}
    assert pg and all(v["groups"] == ["test_grader_postgres.py"] for v in pg.values())
    # another file's fixture of the same name is another build
    dist = {k: v for k, v in items.items() if k.startswith("tests/test_grader_distributed.py::")}
    assert {tuple(v["groups"]) for v in dist.values() if "graded" in v["fixtures"]} == {
        ("test_grader_distributed.py",)}
    assert any(v["groups"] == [] for v in dist.values())  # unit tests there go anywhere
    ex = [v for k, v in items.items() if k.startswith("tests/test_exchange.py::")]
    assert {tuple(v["groups"]) for v in ex if "exchanged" in v["fixtures"]} == {
        ("test_exchange.py",)}


def test_modules_with_slow_tests_are_collected_first(collected):
    """conftest's _heavy_modules_first: the graded class's readers first (the longest
    build), then the modules with a test marked grading or notebooks, then the others
    (xdist hands them out in this order), every module whole, in its order among its kind."""
    files = [k.split("::")[0] for k in collected]  # (the dump keeps the collection order)
    runs = [f for i, f in enumerate(files) if i == 0 or files[i - 1] != f]
    assert runs == [FILES[-1], *FILES[1:-1], FILES[0]], runs


def test_a_master_s_two_readers_are_one_group_per_lesson(collected):
    items = collected
    for lesson in authoring.lessons():
        readers = [v["groups"] for k, v in items.items() if k.startswith(
            "tests/test_notebooks.py::test_master_") and f"[{lesson.stem}]" in k
            and "validated_dir" in v["fixtures"]]
        assert readers == [[f"master-{lesson.stem}"]] * 2, (lesson.stem, readers)


def test_the_suite_collects_without_xdist(tmp_path):
    """``-p no:xdist`` (or pytest-xdist not installed): the groups are still marked, on a
    registered marker (pyproject.toml), so --strict-markers does not stop the run."""
    items = _collected(tmp_path, "--collect-only", "-p", "no:xdist")
    grading = [v for k, v in items.items() if k.startswith("tests/test_grading.py::")]
    assert grading and all(v["groups"] == ["graded_class"] for v in grading)
    assert not any("@" in k for k in items)  # no worker: no group in the node ids


def test_under_loadgroup_a_worker_s_node_ids_carry_the_group(tmp_path):
    """What xdist's scheduler reads (the group after '@' in the node id), as ./course test
    runs it: in a worker's collection (pytest >= 9 broke xdist 3.8's own suffix)."""
    if importlib.util.find_spec("xdist") is None:
        pytest.skip("pytest-xdist is not installed here: no worker to collect in")
    items = _collected(tmp_path, "-n", "1", "--dist", "loadgroup", "-k", "no_test_has_this")
    grading = [k for k in items if k.startswith("tests/test_grading.py::")]
    assert grading and all(k.endswith("@graded_class") for k in grading)
    assert any(k.endswith("]@master-01_gpu_vs_cpu") for k in items)
    fresh = [k for k in items if "test_master_is_fresh" in k]
    assert fresh and not any("@" in k for k in fresh)


def _fake_class(course: Path) -> dict:
    """What grade_the_class records, without grading anything."""
    course.mkdir()
    run = [["cmd"], 0, "", ""]
    return {"dir": str(course), "want": {}, "proc": run, "before": {}, "seconds": 0.0,
            "feedback": run, "export": run, "report": run, "plain": run, "plain_scores": None,
            "run": {"results": []}}


@pytest.mark.parametrize("worker, sole, kept", [
    ("", False, False),  # no xdist: this process was the only reader
    ("gw0", False, True),  # xdist spreading the readers: another worker may still read
    ("gw0", True, False),  # --dist loadgroup: every reader ran here
])
def test_the_graded_class_is_built_once_and_removed_by_its_last_reader(
        monkeypatch, tmp_path, worker, sole, kept):
    import gradingclass

    built = []
    monkeypatch.setattr(gradingclass, "grade_the_class",
                        lambda course: built.append(course) or _fake_class(course))
    monkeypatch.setattr(gradingclass.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "run1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    first, second = gradingclass.shared(sole), gradingclass.shared(sole)
    a, b = next(first), next(second)  # two readers of one session
    assert len(built) == 1 and a["dir"] == b["dir"] and a["proc"].returncode == 0
    for reader in (first, second):
        with pytest.raises(StopIteration):
            next(reader)
    assert (tmp_path / "cudacourse-grading-class-run1").exists() == kept
