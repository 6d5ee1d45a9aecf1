"""Which learner definitions a verdict may use: a static allow-list over the answer cells' AST.

A verdict process never runs a learner *statement*. From each answer cell it keeps only:

* top-level function definitions (kernels, device functions, host functions) whose decorators
  are ``cuda.jit`` bare or with the options in ``JIT_OPTIONS`` as bool/int literals (never a
  signature: Numba evaluates signature strings), no string annotations, and whose whole body, defaults and annotations use
  only the constructs below;
* ``name = <literal>`` (quiz answers, constants such as ``TILE = 16``), read with
  ``ast.literal_eval``: a value, never code;
* ``import``/``from ... import`` of the few modules answers need (math, numpy, numba).

Everything else at the top of a cell (prints, calls, loops, other assignments) is not run;
a name that only such a statement binds is "not gradable" for the test cells that use it,
with the construct and line named. Inside a function body:

* statements: assignment (to local names and to subscripts of locals), augmented assignment,
  ``return``, ``if``, ``for``, ``while``, ``break``, ``continue``, ``pass``, ``assert``,
  ``raise`` of a builtin exception, a docstring, expression statements (calls);
* names: the function's own locals and parameters, a short list of builtins (``range``,
  ``len``, ``min``, ...), other accepted learner definitions, and from the master's context
  only modules (numpy, math, numba.cuda), numba types, compiled kernels and immutable
  constants -- never ``cudacourse``, ``quiz`` or any other object a checker relies on;
* attributes: a fixed list of names (``shape``, ``copy_to_host``, ``threadIdx``, ``x``,
  ``shared``, ``exp``, ...), read only; nothing starting with ``_``; never stored or deleted;
* no ``import``, ``lambda``, ``class``, ``global``/``nonlocal``, ``try``, ``with``,
  ``yield``, ``await``, nested functions, walrus, or string formatting methods.

So learner code cannot name the checker's modules, frames, builtins such as ``getattr``,
``exec`` or ``open``, nor rebind anything but its own locals; what it can do is compute,
index, launch kernels and call the CUDA/NumPy functions listed here. On a GPU, kernels are
compiled by Numba (which refuses most Python anyway); in the simulator they run as Python,
which is why kernels are held to the same list.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Iterable

SAFE_BUILTINS = frozenset({
    "range", "len", "min", "max", "abs", "int", "float", "bool", "round", "enumerate", "zip",
    "sum", "divmod", "pow", "print", "list", "tuple", "reversed", "sorted", "complex", "str",
    "True", "False", "None", "any", "all",
    # for `raise`: learner stubs raise NotImplementedError
    "NotImplementedError", "ValueError", "AssertionError", "RuntimeError", "IndexError",
    "TypeError", "ZeroDivisionError", "ArithmeticError", "Exception",
})

ATTRIBUTES = frozenset({
    # arrays (NumPy and Numba device arrays)
    "shape", "dtype", "size", "ndim", "T", "astype", "copy", "reshape", "ravel", "flatten",
    "copy_to_host", "copy_to_device", "real", "imag", "fill", "itemsize", "nbytes",
    "sum", "mean",
    # numba.cuda: indexing, memory, synchronisation, intrinsics, host API
    "grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "laneid", "warpsize",
    "x", "y", "z", "syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or",
    "syncwarp", "threadfence", "threadfence_block", "shared", "local", "const", "array",
    "array_like", "atomic", "add", "sub", "max", "min", "inc", "dec", "exch", "cas",
    "compare_and_swap", "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync",
    "ballot_sync", "all_sync", "any_sync", "eq_sync", "activemask", "lanemask_lt", "fma",
    "to_device", "device_array", "device_array_like", "pinned_array", "pinned_array_like",
    "mapped_array", "stream", "synchronize", "event", "record", "elapsed_time",
    # numpy: dtypes and array constructors and element-wise maths
    "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64", "bool_", "zeros", "zeros_like", "empty", "empty_like", "ones",
    "ones_like", "full", "full_like", "arange", "asarray", "ascontiguousarray",
    "maximum", "minimum", "where", "clip", "dot", "matmul", "inf", "nan", "pi", "e",
    # math (and the same names on numpy)
    "exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "pow", "fabs", "floor", "ceil",
    "trunc", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh",
    "erf", "erfc", "isnan", "isinf", "isfinite", "copysign", "hypot", "abs", "fmod", "sign",
    "frexp", "ldexp", "modf", "gamma", "lgamma", "degrees", "radians",
    # cudacourse.runtime.tensorcore (lesson 7): mma, ldmatrix, cp.async and the bfloat16 packing
    "mma_bf16", "mma_f16", "mma_tf32", "ldmatrix_x1", "ldmatrix_x2", "ldmatrix_x4",
    "ldmatrix_x1_trans", "ldmatrix_x2_trans", "ldmatrix_x4_trans", "cp_async16",
    "cp_async16_ca", "cp_async8", "cp_async4", "cp_async_commit", "cp_async_wait",
    "cp_async_wait_all", "pack_bf16x2", "pack_f16x2", "unpack_bf16x2", "float_bits",
    "bits_float", "exp2_approx", "to_tf32", "shared_tile",
})

MODULES = frozenset({"math", "cmath", "numpy", "numba", "numba.cuda"})
# Modules the setup cell binds that answer code may use but not import itself: lesson 7's
# tensor-core instructions (``tc.mma_bf16`` ...; their names are in ATTRIBUTES).
CONTEXT_MODULES = MODULES | {"cudacourse.runtime.tensorcore"}
FROM_NUMBA = frozenset({"cuda", "float16", "float32", "float64", "int8", "int16", "int32",
                        "int64", "uint8", "uint16", "uint32", "uint64", "boolean", "void"})

_EXPR = (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp, ast.Call, ast.Name,
         ast.Constant, ast.Subscript, ast.Slice, ast.Tuple, ast.List, ast.Attribute,
         ast.ListComp, ast.GeneratorExp, ast.comprehension, ast.keyword, ast.JoinedStr,
         ast.FormattedValue, ast.Starred, ast.expr_context, ast.operator, ast.unaryop,
         ast.boolop, ast.cmpop, ast.arguments, ast.arg)
_STMT = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return, ast.If, ast.For, ast.While,
         ast.Break, ast.Continue, ast.Pass, ast.Expr, ast.Assert, ast.Raise, ast.Delete)
if hasattr(ast, "Index"):  # Python < 3.9 spelling, harmless elsewhere
    _EXPR += (ast.Index,)  # pragma: no cover


# The source intake gives an answer cell it could not find (intake.MISSING_MARK)
MISSING_MARK = "# cudacourse: missing answer cell:"


class NotGradable(Exception):
    """A learner construct outside the allow-list."""


@dataclass
class Definition:
    """One accepted learner definition, ready for a verdict to bind."""

    name: str
    kind: str  # "function", "literal", "import"
    cell: str  # grade_id of the answer cell
    node: ast.stmt
    value: Any = None  # the literal, for kind == "literal"


@dataclass
class Selection:
    """What the allow-list kept from a notebook's answer cells, and what it refused."""

    accepted: dict[str, Definition] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)  # name -> reason
    ignored: list[str] = field(default_factory=list)  # top-level statements not run

    def reason_for(self, names: Iterable[str]) -> str | None:
        """The first reason why one of ``names`` is not gradable, else None."""
        for n in names:
            if n in self.rejected and n not in self.accepted:
                return f"answer '{n}': {self.rejected[n]}"
        return None


def _where(node: ast.AST, cell: str) -> str:
    return f"line {getattr(node, 'lineno', '?')} of answer cell '{cell}'"


def _bound_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def _locals_of(fn: ast.FunctionDef) -> set[str]:
    names = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


# ``@cuda.jit`` options an answer may pass, each a plain bool or int. Everything else is
# refused, above all a signature: Numba parses a signature string by evaluating it
# (``eval`` with builtins), so ``@cuda.jit("<string>")`` would run Python in the verdict
# process on a GPU grader; ``link=`` and ``extensions=`` bring in code from files, and
# ``cache=`` writes to disk. No positional argument is allowed at all.
JIT_OPTIONS: dict[str, tuple[type, ...]] = {
    "device": (bool,), "fastmath": (bool,), "inline": (bool,), "opt": (bool,),
    "lineinfo": (bool,), "debug": (bool,), "max_registers": (int,),
}


def _check_decorator(dec: ast.expr, cell: str) -> None:
    def is_jit(e: ast.expr) -> bool:
        return (isinstance(e, ast.Attribute) and e.attr == "jit" and (
            (isinstance(e.value, ast.Name) and e.value.id == "cuda") or
            (isinstance(e.value, ast.Attribute) and e.value.attr == "cuda" and
             isinstance(e.value.value, ast.Name) and e.value.value.id == "numba")))
    if is_jit(dec):
        return
    if isinstance(dec, ast.Call) and is_jit(dec.func):
        if any(k.arg is None for k in dec.keywords):
            raise NotGradable(f"**kwargs in a decorator at {_where(dec, cell)}")
        if dec.args:
            what = ("a signature string (Numba evaluates it as Python)"
                    if any(isinstance(n, ast.Constant) and isinstance(n.value, str)
                           for a in dec.args for n in ast.walk(a))
                    else "a positional argument (an explicit signature)")
            raise NotGradable(f"{what} in @cuda.jit at {_where(dec.args[0], cell)}; "
                              "write @cuda.jit or @cuda.jit(device=True)")
        for k in dec.keywords:
            if k.arg not in JIT_OPTIONS:
                raise NotGradable(f"decorator option '{k.arg}=' (not one of "
                                  f"{', '.join(sorted(JIT_OPTIONS))}) at {_where(k.value, cell)}")
            if not isinstance(k.value, ast.Constant):
                raise NotGradable(f"decorator argument that is not a literal at "
                                  f"{_where(k.value, cell)}")
            value, kinds = k.value.value, JIT_OPTIONS[k.arg]
            # bool is an int: max_registers=True is refused, device=1 too
            if type(value) not in kinds:
                raise NotGradable(f"decorator option '{k.arg}=' must be "
                                  f"{' or '.join(t.__name__ for t in kinds)}, not "
                                  f"{type(value).__name__}, at {_where(k.value, cell)}")
        return
    raise NotGradable(f"decorator other than @cuda.jit at {_where(dec, cell)}")


def _check_annotations(fn: ast.FunctionDef, cell: str) -> None:
    """No string annotations: a tool that resolves them (typing.get_type_hints) evaluates
    them, so they are code, not data."""
    args = fn.args
    annotated = [a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                        *(x for x in (args.vararg, args.kwarg) if x))
                 if a.annotation is not None]
    if fn.returns is not None:
        annotated.append(fn.returns)
    for ann in annotated:
        for node in ast.walk(ann):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                raise NotGradable(f"a string annotation at {_where(node, cell)} (it would "
                                  "be evaluated as Python)")


def check_function(fn: ast.AST, cell: str, allowed: set[str]) -> set[str]:
    """Raise NotGradable unless ``fn`` keeps to the allow-list; return the globals it uses."""
    if not isinstance(fn, ast.FunctionDef):
        raise NotGradable(f"{type(fn).__name__} at {_where(fn, cell)}")
    for dec in fn.decorator_list:
        _check_decorator(dec, cell)
    local = _locals_of(fn)
    used: set[str] = set()
    in_decorators = {id(n) for d in fn.decorator_list for n in ast.walk(d)}
    for node in ast.walk(fn):
        if node is fn or id(node) in in_decorators:
            continue
        if isinstance(node, ast.stmt):
            if not isinstance(node, _STMT):
                raise NotGradable(f"{type(node).__name__} statement at {_where(node, cell)}")
        elif isinstance(node, ast.expr_context) or isinstance(node, (
                ast.operator, ast.unaryop, ast.boolop, ast.cmpop)):
            continue
        elif not isinstance(node, _EXPR):
            raise NotGradable(f"{type(node).__name__} at {_where(node, cell)}")
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load) and node.id not in local:
                if node.id not in allowed and node.id not in SAFE_BUILTINS:
                    raise NotGradable(f"name '{node.id}' (not available to answer code) at "
                                      f"{_where(node, cell)}")
                used.add(node.id)
            if node.id.startswith("__"):
                raise NotGradable(f"dunder name '{node.id}' at {_where(node, cell)}")
        elif isinstance(node, ast.Attribute):
            if node.attr.startswith("_") or node.attr not in ATTRIBUTES:
                raise NotGradable(f"attribute '.{node.attr}' at {_where(node, cell)}")
            if not isinstance(node.ctx, ast.Load):
                raise NotGradable(f"assignment to attribute '.{node.attr}' at "
                                  f"{_where(node, cell)}")
        elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
            base = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if not (isinstance(base, ast.Name) and base.id in local):
                raise NotGradable(f"assignment into something that is not a local variable "
                                  f"at {_where(node, cell)}")
        elif isinstance(node, ast.Raise):
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if node.cause is not None or not (exc is None or (
                    isinstance(exc, ast.Name) and exc.id in SAFE_BUILTINS)):
                raise NotGradable(f"raise of something other than a builtin exception at "
                                  f"{_where(node, cell)}")
        elif isinstance(node, ast.Delete):
            if not all(isinstance(t, ast.Name) for t in node.targets):
                raise NotGradable(f"del of something other than a local at "
                                  f"{_where(node, cell)}")
        elif isinstance(node, ast.comprehension) and node.is_async:
            raise NotGradable(f"async comprehension at {_where(node, cell)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            raise NotGradable(f"bytes literal at {_where(node, cell)}")
    _check_annotations(fn, cell)
    return used


def _literal(node: ast.expr, cell: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise NotGradable(f"a value that is not a literal ({type(node).__name__}) at "
                          f"{_where(node, cell)}; write it as a literal, e.g. answer = \"b\"")\
            from None


def select(cells: list[tuple[str, str]], context: dict[str, Any]) -> Selection:
    """Apply the allow-list to answer cells ``[(grade_id, source), ...]`` in notebook order.

    ``context`` is the namespace the master's context cells built (trusted); only some of
    its names are available to learner functions (see :func:`available`). Learner code may
    not rebind any of the context's names.
    """
    sel = Selection()
    allowed = available(context)

    def reject(names: Iterable[str], why: str) -> None:
        for n in names:
            sel.rejected[n] = why
            sel.accepted.pop(n, None)

    for grade_id, source in cells:
        if source.startswith(MISSING_MARK):  # intake found no cell for this answer
            names = source[len(MISSING_MARK):].partition(":")[2].split()
            reject(names or [grade_id], f"answer cell '{grade_id}' is missing (its metadata "
                                        "was removed?)")
            continue
        try:
            tree = ast.parse(source, filename=f"<answer cell '{grade_id}'>")
        except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
            sel.ignored.append(f"answer cell '{grade_id}' does not parse: {exc}")
            for name in _names_in_unparsable(source):
                sel.rejected.setdefault(name, f"answer cell '{grade_id}' has a syntax error")
            continue
        for stmt in tree.body:
            try:
                _select_statement(stmt, grade_id, context, allowed, sel)
            except NotGradable as exc:
                reject(_statement_binds(stmt), str(exc))
            except RecursionError:
                reject(_statement_binds(stmt), f"too deeply nested at {_where(stmt, grade_id)}")
    return sel


def _names_in_unparsable(source: str) -> list[str]:
    import re

    return re.findall(r"^(?:def\s+)?([A-Za-z_]\w*)\s*(?:=|\()", source, flags=re.M)


def _statement_binds(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    out: list[str] = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.append(node.id)
    return out


def _select_statement(stmt: ast.stmt, cell: str, context: dict[str, Any], allowed: set[str],
                      sel: Selection) -> None:
    binds = _statement_binds(stmt)
    clash = [n for n in binds if n in context]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        _select_import(stmt, cell, context, sel)
        return
    if clash:
        sel.ignored.append(f"{_where(stmt, cell)} rebinds '{clash[0]}', a name of the "
                           "course's setup: not run")
        return
    if isinstance(stmt, ast.FunctionDef):
        uses = check_function(stmt, cell, allowed | set(sel.accepted))
        for name in uses:
            if name in sel.rejected and name not in sel.accepted:
                raise NotGradable(f"uses '{name}', which is not gradable ({sel.rejected[name]})")
        sel.accepted[stmt.name] = Definition(stmt.name, "function", cell, stmt)
        sel.rejected.pop(stmt.name, None)
        return
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if all(isinstance(t, ast.Name) for t in targets):
            value = _literal(stmt.value, cell)
            for t in targets:
                sel.accepted[t.id] = Definition(t.id, "literal", cell, stmt, value)
                sel.rejected.pop(t.id, None)
            return
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
        return  # a docstring or a bare literal
    if binds:
        raise NotGradable(f"{type(stmt).__name__} statement at {_where(stmt, cell)} is not "
                          "run by the grader (only function definitions, literals and "
                          "imports of math/numpy/numba are)")
    sel.ignored.append(f"{type(stmt).__name__} statement at {_where(stmt, cell)}: not run")


def _select_import(stmt: ast.Import | ast.ImportFrom, cell: str, context: dict[str, Any],
                   sel: Selection) -> None:
    for alias in stmt.names:
        if isinstance(stmt, ast.ImportFrom):
            module, name = stmt.module or "", alias.name
            ok = stmt.level == 0 and module in MODULES and (
                module != "numba" or name in FROM_NUMBA) and not name.startswith("_") \
                and name != "*"
            full = f"from {module} import {name}"
        else:
            module = name = alias.name
            ok = module in MODULES
            full = f"import {module}"
        bound = alias.asname or (name if isinstance(stmt, ast.ImportFrom)
                                 else name.split(".")[0])
        if not ok:
            sel.rejected[bound] = f"'{full}' at {_where(stmt, cell)} is not allowed"
            continue
        if bound in context:
            continue  # the setup already has it (the same module, or the course's own name)
        node = ast.Import(names=[ast.alias(name=module, asname=None)])
        sel.accepted[bound] = Definition(bound, "import", cell, node,
                                         (module, name if isinstance(stmt, ast.ImportFrom)
                                          else None, alias.asname is not None))


def available(context: dict[str, Any]) -> set[str]:
    """The context names learner functions may use: modules, numba types, kernels, constants."""
    import types

    out = set()
    for name, value in context.items():
        if name.startswith("_"):
            continue
        if isinstance(value, types.ModuleType):
            if value.__name__ in CONTEXT_MODULES:
                out.add(name)
        elif _is_constant(value):
            out.add(name)
        else:
            mod = type(value).__module__ or ""
            if mod.startswith("numba") and (
                    type(value).__name__ in ("CUDADispatcher", "FakeCUDAKernel", "Dispatcher")
                    or mod.startswith("numba.core.types") or mod.startswith("numba.cuda.types")
                    or "types" in mod.split(".")):
                out.add(name)
    return out


def _is_constant(value: Any) -> bool:
    if isinstance(value, (bool, int, float, complex, str, type(None))):
        return True
    if isinstance(value, tuple):
        return all(_is_constant(v) for v in value)
    # NumPy arrays of numbers (tables a kernel reads, e.g. lattice directions): the verdict
    # makes them read-only before any learner definition is bound
    return type(value).__name__ == "ndarray" and type(value).__module__ == "numpy" and \
        value.dtype.kind in "biuf" and value.size <= 1_000_000


__all__ = ["Selection", "Definition", "NotGradable", "select", "available", "check_function",
           "SAFE_BUILTINS", "ATTRIBUTES", "JIT_OPTIONS"]
