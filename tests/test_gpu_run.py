"""The GPU run record: its schema, the goals it is judged by, the pieces verify.sh makes of
its stages, and the README block rendered from docs/gpu_run.json."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudacourse.course import gpu_run as G

ROOT = Path(__file__).resolve().parents[1]


def good() -> dict:
    return {"date": "2026-12-01T18:00:00Z", "gpu": "NVIDIA H200", "driver": "580.65",
            "commit": "a8bea0f0123456789abcdef0123456789abcdef0", "mode": "gpu",
            "lessons": {"01_gpu_vs_cpu": {"seconds": 20.5, "passed": True, "slowest_check_s": 1.5},
                        "04_shared_memory": {"seconds": 50.0, "passed": True,
                                             "slowest_check_s": 3.0}},
            "suite": {"passed": 1100, "failed": 0, "errors": 0, "skipped": 10, "seconds": 400.0},
            "lessons_ja": {"01_gpu_vs_cpu": {"seconds": 25.0, "passed": True,
                                             "slowest_check_s": 1.7}},
            "grading": {"assignment": "01_gpu_vs_cpu", "submissions": 40, "as_expected": True,
                        "seconds": 200.0, "workers": 16, "latency": {"median_s": 6.0}},
            "masters_alone": True}


def test_a_good_record_has_no_problems_and_meets_the_goals():
    assert G.validate(good()) == []
    assert G.goals(good()) == []


@pytest.mark.parametrize("breakage, phrase", [
    (lambda r: r.pop("commit"), "missing 'commit'"),
    (lambda r: r.update(commit="not a sha"), "not a git commit hash"),
    (lambda r: r.update(date="yesterday"), "not an ISO date"),
    (lambda r: r["lessons"].update(lesson1={"seconds": 1, "passed": True,
                                            "slowest_check_s": 1}), "not a lesson stem"),
    (lambda r: r["lessons"]["01_gpu_vs_cpu"].pop("slowest_check_s"), "missing 'slowest_check_s'"),
    (lambda r: r["lessons"]["01_gpu_vs_cpu"].update(passed="yes"), "expected bool"),
    (lambda r: r["suite"].update(failed=True), "got a boolean"),
    (lambda r: r["suite"].update(seconds=-1), "negative"),
    (lambda r: r["grading"].pop("workers"), "missing 'workers'"),
    (lambda r: r.update(lessons=[]), "record.lessons: expected dict"),
])
def test_schema_problems_are_named(breakage, phrase):
    rec = good()
    breakage(rec)
    problems = G.validate(rec)
    assert any(phrase in p for p in problems), problems


@pytest.mark.parametrize("change, phrase", [
    (lambda r: r["lessons"]["01_gpu_vs_cpu"].update(passed=False, error="boom"), "did not pass"),
    (lambda r: r["lessons"]["01_gpu_vs_cpu"].update(seconds=61.0), "> 60 s"),
    (lambda r: r["lessons"]["04_shared_memory"].update(seconds=61.0),
     "lesson 04_shared_memory: 61.0 s > 60 s"),  # issue 42: every English master
    (lambda r: r.update(masters_alone=False), "check cells were not measured alone"),
    (lambda r: r["grading"].pop("latency"), "no lesson-1 submission was graded alone"),
    (lambda r: r["lessons"]["01_gpu_vs_cpu"].update(slowest_check_s=10.5), "check cell took"),
    (lambda r: r["suite"].update(failed=1), "1 failed"),
    (lambda r: r["suite"].update(complete=False), "stopped at its deadline"),
    (lambda r: r["suite"].update(seconds=481.0), "> 480 s"),
    (lambda r: r["grading"].update(as_expected=False), "not all as expected"),
    (lambda r: r["grading"].update(as_expected=False, complete=False), "stopped at its deadline"),
    (lambda r: r["grading"].update(per_submission_median_s=5.0, latency={"median_s": 9.0}),
     "9.0 s per submission on its worker (median, one at a time, alone) > 8 s"),
    (lambda r: r["lessons"]["01_gpu_vs_cpu"].update(slowest_check_s=5.5), "check cell took"),
    (lambda r: r["lessons_ja"]["01_gpu_vs_cpu"].update(passed=False, error="boom"),
     "Japanese lesson 01_gpu_vs_cpu: did not pass (boom)"),
    (lambda r: r.update(stages=["suite", "bench"]), "bench: the quick bench did not run"),
    (lambda r: r.update(stages=["bench"], bench={"exit_status": 1}), "(exit 1)"),
    (lambda r: r.update(seconds=501), "one call: verify.sh took 501 s > 500 s"),
    (lambda r: r.update(mode="sim"), "not a GPU run"),
    (lambda r: r["grading"].update(isolation="NOT isolated: no bwrap"), "not in bubblewrap"),
])
def test_each_goal_is_judged(change, phrase):
    rec = good()
    change(rec)
    assert G.validate(rec) == []
    missed = G.goals(rec)
    assert any(phrase in m for m in missed), missed


def test_a_missing_lesson_misses_the_goals():
    assert any("03_memory: not in the record" in m
               for m in G.goals(good(), ["01_gpu_vs_cpu", "03_memory"]))
    assert any("Japanese lesson 03_memory: not in the record" in m
               for m in G.goals(good(), ["01_gpu_vs_cpu"], ["01_gpu_vs_cpu", "03_memory"]))
    assert G.goals(good(), ["01_gpu_vs_cpu", "04_shared_memory"], ["01_gpu_vs_cpu"]) == []


def test_the_japanese_masters_are_checked_like_the_english_ones():
    rec = good()
    rec["lessons_ja"]["lesson1"] = rec["lessons_ja"].pop("01_gpu_vs_cpu")
    assert any("lessons_ja: 'lesson1' is not a lesson stem" in p for p in G.validate(rec))
    rec = good()
    rec["lessons_ja"] = []
    assert any("record.lessons_ja: expected dict" in p for p in G.validate(rec))
    rec = good()
    del rec["lessons_ja"]  # a record of one edition is still a record
    assert G.validate(rec) == []
    assert G.japanese_editions(["01_gpu_vs_cpu", "99_none"]) == ["01_gpu_vs_cpu"]


def _timed_cell(start: str, end: str, **nbgrader) -> dict:
    meta = {"execution": {"iopub.execute_input": start, "shell.execute_reply": end}}
    if nbgrader:
        meta["nbgrader"] = nbgrader
    return {"cell_type": "code", "metadata": meta, "outputs": [], "source": ""}


def test_lesson_entry_times_cells_and_finds_the_slowest_check():
    nb = {"cells": [
        _timed_cell("2026-12-01T10:00:00.000Z", "2026-12-01T10:00:05.000Z"),  # a slow demo
        _timed_cell("2026-12-01T10:00:05.000Z", "2026-12-01T10:00:06.250Z",
                    grade=True, solution=False, grade_id="test_a"),
        _timed_cell("2026-12-01T10:00:06.250Z", "2026-12-01T10:00:06.500Z",
                    grade=True, solution=False, grade_id="test_b"),
        _timed_cell("2026-12-01T10:00:06.500Z", "2026-12-01T10:00:09.000Z",
                    grade=True, solution=True, grade_id="answer"),  # an answer, not a check
        {"cell_type": "markdown", "metadata": {}, "source": "x"}]}
    e = G.lesson_entry(nb, 9.0)
    assert e["passed"] is True and e["error"] is None
    assert e["slowest_check_s"] == 1.25
    assert [c["index"] for c in e["cells"]] == [0, 3, 1, 2]  # slowest first
    nb["cells"][2]["outputs"] = [{"output_type": "error", "ename": "E", "evalue": "",
                                  "traceback": []}]
    assert G.lesson_entry(nb, 9.0)["passed"] is False
    nb["cells"][2]["metadata"]["tags"] = ["raises-exception"]  # shown on purpose
    assert G.lesson_entry(nb, 9.0)["passed"] is True


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest"
errors="1" failures="2" skipped="3" tests="10" time="12.5">
<testcase classname="tests.test_x" name="test_ok" time="0.1"/>
<testcase classname="tests.test_x" name="test_bad" time="0.1"><failure message="x"/></testcase>
<testcase classname="tests.test_y" name="test_err" time="0.1"><error message="y"/></testcase>
<testcase classname="tests.test_z" name="test_slow" time="9.25"/>
</testsuite></testsuites>"""


def test_suite_entry_from_junit_and_from_a_log(tmp_path):
    xml = tmp_path / "j.xml"
    xml.write_text(JUNIT)
    e = G.suite_entry(xml)
    assert (e["passed"], e["failed"], e["errors"], e["skipped"], e["seconds"]) == (4, 2, 1, 3, 12.5)
    assert e["complete"] and "tests.test_x::test_bad" in e["failures"]
    assert e["slowest"][0] == {"test": "tests.test_z::test_slow", "seconds": 9.2}
    log = tmp_path / "log"
    log.write_text("FAILED tests/test_a.py::test_b - x\n!!!!!!! Interrupted: KeyboardInterrupt\n"
                   "= 1 failed, 7 passed, 2 skipped in 30.0s =\npytest exit 2\n")
    e = G.suite_entry(tmp_path / "missing.xml", log, seconds=31.0)
    assert (e["passed"], e["failed"], e["skipped"], e["seconds"]) == (7, 1, 2, 31.0)
    assert e["complete"] is False and e["failures"] == ["tests/test_a.py::test_b"]
    log.write_text("= slowest 40 durations =\n12.50s call     tests/test_a.py::test_b\n"
                   "30.00s setup    tests/test_c.py::test_d[x]\n"
                   "1.00s teardown tests/test_c.py::test_d[x]\n= 9 passed in 3.0s =\n")
    assert G.suite_entry(None, log)["slowest"] == [
        {"test": "tests/test_c.py::test_d[x]", "seconds": 31.0},
        {"test": "tests/test_a.py::test_b", "seconds": 12.5}]
    log.write_text("....\n= 9 passed in 3.0s =\npytest exit 124\n")  # stopped by timeout
    assert G.suite_entry(xml, log)["complete"] is False
    log.write_text("....\n= 9 passed in 3.0s =\npytest exit 0\n")
    assert G.suite_entry(xml, log)["complete"] is True


def test_grading_entry_compares_with_expected(tmp_path):
    run = {"seconds": 30.0, "workers": 4, "executor": "thread", "isolation": "bwrap",
           "results": [{"student": "right", "status": "graded", "scores": {"t": 3.0},
                        "seconds": 5.0},
                       {"student": "broken", "status": "not_graded",
                        "reason": "invalid JSON in the notebook", "seconds": 1.0}]}
    want = {"right": {"not_graded": None, "cells": {"t": 3.0}, "total": 3.0},
            "broken": {"not_graded": "invalid JSON", "cells": None, "total": None}}
    (tmp_path / "grading" / "A").mkdir(parents=True)
    (tmp_path / "grading" / "A" / "latest.json").write_text(json.dumps(run))
    (tmp_path / "expected.json").write_text(json.dumps(want))
    e = G.grading_entry(tmp_path, "A")
    assert e["as_expected"] and e["submissions"] == 2 and e["workers"] == 4
    run["results"][0]["scores"] = {"t": 0.0}  # a wrong score
    (tmp_path / "grading" / "A" / "latest.json").write_text(json.dumps(run))
    e = G.grading_entry(tmp_path, "A")
    assert not e["as_expected"] and e["mismatches"][0]["name"] == "right"
    (tmp_path / "expected.json").unlink()  # the class was never set up
    e = G.grading_entry(tmp_path, "A")
    assert not e["as_expected"] and "no expected.json" in e["error"] and G.validate(
        {**good(), "grading": e}) == []


def test_assemble_and_check_from_the_command_line(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    rec = good()
    for stem, e in rec["lessons"].items():
        (parts / f"lesson-{stem}.json").write_text(json.dumps(e))
    for stem, e in rec["lessons_ja"].items():
        (parts / f"lesson-ja-{stem}.json").write_text(json.dumps(e))
    (parts / "latency.json").write_text(json.dumps({"median_s": 4.5, "workers": 1}))
    (parts / "suite.json").write_text(json.dumps(rec["suite"]))
    (parts / "grading.json").write_text(json.dumps(rec["grading"]))
    out = tmp_path / "gpu_run.json"
    assert G.main(["assemble", str(parts), "--out", str(out), "--meta", "gpu=NVIDIA H200",
                   "--meta", "driver=580.65", "--meta", f"commit={rec['commit']}",
                   "--meta", "mode=gpu"]) == 0
    made = json.loads(out.read_text())
    assert made["problems"] == [] and made["goals_missed"] == []
    assert made["lessons"] == rec["lessons"] and made["gpu"] == "NVIDIA H200"
    assert made["lessons_ja"] == rec["lessons_ja"]  # the Japanese masters, apart
    assert made["grading"]["latency"]["median_s"] == 4.5  # the probe, beside the class
    # `check` wants every lesson of the course: this record has two of six
    assert G.main(["check", str(out)]) == 1
    (parts / "suite.json").unlink()  # a stage that never ran: a record that says so
    G.main(["assemble", str(parts), "--out", str(out), "--meta", f"commit={rec['commit']}"])
    made = json.loads(out.read_text())
    assert made["suite"]["ran"] is False and made["goals_missed"]


def test_readme_block_is_rendered_from_the_record():
    readme = (ROOT / "README.md").read_text()
    block = G.rendered_block(readme)
    assert block is not None, "README.md has no gpu_run block"
    assert block == G.render(G.load()), (
        "README.md's GPU block differs from docs/gpu_run.json: paste "
        "`python -m cudacourse.course.gpu_run render` into README.md")


def test_render_names_what_the_record_says():
    text = G.render(good())
    assert "NVIDIA H200" in text and "1100 passed" in text and "as expected" in text
    assert "6.0 s a submission on its worker, median, one at a time, alone" in text
    rec = good()
    del rec["grading"]["latency"]
    assert "5.0 s a submission on its worker, class average" in G.render(rec)
    alone = copy.deepcopy(good())
    alone["grading"]["latency"] = {"median_s": 4.2}
    assert "4.2 s a submission on its worker, median, one at a time, alone" in G.render(alone)
    bad = copy.deepcopy(good())
    bad["grading"]["as_expected"] = False
    assert "NOT as expected" in G.render(bad)
    assert "No GPU run is recorded yet" in G.render(None)


def test_the_committed_record_is_valid_when_there_is_one():
    rec = G.load()
    if rec is None:
        pytest.skip("docs/gpu_run.json not recorded yet (tools/gpu/verify.sh writes it on a GPU)")
    assert G.validate(rec) == []


def test_module_runs_as_a_script(tmp_path):
    r = subprocess.run([sys.executable, "-m", "cudacourse.course.gpu_run", "render",
                        str(tmp_path / "none.json")], capture_output=True, text=True,
                       timeout=60, env={**os.environ, "CUDACOURSE_QUIET": "1"})
    assert r.returncode == 0 and "No GPU run is recorded yet" in r.stdout, r.stderr


def test_render_writes_the_block_in_place(tmp_path):
    rec, doc = tmp_path / "gpu_run.json", tmp_path / "README.md"
    rec.write_text(json.dumps(good()))
    doc.write_text(f"# title\n\n{G.render(None)}\n\nafter\n")
    assert G.main(["render", str(rec), "--write", str(doc)]) == 0
    text = doc.read_text()
    assert G.rendered_block(text) == G.render(good())
    assert text.startswith("# title\n\n") and text.endswith("\n\nafter\n")
    doc.write_text("no block here\n")
    assert G.main(["render", str(rec), "--write", str(doc)]) == 2


def test_changed_since_names_files_changed_after_a_commit(tmp_path, monkeypatch):
    # a repository of its own: a GIT_DIR set for the run (verify.sh on the GPU sets one that
    # points nowhere) must not redirect it
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(var, raising=False)
    run = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True,  # noqa: E731
                                    capture_output=True, text=True)
    run("init", "-q")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text("x = 1\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "gpu_run.json").write_text("{}")
    run("add", ".")
    run("-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    sha = run("rev-parse", "HEAD").stdout.strip()
    assert G.changed_since(sha, tmp_path) == []
    (tmp_path / "docs" / "gpu_run.json").write_text('{"a": 1}')  # the record itself: fine
    assert G.changed_since(sha, tmp_path) == []
    (tmp_path / "src" / "m.py").write_text("x = 2\n")
    assert G.changed_since(sha, tmp_path) == ["src/m.py"]
    assert G.changed_since("0" * 40, tmp_path) is None
