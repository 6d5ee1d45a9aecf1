"""Lesson 1's measurements: the same vector add on the CPU and on the GPU, across sizes.

GPU time is split into its parts (copy in, kernel, copy back) because for a kernel this
simple the copies over PCIe cost far more than the arithmetic.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

from dataclasses import dataclass, field

import numpy as np
from numba import cuda, njit, prange

from ..runtime import device
from ..runtime.timing import event_median, host_median, median_seconds
from .vector import _vector_add, launch_config
from ..viz.words import T


@njit(parallel=True, cache=False)
def _cpu_parallel_add(a, b, out):
    """Numba on the CPU: the loop split over all cores, vectorised with SIMD."""
    for i in prange(a.shape[0]):
        out[i] = a[i] + b[i]


@dataclass
class Timings:
    """Median seconds per size for each way of adding two vectors."""

    sizes: list[int]
    mode: str
    seconds: dict[str, list[float]] = field(default_factory=dict)

    def table(self) -> str:
        cols = list(self.seconds)
        head = f"{'n':>12} " + " ".join(f"{c:>16}" for c in cols)
        rows = [head]
        for k, n in enumerate(self.sizes):
            rows.append(f"{n:>12,} " + " ".join(f"{self.seconds[c][k] * 1e3:>13.3f} ms"
                                                for c in cols))
        return "\n".join(rows)


def default_sizes() -> list[int]:
    """Sizes that take seconds in total: tiny in the simulator, up to 2^27 on a GPU."""
    return device.pick(sim=[100, 1_000, 4_000], gpu=[2**k for k in range(12, 28, 3)])


def measure(sizes: list[int] | None = None, repeats: int | None = None,
            seed: int = 0) -> Timings:
    """Time NumPy, Numba-parallel CPU and the CUDA kernel (with and without copies)."""
    sizes = sizes or default_sizes()
    repeats = repeats or device.pick(sim=1, gpu=10)
    t = Timings(sizes, device.mode(), {k: [] for k in
                ("numpy", "numba_cpu", "gpu_kernel", "gpu_copy_in", "gpu_copy_out")})
    gen = np.random.default_rng(seed)
    for n in sizes:
        a = gen.random(n, dtype=np.float32)  # timings do not depend on the values: the
        b = gen.random(n, dtype=np.float32)  # cheapest generator (a third of a normal's)
        out = np.empty_like(a)
        t.seconds["numpy"].append(host_median(lambda: np.add(a, b, out=out), repeats, sync=False))
        t.seconds["numba_cpu"].append(host_median(lambda: _cpu_parallel_add(a, b, out), repeats,
                                                  sync=False))
        da, db = cuda.to_device(a), cuda.to_device(b)
        dout = cuda.device_array_like(da)
        blocks, threads = launch_config(n, "simple")  # the kernel of lesson 1

        def kernel() -> None:
            _vector_add[blocks, threads](da, db, dout)

        def copy_in() -> None:
            cuda.to_device(a, to=da)
            cuda.to_device(b, to=db)

        def copy_out() -> None:
            dout.copy_to_host(out)

        # CUDA events on a GPU; the simulator has none: its wall clock, which means little.
        t.seconds["gpu_kernel"].append(median_seconds(kernel, repeats))
        t.seconds["gpu_copy_in"].append(median_seconds(copy_in, repeats))
        # copy_to_host returns when the copy is done: the host clock sees all of it.
        t.seconds["gpu_copy_out"].append(host_median(copy_out, repeats))
        if not np.allclose(dout.copy_to_host(), a + b):
            raise AssertionError(f"the GPU vector add is wrong at n={n}")
    return t


def plot(t: Timings, ax=None):
    """Log-log time against size for each method; GPU total = copies + kernel."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    s = t.seconds
    total = [i + k + o for i, k, o in zip(s["gpu_copy_in"], s["gpu_kernel"], s["gpu_copy_out"])]
    series = {T("NumPy (1 core)"): s["numpy"], T("Numba CPU, parallel"): s["numba_cpu"],
              T("GPU kernel only"): s["gpu_kernel"], T("GPU incl. copies"): total}
    for label, ys in series.items():
        ax.loglog(t.sizes, ys, marker="o", label=label)
    ax.set_xlabel(T("elements (float32)"))
    ax.set_ylabel(T("seconds (median)"))
    title = T("vector add: CPU vs GPU")
    if t.mode == "sim":
        title += T("\n(simulator: the 'GPU' is Python threads on the CPU; times mean nothing)")
    ax.set_title(title)
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    return ax


def variant_bandwidth(n: int | None = None, repeats: int = 20) -> dict[str, float]:
    """GB/s of every vector-add variant and of a plain device-to-device copy (GPU only).

    Bytes counted: vector add reads two arrays and writes one (12 bytes per element); the
    copy reads one and writes one (8 bytes per element). The copy is the ceiling.
    """
    from .vector import VARIANTS, vector_add

    device.require_gpu("measuring memory bandwidth")
    # 512 MiB per array: ten times the H200's 50 MB L2, so DRAM is measured, and half the
    # host work of 1 GiB (filling and copying the inputs is most of this cell's time)
    n = n or 2**27
    gen = np.random.default_rng(1)
    ha = gen.random(n, dtype=np.float32)  # uniform: a third of standard_normal's host time
    hb = gen.random(n, dtype=np.float32)
    a, b = cuda.to_device(ha), cuda.to_device(hb)
    out = cuda.device_array(n, np.float32)
    copy_dst = cuda.device_array(n, np.float32)
    def seconds(fn) -> float:  # 5 calls per sample: Python's launch cost overlaps the GPU's work
        return event_median(fn, repeats, inner=5) / 1e3

    result = {"copy": 8 * n / seconds(lambda: copy_dst.copy_to_device(a)) / 1e9}
    # both ends, contiguous (a device slice copies only itself): a wrong index or a missed
    # tail shows there, without a 512 MiB copy back per variant
    m = min(n, 1 << 16)
    want = np.concatenate([ha[:m] + hb[:m], ha[n - m:] + hb[n - m:]])
    poison = np.full(m, np.nan, np.float32)
    for v in VARIANTS:
        out[:m].copy_to_device(poison)  # nothing left from the previous variant counts
        out[n - m:].copy_to_device(poison)
        vector_add(a, b, out, variant=v)
        got = np.concatenate([out[:m].copy_to_host(), out[n - m:].copy_to_host()])
        if not np.allclose(got, want):
            raise AssertionError(f"variant {v} is wrong")
        result[v] = 12 * n / seconds(lambda: vector_add(a, b, out, variant=v)) / 1e9
    return result
