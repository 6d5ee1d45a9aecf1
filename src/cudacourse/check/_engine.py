"""The machinery every checker shares: own the launch, poison and guard the outputs,
translate failures into a diagnosis a learner can act on.

Contract for checker authors (check/<topic>.py), kept stable:

* ``fail(cause, message, context=None, hint="")`` (from ``_failure``, re-exported here; the
  one way every checker fails) raises :class:`CheckFailure`, an ``AssertionError`` whose fields are machine-readable:
  ``cause`` is a short stable id from
  :data:`CAUSES` (tests and other checkers branch on it, never on the message text), ``hint``
  is the fix in one sentence, ``context`` a dict of the case (sizes, block, indices).
  ``str(failure)`` is the diagnosis first, then the hint, then the case.
* ``at(name, index)`` and ``fmt(value)`` format values the way a learner writes them:
  ``c[0, 0] = -13.8``, never ``np.float32(-13.8)``; ``plain(text)`` turns simulator
  internals into words (``ctaid=[7, 0, 0]`` -> ``block (7, 0, 0)``).
* ``require_kernel(obj, name, nparams)`` / ``require_function`` / ``require_device_array``
  are the one detector (see :mod:`._origin`): a ``@cuda.jit`` kernel, not a device function,
  not the untouched stub, not a plain Python function, not the course's own code.
* ``launch(kernel, grid, block, *args, name=...)`` validates the launch against GPU limits,
  and in the simulator first compiles the kernel for a real sm_90 GPU with the argument types
  of ``args`` (:mod:`._compile`): a kernel a GPU would refuse fails with cause
  ``"does_not_compile"`` and the compiler's reason in plain words. Crashes become one
  diagnosis (never one traceback per simulated thread).
* ``passes(name, *facts, hidden=False)`` is the one-line success message a checker returns
  (``"vector_add passes: 3 sizes, a spare block; grading reruns it on hidden cases (other
  sizes and seeds)"``).
* Checks that only the simulator can make (read counts, poisoned shared memory, warp-level
  undefined behaviour, the stream trace) go in a function decorated with
  ``_replay.sim_part``: in the simulator it runs in-process; on a GPU it re-runs, from the
  kernel's source, in a simulator subprocess and raises the same ``CheckFailure`` there.

Trust: every NumPy function used here is captured when this module is first imported
(``import cudacourse`` is the first cell of every notebook, before any learner code), so an
answer cell that rebinds ``np.allclose`` or ``np.testing.assert_allclose`` cannot make a
wrong kernel pass. Module-level values here never change after import (the grading audit
compares them); run-time state lives in the ``_STATE`` dict.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, NoReturn, Sequence

import numpy as _np

from ..runtime import device as _device
from ..i18n import T
from . import _buffers, _origin
from ..i18n import T

# --- trusted references, captured before any learner cell runs --------------------------
_asarray = _np.asarray
_array = _np.array
_empty = _np.empty
_full = _np.full
_isnan = _np.isnan
_isclose = _np.isclose
_abs = _np.abs
_flatnonzero = _np.flatnonzero
_array_equal = _np.array_equal
_float32 = _np.float32
_float64 = _np.float64
_default_rng = _np.random.default_rng
_ndarray = _np.ndarray
_count_nonzero = _np.count_nonzero
_prod = _np.prod
_unravel_index = _np.unravel_index

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
GUARD = 2048  # sentinel elements on each side: more than a spare block's threads can reach
SENTINEL = -7.75e30  # output guard zones: a value no correct kernel writes there
INPUT_SENTINEL = 3.25e30  # input guard zones: what an out-of-bounds read returns on a GPU


from ._failure import (CAUSES, WIDTH, CheckFailure, Passed, _jsonable, at, fail,  # noqa: F401
                       fmt, passes, plain)


def rng(seed: int | None = None) -> _np.random.Generator:
    """Fresh random inputs on every call, unless a seed is given to reproduce a failure."""
    return _default_rng(seed if seed is not None else int.from_bytes(os.urandom(8), "little"))


def random_array(gen: _np.random.Generator, shape: int | Sequence[int],
                 dtype: Any = _float32, low: float = -4.0, high: float = 4.0) -> _np.ndarray:
    """Random values away from 0 and 1, so that a kernel ignoring an input is visible."""
    x = gen.uniform(low, high, size=shape)
    x[_abs(x) < 0.25] += 0.75  # no near-zeros: 0 * anything hides a bug
    return x.astype(dtype)


# --- what was handed in -----------------------------------------------------------------

def _require(sub: "_origin.Subject", name: str, want: str, nparams: int | None) -> None:
    """Shared tail of the require_* detectors: the stub, the course's own code, the arity."""
    __tracebackhide__ = True
    if sub.package:
        fail("package_kernel", T("{name} is the course's own code ({package}), not yours: write your own {want}.",
               name=name, package=sub.package,
               want=want), hint="", context=None)
    if sub.stub == "stub":
        fail("stub", T("{name} is not written yet: replace `raise NotImplementedError()` with your "
               "code.", name=name))
    if sub.stub == "leftover":
        fail("stub", T("{name} still contains `raise NotImplementedError()`: delete that line now that "
               "your code is there.", name=name))
    if sub.kind in ("kernel", "device_function"):
        helpers = _origin.package_helpers(sub.py_func)
        if helpers:
            fail("package_kernel", T("{name} calls the course's own {code} {helpers}: write that part yourself.",
                   name=name, code='code' if len(helpers) > 1 else 'function',
                   helpers=', '.join(helpers)))
    if nparams is not None and sub.nparams is not None and sub.nparams != nparams:
        fail("wrong_signature", T("{name} must take {nparams} parameters, yours takes {nparams_2}.", name=name,
               nparams=nparams, nparams_2=sub.nparams))


def _require_jit(obj: Any, name: str, nparams: int | None, *, kind: str, want: str,
                 decorator: str, a_want: str, other: str, other_words: str) -> None:
    """Shared body of require_kernel and require_device_function: ``obj`` must be of
    ``kind`` (``want`` in words, made with ``decorator``); a plain function, the ``other``
    jit kind (said as ``other_words``) or anything else fails, naming the fix."""
    __tracebackhide__ = True
    sub = _origin.examine(obj)
    if sub.kind == other:
        fail("not_a_kernel", other_words)
    if sub.kind == "function":
        if sub.package:
            _require(sub, name, want, None)
        fail("not_a_kernel", T("{name} must be {a_want}, but got the plain Python function {name_2!r}: add "
               "{decorator} above its def.", name=name, a_want=a_want,
               name_2=getattr(obj, '__name__', obj), decorator=decorator))
    if sub.kind != kind:
        fail("not_a_kernel", T("{name} must be a {decorator} {split}, got {describe}.", name=name,
               decorator=decorator, split=want.split()[-1], describe=_describe(obj)))
    _require(sub, name, want, nparams)


def require_kernel(kernel: Any, name: str, nparams: int | None = None) -> None:
    """The submission must be the learner's own ``@cuda.jit`` kernel, written (not the stub),
    taking ``nparams`` parameters: not a host function doing the work, not a device function,
    not the course's own kernel."""
    __tracebackhide__ = True
    _require_jit(kernel, name, nparams, kind="kernel", want="kernel", decorator="@cuda.jit",
                 a_want=T("a GPU kernel decorated with @cuda.jit"), other="device_function",
                 other_words=T("{name} is a device function (@cuda.jit(device=True)); write a "
                               "kernel instead: @cuda.jit alone.", name=name))


def require_device_function(fn: Any, name: str, nparams: int | None = None) -> None:
    """A ``@cuda.jit(device=True)`` function of the learner's own."""
    __tracebackhide__ = True
    _require_jit(fn, name, nparams, kind="device_function", want=T("device function"),
                 decorator="@cuda.jit(device=True)", a_want=T("a device function"),
                 other="kernel",
                 other_words=T("{name} must be a device function: decorate it with "
                               "@cuda.jit(device=True), not @cuda.jit (a kernel cannot return "
                               "a value).", name=name))


def require_function(fn: Any, name: str, nparams: int | None = None) -> None:
    """A plain Python (host) function of the learner's own, e.g. one that launches kernels."""
    __tracebackhide__ = True
    sub = _origin.examine(fn)
    if sub.kind in ("kernel", "device_function"):
        fail("not_a_function", T("{name} must be a plain Python function that runs on the host (it launches "
               "kernels and moves data), not a @cuda.jit kernel: remove the decorator, or wrap "
               "your launch in a def.", name=name))
    if sub.kind != "function":
        fail("not_a_function", T("{name} must be a Python function, got {describe}.", name=name,
               describe=_describe(fn)))
    _require(sub, name, "function", nparams)


def require_device_array(arr: Any, name: str) -> None:
    """A device array where a kernel's result must stay on the GPU."""
    __tracebackhide__ = True
    if _origin.is_device_array(arr):
        return
    if isinstance(arr, _ndarray):
        fail("not_device_array", T("{name} is a NumPy array in host memory; it must stay on the device: return the "
               "device array (cuda.to_device / cuda.device_array), not copy_to_host().",
               name=name))
    fail("not_device_array", T("{name} must be a device array, got {describe}.", name=name,
           describe=_describe(arr)))


def _describe(obj: Any) -> str:
    if obj is None:
        return T("None (did the cell that defines it run, and does it return something?)")
    name = getattr(obj, "__name__", None)
    return T("the {type_obj_name} {name!r}", type_obj_name=type(obj).__name__,
             name=name) if name else T("a {type_obj_name}", type_obj_name=type(obj).__name__)


def _is_cuda_kernel(obj: Any) -> bool:
    """A Numba CUDA dispatcher (GPU) or the simulator's stand-in for one."""
    return _origin.is_dispatcher(obj)


def validate_launch(grid: int | tuple, block: int | tuple) -> tuple[tuple, tuple]:
    """Refuse launch shapes a real GPU refuses (the simulator would accept them)."""
    g = (grid,) if isinstance(grid, int) else tuple(grid)
    b = (block,) if isinstance(block, int) else tuple(block)
    __tracebackhide__ = True
    if not (1 <= len(g) <= 3 and 1 <= len(b) <= 3):
        fail("bad_launch", T("grid {grid} and block {block} must have 1 to 3 dimensions each.", grid=grid,
               block=block))
    if any((not isinstance(v, (int, _np.integer))) or v < 1 for v in g + b):
        fail("bad_launch", T("grid {grid} and block {block} must be positive integers.", grid=grid,
               block=block))
    threads = int(_prod(b))
    if threads > MAX_THREADS_PER_BLOCK:
        fail("bad_launch", T("block {block} has {threads} threads; a GPU allows at most "
               "{max_threads_per_block} per block (the simulator would not tell you).",
               block=block, threads=threads, max_threads_per_block=MAX_THREADS_PER_BLOCK))
    for v, lim, what in [(v, l, "block") for v, l in zip(b, MAX_BLOCK_DIM)] + \
                        [(v, l, "grid") for v, l in zip(g, MAX_GRID_DIM)]:
        if v > lim:
            fail("bad_launch", T("{what} dimension {v} exceeds the GPU limit of {lim}.", what=what, v=v,
                   lim=lim))
    return g, b


MAX_SHARED_PER_BLOCK = 48 * 1024  # bytes a launch may use without an opt-in (sm_90 too)


def validate_shared(resources: Any, dynamic: int = 0, name: str = "kernel") -> None:
    """Refuse a launch whose static plus dynamic shared memory exceeds what a block may use
    (48 KiB: more needs cudaFuncSetAttribute, which Numba does not do); ``resources`` is
    ``compile_gate``'s answer (None: static size unknown, only ``dynamic`` is checked)."""
    __tracebackhide__ = True
    static = int(getattr(resources, "shared", 0) or 0)
    total = static + int(dynamic or 0)
    if total > MAX_SHARED_PER_BLOCK:
        parts = (T(" ({static} bytes static + {dynamic} dynamic)", static=static,
                   dynamic=int(dynamic)) if static and dynamic
                 else "")
        fail("bad_launch", T("{name} asks for {total} bytes of shared memory per block{parts}; a GPU "
               "launches a block with at most {max_shared_per_block} bytes (48 KiB), and "
               "refuses this launch (the simulator would not tell you). Use smaller tiles, or "
               "fewer shared arrays.", name=name, total=total, parts=parts,
               max_shared_per_block=MAX_SHARED_PER_BLOCK))


# --- guarded, poisoned outputs ------------------------------------------------------------

def fitted(sentinel: float, dtype: Any) -> Any:
    """``sentinel`` as ``dtype`` holds it: a float16 cannot hold 3.25e30, so a fraction of its
    largest value instead (still no value a correct kernel writes or reads)."""
    top = float(_np.finfo(dtype).max)
    if abs(sentinel) > top:
        sentinel = (-0.75 if sentinel < 0 else 0.625) * top
    return _np.dtype(dtype).type(sentinel)


@dataclass
class Guarded:
    """A device array of ``shape`` sitting between two guard zones of sentinels.

    ``view`` is what the kernel gets. A write past either end lands in a guard zone (on a
    GPU) instead of corrupting other memory, and ``check_guards`` reports it. Inputs and
    outputs use different sentinels, so that a kernel copying an input's guard zone into an
    output's (reading and writing past the end) is still seen.
    """

    buffer: Any
    view: Any
    shape: tuple
    name: str
    sentinel: Any = SENTINEL

    @classmethod
    def make(cls, shape: int | Sequence[int], dtype: Any, name: str,
             fill: _np.ndarray | None = None, guard: int = GUARD,
             output: bool = False) -> "Guarded":
        """``fill``: the values (an input, or an output that starts filled, ``output=True``:
        zeros for an accumulator); None: an output poisoned (NaN, or -999999 for integers)."""
        from numba import cuda

        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        n = int(_prod(shape))
        is_float = _np.dtype(dtype).kind == "f"
        if fill is None or output:
            sentinel = SENTINEL if is_float else -1234567
        else:
            sentinel = INPUT_SENTINEL if is_float else -7654321
        if is_float:
            sentinel = fitted(sentinel, dtype)
        host = _full(n + 2 * guard, sentinel, dtype=dtype)
        if fill is None:  # poison: a never-written element stays NaN (or a marker int)
            host[guard:guard + n] = _np.nan if is_float else -999999
        else:
            host[guard:guard + n] = _asarray(fill, dtype=dtype).ravel()
        buf = cuda.to_device(host)
        view = buf[guard:guard + n]
        if len(shape) > 1:
            view = view.reshape(shape)
        return cls(buf, view, shape, name, host[0])

    def result(self) -> _np.ndarray:
        return self.view.copy_to_host().reshape(self.shape)

    def check_guards(self, hint: str = T("missing bounds guard (if i < n)?")) -> None:
        host = self.buffer.copy_to_host()
        n = int(_prod(self.shape))
        guard = (host.size - n) // 2
        sentinel = _asarray(self.sentinel, host.dtype)
        before = _flatnonzero(host[:guard] != sentinel)
        after = _flatnonzero(host[guard + n:] != sentinel)
        if after.size:
            fail("out_of_bounds_write", T("wrote past the end of {name} (size {n}) at index {n_plus_after}: {hint}",
                   name=self.name, n=n, n_plus_after=n + int(after[0]),
                   hint=hint), index=n + int(after[0]))
        if before.size:
            fail("out_of_bounds_write", T("wrote before the start of {name} at index {before_minus_guard}: a negative "
                   "index? check how you compute it.", name=self.name,
                   before_minus_guard=int(before[-1]) - guard), index=int(before[-1]) - guard)


def to_device_guarded(host: _np.ndarray, name: str) -> Guarded:
    """An input on the device with guard zones, so an out-of-bounds read stays harmless."""
    return Guarded.make(host.shape, host.dtype, name, fill=host)


# --- launching ------------------------------------------------------------------------------

from ._compile import COMPILE_HINT  # noqa: E402,F401 - the engine's name for it, as before
_OOB = re.compile(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)")


def compile_gate(kernel: Any, args: Sequence[Any], name: str = "kernel") -> Any:
    """In the simulator, compile ``kernel`` for sm_90 with the types of ``args`` and refuse
    what a GPU would refuse; returns its ``_compile.Resources`` (or None: GPU mode, compiler
    absent, cached refusal already raised). ``launch`` calls this; call it directly only for
    kernels a checker launches some other way."""
    __tracebackhide__ = True
    from . import _compile

    return _compile.gate_or_fail(kernel, args, name)


class _ThreadErrors:
    """Collect exceptions that escape simulator threads (the simulator cannot re-raise some
    kinds, and then prints one traceback per thread): keep the first, count the rest."""

    def __init__(self) -> None:
        self.first: BaseException | None = None
        self.thread = ""
        self.count = 0
        self._old = None

    def __enter__(self) -> "_ThreadErrors":
        self._old = threading.excepthook

        def hook(args: Any) -> None:
            self.count += 1
            if self.first is None:
                self.first = args.exc_value
                t = args.thread
                tid, bid = getattr(t, "threadIdx", None), getattr(t, "blockIdx", None)
                if tid is not None and bid is not None:
                    self.thread = (T("thread ({tid_x}, {tid_y}, {tid_z}) of block ({bid_x}, "
                                     "{bid_y}, {bid_z})", tid_x=tid.x, tid_y=tid.y, tid_z=tid.z,
                                     bid_x=bid.x, bid_y=bid.y, bid_z=bid.z))
        threading.excepthook = hook
        return self

    def __exit__(self, *exc: Any) -> None:
        threading.excepthook = self._old


def launch(kernel: Any, grid: Any, block: Any, *args: Any, name: str = "kernel",
           shared: int = 0, stream: Any = 0) -> None:
    """Launch and wait, turning crashes into diagnoses.

    In the simulator the kernel is first compiled for sm_90 (``compile_gate``).
    """
    __tracebackhide__ = True
    from numba import cuda

    g, _ = validate_launch(grid, block)
    validate_shared(compile_gate(kernel, args, name), shared, name)
    ctx = {"grid": grid, "block": block}
    with _ThreadErrors() as stray:
        try:
            if shared or stream:
                kernel[grid, block, stream, shared](*args)
            else:
                kernel[grid, block](*args)
            cuda.synchronize()
        except CheckFailure as exc:
            where = getattr(exc, "where", None)
            if where:  # a launch's first run (``_preflight``) went outside: said as ours
                try:
                    outside(name, ctx, where[0], len(g), *where[1:4], tile=where[4])
                except CheckFailure as said:
                    exc.reword(said)
            raise
        except IndexError as exc:  # the simulator checks every index; a GPU would not
            m = _OOB.search(str(exc))
            outside(name, ctx, plain(str(exc).split(":")[0]), len(g),
                    *((int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else ()),
                    tile=_shared_index(exc, m))
        except Exception as exc:  # noqa: BLE001 - anything else the kernel raised or caused
            _launch_error(exc, name, {**ctx, "kernel": kernel})
    if stray.first is not None:
        _launch_error(stray.first, name, {**ctx, "kernel": kernel}, stray.thread, stray.count)


def launch_dims(v: Any) -> Any:
    """A launch dimension as a checker writes it: (4, 1, 1) -> 4, (2, 3, 1) -> (2, 3)."""
    t = tuple(int(x) for x in v) if isinstance(v, (tuple, list)) else (int(v),)
    while len(t) > 1 and t[-1] == 1:
        t = t[:-1]
    return t[0] if len(t) == 1 else t


def outside(name: str, ctx: dict, who: Any, grid_ndim: int, index: int | None = None,
            axis: int = 0, size: int = 0, tile: tuple | None = None) -> NoReturn:
    """The verdict on an index outside an array, the one wording for it: the simulator's
    refusal (``launch``) and a GPU launch's instrumented first run (``_preflight``) both
    raise it. ``who``: the thread, in words; ``tile``: (array, line, declaring line, shape)
    when the array is a shared (or local) one the kernel declares."""
    __tracebackhide__ = True
    if index is None:
        fail("out_of_bounds_read", T("{name} indexed outside an array{where}, in {who}.",
                                     name=name, where="", who=who),
             hint=T("missing bounds guard (if i < n)?"), context=ctx)
    if index < 0:  # no bounds guard is missing: the index itself is computed wrong
        fail("out_of_bounds_read", T("{name} indexed an array with a negative index ({index} "
                                     "on its axis {axis}, of size {size}), in {who}.",
                                     name=name, index=index, axis=axis, size=size, who=who),
             hint=T("Numba wraps a negative index around to the end of the axis, as Python "
                    "does, so the kernel silently uses another element (CUDA C would touch "
                    "memory before the array): check how the index is computed (a - 1 at "
                    "the first thread?)"), context=ctx, index=index, size=size)
    if tile is not None:  # a shared array: its declared shape is the evidence
        fail("out_of_bounds_read", T("{name} indexed its shared array {array} outside the shape it declares "
               "(index {index} on its axis {axis}, of size {size}) at line {line}, in "
               "{who}: {array} is declared at line {decl} with shape {shape}. A shared "
               "array has the shape the kernel declares, whatever the input's size, so "
               "a bounds guard on the input does not help: check the declared shape "
               "(rows first, then columns) against how this index is computed",
               name=name, array=tile[0], index=index, axis=axis,
               size=size, line=tile[1], who=who, decl=tile[2],
               shape=fmt(tile[3])), context=ctx, index=index, size=size)
    if grid_ndim > 1 and index >= size >= 0:
        # a 2-D launch: the guard may be there, on the wrong axis (x < ny)
        fail("out_of_bounds_read", T("{name} indexed outside an array (index {index} on its axis {axis}, of "
               "size {size}), in {who}.", name=name, index=index,
               axis=axis, size=size, who=who), context=ctx, index=index, size=size, hint=T("a missing bounds guard, or one that compares an index with the "
                    "other axis' size? Guard each index with its own axis: y (a row) "
                    "with the number of rows, x (a column) with the number of "
                    "columns"))
    fail("out_of_bounds_read", T("{name} indexed outside an array{where}, in {who}.", name=name,
                                 where=T(" (index {group} on an axis of size {group_2})",
                                         group=index, group_2=size),
           who=who), hint=T("missing bounds guard (if i < n)?"), context=ctx)


def _shared_index(exc: BaseException, m: Any) -> tuple | None:
    """(array, line, declaring line, shape) when the index the simulator refused was into a
    shared (or local) array of the kernel: the line that raised indexes a name the kernel
    declares with ``cuda.shared.array(shape, ...)`` whose shape has that size on that axis."""
    import inspect
    import linecache

    if m is None:
        return None
    tb, frame = exc.__traceback__, None
    while tb is not None:  # the innermost frame of the learner's code
        fn = tb.tb_frame.f_code.co_filename
        if "numba" not in fn and "cudacourse" not in fn:
            frame = tb.tb_frame
        tb = tb.tb_next
    if frame is None:
        return None
    line = frame.f_lineno
    text = linecache.getline(frame.f_code.co_filename, line)
    try:
        lines, start = inspect.getsourcelines(frame.f_code)
    except (OSError, TypeError):
        return None
    axis, size = int(m.group(2)), int(m.group(3))
    for name in dict.fromkeys(re.findall(r"([A-Za-z_]\w*)\s*\[", text)):
        for k, src in enumerate(lines):
            d = re.match(r"\s*" + re.escape(name) +
                         r"\s*=\s*cuda\.(?:shared|local)\.array\(\s*(.+?)\s*,\s*[\w.]+\s*\)",
                         src)
            if not d:
                continue
            try:  # the shape as the kernel compiled it (a constant or a module global)
                shape = eval(d.group(1), dict(frame.f_globals))  # noqa: S307 - the kernel's own
            except Exception:  # noqa: BLE001 - not a shape we can read: no claim
                continue
            shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
            if axis < len(shape) and int(shape[axis]) == size:
                return (name, line, start + k, tuple(int(x) for x in shape))
    return None


def _is_compile_error(exc: BaseException, text: str) -> bool:
    from . import _compile

    text = _compile.strip_ansi(text)
    if "TypingError" in text or "LoweringError" in text or "must have void return type" in text:
        return True
    return not _device.is_simulator() and _compile.is_compile_error(exc)


def _launch_error(exc: BaseException, name: str, ctx: dict, thread: str = "",
                  count: int = 1) -> None:
    __tracebackhide__ = True
    from . import _compile

    text = plain(_compile.strip_ansi(f"{type(exc).__name__}: {exc}"))
    if "ILLEGAL_ADDRESS" in text or "illegal address" in text.lower():
        fail("illegal_address", T("{name} accessed memory it does not own (illegal address): an index far out of "
               "bounds. The GPU context is now unusable: restart the kernel.", name=name), context={k: v for k, v in ctx.items() if k != "kernel"})
    if _is_compile_error(exc, text):  # on a GPU: the real compile, at the first launch
        source = _compile._unit_source(ctx.get("kernel"))
        reason, line = _compile.explain(str(exc), type(exc).__name__, source)
        where = T(" ({line})", line=line) if line else ""
        fail(_compile.refusal_cause(str(exc), line, source), T("{name} would not compile for a GPU{where}: {reason}.", name=name, where=where,
               reason=reason))
    who = T(" in {thread}", thread=thread) if thread else ""
    ctx = {k: v for k, v in ctx.items() if k != "kernel"}
    more = T(" (and in {count_minus_1} other threads)",
             count_minus_1=count - 1) if count > 1 else ""
    first_line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if "ZeroDivisionError" in first_line:  # the simulator's exception names the mistake
        fail("division_by_zero", T("{name} divided by zero (an integer division or a modulo "
                                   "by 0){who}{more}. On a GPU that gives garbage, not an "
                                   "error; check what the divisor is for each thread (is it "
                                   "0 for thread 0?).", name=name, who=who, more=more),
             context=ctx)
    fail("kernel_raised", T("{name} raised `{first_line}`{who}{more}.", name=name, first_line=first_line, who=who,
           more=more), hint=T("read the line of your kernel that does this operation; a GPU would not raise "
                "but give garbage"), context=ctx)


# --- comparing against the NumPy reference ---------------------------------------------------

def compare(got: _np.ndarray, want: _np.ndarray, *, name: str, formula: str = "",
            block: int | None = None, rtol: float = 1e-5, atol: float = 1e-5,
            alternatives: dict[str, _np.ndarray] | None = None,
            context: str | dict = "", tile: tuple[int, int] | None = None,
            factors: dict[str, float] | None = None, inputs: dict[str, Any] | None = None,
            computed: bool = False) -> None:
    """Raise a diagnosis unless ``got`` matches ``want``.

    Poisoned (NaN) outputs mean "never written"; a match only over the first block means
    "only the first block handled"; a one-element shift means "off by one"; a match with an
    alternative formula names the arithmetic actually done. Then the named families of
    ``_diagnose`` (NaN/inf with the first element, off by one per axis, swapped axes, a
    constant factor), and a fallback that says where the wrong cells are and which
    families it ruled out. ``context``: the case, as a dict (it joins the failure's
    ``context`` field) or as text (appended to the message). ``tile``: (rows, columns) of
    the exercise's tile, to name tile regions; ``factors``: named scale factors of the
    formula ({"alpha": 0.2}), to tell one applied twice or missing; ``inputs``: arrays of
    the output's shape, shown at the first non-finite element; ``computed``: every element
    was written (a device function's return values), so a NaN was computed, not left.
    """
    __tracebackhide__ = True
    more = dict(tile=tile, factors=factors, inputs=inputs, computed=computed)
    if not isinstance(context, dict):
        _compare(got, want, name, formula, block, rtol, atol, alternatives, context, **more)
        return
    try:
        _compare(got, want, name, formula, block, rtol, atol, alternatives, "", **more)
    except CheckFailure as exc:
        raise CheckFailure(exc.text_message if exc.text_message is not None else exc.message,
                           cause=exc.cause, hint=exc.hint,
                           context={**context, **exc.context}) from None


def _compare(got: Any, want: Any, name: str, formula: str, block: int | None, rtol: float,
             atol: float, alternatives: dict | None, context: str, *, tile: Any = None,
             factors: Any = None, inputs: Any = None, computed: bool = False) -> None:
    __tracebackhide__ = True
    from . import _diagnose as D

    got = _asarray(got)
    want = _asarray(want)
    ctx = T(" [{context}]", context=context) if context else ""
    if got.shape != want.shape:
        fail("wrong_shape", T("{name} has shape {shape}, expected {shape_2}{ctx}.", name=name,
               shape=fmt(got.shape), shape_2=fmt(want.shape), ctx=ctx))
    g = got.ravel()
    w = want.ravel()
    n = g.size
    if g.dtype.kind == "f":
        unwritten = _isnan(g) & ~_isnan(w)
    else:
        unwritten = g == -999999
    ok = _isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return
    bad = _flatnonzero(~ok)
    first = int(bad[0])
    idx = _unravel_index(first, want.shape) if want.ndim > 1 else first
    if computed:  # nothing can be unwritten: a NaN was computed (named below)
        unwritten = unwritten & False
    if want.ndim == 2 and not unwritten.any():
        D.shifted(got, want, name, rtol, atol, ctx)
        D.shifted_diagonally(got, want, name, rtol, atol, ctx)
    written = ~unwritten
    for shift, hint in ((1, "i + 1"), (-1, "i - 1")):
        if n > 2 and written.sum() > 2:
            gs, ws = (g[:-1], w[1:]) if shift == 1 else (g[1:], w[:-1])
            m = (written[:-1] if shift == 1 else written[1:])
            if _isclose(gs[m], ws[m], rtol=rtol, atol=atol).mean() > 0.9:
                fail("off_by_one", T("{name}[i] holds the value expected at {hint}: off by one in your "
                       "index?{ctx}", name=name, hint=hint, ctx=ctx))
    if unwritten.any():
        nw = _flatnonzero(unwritten)
        if block and nw[0] >= block and ok[:block].all() and unwritten[block:].all():
            fail("only_first_block", T("{name}[{block}:] was never written, only the first block of {block} "
                   "threads did its work: does your index use cuda.blockIdx.x * "
                   "cuda.blockDim.x (or cuda.grid(1))?{ctx}", name=name, block=block,
                   ctx=ctx))
        if want.ndim == 2:
            _wrong_axis_guard(unwritten.reshape(want.shape), name, ctx)
        if unwritten[int(nw[0]):].all() and nw[0] > 0:
            fail("unwritten", T("{name}[{nw}:] was never written (the last {n_minus_nw} of {n} elements): "
                   "does your launch or loop cover every element?{ctx}", name=name,
                   nw=int(nw[0]), n_minus_nw=n - int(nw[0]), n=n, ctx=ctx), first=int(nw[0]))
        fail("unwritten", T("{size} of {n} elements of {name} were never written, the first at index {nw}: "
               "does every element get a thread?{ctx}", size=int(nw.size), n=n, name=name,
               nw=int(nw[0]), ctx=ctx), first=int(nw[0]))
    for label, alt in (alternatives or {}).items():
        if _isclose(g, _asarray(alt).ravel(), rtol=rtol, atol=atol).all():
            fail("wrong_formula", T("{name} holds {label}, but it should hold {value}: check the "
                   "arithmetic.{ctx}", name=name, label=label,
                   value=formula or T('the reference'),
                   ctx=ctx), formula=label)
    D.nonfinite(got, want, name, inputs, computed, ctx)
    D.swapped(got, want, name, rtol, atol, ctx)
    D.factor(got, want, name, rtol, atol, factors, ctx)
    D.offset(got, want, name, rtol, atol, ctx)
    # a T(...) formula stays a Text, so it is shown in the learner's language (issue 45)
    expect = T(" ({formula})", formula=formula) if formula else ""
    where = D.region(~ok.reshape(want.shape), want.shape, tile)
    fail("wrong_values", T("{at} = {value}, expected {expected}{formula}; {k} of {n} elements are wrong"
           "{where}: check the arithmetic (ruled out: {families}).{ctx}", at=at(name, idx),
           value=fmt(g[first]), expected=fmt(w[first]), formula=expect, k=int(bad.size), n=n,
           where=T(", all {where}", where=where) if where is not None else "",
           families=D.ruled_out(want.ndim, bool(alternatives)), ctx=ctx), index=_jsonable(idx), wrong=int(bad.size))


def _wrong_axis_guard(unwritten: Any, name: str, ctx: str) -> None:
    """2-D: exactly the columns from ny on (or the rows from nx on) never written: a guard
    that compares x with the number of rows (y with the number of columns)."""
    __tracebackhide__ = True
    ny, nx = unwritten.shape
    if ny == nx:
        return
    cols = _np.zeros(unwritten.shape, dtype=bool)
    rows = _np.zeros(unwritten.shape, dtype=bool)
    if ny < nx:
        cols[:, ny:] = True
    else:
        rows[nx:, :] = True
    for mask, words in ((cols, T("columns {a} to {b}", a=ny, b=nx - 1)),
                        (rows, T("rows {a} to {b}", a=nx, b=ny - 1))):
        if mask.any() and _array_equal(unwritten, mask):
            fail("guard_wrong_axis", T("{name}: {which} were never written, exactly the cells past the other "
                   "axis' size: the bounds guard compares an index with the wrong size. "
                   "Guard x (a column) with the number of columns and y (a row) with the "
                   "number of rows: if y < {name}.shape[0] and x < {name}.shape[1]{ctx}",
                   name=name, which=words, ctx=ctx))


# --- counting global-memory reads in the simulator --------------------------------------------

class _Counter:
    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()


def counting_array(host: _np.ndarray) -> tuple[Any, _Counter]:
    """A simulator device array that counts element reads made by kernels.

    Used to check a technique, not only a result: a shared-memory kernel reads each global
    element a few times, a naive one many times. Reads are counted by buffer
    (:mod:`._buffers`): through the array and through every view a kernel makes of it
    (``a.T``, a slice, a row). Simulator only.
    """
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    counter = _Counter()

    def report(buf: Any, slots: list, write: bool) -> None:
        if not write:
            with counter.lock:
                counter.n += len(slots)

    base = _array(host)
    return FakeCUDAArray(_buffers.probe(base, _buffers.Buffer(base, "counted", report))), \
        counter


def simulator() -> bool:
    return _device.is_simulator()


def sizes(sim: Iterable[int], gpu: Iterable[int]) -> list[int]:
    return list(_device.pick(list(sim), list(gpu)))


Check = Callable[..., None]
