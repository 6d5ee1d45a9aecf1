"""The Japanese edition grades like the English one: its masters pass `nbgrader validate`,
its unfilled learner copies fail it, and the verdicts on a submission do not depend on the
edition it came from. Executes notebooks: slow (marked notebooks / grading)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from cudacourse.course import authoring
from lightcourse import graded_part

EDITIONS = [p for p in authoring.lessons() if "ja" in authoring.editions(p)]


def _params():
    return [pytest.param(p, id=p.stem, marks=[getattr(pytest.mark, f"lesson{int(p.stem[:2])}")])
            for p in EDITIONS]


def _validate(path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("CUDACOURSE_QUIET", None)
    env.pop("CUDACOURSE_LANG", None)  # the notebook's own setup cell chooses Japanese
    return subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(path)],
                          capture_output=True, text=True, env=env, timeout=900,
                          cwd=authoring.ROOT)


@pytest.mark.notebooks
@pytest.mark.parametrize("lesson", _params())
def test_japanese_master_passes_nbgrader_validate(lesson, tmp_path):
    """Its graded cells with the setup (which chooses Japanese) and what they use, in every
    mode: every code cell of the Japanese master is the English master's
    (test_i18n_translations), whose demos test_notebooks executes, and they print the same.
    The whole Japanese master is executed once, in tools/gpu/verify.sh's masters stage on a
    GPU (35-55 s a lesson there; minutes in the simulator)."""
    master = authoring.master_path(lesson, lang="ja")
    p = _validate(graded_part(master, tmp_path))
    assert "Success! Your notebook passes all the tests." in p.stdout, p.stdout + p.stderr


@pytest.mark.notebooks
@pytest.mark.parametrize("lesson", _params())
def test_unfilled_japanese_learner_copy_fails_validate(lesson, tmp_path):
    p = _validate(graded_part(authoring.release_path(lesson, lang="ja"), tmp_path))
    assert "Success!" not in p.stdout
    assert "VALIDATION FAILED" in p.stdout, p.stdout + p.stderr
    # its feedback is in Japanese: a quiz answer left unfilled is named in Japanese
    assert "答え" in p.stdout or "問題" in p.stdout or "NotImplementedError" in p.stdout


@pytest.mark.grading
@pytest.mark.parametrize("lesson", _params())
def test_verdicts_do_not_depend_on_the_edition(lesson, tmp_path):
    """A Japanese learner copy, partly filled, graded against the Japanese and against the
    English master: the same cell verdicts, so the same scores."""
    from cudacourse.grader import prepare

    sub = nbformat.read(authoring.release_path(lesson, lang="ja"), 4)
    ja_master = nbformat.read(authoring.master_path(lesson, lang="ja"), 4)
    en_master = nbformat.read(authoring.master_path(lesson), 4)
    # fill the answer cells with the master's solutions, except every other one
    solutions = {c.id: c.source for c in ja_master.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    for k, cell in enumerate(c for c in sub.cells if c.id in solutions):
        if k % 2 == 0:
            cell.source = solutions[cell.id]
    got = {}
    for name, master in (("ja", ja_master), ("en", en_master)):
        result = prepare.prepare(sub, master, course_root=str(tmp_path / name),
                                 options={"timeout": 300, "feedback_run": False})
        got[name] = {g: v["status"] for g, v in result["cells"].items()}
    assert got["ja"] == got["en"]
    assert "pass" in got["ja"].values() and set(got["ja"].values()) - {"pass"}
