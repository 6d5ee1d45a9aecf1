"""grader.prepare: what the verdict server's environment is built from."""
import importlib.util
import subprocess
import sys
from pathlib import Path

GRADER = Path(__file__).resolve().parents[1] / "src" / "cudacourse" / "grader"

BY_PATH = f"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location(
    "cudacourse_grader", {str(GRADER / '__init__.py')!r},
    submodule_search_locations=[{str(GRADER)!r}])
m = importlib.util.module_from_spec(spec); sys.modules["cudacourse_grader"] = m
spec.loader.exec_module(m)
import cudacourse_grader.prepare as P
env = P._verdict_env({{}})
print(json.dumps([P._device_module().__name__, "cudacourse" in sys.modules,
                  env.get("CUDACOURSE_GRADING")]))
"""


def test_the_verdict_env_is_built_when_nbgrader_loads_the_grader_by_path():
    """nbgrader's config loads the grader by path as ``cudacourse_grader`` (no parent
    package): the device probe handed to the verdict server must still be made there,
    without importing the cudacourse package (a GPU grader failed every autograde with
    'attempted relative import beyond top-level package')."""
    out = subprocess.run([sys.executable, "-c", BY_PATH], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    name, imported_package, grading = __import__("json").loads(out.stdout.splitlines()[-1])
    assert name == "cudacourse_grader_device"
    assert imported_package is False  # device chosen by nobody in the grading process
    assert grading == "1"


def test_inside_the_package_the_device_module_is_the_packages_own():
    from cudacourse import device
    from cudacourse.grader import prepare

    assert prepare._device_module() is device


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
