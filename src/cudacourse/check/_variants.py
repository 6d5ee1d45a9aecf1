"""Which one-change variant of a small reference computation a wrong result matches.

A checker whose reference is a few straight-line formulas (the online-softmax update:
``m_new = max(m, s)``, ``alpha = exp(m - m_new)``, ...) can say more than "check the
arithmetic": it evaluates, in NumPy, every variant of those formulas with ONE change a
learner plausibly makes (one name read in place of another, an operator changed, the
operands of ``-`` or ``/`` exchanged, a term left out) and reports the variant whose outputs
equal the learner's on every case element. The evidence singles the mistake out only when the
variant reproduces all the outputs; otherwise nothing is named.

``match(program, inputs, got, functions)`` returns ``(wrong, right)``: the changed
statement and the reference's, as source text (code, shown as is in every language), or
None. The program is assignments, one a line, ending with ``return (a, b, ...)``.
"""

from __future__ import annotations

import ast
import copy
from typing import Any, Iterator

import numpy as _np

# trusted NumPy, bound at import (before a learner cell could rebind it)
_isclose = _np.isclose
_errstate = _np.errstate
_asarray = _np.asarray
_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _variants(tree: ast.Module, names: list[str]) -> Iterator[tuple[int, ast.Module]]:
    """(statement index, changed program) for every single change of ``tree``."""
    for k, stmt in enumerate(tree.body):
        nodes = list(ast.walk(stmt.value))
        for pos, node in enumerate(nodes):
            reps: list[ast.expr] = []
            if isinstance(node, ast.Name) and node.id in names:
                reps += [ast.Name(o, ast.Load()) for o in names if o != node.id]
            if isinstance(node, ast.BinOp) and isinstance(node.op, _OPS):
                reps += [ast.BinOp(node.left, op(), node.right) for op in _OPS
                         if not isinstance(node.op, op)]
                if isinstance(node.op, (ast.Sub, ast.Div)):
                    reps.append(ast.BinOp(node.right, type(node.op)(), node.left))
                reps += [node.left, node.right]  # a term (or factor) left out
            for rep in reps:
                new = copy.deepcopy(tree)
                target = list(ast.walk(new.body[k].value))[pos]
                _replace(new.body[k], target, rep)
                yield k, new


def _replace(stmt: ast.stmt, target: ast.AST, rep: ast.expr) -> None:
    if stmt.value is target:
        stmt.value = copy.deepcopy(rep)
        return
    for parent in ast.walk(stmt):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, copy.deepcopy(rep))
                return
            if isinstance(value, list):
                for i, v in enumerate(value):
                    if v is target:
                        value[i] = copy.deepcopy(rep)
                        return


def _run(tree: ast.Module, inputs: dict, functions: dict) -> tuple | None:
    """The returned tuple of ``tree`` evaluated on the arrays ``inputs``."""
    body = [ast.Assign([ast.Name("__returned__", ast.Store())], s.value)
            if isinstance(s, ast.Return) else s for s in tree.body]
    code = ast.fix_missing_locations(ast.Module(body, []))
    env = {**functions, **inputs}
    try:
        with _errstate(all="ignore"):
            exec(compile(code, "<variant>", "exec"),  # noqa: S102 - our own formulas, never
                 {"__builtins__": {}}, env)  # the learner's text
    except Exception:  # noqa: BLE001 - a variant that NumPy cannot evaluate matches nothing
        return None
    out = env.get("__returned__")
    return tuple(out) if isinstance(out, tuple) else None


def _same(got: Any, want: Any, rtol: float, atol: float) -> bool:
    g, w = _asarray(got, dtype=float), _asarray(want, dtype=float)
    if g.shape != w.shape and w.ndim:
        return False
    with _errstate(all="ignore"):
        return bool(_isclose(g, w, rtol=rtol, atol=atol, equal_nan=True).all())


def match(program: str, inputs: dict, got: tuple, functions: dict,
          rtol: float = 1e-4, atol: float = 1e-5) -> tuple[str, str] | None:
    """The first one-change variant of ``program`` whose returned values all equal ``got``
    (element by element, NaN matching NaN): (changed statement, reference statement) as
    source, or None when none does (or the reference itself does)."""
    tree = ast.parse(program)
    names = list(inputs) + [t.id for s in tree.body if isinstance(s, ast.Assign)
                            for t in s.targets if isinstance(t, ast.Name)]

    def equal(values: tuple | None) -> bool:
        return values is not None and len(values) == len(got) and \
            all(_same(g, v, rtol, atol) for g, v in zip(got, values))

    if equal(_run(tree, inputs, functions)):
        return None
    for k, new in _variants(tree, names):
        if equal(_run(new, inputs, functions)):
            return ast.unparse(new.body[k]), ast.unparse(tree.body[k])
    return None
