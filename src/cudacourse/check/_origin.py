"""What was handed in: a kernel, a device function, a plain function, the untouched stub, or
the course's own code. The one detector every checker uses (through ``_engine.require_*``).

It returns a :class:`Subject`; it never raises, so it can serve both the simulator and a GPU
(and the replay subprocess). The course's own code is recognised three ways, because a
learner can reach it three ways:

* the object itself (``vector_add = cudacourse.kernels.vector._vector_add``), or its Python function
  re-jitted (``cuda.jit(that.py_func)``): the code object's file lies inside the package;
* a copy made from its source (``exec(inspect.getsource(...))``): same bytecode, constants
  and names as a function of a loaded ``cudacourse`` module, and no source file of its own.
  A kernel the learner typed in a cell that happens to equal the course's is NOT refused:
  its cell is its own source.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import linecache
import os
import sys
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any

from ._names import loaded_names

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # src/cudacourse
_STATE: dict = {"index": {}, "index_key": None}


@dataclass
class Subject:
    """What ``obj`` is, in the terms a checker needs."""

    kind: str  # "kernel", "device_function", "function", "other"
    obj: Any
    py_func: Any = None
    stub: str = ""  # "", "stub" (only the raise), "leftover" (code plus the raise)
    package: str = ""  # "cudacourse.kernels.vector._vector_add" when it is the course's own code
    nparams: int | None = None
    notes: list = field(default_factory=list)

    @property
    def type_name(self) -> str:
        return type(self.obj).__name__


def is_dispatcher(obj: Any) -> bool:
    """A ``@cuda.jit`` object: Numba's CUDA dispatcher, or the simulator's stand-in."""
    kinds: list[type] = []
    try:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        kinds.append(FakeCUDAKernel)
    except ImportError:  # pragma: no cover - every numba-cuda ships the simulator
        pass
    if "numba.cuda.dispatcher" in sys.modules:
        disp = getattr(sys.modules["numba.cuda.dispatcher"], "CUDADispatcher", None)
        if isinstance(disp, type):
            kinds.append(disp)
    return bool(kinds) and isinstance(obj, tuple(kinds)) and hasattr(obj, "py_func")


def unwrap(fn: Any) -> Any:
    """The Python function under any number of ``cuda.jit`` layers and bound methods."""
    for _ in range(8):
        inner = getattr(fn, "py_func", None) or getattr(fn, "__func__", None)
        if inner is None or inner is fn:
            break
        fn = inner
    return fn


def is_device_function(obj: Any) -> bool:
    options = getattr(obj, "targetoptions", None) or {}
    return bool(getattr(obj, "_device", False) or options.get("device"))


def examine(obj: Any) -> Subject:
    """Classify ``obj``; never raises."""
    if is_dispatcher(obj):
        kind = "device_function" if is_device_function(obj) else "kernel"
        fn = obj.py_func
    elif isinstance(obj, (types.FunctionType, types.MethodType)):
        kind, fn = "function", obj
    elif isinstance(obj, types.BuiltinFunctionType) or callable(obj):
        return Subject("other" if not callable(obj) else "callable", obj)
    else:
        return Subject("other", obj)
    fn = unwrap(fn)
    sub = Subject(kind, obj, fn)
    try:
        sub.nparams = len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        sub.nparams = None
    sub.stub = stub_state(fn)
    sub.package = package_origin(fn)
    return sub


# --- the untouched stub ------------------------------------------------------------------

def stub_state(fn: Any) -> str:
    """``"stub"`` when the body is only ``raise NotImplementedError``, ``"leftover"`` when
    code was written but the raise is still there, else ``""``."""
    tree = _function_ast(fn)
    if tree is None:  # no source: the bytecode still names the exception
        code = getattr(fn, "__code__", None)
        return "stub" if code is not None and "NotImplementedError" in code.co_names else ""
    body = [s for s in tree.body if not _is_docstring_or_pass(s)]
    raises = [n for n in ast.walk(tree) if isinstance(n, ast.Raise) and _names_nie(n.exc)]
    if not raises:
        return ""
    if all(isinstance(s, ast.Raise) for s in body):
        return "stub"
    return "leftover"


def _names_nie(exc: Any) -> bool:
    if isinstance(exc, ast.Call):
        exc = exc.func
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _is_docstring_or_pass(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Pass) or (
        isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))


def _function_ast(fn: Any) -> ast.FunctionDef | None:
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        mod = ast.parse(src)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    for node in mod.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # A file edited since it was imported gives another function's text: distrust it.
            code = getattr(fn, "__code__", None)
            return node if code is None or node.name == code.co_name else None
    return None


# --- the course's own code ------------------------------------------------------------------

_SKIP_OPS = {"RESUME", "PRECALL", "CACHE", "NOP", "PUSH_NULL", "EXTENDED_ARG", "KW_NAMES",
             "COPY_FREE_VARS", "MAKE_CELL"}
_SAME_OPS = {"LOAD_METHOD": "LOAD_ATTR", "CALL_METHOD": "CALL", "CALL_FUNCTION": "CALL",
             "LOAD_FAST_CHECK": "LOAD_FAST", "LOAD_FAST_AND_CLEAR": "LOAD_FAST"}


def _fingerprint(code: types.CodeType) -> str:
    """A hash of what the code does: its instructions (jump targets and the compiler's
    choice between equivalent opcodes left out), names, locals and constants. Equal for a
    function and a copy re-made from its source in another file or by exec."""
    import dis

    h = hashlib.sha256()

    def feed(c: types.CodeType) -> None:
        for ins in dis.get_instructions(c):
            if ins.opname in _SKIP_OPS:
                continue
            op = _SAME_OPS.get(ins.opname, ins.opname)
            if ins.opcode in dis.hasjrel or ins.opcode in dis.hasjabs:
                arg = ""
            elif isinstance(ins.argval, types.CodeType):
                arg = "<code>"
            else:
                arg = repr(ins.argval)
            h.update(f"{op}:{arg};".encode())
        h.update(repr(c.co_varnames).encode())
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                feed(k)

    feed(code)
    return h.hexdigest()


def _walk_codes(code: types.CodeType):
    yield code
    for k in code.co_consts:
        if isinstance(k, types.CodeType):
            yield from _walk_codes(k)


def _package_index() -> dict[str, str]:
    """Fingerprint -> qualified name, for every function of every loaded cudacourse module
    (kernels and their factories' inner functions included)."""
    mods = sorted(n for n, m in list(sys.modules.items())
                  if m is not None and (n == "cudacourse" or n.startswith("cudacourse.")))
    key = tuple(mods)
    if _STATE["index_key"] == key:
        return _STATE["index"]
    index: dict[str, str] = {}
    for name in mods:
        mod = sys.modules.get(name)
        for attr, value in list(vars(mod).items()):
            fn = getattr(value, "py_func", value)
            fn = getattr(fn, "__func__", fn)
            code = getattr(fn, "__code__", None)
            if not isinstance(code, types.CodeType):
                continue
            if not os.path.abspath(code.co_filename).startswith(_PKG_DIR):
                continue  # imported into the module from elsewhere (numpy, numba...)
            for c in _walk_codes(code):
                if len(c.co_code) < 48:  # tiny helpers: too common to mean anything
                    continue
                qual = getattr(c, "co_qualname", c.co_name)
                # name it after the module that defines it, not one that imports it
                home = getattr(fn, "__module__", None) or name
                index.setdefault(_fingerprint(c), f"{home}.{qual}")
    _STATE["index"], _STATE["index_key"] = index, key
    return index


def _has_own_source(code: types.CodeType) -> bool:
    """The code object comes from a file or notebook cell that holds its text."""
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return False
    first = code.co_firstlineno - 1
    return 0 <= first < len(lines) and bool(lines[first].strip())


@functools.lru_cache(maxsize=1)
def _library_folders() -> tuple[str, ...]:
    """Python's own library, Numba (and numba-cuda) and the course, as folder prefixes
    (whatever the platform's path separator)."""
    import threading

    import numba

    found = [threading.__file__, numba.__file__, os.path.join(_PKG_DIR, "__init__.py")]
    cuda_pkg = sys.modules.get("numba.cuda")
    if cuda_pkg is not None and getattr(cuda_pkg, "__file__", None):
        found.append(os.path.dirname(cuda_pkg.__file__))  # numba-cuda's own folder
    return tuple(os.path.normcase(os.path.dirname(os.path.abspath(f))) + os.sep
                 for f in found)


def library_file(filename: str) -> bool:
    """Whether code in ``filename`` is not a learner's: Python's own library, Numba, the
    course, any installed package (numpy, NumPy's and Numba's helpers: a device array's
    ``d[:] = v`` launches a kernel of Numba's), or frozen modules."""
    if filename.startswith("<frozen"):
        return True
    name = os.path.normcase(os.path.abspath(filename))
    return (name.startswith(_library_folders()) or "site-packages" in name
            or "dist-packages" in name)


def package_origin(fn: Any) -> str:
    """The course function ``fn`` is (or copies), as ``cudacourse.module.name``; else ''."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return ""
    if os.path.abspath(code.co_filename).startswith(_PKG_DIR + os.sep):
        mod = getattr(fn, "__module__", "") or "cudacourse"
        return f"{mod}.{getattr(fn, '__qualname__', fn.__name__)}"
    if _has_own_source(code):
        return ""
    return _package_index().get(_fingerprint(code), "")


def package_helpers(fn: Any, _seen: set | None = None) -> list[str]:
    """The course's own kernels and device functions that ``fn`` (or a function of the
    learner's it calls) calls: a kernel whose work is done by the course's code."""
    seen = _seen if _seen is not None else set()
    fn = unwrap(fn)
    if id(fn) in seen or not hasattr(fn, "__code__"):
        return []
    seen.add(id(fn))
    tree = _function_ast(fn)
    if tree is None:
        return []
    found: list[str] = []
    names = loaded_names(tree)
    values: list[Any] = []
    for name in names:
        value = _lookup(fn, name)
        if value is not None:
            values.append(value)
    for node in ast.walk(tree):  # module.attr chains: warps._warp_reduce(x)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in names:
            base = _lookup(fn, node.value.id)
            if isinstance(base, types.ModuleType) and base.__name__.startswith("cudacourse"):
                values.append(getattr(base, node.attr, None))
    for value in values:
        if not is_dispatcher(value):
            continue
        origin = package_origin(unwrap(value))
        if origin:
            found.append(origin)
        else:
            found += package_helpers(value, seen)
    return sorted(set(found))


def _lookup(fn: Any, name: str) -> Any:
    code = fn.__code__
    if name in code.co_freevars and fn.__closure__:
        try:
            return fn.__closure__[code.co_freevars.index(name)].cell_contents
        except ValueError:
            return None
    return fn.__globals__.get(name)


# --- arrays ---------------------------------------------------------------------------------

def is_device_array(obj: Any) -> bool:
    """A device array (Numba's, the simulator's, or anything with the CUDA array interface)."""
    if hasattr(obj, "__cuda_array_interface__"):
        return True
    try:
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        if isinstance(obj, FakeCUDAArray):
            return True
    except ImportError:  # pragma: no cover
        pass
    return False
