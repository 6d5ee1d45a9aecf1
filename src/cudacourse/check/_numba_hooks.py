"""Every private Numba attribute the check engine relies on, in one list.

The engine (``_engine``, ``_origin``, ``_compile``, ``_source``, ``_child``) reaches into
numba-cuda where no public API exists: the simulator's kernel and array classes, the hook it
calls for every launch, the fields a dispatcher keeps its options in, and, for the offline
sm_90 compile, the toolkit-path cache and the current-device lookup. ``seams()`` maps each to
a function that touches it, so one test (tests/test_check_engine.py) fails, naming the
numba-cuda version, the day an upgrade removes one. ``cudacourse._numba_private.seams()``
holds the same for the topic modules.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable


def _attr(module: str, *names: str) -> Callable[[], Any]:
    def touch() -> Any:
        obj: Any = importlib.import_module(module)
        for n in names:
            obj = getattr(obj, n)
        return obj

    return touch


def _instance_fields(*fields: str) -> Callable[[], Any]:
    """Fields a simulator kernel object carries (set in its __init__, so checked on one)."""

    def touch() -> Any:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        k = FakeCUDAKernel(lambda x: None, device=False)
        return [getattr(k, f) for f in fields]

    return touch


def seams() -> dict[str, Callable[[], Any]]:
    """Name -> a function that touches the private attribute (raises if it is gone).

    Only the simulator's side can be touched in every process: the GPU-side names
    (``numba.cuda.dispatcher``, ``cuda_paths``, ``nvrtc``) are replaced by the simulator's
    stand-ins in a simulator process, so they are listed for the offline child and checked
    there (tests/test_check_replay.py's GPU-mode test and tests/test_check_compile.py).
    """
    return {
        # _origin.is_dispatcher, _compile.gating: the simulator's kernel class and its hook
        "simulator.kernel.FakeCUDAKernel": _attr("numba.cuda.simulator.kernel",
                                                 "FakeCUDAKernel"),
        "simulator.kernel.FakeCUDAKernel.__call__": _attr("numba.cuda.simulator.kernel",
                                                          "FakeCUDAKernel", "__call__"),
        "simulator.kernel._kernel_context": _attr("numba.cuda.simulator.kernel",
                                                  "_kernel_context"),
        # _origin.is_device_function, _source.jit_options, _compile.gating
        "FakeCUDAKernel._device/_fastmath/py_func": _instance_fields("_device", "_fastmath",
                                                                     "py_func"),
        # _preflight.guarding: a configured simulator launch's grid, block, dynamic shared
        "FakeCUDAKernel.grid_dim/block_dim/dynshared_size": _instance_fields(
            "grid_dim", "block_dim", "dynshared_size"),
        # _engine.counting_array subclasses it; _compile.type_spec reads its _ary
        "simulator FakeCUDAArray": _attr("numba.cuda.simulator.cudadrv.devicearray",
                                         "FakeCUDAArray"),
        # _engine._ThreadErrors names the simulated thread from these fields
        "simulator.kernel.BlockThread": _attr("numba.cuda.simulator.kernel", "BlockThread"),
        # _engine._is_compile_error
        "numba.core.errors.NumbaError": _attr("numba.core.errors", "NumbaError"),
        # _child: argument types for compile_ptx
        "numba.np.numpy_support.from_dtype": _attr("numba.np.numpy_support", "from_dtype"),
        # listed for the offline child (GPU mode): checked by the tests that run it
        # "numba.cuda.cuda_paths.get_cuda_paths._cached_result"
        # "numba.cuda.cudadrv.nvrtc.get_supported_ccs"
        # "numba.cuda.dispatcher.get_current_device", "numba.cuda.compile_ptx"
        # _preflight.guarding on a GPU: "numba.cuda.dispatcher.CUDADispatcher.call" and the
        # launch configuration's griddim, blockdim and sharedmem (tests/test_check_preflight.py's
        # gpu-marked test runs through it)
    }
