"""Grading a whole sample class of lesson 1 with ``cudacourse grade``, end to end.

The class is tests/gradingclass.py's, graded once per test session (conftest's
``graded_class``): a light scratch course (lesson 1's graded cells, demos dropped) with its
own gradebook, every sample of tests/submissions/samples.py, ``cudacourse grade``
(sandboxed, default workers), nbgrader's own feedback and export, ``cudacourse report``.
Checked: the score of every test cell of every sample, the late sample's penalty (the
course's deadline policy, through ``cudacourse grade``), the checker's cause of a wrong
kernel in the autograded notebook and the class report, the provenance in the run record,
the "not graded" reasons (distinct from 0 in the status CSV, the summary and the
feedback), that no submitted file changed and no attack wrote into the package, that no
process an attack started is left, that the gradebook still holds the scores once a
detached saboteur would have struck, and that output is capped.

Runs in whatever mode the suite runs in (simulator here, the GPU on a GPU machine).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import nbformat
import pytest

from cudacourse.grader import intake
from cudacourse.grader import sandbox as sbx

from gradingclass import A, ISOLATED, WHY, gradebook_scores as _gradebook_scores, samples

pytestmark = pytest.mark.grading
# The checker's stable cause id for samples.WRONG_KERNEL (a - b for a + b): check.vector
WRONG_KERNEL_CAUSE = "wrong_formula"


@pytest.fixture()
def graded(graded_class):
    """The class of tests/gradingclass.py, graded once per test session (tests/conftest.py)."""
    return graded_class


def _results(g) -> dict[str, dict]:
    return {r["student"]: r for r in g["run"]["results"]}


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


def test_no_instructor_secret_or_forged_record_reaches_any_output(graded):
    """The FILES samples point at an instructor file holding samples.SECRET, and one forges
    every grader record (samples.FORGED): neither text is in any record, note, feedback or
    terminal line, and every refused folder left only its NOT_GRADED note (issue 29)."""
    outputs = [graded[k].stdout + graded[k].stderr
               for k in ("proc", "feedback", "export", "report")]
    assert samples.leaks(graded["dir"], *outputs) == []
    assert samples.refused_reached_nothing(graded["dir"]) == []
