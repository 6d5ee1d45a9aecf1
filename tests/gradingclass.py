"""The sample class of lesson 1, graded once per test session (conftest's ``graded_class``).

A light scratch course (tests/lightcourse.py: lesson 1's graded cells, demos dropped, since
only they decide a score and the demos cost most of each submission's run) with its own
gradebook: release (generate_assignment), every sample of tests/submissions/samples.py in
submitted/, ``cudacourse grade`` (sandboxed, default workers), then nbgrader's own feedback
and export, ``cudacourse report``, and plain ``nbgrader autograde`` on a copy of one hostile
submission. tests/test_grading.py checks it; any other test may read it (ask for the
``graded_class`` fixture; see tests/conftest.py).

Timeouts: a verdict (a test cell's checks) gets ``TIMEOUT`` s, generous, since the simulator
needs a few seconds for a checker under load. The feedback run's cells get
``FEEDBACK_TIMEOUT`` s (``cudacourse grade --feedback-timeout``): there only the learner's
own cells run (definitions, answers; test cells are blanked), and the samples that loop
forever wait it out on purpose, so a short one saves the class minutes without changing a
score (points never come from the feedback run).
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from cudacourse.course import authoring
from cudacourse.runtime import device
from cudacourse.grader import intake
from cudacourse.grader import sandbox as sbx

import lightcourse

ROOT = authoring.ROOT
A = "01_gpu_vs_cpu"
TIMEOUT = int(os.environ.get("CUDACOURSE_GRADING_TIMEOUT", device.pick(sim=30, gpu=30)))
FEEDBACK_TIMEOUT = int(os.environ.get("CUDACOURSE_GRADING_FEEDBACK_TIMEOUT",
                                      device.pick(sim=8, gpu=5)))
ISOLATED, WHY = sbx.isolation(sbx.Sandbox())
PLAIN_STUDENT = "plain_nbgrader_forge_displayhook"
_RUNS = ("proc", "feedback", "export", "plain", "report")


def _load_samples():
    spec = importlib.util.spec_from_file_location(
        "grading_samples", ROOT / "tests" / "submissions" / "samples.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["grading_samples"] = module
    spec.loader.exec_module(module)
    return module


samples = sys.modules.get("grading_samples") or _load_samples()


def env() -> dict[str, str]:
    out = dict(os.environ)
    # nbgrader runs `alembic` as a subprocess: this environment's bin/ must be on PATH.
    out["PATH"] = str(Path(sys.executable).parent) + os.pathsep + out.get("PATH", "")
    return out


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbgrader", *args,
                           f"--db=sqlite:///{course}/gradebook.db"], cwd=course, env=env(),
                          capture_output=True, text=True, timeout=900)


def gradebook_scores(course: Path) -> dict[str, dict[str, float]]:
    """Each student's score per test cell of the class, from its gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    out = {}
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        for student in gb.students:
            try:
                nb = gb.find_submission_notebook(A, A, student.id)
            except MissingEntry:
                continue
            out[student.id] = {g.name: g.score for g in nb.grades}
    return out


def shared(sole_reader: bool = False) -> Iterator[dict[str, Any]]:
    """The graded class (see the module docstring), built once per test session even when
    pytest-xdist runs its readers on several workers (without ``--dist loadgroup``): they
    share a per-run directory, a lock and a record of what was run. ``sole_reader``: this
    process runs every reader (``--dist loadgroup``), so it removes the class after."""
    # Not under pytest's basetemp: other pytest sessions on the machine rotate those away.
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"{os.getpid()}"
    base = Path(tempfile.gettempdir()) / f"cudacourse-grading-class-{run_id}"
    base.mkdir(exist_ok=True)
    course = base / "course"
    with open(base / "grading-class.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        record = base / "grading-class.json"
        if not record.exists():
            shutil.rmtree(course, ignore_errors=True)
            record.write_text(json.dumps(grade_the_class(course)))
    g = json.loads(record.read_text())
    g["dir"] = Path(g["dir"])
    for key in _RUNS:
        g[key] = subprocess.CompletedProcess(*g[key])
    yield g
    # (with xdist spreading the readers, another worker may still read: then it stays)
    if sole_reader or not os.environ.get("PYTEST_XDIST_WORKER"):
        shutil.rmtree(base, ignore_errors=True)


def grade_the_class(course: Path) -> dict[str, Any]:
    course.mkdir()
    # lesson 1's graded cells only (tests/lightcourse.py); the late sample's deadline
    lightcourse.write(course, f"c.CoursePolicy.due = {{{A!r}: {samples.DUE!r}}}\n"
                              "c.LatePenalty.penalty_method = 'percent_per_day'\n"
                              f"c.LatePenalty.percent_per_day = {samples.PERCENT_PER_DAY}")
    release = nbgrader(course, "generate_assignment", A, "--force")
    assert release.returncode == 0, release.stderr
    learner = course / "notebooks" / A / f"{A}.ipynb"
    want = samples.write(course, learner, course / "solutions" / A / f"{A}.ipynb",
                         isolated=ISOLATED, home=os.path.expanduser("~"))
    before = intake.file_hashes(course / "submitted")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cudacourse.cli", "grade", A, "--course",
                           str(course), "--timeout", str(TIMEOUT),  # workers: the cores
                           "--feedback-timeout", str(FEEDBACK_TIMEOUT), "--no-progress"],
                          cwd=course, env=env(), capture_output=True, text=True, timeout=3000)
    seconds = time.monotonic() - start
    time.sleep(6)  # the gradebook saboteur would strike 4 s after its notebook ran
    print(f"\ncudacourse grade: {len(want)} samples in {seconds:.0f} s ({WHY})")
    feedback = nbgrader(course, "generate_feedback", A, "--force")
    export = nbgrader(course, "export", "--to", str(course / "grades.csv"))
    report = subprocess.run([sys.executable, "-m", "cudacourse.cli", "report", A, "--course",
                             str(course), "--no-plot"], cwd=course, env=env(),
                            capture_output=True, text=True, timeout=900)
    # Plain nbgrader, without `cudacourse grade`, on a copy of one hostile submission.
    plain_dir = course / "plain-submitted"
    shutil.copytree(course / "submitted" / "forge_displayhook", plain_dir / PLAIN_STUDENT)
    plain = nbgrader(course, "autograde", A, f"--student={PLAIN_STUDENT}", "--force",
                     f"--CourseDirectory.submitted_directory={plain_dir}",
                     f"--ResilientExecute.timeout={TIMEOUT}")

    def keep(p: subprocess.CompletedProcess) -> list:
        return [p.args, p.returncode, p.stdout, p.stderr]

    return {"dir": str(course), "want": want, "proc": keep(proc), "before": before,
            "seconds": seconds, "feedback": keep(feedback), "export": keep(export),
            "report": keep(report), "plain": keep(plain),
            "plain_scores": gradebook_scores(course).get(PLAIN_STUDENT),
            "run": json.loads((course / "grading" / A / "latest.json").read_text())}
