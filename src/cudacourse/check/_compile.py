"""Only what a GPU compiles: in the simulator, compile every learner kernel for sm_90 too.

The simulator runs a kernel as Python, so it accepts what no GPU can run (``np.dot`` in a
thread, a kernel that returns a value, ``sum()`` of a list). Before a checker simulates a
kernel, :func:`gate` compiles it with Numba's own CUDA compiler for an H200 (sm_90), with
the argument types of the arrays the checker is about to pass: libNVVM, libdevice and
ptxas come from NVIDIA's pip wheels, no GPU or driver needed. A refusal becomes a
``CheckFailure`` (cause ``"does_not_compile"``) with the compiler's reason in plain words;
success gives registers, shared and local memory per thread (``Resources``), which lesson 2's
occupancy section uses.

The compile runs in a child process (``_child.py``): a simulator process cannot host the
real compiler (the simulator replaces ``numba.cuda``'s compiler and driver modules). One
child serves the whole process (``_compileserver``), so only the first kernel pays its start
(about a second or two); each further one costs its compile and ptxas; results are cached by
the hash of the kernel's source bundle and argument types, in memory and on disk
(``~/.cache/cudacourse/sm90``), so a re-run check cell pays nothing.

When the wheels are missing, or ``CUDACOURSE_COMPILE_GATE=0`` was set before ``import
cudacourse`` (read once, at import: setting it later from a cell changes nothing, and
rebinding ``GATE_OFF`` is seen by the grading audit), checks still run and
:func:`status` says why kernels are not compiled (``cudacourse doctor`` prints it); the
reason is printed once per process.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as _np

from . import _compileserver, _launches, _origin, _source
from ._failure import fail
from ..i18n import N_, T, Text

_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_child.py")
_SRC_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE_VERSION = "1"
TIMEOUT_S = 120
GATE_OFF = os.environ.get("CUDACOURSE_COMPILE_GATE", "1") == "0"
_STATE: dict = {"toolkit": None, "warned": False, "memo": {}, "last_seconds": 0.0}


@dataclass(frozen=True)
class Resources:
    """What ptxas reports for one kernel on sm_90, per thread (shared: per block)."""

    registers: int
    shared: int  # bytes of static shared memory per block
    local: int  # bytes of local memory (stack frame) per thread
    spill_stores: int = 0
    spill_loads: int = 0
    barriers: int = 0


class CompileRefused(Exception):
    """The sm_90 compiler refused the kernel; ``reason`` in plain words, ``detail`` raw,
    ``cause`` the verdict's cause (:func:`refusal_cause`)."""

    def __init__(self, reason: str, detail: str, line: str = "", source: str = "") -> None:
        super().__init__(reason)
        self.reason, self.detail, self.line = reason, detail, line
        self.cause = refusal_cause(detail, line, source)


# --- is the compiler here? -----------------------------------------------------------------

def _child_module() -> Any:
    """_child.py loaded by path, never as ``cudacourse.check._child``: it must not appear
    among the package's modules after import (the grading audit compares them)."""
    if _STATE.get("child") is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location("_cudacourse_child", _CHILD)
        child = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(child)
        _STATE["child"] = child
    return _STATE["child"]


def toolkit() -> dict | str:
    """Where libNVVM, libdevice and ptxas are, or the reason they are not."""
    if _STATE["toolkit"] is None:
        _STATE["toolkit"] = _child_module().find_toolkit()
    return _STATE["toolkit"]


def status() -> tuple[bool, str]:
    """(True, where) when simulated kernels are also compiled for sm_90, else (False, why)."""
    if GATE_OFF:
        return False, "CUDACOURSE_COMPILE_GATE=0"
    tk = toolkit()
    if isinstance(tk, str):
        return False, tk
    return True, f"libNVVM and ptxas from {tk['root']}"


def enabled() -> bool:
    """Only in the simulator: on a GPU the real launch compiles the kernel anyway."""
    from ..runtime import device

    return device.is_simulator() and status()[0]


def _warn_once(why: str, kernel: str = "") -> None:
    """Say once per process that kernels are not compiled (or once per kernel and reason
    that this one could not be), on stderr: the check still runs in the simulator."""
    if why == "CUDACOURSE_COMPILE_GATE=0":  # asked for: the replay child, or a user's choice
        return
    said = _STATE.setdefault("said", set())
    key = (kernel, why) if kernel else "session"
    if key in said:
        return
    said.add(key)
    _STATE["warned"] = True
    if kernel:
        print(f"cudacourse: {kernel} was not compiled for a GPU ({why}); the check runs in "
              "the simulator only.", file=sys.stderr)
    else:
        print(f"cudacourse: kernels are NOT compiled for a GPU in this simulator session "
              f"({why}); checks still run, but a kernel a GPU would refuse may pass here.",
              file=sys.stderr)


# --- argument types -------------------------------------------------------------------------

def type_spec(value: Any) -> list | None:
    """How Numba types a launch argument: ``["array", dtype, ndim, layout]`` or
    ``["scalar", dtype]``; None when it cannot say."""
    if _origin.is_device_array(value) or isinstance(value, _np.ndarray):
        ary = getattr(value, "_ary", value)  # the simulator's array wraps a NumPy one
        if not isinstance(ary, _np.ndarray):  # a real device array (GPU mode)
            dtype = _np.dtype(value.dtype)
            c = bool(getattr(value, "is_c_contiguous", lambda: True)())
            f = bool(getattr(value, "is_f_contiguous", lambda: False)())
            return ["array", dtype.str, len(value.shape), "C" if c else "F" if f else "A"]
        if ary.dtype.kind not in "biufc":
            return None
        layout = "C" if ary.flags.c_contiguous else "F" if ary.flags.f_contiguous else "A"
        return ["array", ary.dtype.str, ary.ndim, layout]
    if isinstance(value, bool):
        return ["scalar", "?"]
    if isinstance(value, int):
        return ["scalar", "<i8"]
    if isinstance(value, float):
        return ["scalar", "<f8"]
    if isinstance(value, complex):
        return ["scalar", "<c16"]
    if isinstance(value, _np.generic) and value.dtype.kind in "biufc":
        return ["scalar", value.dtype.str]
    return None


# --- the compile ------------------------------------------------------------------------------

def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cudacourse", "sm90")


def compile_kernel(kernel: Any, specs: list) -> dict:
    """Compile ``kernel`` for sm_90 with argument types ``specs``; the child's answer for it:
    ``{"ok": True, "resources": {...}}`` or ``{"ok": False, "kind", "error"}``, or
    ``{"skipped": why}`` when it cannot be rebuilt or the compiler is absent."""
    tk = toolkit()
    if isinstance(tk, str):
        return {"skipped": tk}
    bundle = _source.bundle(kernel)
    if bundle["problems"]:
        return {"skipped": "; ".join(bundle["problems"])}
    key = _source.digest({"v": CACHE_VERSION, "bundle": bundle, "specs": specs,
                          "nvvm": tk["nvvm"], "numba": _numba_versions()})
    if key in _STATE["memo"]:
        return _STATE["memo"][key]
    path = os.path.join(_cache_dir(), key + ".json")
    try:
        with open(path) as f:
            result = json.load(f)
        _STATE["memo"][key] = result
        return result
    except (OSError, ValueError):
        pass
    req = {"toolkit": tk, "bundle": bundle, "entry": bundle["entries"][0],
           "signatures": [specs], "src_dir": _SRC_DIR}
    t0 = time.perf_counter()
    answer = run_child("compile", req)
    _STATE["last_seconds"] = time.perf_counter() - t0
    if "child_error" in answer:
        return {"skipped": T("the sm_90 compiler could not run: {child_error}",
                             child_error=answer['child_error'])}
    result = answer["results"][0]
    _STATE["memo"][key] = result
    try:
        os.makedirs(_cache_dir(), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(result, f)
        os.replace(tmp, path)
    except OSError:  # a read-only home: the in-memory cache still works
        pass
    return result


def ptx_text(kernel: Any, args: tuple) -> str:
    """The PTX Numba makes of ``kernel`` for sm_90 with the argument types of ``args``,
    compiled in the child (uncached: a lesson reads it once). Raises ``CompileRefused``
    with the reason when the kernel does not compile or the compiler is absent."""
    tk = toolkit()
    if isinstance(tk, str):
        raise CompileRefused(tk, tk)
    specs = [type_spec(a) for a in args]
    if any(s is None for s in specs):
        raise CompileRefused("an argument Numba cannot type for a GPU kernel", repr(args))
    bundle = _source.bundle(kernel)
    if bundle["problems"]:
        why = "; ".join(bundle["problems"])
        raise CompileRefused(why, why)
    answer = run_child("compile", {"toolkit": tk, "bundle": bundle,
                                   "entry": bundle["entries"][0], "signatures": [specs],
                                   "src_dir": _SRC_DIR, "ptx": True})
    if "child_error" in answer:
        raise CompileRefused(str(answer["child_error"]), str(answer["child_error"]))
    result = answer["results"][0]
    if not result.get("ok"):
        raise CompileRefused(result.get("error", "refused"), result.get("error", ""))
    return result["ptx"]


def _numba_versions() -> str:
    if _STATE.get("versions"):
        return _STATE["versions"]
    from importlib import metadata

    out = []
    for dist in ("numba", "numba-cuda"):
        try:
            out.append(metadata.version(dist))
        except metadata.PackageNotFoundError:
            out.append("?")
    _STATE["versions"] = "/".join(out)
    return _STATE["versions"]


def _child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_SRC_DIR] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    for var in ("NUMBA_ENABLE_CUDASIM", "CUDACOURSE_SIM_REASON"):
        env.pop(var, None)
    return env


def run_child(mode: str, req: dict, timeout: float = TIMEOUT_S) -> dict:
    """Run ``_child.py mode`` with ``req`` on stdin; its JSON answer (or child_error). A
    ``compile`` goes to the process's compile child, kept alive between kernels
    (``_compileserver``), unless ``CUDACOURSE_COMPILE_SERVER=0``."""
    RESULT_MARK = _child_module().RESULT_MARK
    env = _child_env()
    if mode == "compile" and _compileserver.ENABLED:
        return _compileserver.ask(_CHILD, env, RESULT_MARK, req, timeout)
    import secrets

    nonce = secrets.token_hex(16)
    req = {**req, "nonce": nonce}
    try:
        proc = subprocess.run([sys.executable, _CHILD, mode], input=json.dumps(req),
                              capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"child_error": T("it took longer than {timeout:.0f} s", timeout=timeout)}
    except OSError as exc:  # e.g. a sandbox that forbids starting processes
        return {"child_error": T("a child process could not be started (`{exc}`)", exc=exc)}
    out = proc.stdout
    mark = RESULT_MARK + nonce
    i = out.find(mark)
    if i < 0:
        tail = (proc.stderr or out).strip().splitlines()[-6:]
        return {"child_error": T("exit status {returncode}: {tail}", returncode=proc.returncode,
                                 tail=' | '.join(tail))}
    return json.loads(out[i + len(mark):].splitlines()[0])


COMPILE_HINT = T("The simulator runs any Python; a GPU runs only what Numba compiles.")


def gate_or_fail(kernel: Any, args: Any, name: str) -> Resources | None:
    """:func:`gate`, its refusal turned into the checker's verdict (``does_not_compile``,
    or the cause a refusal names exactly: :func:`refusal_cause`)."""
    __tracebackhide__ = True
    try:
        return gate(kernel, tuple(args), name)
    except CompileRefused as exc:
        where = T(" ({line})", line=exc.line) if exc.line else ""
        fail(exc.cause, T("{name} would not compile for a GPU{where}: {reason}.", name=name, where=where,
               reason=exc.reason), hint=COMPILE_HINT)
    return None


def gate(kernel: Any, args: tuple, name: str) -> Resources | None:
    """In the simulator, refuse (raise :class:`CompileRefused`) what sm_90 would refuse.

    Returns the kernel's resources, or None when nothing was compiled (GPU mode, compiler
    absent: said once, arguments Numba cannot type here, source not rebuildable).
    """
    from ..runtime import device

    if not device.is_simulator():
        return None
    if getattr(kernel, "__cc_instrumented__", False):
        return None  # an instrumented build (_instrument): its source kernel was gated
    _record_launch(kernel, args, name)
    ok, why = status()
    if not ok:
        _warn_once(why)
        return None
    return _resources(kernel, args, warn=True)


MAX_RECORDED = 16


def _record_launch(kernel: Any, args: tuple, name: str) -> None:
    """Remember (kernel, checker's name for it, argument types) of a simulated launch.

    In a replay child (gate off: it runs before the GPU's own launch) a failure carries
    these back (``CheckFailure.to_dict``), so that the GPU process compiles the kernels for
    real and a kernel no GPU compiles fails as ``does_not_compile`` there too, as the gate
    makes it fail in the simulator, instead of with what its simulated run did."""
    if _origin.package_origin(_origin.unwrap(kernel)):
        return
    specs = [type_spec(a) for a in args]
    if any(s is None for s in specs):
        return
    _launches.record([getattr(_origin.unwrap(kernel), "__name__", ""), name, specs],
                     MAX_RECORDED)


launched = _launches.launched  # the record this process keeps (_launches)


def is_compile_error(exc: BaseException) -> bool:
    """Numba's refusal to compile a kernel (typing, lowering, unsupported), however its
    message is formatted: a ``NumbaError`` (driver errors are not), or the TypeError
    numba-cuda raises for a kernel that returns a value."""
    text = strip_ansi(f"{type(exc).__name__}: {exc}")
    if "must have void return type" in text:
        return True
    if "TypingError" in text or "LoweringError" in text:
        return True
    kinds = []  # numba-cuda has errors of its own; both loaded already (no new module)
    for mod in ("numba.core.errors", "numba.cuda.core.errors"):
        base = getattr(sys.modules.get(mod), "NumbaError", None)
        if isinstance(base, type):
            kinds.append(base)
    if kinds and isinstance(exc, tuple(kinds)):
        return True
    return _raised_while_compiling(exc)


# Numba's compiler's own frames: an exception raised under one of them is the compiler's
# refusal, whatever its type (cuda.grid(4) raises a plain ValueError "argument can only be
# 1, 2, 3" while typing; on the H200, 2026-12-05, it was taken for the kernel raising)
_COMPILER_FRAMES = frozenset({"compile_cuda", "compile_extra", "_compile_core"})


def _raised_while_compiling(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name in _COMPILER_FRAMES and "numba" in code.co_filename:
            return True
        tb = tb.tb_next
    return False


def compile_here(kernel: Any, specs: list) -> CompileRefused | None:
    """Compile ``kernel`` with this process's real CUDA compiler (GPU mode) for argument
    types ``specs``; the refusal, or None when it compiles (or cannot be tried here)."""
    from ..runtime import device

    if device.is_simulator():
        return None
    from numba import cuda

    try:
        sig = _child_module().argtypes(specs)
    except Exception:  # noqa: BLE001 - a type this Numba cannot rebuild: nothing to say
        return None
    fn = _origin.unwrap(kernel)
    opts = dict(getattr(kernel, "targetoptions", None) or {})
    try:
        cuda.compile_ptx(fn, sig, cc=_current_cc(), fastmath=bool(opts.get("fastmath")),
                         lineinfo=False)
    except Exception as exc:  # noqa: BLE001 - sorted below: a refusal, or something else
        if not is_compile_error(exc):
            return None
        error = strip_ansi(str(exc))
        source = _unit_source(kernel)
        reason, line = explain(error, type(exc).__name__, source)
        return CompileRefused(reason, error, line, source)
    return None


def _current_cc() -> tuple | None:
    try:
        from numba.cuda import dispatcher

        cc = tuple(dispatcher.get_current_device().compute_capability)
        return cc if len(cc) == 2 else None
    except Exception:  # noqa: BLE001 - no context: Numba's default target then
        return None


@contextlib.contextmanager
def gating() -> Iterator[None]:
    """Within the block, every simulated launch of a learner kernel is compiled for sm_90
    first, however it is launched (by ``_engine.launch``, or inside a learner's host
    function that a checker calls). Every public ``check_*`` runs inside this."""
    if not enabled():
        yield
        return
    from numba.cuda.simulator import kernel as sim_kernel

    orig = sim_kernel.FakeCUDAKernel.__call__
    if getattr(orig, "_cudacourse_gate", False):  # already gating (a checker inside one)
        yield
        return

    def call(self: Any, *args: Any) -> Any:
        __tracebackhide__ = True
        if (not self._device and sim_kernel._kernel_context is None
                and not _origin.package_origin(_origin.unwrap(self))):
            gate_or_fail(self, args, getattr(self, "__name__", "kernel"))
        return orig(self, *args)

    call._cudacourse_gate = True
    sim_kernel.FakeCUDAKernel.__call__ = call
    try:
        yield
    finally:
        sim_kernel.FakeCUDAKernel.__call__ = orig


def resources(kernel: Any, *args: Any) -> Resources | None:
    """Registers, shared and local memory per thread of ``kernel`` for these arguments,
    from a real sm_90 compile; None when the compiler is absent. Raises CompileRefused."""
    ok, why = status()
    if not ok:
        _warn_once(why)
        return None
    return _resources(kernel, args, warn=False)


def _resources(kernel: Any, args: tuple, warn: bool) -> Resources | None:
    specs = [type_spec(a) for a in args]
    if any(s is None for s in specs):
        return None
    result = compile_kernel(kernel, specs)
    if "skipped" in result:
        if warn:
            _warn_once(result["skipped"], getattr(kernel, "__name__", "kernel"))
        return None
    if not result["ok"]:
        source = _unit_source(kernel)
        reason, line = explain(result["error"], result.get("kind", ""), source)
        raise CompileRefused(reason, result["error"], line, source)
    r = result["resources"]
    return Resources(r["registers"], r["shared"], r["local"], r.get("spill_stores", 0),
                     r.get("spill_loads", 0), r.get("barriers", 0))


# --- the compiler's reason, in plain words -------------------------------------------------

# a Numba scalar type in a typing error's signature
_SCALAR_TYPE = r"(?:float|int|uint)\d+|bool|complex\d+"

_RULES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"must have void return type|return type must be void|"
                r"No conversion from [\w()\[\], ]+ to none", re.I),
     T("a kernel returns nothing: write the result into an output array instead of `return`ing "
       "it (only a @cuda.jit(device=True) function returns a value)")),
    (re.compile(r"built-in function sum>\) found for signature:\s*>>> sum\(list|"
                r"sum\(list\("),
     T("sum() of a list is not supported on the GPU: add the values with +, or in a loop")),
    (re.compile(r"Overload of function 'str'|unicode_type|UnicodeType|FormatValue|"
                r"format_string", re.I),
     T("strings (f-strings, str(), .format) do not exist on the GPU; print() accepts only "
       "numbers and constant strings")),
    (re.compile(r"reflected list|list\(\w+\)<iv=|Cannot type list|empty list", re.I),
     T("Python lists do not exist on the GPU: use arrays (cuda.local.array for a small scratch "
       "array) and loops")),
    (re.compile(r"NRT required but not enabled"),
     T("this needs memory allocated inside the kernel (a list, np.zeros, np.empty, a new "
       "array), which a GPU thread cannot do: use cuda.local.array or cuda.shared.array with a "
       "constant size, or pass an output array in")),
    (re.compile(r"Untyped global name '(\w+)': Cannot determine Numba type of <class "
                r"'function'>"),
     N_("the kernel calls the plain Python function {name}: a GPU can only call functions "
        "decorated with @cuda.jit(device=True)")),
    (re.compile(r"Untyped global name '(\w+)': Cannot determine Numba type of <class "
                r"'[\w.]*FakeCUDAKernel'>"),
     N_("the kernel calls {name}, a @cuda.jit kernel: a kernel cannot call another kernel; "
        "decorate the helper with @cuda.jit(device=True)")),
    (re.compile(r"Untyped global name '(\w+)'"),
     N_("the kernel uses {name}, which a GPU kernel cannot use (it can use numbers, arrays, "
        "math functions and other @cuda.jit functions)")),
    # typing errors of the grid calls and of tuples: the shapes mutants and learners hit,
    # in catalogue words (only identifiers quoted; Numba's English stays in the detail)
    (re.compile(r"argument can only be 1, 2, 3"),
     T("cuda.grid() and cuda.gridsize() take the number of the launch's dimensions: 1, 2 or 3")),
    (re.compile(r"failed to unpack|cannot unpack|too many values to unpack|"
                r"not enough values to unpack|wrong tuple length", re.I),
     T("the names on the left of = do not match the values on the right: cuda.grid(1) gives "
       "one index, cuda.grid(2) a pair (x, y), cuda.grid(3) three")),
    (re.compile(r">>> (\w+)\((?:[^()]*, )?UniTuple\("),
     N_("the operation {name} got a tuple where a number belongs: cuda.grid(2) and "
        "cuda.gridsize(2) give a pair (x, y); unpack it, or ask for cuda.grid(1)")),
    (re.compile(rf">>> (?:get|set)item\((?:{_SCALAR_TYPE}|array\(\w+, 0d, \w\)), "),
     T("the kernel indexes a number as if it were an array: a launch argument the kernel "
       "indexes must be a device array; check the order and the names of the arguments you "
       "pass")),
    (re.compile(r">>> setitem\(array\([^()]*\), [\w()\[\], ]*?, array\("),
     T("the kernel stores a whole array into one element: a value stored into an element "
       "must be a number; check the arguments you pass (a scalar parameter got an array?)")),
    (re.compile(r"Unsupported array index type float"),
     T("an array is indexed with a float, and an index must be an integer: divide with // "
       "rather than /, and index with a position (such as i), not with a value read from "
       "an array")),
    (re.compile(r"tuple index out of range"),
     T("an index past the end of a tuple: a.shape[k] exists only for the array's own axes "
       "(a one-dimensional array has only shape[0]; a two-dimensional one shape[0], its rows, "
       "and shape[1], its columns)")),
    (re.compile(r"No implementation of function Function\(<(?:built-in )?function (\w+)>\) "
                r"found for signature"),
     N_("no version of {name} on the GPU accepts the types of these values: check the types "
        "of the values on the line shown")),
    (re.compile(r"Use of unsupported opcode \(YIELD", re.I),
     T("generators (yield) do not exist on the GPU")),
]


# Refusals whose error singles out what the learner wrote: a cause of their own (CAUSES),
# decided here from the compiler's error and the line it points at, the same on both
# devices (the simulator's gate, a GPU's own compile, the replay's). Any other refusal
# stays ``does_not_compile``.
COMPILE_CAUSES = frozenset({"does_not_compile", "grid_dimensions", "missing_axis",
                            "float_index", "number_for_array", "array_for_number",
                            "tuple_for_number", "tuple_for_array",
                            # Numba's "Variable 'x' is not defined" (refusal_cause)
                            "used_before_assigned"})
# the course's tensor-core intrinsics, by the kind of each argument: a for an array (a
# shared tile, an input), n for a number (a row, a column)
_INTRINSIC_KINDS = {"ldmatrix": "ann", "cp_async": "annann"}


def _top_level_args(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch in "([" and 1 or (ch in ")]" and -1 or 0)
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def intrinsic_misfit(error: str) -> tuple[str, str, int] | None:
    """(cause, intrinsic, argument number from 1) when a tensor-core intrinsic got a number
    where its argument is an array (number_for_array), an array where it is a number
    (array_for_number) or a float where it is a row or a column (float_index); None
    otherwise."""
    hit = re.search(r">>> (\w+)\((.*)\)\s*$", strip_ansi(str(error)), re.M)
    if not hit or hit.group(1) not in _INTRINSIC_KINDS:
        return None
    want = _INTRINSIC_KINDS[hit.group(1)]
    got = _top_level_args(hit.group(2))
    if len(got) != len(want):
        return None
    for k, (w, g) in enumerate(zip(want, got), 1):
        is_array = g.startswith("array(")
        if w == "a" and not is_array:
            return "number_for_array", hit.group(1), k
        if w == "n" and is_array:
            return "array_for_number", hit.group(1), k
        if w == "n" and re.match(r"float\d+$", g):  # a row or column from `/`, not `//`
            return "float_index", hit.group(1), k
    return None


# an operation given a tuple (a pair, a fragment) as an argument: the operation's name
# (an argument before the tuple may hold parentheses of its own: ``Literal[int](2)``)
_TUPLE_ARG = re.compile(r">>> (\w+)\((?:(?:[^(),]|\([^()]*\))*, )*(?:Uni)?Tuple\(")


# arithmetic between a number and a whole array, which a kernel cannot do (it would allocate
# the result): the array is read where one of its elements, a number, belongs
_OPERAND = rf"(?:{_SCALAR_TYPE}|Literal\[\w+\]\([^()]*\))"
_ARITHMETIC = r"i?(?:add|sub|mul|truediv|floordiv|mod|pow)"
_ARRAY_ARITHMETIC = re.compile(
    rf">>> ({_ARITHMETIC})\((?:{_OPERAND}, array\(|array\([^()]*\), {_OPERAND}\))")


# a tuple converted to a number (a fragment's name where one of its values belongs, stored
# or passed as a float32): Numba's words for it
_TUPLE_CAST = re.compile(r"Cannot cast (?:Uni)?Tuple\([^()]*\) to (?:float|int|uint)\d+")


def _tuple_misuse(error: str) -> str:
    """tuple_for_array (a tuple indexed or stored into as if it were an array),
    tuple_for_number (a tuple given to an operation where one number belongs), else ''."""
    error = strip_ansi(str(error))
    if re.search(r">>> (?:get|set)item\((?:Uni)?Tuple\(", error):
        return "tuple_for_array"
    if _TUPLE_ARG.search(error) or _TUPLE_CAST.search(error):
        return "tuple_for_number"
    return ""
_GRID_CALL = re.compile(r"cuda\.(?:grid|gridsize)\s*\(")


def refusal_cause(error: str, line: Any = "", source: str = "") -> str:
    """The cause of a refusal: ``grid_dimensions`` (cuda.grid(n) / gridsize(n) with an n
    the code around it does not fit: n outside 1..3, a pair unpacked into one name or used
    as a number, one index unpacked into two names), ``missing_axis`` (``a.shape[k]`` past
    the array's axes), ``float_index`` (an array indexed with a float), else
    ``does_not_compile``. ``line``: the source line the error points at; ``source``: the
    kernel's (:func:`_unit_source`)."""
    error = strip_ansi(str(error))
    code = str(line)
    if re.search(r"argument can only be 1, 2, 3", error):
        return "grid_dimensions"
    if (re.search(r"failed to unpack|cannot unpack|too many values to unpack|"
                  r"not enough values to unpack|wrong tuple length", error, re.I) or
            re.search(r">>> \w+\((?:[^()]*, )?UniTuple\(", error)) and \
            (_GRID_CALL.search(code) or _grid_misfit(source)):
        return "grid_dimensions"
    if re.search(r"tuple index out of range", error) and re.search(r"\.shape\s*\[", code):
        return "missing_axis"
    if re.search(r"Unsupported array index type float", error):
        return "float_index"
    if re.search(r"Variable '\w+' is not defined", error):
        # Numba's bytecode analysis: a name read where no assignment reaches it (the words
        # are _RULES' used_before_assigned entry)
        return "used_before_assigned"
    if re.search(rf">>> (?:get|set)item\((?:{_SCALAR_TYPE}|array\(\w+, 0d, \w\)), ", error):
        return "number_for_array"
    if re.search(r">>> setitem\(array\([^()]*\), [\w()\[\], ]*?, array\(", error):
        return "array_for_number"
    if _ARRAY_ARITHMETIC.search(error):
        return "array_for_number"
    misfit = intrinsic_misfit(error)
    if misfit:
        return misfit[0]
    return _tuple_misuse(error) or "does_not_compile"


def _grid_misfit(source: str) -> bool:
    """Whether the kernel's source has a cuda.grid(k) / gridsize(k) whose k does not fit
    where it is used: a tuple of m names unpacked from it with m != k, or k >= 2 (a pair or
    a triple) bound to one name or used as a number (in range(), an arithmetic, a call)."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(re.sub(r"\A#line \d+\n", "", source or "")))
    except SyntaxError:
        return False
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    indexed = {n.value.id for n in ast.walk(tree)
               if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and
                node.func.attr in ("grid", "gridsize") and len(node.args) == 1 and
                isinstance(node.args[0], ast.Constant) and
                isinstance(node.args[0].value, int)):
            continue
        k = node.args[0].value
        up = parents.get(id(node))
        if isinstance(up, ast.Assign) and len(up.targets) == 1 and \
                isinstance(up.targets[0], ast.Tuple):
            if len(up.targets[0].elts) != k:
                return True
        elif isinstance(up, ast.Assign) and len(up.targets) == 1 and \
                isinstance(up.targets[0], ast.Name):
            if k >= 2 and up.targets[0].id not in indexed:  # pos = cuda.grid(2); pos[0]: fits
                return True
        elif k >= 2 and not isinstance(up, ast.Subscript):
            return True
    return False


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    """Numba's message without terminal colour codes (NUMBA_COLOR_SCHEME highlights parts
    of a TypingError; the rules below read plain text)."""
    return _ANSI.sub("", text).replace("\r\n", "\n")


# Numba's bytecode analysis on a name read before any assignment reaches it (issue 45,
# mutants: `j = j + t`, `m_new = max(m, m_new)`): the name, in catalogue words
_RULES.append((re.compile(r"Variable '(\w+)' is not defined"),
               N_("{name} is read before any value is assigned to it: on the line shown it "
                  "is used to compute itself, or before its first assignment")))


def explain(error: str, kind: str = "", source: str = "") -> tuple[str, str]:
    """(reason in plain words, the learner's source line it points at)."""
    error = strip_ansi(error)
    kind = strip_ansi(kind)
    line = _source_line(error)
    np_attr = re.search(r"Unknown attribute '(\w+)' of type Module\(<module 'numpy'", error)
    np_fn = re.search(r"Use of unsupported NumPy function '?numpy\.(\w+)'?", error)
    called = re.search(r"No implementation of function Function\(<(?:built-in )?function "
                       r"(\w+)", error)
    name = (np_attr or np_fn).group(1) if (np_attr or np_fn) else ""
    if not name and called and re.search(rf"\b(?:np|numpy)\.{called.group(1)}\s*\(",
                                         source + line):
        name = called.group(1)
    if name:
        if not line or f".{name}" not in line:
            hit = re.search(rf"^.*\b(?:np|numpy)\.{name}\b.*$", source, re.M)
            if hit:
                first = re.match(r"#line (\d+)\n", source)  # see _unit_source
                number = (int(first.group(1)) + source.count("\n", 0, hit.start()) - 1
                          if first else 0)
                line = (T("line {number}: {code}", number=number, code=hit.group(0).strip())
                        if number else hit.group(0).strip())
        if name in ("zeros", "empty", "ones", "array", "full", "zeros_like", "empty_like"):
            return (T("kernels cannot call numpy.{name}: a GPU thread cannot allocate arrays; "
                      "use cuda.local.array(size, float32) (per thread) or cuda.shared.array "
                      "(per block) with a constant size", name=name), line)
        return (T("kernels cannot call numpy.{name}: a GPU thread has no NumPy; compute it "
                  "with loops and arithmetic on array elements (math.* works)",
                  name=name), line)
    other = re.search(r"Unknown attribute '(\w+)' of type Module\(<module '([\w.]+)'", error)
    if other:
        return (T("kernels cannot use {group}.{group_2}: the GPU compiler does not support it",
                  group=other.group(2), group_2=other.group(1)), line)
    if kind == "ptxas":
        return (T("ptxas (the GPU assembler) refused the kernel: {error}",
                  error=error[-300:]), line)
    misfit = intrinsic_misfit(error)
    if misfit:
        cause, intrinsic, position = misfit
        if cause == "float_index":
            return (T("tc.{intrinsic} got a float as its argument {position}, where a whole "
                      "number belongs (a row or a column of the tile): compute it with // "
                      "where / gives a float", intrinsic=intrinsic, position=position), line)
        if cause == "number_for_array":
            return (T("tc.{intrinsic} got a number as its argument {position}, where an array "
                      "belongs (a shared tile or an input): check the order and the names of "
                      "its arguments", intrinsic=intrinsic, position=position), line)
        return (T("tc.{intrinsic} got an array as its argument {position}, where a number "
                  "belongs (a row or a column): check the order and the names of its "
                  "arguments", intrinsic=intrinsic, position=position), line)
    arith = _ARRAY_ARITHMETIC.search(error)
    if arith:
        return (T("the operation {name} got a whole array where one number belongs: a kernel "
                  "computes with one element at a time (an array indexed down to a number, "
                  "a[i] of a 1-d array, a[i, y, x] of a 3-d one); check the names and the "
                  "indices on the line shown", name=arith.group(1)), line)
    if _tuple_misuse(error) == "tuple_for_array":
        return (T("a tuple is indexed or stored into as if it were an array: a name that holds "
                  "a tuple (a fragment, a pair) where an array belongs; check the names on the "
                  "line shown"), line)
    if _TUPLE_CAST.search(error) and not _TUPLE_ARG.search(error):
        return (T("a tuple (several values) is used where one number belongs: a tuple's name "
                  "where one of its values belongs (a fragment's x[0], ...); check the names "
                  "on the line shown"), line)
    tuple_hit = _TUPLE_ARG.search(error)
    if tuple_hit and refusal_cause(error, line, source) != "grid_dimensions":
        # a tuple that is not a cuda.grid pair (a fragment, a shape, a pair of one's own):
        # the grid's advice would point the wrong way
        return (T("the operation {name} got a tuple (several values) where one number "
                  "belongs: a tuple used whole where one of its values belongs; check the "
                  "names on the line shown", name=tuple_hit.group(1)), line)
    for pat, words in _RULES:
        hit = pat.search(error)
        if hit:
            # a rule's words: a T(...) already, or a template naming the global it found
            return (words if isinstance(words, Text) else T(words, name=hit.group(1))), line
    if "TypingError" in kind or "Failed in cuda mode pipeline" in error:
        return T("the GPU compiler cannot type this code: {first_reason}",
                 first_reason=_first_reason(error)), line
    return T("the GPU compiler refused the kernel: {first_reason}",
             first_reason=_first_reason(error)), line


def _first_reason(error: str) -> str:
    for raw in error.splitlines():
        s = raw.strip()
        if not s or s.startswith(("Failed in", "During:", "File ", "^", "- Resolution",
                                  "No implementation of function")):
            continue
        return s[:240]
    return error.strip()[:240]


def _source_line(error: str) -> str:
    """'line 7: out[i] = np.dot(a, b)' from the first block of Numba's message that points
    into the learner's code (``File "...", line 7:``, source lines, then a ``^``)."""
    blocks = re.finditer(r'File "([^"]*)", line (\d+):\n((?:.*\n)*?)\s*\^', error)
    for m in blocks:
        if "site-packages" in m.group(1) or "/numba" in m.group(1):
            continue
        code = [ln.strip() for ln in m.group(3).splitlines()
                if ln.strip() and "<source elided>" not in ln]
        return T("line {group}: {code}", group=m.group(2),
                 code=code[-1]) if code else T("line {group}", group=m.group(2))
    return ""


def _unit_source(kernel: Any) -> str:
    """The kernel's source, after a first line ``#line N`` giving the file line it starts at."""
    import inspect

    fn = _origin.unwrap(kernel)
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        return ""
    return f"#line {first}\n" + "".join(lines)
