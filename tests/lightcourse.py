"""A light scratch course for the class-grading tests: lesson 1's graded cells, demos dropped.

Grading a class executes each submission's notebook and its master's context; with the whole
lesson 1 that is its demos and benchmark cells too (15-20 s of CPU a submission in the
simulator), although only the graded cells decide a score. ``write`` makes a course whose
assignment ``01_gpu_vs_cpu`` is lesson 1's master trimmed to what grading needs: the setup
cell, every nbgrader cell as it is (grade ids, points, key tokens, hidden tests), the
``quiz.ask`` cells of the questions it grades, and every ordinary code cell that defines a
name a kept cell uses (found by static analysis, so it follows the lesson as it changes).
Markdown goes too. The grade ids and points are the real ones, so tests/submissions/samples.py
and the tests' expected scores work on it unchanged; tests/test_lightcourse.py proves the
trimmed master keeps every graded cell and gets full marks. tools/gpu/verify.sh keeps the
FULL lesson: it measures the real per-submission time.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import nbformat
from IPython.core.inputtransformer2 import TransformerManager

from cudacourse.course import authoring

ROOT = authoring.ROOT
ASSIGNMENT = "01_gpu_vs_cpu"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
MASTER = ROOT / "solutions" / ASSIGNMENT / NOTEBOOK


def _tree(source: str) -> ast.Module:
    # IPython syntax (magics, `!cmd`) becomes plain Python first, as the kernel would run it
    return ast.parse(TransformerManager().transform_cell(source))


def _bound(tree: ast.Module) -> set[str]:
    """Names a cell binds at module level (assignments, defs, imports, loop targets...); not
    a function's locals, which no other cell sees."""
    names: set[str] = set()
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            todo.extend(node.decorator_list)  # evaluated at module level; the body is not
        elif not isinstance(node, ast.Lambda):
            todo.extend(ast.iter_child_nodes(node))
    return names


def _used(node: ast.AST, local: frozenset[str] = frozenset()) -> set[str]:
    """Global names a cell reads, inside its functions too, less each function's own
    parameters and locals (a kernel's ``a`` is not the demo's array ``a``)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        args = node.args
        params = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        body = node.body if isinstance(node.body, list) else [node.body]
        inner = local | params | _bound(ast.Module(body=body, type_ignores=[]))
        outer = [*args.defaults, *[d for d in args.kw_defaults if d is not None],
                 *getattr(node, "decorator_list", [])]  # evaluated where it is defined
        return (set().union(*(_used(n, local) for n in outer))
                | set().union(*(_used(b, frozenset(inner)) for b in body)))
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        return set() if node.id in local else {node.id}
    return set().union(*(_used(child, local) for child in ast.iter_child_nodes(node)))


def _quiz_ids(tree: ast.Module, call: str) -> set[str]:
    """The question ids of every ``quiz.<call>("id", ...)`` in a cell."""
    return {n.args[0].value for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr == call and isinstance(n.func.value, ast.Name)
            and n.func.value.id == "quiz" and n.args and isinstance(n.args[0], ast.Constant)
            and isinstance(n.args[0].value, str)}


def trim(master: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``master`` with only what grading needs: every nbgrader cell, the ``quiz.ask`` cells of
    the questions graded, and the ordinary code cells defining a name a kept cell uses (each
    use is resolved to the last cell before it that binds the name, to a fixed point)."""
    code = [i for i, c in enumerate(master.cells) if c.cell_type == "code"]
    trees = {i: _tree(master.cells[i].source) for i in code}
    keep = {i for i in code if "nbgrader" in master.cells[i].metadata}
    graded_ids = set().union(*(_quiz_ids(trees[i], "grade") for i in keep))
    keep |= {i for i in code if _quiz_ids(trees[i], "ask") & graded_ids}
    todo = sorted(keep)
    while todo:
        i = todo.pop()
        for name in _used(trees[i]):
            binders = [j for j in code if j < i and name in _bound(trees[j])]
            if binders and binders[-1] not in keep:
                keep.add(binders[-1])
                todo.append(binders[-1])
    light = nbformat.from_dict(master)
    light.cells = [c for i, c in enumerate(master.cells) if i in keep]
    return light


def graded_part(notebook: Path, where: Path) -> Path:
    """``notebook`` trimmed (``trim``) and written under ``where``: what decides ``nbgrader
    validate``'s verdict. The cells dropped are demos, which the same cells of the master
    already execute (tests/test_notebooks.py's test_master_executes_without_errors); in the
    simulator executing them again costs minutes a lesson. The copy's directory is new: no
    lesson reads files beside its notebook."""
    where.mkdir(parents=True, exist_ok=True)
    out = where / notebook.name
    nbformat.write(trim(nbformat.read(notebook, 4)), out)
    return out


def write(course: Path, config: str = "") -> None:
    """A scratch course at ``course``: the trimmed lesson 1 master in solutions/ and the
    course's nbgrader_config.py with ``config`` appended. The caller releases it
    (``nbgrader generate_assignment``), as with the full master."""
    (course / "solutions" / ASSIGNMENT).mkdir(parents=True)
    nbformat.write(trim(nbformat.read(MASTER, 4)), course / "solutions" / ASSIGNMENT / NOTEBOOK)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    if config:
        with open(course / "nbgrader_config.py", "a") as fh:
            fh.write("\n" + config + "\n")
