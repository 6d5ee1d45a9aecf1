"""Every use of Numba's private API in the course's topic modules, in one place.

numba-cuda is in maintenance mode (docs/dependencies.md): its internals will not change
much, but an upgrade may still move them, and its successor will not have them at all. So
nothing outside this module reaches past ``numba.cuda``'s documented API. Each seam says
what it relies on; ``tests/test_numba_private.py`` checks every one of them against the
installed numba-cuda and fails naming that version when an upgrade breaks one.

The course's checkers (``cudacourse.check``) have their own seams in ``check/_trace.py`` and
``check/_engine.py``; ``simwarp`` and ``simblock`` patch the simulator's thread classes
(listed below, so that the test covers them too).
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import numpy as np

NUMBA_CUDA_VERSION = "unknown"
try:
    from importlib.metadata import version as _version

    NUMBA_CUDA_VERSION = _version("numba-cuda")
except Exception:  # noqa: BLE001 - a source checkout of numba-cuda has no metadata
    pass


class NumbaInternalsChanged(RuntimeError):
    """A private Numba attribute this course relies on is missing or changed."""


def _broken(what: str, exc: BaseException | None = None) -> NumbaInternalsChanged:
    why = f": {type(exc).__name__}: {exc}" if exc else ""
    return NumbaInternalsChanged(
        f"numba-cuda {NUMBA_CUDA_VERSION} changed a private API the course uses ({what}){why}. "
        "Update src/cudacourse/_numba_private.py for this version, or install the pinned "
        "numba-cuda (pyproject.toml).")


# --- configuration: the simulator flag, re-reading the environment -----------------------------

def simulating() -> bool:
    """Whether numba.cuda runs in its simulator (``numba.cuda.core.config.ENABLE_CUDASIM``)."""
    from numba.cuda.core import config

    return bool(config.ENABLE_CUDASIM)


def simulator_patch(install: Callable[[], None]) -> Callable[[], None]:
    """``install`` (a patch of Numba's simulator) made idempotent and a no-op on a GPU: the
    one guard of simwarp's and simblock's ``install()``. ``installed()`` on the result says
    whether it ran."""
    done: list[bool] = []

    @functools.wraps(install)
    def once() -> None:
        if done or not simulating():
            return
        install()
        done.append(True)

    once.installed = lambda: bool(done)  # type: ignore[attr-defined]
    return once


def reload_numba_config() -> None:
    """Make an already-imported numba re-read its ``NUMBA_*`` variables, so that a
    ``NUMBA_ENABLE_CUDASIM`` set after ``import numba`` still decides which ``numba.cuda`` is
    imported. Numba reads them into ``numba.config`` when ``numba`` itself is imported (any
    library may have done that first); ``numba.core.config.reload_config()`` is its documented
    way to read them again (it re-reads only when a ``NUMBA_*`` variable changed). numba-cuda's
    ``numba.cuda.core.config`` is that same module when numba is installed, its own else."""
    seen: set[int] = set()
    for name in ("numba.core.config", "numba.cuda.core.config"):
        config = sys.modules.get(name)
        if config is not None and id(config) not in seen:
            seen.add(id(config))
            config.reload_config()


def loaded_cuda_mode() -> str | None:
    """The mode an already-imported ``numba.cuda`` runs in ("sim" or "gpu"), without
    importing it; None when it is not imported (or still being imported). ``numba.cuda``
    imports ``numba.cuda.simulator_init`` or ``numba.cuda.device_init`` once, at its import,
    after reading ``ENABLE_CUDASIM``: which one is loaded is the mode it is in for good."""
    if "numba.cuda" not in sys.modules:
        return None
    if "numba.cuda.simulator_init" in sys.modules:
        return "sim"
    if "numba.cuda.device_init" in sys.modules:
        return "gpu"
    return None


def cuda_mode() -> str:
    """The mode ``numba.cuda`` runs in, asked of numba itself (importing ``numba.cuda`` if
    nothing did yet): "sim" when its ``cuda.jit`` is the simulator's, "gpu" else. Importing
    it does not initialise the CUDA driver (Numba does that at the first use of a device)."""
    from numba import cuda

    return "sim" if cuda.jit.__module__.startswith("numba.cuda.simulator") else "gpu"


def driver_initialized() -> bool:
    """Whether this process's CUDA driver was initialised (``cuInit``) through Numba
    (``numba.cuda.cudadrv.driver.driver.is_initialized``): after that, a forked child cannot
    use the GPU. False in the simulator and before numba.cuda's first call to the driver."""
    mod = sys.modules.get("numba.cuda.cudadrv.driver")
    if mod is None:
        return False
    # vars(), not getattr: the Driver's __getattr__ initialises the driver for a missing name
    return bool(vars(getattr(mod, "driver", None) or object).get("is_initialized", True))


# --- which objects are Numba's own device arrays -------------------------------------------------

# Class names rather than classes: importing the classes would import numba.cuda, which must
# not happen before ``cudacourse.runtime.device`` has chosen the mode.
NUMBA_ARRAY_TYPES = ("DeviceNDArray", "MappedNDArray", "FakeCUDAArray")


def is_numba_array(x: Any) -> bool:
    return type(x).__name__ in NUMBA_ARRAY_TYPES


# --- the memory manager's deferred frees -----------------------------------------------------

def _pending_frees(ctx: Any) -> Any:
    """``ctx.memory_manager.deallocations``: Numba's queue of frees not yet issued."""
    return getattr(getattr(ctx, "memory_manager", None), "deallocations", None)


def queued_frees(ctx: Any) -> tuple[int, int]:
    """(count, bytes) of the frees Numba has queued but not yet issued (``_cons``, ``_size``)."""
    pending = _pending_frees(ctx)
    if pending is None:
        return 0, 0
    return len(getattr(pending, "_cons", ())), int(getattr(pending, "_size", 0))


def flush_queued_frees(ctx: Any) -> None:
    pending = _pending_frees(ctx)
    if pending is not None:
        pending.clear()


# --- compiled kernels --------------------------------------------------------------------------

def compiled_overload(kernel: Any, args: tuple) -> Any:
    """The compiled ``_Kernel`` a dispatcher runs for ``args`` (``specialize(...).overloads``)."""
    spec = kernel.specialize(*args)
    try:
        return next(iter(spec.overloads.values()))
    except (AttributeError, StopIteration) as exc:
        raise _broken("dispatcher.specialize(...).overloads", exc) from None


def max_cooperative_grid_blocks(kernel: Any, args: tuple, threads: int,
                                dynamic_shared: int = 0) -> int:
    """``_Kernel.max_cooperative_grid_blocks``: the driver's occupancy answer times SMs."""
    return compiled_overload(kernel, args).max_cooperative_grid_blocks(threads, dynamic_shared)


# --- a launch with the argument handling done once -----------------------------------------------

def _launch_api() -> tuple[Any, Any, Any]:
    """cuda.core's ``launch`` and ``LaunchConfig`` as Numba imports them, and Numba's stream
    conversion; raises NumbaInternalsChanged when they moved."""
    try:
        from numba.cuda import dispatcher
        from numba.cuda.cudadrv import driver

        return dispatcher.launch, dispatcher.LaunchConfig, driver._to_core_stream
    except (ImportError, AttributeError) as exc:
        raise _broken("numba.cuda.dispatcher.launch / LaunchConfig, driver._to_core_stream",
                      exc) from None


_dispatcher_module: Any = None


def _dispatcher_unpatched() -> bool:
    """False while something (the checkers' launch tracer) wraps Numba's launch: then every
    launch must go through it. Numba's own method is the one whose code lives in Numba's
    dispatcher module (a wrapper made with functools.wraps copies names, not code)."""
    global _dispatcher_module
    if _dispatcher_module is None:
        from numba.cuda import dispatcher as _dispatcher_module
    dispatcher = _dispatcher_module
    code = getattr(dispatcher._LaunchConfiguration.__call__, "__code__", None)
    return code is not None and code.co_filename == dispatcher.__file__


def _flatten(kernel: Any, args: tuple) -> tuple[list[Any], list[int | None], list[tuple]]:
    """The flattened kernel parameters for ``args``, as Numba's own ``_prepare_args`` makes
    them; for each parameter the index of the argument whose data pointer it is (None for
    sizes, shapes and strides, which the launch shape fixes); and for every other argument
    (scalars) ``(index, type, first parameter, count)`` so its value can be set per call."""
    params: list[Any] = []
    where: list[int | None] = []
    scalars: list[tuple] = []
    for i, (ty, val) in enumerate(zip(kernel.argument_types, args)):
        before = len(params)
        kernel._prepare_args(ty, val, 0, [], params)
        where += [None] * (len(params) - before)
        if hasattr(val, "__cuda_array_interface__"):
            ptr = val.__cuda_array_interface__["data"][0]
            # An array flattens to meminfo, parent, nitems, itemsize, data, shape, strides.
            if len(params) - before < 5 or params[before + 4] != ptr:
                raise _broken(f"array argument {i} did not flatten to (meminfo, parent, "
                              f"nitems, itemsize, data, shape..., strides...)")
            where[before + 4] = i
        else:
            scalars.append((i, ty, before, len(params) - before))
    return params, where, scalars


def _dim3(dims: Any) -> tuple[int, int, int]:
    """(x, y, z) from an int or a 1- to 3-tuple, as Numba normalises launch dimensions."""
    t = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    return tuple(int(d) for d in t + (1,) * (3 - len(t)))  # type: ignore[return-value]


def prepared_launch(kernel: Any, grid: Any, block: Any, args: tuple, shared: int = 0
                    ) -> "PreparedLaunch | None":
    """A function that launches ``kernel[grid, block, 0, shared]`` on arguments shaped like
    ``args`` (``shared``: bytes of dynamic shared memory)
    with none of Numba's per-call typing and conversion: only the data pointers of the
    array arguments are read again (from ``__cuda_array_interface__``).

    ``kernel`` must already be compiled for ``args`` (launch it once first). Returns None in
    the simulator, for host (NumPy) arguments, or when Numba's internals differ from what
    this relies on: the caller then launches through the dispatcher.
    """
    if simulating():
        return None
    try:
        if not _dispatcher_unpatched():
            return None
        if any(isinstance(a, np.ndarray) for a in args):
            return None  # host arrays are copied on every launch: nothing to prepare
        launch, LaunchConfig, to_stream = _launch_api()
        argtypes = tuple(kernel.typeof_pyval(a) for a in args)
        compiled = kernel.overloads[argtypes]
        params, where, scalars = _flatten(compiled, args)
        core_kernel = compiled._codelibrary.get_cufunc().kernel
        config = LaunchConfig(grid=_dim3(grid), block=_dim3(block), shmem_size=int(shared))
        stream = to_stream(0)
    except NumbaInternalsChanged:
        raise
    except Exception:  # noqa: BLE001 - anything unexpected: the dispatcher path, still right
        return None
    return PreparedLaunch(kernel, compiled, grid, block, launch, stream, config, core_kernel,
                          params, where, scalars, int(shared))


class PreparedLaunch:
    """One kernel launch shape with its parameters flattened once (``prepared_launch``)."""

    def __init__(self, kernel: Any, compiled: Any, grid: Any, block: Any, launch: Any,
                 stream: Any, config: Any, core_kernel: Any, params: list[Any],
                 where: list[int | None], scalars: list[tuple], shared: int = 0):
        self.kernel, self.grid, self.block, self.shared = kernel, grid, block, shared
        self._compiled, self._scalars = compiled, scalars
        self._launch, self._stream, self._config, self._core = launch, stream, config, core_kernel
        self._params = params
        self._slots = [k for k, i in enumerate(where) if i is not None]  # data pointers
        self._arrays = [i for i in where if i is not None]
        self._raw = _raw_launch(compiled, grid, block, shared, params)

    @staticmethod
    def usable() -> bool:
        """False while something wraps Numba's launch (the checkers' tracer, installed after
        this was prepared): launches must then go through the dispatcher, where it sees them."""
        return _dispatcher_unpatched()

    def _core_launch(self, pointers: Any) -> None:
        """Through cuda.core's ``launch``, as Numba launches: every parameter converted."""
        params = self._params
        for k, p in zip(self._slots, pointers):
            params[k] = p
        self._launch(self._stream, self._config, self._core, *params)

    def with_pointers(self, *pointers: int) -> None:
        """Launch with these data pointers for the array arguments, in argument order (the
        caller checked ``usable()``). With the driver's entry point at hand, only the
        pointer slots of the parameter buffer built once are rewritten (``_raw_launch``)."""
        raw = self._raw
        if raw is None:
            self._core_launch(pointers)
            return
        holders, launch, args, ok = raw
        for k, p in zip(self._slots, pointers):
            holders[k].value = p
        err = launch(*args)[0]
        if err != ok:
            raise RuntimeError(f"cuLaunchKernel failed: {err}")

    def __call__(self, *args: Any) -> None:
        """Launch on ``args``, shaped like the arguments it was prepared with."""
        if not self.usable():
            self.kernel[self.grid, self.block, 0, self.shared](*args)
            return
        pointers = [args[i].__cuda_array_interface__["data"][0] for i in self._arrays]
        if not self._scalars:
            self.with_pointers(*pointers)
            return
        for i, ty, first, count in self._scalars:  # scalars may differ from call to call
            flat: list[Any] = []
            self._compiled._prepare_args(ty, args[i], 0, [], flat)
            self._params[first:first + count] = flat
        self._core_launch(pointers)


def _raw_launch(compiled: Any, grid: Any, block: Any, shared: int, params: list[Any]
                ) -> tuple | None:
    """(holders, cuLaunchKernel, its arguments, CUDA_SUCCESS) for a launch straight through
    the driver: each flattened parameter lives in a ctypes value built once, and the
    ``void**`` array of their addresses is passed as an int, so a launch converts nothing
    (cuda.core's ``launch`` converts every parameter again: about 1 us each, and attention's
    kernel has 49). None when anything is not as expected: cuda.core's path then serves."""
    import ctypes

    try:
        from cuda.bindings import driver as cu

        holders: list[Any] = []
        for p in params:  # what Numba's _prepare_args makes: ints (intptr_t), bools, ctypes
            if isinstance(p, bool):
                holders.append(ctypes.c_bool(p))
            elif isinstance(p, int):
                holders.append(ctypes.c_int64(p))
            elif isinstance(p, ctypes._SimpleCData):
                holders.append(type(p)(p.value))
            else:
                return None
        addresses = (ctypes.c_void_p * max(1, len(holders)))(
            *[ctypes.addressof(h) for h in holders])
        handle = compiled._codelibrary.get_cufunc().handle
        if isinstance(handle, cu.CUkernel):  # cuda.core loads kernels from a library
            err, handle = cu.cuKernelGetFunction(handle)
            if err != cu.CUresult.CUDA_SUCCESS:
                return None
        (gx, gy, gz), (bx, by, bz) = _dim3(grid), _dim3(block)
        args = (handle, gx, gy, gz, bx, by, bz, int(shared), cu.CUstream(0),
                ctypes.addressof(addresses), 0)
    except Exception:  # noqa: BLE001 - cuda.bindings absent or changed: the slower path
        return None
    holders.append(addresses)  # kept alive with the values it points to
    return holders, cu.cuLaunchKernel, args, cu.CUresult.CUDA_SUCCESS


# --- what the test checks: every seam above, and simwarp's -----------------------------------

def seams() -> dict[str, Callable[[], Any]]:
    """Name -> a function that touches the private attribute (raises if it is gone)."""

    def sim(module: str, *names: str) -> Callable[[], Any]:
        def touch() -> Any:
            import importlib

            mod = importlib.import_module(module)
            obj = mod
            for n in names:
                obj = getattr(obj, n)
            return obj
        return touch

    found = {
        "numba.cuda.core.config.ENABLE_CUDASIM": sim("numba.cuda.core.config", "ENABLE_CUDASIM"),
        "numba.cuda.core.config.reload_config": sim("numba.cuda.core.config", "reload_config"),
        # reload_numba_config(): numba's own config, read at `import numba` (often first)
        "numba.core.config.reload_config": sim("numba.core.config", "reload_config"),
        "numba.cuda.core.errors.TypingError": sim("numba.cuda.core.errors", "TypingError"),
        "numba.cuda.extending.intrinsic": sim("numba.cuda.extending", "intrinsic"),
        "numba.cuda.types.Array": sim("numba.cuda.types", "Array"),
        # simwarp.install() wraps these three and adds methods to FakeCUDAModule
        "simulator.kernel.BlockManager.__init__": sim("numba.cuda.simulator.kernel",
                                                      "BlockManager", "__init__"),
        "simulator.kernel.BlockThread.__init__": sim("numba.cuda.simulator.kernel",
                                                     "BlockThread", "__init__"),
        "simulator.kernel.BlockThread.run": sim("numba.cuda.simulator.kernel", "BlockThread",
                                                "run"),
        # simblock.install() replaces these two (and wraps BlockThread.run): its scheduler
        # relies on the threads' syncthreads_blocked / syncthreads_event / exception / abort
        "simulator.kernel.BlockManager.run": sim("numba.cuda.simulator.kernel",
                                                 "BlockManager", "run"),
        "simulator.kernel.BlockThread.syncthreads": sim("numba.cuda.simulator.kernel",
                                                        "BlockThread", "syncthreads"),
        # simalign.install() wraps these two (they refuse alignment=)
        "simulator.kernelapi.FakeCUDAShared.array": sim("numba.cuda.simulator.kernelapi",
                                                        "FakeCUDAShared", "array"),
        "simulator.kernelapi.FakeCUDALocal.array": sim("numba.cuda.simulator.kernelapi",
                                                       "FakeCUDALocal", "array"),
        # simstreams.install() wraps these (they ignore stream=)
        "simulator FakeCUDAArray.copy_to_host": sim("numba.cuda.simulator.cudadrv.devicearray",
                                                    "FakeCUDAArray", "copy_to_host"),
        "simulator FakeCUDAArray.copy_to_device": sim(
            "numba.cuda.simulator.cudadrv.devicearray", "FakeCUDAArray", "copy_to_device"),
        "simulator to_device": sim("numba.cuda.simulator.cudadrv.devicearray", "to_device"),
        "simulator.kernel.FakeCUDAKernel.__getitem__": sim("numba.cuda.simulator.kernel",
                                                           "FakeCUDAKernel", "__getitem__"),
        "simulator.api.stream": sim("numba.cuda.simulator.api", "stream"),
        "simulator.kernelapi.FakeCUDAModule": sim("numba.cuda.simulator.kernelapi",
                                                  "FakeCUDAModule"),
        "simulator FakeCUDAArray": sim("numba.cuda.simulator.cudadrv.devicearray",
                                       "FakeCUDAArray"),
    }
    if not simulating():
        found.update({
            # check/_copies.exact() wraps these two during a check
            "devicearray.DeviceNDArrayBase.copy_to_device": sim(
                "numba.cuda.cudadrv.devicearray", "DeviceNDArrayBase", "copy_to_device"),
            "devicearray.DeviceNDArrayBase.copy_to_host": sim(
                "numba.cuda.cudadrv.devicearray", "DeviceNDArrayBase", "copy_to_host"),
            "dispatcher.launch, LaunchConfig, driver._to_core_stream": _launch_api,
            "dispatcher._LaunchConfiguration.__call__": sim("numba.cuda.dispatcher",
                                                            "_LaunchConfiguration", "__call__"),
            "dispatcher._Kernel._prepare_args": sim("numba.cuda.dispatcher", "_Kernel",
                                                    "_prepare_args"),
            # the driver path of PreparedLaunch (_raw_launch); cuda.core's serves without it
            "cuda.bindings.driver.cuLaunchKernel": sim("cuda.bindings.driver", "cuLaunchKernel"),
            "cuda.bindings.driver.cuKernelGetFunction": sim("cuda.bindings.driver",
                                                            "cuKernelGetFunction"),
            "dispatcher._Kernel.max_cooperative_grid_blocks": sim(
                "numba.cuda.dispatcher", "_Kernel", "max_cooperative_grid_blocks"),
            "driver._PendingDeallocs._cons/_size/clear": sim("numba.cuda.cudadrv.driver",
                                                             "_PendingDeallocs", "clear"),
            "devicearray.DeviceNDArray": sim("numba.cuda.cudadrv.devicearray", "DeviceNDArray"),
            "devicearray.MappedNDArray": sim("numba.cuda.cudadrv.devicearray", "MappedNDArray"),
            # driver_initialized(): the grader's verdict server forks only before cuInit
            "driver.driver.is_initialized": sim("numba.cuda.cudadrv.driver", "driver",
                                                "is_initialized"),
        })
    return found


__all__ = ["NUMBA_CUDA_VERSION", "NumbaInternalsChanged", "simulating", "simulator_patch",
           "reload_numba_config",
           "loaded_cuda_mode", "cuda_mode",
           "NUMBA_ARRAY_TYPES", "is_numba_array", "queued_frees", "flush_queued_frees",
           "compiled_overload", "max_cooperative_grid_blocks", "prepared_launch", "seams"]
