"""grader.prepare: what the verdict server's environment is built from."""
import json
import subprocess
import sys

CHILD = """
import json, sys
import cudacourse.grader.prepare as P
env = P._verdict_env({})
print(json.dumps([P.device.__name__, P.device.chosen(), "numba.cuda" in sys.modules,
                  env.get("CUDACOURSE_GRADING")]))
"""


def test_the_verdict_env_is_built_in_a_grading_process_that_chooses_no_device():
    """The grader is imported as itself (nbgrader's config imports cudacourse.grader): the
    device probe handed to the verdict server is made there with the ctypes probe only, and
    the grading process chooses no device and never imports numba.cuda."""
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    name, chosen, numba_cuda, grading = json.loads(out.stdout.splitlines()[-1])
    assert name == "cudacourse.device"
    assert chosen is False and numba_cuda is False
    assert grading == "1"


def _feedback_argv_timeout(monkeypatch, options: dict) -> int:
    """The per-cell timeout the feedback run's process is started with (nbrun.py's options,
    its last argument), the sandbox replaced by a stand-in that runs nothing."""
    import json

    import nbformat

    from cudacourse.grader import prepare, sandbox

    seen = []

    def run(argv, **kw):
        seen.append(json.loads(argv[-1]))
        return sandbox.Result(rc=1, stdout=b"", stderr=b"", timed_out=False, seconds=0.0,
                              isolation="test")

    monkeypatch.setattr(prepare.sbx, "run", run)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    outputs, incidents, _ = prepare.feedback_run(nb, {**prepare.DEFAULTS, **options},
                                                 "/nonexistent", None, {})
    assert outputs is None and "no result" in incidents[0]  # the stand-in wrote nothing
    return seen[0]["timeout"]


def test_the_feedback_run_takes_its_own_cell_timeout(monkeypatch):
    """--feedback-timeout: the feedback run's cells get their own (shorter) timeout; the
    verdicts keep --timeout."""
    assert _feedback_argv_timeout(monkeypatch, {"timeout": 30, "feedback_timeout": 4}) == 4


def test_without_a_feedback_timeout_the_feedback_run_takes_the_cell_timeout(monkeypatch):
    assert _feedback_argv_timeout(monkeypatch, {"timeout": 30}) == 30
