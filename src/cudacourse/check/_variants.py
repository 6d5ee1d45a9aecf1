"""Which one-change variant of a small reference computation a wrong result matches.

A checker whose reference is a few straight-line formulas (the online-softmax update:
``m_new = max(m, s)``, ``alpha = exp(m - m_new)``, ...) can say more than "check the
arithmetic": it evaluates, in NumPy, every variant of those formulas with ONE change a
learner plausibly makes (one name read in place of another, an operator changed, the
operands of ``-`` or ``/`` exchanged, a term left out, a constant one off, negated or
doubled) and reports the variant whose outputs
equal the learner's on every case element. The evidence singles the mistake out only when the
variant reproduces all the outputs; otherwise nothing is named.

``match(program, inputs, got, functions)`` returns a ``Found``: the changed statement and
the reference's, as source text (code, shown as is in every language), or None. The program is assignments, one a line, ending with ``return (a, b, ...)``.
"""

from __future__ import annotations

import ast
import copy
import itertools
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as _np

# trusted NumPy, bound at import (before a learner cell could rebind it)
_isclose = _np.isclose
_errstate = _np.errstate
_asarray = _np.asarray
_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def program(source: str) -> str:
    """A reference program's source, as written: code, never a message to translate (the
    i18n codemod leaves the argument of ``program`` alone)."""
    return source


# a comparison widened or narrowed: < for <=, and the reverse (match_staged only)
_WIDER = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


def _variants(tree: ast.Module, names: list[str], keep: Any = None,
              compare: bool = False) -> Iterator[tuple]:
    """(statement index, changed program, new node, old node) for every single change of
    ``tree`` (those ``keep(new, old)`` allows, when given; with ``compare``, a single
    comparison's ``<`` turned ``<=`` and the reverse too).

    ``tree`` is left as it is; the old node is ``tree``'s own. The changed program is one
    copy of the statement per statement, changed in place and undone when the consumer asks
    for the next variant (a copy of the whole program per variant cost more than running
    it): use it, or unparse what you keep of it, before advancing."""
    for k, stmt in enumerate(tree.body):
        work = copy.deepcopy(stmt)
        new = ast.Module(tree.body[:k] + [work] + tree.body[k + 1:], [])
        slots = _slots(work)
        # ast.walk visits a copy's nodes in the same order as the original's
        for node, twin in zip(ast.walk(stmt.value), list(ast.walk(work.value))):
            reps: list[ast.expr] = []
            if compare and isinstance(node, ast.Compare) and len(node.ops) == 1 and \
                    type(node.ops[0]) in _WIDER:
                reps.append(ast.Compare(node.left, [_WIDER[type(node.ops[0])]()],
                                        node.comparators))
            if isinstance(node, ast.Name) and node.id in names:
                reps += [ast.Name(o, ast.Load()) for o in names if o != node.id]
            if isinstance(node, ast.BinOp) and isinstance(node.op, _OPS):
                reps += [ast.BinOp(node.left, op(), node.right) for op in _OPS
                         if not isinstance(node.op, op)]
                if isinstance(node.op, (ast.Sub, ast.Div)):
                    reps.append(ast.BinOp(node.right, type(node.op)(), node.left))
                reps += [node.left, node.right]  # a term (or factor) left out
            if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and \
                    not isinstance(node.value, bool):
                v = node.value
                reps += [ast.Constant(x) for x in dict.fromkeys((v + 1, v - 1, -v, 2 * v))
                         if x != v]  # a constant one off, its sign flipped, doubled
            if isinstance(node, ast.Subscript):  # an index one off, or two indices swapped
                parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
                for i, part in enumerate(parts):
                    for d in (1, -1):
                        reps.append(_indexed(node, i, _plus(part, d)))
                if len(parts) == 2:
                    reps.append(_indexed(_indexed(node, 0, parts[1]), 1, parts[0]))
            slot = slots[id(twin)]
            for rep in reps:
                if keep is not None and not keep(rep, node):
                    continue
                _put(slot, copy.deepcopy(rep))
                try:
                    yield k, new, rep, node
                finally:
                    _put(slot, twin)


def _slots(stmt: ast.stmt) -> dict[int, tuple]:
    """Where each node of ``stmt`` sits: id -> (parent, field, position in a list or None)."""
    slots: dict[int, tuple] = {}
    for parent in ast.walk(stmt):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, ast.AST):
                slots.setdefault(id(value), (parent, field, None))
            elif isinstance(value, list):
                for i, v in enumerate(value):
                    if isinstance(v, ast.AST):
                        slots.setdefault(id(v), (parent, field, i))
    return slots


def _put(slot: tuple, node: ast.AST) -> None:
    parent, field, i = slot
    if i is None:
        setattr(parent, field, node)
    else:
        getattr(parent, field)[i] = node


def _plus(e: ast.expr, d: int) -> ast.expr:
    """``e + d`` written as a learner reads it: ``g + 8`` plus -1 is ``g + 7``."""
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Sub)) and \
            isinstance(e.right, ast.Constant) and type(e.right.value) is int:
        k = (e.right.value if isinstance(e.op, ast.Add) else -e.right.value) + d
        if k == 0:
            return e.left
        return ast.BinOp(e.left, ast.Add() if k > 0 else ast.Sub(), ast.Constant(abs(k)))
    return ast.BinOp(e, ast.Add() if d > 0 else ast.Sub(), ast.Constant(abs(d)))


def _indexed(node: ast.Subscript, i: int, part: ast.expr) -> ast.Subscript:
    """``node`` with its ``i``-th index replaced by ``part``."""
    new = copy.deepcopy(node)
    if isinstance(new.slice, ast.Tuple):
        new.slice.elts[i] = copy.deepcopy(part)
    else:
        new.slice = copy.deepcopy(part)
    return new


def _in_index(stmt: ast.stmt, node: ast.AST) -> bool:
    """Whether ``node`` is (inside) the index of a subscript of ``stmt``, or is one."""
    if isinstance(node, ast.Subscript):
        return True
    return any(isinstance(s, ast.Subscript) and any(n is node for n in ast.walk(s.slice))
               for s in ast.walk(stmt))


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
    try:
        g, w = _asarray(got, dtype=float), _asarray(want, dtype=float)
    except (TypeError, ValueError):  # a variant that returns no array of numbers (an input
        return False  # helper object, a ragged sequence) matches nothing
    if g.shape != w.shape and w.ndim:
        return False
    with _errstate(all="ignore"):
        return bool(_isclose(g, w, rtol=rtol, atol=atol, equal_nan=True).all())


def _all_nan(got: tuple) -> bool:
    """An output NaN throughout says nothing about a formula (never written, or NaN from
    the first step on): no variant is named from it."""
    with _errstate(all="ignore"):
        return any(_np.isnan(_asarray(g, dtype=float)).all() for g in got)


@dataclass(frozen=True)
class Found:
    wrong: str  # the changed statement, as source
    right: str  # the reference's statement
    wrong_part: str  # the changed expression alone
    right_part: str
    in_index: bool  # the change is (inside) an array index
    # another statement whose one change gives the same values: (its changed statement, the
    # reference's), or () when the evidence singles this statement out
    also: tuple = ()


def match(program: str, inputs: dict, got: tuple, functions: dict,
          rtol: float = 1e-4, atol: float = 1e-5) -> Found | None:
    """The first one-change variant of ``program`` whose returned values all equal ``got``
    (element by element, NaN matching NaN), or None when none does (or the reference itself
    does)."""
    tree = ast.parse(program)
    names = list(inputs) + [t.id for s in tree.body if isinstance(s, ast.Assign)
                            for t in s.targets if isinstance(t, ast.Name)]

    def equal(values: tuple | None) -> bool:
        return values is not None and len(values) == len(got) and \
            all(_same(g, v, rtol, atol) for g, v in zip(got, values))

    if _all_nan(got) or equal(_run(tree, inputs, functions)):
        return None
    return _single(tree, ((k, new, rep, node) for k, new, rep, node in _variants(tree, names)
                          if equal(_run(new, inputs, functions))))


def _single(tree: ast.Module, hits: Iterator[tuple]) -> Found | None:
    """The first matching variant, when every matching variant changes one and the same
    statement (``also`` empty), or one of two statements (``also``: the other's first
    matching change, for a checker that says both); None when none matches, or when
    changes to three statements or more give the same values."""
    first = None
    other: tuple = ()
    for k, new, rep, node in hits:
        if first is None:
            first = Found(ast.unparse(new.body[k]), ast.unparse(tree.body[k]),
                          ast.unparse(rep), ast.unparse(node), _in_index(tree.body[k], node))
            where = k
        elif k != where:
            if other and other[0] != k:
                return None
            if not other:
                other = (k, ast.unparse(new.body[k]), ast.unparse(tree.body[k]))
    if first is not None and other:
        return Found(first.wrong, first.right, first.wrong_part, first.right_part,
                     first.in_index, other[1:])
    return first


def _compiled(tree: ast.Module) -> Any:
    body = [ast.Assign([ast.Name("__returned__", ast.Store())], s.value)
            if isinstance(s, ast.Return) else s for s in tree.body]
    return compile(ast.fix_missing_locations(ast.Module(body, [])), "<variant>", "exec")


def _run_loop(body: ast.Module, final: ast.Module, state: dict, steps: list, fixed: dict,
              functions: dict) -> tuple | None:
    """``body`` once per step (its inputs, and a mask of the rows it applies to), the state
    carried from step to step, then ``final``'s returned tuple."""
    env = {**functions, **fixed, **state}
    try:
        code_body, code_final = _compiled(body), _compiled(final)
        with _errstate(all="ignore"):
            for inputs, active in steps:
                before = {k: env[k] for k in state}
                env.update(inputs)
                exec(code_body, {"__builtins__": {}}, env)  # noqa: S102 - our own formulas
                if active is not None:
                    for k in state:
                        env[k] = _np.where(active, env[k], before[k])
            exec(code_final, {"__builtins__": {}}, env)  # noqa: S102
    except Exception:  # noqa: BLE001 - a variant that NumPy cannot evaluate matches nothing
        return None
    out = env.get("__returned__")
    return tuple(out) if isinstance(out, tuple) else None


def match_loop(body: str, final: str, state: dict, steps: list, fixed: dict, got: tuple,
               functions: dict, rtol: float = 1e-4, atol: float = 1e-5,
               before: str = "") -> Found | None:
    """``match`` for a loop: ``body`` (assignments) runs once per entry of ``steps``
    (``(inputs, active)``: the step's arrays, and where it applies, or None for
    everywhere), carrying the names of ``state`` (their first values); ``final`` ends with
    ``return (...)``; ``before`` (assignments) runs once, before the first step. One change
    anywhere in ``before``, ``body`` or ``final``."""
    t0, tb, tf = ast.parse(before), ast.parse(body), ast.parse(final)
    whole = ast.Module(t0.body + tb.body + tf.body, [])
    n0 = len(t0.body)
    n = n0 + len(tb.body)
    names = list(dict.fromkeys(list(state) + list(steps[0][0] if steps else {}) + list(fixed) +
                               [t.id for s in whole.body if isinstance(s, ast.Assign)
                                for t in s.targets if isinstance(t, ast.Name)]))

    def equal(values: tuple | None) -> bool:
        return values is not None and len(values) == len(got) and \
            all(_same(g, v, rtol, atol) for g, v in zip(got, values))

    def run(tree: ast.Module) -> tuple | None:
        first = dict(state)
        if n0:  # the statements before the loop, once, on the first values
            env = {**functions, **fixed, **state}
            try:
                with _errstate(all="ignore"):
                    exec(_compiled(ast.Module(tree.body[:n0], [])),  # noqa: S102 - our own
                         {"__builtins__": {}}, env)  # formulas, never the learner's text
            except Exception:  # noqa: BLE001 - a variant NumPy cannot evaluate: no match
                return None
            first = {k: env[k] for k in state}
        return _run_loop(ast.Module(tree.body[n0:n], []), ast.Module(tree.body[n:], []),
                         first, steps, fixed, functions)

    if _all_nan(got) or equal(run(whole)):
        return None
    return _single(whole, ((k, new, rep, node) for k, new, rep, node in _variants(whole, names)
                           if equal(run(new))))


def _kind(value: Any) -> tuple:
    """What a name holds, for reading one name in place of another of the same kind: a
    tuple (of registers) of a length, an array of a rank, or per-lane whole numbers or
    per-lane reals."""
    if isinstance(value, tuple):
        return ("tuple", len(value))
    arr = _asarray(value)
    if arr.ndim >= 2 and arr.dtype.kind == "f":
        return ("array",)
    if arr.dtype.kind == "b":
        return ("bool",)
    return ("int",) if arr.dtype.kind in "iu" else ("real",)


def _run_staged(codes: list, cut: tuple[int, int], inputs: dict, steps: list,
                functions: dict) -> tuple[tuple | None, dict]:
    """The first ``cut[0]`` statements (compiled, one code a statement) once, the next
    ``cut[1]`` once per entry of ``steps`` (that step's names), then the rest; the returned
    tuple and the names bound at the end."""
    a, b = cut
    # arrays copied: a store of the program (or of a variant) writes into its own copy
    env = {**functions, **{k: v.copy() if isinstance(v, _np.ndarray) else v
                           for k, v in inputs.items()}}
    glob = {"__builtins__": {}}
    try:
        with _errstate(all="ignore"):
            for code in codes[:a]:
                exec(code, glob, env)  # noqa: S102 - our own formulas, never the learner's
            for names in steps:
                env.update(names)
                for code in codes[a:a + b]:
                    exec(code, glob, env)  # noqa: S102
            for code in codes[a + b:]:
                exec(code, glob, env)  # noqa: S102
    except Exception:  # noqa: BLE001 - a variant that NumPy cannot evaluate matches nothing
        return None, env
    out = env.get("__returned__")
    return (tuple(out) if isinstance(out, tuple) else None), env


def _statement_variants(stmt: ast.stmt) -> list[tuple]:
    """``x += e`` written ``x = e``, and ``x = e`` written ``x += e``: (0, changed program,
    new statement, old statement), as ``_variants`` gives them."""
    new: ast.stmt | None = None
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add):
        new = ast.Assign([copy.deepcopy(stmt.target)], copy.deepcopy(stmt.value))
    elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
            isinstance(stmt.targets[0], ast.Name):
        new = ast.AugAssign(copy.deepcopy(stmt.targets[0]), ast.Add(), copy.deepcopy(stmt.value))
    if new is None:
        return []
    new = ast.fix_missing_locations(ast.copy_location(new, stmt))
    return [(0, ast.Module([new], []), new, stmt)]


def match_staged(prelude: str, body: str, final: str, inputs: dict, steps: list, got: tuple,
                 functions: dict, rtol: float = 1e-4, atol: float = 1e-5,
                 compare: bool = False, arrays: tuple = ()) -> list[Found]:
    """``match`` for a kernel with one loop: ``prelude`` once, ``body`` once per entry of
    ``steps`` (a dict of the loop's names for that pass, e.g. ``{"j0": 16}``), ``final``
    ending with ``return (...)``. One change anywhere; a name is read only in place of one
    holding the same kind of value in the reference (a register tuple for a register tuple,
    a whole number for a whole number), as a learner's slip does; with ``compare``, a
    comparison widened or narrowed too; ``arrays``: see below. EVERY variant whose values equal ``got`` (several:
    the evidence does not tell them apart, and a message must say so), [] when none."""
    tp, tb, tf = ast.parse(prelude), ast.parse(body), ast.parse(final)
    stmts = tp.body + tb.body + tf.body
    cut = (len(tp.body), len(tb.body))
    codes = [_compiled(ast.Module([s], [])) for s in stmts]

    def equal(values: tuple | None) -> bool:
        return values is not None and len(values) == len(got) and \
            all(_same(g, v, rtol, atol) for g, v in zip(got, values))

    reference, env = _run_staged(codes, cut, inputs, steps, functions)
    if reference is None or _all_nan(got) or equal(reference):
        return []
    # arrays: the names of the kernel's arrays, when its per-thread values are arrays of
    # more than one axis too (one value per thread of every block)
    kinds = {n: (("array",) if n in arrays else _kind(_asarray(v).ravel()[:1]))
             if arrays and not isinstance(v, tuple) else _kind(v)
             for n, v in env.items()
             if n not in functions and n != "__returned__" and not callable(v)}

    def same_kind(rep: ast.expr, node: ast.AST) -> bool:
        # (a whole number read where a real belongs is a slip Python and Numba both take)
        return not (isinstance(rep, ast.Name) and isinstance(node, ast.Name)) or \
            kinds.get(rep.id) == kinds.get(node.id) or \
            (kinds.get(rep.id), kinds.get(node.id)) == (("int",), ("real",))

    found: dict[tuple, Found] = {}
    for k, stmt in enumerate(stmts):
        for _, new, rep, node in itertools.chain(_statement_variants(stmt), _variants(
                ast.Module([stmt], []), list(kinds), same_kind, compare)):
            try:
                code = _compiled(new)
            except (SyntaxError, ValueError, TypeError):
                continue
            if equal(_run_staged(codes[:k] + [code] + codes[k + 1:], cut, inputs, steps,
                                 functions)[0]):
                hit = Found(ast.unparse(new.body[0]), ast.unparse(stmt), ast.unparse(rep),
                            ast.unparse(node), _in_index(stmt, node))
                found.setdefault((hit.wrong, hit.right), hit)  # one change made two ways
    return list(found.values())


def described(found: list[Found], written: Any = str, limit: int = 4) -> Any:
    """The changes of ``found`` in words (catalogue entries; the code in them, ``written``
    turns a model's statement into the kernel's), or None when there are none or more than
    ``limit``: so many single changes giving the same values single nothing out."""
    from ..i18n import T

    if not found or len(found) > limit:
        return None
    parts = [T("`{wrong}` in place of `{right}` (in the statement `{statement}`)",
               wrong=written(f.wrong_part), right=written(f.right_part),
               statement=written(f.right)) for f in found]
    text = parts[-1]
    for part in reversed(parts[:-1]):
        text = T("{one}, or {other}", one=part, other=text)
    if len(parts) > 1:
        text = T("one of {changes} (these give the same values here: the run cannot tell "
                 "them apart)", changes=text)
    return text


def run_loop(body: str, final: str, state: dict, steps: list, fixed: dict, functions: dict,
             before: str = "") -> tuple | None:
    """The returned tuple of the program (``before`` once, ``body`` per step, ``final``) as
    written, no change made: for a checker that varies the steps (a loop's bounds) instead
    of a statement; None when NumPy cannot evaluate it."""
    first = dict(state)
    if before.strip():
        env = {**functions, **fixed, **state}
        try:
            with _errstate(all="ignore"):
                exec(_compiled(ast.parse(before)), {"__builtins__": {}}, env)  # noqa: S102
        except Exception:  # noqa: BLE001 - our own formulas: nothing evaluates
            return None
        first = {k: env[k] for k in state}
    return _run_loop(ast.parse(body), ast.parse(final), first, steps, fixed, functions)


def same(got: tuple, values: tuple | None, rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Whether ``values`` (a program's returned tuple) equal ``got`` element by element."""
    return values is not None and len(values) == len(got) and \
        all(_same(g, v, rtol, atol) for g, v in zip(got, values))
