"""The sample class graded by several Dask workers at once into a real PostgreSQL gradebook.

A throwaway PostgreSQL server (Debian's ``postgresql`` package; ``.ci/run`` installs it) is
started in a temporary directory on a free port, as a non-root user. The course is the light
one (tests/lightcourse.py: lesson 1's graded cells, demos dropped, as they decide no score).
The class: right, partly right, blank, hostile, and a late submission under the configured late policy. Three
Dask worker processes write to the gradebook at once; the test then counts the rows (none
lost, none doubled), looks for lock and serialisation errors in every job's log, checks each
score and the penalty, and makes the report and the LMS export from the same gradebook.

Skipped, with the reason, only when no PostgreSQL server binary is installed or it cannot be
started here.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from cudacourse.grader import distributed
from test_exchange import PERCENT_PER_DAY, policy_config
from test_grader_distributed import ASSIGNMENT, FAST, make_course, scores, submit, totals

pytestmark = pytest.mark.grading

CLASS = {"ada": "correct", "bob": "wrong_kernel", "cy": "blank", "dee": "hostile",
         "eve": "correct", "fay": "correct"}
DUE = "2026-11-01 23:59:00 UTC"
ON_TIME = "2026-11-01 12:00:00.000000 UTC"
LATE = {"fay": "2026-11-03 10:00:00.000000 UTC"}  # 34 h late: two started days
LATE_DAYS = 2
WORKERS = 3
DB_TROUBLE = ("database is locked", "deadlock detected", "could not serialize",
              "IntegrityError", "OperationalError", "UniqueViolation")


def _pg_bin() -> Path | None:
    for name in ("pg_ctl", "initdb", "postgres"):
        found = shutil.which(name)
        if found and Path(found).resolve().parent.joinpath("initdb").exists():
            return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    return Path(versions[0]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """initdb + pg_ctl into a temporary directory; as user ``postgres`` when we are root
    (the server refuses to run as root)."""

    def __init__(self) -> None:
        self.bin = _pg_bin()
        if self.bin is None:
            pytest.skip("PostgreSQL is not installed (no initdb): apt-get install postgresql, "
                        "as .ci/run does")
        self.dir = Path(tempfile.mkdtemp(prefix="cudacourse-pg-"))
        self.port = _free_port()
        self.prefix: list[str] = []
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            try:
                import pwd

                pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("running as root and there is no 'postgres' user to run the "
                            "server as (PostgreSQL refuses to run as root)")
            if runuser is None:
                pytest.skip("running as root without runuser: cannot start PostgreSQL as "
                            "another user")
            self.prefix = [runuser, "-u", "postgres", "--"]
            shutil.chown(self.dir, "postgres")
        self.dir.chmod(0o700)

    def _run(self, *cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.prefix, *cmd], capture_output=True, text=True,
                              timeout=120)

    def start(self) -> str:
        data = self.dir / "data"
        init = self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "postgres",
                         "-A", "trust", "-E", "UTF8", "--no-sync")
        if init.returncode != 0:
            pytest.skip(f"PostgreSQL could not be initialised here: {init.stderr[-500:]}")
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c max_connections=100")
        started = self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l",
                            str(self.dir / "server.log"), "-w", "-t", "60", "-o", opts,
                            "start")
        if started.returncode != 0:
            log = (self.dir / "server.log")
            pytest.skip("PostgreSQL could not be started here: " + started.stderr[-300:] +
                        (log.read_text()[-500:] if log.exists() else ""))
        import psycopg

        with psycopg.connect(f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute("CREATE DATABASE gradebook")
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/gradebook"

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast",
                  "-w", "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def postgres():
    server = PostgresServer()
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="module")
def graded(postgres, tmp_path_factory):
    path = tmp_path_factory.mktemp("pg_course")
    course = make_course(path, db=postgres, config=policy_config(DUE))
    stamps = {s: LATE.get(s, ON_TIME) for s in CLASS}
    want = submit(path, course, CLASS, timestamps=stamps)
    start = time.monotonic()
    with distributed.open_executor(distributed.ExecutorChoice("local-cluster",
                                                              workers=WORKERS)) as (ex, desc):
        results, throughput = distributed.grade_all(
            path, ASSIGNMENT, distributed.submitted_students(path, ASSIGNMENT), ex,
            {"db": postgres, **FAST},
            job=distributed.autograde_one, describe=desc)
    print(f"\n{throughput.summary()} ({time.monotonic() - start:.0f} s with cluster start)")
    export = distributed.nbgrader(path, "export", "--to", str(path / "grades.csv"),
                                  db=postgres)
    return {"path": path, "db": postgres, "want": want, "results": results,
            "throughput": throughput, "export": export, "course": course}


def test_every_job_succeeds_without_database_errors(graded):
    results = {r["student"]: r for r in graded["results"]}
    assert sorted(results) == sorted(CLASS)
    assert all(r["ok"] for r in results.values()), results
    trouble = {s: [e for e in r["errors"] if any(t in e for t in DB_TROUBLE)]
               for s, r in results.items()}
    assert not any(trouble.values()), trouble
    assert len({r["pid"] for r in results.values()}) >= 2  # really concurrent workers


def test_no_row_is_lost_or_doubled(graded):
    from nbgrader.api import Gradebook

    graded_cells = [c for c in graded["course"]["learner"].cells
                    if c.metadata.get("nbgrader", {}).get("grade")]
    with Gradebook(graded["db"]) as gb:
        assert sorted(s.id for s in gb.students) == sorted(CLASS)
        subs = gb.assignment_submissions(ASSIGNMENT)
        assert len(subs) == len(CLASS)
        for sub in subs:
            assert len(sub.notebooks) == 1
            grades = sub.notebooks[0].grades
            assert len(grades) == len(graded_cells), sub.student_id
            assert all(g.auto_score is not None for g in grades), sub.student_id


def test_scores_and_the_late_penalty(graded):
    from nbgrader.api import Gradebook

    want = totals(graded["want"])  # every student but the hostile one
    got = scores(graded["db"])
    assert {s: got[s] for s in want} == pytest.approx(want)
    assert got["dee"] < want["ada"]
    with Gradebook(graded["db"]) as gb:
        subs = {s.student_id: s for s in gb.assignment_submissions(ASSIGNMENT)}
        for student, sub in subs.items():
            if student in LATE:
                assert sub.late_submission_penalty == pytest.approx(
                    want[student] * PERCENT_PER_DAY * LATE_DAYS / 100)
            else:
                assert sub.total_seconds_late == 0 and sub.late_submission_penalty == 0


def test_the_export_comes_out_of_postgres(graded):
    import csv

    assert graded["export"].returncode == 0, graded["export"].stderr[-2000:]
    with open(graded["path"] / "grades.csv") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert sorted(rows) == sorted(CLASS)
    assert float(rows["fay"]["late_submission_penalty"]) > 0
    assert rows["fay"]["duedate"].startswith("2026-11-01 23:59")


def test_the_class_report_comes_out_of_postgres(graded):
    import csv

    from cudacourse.grader import classreport

    report = classreport.write(graded["path"], ASSIGNMENT, db_url=graded["db"], plot_png=False)
    with open(report.files["lms"]) as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert sorted(rows) == sorted(CLASS)
    want = totals(graded["want"])
    fay = rows["fay"]
    assert float(fay["late_penalty"]) == pytest.approx(
        want["fay"] * PERCENT_PER_DAY * LATE_DAYS / 100)
    assert float(fay["score"]) == pytest.approx(want["fay"] - float(fay["late_penalty"]))
    assert "late: 1." in report.text  # one late submission in the class line
    assert all(s.graded == len(CLASS) for s in report.summaries)
