"""A learner's first minutes, in a real browser: `cudacourse lab`, lesson 1, a quiz.

Drives headless Chromium (Debian's package) with Playwright against the JupyterLab that
`cudacourse lab` starts, on the real learner copy of lesson 1: Run All stops at the first
unfilled exercise, and by then the first question's widget must be there and give instant
feedback to clicks.
"""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.browser

pytest.importorskip("jupyterlab", reason="JupyterLab is not installed here")


@pytest.fixture()
def lab(tmp_path, jupyter_server):
    with jupyter_server(lambda port: [
            sys.executable, "-m", "cudacourse.cli",
            "lab", "--workspace", str(tmp_path / "ws"), "--no-browser",
            f"--ServerApp.port={port}", "--ServerApp.ip=127.0.0.1",
            "--IdentityProvider.token="], "/lab") as url:
        yield url


def test_first_quiz_gives_instant_feedback_in_jupyterlab(lab, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(lab + "/lab/tree/01_gpu_vs_cpu/01_gpu_vs_cpu.ipynb")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
    # the kernel is up: the status bar reads "Python 3 (ipykernel) | Idle"
    page.locator("text=/\\| Idle/").first.wait_for(timeout=90_000)
    page.click("text=Run", timeout=30_000)
    page.click("text=Run All Cells")
    radios = page.wait_for_selector(".widget-radio-box", timeout=180_000)
    assert radios is not None
    # the markdown above the buttons spells out the question and the choices
    assert page.locator("text=A GPU thread is slower than a CPU thread").count() >= 1
    assert page.locator("text=Question 1: What a GPU is built for").count() >= 1
    assert page.locator("text=answer_throughput").count() >= 1  # names its variable
    page.click(".widget-radio-box label:has-text('(b)')")
    page.click("button:has-text('Check')")
    page.wait_for_selector("text=Not right", timeout=30_000)
    page.click(".widget-radio-box label:has-text('(a)')")
    page.click("button:has-text('Check')")
    page.wait_for_selector("text=Right.", timeout=30_000)
    # the learner's lab shows the course, not nbgrader's instructor tools or the news
    assert page.locator("text=Create Assignment").count() == 0
    assert page.locator("text=Formgrader").count() == 0
    assert page.locator("text=/official Jupyter news/").count() == 0
    page.screenshot(path=str(tmp_path / "quiz.png"))
