"""A new exercise, made the way docs/authoring.md says, from lesson source to gradebook.

The toy exercise ``scale_shift`` (``out[i] = 3 * x[i] + 1``) gets what every exercise gets:
a catalogue of wrong answers and right ones written differently, a checker built on
``cudacourse.check._engine`` that rejects the first with their diagnosis and passes the
second, a question, a lesson source, the master and learner copy ``cudacourse build`` makes,
and grading through the course's path (``cudacourse grade``: sandboxed feedback run and
verdicts, then nbgrader) of a right and a wrong submission in a scratch course.

Two things differ from a real exercise, so that the scratch course needs nothing installed:
the checker sits in a locked cell of the lesson (a real one lives in
``src/cudacourse/check/<topic>.py``), and the question is one of lesson 1's bank (a real one
is added to ``src/cudacourse/quizzes/NN_topic.toml``). The question is graded
(``c.QuizMode.graded``), so it carries points.

Runs in whatever mode the suite runs in (the checker uses only the engine's launch, guards
and comparison, which hold on both devices).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest
from numba import cuda

from cudacourse.course import authoring
from cudacourse.runtime import device
from cudacourse.check import CheckFailure

ROOT = authoring.ROOT
TOY = "99_toy"
QUESTION, RIGHT_CHOICE, WRONG_CHOICE = "01_gpu_vs_cpu.blocks", "c", "a"
TIMEOUT = device.pick(sim=60, gpu=30)  # per cell; a simulator check needs seconds

# 1. The checker: owns the launch (sizes not multiples of the block, a spare block), poisons
#    and guards the output, and names the known wrong formulas.
CHECKER = '''
import numpy as np
from cudacourse.check import _engine as E


def check_scale_shift(kernel, *, hidden=False, seed=None):
    """Check ``kernel(x, out)`` computes ``out[i] = 3 * x[i] + 1`` for every i."""
    E.require_kernel(kernel, "scale_shift", 2)
    gen = E.rng(seed)
    cases = [(1000, 128), (33, 32)] if not hidden else [(517, 64), (1, 32)]
    for n, tpb in cases:
        x = E.random_array(gen, n)
        want = 3.0 * x.astype(np.float64) + 1.0  # computed before learner code runs
        others = {"3 * x[i] (the + 1 left out)": 3.0 * x, "x[i] + 1 (the 3 left out)": x + 1}
        gx, out = E.to_device_guarded(x, "x"), E.Guarded.make(n, x.dtype, "out")
        blocks = (n + tpb - 1) // tpb + 1  # one spare block: its threads must do nothing
        E.launch(kernel, blocks, tpb, gx.view, out.view, name="scale_shift")
        out.check_guards()
        E.compare(out.result(), want, name="out", formula="3 * x[i] + 1", block=tpb,
                  alternatives=others, context={"n": n, "threads_per_block": tpb})
    return E.passes("scale_shift", f"{len(cases)} sizes", "a spare block each", hidden=hidden)
'''

# 2. The catalogue: each wrong kernel with the phrase its diagnosis must hold, and right
#    kernels written differently from the master.
WRONG = {
    "no_guard": ('''
@cuda.jit
def scale_shift(x, out):
    i = cuda.grid(1)
    out[i] = 3 * x[i] + 1
''', "bounds guard"),
    "first_block_only": ('''
@cuda.jit
def scale_shift(x, out):
    i = cuda.threadIdx.x
    if i < x.size:
        out[i] = 3 * x[i] + 1
''', "first block"),
    "forgot_the_shift": ('''
@cuda.jit
def scale_shift(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 3 * x[i]
''', "the + 1 left out"),
    "guard_off_by_one": ('''
@cuda.jit
def scale_shift(x, out):
    i = cuda.grid(1)
    if i < x.size - 1:
        out[i] = 3 * x[i] + 1
''', "never written"),
}
RIGHT = {
    "grid_stride": '''
@cuda.jit
def scale_shift(x, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = x[i] * 3.0 + 1.0
''',
    "explicit_index": '''
@cuda.jit
def scale_shift(x, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < out.size:
        out[i] = 1 + 3 * x[i]
''',
}
MASTER_KERNEL = '''@cuda.jit
def scale_shift(x, out):
    ### BEGIN SOLUTION
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 3 * x[i] + 1
    ### END SOLUTION
'''

# 3. The lesson source: setup, the checker (locked), the exercise, its test cell, a question.
SOURCE = f'''# %% [markdown]
# # Toy: scale and shift
#
# One thread per element computes `out[i] = 3 * x[i] + 1`.

# %% [readonly] id=setup
import cudacourse
import cudacourse.check
from cudacourse import quiz
from numba import cuda

# %% [readonly] id=checker
{CHECKER.strip()}

# %% [markdown]
# Write `scale_shift(x, out)`, guarded for the threads past the end.

# %% [solution] id=scale_shift
{MASTER_KERNEL.strip()}

# %% [tests] id=test_scale_shift points=2
check_scale_shift(scale_shift)
### BEGIN HIDDEN TESTS
check_scale_shift(scale_shift, hidden=True)
### END HIDDEN TESTS

# %%
quiz.ask("{QUESTION}")

# %% [solution] id=answer_blocks
# Question 1: Blocks for 1,000 elements. Answer as: answer_blocks = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_blocks = "{RIGHT_CHOICE}"
### END SOLUTION

# %% [tests] id=test_answer_blocks points=1
quiz.grade("{QUESTION}", answer_blocks)
'''


def _kernel(source: str):
    ns = {"cuda": cuda}
    exec(compile(textwrap.dedent(source), "<toy kernel>", "exec"), ns)  # noqa: S102 - test data
    return ns["scale_shift"]


@pytest.fixture(scope="module")
def checker():
    ns: dict = {}
    exec(compile(CHECKER, "<toy checker>", "exec"), ns)  # noqa: S102 - the test's own checker
    return ns["check_scale_shift"]


@pytest.mark.parametrize("name", sorted(WRONG))
def test_the_checker_rejects_each_wrong_answer_with_its_diagnosis(checker, name):
    source, phrase = WRONG[name]
    with pytest.raises(CheckFailure) as info:
        checker(_kernel(source), seed=1)
    assert phrase in str(info.value), str(info.value)


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_the_checker_passes_right_answers_written_differently(checker, name):
    assert "scale_shift passes" in str(checker(_kernel(RIGHT[name]), hidden=True, seed=2))


def test_the_checker_refuses_a_stub(checker):
    with pytest.raises(CheckFailure):
        checker(lambda x, out: None)


# --- source -> master -> learner copy -> graded submissions -> scores ------------------

def _env() -> dict[str, str]:
    # nbgrader runs `alembic` as a subprocess: this environment's bin/ must be on PATH.
    return {**os.environ,
            "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}


def _fill(learner: nbformat.NotebookNode, answers: dict[str, str]) -> nbformat.NotebookNode:
    """The learner copy with its answer cells (by grade_id) replaced, as a learner would."""
    nb = nbformat.from_dict(learner)
    for cell in nb.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    return nb


def _scores(course: Path, student: str) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
        nb = gb.find_submission_notebook(TOY, TOY, student)
        return {g.name: g.score for g in nb.grades}


def _messages(course: Path, student: str, grade_id: str) -> str:
    nb = nbformat.read(course / "autograded" / student / TOY / f"{TOY}.ipynb", 4)
    cell = next(c for c in nb.cells
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)
    return "\n".join(f"{o.get('ename')}: {o.get('evalue')}" for o in cell.get("outputs", [])
                     if o.get("output_type") == "error")


@pytest.mark.grading
def test_a_toy_exercise_goes_from_lesson_source_to_scores(tmp_path, monkeypatch):
    # The toy lesson's registry entry (a new lesson writes it as the [lesson] table of its
    # question bank, in the package: tests/test_new_lesson.py does that in a scratch copy;
    # here the course folder alone holds the lesson, so its entry is given in this process)
    from cudacourse.course import lessons as registry

    entry = registry.Lesson(99, TOY, "Toy", "a toy exercise", "`scale_shift`", ("vector",),
                            "vector", (), "the toy lesson")
    monkeypatch.setattr(registry, "BY_STEM", {**registry.BY_STEM, TOY: entry})
    monkeypatch.setattr(registry, "LESSONS", (*registry.LESSONS, entry))
    course = tmp_path / "course"
    (course / "lessons").mkdir(parents=True)
    (course / "lessons" / f"{TOY}.py").write_text(SOURCE)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    # the question's key is instructor-side (lessons/quizkeys/, written into the master)
    shutil.copytree(ROOT / "lessons" / "quizkeys", course / "lessons" / "quizkeys")
    # the keys' explanations render the measured figures (docs/benchmarks.json, gpu_run.json),
    # which an author's checkout holds beside lessons/
    (course / "docs").mkdir()
    for name in ("benchmarks.json", "gpu_run.json"):
        shutil.copy(ROOT / "docs" / name, course / "docs" / name)
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write(f"\nc.QuizMode.graded = [{TOY!r}]\n")

    # authoring: the master from the source, the learner copy from nbgrader
    assert sorted(authoring.build(course)) == [f"notebooks/{TOY}/{TOY}.ipynb",
                                               f"solutions/{TOY}/{TOY}.ipynb"]
    assert authoring.build(course, check_only=True) == []  # both fresh now
    learner_text = authoring.release_path(course / "lessons" / f"{TOY}.py", course).read_text()
    learner = nbformat.reads(learner_text, 4)
    by_id = {c.metadata["nbgrader"]["grade_id"]: c.source for c in learner.cells
             if "nbgrader" in c.metadata}
    assert "raise NotImplementedError" in by_id["scale_shift"]  # the solution is cleared
    assert "cuda.grid" not in by_id["scale_shift"]
    assert "hidden=True" not in learner_text  # hidden tests stay in the master
    assert f'quiz.record("{QUESTION}", answer_blocks)' in by_id["test_answer_blocks"]

    # the course's gradebook knows the assignment (the release, as an instructor makes it)
    release = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", TOY,
                              "--force", f"--db=sqlite:///{course}/gradebook.db"], cwd=course,
                             env=_env(), capture_output=True, text=True, timeout=600)
    assert release.returncode == 0, release.stderr

    submissions = {
        "right": {"scale_shift": RIGHT["grid_stride"].strip(),
                  "answer_blocks": f'answer_blocks = "{RIGHT_CHOICE}"'},
        "wrong": {"scale_shift": WRONG["forgot_the_shift"][0].strip(),
                  "answer_blocks": f'answer_blocks = "{WRONG_CHOICE}"'},
    }
    for student, answers in submissions.items():
        where = course / "submitted" / student / TOY
        where.mkdir(parents=True)
        nbformat.write(_fill(learner, answers), where / f"{TOY}.ipynb")

    graded = subprocess.run([sys.executable, "-m", "cudacourse.cli", "grade", TOY, "--course",
                             str(course), "--timeout", str(TIMEOUT), "--no-progress"],
                            cwd=course, env=_env(), capture_output=True, text=True,
                            timeout=1200)
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    assert _scores(course, "right") == {"test_scale_shift": 2.0, "test_answer_blocks": 1.0}
    assert _scores(course, "wrong") == {"test_scale_shift": 0.0, "test_answer_blocks": 0.0}
    # the wrong kernel's feedback is the checker's diagnosis, not a bare failure
    said = _messages(course, "wrong", "test_scale_shift")
    assert re.search(r"the \+ 1 left out", said), said
    assert _messages(course, "right", "test_scale_shift") == ""
