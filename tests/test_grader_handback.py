"""The way back to the students: release_feedback and fetch_feedback for every student.

A course folder as ``cudacourse grade`` and ``nbgrader generate_feedback`` leave it (the
learner's files under ``learner-files/``, nothing at the top of ``feedback/`` but the grader's
own), with one student of each way in: ``ex`` through the exchange (its submit's secret in
its cache and among its files), ``zip`` from an LMS download (no secret, a hand-in time),
``home`` from a copied home folder (no secret, no time), ``forger`` whose secret is
not nbgrader's (a path, in its files) and ``twin`` (who hands in ``ex``'s secret in the last
test). Then
nbgrader's own ``release_feedback`` and, as ``ex``, ``fetch_feedback``.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from cudacourse.grader import handback, intake

A = "01_gpu_vs_cpu"
COURSE_ID = "cudacourse"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def _nbgrader(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def course(tmp_path, monkeypatch) -> dict:
    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", _env()["PATH"])  # nbgrader runs alembic by name

    root, exchange = tmp_path / "course", tmp_path / "exchange"
    root.mkdir()
    exchange.mkdir()
    db = f"sqlite:///{root}/gradebook.db"
    secret = secrets.token_hex(64)
    files = {"ex": {handback.SECRET: secret}, "zip": {}, "home": {"data.csv": "1,2"},
             "forger": {handback.SECRET: "../../etc/passwd"}, "twin": {}}
    times = {"ex": datetime(2027, 1, 10, 9, 0, 0), "zip": datetime(2027, 1, 10, 9, 30, 0),
             "forger": datetime(2027, 1, 10, 8, 0, 0), "twin": datetime(2027, 1, 10, 8, 1)}
    with Gradebook(db, COURSE_ID) as gb:
        gb.add_assignment(A)
        for student in files:
            gb.add_student(student)
            gb.add_submission(A, student, **({"timestamp": times[student]}
                                             if student in times else {}))
    for student, learner in files.items():
        for step in ("autograded", "feedback"):
            d = root / step / student / A
            (d / intake.LEARNER_FILES).mkdir(parents=True)
            for name, text in learner.items():
                (d / intake.LEARNER_FILES / name).write_text(text)
        (root / "autograded" / student / A / f"{A}.ipynb").write_text("{}")
        (root / "feedback" / student / A / f"{A}.html").write_text(f"<p>for {student}</p>")
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(root)!r}\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n")
    return {"root": root, "exchange": exchange, "db": db, "secret": secret, "times": times,
            "tmp": tmp_path}


def test_release_feedback_fails_without_the_records(course):
    """The control: nbgrader's release needs what the grader writes (issue 39, item 1)."""
    proc = _nbgrader(course["root"], "release_feedback", A)
    assert proc.returncode != 0
    assert "timestamp.txt" in proc.stderr or handback.SECRET in proc.stderr


def test_every_student_is_released_and_the_exchange_student_fetches_theirs(course):
    root = course["root"]
    done = handback.keep(root, A, course["db"])
    r = done.students
    assert r["ex"]["secret_from"] == "exchange" and r["ex"]["secret"] == course["secret"]
    for who in ("zip", "home", "forger", "twin"):
        assert r[who]["secret_from"] == "grader", who
        assert len(r[who]["secret"]) == 128 and r[who]["secret"] != course["secret"]
    assert r["zip"]["time_from"] == "gradebook"
    assert r["zip"]["timestamp"] == "2027-01-10 09:30:00.000000 UTC"
    assert r["home"]["time_from"] == "graded"
    for student in r:  # the grader's records, at the top of both folders
        for step in ("autograded", "feedback"):
            d = root / step / student / A
            assert (d / handback.SECRET).read_text() == r[student]["secret"]
            assert (d / handback.STAMP).read_text() == r[student]["timestamp"]
    lines = "\n".join(done.lines())
    assert "home: feedback to hand back through the LMS" in lines
    assert "forger" in lines and "not in nbgrader's form" in lines
    assert "home: no hand-in time" in lines and "zip: no hand-in time" not in lines
    kept = json.loads((root / "grading" / A / "handback.json").read_text())
    assert oct((root / "grading" / A / "handback.json").stat().st_mode & 0o777) == "0o600"
    again = handback.keep(root, A, course["db"]).students  # a grader-made secret is kept
    assert again["home"]["secret"] == kept["home"]["secret"] == r["home"]["secret"]

    proc = _nbgrader(root, "release_feedback", A)
    assert proc.returncode == 0, proc.stderr[-2000:]
    released = sorted(p.name for p in (course["exchange"] / COURSE_ID / "feedback").iterdir())
    assert len(released) == 5, released

    # ex, as nbgrader submit left its cache, fetches its own feedback into its folder
    home = course["tmp"] / "home" / "ex"
    cache = home / "cache"
    stamp = "2027-01-10 09:00:00.000000 UTC"
    sub = cache / COURSE_ID / f"ex+{A}+{stamp}"
    sub.mkdir(parents=True)
    (sub / f"{A}.ipynb").write_text("{}")
    (sub / handback.SECRET).write_text(course["secret"])
    (sub / "timestamp.txt").write_text(stamp)
    proc = _nbgrader(home, "fetch_feedback", A, f"--Exchange.root={course['exchange']}",
                     f"--Exchange.cache={cache}", f"--CourseDirectory.course_id={COURSE_ID}",
                     "--CourseDirectory.student_id=ex", f"--Exchange.assignment_dir={home}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    fetched = home / A / "feedback" / stamp / f"{A}.html"
    assert fetched.read_text() == "<p>for ex</p>"


def test_a_shared_secret_is_nobodys(course):
    """Two submissions with one secret would release to one file: the second to fetch
    would read the first's feedback. Neither keeps it."""
    twin = course["root"] / "autograded" / "twin" / A / intake.LEARNER_FILES / handback.SECRET
    twin.write_text(course["secret"])
    r = handback.keep(course["root"], A, course["db"]).students
    assert r["ex"]["secret_from"] == r["twin"]["secret_from"] == "grader"
    assert "same secret" in r["twin"]["why"]
    assert len({s["secret"] for s in r.values()}) == len(r)
