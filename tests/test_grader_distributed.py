"""Grading a sample class on a real Dask ``distributed.LocalCluster`` (several worker processes).

A light scratch course (tests/lightcourse.py: lesson 1's graded cells, demos dropped, since
only graded cells decide a score and the demos cost most of each run) and a few sample submissions (right, partly right, blank,
hostile) is graded through ``grade_all`` on a LocalCluster of two worker processes; every
submission must come back with its expected score, from more than one worker process. The
helpers at the top (``make_course``, ``scores``) are shared with the other test_grader_*
files.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path

import nbformat
import pytest

from cudacourse.runtime import device
from cudacourse.grader import distributed

import lightcourse

pytestmark = pytest.mark.grading

ASSIGNMENT = "01_gpu_vs_cpu"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
TIMEOUT = int(os.environ.get("CUDACOURSE_GRADING_TIMEOUT", device.pick(sim=30, gpu=30)))
# A small class: one of each kind the report must tell apart.
# nbgrader's own autograde per job; the isolated grader's job is exercised by its own tests.
JOB = distributed.autograde_one
CLASS = {"ada": "correct", "bob": "wrong_kernel", "cy": "blank", "dee": "hostile"}


# For the tests that only need scores: verdicts without the whole-notebook feedback run.
FAST = {"timeout": TIMEOUT, "extra": ["--ResilientExecute.feedback_run=False"]}
KERNEL = "vector_add"  # lesson 1's code exercise (its answer cell's grade_id)
WRONG_KERNEL = '''@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] - b[i]  # wrong: subtracts
'''
# Rebinds what a checker relies on: the grader must not give the kernel's points for it.
ATTACK = "\nimport numpy as np\nnp.allclose = lambda *a, **k: True\n"
KINDS = ("correct", "wrong_kernel", "blank", "hostile")


def graded_cells(nb) -> list[tuple[str, float, str]]:
    """(grade_id, points, source) of every autograded test cell, in notebook order."""
    return [(c.metadata["nbgrader"]["grade_id"], float(c.metadata["nbgrader"]["points"]),
             c.source) for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]


def uses(source: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", source) is not None


def build(kind: str, learner, master) -> tuple[nbformat.NotebookNode, dict | None]:
    """A submission of ``kind`` and the score each test cell must get (None: only the kernel's
    tests are known to score 0, as for a hostile one, whose later cells depend on the grader).

    Built from the learner copy, with the master's answers where the kind answers right, so
    the samples follow the lesson. Demo cells are dropped, as a learner may (it saves time).
    """
    if kind not in KINDS:
        raise ValueError(f"sample kind {kind!r}: one of {KINDS}")
    nb = copy.deepcopy(learner)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in master.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and not meta.get("grade_id"):
            continue
        if meta.get("solution") and kind != "blank":
            cell.source = answers[meta["grade_id"]]
            if meta["grade_id"] == KERNEL and kind in ("wrong_kernel", "hostile"):
                cell.source = WRONG_KERNEL + (ATTACK if kind == "hostile" else "")
        cells.append(cell)
    nb.cells = cells
    want = {}
    for gid, points, src in graded_cells(learner):
        zero = kind == "blank" or (kind != "correct" and uses(src, KERNEL))
        want[gid] = 0.0 if zero else points
    return nb, (None if kind == "hostile" else want)


def make_course(path: Path, db: str | None = None, config: str = "") -> dict:
    """A scratch course: lesson 1's master trimmed to its graded cells (tests/lightcourse.py:
    the demos cost most of each grading and decide no score), its release, the gradebook;
    ``config`` appended to the copied nbgrader_config.py. Returns the learner and master."""
    lightcourse.write(path, config)
    release = distributed.nbgrader(path, "generate_assignment", ASSIGNMENT, "--force",
                                   db=db or distributed.default_db(path))
    assert release.returncode == 0, release.stderr[-3000:]
    learner = nbformat.read(path / "notebooks" / ASSIGNMENT / NOTEBOOK, 4)
    master = nbformat.read(path / "solutions" / ASSIGNMENT / NOTEBOOK, 4)
    return {"learner": learner, "master": master}


def submit(path: Path, course: dict, roster: dict[str, str],
           timestamps: dict[str, str] | None = None) -> dict[str, dict | None]:
    """Write each student's sample into submitted/; return what each test cell must score."""
    want = {}
    for student, kind in roster.items():
        nb, cells = build(kind, course["learner"], course["master"])
        dest = path / "submitted" / student / ASSIGNMENT
        dest.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dest / NOTEBOOK)
        if timestamps and student in timestamps:
            (dest / "timestamp.txt").write_text(timestamps[student])
        want[student] = cells
    return want


def totals(want: dict[str, dict | None]) -> dict[str, float]:
    return {s: sum(c.values()) for s, c in want.items() if c is not None}


def kernel_points(course: dict) -> float:
    return sum(p for _, p, src in graded_cells(course["learner"]) if uses(src, KERNEL))


def cell_scores(db: str) -> dict[str, dict[str, float]]:
    """Each student's score per test cell, from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(db) as gb:
        return {sub.student_id: {g.name: g.score for nb in sub.notebooks for g in nb.grades}
                for sub in gb.assignment_submissions(ASSIGNMENT)}


def scores(db: str) -> dict[str, float]:
    """Each student's raw total for the assignment (before any late penalty), from the
    gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(db) as gb:
        return {s.student_id: s.score for s in gb.assignment_submissions(ASSIGNMENT)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    path = tmp_path_factory.mktemp("dask_course")
    course = make_course(path)
    want = submit(path, course, CLASS)
    choice = distributed.ExecutorChoice("local-cluster", workers=2)
    options = {"timeout": TIMEOUT, "max_restarts": 2}
    with distributed.open_executor(choice) as (executor, described):
        results, throughput = distributed.grade_all(
            path, ASSIGNMENT, distributed.submitted_students(path, ASSIGNMENT), executor,
            options, job=JOB, describe=described)
    print("\n" + throughput.summary())
    return {"path": path, "want": want, "results": results, "throughput": throughput,
            "described": described, "course": course}


def test_every_submission_is_graded_on_the_cluster(graded):
    results = {r["student"]: r for r in graded["results"]}
    assert sorted(results) == sorted(CLASS)
    bad = {s: r for s, r in results.items() if not r.get("ok")}
    assert not bad, bad
    assert "LocalCluster of 2" in graded["described"] and "tcp://" in graded["described"]


def test_scores_match_the_samples(graded):
    got = cell_scores(distributed.default_db(graded["path"]))
    for student, want in graded["want"].items():
        if want is not None:
            assert got[student] == want, student
    kernel = [g for g, _, src in graded_cells(graded["course"]["learner"]) if uses(src, KERNEL)]
    assert kernel and all(got["dee"][g] == 0 for g in kernel)  # the hostile kernel earns nothing
    total = {s: sum(c.values()) for s, c in got.items()}
    assert total["ada"] > total["cy"] == 0
    assert total["ada"] - total["bob"] == kernel_points(graded["course"]) > 0


def test_jobs_ran_in_more_than_one_worker_process(graded):
    # Each Dask worker is its own process: two workers, four jobs -> two distinct pids
    # (unless one worker took every job, which a two-worker cluster with four queued
    # multi-second jobs does not do).
    pids = {r["pid"] for r in graded["results"]}
    assert len(pids) >= 2, pids
    assert os.getpid() not in pids


def test_throughput_is_measured(graded):
    t = graded["throughput"]
    assert t.submissions == len(CLASS)
    assert set(t.seconds) == set(CLASS) and all(s > 0 for s in t.seconds.values())
    assert t.per_minute > 0
    assert t.slowest(1)[0][1] == max(t.seconds.values())
    assert "per minute" in t.summary()


def about_the_submission(incidents: list) -> list:
    """The incidents that concern the submission itself, without the machine's sandbox note
    ("sandbox: NOT isolated: <reason>"), which every submission gets where bubblewrap is
    missing or cannot create namespaces (the GPU machine runs the suite as root without
    bwrap on PATH); tests/test_grader_sandbox.py covers the isolation itself."""
    def text(i):
        return i if isinstance(i, str) else str(i.get("what", i)) if isinstance(i, dict) else i
    return [i for i in incidents if not str(text(i)).startswith("sandbox: ")]


def test_incidents_come_back_from_the_workers(graded):
    results = {r["student"]: r for r in graded["results"]}
    # the hostile sample rebinds np.allclose: the grader notes it (tampering, or a refused
    # construct), and the note travels back from the worker with the result
    assert about_the_submission(results["dee"]["incidents"]), results["dee"]
    assert about_the_submission(results["ada"]["incidents"]) == [], results["ada"]["incidents"]


def test_the_sandbox_note_is_not_about_the_submission():
    note = "sandbox: NOT isolated: bubblewrap (bwrap) is not installed (apt-get install bubblewrap)"
    assert about_the_submission([note]) == []
    tampering = "feedback run (reported from the learner's kernel): tampering: numpy.allclose"
    assert about_the_submission([note, tampering]) == [tampering]


# --- choosing the executor (no cluster needed) ---------------------------------------------

def _args(argv):
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=1)
    distributed.add_arguments(p)
    return p.parse_args(argv)


def test_choice_from_args():
    assert distributed.choice_from_args(_args([])).kind == "serial"
    assert distributed.choice_from_args(_args(["--workers", "3"])).workers == 3
    c = distributed.choice_from_args(_args(["--local-cluster", "4"]))
    assert (c.kind, c.workers) == ("local-cluster", 4)
    c = distributed.choice_from_args(_args(["--scheduler", "tcp://head:8786"]))
    assert (c.kind, c.scheduler) == ("dask", "tcp://head:8786")
    with pytest.raises(distributed.GradingSetupError, match="choose one"):
        distributed.choice_from_args(_args(["--workers", "2", "--local-cluster", "2"]))
    with pytest.raises(distributed.GradingSetupError, match="tcp://host:8786"):
        distributed.choice_from_args(_args(["--scheduler", "head"]))


def test_unreachable_scheduler_is_a_clear_error():
    choice = distributed.ExecutorChoice("dask", scheduler="tcp://127.0.0.1:9",
                                         connect_timeout=2)
    with pytest.raises(distributed.GradingSetupError, match="cannot reach the Dask scheduler"):
        with distributed.open_executor(choice):
            pass


def test_shard_splits_a_class_without_overlap():
    students = [f"s{i:03}" for i in range(10)]
    parts = [distributed.shard(students, i, 3) for i in range(3)]
    assert sorted(sum(parts, [])) == students
    with pytest.raises(ValueError, match="need 0 <= index < count"):
        distributed.shard(students, 3, 3)


def test_a_failing_job_does_not_stop_the_class(tmp_path):
    results, t = distributed.grade_all(tmp_path, ASSIGNMENT, ["x", "y"],
                                       distributed._SerialExecutor(), job=_broken_job)
    assert {r["student"]: r["ok"] for r in results} == {"x": False, "y": True}
    assert "RuntimeError: x is broken" in next(r["error"] for r in results
                                               if r["student"] == "x")


def _broken_job(course_root, assignment, student, options):
    if student == "x":
        raise RuntimeError("x is broken")
    return {"student": student}


def test_default_db_follows_the_course_config(tmp_path):
    assert distributed.default_db(tmp_path) == f"sqlite:///{tmp_path.resolve()}/gradebook.db"
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.db_url = 'postgresql+psycopg://g@db:5432/gb'\n")
    assert distributed.default_db(tmp_path) == "postgresql+psycopg://g@db:5432/gb"


def test_cudacourse_grade_runs_on_a_dask_local_cluster(tmp_path, capsys):
    """The command instructors run: `cudacourse grade --local-cluster 2`; it prints the
    throughput."""
    from cudacourse import cli

    course = make_course(tmp_path)
    want = totals(submit(tmp_path, course, {"ann": "correct", "ben": "wrong_kernel"}))
    rc = cli.main(["grade", ASSIGNMENT, "--course", str(tmp_path), "--local-cluster", "2",
                   "--timeout", str(TIMEOUT), "--no-feedback-run", "--no-progress"])
    out = capsys.readouterr()
    assert rc == 0, out
    assert "2 submission(s) in" in out.out and "per minute" in out.out
    assert "Dask LocalCluster of 2 worker process(es)" in out.out
    # the run is stamped with what graded it
    from cudacourse.grader import provenance

    (record,) = provenance.history(tmp_path, ASSIGNMENT)
    assert f"provenance: {record}" in out.out
    stamp = json.loads(record.read_text())["stamp"]
    assert stamp["cudacourse"] and "cudacourse/check/vector.py" in stamp["scored_by"]
    assert scores(distributed.default_db(tmp_path)) == pytest.approx(want)


def test_grading_hides_the_configured_exchange_and_honours_the_configured_db(tmp_path):
    """runner._opts: no --db means the config's CourseDirectory.db_url; an Exchange.root
    set there is hidden from every sandbox like the course root."""
    from cudacourse.grader import runner

    exchange = tmp_path / "exchange"
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.db_url = 'postgresql+psycopg://g@db:5432/gb'\n"
        f"c.Exchange.root = {str(exchange)!r}\n")
    o = runner._opts(str(tmp_path), ASSIGNMENT, {"sandbox": {"hide": ["/x"]}})
    assert o["db_url"] == "postgresql+psycopg://g@db:5432/gb"
    assert o["sandbox"]["hide"] == sorted(["/x", str(exchange.resolve())])
    assert runner._opts(str(tmp_path), ASSIGNMENT, {"db_url": "sqlite:///g.db"})[
        "db_url"] == "sqlite:///g.db"


def test_workers_default_to_the_cores_and_gpus_are_counted():
    assert distributed.default_workers() == len(os.sched_getaffinity(0))
    want = device.current().gpu.device_count if device.current().mode == "gpu" else 0
    assert distributed.gpu_count() == want


def test_cli_grades_on_every_core_by_default(monkeypatch):
    """No --workers: cudacourse grade passes default_workers() on (it used to be 2)."""
    from cudacourse import cli
    from cudacourse.grader import runner

    seen = {}

    def fake_grade_class(course, assignment, **kw):
        seen.update(kw)
        raise FileNotFoundError("stop here")

    monkeypatch.setattr(runner, "grade_class", fake_grade_class)
    assert cli.main(["grade", "01_gpu_vs_cpu", "--course", "/nonexistent"]) == 2
    assert seen["workers"] == distributed.default_workers()
    assert seen["executor_name"] == f"{seen['workers']} thread worker(s)"
