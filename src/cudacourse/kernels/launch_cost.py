"""What one kernel launch from Python costs, and how to stop paying it more than once.

Every ``kernel[grid, block](args)`` from Python types each argument, converts it to the
kernel's flattened parameters (pointer, sizes, shape, strides per array) and only then asks
the driver to launch. With Numba device arrays that is short; with CuPy arrays Numba reads
``__cuda_array_interface__`` and builds a view of each on every call; with NumPy arrays it
copies them to the device and back. On the NVIDIA H200 (2026-12-01, one-element arrays):
a bare Numba launch 35 us with Numba arrays and 93 us with CuPy arrays, CuPy's own ``add``
8 us, PyTorch's 6 us, and the course's ``vector_add`` 201 us on CuPy arrays before it
prepared its launches (``tools/gpu/launch_overhead.sh`` measures all of them again).

The way below Numba's floor: do the argument work once. ``cudacourse.runtime.launch.FastLaunch``
(and ``vector_add`` with device arrays and ``out``) keep, per launch shape, the compiled
kernel and its flattened parameters, and on later calls only write the new data pointers.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

from typing import Any, Callable

import numpy as np
from numba import cuda

from ..runtime.device import cupy_usable, is_simulator, pick
from ..runtime.launch import FastLaunch, blocks_for
from ..runtime.timing import host_per_call
from ..i18n import N_


@cuda.jit
def _touch(x):
    """The cheapest useful kernel: one thread adds 1 to the first element."""
    if cuda.grid(1) == 0:
        x[0] += 1.0


def _per_launch(launch: Callable[[], Any], repeats: int) -> float:
    """Seconds per call of ``launch``: one warm-up (it compiles), then ``repeats`` back to
    back, one sync (``timing.host_per_call``)."""
    return host_per_call(launch, repeats)


def launch_costs(repeats: int | None = None, n: int = 1024) -> dict[str, float]:
    """Microseconds per launch of a one-thread kernel, by kind of argument and launch path.

    Host-clock timing of many back-to-back launches, so it measures what Python pays per
    launch (argument handling plus the driver call), not the kernel. In the simulator the
    numbers describe the simulator only. CuPy rows appear when CuPy can use a GPU.
    """
    if repeats is None:
        repeats = pick(sim=20, gpu=2000)
    host = np.zeros(n, dtype=np.float32)
    d = cuda.to_device(host)
    prepared = FastLaunch()
    out = {
        N_("Numba device array"): _per_launch(lambda: _touch[1, 32](d), repeats),
        N_("NumPy array (copied in and out on every launch)"):
            _per_launch(lambda: _touch[1, 32](host), max(1, repeats // 10)),
        N_("Numba device array, launch prepared once (cudacourse.runtime.launch.FastLaunch)"):
            _per_launch(lambda: prepared("touch", _touch, 1, 32, (d,)), repeats),
    }
    out.update(_course_launcher_costs(repeats))
    ok, _ = cupy_usable()
    if ok:
        import cupy as cp

        c = cp.zeros(n, dtype=cp.float32)
        out[N_("CuPy array (read through __cuda_array_interface__)")] = _per_launch(
            lambda: _touch[1, 32](c), repeats)
        view = cuda.as_cuda_array(c)  # converted once: a Numba view of CuPy's memory
        out[N_("CuPy array converted once with cuda.as_cuda_array")] = _per_launch(
            lambda: _touch[1, 32](view), repeats)
        out.update(_course_launcher_costs(repeats, cp))
    return {k: v * 1e6 for k, v in out.items()}


def _course_launcher_costs(repeats: int, cp: Any = None) -> dict[str, float]:
    """Seconds per ``vector_add(a, b, out)`` on one-element device arrays (Numba's, or
    CuPy's when ``cp`` is given). In the simulator a 32-thread variant keeps it quick."""
    from .vector import vector_add

    variant, threads = ("simple", 32) if is_simulator() else ("best", None)
    if cp is None:
        a, b, o = (cuda.to_device(np.ones(1, np.float32)) for _ in range(3))
        key = N_("course launcher vector_add(a, b, out), Numba arrays")
    else:
        a, b, o = (cp.ones(1, dtype=cp.float32) for _ in range(3))
        key = N_("course launcher vector_add(a, b, out), CuPy arrays")
    return {key: _per_launch(
        lambda: vector_add(a, b, o, variant=variant, threads=threads), repeats)}


def launches_versus_one(n_small: int, items: int) -> dict[str, float]:
    """Seconds for ``n_small`` launches of ``items`` elements each against one launch of all.

    Same work, same bytes; the difference is what the extra launches cost. Both results are
    checked against ``2 * x`` first.
    """
    from .transfer import THREADS, _scale

    x = cuda.to_device(np.arange(n_small * items, dtype=np.float32) % 7)
    out = cuda.device_array_like(x)

    def many() -> None:
        for k in range(n_small):
            lo = k * items
            _scale[blocks_for(items, THREADS), THREADS](x[lo:lo + items], out[lo:lo + items],
                                                        np.float32(2.0))

    def one() -> None:
        _scale[blocks_for(n_small * items, THREADS), THREADS](x, out, np.float32(2.0))

    want = 2 * x.copy_to_host()
    times = {}
    for name, fn in ((N_("many small launches"), many), (N_("one big launch"), one)):
        out.copy_to_device(np.full(n_small * items, np.nan, np.float32))
        times[name] = _per_launch(fn, 1)
        if not np.array_equal(out.copy_to_host(), want):
            raise AssertionError(f"{name}: the result is not 2 * x")
    return times
