"""The launcher contract every topic module follows.

A topic module holds a NumPy reference (``<op>_ref``), private kernels, and a typed launcher
``<op>(inputs..., out=None, variant="best", ...)``. This module is what those launchers share:

* **variants**: a module's ways of running a kernel are frozen configuration dataclasses
  (``kernel`` names the kernel; ``name`` how benchmarks and errors call it) kept in one
  ``Variants`` registry. ``VARIANTS`` is the tuple of their names, ``BEST`` is always a
  configuration of the same type (the one ``variant="best"``, the default, runs), and
  ``resolve`` turns a name, ``"best"`` or a configuration into a configuration;
* **launch configuration**: ``launch_config(...)`` returns ``(grid, block)``, ints for 1D
  launches and tuples for 2D ones, exactly what goes between the brackets of
  ``kernel[grid, block]``; ``blocks_for`` and ``resident_blocks`` size grids;
* **host or device in and out** (``cudacourse.runtime.arrays``): host inputs give a host result,
  device inputs (Numba's or anything with ``__cuda_array_interface__``) stay on the device,
  ``out`` is written in place;
* **errors**: wrong arguments raise TypeError/ValueError naming the argument and the fix;
* **cheap launches**: ``FastLaunch`` remembers, per launch shape, what the first launch
  worked out, so repeated launches on device arrays skip Numba's per-call argument handling
  (see ``cudacourse._numba_private.prepared_launch``).

A new topic module needs its reference, its kernels, a ``Variants`` entry and a launcher.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import functools
from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, TypeVar

WARP_SIZE = 32
MAX_THREADS_PER_BLOCK = 1024


# --- variants ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelConfig:
    """Base of every module's configuration type: which kernel, and its printable name."""

    kernel: str

    @property
    def name(self) -> str:
        return self.kernel

    def __str__(self) -> str:
        return self.name


C = TypeVar("C", bound=KernelConfig)


class Variants(Generic[C]):
    """A topic module's registry: named configurations and the measured best one.

    ``chosen_by`` says where ``best`` comes from (the run that measured it), so that the
    constant in the source is never a bare number without its evidence.
    """

    def __init__(self, named: Mapping[str, C], best: C, chosen_by: str):
        if not named:
            raise ValueError("a registry needs at least one variant")
        kinds = {type(c) for c in named.values()} | {type(best)}
        if len(kinds) != 1:
            raise TypeError(f"every variant and best must share one type, got {kinds}")
        self.named = dict(named)
        self.best = best
        self.chosen_by = chosen_by
        self.names: tuple[str, ...] = tuple(self.named)

    def resolve(self, variant: str | C) -> C:
        """The configuration ``variant`` stands for: a name, ``"best"`` or a configuration."""
        if isinstance(variant, type(self.best)):
            return variant
        if variant == "best":
            return self.best
        cfg = self.named.get(variant) if isinstance(variant, str) else None
        if cfg is None:
            raise ValueError(f"variant must be one of {self.names + ('best',)}, got {variant!r}")
        return cfg


# --- grids ------------------------------------------------------------------------------------

def blocks_for(n: int, per_block: int) -> int:
    """Blocks of ``per_block`` elements needed to cover ``n`` (rounded up, at least 1: a
    launch of zero blocks is an error on a GPU)."""
    if per_block < 1:
        raise ValueError(f"threads (elements per block) must be positive, got {per_block}")
    return max(1, -(-int(n) // int(per_block)))


@functools.cache
def sm_count() -> int:
    """Streaming multiprocessors of the current GPU (2 in the simulator, a stand-in)."""
    from .device import current, is_simulator

    if is_simulator():
        return 2
    gpu = current().gpu
    if gpu is not None and gpu.sm_count:
        return gpu.sm_count
    from numba import cuda

    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def resident_blocks(n: int, per_block: int, blocks_per_sm: int) -> int:
    """A grid for a grid-stride kernel: enough blocks to fill every SM ``blocks_per_sm``
    times, never more than the work needs (the loop covers the rest)."""
    return min(blocks_for(n, per_block), sm_count() * blocks_per_sm)


def check_threads(threads: Any, whole_warps: bool = False) -> int:
    """``threads`` per block as an int, or a ValueError naming the GPU limit it breaks."""
    import numpy as np

    if not isinstance(threads, (int, np.integer)) or not 1 <= threads <= MAX_THREADS_PER_BLOCK:
        raise ValueError(f"threads must be an int from 1 to {MAX_THREADS_PER_BLOCK} (a GPU "
                         f"limit), got {threads!r}")
    if whole_warps and threads % WARP_SIZE:
        raise ValueError(f"threads={threads} is not a multiple of the warp size {WARP_SIZE} "
                         f"(use a multiple of {WARP_SIZE} up to {MAX_THREADS_PER_BLOCK}): the "
                         "last warp of every block would run partly empty")
    return int(threads)


def check_block(block: tuple[int, ...]) -> tuple[int, ...]:
    """A 2D or 3D block shape, or a ValueError when it has more threads than a GPU allows."""
    total = 1
    for b in block:
        total *= int(b)
    if total > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"block {tuple(block)} has {total} threads; a GPU allows at most "
                         f"{MAX_THREADS_PER_BLOCK}")
    return tuple(int(b) for b in block)


# --- cheap repeated launches ------------------------------------------------------------------

class FastLaunch:
    """Launch ``kernel`` on device arrays with as few Python steps per call as possible.

    The first launch for a key goes through Numba's dispatcher (it compiles, and converts the
    arguments); what it worked out (the compiled kernel, the launch configuration, the order
    of the kernel's flattened parameters) is kept under the key, so later launches only
    fill in data pointers. Keys are chosen by the launcher: everything that changes the
    compiled code or the grid (shapes, dtypes, alignment, variant).

    In the simulator, or when Numba's internals are not the ones this was written against,
    every launch goes through the dispatcher: slower, never wrong.
    """

    def __init__(self) -> None:
        self._prepared: dict[Any, Callable[..., None] | None] = {}

    def __call__(self, key: Any, kernel: Any, grid: Any, block: Any, args: tuple) -> None:
        fast = self._prepared.get(key, _UNSET)
        if fast is _UNSET:  # first launch of this shape: the dispatcher compiles and runs it
            kernel[grid, block](*args)
            self._prepared[key] = prepare_launch(kernel, grid, block, args)
        elif fast is None:
            kernel[grid, block](*args)
        else:
            fast(*args)

    def clear(self) -> None:
        self._prepared.clear()

    def __len__(self) -> int:
        return sum(f is not None for f in self._prepared.values())


_UNSET = object()


class DevicePlans:
    """What a launcher worked out for device arrays, reused while the arrays look the same.

    A launcher checks and plans its first call as usual, then ``remember``s the launches it
    made. Later calls with arrays of the same shapes, dtypes, strides and 16-byte alignment
    (read from ``__cuda_array_interface__``: a few dictionary look-ups) and the same ``key``
    (variant, options, scalar arguments) are ``run`` at once: no checks, no conversion, one
    driver call per launch. Every public launcher of the package follows this one contract:
    ``if out is not None and _PLANS.run(key, *arrays): return out``, then the checked path,
    then ``_PLANS.remember(key, arrays, launches)`` when every array was a device array.
    Anything else (host arrays, new shapes, the simulator, the checkers' tracer
    installed) returns False from ``run`` and the launcher takes its normal path.
    """

    def __init__(self) -> None:
        self._plans: dict[tuple, list[tuple[Any, tuple[int, ...] | None]]] = {}

    @staticmethod
    def _describe(key: Any, arrays: tuple) -> tuple[tuple, list[int]] | None:
        """(plan key, data pointers): the key holds ``key`` and each array's shape, dtype
        and strides, and whether every pointer is 16-byte aligned. Plain loops: this runs
        on every call, so it is written for speed."""
        try:
            cais = [a.__cuda_array_interface__ for a in arrays]
        except AttributeError:
            return None
        parts = [key]
        ptrs = []
        bits = 0
        for c in cais:
            p = c["data"][0]
            ptrs.append(p)
            bits |= p
            parts += (c["shape"], c["typestr"], c.get("strides"))
        parts.append(not bits % 16)
        return tuple(parts), ptrs

    def run(self, key: Any, *arrays: Any) -> bool:
        """Launch the remembered plan for these arrays; False when there is none."""
        found = self._describe(key, arrays)
        if found is None:
            return False
        try:
            plan = self._plans.get(found[0])
        except TypeError:  # an unhashable variant: the normal path explains what is wrong
            return False
        if plan is None or not plan[0][0].usable():
            return False
        ptrs = found[1]
        for prepared, which in plan:
            prepared.with_pointers(*(ptrs if which is None else [ptrs[i] for i in which]))
        return True

    def remember(self, key: Any, arrays: tuple, launches: list[tuple]) -> None:
        """Keep ``launches``, each ``(kernel, grid, block, numba_args, which)`` or
        ``(kernel, grid, block, numba_args, which, shared_bytes)``: the kernel was just
        launched on ``numba_args``, whose array arguments are ``arrays[i] for i in which``
        (views of them), in that order. Scalar arguments are kept as they were: ``key`` must
        hold everything they depend on (alpha, scale, flags...)."""
        found = self._describe(key, arrays)
        try:
            if found is None or found[0] in self._plans:
                return
        except TypeError:  # an unhashable option (a list for a tuple): not worth a plan
            return
        plan = []
        for kernel, grid, block, args, which, *shared in launches:
            prepared = prepare_launch(kernel, grid, block, args, *shared)
            if prepared is None:
                return
            which = tuple(which)
            plan.append((prepared, None if which == tuple(range(len(arrays))) else which))
        self._plans[found[0]] = plan

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self) -> None:
        self._plans.clear()


def prepare_launch(kernel: Any, grid: Any, block: Any, args: tuple, shared: int = 0) -> Any:
    """``_numba_private.prepared_launch``, or None (with one warning naming the numba-cuda
    version) when Numba's internals changed: launches then take the dispatcher's path."""
    from .. import _numba_private as private

    try:
        return private.prepared_launch(kernel, grid, block, args, shared)
    except private.NumbaInternalsChanged as exc:  # slower from now on, never wrong
        import warnings

        warnings.warn(f"{exc} Launches take Numba's slower path meanwhile.", RuntimeWarning,
                      stacklevel=3)
        return None


_FROM_ENV: dict[str, Any] = {}


def json_named_by(variable: str) -> Any:
    """The JSON file the environment variable ``variable`` names, read once (``{}`` when the
    variable is unset): how a GPU sweep hands its measured choices to the public calls."""
    if variable not in _FROM_ENV:
        import json
        import os

        path = os.environ.get(variable)
        _FROM_ENV[variable] = {}
        if path:
            with open(path) as f:
                _FROM_ENV[variable] = json.load(f)
    return _FROM_ENV[variable]


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def chosen(kernel: str, default: Any) -> Any:
    """The measured choice for ``kernel`` ("matmul", "stencil", "lbm_kernel", ...):
    ``default`` (the module's constant), unless the environment variable CUDACOURSE_CHOICES
    names a JSON file {kernel: choice} (JSON lists become tuples). tools/choose_candidates.py
    writes one from a GPU sweep, so that one GPU run can time the sweep's winner as the
    public call's choice; the module's constant is then moved to it (a test holds the
    committed benchmarks to the constants). Read once, at import."""
    choices = json_named_by("CUDACOURSE_CHOICES")
    return _tuples(choices[kernel]) if kernel in choices else default
