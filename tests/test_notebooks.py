"""Every lesson: masters execute and validate, learner copies are fresh and fail unfilled.

Runs in whatever mode the suite runs in (simulator on CPU machines, the GPU when there is
one). Set CUDACOURSE_NB_OUT=DIR to keep the executed masters (the GPU workflow uploads them).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from cudacourse.course import authoring
from lightcourse import graded_part

pytestmark = pytest.mark.notebooks

LESSONS = authoring.lessons()


def _marks(lesson: Path):
    return [getattr(pytest.mark, f"lesson{int(lesson.stem[:2])}")]


def _params(shared: bool = False):
    """One param per lesson; ``shared``: for the tests that read the master's one execution
    (``_master_validated``), which one pytest-xdist worker runs together (``--dist
    loadgroup``, tests/conftest.py), so the others never wait on its lock."""
    return [pytest.param(lesson, id=lesson.stem, marks=_marks(lesson) + (
                [pytest.mark.xdist_group(f"master-{lesson.stem}")] if shared else []))
            for lesson in LESSONS]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("CUDACOURSE_QUIET", None)
    return env


def _validate(path: Path, keep: Path | None = None) -> subprocess.CompletedProcess:
    """``nbgrader validate PATH``: nbgrader's own app, configuration and output. With ``keep``,
    the notebook it executed is also written there (with nbclient's per-cell timing) beside
    ``keep.with_suffix('.json')`` (the cell timeout), so one execution feeds every check."""
    env = _env()
    if keep is not None:
        env["CUDACOURSE_VALIDATED_OUT"] = str(keep)
    return subprocess.run([sys.executable, "-c", _KEEPING_VALIDATE, str(path)],
                          capture_output=True, text=True, env=env, timeout=1800,
                          cwd=authoring.ROOT)


# `nbgrader validate` itself (nbgrader's app, nbgrader_config.py, its stdout), with the one
# change that the Validator also saves the notebook it executed (CUDACOURSE_VALIDATED_OUT).
_KEEPING_VALIDATE = """
import json, os, sys
import nbformat
from nbgrader.apps import nbgraderapp, validateapp
from nbgrader.preprocessors import Execute
from nbgrader.validator import Validator

class KeepingValidator(Validator):
    def _preprocess(self, nb):
        nb = super()._preprocess(nb)
        out = os.environ.get("CUDACOURSE_VALIDATED_OUT")
        if out:
            nbformat.write(nb, out)
            with open(out[:-len(".ipynb")] + ".json", "w") as fh:
                json.dump({"timeout": Execute(parent=self).timeout}, fh)
        return nb

validateapp.Validator = KeepingValidator
sys.argv = ["nbgrader", "validate", *sys.argv[1:]]
sys.exit(nbgraderapp.main())
"""


def _cell_seconds(cell) -> float | None:
    """Seconds nbclient recorded for one executed cell (record_timing), None if none."""
    from datetime import datetime

    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return None
    parse = lambda t: datetime.fromisoformat(t.replace("Z", "+00:00"))  # noqa: E731
    return (parse(end) - parse(start)).total_seconds()


@pytest.fixture(scope="module")
def validated_dir():
    """Where the executed masters of this run are kept: per pytest-xdist run (the workers
    share it), or a fresh directory for a run without xdist (removed at the end)."""
    import shutil
    import tempfile

    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run_id:
        base = Path(tempfile.gettempdir()) / f"cudacourse-notebooks-{run_id}"
        base.mkdir(exist_ok=True)
        yield base
        return
    base = Path(tempfile.mkdtemp(prefix="cudacourse-notebooks-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _master_validated(lesson: Path, base: Path) -> dict:
    """The master validated once per test session (``nbgrader validate`` executes it), shared
    by the tests that need an executed master, even across pytest-xdist workers (a lock and
    a record in a per-run directory, like tests/test_grading.py's class)."""
    import fcntl
    import json

    record = base / f"{lesson.stem}.record.json"
    with open(base / f"{lesson.stem}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            keep = base / f"{lesson.stem}.ipynb"
            start = time.perf_counter()
            p = _validate(authoring.master_path(lesson), keep=keep)
            seconds = time.perf_counter() - start
            record.write_text(json.dumps({"stdout": p.stdout, "stderr": p.stderr,
                                          "returncode": p.returncode, "seconds": seconds,
                                          "executed": str(keep) if keep.exists() else None}))
    return json.loads(record.read_text())


@pytest.mark.parametrize("lesson", _params())
def test_master_is_fresh(lesson):
    want = authoring.render(authoring.master_notebook(lesson))
    assert authoring.master_path(lesson).read_text() == want, \
        f"{authoring.master_path(lesson)} is stale: run ./course build"


@pytest.mark.parametrize("lesson", _params())
def test_learner_copy_is_a_fresh_generation(lesson):
    fresh = authoring.generate_release(lesson.stem)
    assert authoring.release_path(lesson).read_text() == fresh, \
        f"{authoring.release_path(lesson)} is stale: run ./course build"


@pytest.mark.parametrize("lesson", _params(shared=True))
def test_master_executes_without_errors(lesson, validated_dir):
    """Every cell of the master runs without an error (nor a cell timeout), executed as
    nbgrader validate executes it (its cell timeout, the lesson's own directory)."""
    import json

    v = _master_validated(lesson, validated_dir)
    assert v["executed"], f"nbgrader validate executed nothing:\n{v['stdout']}{v['stderr']}"
    nb = nbformat.read(v["executed"], as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), "a code cell did not run"
    errors = [(i, o.get("ename"), o.get("evalue", "")[:300]) for i, c in enumerate(nb.cells)
              if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, errors
    out = os.environ.get("CUDACOURSE_NB_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, Path(out) / f"{lesson.stem}.ipynb")
    # Per-cell cost, for the goal that no cell comes near its timeout (docs/testing.md):
    # reported, never asserted (a loaded machine would make such a test flaky).
    timeout = json.loads(Path(v["executed"][:-len(".ipynb")] + ".json").read_text())["timeout"]
    times = sorted(((_cell_seconds(c) or 0.0, i) for i, c in enumerate(nb.cells)
                    if c.cell_type == "code"), reverse=True)
    slow = ", ".join(f"cell {i} {s:.1f} s" for s, i in times[:3])
    print(f"{lesson.stem}: validated in {v['seconds']:.1f} s; slowest {slow} "
          f"(cell timeout {timeout} s, a quarter is {timeout / 4:.0f} s)")


@pytest.mark.parametrize("lesson", _params(shared=True))
def test_master_passes_nbgrader_validate(lesson, validated_dir):
    v = _master_validated(lesson, validated_dir)
    assert "Success! Your notebook passes all the tests." in v["stdout"], \
        v["stdout"] + v["stderr"]


@pytest.mark.parametrize("lesson", _params())
def test_unfilled_learner_copy_fails_validate(lesson, tmp_path):
    """Unfilled, the learner copy fails validate: each graded cell is executed (with what it
    uses); every answer cell still raises NotImplementedError and every test cell fails."""
    copy = authoring.release_path(lesson)
    p = _validate(graded_part(copy, tmp_path))
    assert "Success!" not in p.stdout
    assert "VALIDATION FAILED" in p.stdout, p.stdout + p.stderr
    graded = [c for c in nbformat.read(copy, 4).cells
              if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded and f"VALIDATION FAILED ON {len(graded)} CELL(S)" in p.stdout, p.stdout
