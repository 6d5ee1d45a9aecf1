"""A course folder outside the checkout (grader/coursefolder.py, ``cudacourse new-course``),
and the lessons' committed figures found in the course being graded (bench.committed_report)."""

from __future__ import annotations

import json
import sys

import pytest

from cudacourse.course import authoring
from cudacourse import bench
from cudacourse.bench import report as bench_report
from cudacourse.cli import main
from cudacourse.grader import coursefolder

ROOT = authoring.ROOT


def _checkout(tmp_path):
    """A checkout in miniature: lessons/, the config, two editions' masters, the figures."""
    co = tmp_path / "checkout"
    (co / "lessons").mkdir(parents=True)
    (co / "nbgrader_config.py").write_text("c = get_config()\n")
    for rel in ("solutions/01_a/01_a.ipynb", "solutions/02_b/02_b.ipynb",
                "solutions/ja/01_a/01_a.ipynb"):
        (co / rel).parent.mkdir(parents=True, exist_ok=True)
        (co / rel).write_text(rel)
    (co / "docs").mkdir()
    (co / "docs" / "benchmarks.json").write_text(json.dumps({"mode": "gpu", "x": 1}))
    return co


def test_a_course_folder_holds_one_editions_masters_and_the_figures(tmp_path):
    co = _checkout(tmp_path)
    dest = tmp_path / "term" / "en"
    written = coursefolder.create(dest, co, exchange=str(tmp_path / "exchange"))
    assert set(written) == {"nbgrader_config.py", "solutions/01_a/", "solutions/02_b/",
                            "docs/benchmarks.json"}
    assert not (dest / "solutions" / "ja").exists()  # no pseudo-assignment "ja"
    assert f"c.Exchange.root = {str(tmp_path / 'exchange')!r}" in \
        (dest / "nbgrader_config.py").read_text()
    ja = coursefolder.create(tmp_path / "term" / "ja", co, lang="ja")
    assert "solutions/01_a/" in ja and "solutions/02_b/" not in ja
    assert (tmp_path / "term" / "ja" / "solutions" / "01_a" / "01_a.ipynb").read_text() == \
        "solutions/ja/01_a/01_a.ipynb"


def test_nothing_is_overwritten_and_bad_requests_say_why(tmp_path):
    co = _checkout(tmp_path)
    dest = tmp_path / "course"
    coursefolder.create(dest, co, assignments=["01"])
    assert not (dest / "solutions" / "02_b").exists()
    before = (dest / "nbgrader_config.py").read_text()
    with pytest.raises(coursefolder.CourseFolderError, match="already holds a course"):
        coursefolder.create(dest, co)
    assert (dest / "nbgrader_config.py").read_text() == before
    with pytest.raises(coursefolder.CourseFolderError, match="no assignment '07'.*01_a, 02_b"):
        coursefolder.create(tmp_path / "other", co, assignments=["07"])
    with pytest.raises(coursefolder.CourseFolderError, match="inside the checkout"):
        coursefolder.create(co / "runs", co)


def test_the_command_makes_the_folder_from_this_checkout(tmp_path, capsys):
    dest = tmp_path / "gpu-2027"
    assert main(["new-course", str(dest), "--from", str(ROOT), "--assignment", "01"]) == 0
    assert (dest / "solutions" / "01_gpu_vs_cpu" / "01_gpu_vs_cpu.ipynb").is_file()
    assert "generate_assignment" in capsys.readouterr().out
    assert main(["new-course", str(dest), "--from", str(ROOT)]) == 2
    assert "already holds a course" in capsys.readouterr().err


def test_lessons_find_the_figures_of_the_course_being_graded(tmp_path, monkeypatch):
    course = tmp_path / "course"
    (course / "docs").mkdir(parents=True)
    (course / "docs" / "benchmarks.json").write_text(json.dumps({"mode": "gpu", "tag": "ours"}))
    monkeypatch.chdir(tmp_path)  # the sandbox's scratch folder: no docs/ here or above
    monkeypatch.setenv(bench_report.COURSE_ENV, str(course))
    found = bench.committed_report()
    assert found["tag"] == "ours" and found["path"] == str(course / "docs" / "benchmarks.json")
    # a simulator smoke file in the course counts as none; the search goes on (to the
    # package's checkout here), never to an error
    (course / "docs" / "benchmarks.json").write_text(json.dumps({"mode": "sim"}))
    assert (bench.committed_report() or {}).get("tag") != "ours"


def test_the_sandbox_tells_the_lesson_where_the_course_is(tmp_path):
    from cudacourse.grader import sandbox

    work = tmp_path / "work"
    work.mkdir()
    course = tmp_path / "course"
    course.mkdir()
    res = sandbox.run([sys.executable, "-c",
                       "import os; print(os.environ['CUDACOURSE_COURSE_ROOT'])"],
                      workdir=str(work), sb=sandbox.Sandbox(), course_root=str(course),
                      timeout=60)
    assert res.stdout.decode().strip() == str(course.resolve()), (res.stdout, res.stderr)


def test_the_instructors_page_names_what_the_code_does(capsys):
    """docs/instructors.md held to the code: new-course's options as the command has them,
    the exchange set up in section 2, every handler the policy allows, the pinned MathJax."""
    import re

    from cudacourse.grader import pagepolicy

    page = (ROOT / "docs" / "instructors.md").read_text()
    section0 = page.split("## 0. A course folder")[1].split("## 1.")[0]
    with pytest.raises(SystemExit):
        main(["new-course", "--help"])
    options = set(re.findall(r"--[a-z]+", capsys.readouterr().out))
    named = set(re.findall(r"--[a-z]+", section0))
    assert named and named <= options | {"--help"}, named - options
    section2 = page.split("## 2. Collect")[1].split("## 3.")[0]
    for step in ("c.Exchange.root", "release_assignment", "fetch_assignment", "submit",
                 "collect", "chmod 777"):
        assert step in section2, step
    for handler in pagepolicy.NBGRADER_HANDLERS:
        assert f"`{handler}" in page or handler.split("(")[0] + "(" in page, handler
    pinned = (ROOT / "pyproject.toml").read_text()
    assert '"jupyter-server-mathjax==' in pinned and "jupyter-server-mathjax" in page
