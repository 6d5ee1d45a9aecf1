"""A new lesson, added as docs/authoring.md's *Add a lesson: five files* says.

In a scratch copy of the course (the package, nbgrader's configuration, nothing else)
``cudacourse lesson new`` writes the lesson's five authored files, under the next free number
(so a real lesson 7 or 8 in the package changes nothing here). Then the section's steps, in
processes that import the scratch package: ``cudacourse i18n update`` generates the Japanese
files (a translator fills them in), ``cudacourse build`` writes both editions, ``cudacourse
lesson check`` finds every rule kept, the checker passes the master's kernel and rejects an
unguarded one, ``cudacourse grade`` scores a right and a wrong submission, ``cudacourse
report`` reports them. No other file of the course is edited.

A second scratch lesson is broken on purpose, once per rule: ``cudacourse lesson check``
names each broken rule, with its fix.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from cudacourse.course import lessonrules, scaffold
from cudacourse.course.authoring import ROOT
from test_toy_exercise import _fill  # a learner copy with its answer cells filled in

NUMBER = len(lessonrules.stems(ROOT)) + 1  # the next lesson: whatever lessons exist
STEM, TOPIC = f"{NUMBER:02d}_offset", "offset"
SECTION = "## Add a lesson: five files"

WRONG_KERNEL = '''@cuda.jit
def offset_offset(x, c, out):
    i = cuda.grid(1)
    out[i] = x[i] + c'''


def _section() -> str:
    text = (ROOT / "docs" / "authoring.md").read_text()
    section = text[text.index(SECTION):]
    return section[:section.index("\n## ", 1)]


def _documented_files() -> list[str]:
    """The files docs/authoring.md's section lists, with this lesson's names filled in."""
    listed = re.findall(r"^- `([^`]+)`:", _section(), flags=re.M)
    return [f.replace("NN_topic", STEM).replace("<topic>", TOPIC).replace("<checker>", TOPIC)
            for f in listed]


def _documented_steps() -> list[str]:
    return re.findall(r"^\d\. `([^`]+)`", _section(), flags=re.M)


def _scratch(root: Path) -> Path:
    shutil.copytree(ROOT / "src" / "cudacourse", root / "src" / "cudacourse",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (root / "lessons" / "quizkeys").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    return root


def _run(course: Path, *args: str, timeout: int = 300, ok: bool = True
         ) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
               str(course / "src"), os.environ.get("PYTHONPATH")])), "CUDACOURSE_QUIET": "1",
           # nbgrader runs `alembic` as a subprocess: this environment's bin/ must be on PATH
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run([sys.executable, *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=timeout)
    if ok:
        assert proc.returncode == 0, (args, proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
            and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The scratch copy, with the five files ``cudacourse lesson new`` writes."""
    root = _scratch(tmp_path_factory.mktemp("newlesson"))
    before = _files(root)
    out = _run(root, "-m", "cudacourse.cli", "lesson", "new", STEM, "--title", "Offsets").stdout
    written = _files(root) - before
    assert sorted(written) == sorted(scaffold.paths(STEM)) and len(written) <= 5, out
    return root


def test_the_section_lists_the_files_and_steps_the_scaffold_writes():
    assert _documented_files() == scaffold.paths(STEM)
    assert [s.split()[0] + " " + s.split()[1] if s.startswith("cudacourse ") else s
            for s in _documented_steps()] == [
        "cudacourse lesson", "cudacourse i18n", "cudacourse build", "cudacourse lesson",
        "cudacourse.check.check_<exercise>", "cudacourse grade", "cudacourse report"]


def _translate(path: Path) -> None:
    """Fill every empty entry of a generated translation file, as a translator would: the
    glossary's term for each term the English uses, in a Japanese sentence."""
    from babel.messages.pofile import read_po, write_po

    from cudacourse.i18n import glossary

    with open(path, "rb") as f:
        catalog = read_po(f)
    for m in catalog:
        if m.id and not m.string:
            terms = [t.ja for t in glossary.terms("ja")
                     if t.required and t.pattern.search(glossary.prose(m.id))]
            m.string = "、".join(terms) + "についての訳文です。"
    with open(path, "wb") as f:
        write_po(f, catalog, width=0, no_location=True, include_previous=True)


REGISTRY = """
import json
from cudacourse.course import lessons, authoring
from cudacourse.grader import partial
import cudacourse.check as C
L = lessons.BY_STEM["{stem}"]
print(json.dumps({{"row": L.readme_row(), "marker": L.marker_line(), "checkers": L.checkers,
                  "in_check": "check_offset_offset" in C.__all__, "topics": C._TOPICS,
                  "technique": L.technique.get("check_offset_offset"),
                  "partial": sorted(partial.TECHNIQUE) == sorted(lessons.technique()),
                  "sources": [p.name for p in authoring.lessons()]}}, default=sorted))
"""

CHECK = """
import json, nbformat
import cudacourse
cudacourse.setup()
import cudacourse.check as C
from numba import cuda
nb = nbformat.read("solutions/{stem}/{stem}.ipynb", 4)
src = next(c.source for c in nb.cells if c.metadata.get("nbgrader", {{}}).get("grade_id") == "offset_offset")
ns = {{"cuda": cuda}}
exec(src, ns)  # the master's answer cell, as the notebook runs it
got = {{"right": str(C.check_offset_offset(ns["offset_offset"]))}}
exec(WRONG, ns)
try:
    C.check_offset_offset(ns["offset_offset"])
except C.CheckFailure as exc:
    got["wrong"] = [exc.cause, str(exc)]
print(json.dumps(got))
"""


@pytest.mark.grading
def test_a_new_lesson_is_scaffolded_built_checked_graded_and_reported(course):
    # the registry found it: README row, marker, checkers, partial credit, the sources
    reg = json.loads(_run(course, "-c", REGISTRY.format(stem=STEM)).stdout.splitlines()[-1])
    assert reg["row"].startswith(f"| {NUMBER} | [Offsets](notebooks/{STEM}/{STEM}.ipynb)")
    assert reg["marker"] == f"lesson{NUMBER}: lesson {NUMBER}, offsets"
    assert reg["checkers"] == ["check_offset_offset"] and reg["in_check"]
    assert reg["topics"][-1] == "offset" and reg["partial"]
    assert reg["technique"] == ["redundant_work", "serial_work"]  # from the spec's observe
    assert reg["sources"] == [f"{STEM}.py"]

    # the Japanese files are generated; a translator fills them in; update records them
    _run(course, "-m", "cudacourse.cli", "i18n", "update", ok=False)
    ja = [course / "src/cudacourse/locale/ja/lessons" / f"{STEM}.po",
          course / "lessons/quizkeys/ja" / f"{STEM}.po"]
    assert all(p.exists() for p in ja)
    for p in ja:
        _translate(p)
    assert "complete" in _run(course, "-m", "cudacourse.cli", "i18n", "update").stdout

    # build: the masters and the learner copies of both editions
    out = _run(course, "-m", "cudacourse.cli", "build", f"{NUMBER:02d}").stdout
    assert "4 file(s) rebuilt" in out, out
    learner = nbformat.read(course / "notebooks" / STEM / f"{STEM}.ipynb", 4)
    assert (course / "notebooks" / "ja" / STEM / f"{STEM}.ipynb").exists()
    by_id = {c.metadata["nbgrader"]["grade_id"]: c.source for c in learner.cells
             if "nbgrader" in c.metadata}
    assert "raise NotImplementedError" in by_id["offset_offset"]
    assert "hidden=" not in json.dumps(by_id)

    # lesson check: every rule kept
    out = _run(course, "-m", "cudacourse.cli", "lesson", "check", STEM).stdout
    assert f"{STEM}: keeps every rule" in out, out

    # check: the master's kernel passes, an unguarded one is rejected with its diagnosis
    got = json.loads(_run(course, "-c", f"WRONG = {WRONG_KERNEL!r}\n" + CHECK.format(stem=STEM))
                     .stdout.strip().splitlines()[-1])
    assert "offset_offset passes: 2 sizes (1000, 33), 2 block sizes" in got["right"]
    assert got["wrong"][0] and "guard" in got["wrong"][1]

    # grade: a right and a wrong submission, through the verdicts and nbgrader
    _run(course, "-m", "nbgrader", "generate_assignment", STEM, "--force",
         f"--db=sqlite:///{course}/gradebook.db")
    answers = {"right": {"offset_offset": textwrap.dedent('''\
                   @cuda.jit
                   def offset_offset(x, c, out):
                       i = cuda.grid(1)
                       if i < out.size:
                           out[i] = c + x[i]'''), "answer_spare": 'answer_spare = "b"'},
               "wrong": {"offset_offset": WRONG_KERNEL, "answer_spare": 'answer_spare = "a"'}}
    for student, cells in answers.items():
        where = course / "submitted" / student / STEM
        where.mkdir(parents=True)
        nbformat.write(_fill(learner, cells), where / f"{STEM}.ipynb")
    _run(course, "-m", "cudacourse.cli", "grade", STEM, "--course", str(course),
         "--no-feedback-run", "--no-progress", "--timeout", "120", timeout=600)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        scores = {s: {g.name: g.score for g in gb.find_submission_notebook(STEM, STEM, s).grades}
                  for s in answers}
    assert scores["right"]["test_offset_offset"] == 2.0
    assert scores["wrong"]["test_offset_offset"] == 0.0

    # report: the class report names the exercise and both students
    _run(course, "-m", "cudacourse.cli", "report", STEM, "--course", str(course), "--no-plot")
    report = course / "grading" / STEM / "report"
    text = "\n".join(p.read_text(errors="replace") for p in report.rglob("*") if p.is_file())
    assert "test_offset_offset" in text and "right" in text and "wrong" in text


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def test_lesson_check_names_every_broken_rule(tmp_path):
    root = _scratch(tmp_path)
    assert scaffold.new(root, STEM, "Offsets")
    checker = root / "src/cudacourse/check/offset.py"
    source = root / "lessons" / f"{STEM}.py"
    # each edit breaks one rule
    _edit(source, "import cudacourse.check\n", "")  # setup_cell
    _edit(source, "### BEGIN HIDDEN TESTS\ncudacourse.check.check_offset_offset(offset_offset, "
                  "hidden=cudacourse.check.Cases(\n", "### BEGIN HIDDEN TESTS\n"
                  "cudacourse.check.check_offset_offset(offset_offset, hidden=(\n")  # hidden
    _edit(source, "points=2", "points=5")  # points
    _edit(root / "lessons/quizkeys" / f"{STEM}.toml", 'why.d = ', 'whyd = ')  # questions
    _edit(checker, "    points=2,\n)", "    points=2,\n)\n\n\ndef _more(ctx):\n"
                   "    K.fail(\"made_up_cause\", T(\"a message no catalogue has\"), ctx)\n")
    _edit(source, 'quiz.ask("', 'quiz.ask("x')  # asked_in_order
    (root / "README.md").write_text("| # | lesson | you write |\n|---|---|---|\n"
                                    "| 1 | [A](x): a | `a` |\n")  # registry_listed
    proc = _run(root, "-m", "cudacourse.cli", "lesson", "check", f"{NUMBER:02d}", ok=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    named = set(re.findall(r"^  \[(\w+)\]", proc.stdout, re.M))
    assert named == {"setup_cell", "hidden_cases", "points", "questions", "causes",
                     "messages_translated", "asked_in_order", "translations",
                     "registry_listed", "built"}, proc.stdout
    for rule in named:  # each with its fix, in the docs' words
        assert f"  Fix: {lessonrules.BY_ID[rule].fix}" in proc.stdout


def test_lesson_new_refuses_a_taken_number_and_overwrites_nothing(tmp_path):
    root = _scratch(tmp_path)
    with pytest.raises(scaffold.ScaffoldError, match=f"the next lesson is {NUMBER:02d}"):
        scaffold.new(root, "01_again")
    with pytest.raises(scaffold.ScaffoldError, match="NN_topic"):
        scaffold.new(root, "offset")
    (root / "lessons" / f"{STEM}.py").write_text("# mine\n")
    with pytest.raises(scaffold.ScaffoldError, match="exist already"):
        scaffold.new(root, STEM)
    assert (root / "lessons" / f"{STEM}.py").read_text() == "# mine\n"
    assert not (root / "src/cudacourse/check/offset.py").exists()
