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
    assert name == "cudacourse.runtime.device"
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


def test_the_context_speaks_the_notebooks_edition():
    """Issue 39: one course grades both editions; the master's setup cell is rewritten to the
    notebook's language, whatever the master's edition said."""
    from cudacourse.grader import prepare

    ja_setup = 'import cudacourse\ncudacourse.setup(lang="ja")  # この版\nimport numpy as np'
    assert "lang='en'" in prepare.in_edition(ja_setup, "en")
    assert "lang='ja'" in prepare.in_edition("import cudacourse\ncudacourse.setup()", "ja")
    assert prepare.in_edition("cudacourse.setup(device='sim')", "ja").count("lang=") == 1
    for untouched in ("x = 1", "%matplotlib inline\ncudacourse.setup()", "setup = 3"):
        assert prepare.in_edition(untouched, "ja") == untouched


def test_incidents_are_shown_in_a_language_without_changing_the_process(monkeypatch):
    """Grading threads of one process grade both editions at once: an incident is rendered
    in its notebook's language without setting the process's language."""
    from cudacourse import i18n
    from cudacourse.grader import lang

    before = i18n.language()
    text = i18n.T("test cell {cell}: {status}: {message}", cell="test_x", status="timeout",
                  message="m")
    assert lang.shown_in(text, "ja") == "テストセル test_x: timeout: m"
    assert lang.shown_in(text, "en") == "test cell test_x: timeout: m"
    assert lang.shown_in("plain", "ja") == "plain"
    assert i18n.language() == before
