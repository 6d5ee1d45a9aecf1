"""A seventh lesson, added as docs/authoring.md's *Add a lesson: five files* says.

In a scratch copy of the course (the package, nbgrader's configuration, nothing else) it
writes the lesson source, the topic module, the checker module, the question bank (whose
``[lesson]`` table is the registry entry) and the question's key: exactly the files that
section lists. Then it runs the section's four steps in processes that import the scratch
package: build (master and learner copy), check (the checker passes the master's kernel and
rejects an unguarded one), grade (a right and a wrong submission, through the verdicts and
nbgrader) and report. No other file of the course is edited: the registry, the checkers'
package, partial credit and the grader find the lesson from its entry.
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

from cudacourse.authoring import ROOT
from test_toy_exercise import _fill  # a learner copy with its answer cells filled in

STEM, CHECKER, TOPIC = "07_offset", "offset", "offset"
SECTION = "## Add a lesson: five files"

FILES = {
    f"lessons/{STEM}.py": '''\
# %% [markdown]
# # Lesson 7: Offsets
#
# One thread per element adds a constant: `out[i] = x[i] + c`.

# %% [readonly] id=setup
import cudacourse
cudacourse.setup()  # first: a real GPU or the CUDA simulator, chosen before numba.cuda loads
import cudacourse.check
from cudacourse import quiz, offset
import numpy as np
from numba import cuda

# %%
print(offset.offset(np.arange(4, dtype=np.float32), 0.5))

# %% [markdown]
# Write `add_offset(x, c, out)`, guarded for the threads past the end.

# %% [solution] id=add_offset
@cuda.jit
def add_offset(x, c, out):
    ### BEGIN SOLUTION
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + c
    ### END SOLUTION

# %% [tests] id=test_add_offset points=3
cudacourse.check.check_add_offset(add_offset)
### BEGIN HIDDEN TESTS
cudacourse.check.check_add_offset(add_offset, hidden=cudacourse.check.Cases(seed=8128, sizes=[(517, 64)]))
### END HIDDEN TESTS

# %%
quiz.ask("07_offset.spare")

# %% [solution] id=answer_spare
# Question 1: Threads past the end. Answer as: answer_spare = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_spare = "b"
### END SOLUTION

# %% [tests] id=test_answer_spare points=1
quiz.grade("07_offset.spare", answer_spare)
''',
    f"src/cudacourse/{TOPIC}.py": '''\
"""Lesson 7's topic: a constant added to every element, ``out[i] = x[i] + c``."""

from __future__ import annotations

from . import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import numpy as np
from numba import cuda

from .arrays import check_array, is_device_array, output_array, return_like_input, to_device


def offset_ref(x, c, xp=np):
    return x + c


@cuda.jit
def _offset(x, c, out):
    """A grid-stride loop: any grid covers any n (the exercise writes one element per thread)."""
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = x[i] + c


def offset(x, c: float, out=None):
    """``x + c`` on the device: host in, host out; device in, device out."""
    check_array(x, "x", ndim=1)
    dout = output_array(out, (x.shape[0],))
    _offset[(x.shape[0] + 127) // 128, 128](to_device(x), np.float32(c), dout)
    return return_like_input(dout, out, not is_device_array(x))
''',
    f"src/cudacourse/check/{CHECKER}.py": '''\
"""Checker for lesson 7's exercise: ``add_offset(x, c, out)``."""

from __future__ import annotations

TECHNIQUE: dict[str, tuple[str, ...]] = {}  # every cause here is raised before the comparison

from typing import Any

from . import kit as K
from .. import offset as _offset


def check_add_offset(kernel: Any, *, hidden: Any = False, seed: int | None = None) -> str:
    """``kernel(x, c, out)`` computes ``out[i] = x[i] + c`` for every i."""
    K.require_kernel(kernel, "add_offset", 3)
    cases, seed = K.resolve(hidden, [(1000, 128), (33, 32)], seed, name="check_add_offset")
    gen = K.rng(seed)
    for n, tpb in cases:
        x = K.random_array(gen, n)
        want = _offset.offset_ref(x.astype(K.float64), 2.5)
        gx, out = K.to_device_guarded(x, "x"), K.output(n, "out")
        blocks = -(-n // tpb) + 1  # one spare block: its threads must do nothing
        ctx = {"n": n, "blocks": blocks, "threads_per_block": tpb}
        K.launch(kernel, blocks, tpb, gx.view, K.float32(2.5), out.view, name="add_offset")
        K.check_guards(out, "missing bounds guard (if i < out.size)?", ctx)
        K.compare(out.result(), want, name="out", formula="x[i] + c", block=tpb, context=ctx,
                  alternatives={"x[i] (c left out)": x})
    return K.passes("add_offset", f"{len(cases)} sizes", "a spare block each", hidden=hidden)
''',
    f"src/cudacourse/quizzes/{STEM}.toml": '''\
[lesson]
number = 7
title = "Offsets"
summary = "one thread per element, a constant added"
you_write = "`add_offset`"
topics = ["offset"]
checker = "offset"
plots = []
marker = "offsets"
terms = []

[[question]]
id = "spare"
title = "Threads past the end"
prompt = "n = 1000 elements, 4 blocks of 256 threads. What must the threads with i >= n do?"
choices = { a = "Write out[i] anyway", b = "Nothing: the guard skips them", c = "Wait for the others", d = "Write out[i - n]" }
''',
    f"lessons/quizkeys/{STEM}.toml": '''\
[[key]]
id = "spare"
answer = "b"
why.a = "out has 1000 elements: out[i] for i >= 1000 is past its end"
why.b = "the guard if i < n leaves them idle"
why.c = "nothing waits: the spare threads simply do no work"
why.d = "that would overwrite elements other threads wrote"
explain = "A grid covers n in whole blocks, so the last block has spare threads; the guard keeps them from writing."
hint = "What does the bounds guard do?"
''',
}

WRONG_KERNEL = '''@cuda.jit
def add_offset(x, c, out):
    i = cuda.grid(1)
    out[i] = x[i] + c'''


def _documented_files() -> list[str]:
    """The files docs/authoring.md's section lists, with this lesson's names filled in."""
    text = (ROOT / "docs" / "authoring.md").read_text()
    section = text[text.index(SECTION):]
    section = section[:section.index("\n## ", 1)]
    listed = re.findall(r"^- `([^`]+)`:", section, flags=re.M)
    return [f.replace("NN_topic", STEM).replace("<topic>", TOPIC).replace("<checker>", CHECKER)
            for f in listed]


def _documented_steps() -> list[str]:
    text = (ROOT / "docs" / "authoring.md").read_text()
    section = text[text.index(SECTION):]
    return re.findall(r"^\d\. `([^`]+)`", section, flags=re.M)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The scratch copy: the package and nbgrader's configuration, then the five files."""
    root = tmp_path_factory.mktemp("lesson7")
    shutil.copytree(ROOT / "src" / "cudacourse", root / "src" / "cudacourse",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (root / "lessons" / "quizkeys").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    before = {p for p in root.rglob("*") if p.is_file()}
    for rel, text in FILES.items():
        assert not (root / rel).exists(), rel
        (root / rel).write_text(text)
    written = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} - {
        p.relative_to(root).as_posix() for p in before}
    assert sorted(written) == sorted(FILES) and len(written) <= 5
    return root


def _run(course: Path, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(course / "src"),
                                                                 os.environ.get("PYTHONPATH")])), "CUDACOURSE_QUIET": "1",
           # nbgrader runs `alembic` as a subprocess: this environment's bin/ must be on PATH
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    proc = subprocess.run([sys.executable, *args], cwd=course, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, (args, proc.stdout[-3000:] + proc.stderr[-3000:])
    return proc


def test_the_section_lists_the_files_and_steps_this_test_uses():
    assert sorted(_documented_files()) == sorted(FILES)
    assert [s.split()[0] + " " + s.split()[1] if s.startswith("cudacourse ") else s
            for s in _documented_steps()] == [
        "cudacourse build", "cudacourse.check.check_<exercise>", "cudacourse grade",
        "cudacourse report"]


REGISTRY = """
import json
from cudacourse import lessons, authoring
from cudacourse.grader import partial
import cudacourse.check as C
L = lessons.BY_STEM["07_offset"]
print(json.dumps({"row": L.readme_row(), "marker": L.marker_line(), "checkers": L.checkers,
                  "in_check": "check_add_offset" in C.__all__, "topics": C._TOPICS,
                  "technique": sorted(partial.TECHNIQUE) == sorted(lessons.technique()),
                  "sources": [p.name for p in authoring.lessons()]}))
"""

CHECK = """
import json, nbformat
import cudacourse
cudacourse.setup()
import cudacourse.check as C
from numba import cuda
nb = nbformat.read("solutions/07_offset/07_offset.ipynb", 4)
src = next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "add_offset")
ns = {"cuda": cuda}
exec(src, ns)
got = {"right": str(C.check_add_offset(ns["add_offset"]))}
exec(WRONG, ns)
try:
    C.check_add_offset(ns["add_offset"])
except C.CheckFailure as exc:
    got["wrong"] = [exc.cause, str(exc)]
print(json.dumps(got))
"""


@pytest.mark.grading
def test_lesson_7_is_built_checked_graded_and_reported_from_five_files(course):
    # the registry found it: README row, marker, checkers, partial credit, the sources
    reg = json.loads(_run(course, "-c", REGISTRY).stdout.strip().splitlines()[-1])
    assert reg["row"].startswith("| 7 | [Offsets](notebooks/07_offset/07_offset.ipynb)")
    assert reg["marker"] == "lesson7: lesson 7, offsets"
    assert reg["checkers"] == ["check_add_offset"] and reg["in_check"]
    assert reg["topics"][-1] == "offset" and reg["technique"]
    assert reg["sources"] == ["07_offset.py"]

    # 1. build: the master and the learner copy
    out = _run(course, "-m", "cudacourse.cli", "build", "07").stdout
    assert "2 file(s) rebuilt" in out, out
    learner = nbformat.read(course / "notebooks" / STEM / f"{STEM}.ipynb", 4)
    by_id = {c.metadata["nbgrader"]["grade_id"]: c.source for c in learner.cells
             if "nbgrader" in c.metadata}
    assert "raise NotImplementedError" in by_id["add_offset"]
    assert "hidden=" not in json.dumps(by_id)

    # 2. check: the master's kernel passes, an unguarded one is rejected with its diagnosis
    got = json.loads(_run(course, "-c", f"WRONG = {WRONG_KERNEL!r}\n" + CHECK)
                     .stdout.strip().splitlines()[-1])
    assert "add_offset passes: 2 sizes, a spare block each" in got["right"]
    assert got["wrong"][0] and "guard" in got["wrong"][1]

    # 3. grade: a right and a wrong submission, through the verdicts and nbgrader
    _run(course, "-m", "nbgrader", "generate_assignment", STEM, "--force",
         f"--db=sqlite:///{course}/gradebook.db")
    answers = {"right": {"add_offset": textwrap.dedent('''\
                   @cuda.jit
                   def add_offset(x, c, out):
                       i = cuda.grid(1)
                       if i < out.size:
                           out[i] = c + x[i]'''), "answer_spare": 'answer_spare = "b"'},
               "wrong": {"add_offset": WRONG_KERNEL, "answer_spare": 'answer_spare = "a"'}}
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
    assert scores["right"]["test_add_offset"] == 3.0
    assert scores["wrong"]["test_add_offset"] == 0.0

    # 4. report: the class report names the exercise and both students
    _run(course, "-m", "cudacourse.cli", "report", STEM, "--course", str(course), "--no-plot")
    report = course / "grading" / STEM / "report"
    text = "\n".join(p.read_text(errors="replace") for p in report.rglob("*") if p.is_file())
    assert "test_add_offset" in text and "right" in text and "wrong" in text
