"""Grading a whole sample class of lesson 1 with ``cudacourse grade``, end to end.

A light scratch course (tests/lightcourse.py: lesson 1's graded cells, demos dropped, since
only they decide a score and the demos cost most of each submission's run) with its own gradebook: release (generate_assignment), the samples of
tests/submissions/samples.py in submitted/, ``cudacourse grade`` (sandboxed, default workers),
then nbgrader's own feedback and export, and ``cudacourse report``. Checked: the score of
every test cell of every sample, the late sample's penalty (the course's deadline policy,
through ``cudacourse grade``), the checker's cause of a wrong kernel in the autograded
notebook and the class report, the provenance in the run record, the "not graded" reasons (distinct from 0 in the status CSV, the summary and the
feedback), that no submitted file changed and no attack wrote into the package, that no
process an attack started is left, that the gradebook still holds the scores once a
detached saboteur would have struck, and that output is capped.

Runs in whatever mode the suite runs in (simulator here, the GPU on a GPU machine).
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from cudacourse import authoring, device
from cudacourse.grader import intake
from cudacourse.grader import sandbox as sbx

import lightcourse

pytestmark = pytest.mark.grading
# The checker's stable cause id for samples.WRONG_KERNEL (a - b for a + b): check.vector
WRONG_KERNEL_CAUSE = "wrong_formula"

ROOT = authoring.ROOT
A = "01_gpu_vs_cpu"
# Per-cell timeout: the loop samples wait it out on purpose; the simulator needs a few
# seconds for a checker under load.
TIMEOUT = int(os.environ.get("CUDACOURSE_GRADING_TIMEOUT", device.pick(sim=30, gpu=30)))
ISOLATED, WHY = sbx.isolation(sbx.Sandbox())


def _load_samples():
    spec = importlib.util.spec_from_file_location(
        "grading_samples", ROOT / "tests" / "submissions" / "samples.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["grading_samples"] = module
    spec.loader.exec_module(module)
    return module


samples = _load_samples()


def _env() -> dict[str, str]:
    env = dict(os.environ)
    # nbgrader runs `alembic` as a subprocess: this environment's bin/ must be on PATH.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nbgrader", *args,
                           f"--db=sqlite:///{course}/gradebook.db"], cwd=course, env=_env(),
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def graded():
    """The graded class, built once per test session even when pytest-xdist spreads this
    module's tests over several workers (they share the base temp directory and a lock)."""
    import fcntl

    import tempfile

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
            record.write_text(json.dumps(_grade_the_class(course)))
    g = json.loads(record.read_text())
    g["dir"] = Path(g["dir"])
    g["proc"] = subprocess.CompletedProcess(g["proc"][0], g["proc"][1], g["proc"][2],
                                            g["proc"][3])
    for key in ("feedback", "export", "plain", "report"):
        g[key] = subprocess.CompletedProcess(g[key][0], g[key][1], g[key][2], g[key][3])
    yield g
    if not os.environ.get("PYTEST_XDIST_WORKER"):  # with xdist another worker may still read
        shutil.rmtree(base, ignore_errors=True)


def _grade_the_class(course: Path) -> dict:
    course.mkdir()
    # lesson 1's graded cells only (tests/lightcourse.py); the late sample's deadline
    lightcourse.write(course, f"c.CoursePolicy.due = {{{A!r}: {samples.DUE!r}}}\n"
                              "c.LatePenalty.penalty_method = 'percent_per_day'\n"
                              f"c.LatePenalty.percent_per_day = {samples.PERCENT_PER_DAY}")
    release = _nbgrader(course, "generate_assignment", A, "--force")
    assert release.returncode == 0, release.stderr
    learner = course / "notebooks" / A / f"{A}.ipynb"
    want = samples.write(course, learner, course / "solutions" / A / f"{A}.ipynb",
                         isolated=ISOLATED, home=os.path.expanduser("~"))
    before = intake.file_hashes(course / "submitted")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "cudacourse.cli", "grade", A, "--course",
                           str(course), "--timeout", str(TIMEOUT),  # workers: the cores
                           "--no-progress"], cwd=course, env=_env(), capture_output=True,
                          text=True, timeout=3000)
    seconds = time.monotonic() - start
    time.sleep(6)  # the gradebook saboteur would strike 4 s after its notebook ran
    print(f"\ncudacourse grade: {len(want)} samples in {seconds:.0f} s ({WHY})")
    feedback = _nbgrader(course, "generate_feedback", A, "--force")
    export = _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    report = subprocess.run([sys.executable, "-m", "cudacourse.cli", "report", A, "--course",
                             str(course), "--no-plot"], cwd=course, env=_env(),
                            capture_output=True, text=True, timeout=900)
    # Plain nbgrader, without `cudacourse grade`, on a copy of one hostile submission.
    plain_student = "plain_nbgrader_forge_displayhook"
    plain_dir = course / "plain-submitted"
    shutil.copytree(course / "submitted" / "forge_displayhook", plain_dir / plain_student)
    plain = _nbgrader(course, "autograde", A, f"--student={plain_student}", "--force",
                      f"--CourseDirectory.submitted_directory={plain_dir}",
                      f"--ResilientExecute.timeout={TIMEOUT}")

    def keep(p: subprocess.CompletedProcess) -> list:
        return [p.args, p.returncode, p.stdout, p.stderr]

    return {"dir": str(course), "want": want, "proc": keep(proc), "before": before,
            "feedback": keep(feedback), "export": keep(export), "report": keep(report),
            "plain": keep(plain), "plain_scores": _gradebook_scores(course).get(plain_student),
            "run": json.loads((course / "grading" / A / "latest.json").read_text())}


def _results(g) -> dict[str, dict]:
    return {r["student"]: r for r in g["run"]["results"]}


def _gradebook_scores(course: Path) -> dict[str, dict[str, float]]:
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


def _autograded(course: Path, student: str) -> nbformat.NotebookNode:
    return nbformat.read(course / "autograded" / student / A / f"{A}.ipynb", 4)


def _errors(nb: nbformat.NotebookNode, grade_id: str) -> str:
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(f"{o.ename}: {o.evalue}" for o in cell.get("outputs", [])
                     if o.output_type == "error")


# --- the run ----------------------------------------------------------------------------

def test_every_submission_is_listed_graded_or_not_graded(graded):
    proc, res = graded["proc"], _results(graded)
    assert proc.returncode == 1, proc.stderr[-3000:]  # 1: some were not graded
    assert set(res) == set(graded["want"])
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    for name, want in graded["want"].items():
        assert res[name]["status"] == ("not_graded" if want["not_graded"] else "graded"), \
            (name, res[name])


def test_every_sample_gets_its_expected_score_per_cell(graded):
    got = _gradebook_scores(graded["dir"])
    wrong = {name: {"want": w["cells"], "got": got.get(name)}
             for name, w in graded["want"].items()
             if w["cells"] is not None and got.get(name) != w["cells"]}
    assert not wrong, json.dumps(wrong, indent=1)
    assert graded["want"]["correct"]["total"] > 0  # the headline: a real score is possible


def test_all_wrong_attacks_get_zero_and_victims_keep_their_scores(graded):
    got = {n: sum(c.values()) for n, c in _gradebook_scores(graded["dir"]).items()}
    for name in graded["want"]:
        if name.startswith(("forge_", "escape_")) or name in samples.SABOTAGE:
            assert got[name] == 0, name
    assert got["victim_all_wrong"] == 0
    assert got["victim_correct"] == graded["want"]["correct"]["total"]


def test_not_graded_is_distinct_from_zero_everywhere(graded):
    course, res = graded["dir"], _results(graded)
    with open(course / "grading" / A / "status.csv", newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    summary = (course / "grading" / A / "summary.txt").read_text()
    for name, want in graded["want"].items():
        if not want["not_graded"]:
            assert rows[name]["status"] == "graded" and rows[name]["score"] != "", name
            continue
        assert want["not_graded"] in res[name]["reason"], (name, res[name]["reason"])
        assert rows[name]["status"] == "not_graded" and rows[name]["score"] == ""
        assert want["not_graded"] in rows[name]["reason"]
        line = next(ln for ln in summary.splitlines() if ln.startswith(name + " "))
        assert "NOT GRADED" in line
        note = course / "feedback" / name / A / "NOT_GRADED.html"
        assert want["not_graded"] in note.read_text().replace("&#x27;", "'")
        assert f"{name}/{A}: not graded: " in graded["proc"].stderr  # one log line each
        assert name not in _gradebook_scores(course)  # formgrader: "No Submission", not 0


def test_submitted_files_are_never_modified(graded):
    assert intake.file_hashes(graded["dir"] / "submitted") == graded["before"]


def test_the_course_package_is_untouched(graded):
    """write_package appends the attack marker to the checkers, the quiz and sitecustomize.py
    (other engineers may edit the package meanwhile: look for the marker, not for any change)."""
    import site

    marked = [p for p in Path(sbx.__file__).resolve().parents[1].rglob("*.py")
              if samples.MARKER in p.read_text(errors="replace")]
    marked += [p for d in site.getsitepackages() for p in [Path(d) / "sitecustomize.py"]
               if p.exists() and samples.MARKER in p.read_text(errors="replace")]
    assert marked == []


def test_no_process_is_left_behind(graded):
    left = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if samples.MARKER.encode() in (d / "cmdline").read_bytes():
                    left.append(d.name)
            except OSError:
                pass
    assert left == []


def test_refused_constructs_are_named_in_the_test_cell(graded):
    for name, want in graded["want"].items():
        for grade_id, phrase in want["phrase"].items():
            text = _errors(_autograded(graded["dir"], name), grade_id)
            assert "NotGradable: not gradable" in text and phrase in text, (name, text)


def test_output_is_capped_long_lines_included(graded):
    for name in ("big_output_lines", "big_output_line"):
        path = graded["dir"] / "autograded" / name / A / f"{A}.ipynb"
        assert path.stat().st_size < 1_000_000, (name, path.stat().st_size)
        assert "cut by the grader" in path.read_text()
        html = graded["dir"] / "feedback" / name / A / f"{A}.html"
        assert html.stat().st_size < 2_000_000


def test_hangs_and_crashes_are_reported_and_the_answers_still_graded(graded):
    res, log = _results(graded), graded["proc"].stderr
    for name, phrase in (("loops", "timeout"), ("crashes", "crash")):
        assert any(phrase in i for i in res[name]["incidents"]), res[name]["incidents"]
        assert f"cudacourse-grading: {name}/{A}: " in log
        sidecar = json.loads((graded["dir"] / "autograded" / name / A /
                              f"{A}.grading.json").read_text())
        top = _autograded(graded["dir"], name).cells[:2]  # the summary, then the note
        assert sidecar["incidents"] and top[0].metadata["cudacourse"]["summary"]
        assert "Grading note" in top[1].source


def test_feedback_and_export_work_for_the_graded(graded):
    assert graded["feedback"].returncode == 0, graded["feedback"].stderr[-3000:]
    assert graded["export"].returncode == 0, graded["export"].stderr[-3000:]
    with open(graded["dir"] / "grades.csv", newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    for name, want in graded["want"].items():
        if want["total"] is not None:
            assert float(rows[name]["raw_score"]) == pytest.approx(want["total"]), name
            assert (graded["dir"] / "feedback" / name / A / f"{A}.html").exists(), name


def test_the_run_record_says_how_it_was_isolated(graded):
    run = graded["run"]
    assert run["isolation"] == ("bwrap" if ISOLATED else f"NOT isolated: {WHY}")
    assert all("seconds" in r for r in run["results"])


def test_plain_nbgrader_autograde_is_sandboxed_too(graded):
    """Without `cudacourse grade`, nbgrader's execute step runs the same sandboxed checks."""
    proc = graded["plain"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "running the sandboxed checks here" in proc.stderr
    assert graded["plain_scores"] and sum(graded["plain_scores"].values()) == 0


def test_a_late_submission_gets_its_penalty_through_cudacourse_grade(graded):
    """The course config's SyncDeadlines and LatePenalty, with timestamp.txt kept in the
    grader's staged copy: full raw score, the penalty beside it; nobody else is late."""
    with open(graded["dir"] / "grades.csv", newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    late, full = rows["late_correct"], graded["want"]["late_correct"]["total"]
    assert full == graded["want"]["correct"]["total"] > 0
    assert late["duedate"] and late["timestamp"]
    assert float(late["raw_score"]) == pytest.approx(full)
    assert float(late["late_submission_penalty"]) == pytest.approx(
        full * samples.LATE_PERCENT / 100)
    assert float(late["score"]) == pytest.approx(full * (1 - samples.LATE_PERCENT / 100))
    for name, want in graded["want"].items():
        if name != "late_correct" and want["total"] is not None:
            assert float(rows[name]["late_submission_penalty"]) == 0, name


def test_a_wrong_kernel_s_cause_is_in_the_notebook_and_the_class_report(graded):
    nb = _autograded(graded["dir"], "wrong_kernel")
    cell = next(c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") == f"test_{samples.KERNEL}")
    assert cell.metadata["cudacourse"] == {"status": "fail", "cause": WRONG_KERNEL_CAUSE}
    sidecar = json.loads((graded["dir"] / "autograded" / "wrong_kernel" / A /
                          f"{A}.grading.json").read_text())
    assert sidecar["verdicts"][f"test_{samples.KERNEL}"]["cause"] == WRONG_KERNEL_CAUSE
    report = graded["report"]
    assert report.returncode == 0, report.stderr[-3000:]
    row = next(ln for ln in report.stdout.splitlines() if ln.startswith(f"| test_{samples.KERNEL}"))
    from cudacourse.grader.feedbackview import md_escape

    # the report is markdown and quotes causes as inert text (wrong\_formula)
    assert f"{md_escape(WRONG_KERNEL_CAUSE)} (" in row, row


def test_the_run_record_carries_its_provenance(graded):
    stamp = graded["run"]["provenance"]
    assert stamp["nbgrader"] and stamp["python"] and stamp["time"]
    assert any(k.endswith("grader/verdict.py") for k in stamp["scored_by"])
    assert stamp["masters"]  # the hash of the master that was graded against
