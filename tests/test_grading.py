"""The instructor flow, end to end, on sample submissions that try every way to fail.

release (generate_assignment) -> collect (files in submitted/<student>/<assignment>/) ->
autograde -> generate_feedback -> export CSV, in a scratch course with its own gradebook,
running whatever mode the suite runs in (simulator here, the GPU on a GPU machine: the
expected scores are the same). One ``nbgrader autograde`` run grades every sample.

Samples and their expected scores come from tests/submissions/samples.py (derived from the
notebook's points metadata). The unit tests at the end check the tamper audit in-process.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from cudacourse import authoring, device, grading_audit

pytestmark = [pytest.mark.lesson1, pytest.mark.grading]

ROOT = authoring.ROOT
ASSIGNMENT = "01_gpu_vs_cpu"
# Per-cell autograde timeout: short, because two samples wait it out on purpose. A GPU gets a
# little more for CUDA start-up and first compiles in the cells of the full sample.
TIMEOUT = int(os.environ.get("CUDACOURSE_GRADING_TIMEOUT", device.pick(sim=20, gpu=30)))
MAX_RESTARTS = 3  # per notebook; the crash_storm sample needs more than that


def _load_samples():
    spec = importlib.util.spec_from_file_location(
        "grading_samples", ROOT / "tests" / "submissions" / "samples.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["grading_samples"] = module
    spec.loader.exec_module(module)
    return module


samples = _load_samples()


def _nbgrader(course: Path, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    # nbgrader runs `alembic` as a subprocess: this environment's bin/ must be on PATH.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    cmd = [sys.executable, "-m", "nbgrader", *args, f"--db=sqlite:///{course}/gradebook.db"]
    return subprocess.run(cmd, cwd=course, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A scratch course with every sample autograded, feedback generated, grades exported."""
    course = tmp_path_factory.mktemp("course")
    shutil.copytree(ROOT / "solutions" / ASSIGNMENT, course / "solutions" / ASSIGNMENT)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    release = _nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    assert release.returncode == 0, release.stderr
    learner = course / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    want = samples.write(course, learner, course / "solutions" / ASSIGNMENT /
                         f"{ASSIGNMENT}.ipynb")
    start = time.monotonic()
    graded = _nbgrader(course, "autograde", ASSIGNMENT, "--force",
                       f"--ResilientExecute.timeout={TIMEOUT}",
                       f"--ResilientExecute.max_restarts={MAX_RESTARTS}")
    seconds = time.monotonic() - start
    feedback = _nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    export = _nbgrader(course, "export", "--to", str(course / "grades.csv"))
    print(f"\nflow: {time.monotonic() - start:.0f} s from autograde to export")
    return {"dir": course, "want": want, "autograde": graded, "feedback": feedback,
            "export": export, "seconds": seconds, "learner": nbformat.read(learner, 4)}


def _scores(course: Path) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        for sub in gb.assignment_submissions(ASSIGNMENT):
            nb = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, sub.student_id)
            out[sub.student_id] = {g.name: g.score for g in nb.grades}
    return out


def _autograded(course: Path, student: str) -> nbformat.NotebookNode:
    return nbformat.read(course / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", 4)


def _cell(nb: nbformat.NotebookNode, grade_id: str) -> nbformat.NotebookNode:
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _errors(cell: nbformat.NotebookNode) -> str:
    return "\n".join(f"{o.ename}: {o.evalue}" for o in cell.get("outputs", [])
                     if o.output_type == "error")


# --- the flow ------------------------------------------------------------------------------

def test_autograde_completes_for_every_submission(course):
    proc = course["autograde"]
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "Removing failed assignment" not in proc.stderr
    for name in course["want"]:
        assert (course["dir"] / "autograded" / name / ASSIGNMENT).is_dir(), name
    print(f"\nautograde of {len(course['want'])} submissions: {course['seconds']:.0f} s")
    for line in proc.stderr.splitlines():
        if "executed in" in line:
            print(line.split("cudacourse-grading: ")[-1])


def test_every_sample_gets_its_expected_score_per_cell(course):
    got = _scores(course["dir"])
    wrong = {}
    for name, want in course["want"].items():
        if got.get(name) != want["cells"]:
            wrong[name] = {"want": want["cells"], "got": got.get(name)}
    assert not wrong, json.dumps(wrong, indent=1)


def test_scores_by_kind(course):
    """The headline rules, stated directly on totals."""
    want, got = course["want"], _scores(course["dir"])
    total = sum(p for _, p, _ in samples.graded_cells(course["learner"]))
    kernel = sum(p for g, p, s in samples.graded_cells(course["learner"])
                 if samples.uses(s, samples.KERNEL))
    assert kernel > 0 and total > kernel
    tot = {name: sum(cells.values()) for name, cells in got.items()}
    assert tot["correct"] == total
    assert tot["correct_with_stderr"] == total
    assert tot["blank"] == 0
    assert tot["wrong_kernel"] == total - kernel  # quiz points only
    for name in want:
        if name.startswith("hostile_") or name == "locked_cells_edited":
            assert tot[name] <= total - kernel, name
            kernel_cells = [g for g, _, s in samples.graded_cells(course["learner"])
                            if samples.uses(s, samples.KERNEL)]
            assert all(got[name][g] == 0 for g in kernel_cells), name
    for name in ("loops", "crashes"):  # the bad cells score 0, the others are graded
        assert 0 < tot[name] < total, name


def test_gradebook_export_lists_everyone_with_their_total(course):
    assert course["export"].returncode == 0, course["export"].stderr
    with open(course["dir"] / "grades.csv", newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    for name, want in course["want"].items():
        assert float(rows[name]["raw_score"]) == pytest.approx(want["total"]), name
        assert float(rows[name]["max_score"]) > 0, name


def test_feedback_is_generated_for_everyone(course):
    assert course["feedback"].returncode == 0, course["feedback"].stderr[-3000:]
    for name in course["want"]:
        html = course["dir"] / "feedback" / name / ASSIGNMENT / f"{ASSIGNMENT}.html"
        assert html.exists(), name
    text = (course["dir"] / "feedback" / "crashes" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "Grading note" in text and "killed the Python kernel" in text


def test_stderr_in_a_test_cell_costs_nothing_but_stays_visible(course):
    """Stock nbgrader gives 0 to a test cell that wrote to stderr (Numba warns there on a GPU)."""
    cell = _cell(_autograded(course["dir"], "correct_with_stderr"), "test_vector_add")
    texts = [o.get("text", "") for o in cell.outputs if o.output_type == "stream"]
    assert any(t.startswith("(stderr) SomeWarning") for t in texts), cell.outputs
    assert not any(o.output_type == "stream" and o.name == "stderr" for o in cell.outputs)


# --- hidden tests ----------------------------------------------------------------------------

def test_hidden_tests_are_absent_from_the_learner_copy_and_restored_at_autograde(course):
    learner = _cell(course["learner"], "test_vector_add").source
    assert "hidden=True" not in learner and "BEGIN HIDDEN TESTS" not in learner
    graded = _cell(_autograded(course["dir"], "correct"), "test_vector_add").source
    assert "hidden=True" in graded


# --- tampering -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, phrase", [
    *[("hostile_rebinding", phrase) for _, phrase in samples.REBINDINGS.values()],
    ("hostile_fake_package", "the notebook name 'cudacourse' no longer refers"),
    ("hostile_ast", "IPython's list.ast_transformers was replaced"),
    ("hostile_quiz", "cudacourse.quiz.grade was replaced"),
])
def test_tampering_fails_the_test_cell_loudly(course, name, phrase):
    cell = _cell(_autograded(course["dir"], name), "test_vector_add")
    text = _errors(cell)
    assert "CheckerTampered: checker tampered with" in text, text
    assert phrase in text, text
    assert f"{name}/{ASSIGNMENT}/{ASSIGNMENT}: cell 'test_vector_add' tampering" in \
        course["autograde"].stderr


def test_rebinding_the_bare_checker_name_changes_nothing(course):
    nb = _autograded(course["dir"], "hostile_names")
    kernel_cell = _cell(nb, samples.KERNEL)
    assert "read-only" in "".join(o.get("text", "") for o in kernel_cell.outputs)
    text = _errors(_cell(nb, "test_vector_add"))
    assert "CheckerTampered" not in text
    assert "a[i] + b[i]" in text  # the checker's own diagnosis of the wrong kernel


def test_edited_locked_cells_are_restored(course):
    nb = _autograded(course["dir"], "locked_cells_edited")
    cell = _cell(nb, "test_vector_add")
    assert "check_vector_add(vector_add" in cell.source
    assert "a[i] + b[i]" in _errors(cell)


# --- hangs and crashes --------------------------------------------------------------------

@pytest.mark.parametrize("name, ename, phrase", [
    ("loops", "CellTimeoutError", f"did not finish within {TIMEOUT} s"),
    ("crashes", "DeadKernelError", "killed the Python kernel"),
])
def test_bad_cells_are_named_and_the_rest_is_graded(course, name, ename, phrase):
    nb = _autograded(course["dir"], name)
    log = course["autograde"].stderr
    bad = course["want"][name]["incidents"]
    for grade_id in bad:
        text = _errors(_cell(nb, grade_id))
        assert ename in text and phrase in text, (grade_id, text)
        assert re.search(rf"{name}/{ASSIGNMENT}/{ASSIGNMENT}: cell '{grade_id}' "
                         rf"(timeout|crash)", log), log[-3000:]
    note = nb.cells[0]
    assert note.cell_type == "markdown" and "Grading note" in note.source
    sidecar = json.loads((course["dir"] / "autograded" / name / ASSIGNMENT /
                          f"{ASSIGNMENT}.grading.json").read_text())
    assert {i["cell"].strip("'") for i in sidecar["incidents"]} >= set(bad)
    # cells after the bad ones ran in the restarted kernel and were graded
    later = [g for g, p, _ in samples.graded_cells(nb) if course["want"][name]["cells"][g] > 0]
    assert later and all(not _errors(_cell(nb, g)) for g in later)


def test_after_too_many_restarts_the_rest_is_not_graded(course):
    nb = _autograded(course["dir"], "crash_storm")
    graded = [g for g, _, _ in samples.graded_cells(nb)]
    assert sum(_scores(course["dir"])["crash_storm"].values()) == 0
    assert "NotGraded" in _errors(_cell(nb, graded[-1]))  # never run, yet no free points
    assert f"crash_storm/{ASSIGNMENT}/{ASSIGNMENT}: giving up" in course["autograde"].stderr
    assert re.search(rf"crash_storm/{ASSIGNMENT}/{ASSIGNMENT}: executed in [\d.]+ s, "
                     rf"{MAX_RESTARTS} restart\(s\)", course["autograde"].stderr)


def test_segfault_is_reported_as_a_signal(course):
    nb = _autograded(course["dir"], "crashes")
    texts = [_errors(c) for c in nb.cells if c.cell_type == "code"]
    assert any("SIGSEGV" in t for t in texts), texts
    assert any("exit status 1" in t for t in texts), texts


# --- the audit, in-process ------------------------------------------------------------------

def test_audit_sees_nothing_in_an_untouched_session():
    ns = {"__builtins__": __builtins__}
    base = grading_audit.snapshot(ns, load=True)
    import numpy as np

    import cudacourse
    from cudacourse import quiz

    ns.update(cudacourse=cudacourse, quiz=quiz, np=np)
    assert grading_audit.compare(base, grading_audit.snapshot(ns)) == []


def test_audit_names_what_changed(monkeypatch):
    ns = {"__builtins__": __builtins__}
    base = grading_audit.snapshot(ns, load=True)
    import numpy as np

    import cudacourse.check._engine as engine

    guard = engine.GUARD
    monkeypatch.setattr(engine, "compare", lambda *a, **k: None)
    monkeypatch.setattr(engine, "GUARD", 0)
    monkeypatch.setattr(np.testing, "assert_allclose", lambda *a, **k: None)
    ns["np"] = object()
    problems = grading_audit.compare(base, grading_audit.snapshot(ns))
    text = "\n".join(problems)
    assert "cudacourse.check._engine.compare was replaced" in text
    assert f"cudacourse.check._engine.GUARD was changed from {guard!r} to 0" in text
    assert "numpy.testing.assert_allclose was replaced" in text
    assert "'np' no longer refers to the module numpy" in text


def test_audit_source_runs_standalone_like_in_a_kernel():
    """The grader sends the module's text; it must not need the cudacourse package."""
    from cudacourse import grading

    user_ns: dict = {"__builtins__": __builtins__}
    exec(compile(grading.AUDIT_SOURCE, "<audit>", "exec"),  # noqa: S102
         {"__name__": "_a", "_cudacourse_user_ns": user_ns, "_cudacourse_load": False})
    snap = json.loads(user_ns.pop("__cudacourse_audit__"))
    assert "attr:numpy.allclose" in snap and "ipy:shell" in snap
    assert grading.compare_snapshots(snap, snap) == []


@pytest.fixture
def restore_modules():
    """Undo what an attack does to the modules of this test process."""
    import numpy as np

    import cudacourse.check as check
    import cudacourse.check._engine as engine
    import cudacourse.check.vector as vector

    saved = [(np.testing, "assert_allclose"), (np, "allclose"), (np, "isclose"),
             (engine, "compare"), (engine, "fail")]
    values = [getattr(m, n) for m, n in saved]
    checker = check.__dict__["check_vector_add"]
    code = vector.check_vector_add.__code__
    yield
    for (m, n), v in zip(saved, values):
        setattr(m, n, v)
    check.__dict__["check_vector_add"] = checker
    vector.check_vector_add.__code__ = code


@pytest.mark.parametrize("label", list(samples.REBINDINGS))
def test_audit_catches_each_rebinding(label, restore_modules):
    import numpy as np

    import cudacourse
    import cudacourse.check
    from cudacourse import quiz

    ns = {"__builtins__": __builtins__}
    base = grading_audit.snapshot(ns, load=True)
    ns.update(cudacourse=cudacourse, quiz=quiz, np=np)
    code, phrase = samples.REBINDINGS[label]
    exec(code, ns)  # noqa: S102 - the attack, as an answer cell would run it
    problems = grading_audit.compare(base, grading_audit.snapshot(ns))
    assert any(phrase in p for p in problems), problems
