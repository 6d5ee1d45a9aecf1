"""Hidden cases come from the instructor's side (issue 19, class 7).

Every master's hidden test cell names its cases, ``check_x(k, hidden=Cases(seed=...,
sizes=[...]))``; the checker draws exactly those, and the package (which every learner
installs) holds none of the seeds or sizes.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nbformat
import pytest
from numba import cuda

import cudacourse.check
from cudacourse.course import lessonrules, lessons
from cudacourse.course.authoring import ROOT
from cudacourse.check import Cases
from cudacourse.check._cases import resolve  # the original, before the spy replaces it
from cudacourse.check import _engine as E
from cudacourse.check import kit

PACKAGE = Path(cudacourse.check.__file__).parent.parent
MASTERS = sorted((ROOT / "solutions").glob("[0-9]*/*.ipynb"))
_HIDDEN = re.compile(r"^### BEGIN HIDDEN TESTS$(.*?)^### END HIDDEN TESTS$", re.M | re.S)


def _hidden_calls(master: Path) -> list[tuple[str, Cases]]:
    """(checker, its Cases) for every check call of the master's hidden tests."""
    out = []
    for cell in nbformat.read(master, as_version=4).cells:
        for block in _HIDDEN.findall(cell.source if cell.cell_type == "code" else ""):
            for node in ast.walk(ast.parse(block)):
                if isinstance(node, ast.Call) and getattr(node.func, "attr", "").startswith(
                        "check_"):
                    kw = {k.arg: k.value for k in node.keywords}
                    assert "hidden" in kw, f"{master.name}: {node.func.attr} without hidden="
                    h = kw["hidden"]
                    assert isinstance(h, ast.Call) and getattr(h.func, "attr", "") == "Cases", \
                        f"{master.name}: {node.func.attr}: hidden= must be Cases(...)"
                    args = {k.arg: ast.literal_eval(k.value) for k in h.keywords}
                    out.append((node.func.attr, Cases(**args)))
    return out


CALLS = [(m.parent.name, name, cases) for m in MASTERS for name, cases in _hidden_calls(m)]


def test_every_master_names_its_hidden_cases():
    assert {m.parent.name for m in MASTERS} == {lesson for lesson, _, _ in CALLS}
    assert len(CALLS) >= 14


class _Drawn(BaseException):
    """Stops a checker right after it chose its cases (no kernel needs to run)."""


@pytest.mark.parametrize("lesson, name, cases", CALLS, ids=[f"{l}:{n}" for l, n, _ in CALLS])
def test_the_checker_draws_the_masters_cases_and_seed(lesson, name, cases, monkeypatch):
    drawn: list = []

    def spy(hidden, visible, seed, **kw):
        got = resolve(hidden, visible, seed, **kw)
        drawn.append(got)
        raise _Drawn

    # the one definition every checker reaches (K.resolve looks it up at each call)
    monkeypatch.setattr("cudacourse.check._cases.resolve", spy)
    # no learner code is needed to see which cases a checker draws
    for req in ("require_kernel", "require_device_function", "require_function"):
        monkeypatch.setattr(E, req, lambda *a, **k: None)
        monkeypatch.setattr(kit, req, lambda *a, **k: None)  # the checkers' own name for it
    monkeypatch.setattr("cudacourse.check.memory._require_host_function", lambda *a: None)
    # on a GPU the simulator-only part is replayed in a child: here it runs in this process,
    # where the spy sees the cases it draws
    monkeypatch.setattr("cudacourse.check._replay.replay", lambda part, *s, **kw: part(*s, **kw))
    with pytest.raises(_Drawn):
        getattr(cudacourse.check, name)(None, hidden=cases)
    assert drawn == [(list(cases.sizes), cases.seed)]


def _package_text() -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(PACKAGE.rglob("*.py")))


def test_the_package_holds_no_hidden_seed_or_case():
    text = _package_text()
    assert "check_vector_add = K.exercise(" in text  # the scan reads the checkers
    spaced = re.sub(r"\s+", "", text)
    for lesson, name, cases in CALLS:
        assert not re.search(rf"\b{cases.seed}\b", text), f"{lesson} {name}: seed in the package"
        for case in cases.sizes:
            if isinstance(case, tuple):  # spelled as the checker would hold it
                assert re.sub(r"\s+", "", repr(case)) not in spaced, \
                    f"{lesson} {name}: {case} in the package"


def test_hidden_true_is_refused_with_the_reason():
    @cuda.jit
    def vector_add(a, b, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = a[i] + b[i]

    with pytest.raises(TypeError, match="chosen by the master's hidden test cell"):
        cudacourse.check.check_vector_add(vector_add, hidden=True)


def test_a_kernel_right_only_on_the_visible_sizes_fails_the_masters_hidden_cases():
    """The hidden cases are really run: a kernel that hard-codes the visible sizes' limit
    passes the visible check and fails with lesson 1's hidden cases (n up to 1601)."""
    (name, cases), = [(n, c) for l, n, c in CALLS if n == "check_vector_add"]

    @cuda.jit
    def vector_add(a, b, out):
        i = cuda.grid(1)
        if i < out.shape[0] and i < 1000:
            out[i] = a[i] + b[i]

    cudacourse.check.check_vector_add(vector_add)
    with pytest.raises(AssertionError):
        cudacourse.check.check_vector_add(vector_add, hidden=cases)


@pytest.mark.parametrize("lesson", lessonrules.stems(ROOT))
def test_every_exercise_is_called_by_name_with_hidden_cases_and_its_points(lesson):
    """The rules of `cudacourse lesson check` that docs/authoring.md states for test cells."""
    problems = lessonrules.check(lesson, ROOT, ("checker_called", "hidden_cases", "points"))
    assert not problems, "\n".join(map(str, problems))
