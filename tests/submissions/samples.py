"""Sample submissions for lesson 1, built from whatever the learner copy is now.

Each sample fills the learner copy's answer cells (by grade_id) with the master's answers,
or with wrong, hostile, hanging or crashing code, and says which test cells must then score
0. Expected scores come from the notebook's own ``points`` metadata, so they follow the
lesson as it grows. Used by tests/test_grading.py and tools/gpu_grading_check.sh:

    python tests/submissions/samples.py COURSE_DIR     # writes COURSE_DIR/submitted/* and
                                                       # COURSE_DIR/expected.json
"""

from __future__ import annotations

import copy
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ASSIGNMENT = "01_gpu_vs_cpu"
KERNEL = "vector_add"  # the code exercise's answer cell

WRONG_KERNEL = '''@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] - b[i]  # wrong: subtracts
'''

# Attacks appended to the wrong kernel's cell. Each must not earn the kernel's points.
# Module-level rebinding and monkeypatching: (code, what the grader's message must name).
REBINDINGS = {
    "np.testing.assert_allclose": (
        "import numpy as np, numpy.testing\n"
        "np.testing.assert_allclose = lambda *a, **k: None\n",
        "numpy.testing.assert_allclose was replaced"),
    "np.allclose": ("np.allclose = lambda *a, **k: True\n", "numpy.allclose was replaced"),
    "np.isclose": ("np.isclose = lambda a, b, *args, **k: np.ones(np.shape(a), dtype=bool)\n",
                   "numpy.isclose was replaced"),
    "engine.compare": ("import cudacourse.check._engine as _e\n"
                       "_e.compare = lambda *a, **k: None\n",
                       "cudacourse.check._engine.compare was replaced"),
    "engine.fail": ("import cudacourse.check._engine as _e\n_e.fail = lambda *a, **k: None\n",
                    "cudacourse.check._engine.fail was replaced"),
    "module __dict__": ('cudacourse.check.__dict__["check_vector_add"] = lambda *a, **k: None\n',
                        "cudacourse.check.check_vector_add was replaced"),
    "__code__ swap": ("import cudacourse.check.vector as _v\n_v.check_vector_add.__code__ = "
                      "(lambda kernel, *, hidden=False, seed=None: None).__code__\n",
                      "cudacourse.check.vector.check_vector_add was replaced"),
}

# Attacks appended to the wrong kernel's cell. Each must not earn the kernel's points.
ATTACKS = {
    # all the rebindings in one submission: the grader's message must name each of them
    "hostile_rebinding": "\n" + "".join(code for code, _ in REBINDINGS.values()),
    "hostile_names": '''
check_vector_add = lambda *a, **k: None          # the bare name: test cells do not use it
try:
    cudacourse.check.check_vector_add = check_vector_add   # read-only module: refused
except AttributeError as exc:
    print("refused:", exc)
''',
    "hostile_fake_package": '''
import types
cudacourse = types.SimpleNamespace(
    check=types.SimpleNamespace(check_vector_add=lambda *a, **k: None))
''',
    "hostile_ast": '''
import ast
class _SkipEverything(ast.NodeTransformer):
    def visit_Module(self, node):
        return ast.Module(body=[ast.Pass()], type_ignores=[])
get_ipython().ast_transformers.append(_SkipEverything())
''',
    "hostile_quiz": '''
import cudacourse.quiz
cudacourse.quiz.grade = lambda *a, **k: None
quiz.grade = cudacourse.quiz.grade
''',
}

PLAIN_LOOP = "while True:  # never ends, but a KeyboardInterrupt stops it\n    pass\n"
SWALLOW_LOOP = '''import time
while True:  # never ends, and swallows the grader's interrupt
    try:
        time.sleep(0.05)
    except KeyboardInterrupt:
        pass
'''
# Writes to stderr during every later cell, as Numba's warnings can on a GPU. Stock nbgrader
# gives 0 to a test cell with stderr output; the course grades on exceptions only.
STDERR_NOISE = '''import sys
get_ipython().events.register(
    "post_run_cell", lambda result: print("SomeWarning: noise on stderr", file=sys.stderr))
'''
EXIT = "import os\nos._exit(1)  # kills the Python kernel\n"
SEGFAULT = "import ctypes\nctypes.string_at(0)  # reads address 0: segmentation fault\n"


@dataclass
class Sample:
    name: str
    doc: str
    edits: dict[str, str] = field(default_factory=dict)  # grade_id -> new source
    broken: set[str] = field(default_factory=set)  # answer cells whose tests must score 0
    tamper_at: str | None = None  # answer cell where tampering starts: later tests score 0
    incidents: dict[str, str] = field(default_factory=dict)  # grade_id -> kind expected
    strip_demos: bool = True  # drop ordinary code cells (a learner may; it saves time)
    blank: bool = False  # hand in the learner copy's answer cells untouched


def answer_cells(nb: nbformat.NotebookNode) -> list[str]:
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("solution")]


def graded_cells(nb: nbformat.NotebookNode) -> list[tuple[str, float, str]]:
    """(grade_id, points, source) of every autograded test cell, in notebook order."""
    return [(c.metadata["nbgrader"]["grade_id"], float(c.metadata["nbgrader"]["points"]),
             c.source) for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]


def uses(source: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", source) is not None


def samples(learner: nbformat.NotebookNode) -> list[Sample]:
    quizzes = [a for a in answer_cells(learner) if a != KERNEL]
    q1 = quizzes[1] if len(quizzes) > 1 else (quizzes[0] if quizzes else None)
    q2 = quizzes[2] if len(quizzes) > 2 else None
    out = [
        Sample("correct", "the master's answers, every demo cell kept", strip_demos=False),
        Sample("correct_with_stderr", "right answers; every later cell also writes to stderr",
               {quizzes[0]: STDERR_NOISE + _master_source_marker(quizzes[0])} if quizzes else {}),
        Sample("blank", "the learner copy handed in with no answer written", blank=True,
               broken=set(answer_cells(learner))),
        Sample("wrong_kernel", "subtracts instead of adding", {KERNEL: WRONG_KERNEL},
               broken={KERNEL}),
    ]
    for name, attack in ATTACKS.items():
        tamper = name != "hostile_names"  # rebinding a bare name tampers with nothing
        edits = {KERNEL: WRONG_KERNEL + attack}
        broken = {KERNEL}
        if name == "hostile_quiz":  # and wrong answers after the attack
            after = [q for q in quizzes if _pos(learner, q) > _pos(learner, KERNEL)]
            edits.update({q: f'{q} = "z"\n' for q in after})
            broken |= set(after)
        out.append(Sample(name, f"wrong kernel plus: {attack.strip().splitlines()[-1]}",
                          edits, broken=broken, tamper_at=KERNEL if tamper else None,
                          incidents={} if not tamper else {"*": "tampering"}))
    locked = {KERNEL: WRONG_KERNEL, f"test_{KERNEL}": "pass  # edited by the learner"}
    broken = {KERNEL}
    if q2:
        locked.update({q2: f'{q2} = "z"\n', f"test_{q2}": "pass"})
        broken.add(q2)
    out.append(Sample("locked_cells_edited", "wrong answers, their test cells edited to pass",
                      locked, broken=broken))
    loops = {KERNEL: PLAIN_LOOP + _master_source_marker(KERNEL)}
    crashes = {KERNEL: EXIT + _master_source_marker(KERNEL)}
    lbroken, cbroken = {KERNEL}, {KERNEL}
    linc, cinc = {KERNEL: "timeout"}, {KERNEL: "crash"}
    if q1:
        loops[q1] = SWALLOW_LOOP + _master_source_marker(q1)
        crashes[q1] = SEGFAULT + _master_source_marker(q1)
        lbroken.add(q1)
        cbroken.add(q1)
        linc[q1] = "timeout"
        cinc[q1] = "crash"
    out.append(Sample("loops", "an endless loop in the kernel cell, one that swallows "
                      "KeyboardInterrupt in a quiz answer", loops, lbroken, incidents=linc))
    out.append(Sample("crashes", "os._exit(1) in the kernel cell, a segfault in a quiz answer",
                      crashes, cbroken, incidents=cinc))
    every = [a for a in answer_cells(learner)]
    out.append(Sample("crash_storm", "every answer cell kills the kernel: the grader gives up "
                      "after max_restarts and marks the rest not graded",
                      {a: EXIT + _master_source_marker(a) for a in every}, set(every),
                      incidents={"*": "gave up"}))
    return out


def _master_source_marker(grade_id: str) -> str:
    return f"#@MASTER {grade_id}\n"


def _pos(nb: nbformat.NotebookNode, grade_id: str) -> int:
    for i, c in enumerate(nb.cells):
        if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return i
    raise KeyError(grade_id)


def build(sample: Sample, learner: nbformat.NotebookNode,
          master: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The submitted notebook for ``sample``."""
    nb = copy.deepcopy(learner)
    if sample.blank:
        nb.cells = [c for c in nb.cells if c.cell_type != "code" or
                    c.metadata.get("nbgrader", {}).get("grade_id")]
        return nb
    solutions = {c.metadata["nbgrader"]["grade_id"]: c.source for c in master.cells
                 if c.metadata.get("nbgrader", {}).get("grade_id")}
    cells = []
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid is None and cell.cell_type == "code" and sample.strip_demos:
            continue
        if gid in sample.edits:
            src = sample.edits[gid]
            cell.source = src.replace(_master_source_marker(gid), solutions[gid])
        elif cell.metadata.get("nbgrader", {}).get("solution"):
            cell.source = solutions[gid]
        cells.append(cell)
    nb.cells = cells
    return nb


def expected(sample: Sample, learner: nbformat.NotebookNode) -> dict[str, float]:
    """The score each test cell must get."""
    start = _pos(learner, sample.tamper_at) if sample.tamper_at else None
    scores = {}
    for gid, points, source in graded_cells(learner):
        zero = any(uses(source, b) for b in sample.broken)
        if start is not None and _pos(learner, gid) > start:
            zero = True
        scores[gid] = 0.0 if zero else points
    return scores


def write(course: Path, learner_path: Path, master_path: Path) -> dict[str, dict]:
    """Place every sample in course/submitted/<name>/<assignment>/; return the expectations."""
    learner = nbformat.read(learner_path, 4)
    master = nbformat.read(master_path, 4)
    result = {}
    for sample in samples(learner):
        dest = course / "submitted" / sample.name / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(build(sample, learner, master), dest)
        scores = expected(sample, learner)
        result[sample.name] = {"doc": sample.doc, "cells": scores,
                               "total": sum(scores.values()),
                               "incidents": sample.incidents}
    return result


if __name__ == "__main__":
    course = Path(sys.argv[1])
    root = Path(__file__).resolve().parents[2]
    release = course / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    if not release.exists():
        release = root / "notebooks" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    want = write(course, release, root / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    (course / "expected.json").write_text(json.dumps(want, indent=1))
    for name, w in want.items():
        print(f"{name:24} expected {w['total']:g}")
