"""The verdict of one test cell, judged in-process on tiny jobs (no sandbox, no GPU)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cudacourse.grader import verdict

DOUBLE = ("f", "def f(x):\n    return x * 2\n")


# the verdict process as the grader starts it: the module by its one name
VERDICT_CMD = (sys.executable, "-P", "-m", "cudacourse.grader.verdict")


def _job(test: str, answers=(DOUBLE,), context=("import math",), cap=1000) -> dict:
    return {"grade_id": "t", "context": list(context), "answers": [list(a) for a in answers],
            "test": test, "cap": cap}


def test_pass_with_output_and_partial_credit():
    v = verdict.judge(_job("assert f(2) == 4\nprint('ok')\n0.5"))
    assert v["status"] == "pass" and v["partial"] == 0.5 and v["output"] == "ok\n"


def test_a_failing_check_gives_its_message():
    v = verdict.judge(_job("assert f(2) == 5, 'f(2) should be 5'"))
    assert v["status"] == "fail" and v["ename"] == "AssertionError"
    assert v["message"] == "f(2) should be 5"


def test_a_refused_answer_is_not_gradable_and_never_runs():
    bad = ("f", "def f(x):\n    return open('/etc/hostname')\n")
    v = verdict.judge(_job("f(1)", answers=[bad]))
    assert v["status"] == "not_gradable" and "name 'open'" in v["message"]


def test_statements_of_answer_cells_do_not_run():
    cell = ("f", "raise SystemExit('ran!')\ndef f(x):\n    return x * 2\n")
    v = verdict.judge(_job("assert f(2) == 4", answers=[cell]))
    assert v["status"] == "pass"


def test_output_is_capped():
    v = verdict.judge(_job("for _ in range(100):\n    print('x' * 1000)", cap=500))
    assert v["output"].startswith("x" * 500) and "more characters of output cut" in v["output"]


def test_the_script_forks_one_process_per_test_cell_and_answers_on_its_own_channel():
    jobs = [dict(_job("import os\nprint(os.getpid())"), grade_id=f"t{i}") for i in range(3)]
    jobs.append(dict(_job("while True:\n    pass"), grade_id="hang"))
    proc = subprocess.run([*VERDICT_CMD], input=json.dumps(
        {"jobs": jobs, "timeout": 3}), capture_output=True, text=True, timeout=120)
    results = {v["grade_id"]: v for v in map(json.loads, proc.stdout.splitlines())}
    pids = {results[f"t{i}"]["output"] for i in range(3)}
    assert len(pids) == 3  # a fresh process each
    assert results["hang"]["status"] == "timeout"


def test_one_sandbox_per_cell_where_fork_is_refused(tmp_path, monkeypatch):
    """The GPU path (a CUDA context does not survive fork), taken here by refusing to fork."""
    from cudacourse.grader import prepare

    monkeypatch.setitem(prepare._FORKS, str(tmp_path), False)
    jobs = [dict(_job("assert f(2) == 4"), grade_id="ok"),
            dict(_job("assert f(2) == 5"), grade_id="bad")]
    opts = {**prepare.DEFAULTS, "timeout": 60}
    got = prepare.run_verdicts(jobs, opts, str(tmp_path), None)
    assert got["ok"]["status"] == "pass" and got["bad"]["status"] == "fail"


CHECK_FAILURE = "import cudacourse.check._failure as _failure\n"


def test_a_checker_failure_carries_its_cause_into_the_verdict_and_the_cell():
    """CheckFailure.cause reaches the verdict, and prepare.apply writes it into the test
    cell's metadata, where cudacourse report counts diagnoses by cause."""
    import nbformat

    from cudacourse.grader import prepare

    test = "_failure.fail('wrong_values_sub', 'out[3] is -1, want 5')"
    v = verdict.judge(_job(test, context=(CHECK_FAILURE,)))
    assert v["status"] == "fail" and v["ename"] == "CheckFailure"
    assert v["cause"] == "wrong_values_sub"
    plain = verdict.judge(_job("assert f(2) == 5"))
    assert plain["status"] == "fail" and plain["cause"] is None

    cell = nbformat.v4.new_code_cell("check()", metadata={"nbgrader": {
        "grade": True, "solution": False, "grade_id": "t", "points": 1}})
    nb = nbformat.v4.new_notebook(cells=[cell])
    prepare.apply(nb, {"cells": {"t": v}, "outputs": None, "sources": []}, 1000)
    assert nb.cells[0].metadata["cudacourse"] == {"status": "fail", "cause": "wrong_values_sub"}
    assert nb.cells[0].outputs[-1].output_type == "error"
    nbformat.validate(nb)


def test_verdict_processes_are_told_they_grade(tmp_path, monkeypatch):
    """CUDACOURSE_GRADING=1 in the sandboxed check (quiz.after_submission reads it), though
    the grader's own environment does not have it."""
    from cudacourse.grader import prepare

    monkeypatch.delenv("CUDACOURSE_GRADING", raising=False)

    job = dict(_job("import os\nprint(os.environ.get('CUDACOURSE_GRADING'))"), grade_id="env")
    got = prepare.run_verdicts([job], {**prepare.DEFAULTS, "timeout": 60}, str(tmp_path), None)
    assert got["env"]["status"] == "pass" and got["env"]["output"] == "1\n"


# --- reading verdicts back: total over anything a line can hold (issue 19, class 5) -------

FORGED = {
    "not a dict": ["pass"],
    "status unknown": {"status": "PASS!", "message": "ok"},
    "message a list": {"status": "fail", "message": ["a", 1], "ename": {"x": 1}},
    "partial a string": {"status": "pass", "partial": "3"},
    "partial nan": {"status": "pass", "partial": float("nan")},
    "credit out of range": {"status": "fail", "credit": 7, "statements": "all"},
    "notes a dict": {"status": "fail", "notes": {"a": 1}, "where": 3, "output": [1, 2]},
}


def test_every_forged_verdict_reads_as_a_verdict_that_earns_nothing():
    from cudacourse.grader import partial, prepare

    for label, line in FORGED.items():
        v = verdict.normalise(line, "t")
        assert v["status"] in verdict.STATUSES, label
        assert isinstance(v["message"], str) and isinstance(v["output"], str), label
        assert v["credit"] is None or 0 <= v["credit"] <= 1, label
        # a malformed line never passes with points it did not prove
        assert v["status"] != "pass" or v["partial"] is None, label
        outs = partial.outputs(v, prepare.verdict_outputs(v, 1000), 3)
        assert any(o["output_type"] == "error" for o in outs), label  # nbgrader: 0 points


def test_a_right_verdict_survives_normalising():
    v = verdict.normalise({"status": "pass", "partial": 2.0, "output": "ok",
                           "notes": ["n"], "cause": None}, "t")
    assert (v["status"], v["partial"], v["output"], v["notes"]) == ("pass", 2.0, "ok", ["n"])


def test_forged_feedback_outputs_are_read_without_an_exception():
    from cudacourse.grader import prepare

    forged = [{"output_type": "stream", "name": "stdout", "text": [1, {"a": 2}, "x"]},
              {"output_type": "error", "ename": ["E"], "evalue": 3, "traceback": [None, 4]},
              {"output_type": "display_data", "data": {"text/plain": [5, "\udcff"],
                                                       "text/html": "<script>x</script>"}},
              "not an output", 7]
    clean = prepare.sanitise(forged, 1000)
    assert clean[0]["text"].endswith("x") and clean[1]["evalue"] == "3"
    assert all("text/html" not in o.get("data", {}) for o in clean)


def test_feedback_run_and_verdicts_of_a_submission_overlap(monkeypatch):
    """prepare() runs the feedback run while the verdicts run: each stand-in below waits for
    the other to have started, which only a concurrent run satisfies."""
    import threading

    import nbformat

    from cudacourse.grader import prepare

    started = {"feedback": threading.Event(), "verdicts": threading.Event()}
    saw = {}

    def fake_feedback(nb, opts, course_root, db_url, who):
        started["feedback"].set()
        saw["feedback"] = started["verdicts"].wait(30)
        return [], ["from the feedback run"], "fake"

    def fake_verdicts(jobs, opts, course_root, db_url):
        started["verdicts"].set()
        saw["verdicts"] = started["feedback"].wait(30)
        return {j["grade_id"]: {"status": "pass", "isolation": "fake"} for j in jobs}

    monkeypatch.setattr(prepare, "feedback_run", fake_feedback)
    monkeypatch.setattr(prepare, "run_verdicts", fake_verdicts)
    test = nbformat.v4.new_code_cell("assert True", metadata={"nbgrader": {
        "grade": True, "solution": False, "grade_id": "t", "points": 1}})
    nb = nbformat.v4.new_notebook(cells=[test])
    got = prepare.prepare(nb, nb, course_root="/nonexistent")
    assert saw == {"feedback": True, "verdicts": True}
    assert got["cells"]["t"]["status"] == "pass"
    assert got["incidents"] == ["from the feedback run"]


def test_the_server_takes_the_device_probe_from_a_child_and_still_forks(tmp_path):
    """Outside the simulator the server must not initialise CUDA itself: it asks a child for
    the device probe (here: no driver), hands it to the setup, and forks a child per cell."""
    import os

    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_ENABLE_CUDASIM", "CUDACOURSE_GPU_PROBED", "CUDACOURSE_DEVICE")}
    jobs = [dict(_job("import os\nprint(os.getpid(), os.environ.get('CUDACOURSE_GPU_PROBED'))"),
                 grade_id=f"t{i}") for i in range(2)]
    proc = subprocess.run([*VERDICT_CMD], input=json.dumps(
        {"jobs": jobs, "timeout": 60}), capture_output=True, text=True, timeout=180, env=env)
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r.get("grade_id") for r in results] == ["t0", "t1"], proc.stdout
    pids = {r["output"].split()[0] for r in results}
    probes = {r["output"].split(" ", 1)[1].strip() for r in results}
    assert len(pids) == 2 and len(probes) == 1
    probed = json.loads(probes.pop())
    assert set(probed) == {"info", "why"}


@pytest.mark.gpu
def test_on_a_gpu_the_server_forks_and_each_child_makes_its_own_context():
    """On a GPU: one server, one child per cell, each launching a kernel in a fresh CUDA
    context (the server itself never initialised the driver)."""
    import os

    from cudacourse.grader import prepare

    ctx = ("import cudacourse\ncudacourse.setup()\nimport numpy as np\nfrom numba import cuda\n"
           "@cuda.jit\ndef _twice(x):\n    i = cuda.grid(1)\n    if i < x.size:\n"
           "        x[i] = 2 * x[i]\n")
    test = ("d = cuda.to_device(np.arange(100, dtype=np.float32)); _twice[1, 128](d)\n"
            "assert (d.copy_to_host() == 2 * np.arange(100)).all()\nimport os\n"
            "print(os.getpid())")
    jobs = [dict(_job(test, context=(ctx,)), grade_id=f"k{i}") for i in range(3)]
    env = {**os.environ, **prepare._verdict_env({})}
    proc = subprocess.run([*VERDICT_CMD], input=json.dumps(
        {"jobs": jobs, "timeout": 120}), capture_output=True, text=True, timeout=300, env=env)
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert results and results[0].get("fork") is not False, \
        "the verdict server refused to fork on the GPU (it would start a process per cell)"
    assert [r["status"] for r in results] == ["pass"] * 3, results
    assert len({r["output"] for r in results}) == 3  # a child each


def test_a_probe_runs_in_a_child_and_only_its_answer_comes_back():
    import os

    assert verdict._probe_in_child("import os\nout = os.getpid()") != str(os.getpid())
    assert verdict._probe_in_child("out = 'ok'") == "ok"
    assert verdict._probe_in_child("raise RuntimeError('no GPU')") is None
    assert verdict._probe_in_child("import time\ntime.sleep(30)\nout = 'late'", timeout=1) is None


FAKE_GPU = """import os, sys, types
os.environ["NUMBA_ENABLE_CUDASIM"] = "0"  # as on a GPU
drv = types.ModuleType("numba.cuda.cudadrv.driver")
drv.driver = types.SimpleNamespace(is_initialized={initialised})
sys.modules["numba.cuda.cudadrv.driver"] = drv
fake = types.ModuleType("numba.cuda")
class _Dev:
    def __init__(self, a):
        self.a = a
    def copy_to_host(self):
        return self.a
fake.to_device = {to_device}
sys.modules["numba.cuda"] = fake
sys.modules["numba"].cuda = fake
"""


@pytest.mark.parametrize("initialised, to_device, forks", [
    (False, "_Dev", True),  # CUDA untouched in the server, a fresh context works: fork
    (True, "_Dev", False),  # the setup initialised the driver: a child could not use it
    (False, "None", False),  # a child cannot make a context: one process per cell instead
])
def test_on_a_gpu_the_server_forks_only_when_a_child_can_use_it(initialised, to_device, forks):
    """The server's decision, with a stand-in for numba.cuda (this machine has no GPU)."""
    import os

    ctx = FAKE_GPU.format(initialised=initialised, to_device=to_device)
    jobs = [dict(_job("import os\nprint(os.getpid())", context=("import numba", ctx)),
                 grade_id=f"t{i}") for i in range(2)]
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([*VERDICT_CMD], input=json.dumps(
        {"jobs": jobs, "timeout": 60}), capture_output=True, text=True, timeout=180, env=env)
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    if forks:
        assert [r.get("status") for r in results] == ["pass", "pass"], results
        assert len({r["output"] for r in results}) == 2
    else:
        assert results == [{"fork": False}]
