"""The exercises' masters, read from the lesson sources: each checked solution cell, the
statements of the lesson it needs (imports, constants, helper kernels), and its check calls."""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from pathlib import Path

from ...course.lessonsource import parse


@dataclass
class Exercise:
    lesson: str  # "04_shared_memory"
    name: str  # the solution's name: "tiled_matmul"
    checker: str  # "check_tiled_matmul"
    source: str  # the solution cell (the master), decorators included
    prelude: str  # the lesson statements it depends on, in lesson order
    hidden: str  # the hidden test call's source ("" when none)
    first_line: int = 0  # the solution cell's first line in the lesson
    extra: list = field(default_factory=list)


def _code(cell_source: str) -> ast.Module | None:
    lines = [ln for ln in cell_source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def _defines(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _uses(node: ast.AST) -> set[str]:
    """The names ``node`` reads that it does not bind itself (a function's parameters and
    locals are its own)."""
    loads = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and
             isinstance(n.ctx, ast.Load)}
    bound = set()
    for f in ast.walk(node):
        if isinstance(f, (ast.FunctionDef, ast.Lambda)):
            a = f.args
            bound |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
            bound |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
            bound |= {n.id for n in ast.walk(f) if isinstance(n, ast.Name) and
                      isinstance(n.ctx, ast.Store)}
        if isinstance(f, ast.comprehension):
            bound |= {n.id for n in ast.walk(f.target) if isinstance(n, ast.Name)}
    return loads - bound


def _check_call(tree: ast.Module) -> list[tuple[str, str, str]]:
    """(checker, argument name, statement source) of each ``cudacourse.check.check_X(arg)``."""
    out = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            f = stmt.value.func
            if isinstance(f, ast.Attribute) and f.attr.startswith("check_") and \
                    stmt.value.args and isinstance(stmt.value.args[0], ast.Name):
                out.append((f.attr, stmt.value.args[0].id, ast.unparse(stmt)))
    return out


def exercises(root: Path) -> list[Exercise]:
    """Every checked exercise of every lesson under ``root/lessons``, in lesson order."""
    found = []
    for path in sorted((root / "lessons").glob("[0-9][0-9]_*.py")):
        cells = parse(path.read_text(encoding="utf-8"), path.name)
        stmts: list[tuple[ast.stmt, set[str]]] = []  # every top-level statement so far
        solutions: dict[str, tuple[str, int]] = {}
        for cell in cells:
            if cell.kind == "markdown":
                continue
            tree = _code(cell.source)
            if tree is None:
                continue
            if cell.kind == "tests":
                calls = _check_call(tree)
                if calls and calls[0][1] in solutions:
                    checker, arg, _visible = calls[0]
                    src, line = solutions[arg]
                    hidden = calls[1][2] if len(calls) > 1 else ""
                    found.append(Exercise(path.stem, arg, checker, src,
                                          _prelude(stmts, ast.parse(src)), hidden, line))
                continue
            if cell.kind == "solution":
                for stmt in tree.body:
                    if isinstance(stmt, ast.FunctionDef):
                        solutions[stmt.name] = (cell.source, cell.lineno)
            for stmt in tree.body:
                if _defines(stmt):
                    stmts.append((stmt, _defines(stmt)))
    return found


def _prelude(stmts: list, target: ast.Module) -> str:
    """The statements defining the names ``target`` uses, transitively, in lesson order
    (the last definition of a name before the solution wins)."""
    need = _uses(target) - set(dir(builtins))
    own = {n for s in target.body for n in _defines(s)}
    need -= own
    keep: set[int] = set()
    changed = True
    while changed:
        changed = False
        for k in range(len(stmts) - 1, -1, -1):
            stmt, names = stmts[k]
            hit = names & need
            if hit and k not in keep:
                keep.add(k)
                need -= hit  # the latest definition serves
                need |= (_uses(stmt) - set(dir(builtins)) - own)
                changed = True
    lines = ["import cudacourse", "from numba import cuda"]
    lines += [ast.unparse(stmts[k][0]) for k in sorted(keep)]
    return "\n".join(lines) + "\n"
