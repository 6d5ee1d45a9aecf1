"""The machinery every checker shares: own the launch, poison and guard the outputs,
translate failures into a diagnosis a learner can act on.

Trust: every NumPy function used here is captured when this module is first imported
(``import cudacourse`` is the first cell of every notebook, before any learner code), so an
answer cell that rebinds ``np.allclose`` or ``np.testing.assert_allclose`` cannot make a
wrong kernel pass.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as _np

from .. import device as _device

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


class CheckFailure(AssertionError):
    """A learner kernel gave a wrong answer; the message says what and the likely cause."""


def fail(msg: str) -> None:
    raise CheckFailure(msg)


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

def require_kernel(kernel: Any, name: str, nparams: int | None = None) -> None:
    """The submission must be a ``@cuda.jit`` kernel, not a host function doing the work."""
    if not _is_cuda_kernel(kernel):
        if callable(kernel):
            fail(f"{name} must be a GPU kernel decorated with @cuda.jit, but got the plain "
                 f"{type(kernel).__name__} {getattr(kernel, '__name__', kernel)!r}: "
                 "add @cuda.jit above its def.")
        fail(f"{name} must be a @cuda.jit kernel, got {type(kernel).__name__}.")
    options = getattr(kernel, "targetoptions", None) or {}
    if getattr(kernel, "_device", False) or options.get("device"):
        fail(f"{name} is a device function (@cuda.jit(device=True)); write a kernel instead.")
    import inspect

    try:
        src = inspect.getsource(kernel.py_func)
    except (OSError, TypeError):
        src = ""
    if "raise NotImplementedError" in src:
        fail(f"{name} is not written yet: replace `raise NotImplementedError()` with your code.")
    if nparams is not None:
        got = len(inspect.signature(kernel.py_func).parameters)
        if got != nparams:
            fail(f"{name} must take {nparams} parameters, yours takes {got}.")


def _is_cuda_kernel(obj: Any) -> bool:
    """A Numba CUDA dispatcher (GPU) or the simulator's stand-in for one."""
    kinds: list[type] = []
    if _device.is_simulator():
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        kinds.append(FakeCUDAKernel)
    else:
        from numba.cuda.dispatcher import CUDADispatcher

        kinds.append(CUDADispatcher)
    return bool(kinds) and isinstance(obj, tuple(kinds)) and hasattr(obj, "py_func")


def validate_launch(grid: int | tuple, block: int | tuple) -> tuple[tuple, tuple]:
    """Refuse launch shapes a real GPU refuses (the simulator would accept them)."""
    g = (grid,) if isinstance(grid, int) else tuple(grid)
    b = (block,) if isinstance(block, int) else tuple(block)
    if not (1 <= len(g) <= 3 and 1 <= len(b) <= 3):
        fail(f"grid {grid} and block {block} must have 1 to 3 dimensions each.")
    if any((not isinstance(v, (int, _np.integer))) or v < 1 for v in g + b):
        fail(f"grid {grid} and block {block} must be positive integers.")
    threads = int(_prod(b))
    if threads > MAX_THREADS_PER_BLOCK:
        fail(f"block {block} has {threads} threads; a GPU allows at most "
             f"{MAX_THREADS_PER_BLOCK} per block (the simulator would not tell you).")
    for v, lim, what in [(v, l, "block") for v, l in zip(b, MAX_BLOCK_DIM)] + \
                        [(v, l, "grid") for v, l in zip(g, MAX_GRID_DIM)]:
        if v > lim:
            fail(f"{what} dimension {v} exceeds the GPU limit of {lim}.")
    return g, b


# --- guarded, poisoned outputs ------------------------------------------------------------

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
             fill: _np.ndarray | None = None, guard: int = GUARD) -> "Guarded":
        from numba import cuda

        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        n = int(_prod(shape))
        is_float = _np.dtype(dtype).kind == "f"
        if fill is None:
            sentinel = SENTINEL if is_float else -1234567
        else:
            sentinel = INPUT_SENTINEL if is_float else -7654321
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

    def check_guards(self, hint: str = "missing bounds guard (if i < n)?") -> None:
        host = self.buffer.copy_to_host()
        n = int(_prod(self.shape))
        guard = (host.size - n) // 2
        sentinel = _asarray(self.sentinel, host.dtype)
        before = _flatnonzero(host[:guard] != sentinel)
        after = _flatnonzero(host[guard + n:] != sentinel)
        if after.size:
            fail(f"wrote past the end of {self.name} (size {n}) at index {n + int(after[0])}: "
                 f"{hint}")
        if before.size:
            fail(f"wrote before the start of {self.name} at index {int(before[-1]) - guard}: "
                 "a negative index? check how you compute it.")


def to_device_guarded(host: _np.ndarray, name: str) -> Guarded:
    """An input on the device with guard zones, so an out-of-bounds read stays harmless."""
    return Guarded.make(host.shape, host.dtype, name, fill=host)


# --- launching ------------------------------------------------------------------------------

_OOB = re.compile(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)")


def launch(kernel: Any, grid: Any, block: Any, *args: Any, name: str = "kernel",
           shared: int = 0) -> None:
    """Launch and wait, turning crashes into diagnoses."""
    from numba import cuda

    validate_launch(grid, block)
    try:
        if shared:
            kernel[grid, block, 0, shared](*args)
        else:
            kernel[grid, block](*args)
        cuda.synchronize()
    except CheckFailure:
        raise
    except IndexError as exc:  # the simulator checks every index; a GPU would not
        m = _OOB.search(str(exc))
        where = (f" (index {m.group(1)} on an axis of size {m.group(3)})" if m else "")
        fail(f"{name} indexed outside an array{where}: missing bounds guard? The thread "
             f"that did it: {str(exc).split(':')[0]}.")
    except Exception as exc:  # noqa: BLE001 - anything else the kernel raised or caused
        text = f"{type(exc).__name__}: {exc}"
        if "ILLEGAL_ADDRESS" in text or "illegal address" in text.lower():
            fail(f"{name} accessed memory it does not own (illegal address): an index far out "
                 "of bounds. The GPU context is now unusable: restart the kernel.")
        if "TypingError" in text or "LoweringError" in text:
            fail(f"{name} does not compile for the GPU:\n{text}")
        fail(f"{name} failed when launched with grid {grid}, block {block}: {text}")


# --- comparing against the NumPy reference ---------------------------------------------------

def compare(got: _np.ndarray, want: _np.ndarray, *, name: str, formula: str = "",
            block: int | None = None, rtol: float = 1e-5, atol: float = 1e-5,
            alternatives: dict[str, _np.ndarray] | None = None,
            context: str = "") -> None:
    """Raise a diagnosis unless ``got`` matches ``want``.

    Poisoned (NaN) outputs mean "never written"; a match only over the first block means
    "only the first block handled"; a one-element shift means "off by one"; a match with an
    alternative formula names the arithmetic actually done.
    """
    got = _asarray(got)
    want = _asarray(want)
    ctx = f" [{context}]" if context else ""
    if got.shape != want.shape:
        fail(f"{name} has shape {got.shape}, expected {want.shape}{ctx}.")
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
    written = ~unwritten
    for shift, hint in ((1, "i + 1"), (-1, "i - 1")):
        if n > 2 and written.sum() > 2:
            gs, ws = (g[:-1], w[1:]) if shift == 1 else (g[1:], w[:-1])
            m = (written[:-1] if shift == 1 else written[1:])
            if _isclose(gs[m], ws[m], rtol=rtol, atol=atol).mean() > 0.9:
                fail(f"{name}[i] holds the value expected at {hint}: off by one in your "
                     f"index?{ctx}")
    if unwritten.any():
        nw = _flatnonzero(unwritten)
        if block and nw[0] >= block and ok[:block].all() and unwritten[block:].all():
            fail(f"{name}[{block}:] was never written, only the first block of {block} "
                 f"threads did its work: does your index use cuda.blockIdx.x * "
                 f"cuda.blockDim.x (or cuda.grid(1))?{ctx}")
        if unwritten[int(nw[0]):].all() and nw[0] > 0:
            fail(f"{name}[{int(nw[0])}:] was never written (the last {n - int(nw[0])} of {n} "
                 f"elements): does your launch or loop cover every element?{ctx}")
        fail(f"{int(nw.size)} of {n} elements of {name} were never written, the first at "
             f"index {int(nw[0])}: does every element get a thread?{ctx}")
    for label, alt in (alternatives or {}).items():
        if _isclose(g, _asarray(alt).ravel(), rtol=rtol, atol=atol).all():
            fail(f"{name} holds {label}, but it should hold {formula or 'the reference'}: "
                 f"check the arithmetic.{ctx}")
    expect = f" ({formula})" if formula else ""
    fail(f"{name}[{idx}] = {g[first]!r}, expected {w[first]!r}{expect}; {bad.size} of {n} "
         f"elements are wrong: check the arithmetic.{ctx}")


# --- counting global-memory reads in the simulator --------------------------------------------

class _Counter:
    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()


def counting_array(host: _np.ndarray) -> tuple[Any, _Counter]:
    """A simulator device array that counts element reads made by kernels.

    Used to check a technique, not only a result: a shared-memory kernel reads each global
    element a few times, a naive one many times. Simulator only.
    """
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    counter = _Counter()

    class Counting(FakeCUDAArray):
        def __getitem__(self, idx):  # noqa: D401 - counts one read per element fetched
            out = super().__getitem__(idx)
            with counter.lock:
                counter.n += getattr(out, "size", 1)
            return out

    return Counting(_array(host)), counter


def simulator() -> bool:
    return _device.is_simulator()


def sizes(sim: Iterable[int], gpu: Iterable[int]) -> list[int]:
    return list(_device.pick(list(sim), list(gpu)))


Check = Callable[..., None]
