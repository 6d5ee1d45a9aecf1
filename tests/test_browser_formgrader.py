"""A hostile submission opened by the instructor in formgrader, and its feedback, in Chromium.

A light scratch course (tests/lightcourse.py: lesson 1's graded cells, demos dropped, as
only they are graded and the demos cost most of the grading) with two students: ``attacker`` (right answers, plus Markdown
and raw cells whose markup would take over the instructor's session: change the page title,
set a cookie, and rewrite every grade through formgrader's API) and ``victim`` (right
answers). Both are graded with ``cudacourse grade``, feedback is generated with nbgrader,
then the instructor's server (the configuration ``cudacourse lab --instructor`` uses) shows
the attacker's submission in formgrader, and the feedback page is opened too.

Shown: no script of the submission ran (title, cookies and a flag the payload sets are
unchanged), the gradebook holds the same scores after the visit, the page is served with
the Content-Security-Policy, and the attacker's text is still there, as text. A control
renders the same payload unsanitized in the same browser and sees it run, so the checks
can fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import nbformat
import pytest

from cudacourse.course import authoring
from cudacourse.grader import runner

import lightcourse

pytestmark = [pytest.mark.browser, pytest.mark.grading]

pytest.importorskip("jupyterlab", reason="JupyterLab is not installed here")

ROOT = authoring.ROOT
A = "01_gpu_vs_cpu"
# Every way the payload could run sets the same three things
RUN = ("document.title='pwned';document.cookie='pwned=1; path=/';window.__pwned=1;"
       "fetch('/formgrader/api/submissions/" + A + "').then(r=>r.json()).then(subs=>"
       "subs.forEach(s=>fetch('/formgrader/api/grade/'+s.id,{method:'PUT'})))")
PAYLOAD = [
    f'<img src=x onerror="{RUN}">',
    f"<script>{RUN}</script>",
    f'<svg onload="{RUN}"></svg>',
    f'<a href="javascript:{RUN}" id="lnk">click me</a>',
    f'<details open ontoggle="{RUN}"><summary>s</summary></details>',
    f'<iframe srcdoc="<script>parent.{RUN}</script>"></iframe>',
    "MARKER-attacker-text",
]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    # as `cudacourse grade` runs it: the course's grader or nothing (no stock Execute)
    return runner.nbgrader(str(course), *args, f"--db=sqlite:///{course}/gradebook.db",
                           timeout=900)


def _submission(learner: nbformat.NotebookNode, master: nbformat.NotebookNode,
                hostile: bool) -> nbformat.NotebookNode:
    nb = nbformat.from_dict(learner)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in master.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    nb.cells = [c for c in nb.cells if c.cell_type != "code" or
                c.metadata.get("nbgrader", {}).get("grade_id")]  # demos cost time only
    if hostile:
        nb.cells.insert(1, nbformat.v4.new_markdown_cell("\n\n".join(PAYLOAD)))
        raw = nbformat.v4.new_raw_cell("\n".join(PAYLOAD))
        raw.metadata["format"] = "text/html"
        nb.cells.insert(2, raw)
        nb.metadata["title"] = f"<script>{RUN}</script>"
    return nb


def _scores(course: Path) -> dict[tuple[str, str], float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        return {(sub.student.id, g.name): g.score for sub in gb.assignment_submissions(A)
                for nb in sub.notebooks for g in nb.grades}


def _notebook_id(course: Path, student: str) -> str:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        return gb.find_submission_notebook(A, A, student).id


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("hostile") / "course"
    course.mkdir()
    lightcourse.write(course)  # lesson 1's graded cells: the demos would only cost time
    release = _nbgrader(course, "generate_assignment", A, "--force")
    assert release.returncode == 0, release.stderr
    learner = nbformat.read(course / "notebooks" / A / f"{A}.ipynb", 4)
    master = nbformat.read(course / "solutions" / A / f"{A}.ipynb", 4)
    for student, hostile in (("attacker", True), ("victim", False)):
        d = course / "submitted" / student / A
        d.mkdir(parents=True)
        nbformat.write(_submission(learner, master, hostile), d / f"{A}.ipynb")
    proc = subprocess.run([sys.executable, "-m", "cudacourse.cli", "grade", A, "--course",
                           str(course), "--workers", "2", "--timeout", "60",
                           "--no-feedback-run", "--no-progress"], cwd=course, env=_env(),
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    feedback = _nbgrader(course, "generate_feedback", A, "--force")
    assert feedback.returncode == 0, feedback.stderr[-3000:]
    return course


@pytest.fixture(scope="module")
def formgrader(course, jupyter_server):
    """The instructor's server as ``cudacourse lab --instructor`` configures it."""
    config = ROOT / "src" / "cudacourse" / "grader" / "instructor_server_config.py"

    def command(port: int) -> list[str]:
        cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={course}",
               "--ServerApp.default_url=/formgrader", f"--config={config}", "--no-browser",
               f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
               "--IdentityProvider.token="]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        return cmd

    with jupyter_server(command, "/formgrader", cwd=course, env=_env()) as url:
        yield url


def _untouched(page, title: str) -> None:
    page.wait_for_timeout(1500)  # onerror/onload/ontoggle fire at once; give them time
    assert page.title() == title
    assert page.evaluate("window.__pwned") is None
    assert not any(c["name"] == "pwned" for c in page.context.cookies())


def test_the_payload_runs_when_nothing_defends(browser):
    """The control: the same markup, unsanitized, runs in this browser."""
    page = browser.new_page()
    page.set_content("<title>control</title>" + PAYLOAD[0].replace(
        "fetch(", "void(").replace("document.cookie='pwned=1; path=/';", ""))
    page.wait_for_function("document.title === 'pwned'", timeout=10_000)
    assert page.evaluate("window.__pwned") == 1


def test_a_hostile_submission_runs_nothing_in_formgrader(course, formgrader, browser, tmp_path):
    before = _scores(course)
    assert before[("attacker", "test_vector_add")] == before[("victim", "test_vector_add")] > 0
    url = f"{formgrader}/formgrader/submissions/{_notebook_id(course, 'attacker')}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        policy = resp.headers.get("Content-Security-Policy", "")
        html = resp.read().decode()
    script_src = re.search(r"script-src ([^;]*)", policy)
    assert script_src and "'nonce-" in script_src.group(1)
    assert "'unsafe-inline'" not in script_src.group(1)
    assert "MARKER-attacker-text" in html  # the learner's text is shown, as text
    # no tag of the page carries an event handler or a javascript: URL (text may quote them),
    # but nbgrader's own name toggles (the policy lets exactly those run)
    from cudacourse.grader.pagepolicy import NBGRADER_HANDLERS

    ours = html
    for handler in NBGRADER_HANDLERS:
        ours = ours.replace(f'onclick="{handler}"', "")
    assert not re.search(r"<[a-zA-Z][^<>]*\son[a-z]+\s*=", ours)
    assert not re.search(r"<[a-zA-Z][^<>]*(href|src)\s*=\s*[\"']?\s*javascript:", html, re.I)
    context = browser.new_context()
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector("text=MARKER-attacker-text", timeout=60_000)
    title = page.title()
    assert title != "pwned"
    _untouched(page, title)
    page.screenshot(path=str(tmp_path / "formgrader.png"))
    assert _scores(course) == before  # nobody's grade changed


def test_the_feedback_page_runs_nothing(course, formgrader, browser):
    page_file = course / "feedback" / "attacker" / A / f"{A}.html"
    text = page_file.read_text(encoding="utf-8")
    assert "MARKER-attacker-text" in text
    for where in (page_file.as_uri(),  # as a learner opens the downloaded file
                  f"{formgrader}/files/feedback/attacker/{A}/{A}.html"):
        page = browser.new_page()
        # Jupyter serves /files/ only to its own pages (it checks the Referer)
        page.goto(where, referer=f"{formgrader}/lab")
        page.wait_for_selector("text=MARKER-attacker-text", timeout=60_000)
        title = page.title()
        assert title != "pwned", where
        _untouched(page, title)
        page.close()
