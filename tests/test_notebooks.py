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
from nbclient import NotebookClient

from cudacourse import authoring

pytestmark = pytest.mark.notebooks

LESSONS = authoring.lessons()


def _marks(lesson: Path):
    return [getattr(pytest.mark, f"lesson{int(lesson.stem[:2])}")]


def _params():
    return [pytest.param(lesson, id=lesson.stem, marks=_marks(lesson)) for lesson in LESSONS]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("CUDACOURSE_QUIET", None)
    return env


def _validate(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(path)],
                          capture_output=True, text=True, env=_env(), timeout=900,
                          cwd=authoring.ROOT)


@pytest.mark.parametrize("lesson", _params())
def test_master_is_fresh(lesson):
    want = authoring.render(authoring.to_notebook(lesson.read_text(), str(lesson)))
    assert authoring.master_path(lesson).read_text() == want, \
        f"{authoring.master_path(lesson)} is stale: run ./course build"


@pytest.mark.parametrize("lesson", _params())
def test_learner_copy_is_a_fresh_generation(lesson):
    fresh = authoring.generate_release(lesson.stem)
    assert authoring.release_path(lesson).read_text() == fresh, \
        f"{authoring.release_path(lesson)} is stale: run ./course build"


@pytest.mark.parametrize("lesson", _params())
def test_master_executes_without_errors(lesson):
    nb = nbformat.read(authoring.master_path(lesson), as_version=4)
    start = time.perf_counter()
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(authoring.ROOT)}})
    old = dict(os.environ)
    os.environ.update(_env())
    try:
        client.execute()
    finally:
        os.environ.clear()
        os.environ.update(old)
        out = os.environ.get("CUDACOURSE_NB_OUT")
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, Path(out) / f"{lesson.stem}.ipynb")
    print(f"{lesson.stem}: executed in {time.perf_counter() - start:.1f} s")


@pytest.mark.parametrize("lesson", _params())
def test_master_passes_nbgrader_validate(lesson):
    p = _validate(authoring.master_path(lesson))
    assert "Success! Your notebook passes all the tests." in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("lesson", _params())
def test_unfilled_learner_copy_fails_validate(lesson):
    p = _validate(authoring.release_path(lesson))
    assert "Success!" not in p.stdout
    assert "VALIDATION FAILED" in p.stdout, p.stdout + p.stderr
