"""The gradebook URL never reaches a command line (issue 19, secrets): every nbgrader child
that cudacourse starts gets it in its environment (cudacourse.grader.course.DB_ENV), which the
course's nbgrader_config.py reads; the process list (world-readable argv) shows no password."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from cudacourse.course.authoring import ROOT
from cudacourse.grader import course, distributed, runner, sandbox

PASSWORD = "s3cret-Pw0rd"
URL = f"postgresql+psycopg://grader:{PASSWORD}@db-host:5432/gradebook"


@pytest.fixture
def spawned(monkeypatch):
    """Every subprocess.run / Popen call: (argv, env); nothing is really started."""
    calls: list[tuple[list[str], dict]] = []

    def run(cmd, *args, env=None, **kw):
        calls.append(([str(c) for c in cmd], dict(env or {})))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    def popen(cmd, *args, env=None, **kw):
        calls.append(([str(c) for c in cmd], dict(env or {})))
        raise OSError("not started in this test")

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setattr(subprocess, "Popen", popen)
    return calls


@pytest.fixture
def course_dir(tmp_path):
    """A course with this repository's nbgrader_config.py and one master."""
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    (tmp_path / "solutions" / "a1").mkdir(parents=True)
    (tmp_path / "solutions" / "a1" / "a1.ipynb").write_text("{}")
    return tmp_path


def _no_password(calls):
    assert calls, "nothing was spawned"
    for argv, env in calls:
        assert not any(PASSWORD in a for a in argv), argv
        assert not any("--db" in a for a in argv), argv
        assert env.get(course.DB_ENV) == URL


def test_course_nbgrader_passes_the_url_in_the_environment(spawned, course_dir):
    course.nbgrader(course_dir, "generate_feedback", "a1", db=URL)
    _no_password(spawned)


def test_the_runners_autograde_passes_the_url_in_the_environment(spawned, course_dir):
    o = {"work_dir": str(course_dir / "work"), "output_cap": 1000, "nbgrader_timeout": 5,
         "db_url": URL, "source_dir": "solutions"}
    runner.autograde(str(course_dir), "a1", ["alice", "bob"], o)
    _no_password(spawned)


def test_a_distributed_job_passes_the_url_in_the_environment(spawned, course_dir):
    distributed.autograde_one(str(course_dir), "a1", "alice", {"db": URL})
    _no_password(spawned)


def test_the_course_config_reads_the_url_and_wins_over_its_own_setting(tmp_path, monkeypatch):
    """The lines of this course's nbgrader_config.py that read the URL (its last section,
    run alone: the whole file loads the grader, seconds), after an earlier setting."""
    from traitlets.config import PyFileConfigLoader

    text = (ROOT / "nbgrader_config.py").read_text()
    tail = text[text.index("# --- the gradebook"):]
    assert course.DB_ENV in tail
    (tmp_path / "nbgrader_config.py").write_text(
        'c = get_config()\nc.CourseDirectory.db_url = "sqlite:///elsewhere.db"\n' + tail)

    def db_url() -> str:
        return PyFileConfigLoader("nbgrader_config.py", path=str(tmp_path)).load_config(
            ).CourseDirectory.db_url

    monkeypatch.delenv(course.DB_ENV, raising=False)
    assert db_url() == "sqlite:///elsewhere.db"
    monkeypatch.setenv(course.DB_ENV, URL)
    assert db_url() == URL


def test_a_config_that_does_not_read_the_url_is_refused(spawned, tmp_path):
    (tmp_path / "nbgrader_config.py").write_text('c = get_config()\n')
    with pytest.raises(RuntimeError, match=f"does not read the gradebook URL from .{course.DB_ENV}"):
        course.nbgrader(tmp_path, "autograde", "a1", db=URL)
    assert not spawned
    course.nbgrader(tmp_path, "--version")  # no gradebook, nothing to pass
    assert len(spawned) == 1 and course.DB_ENV not in spawned[0][1]


def test_the_sandbox_never_hands_the_url_to_learner_code(monkeypatch, tmp_path):
    """nbgrader's process has the URL in its environment; the sandboxed commands it starts
    (verdicts, the feedback run) get only the listed variables."""
    monkeypatch.setenv(course.DB_ENV, URL)
    env = sandbox._env(str(tmp_path), None)
    assert course.DB_ENV not in env and not any(PASSWORD in v for v in env.values())
