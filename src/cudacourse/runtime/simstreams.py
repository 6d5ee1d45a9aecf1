"""``stream=`` checked in Numba's CUDA simulator as a GPU's Numba checks it.

The simulator runs everything in order on the host, so it ignores the stream a copy or a
launch is given, whatever it is. A GPU's Numba refuses anything but a stream or 0 (a falsy
value) with a TypeError, "Expected a Stream object or 0, got float32": a learner's
``do.copy_to_host(h_out[lo:hi], stream=h_in[s])`` (a name slip, an array's element where
the stream belongs) passed in the simulator and raised on the H200 (issue 45's mutants,
2026-12-05). ``install()`` makes the simulator's copies (``copy_to_host``,
``copy_to_device``, ``cuda.to_device``) and launches (``kernel[grid, block, stream]``) refuse
the same values with the same words, so one mistake gets one verdict on both. Nothing here
runs on a GPU.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from .._numba_private import simulator_patch


def check(stream: Any) -> None:
    """A GPU's rule: a falsy value (the default stream) or a stream object."""
    from numba.cuda.simulator import api

    if not stream or isinstance(stream, api.stream):
        return
    raise TypeError(f"Expected a Stream object or 0, got {type(stream).__name__}")


def _checked(fn: Callable, position: int) -> Callable:
    """``fn`` whose ``stream`` (keyword, or positional argument ``position``) is checked."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if "stream" in kwargs:
            check(kwargs["stream"])
        elif len(args) > position:
            check(args[position])
        return fn(*args, **kwargs)

    return wrapper


@simulator_patch
def install() -> None:
    """Check ``stream=`` in the simulator's copies and launches (idempotent)."""
    import numba.cuda
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator.cudadrv import devicearray

    arr = devicearray.FakeCUDAArray
    arr.copy_to_host = _checked(arr.copy_to_host, 2)  # (self, ary, stream)
    arr.copy_to_device = _checked(arr.copy_to_device, 2)
    to_device = _checked(devicearray.to_device, 1)  # (ary, stream, ...)
    devicearray.to_device = numba.cuda.to_device = to_device
    getitem = sim_kernel.FakeCUDAKernel.__getitem__

    @functools.wraps(getitem)
    def configured(self: Any, configuration: Any) -> Any:
        if isinstance(configuration, tuple) and len(configuration) >= 3:
            check(configuration[2])
        return getitem(self, configuration)

    sim_kernel.FakeCUDAKernel.__getitem__ = configured
