"""A learner's kernel as source text plus what it needs, so another process can rebuild it.

``bundle(kernel, ...)`` collects, for each function handed in: its source (from
``inspect.getsource``, which also finds notebook cells: IPython registers each cell in
``linecache``), its file name and first line (so the rebuilt code reports the learner's own
line numbers), its ``@cuda.jit`` options, and every global or closure name it reads:

* modules become imports (``np``, ``math``, ``cuda``);
* numbers, strings, tuples of them, NumPy scalars and small NumPy arrays become constants;
* other ``@cuda.jit`` functions and plain Python functions of the learner's are bundled in
  turn (a kernel calling a device function, a host function launching kernels);
* anything importable by name (``math.sqrt``, ``numpy.float32``, ``cudacourse.kernels.warps.X``)
  becomes ``from module import name``.

What cannot be rebuilt this way is listed in ``problems`` (the caller decides what to do).
The result is plain JSON; ``digest`` hashes it, for caching.
"""

from __future__ import annotations

import ast
import base64
import builtins
import hashlib
import importlib
import inspect
import json
import math
import textwrap
import types
from typing import Any

import numpy as _np

from . import _origin
from ._names import loaded_names as _loaded_names

_SCALARS = (int, float, complex, bool, str, bytes, type(None))
MAX_ARRAY_BYTES = 1 << 20
_JIT_DEFAULTS = {"inline": "never"}  # numba-cuda's cuda.jit defaults that are truthy


def jit_options(obj: Any) -> dict | None:
    """The ``cuda.jit`` keywords that rebuild ``obj`` (None for a plain function)."""
    if not _origin.is_dispatcher(obj):
        return None
    opts = dict(getattr(obj, "targetoptions", None) or {})
    # Non-defaults only: a GPU dispatcher's targetoptions hold every keyword of cuda.jit,
    # defaults included (inline="never"), the simulator's only what was given.
    keep = {k: opts[k] for k in ("device", "fastmath", "max_registers", "inline")
            if opts.get(k) and isinstance(opts[k], (bool, int, str))
            and opts[k] != _JIT_DEFAULTS.get(k)}
    if _origin.is_device_function(obj):
        keep["device"] = True
    if getattr(obj, "_fastmath", False):
        keep["fastmath"] = True
    return keep


class _Builder:
    def __init__(self) -> None:
        self.prelude: list[str] = []
        self.units: list[dict] = []
        self.aliases: dict[str, str] = {}
        self.arrays: dict[str, dict] = {}
        self.problems: list[str] = []
        self.done: dict[int, str] = {}  # id(py_func) -> unit name
        self.objects: dict[str, Any] = {}  # unit name -> the object bundled (this process)
        self.bound: dict[str, int] = {}  # global name -> id of the value bound

    # the functions themselves
    def add(self, obj: Any) -> str:
        fn = _origin.unwrap(obj)
        if id(fn) in self.done:
            return self.done[id(fn)]
        name = fn.__name__
        self.done[id(fn)] = name
        self.objects.setdefault(name, obj)
        try:
            raw = inspect.getsource(fn)
        except (OSError, TypeError) as exc:
            self.problems.append(f"the source of {name} cannot be found ({exc})")
            return name
        src = textwrap.dedent(raw)
        try:
            tree = ast.parse(src)
        except SyntaxError as exc:
            self.problems.append(f"the source of {name} does not parse ({exc})")
            return name
        node = next((n for n in tree.body if isinstance(n, (ast.FunctionDef,
                                                            ast.AsyncFunctionDef))), None)
        if node is None:  # e.g. a lambda: its source is the whole assignment line
            self.problems.append(f"{name} is not defined with def")
            return name
        if node.name != fn.__code__.co_name:  # the file was edited since it was imported
            self.problems.append(f"the source of {name} on disk is no longer the code that "
                                 "runs (was its file edited? re-run the cell or re-import)")
            return name
        lines = src.splitlines(keepends=True)
        body = "".join(lines[node.lineno - 1:node.end_lineno])  # the def, decorators left out
        first = fn.__code__.co_firstlineno
        # co_firstlineno is the first decorator's line; the def sits node.lineno - 1 later
        dec_lines = node.lineno - (node.decorator_list[0].lineno if node.decorator_list else
                                   node.lineno)
        self.units.append({"name": name, "source": body, "filename": fn.__code__.co_filename,
                           "lineno": first + dec_lines, "jit": jit_options(obj)})
        for ref in sorted(_loaded_names(node)):
            self.resolve(ref, fn)
        return name

    # what the function reads
    def resolve(self, ref: str, fn: Any) -> None:
        code = fn.__code__
        if ref in code.co_freevars and fn.__closure__:
            try:
                value = fn.__closure__[code.co_freevars.index(ref)].cell_contents
            except ValueError:  # an empty cell: the name is assigned later
                return
        elif ref in fn.__globals__:
            value = fn.__globals__[ref]
        else:
            return  # a builtin, or undefined (then it fails in the child as it would here)
        if self.bound.get(ref) == id(value):
            return
        if ref in self.bound:
            self.problems.append(f"two functions read different objects named {ref}")
            return
        self.bound[ref] = id(value)
        self.value(ref, value)

    def value(self, ref: str, value: Any) -> None:
        if value is builtins.__dict__.get(ref, object()):
            return
        if isinstance(value, types.ModuleType):
            self.prelude.append(f"import {value.__name__}\n"
                                f"{ref} = __import__('sys').modules[{value.__name__!r}]")
            return
        if isinstance(value, float) and not math.isfinite(value):
            self.prelude.append(f"{ref} = float({repr(value)!r})")  # inf, -inf, nan
            return
        if isinstance(value, _SCALARS) or _is_literal(value):
            self.prelude.append(f"{ref} = {value!r}")
            return
        if isinstance(value, _np.generic):
            item = value.item()
            text = f"float({repr(item)!r})" if isinstance(item, float) else repr(item)
            self.prelude.append(f"{ref} = __import__('numpy').dtype({value.dtype.str!r})"
                                f".type({text})")
            return
        if isinstance(value, _np.ndarray):
            if value.nbytes > MAX_ARRAY_BYTES or value.dtype.kind not in "biufc":
                self.problems.append(f"the global array {ref} is too large or not numeric")
                return
            self.arrays[ref] = {"dtype": value.dtype.str, "shape": list(value.shape),
                                "data": base64.b64encode(_np.ascontiguousarray(value)
                                                         .tobytes()).decode()}
            return
        where = _importable(value)
        if where and not _is_learner_function(value):
            mod, qual = where
            self.prelude.append(f"from {mod} import {qual} as {ref}" if "." not in qual else
                                f"import {mod}\n{ref} = __import__('sys').modules[{mod!r}]."
                                f"{qual}")
            return
        if _origin.is_dispatcher(value) or isinstance(value, types.FunctionType):
            target = self.add(value)
            if target != ref:
                self.aliases[ref] = target
            return
        numba_name = _numba_type_name(value)
        if numba_name:
            self.prelude.append(f"from numba import {numba_name} as {ref}")
            return
        self.problems.append(f"the global {ref} (a {type(value).__name__}) cannot be rebuilt "
                             "in another process")


def _is_literal(value: Any) -> bool:
    if not isinstance(value, (tuple, list, dict, frozenset, set)):
        return False
    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError):
        return False


def _importable(value: Any) -> tuple[str, str] | None:
    mod, qual = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(mod, str) or not isinstance(qual, str) or "<" in qual:
        return None
    if mod in ("__main__", "__learner__") or mod.startswith("__"):
        return None
    try:
        obj = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except Exception:  # noqa: BLE001 - not importable by that name
        return None
    return (mod, qual) if obj is value else None


def _is_learner_function(value: Any) -> bool:
    """A function from a notebook cell or a test file, not from an installed module."""
    fn = getattr(value, "py_func", value)
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    mod = getattr(fn, "__module__", "") or ""
    return not (mod.startswith("cudacourse") or mod.startswith("numba") or
                mod.startswith("numpy") or mod in ("math", "cmath", "operator"))


def _numba_type_name(value: Any) -> str:
    try:
        from numba.core import types as nt
    except ImportError:  # pragma: no cover
        return ""
    if isinstance(value, nt.Type):
        import numba

        name = str(value)
        if getattr(numba, name, None) == value:
            return name
    return ""


def bundle(*objs: Any) -> dict:
    """The JSON bundle that rebuilds ``objs`` (kernels, device or host functions)."""
    return bundle_with_objects(*objs)[0]


def bundle_with_objects(*objs: Any) -> tuple[dict, dict[str, Any]]:
    """``bundle(*objs)`` and, by unit name, the objects of this process it was made from
    (the kernels a replay launched, to compile them here for real)."""
    b = _Builder()
    entries = [b.add(o) for o in objs]
    return ({"entries": entries, "prelude": b.prelude, "units": b.units,
             "aliases": b.aliases, "arrays": b.arrays, "problems": b.problems}, b.objects)


def digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:32]
