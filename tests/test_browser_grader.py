"""What a grader sees, in a real browser: formgrader and the feedback on a failing submission.

A light scratch course (tests/lightcourse.py: lesson 1's graded cells, demos dropped, as
only they are graded) with one late submission whose kernel is wrong and whose second
answer is wrong. Its verdicts are given (as ``cudacourse grade`` would have prepared them:
``--ResilientExecute.results_dir``), so ``nbgrader autograde`` records it in seconds with the
course's real execute step, summary and late policy; then ``nbgrader generate_feedback``, and
formgrader under ``jupyter server``. In a 1280 x 800 window, without scrolling, the cause of
the failing cell and the late rule must be on screen, in formgrader and in the feedback HTML.
``CUDACOURSE_SCREENSHOT=docs/formgrader-summary.png`` saves formgrader's view (the picture in
docs/instructors.md).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

from cudacourse.grader import runner

import lightcourse

pytestmark = pytest.mark.browser


A = "01_gpu_vs_cpu"
STUDENT = "late_wrong"
CAUSE = "out holds a[i] - b[i], but it should hold a[i] + b[i]"
MESSAGE = (f"{CAUSE}. Check the arithmetic: each thread adds its two elements. "
           "[n=1000, blocks=9, threads_per_block=128, formula=a[i] - b[i]]")
WINDOW = {"width": 1280, "height": 800}


def _graded_course(course: Path) -> None:
    course.mkdir()
    # lesson 1's graded cells only (tests/lightcourse.py): the demos would only cost time
    lightcourse.write(course, f"c.CoursePolicy.due = {{{A!r}: '2026-01-10 23:59:00 UTC'}}\n"
                              "c.LatePenalty.penalty_method = 'percent_per_day'")
    db = f"--db=sqlite:///{course}/gradebook.db"
    done = runner.nbgrader(str(course), "generate_assignment", A, "--force", db)
    assert done.returncode == 0, done.stderr
    master = nbformat.read(course / "solutions" / A / f"{A}.ipynb", as_version=4)
    nb = nbformat.read(course / "notebooks" / A / f"{A}.ipynb", as_version=4)
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source for c in master.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in nb.cells:  # the master's answers, but a wrong kernel and question 2 wrong
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in solutions:
            cell.source = solutions[gid]
        if gid == "vector_add":
            cell.source = cell.source.replace("a[i] + b[i]", "a[i] - b[i]")
        if gid == "answer_blocks":
            cell.source = 'answer_blocks = "b"\n'
    sub = course / "submitted" / STUDENT / A
    sub.mkdir(parents=True)
    nbformat.write(nb, sub / f"{A}.ipynb")
    (sub / "timestamp.txt").write_text("2026-01-12 09:00:00.000000 UTC")
    verdicts = {c.metadata["nbgrader"]["grade_id"]: {"status": "pass", "message": "",
                                                      "output": "right."}
                for c in master.cells if c.metadata.get("nbgrader", {}).get("grade")}
    verdicts["test_vector_add"] = {"status": "fail", "ename": "CheckFailure",
                                   "message": MESSAGE, "cause": "wrong_formula"}
    verdicts["test_answer_blocks"] = {
        "status": "fail", "ename": "AssertionError",
        "message": 'answer_blocks = "b" is not the right answer to Question 2. Round up.'}
    results = course / "results" / STUDENT / A
    results.mkdir(parents=True)
    (results / f"{A}.json").write_text(json.dumps({
        "cells": verdicts, "outputs": None, "incidents": [], "isolation": ["bwrap"],
        "sources": [c.source for c in nb.cells], "seconds": 0.0}))
    done = runner.nbgrader(str(course), "autograde", A, "--force", db, f"--student={STUDENT}",
                           f"--ResilientExecute.results_dir={course / 'results'}")
    assert done.returncode == 0, done.stderr
    done = runner.nbgrader(str(course), "generate_feedback", A, "--force", db)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    path = tmp_path_factory.mktemp("grader_view") / "course"
    _graded_course(path)
    return path


@pytest.fixture()
def formgrader(course, jupyter_server):
    env = {**os.environ, "PATH": str(Path(sys.executable).parent) + os.pathsep +
           os.environ.get("PATH", "")}
    with jupyter_server(lambda port: [
            sys.executable, "-m", "jupyter", "server", "--no-browser", f"--port={port}",
            "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--allow-root",
            f"--ServerApp.root_dir={course}"], "/formgrader", cwd=course, env=env) as url:
        yield url


def _submission_id(course: Path) -> str:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        return gb.find_submission_notebook(A, A, STUDENT).id


def _on_screen_without_scrolling(page, text: str) -> bool:
    box = page.get_by_text(text, exact=False).first.bounding_box()
    scrolled = page.evaluate("window.scrollY")
    return box is not None and scrolled == 0 and 0 <= box["y"] and \
        box["y"] + min(box["height"], 40) <= WINDOW["height"]


def test_formgrader_shows_the_cause_and_the_late_rule_on_opening(course, formgrader, browser):
    page = browser.new_page(viewport=WINDOW)
    page.goto(f"{formgrader}/formgrader/submissions/{_submission_id(course)}/")
    page.wait_for_selector("text=Summary:", timeout=90_000)
    assert _on_screen_without_scrolling(page, CAUSE)
    assert _on_screen_without_scrolling(page, "1 day 9 hours late. Rule: -10% per "
                                        "started day late")
    assert page.get_by_text("IPython.core.display.Markdown").count() == 0
    assert page.get_by_text("CheckFailure:").count() == 0
    shot = os.environ.get("CUDACOURSE_SCREENSHOT")
    if shot:  # what the grader sees on opening
        page.screenshot(path=shot)
    # the link in the summary leads to the failing cell
    page.locator("a[href='#test_vector_add']").first.click()
    assert page.evaluate("window.scrollY") > 0


def test_feedback_html_shows_the_cause_first_and_wraps_messages(course, browser):
    html = course / "feedback" / STUDENT / A / f"{A}.html"
    page = browser.new_page(viewport=WINDOW)
    page.goto(html.as_uri())
    assert _on_screen_without_scrolling(page, CAUSE)
    assert _on_screen_without_scrolling(page, "Rule: -10% per started day late")
    # questions as questions, under their quiz.ask cell
    assert page.get_by_text("Question 2: Blocks for 1,000 elements").count() >= 2
    assert page.get_by_text("IPython.core.display.Markdown").count() == 0
    # no line of a message wider than its box
    widest = page.evaluate("""() => Math.max(...[...document.querySelectorAll(
        '.output_error pre, .output_stream pre')].map(e => e.scrollWidth - e.clientWidth))""")
    assert widest <= 0, widest
