"""What one kernel launch from Python costs, and how to stop paying it more than once.

Every ``kernel[grid, block](args)`` from Python checks and converts each argument before the
driver is asked to launch. With Numba device arrays that work is short; with CuPy arrays
Numba reads ``__cuda_array_interface__`` and builds a view on every call; with NumPy arrays
it copies them to the device and back. On the NVIDIA H200 the team measured (2026-11-30)
39 microseconds per launch with Numba device arrays against 125 with CuPy arrays.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
from numba import cuda

from .device import cupy_usable, is_simulator


@cuda.jit
def _touch(x):
    """The cheapest useful kernel: one thread adds 1 to the first element."""
    if cuda.grid(1) == 0:
        x[0] += 1.0


def _per_launch(launch: Callable[[], Any], repeats: int) -> float:
    launch()  # compile and warm up outside the timing
    cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        launch()
    cuda.synchronize()
    return (time.perf_counter() - t0) / repeats


def launch_costs(repeats: int | None = None, n: int = 1024) -> dict[str, float]:
    """Microseconds per launch of a one-thread kernel, by kind of argument.

    Host-clock timing of many back-to-back launches, so it measures what Python pays per
    launch (argument handling plus the driver call), not the kernel. In the simulator the
    numbers describe the simulator only. CuPy rows appear when CuPy can use a GPU.
    """
    if repeats is None:
        repeats = 20 if is_simulator() else 2000
    host = np.zeros(n, dtype=np.float32)
    d = cuda.to_device(host)
    out = {
        "Numba device array": _per_launch(lambda: _touch[1, 32](d), repeats),
        "NumPy array (copied in and out on every launch)":
            _per_launch(lambda: _touch[1, 32](host), max(1, repeats // 10)),
    }
    ok, _ = cupy_usable()
    if ok:
        import cupy as cp

        c = cp.zeros(n, dtype=cp.float32)
        out["CuPy array (read through __cuda_array_interface__)"] = _per_launch(
            lambda: _touch[1, 32](c), repeats)
        view = cuda.as_cuda_array(c)  # converted once: a Numba view of CuPy's memory
        out["CuPy array converted once with cuda.as_cuda_array"] = _per_launch(
            lambda: _touch[1, 32](view), repeats)
    return {k: v * 1e6 for k, v in out.items()}


def launches_versus_one(n_small: int, items: int) -> dict[str, float]:
    """Seconds for ``n_small`` launches of ``items`` elements each against one launch of all.

    Same work, same bytes; the difference is what the extra launches cost.
    """
    from .transfer import THREADS, _scale, blocks_for

    x = cuda.to_device(np.ones(n_small * items, dtype=np.float32))
    out = cuda.device_array_like(x)

    def many() -> None:
        for k in range(n_small):
            lo = k * items
            _scale[blocks_for(items), THREADS](x[lo:lo + items], out[lo:lo + items],
                                               np.float32(2.0))

    def one() -> None:
        _scale[blocks_for(n_small * items), THREADS](x, out, np.float32(2.0))

    return {"many small launches": _per_launch(many, 1), "one big launch": _per_launch(one, 1)}
