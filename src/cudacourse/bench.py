"""``cudacourse bench``: the course's kernels against ceilings measured in the same run.

Every kernel is compared with a ceiling measured minutes apart on the same GPU, never with a
datasheet figure: memory-bound kernels with a device-to-device copy (bytes read + written
per second), matmul with cuBLAS SGEMM through CuPy, and each kernel with its CuPy (and
PyTorch, when installed) equivalent. For every measurement:

1. fresh inputs (random, never zeros), sized to fill the GPU and to exceed its L2 cache;
2. one run, then a correctness check against a reference (the CuPy result, or a float64
   reference on a sample of rows). A wrong kernel is reported as FAILED and never timed;
3. warm-up, then the median of CUDA-event-timed repeats queued back to back (so Python's
   launch overhead overlaps the previous kernel instead of being counted).

In the simulator, timings mean nothing: the command runs a tiny correctness smoke pass and
reports no times and no ratios.

    cudacourse bench [--only NAME[,NAME]] [--list] [--size full|small]
                     [--json PATH] [--markdown PATH] [--plot PATH]
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import platform
import shlex
import statistics
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import device

SCHEMA = "cudacourse-bench/1"
SIM_NOTE = ("simulator mode: timings mean nothing here (every GPU thread is a Python call on "
            "the CPU), so this is only a correctness smoke pass on tiny inputs: no times, no "
            "ratios. Run on an NVIDIA GPU for the real benchmark.")
GPU_MARKER = "<!-- cudacourse-bench mode=gpu -->"

# Problem sizes per mode. "full" fills an H200 and exceeds its 50-60 MB L2 many times over.
SIZES: dict[str, dict[str, Any]] = {
    "full": {"copy": 2**28, "vector": 2**28, "sum": 2**28, "transpose": (16384, 16384),
             "matmul": (4096, 4096, 4096), "attention": (16, 4096, 64),
             "attention_memory": (16, 16384, 64)},
    "small": {"copy": 2**22, "vector": 2**20 + 3, "sum": 2**20 + 3, "transpose": (1000, 1027),
              "matmul": (300, 257, 263), "attention": (2, 300, 64),
              "attention_memory": (2, 1024, 64)},
    "sim": {"copy": 4096, "vector": 1003, "sum": 2051, "transpose": (40, 33),
            "matmul": (33, 20, 31), "attention": (1, 24, 64), "attention_memory": None},
}


class Missing(Exception):
    """A module or function this entry needs is not written yet."""


class Skipped(Exception):
    """This entry cannot run here (no CuPy, no PyTorch, not enough memory...)."""


# --- what one run of the bench collects -----------------------------------------------------

@dataclass
class Prepared:
    """A case ready to run: inputs allocated, a launcher, and a check of its output."""

    run: Callable[[], Any]  # launch once, asynchronously (no host sync)
    check: Callable[[], None]  # after a synchronised run: raise AssertionError if wrong
    bytes: float = 0.0  # compulsory bytes moved by one run (reads + writes)
    flops: float = 0.0
    shape: str = ""
    value: Callable[[], float] | None = None  # a measured quantity instead of a time


@dataclass
class Case:
    """One measurement: ``name`` is how JSON and tables call it."""

    name: str
    label: str
    prepare: Callable[["Ctx"], Prepared]
    ratio: str | None = None  # the JSON ratio this measurement feeds
    vs: str | None = None  # the measurement it is divided by (None: a value)
    kind: str = "memory"  # "memory": rate in bytes/s, "compute": rate in flop/s
    needs: str = "course"  # "course", "cupy" or "torch"


@dataclass
class Measurement:
    name: str
    label: str
    kind: str
    status: str = "ok"  # ok, FAILED, missing, skipped
    detail: str = ""
    ratio: str | None = None
    vs: str | None = None
    shape: str = ""
    bytes: float = 0.0
    flops: float = 0.0
    times_ms: list[float] = field(default_factory=list)
    value: float | None = None

    @property
    def median_ms(self) -> float | None:
        return statistics.median(self.times_ms) if self.times_ms else None

    def rate(self, kind: str | None = None) -> float | None:
        """Bytes/s ("memory") or flop/s ("compute") achieved, from the median time."""
        t = self.median_ms
        work = self.bytes if (kind or self.kind) == "memory" else self.flops
        return work / (t / 1e3) if t and work else None


# --- arrays: CuPy on a GPU, NumPy + Numba device arrays in the simulator --------------------

class Ctx:
    """Where inputs come from and how results are read back, in the current mode."""

    def __init__(self, size: str, seed: int | None = None):
        self.sim = device.is_simulator()
        self.size = "sim" if self.sim else size
        self.sizes = SIZES[self.size]
        self.seed = seed if seed is not None else int.from_bytes(os.urandom(4), "little")
        self._memo: dict[str, Any] = {}
        self._family = ""
        if self.sim:
            self.xp = np
            self._gen = np.random.default_rng(self.seed)
        else:
            import cupy as cp

            self.xp = cp
            self._gen = cp.random.default_rng(self.seed)

    # inputs
    def uniform(self, shape: Any, low: float = 0.5, high: float = 1.5) -> Any:
        """float32 values in [low, high): fresh each run, never all zeros or ones."""
        x = self._gen.random(shape, dtype=np.float32)
        return x * np.float32(high - low) + np.float32(low)

    def output(self, shape: Any) -> Any:
        """A device output array poisoned with NaN, so unwritten elements show."""
        if self.sim:
            from numba import cuda

            return cuda.to_device(np.full(shape, np.nan, np.float32))
        return self.dev(self.xp.full(shape, np.nan, np.float32))

    def poison(self, dev_array: Any) -> None:
        if self.sim:
            dev_array.copy_to_device(np.full(dev_array.shape, np.nan, np.float32))
        else:
            self.xp.asarray(dev_array).fill(np.nan)

    def dev(self, x: Any) -> Any:
        """A Numba device array for ``x`` (no copy on a GPU: it shares CuPy's memory)."""
        from numba import cuda

        return cuda.to_device(x) if self.sim else cuda.as_cuda_array(x)

    def read(self, dev_array: Any) -> Any:
        """A device result as an ``xp`` array (host copy in the simulator, a view on a GPU)."""
        return dev_array.copy_to_host() if self.sim else self.xp.asarray(dev_array)

    def memo(self, key: str, make: Callable[[], Any]) -> Any:
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    def enter(self, family: str) -> None:
        """Free the previous family's arrays before allocating the next one's."""
        if family != self._family:
            self._memo.clear()
            self._family = family
            if not self.sim:
                self.xp.get_default_memory_pool().free_all_blocks()

    def sync(self) -> None:
        from numba import cuda

        cuda.synchronize()


# --- correctness ------------------------------------------------------------------------------

def assert_close(ctx: Ctx, got: Any, want: Any, what: str, rtol: float = 1e-5,
                 atol: float = 0.0, scale: Any = None) -> None:
    """Raise AssertionError naming how many values of ``got`` are wrong, and the first one.

    ``scale`` (same shape as want) replaces ``|want|`` in the relative tolerance: for sums of
    many terms, the sum of the absolute values of the terms.
    """
    xp = ctx.xp
    got = xp.asarray(got).astype(xp.float64)
    want = xp.asarray(want).astype(xp.float64)
    if tuple(got.shape) != tuple(want.shape):
        raise AssertionError(f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}")
    ref = xp.abs(want) if scale is None else scale
    bad = ~(xp.abs(got - want) <= atol + rtol * ref)  # NaN (unwritten) counts as bad
    nbad = int(bad.sum())
    if nbad:
        first = int(xp.flatnonzero(bad.ravel())[0])
        idx = tuple(int(i) for i in np.unravel_index(first, tuple(want.shape)))
        raise AssertionError(
            f"{what} is wrong: {nbad} of {want.size} values differ from the reference, the "
            f"first at {idx}: got {float(got[idx]):.6g}, expected {float(want[idx]):.6g}")


def _sample_rows(ctx: Ctx, m: int, count: int = 64) -> Any:
    """Row indices to check: the first, the last, and random ones between."""
    rows = np.unique(np.concatenate([[0, m - 1], np.random.default_rng(ctx.seed).integers(
        0, m, size=min(count, m))]))
    return ctx.xp.asarray(rows)


def _need(module: str, *names: str) -> Any:
    """Import ``module`` and check it has ``names``; raise Missing (not a crash) if not."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            raise Missing(f"{module} is not written yet") from None
        raise
    absent = [n for n in names if not hasattr(mod, n)]
    if absent:
        raise Missing(f"{module} has no {', '.join(absent)} yet")
    return mod


# --- the entries --------------------------------------------------------------------------------

def _copy_cases(ctx: Ctx) -> list[Case]:
    def prepare(ctx: Ctx) -> Prepared:
        from numba import cuda

        n = ctx.sizes["copy"]
        src = ctx.dev(ctx.uniform(n))
        dst = ctx.output(n)
        stream = cuda.default_stream()

        def check() -> None:
            assert_close(ctx, ctx.read(dst), ctx.read(src), "the copy", rtol=0.0)

        return Prepared(lambda: dst.copy_to_device(src, stream=stream), check,
                        bytes=8.0 * n, shape=f"{n:,} float32 ({4 * n / 2**30:.2f} GiB)")

    return [Case("copy", "device-to-device copy (cudaMemcpy)", prepare)]


def _matmul_inputs(ctx: Ctx) -> tuple[Any, Any]:
    m, k, n = ctx.sizes["matmul"]
    return ctx.memo("matmul", lambda: (ctx.uniform((m, k), -1.0, 1.0),
                                       ctx.uniform((k, n), -1.0, 1.0)))


def _check_matmul(ctx: Ctx, a: Any, b: Any, got: Any, what: str) -> None:
    """Compare sampled rows with a float64 product; tolerance scaled by |a| @ |b|."""
    xp = ctx.xp
    rows = _sample_rows(ctx, a.shape[0])
    a64, b64 = a[rows].astype(xp.float64), b.astype(xp.float64)
    want = a64 @ b64
    scale = xp.abs(a64) @ xp.abs(b64)
    assert_close(ctx, got[rows], want, what, rtol=1e-4, scale=scale)


def _matmul_work(ctx: Ctx) -> dict:
    m, k, n = ctx.sizes["matmul"]
    return dict(flops=2.0 * m * k * n, bytes=4.0 * (m * k + k * n + m * n),
                shape=f"{m}x{k} @ {k}x{n} float32")


def _cublas_cases(ctx: Ctx) -> list[Case]:
    def prepare(ctx: Ctx) -> Prepared:
        a, b = _matmul_inputs(ctx)
        m, n = a.shape[0], b.shape[1]
        c = ctx.xp.full((m, n), np.nan, np.float32)
        return Prepared(lambda: ctx.xp.matmul(a, b, out=c),
                        lambda: _check_matmul(ctx, a, b, c, "cuBLAS SGEMM"), **_matmul_work(ctx))

    return [Case("cublas_sgemm", "cuBLAS SGEMM (CuPy matmul)", prepare, kind="compute",
                 needs="cupy")]


def _matmul_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.matmul", "matmul", "MATMUL_VARIANTS")

    def case(variant: str) -> Case:
        def prepare(ctx: Ctx) -> Prepared:
            a, b = _matmul_inputs(ctx)
            da, db = ctx.dev(a), ctx.dev(b)
            out = ctx.output((a.shape[0], b.shape[1]))
            return Prepared(lambda: mod.matmul(da, db, out=out, variant=variant),
                            lambda: _check_matmul(ctx, a, b, ctx.read(out),
                                                  f"matmul variant {variant!r}"),
                            **_matmul_work(ctx))

        label = f"Numba matmul, {variant}"
        if variant == "best" and hasattr(mod, "BEST"):
            label += f" ({mod.BEST})"
        return Case(f"matmul_{variant}", label, prepare,
                    ratio=f"matmul_{variant}_vs_cublas", vs="cublas_sgemm", kind="compute")

    return [case(v) for v in (*mod.MATMUL_VARIANTS, "best")]


def _vector_inputs(ctx: Ctx) -> tuple[Any, Any, Any]:
    n = ctx.sizes["vector"]
    return ctx.memo("vector", lambda: (ctx.uniform(n), ctx.uniform(n), ctx.output(n)))


def _vector_work(ctx: Ctx) -> dict:
    n = ctx.sizes["vector"]
    return dict(bytes=12.0 * n, flops=float(n), shape=f"{n:,} float32")


def _vector_add_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.vector", "vector_add", "VARIANTS")

    def case(variant: str) -> Case:
        name = "vector_add" if variant == "simple" else f"vector_add_{variant}"

        def prepare(ctx: Ctx) -> Prepared:
            a, b, out = _vector_inputs(ctx)
            da, db = ctx.dev(a), ctx.dev(b)
            ctx.poison(out)
            want = a + b  # the reference: NumPy in the simulator, CuPy on a GPU

            def check() -> None:
                assert_close(ctx, ctx.read(out), want, f"vector_add variant {variant!r}",
                             rtol=0.0)

            return Prepared(lambda: mod.vector_add(da, db, out, variant=variant), check,
                            **_vector_work(ctx))

        label = "Numba vector add, " + ("one element per thread" if variant == "simple"
                                        else variant)
        if variant == "best" and hasattr(mod, "BEST"):
            label += f" ({getattr(mod.BEST, 'name', mod.BEST)})"
        return Case(name, label, prepare, ratio=f"{name}_vs_copy", vs="copy")

    return [case(v) for v in (*mod.VARIANTS, "best")]


def _library_add_cases(lib: str) -> Callable[[Ctx], list[Case]]:
    def cases(ctx: Ctx) -> list[Case]:
        def prepare(ctx: Ctx) -> Prepared:
            a, b, out = _vector_inputs(ctx)
            ctx.poison(out)
            want = a + b
            if lib == "cupy":
                xout = ctx.xp.asarray(out)

                def run() -> Any:
                    return ctx.xp.add(a, b, out=xout)
            else:
                torch = _torch()
                ta, tb, tout = (torch.as_tensor(x, device="cuda") for x in (a, b, ctx.xp.asarray(out)))

                def run() -> Any:
                    return torch.add(ta, tb, out=tout)

            return Prepared(run, lambda: assert_close(ctx, ctx.read(out), want, f"{lib} add",
                                                      rtol=0.0), **_vector_work(ctx))

        title = {"cupy": "CuPy", "torch": "PyTorch"}[lib]
        return [Case(f"{lib}_add", f"{title} add", prepare, ratio=f"{lib}_add_vs_copy",
                     vs="copy", needs=lib)]

    return cases


def _sum_work(ctx: Ctx) -> dict:
    n = ctx.sizes["sum"]
    return dict(bytes=4.0 * n, flops=float(n), shape=f"{n:,} float32")


def _check_sum(ctx: Ctx, x: Any, got: Any, what: str) -> None:
    xp = ctx.xp
    want = x.astype(xp.float64).sum().reshape(1)
    scale = xp.abs(x).astype(xp.float64).sum().reshape(1)
    assert_close(ctx, xp.asarray(got).reshape(1), want, what, rtol=1e-5, scale=scale)


def _reduce_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.reduce", "reduce_sum_into", "reduce_sum")

    def prepare(ctx: Ctx) -> Prepared:
        x = ctx.memo("sum", lambda: ctx.uniform(ctx.sizes["sum"]))
        dx = ctx.dev(x)
        out = ctx.output(1)
        return Prepared(lambda: mod.reduce_sum_into(dx, out),
                        lambda: _check_sum(ctx, x, ctx.read(out), "reduce_sum_into"),
                        **_sum_work(ctx))

    return [Case("reduce_sum", "Numba sum (reduce_sum_into)", prepare,
                 ratio="reduce_sum_vs_copy", vs="copy")]


def _library_sum_cases(lib: str) -> Callable[[Ctx], list[Case]]:
    def cases(ctx: Ctx) -> list[Case]:
        def prepare(ctx: Ctx) -> Prepared:
            x = ctx.memo("sum", lambda: ctx.uniform(ctx.sizes["sum"]))
            if lib == "cupy":
                out = ctx.xp.full((), np.nan, np.float32)

                def run() -> Any:
                    return ctx.xp.sum(x, out=out)

                def result() -> Any:
                    return out
            else:
                torch = _torch()
                tx = torch.as_tensor(x, device="cuda")
                tout = torch.full((), float("nan"), dtype=torch.float32, device="cuda")

                def run() -> Any:
                    return torch.sum(tx, dim=0, out=tout)

                def result() -> Any:
                    return ctx.xp.asarray([tout.item()], dtype=np.float32)

            return Prepared(run, lambda: _check_sum(ctx, x, result(), f"{lib} sum"),
                            **_sum_work(ctx))

        title = {"cupy": "CuPy", "torch": "PyTorch"}[lib]
        return [Case(f"{lib}_sum", f"{title} sum", prepare, ratio=f"{lib}_sum_vs_copy",
                     vs="copy", needs=lib)]

    return cases


def _transpose_work(ctx: Ctx) -> dict:
    m, n = ctx.sizes["transpose"]
    return dict(bytes=8.0 * m * n, shape=f"{m}x{n} float32")


def _transpose_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.transpose", "transpose")
    variants = tuple(getattr(mod, "TRANSPOSE_VARIANTS", ())) + ("best",)

    def case(variant: str) -> Case:
        def prepare(ctx: Ctx) -> Prepared:
            m, n = ctx.sizes["transpose"]
            x = ctx.memo("transpose", lambda: ctx.uniform((m, n)))
            dx, out = ctx.dev(x), ctx.output((n, m))
            return Prepared(lambda: mod.transpose(dx, out=out, variant=variant),
                            lambda: assert_close(ctx, ctx.read(out), x.T,
                                                 f"transpose variant {variant!r}", rtol=0.0),
                            **_transpose_work(ctx))

        name = "transpose" if variant == "best" else f"transpose_{variant}"
        label = f"Numba transpose, {variant}"
        if variant == "best" and hasattr(mod, "BEST"):
            label += f" ({mod.BEST})"
        return Case(name, label, prepare, ratio=f"{name}_vs_copy",
                    vs="copy")

    return [case(v) for v in variants]


def _cupy_transpose_cases(ctx: Ctx) -> list[Case]:
    def prepare(ctx: Ctx) -> Prepared:
        m, n = ctx.sizes["transpose"]
        x = ctx.memo("transpose", lambda: ctx.uniform((m, n)))
        out = ctx.xp.full((n, m), np.nan, np.float32)
        return Prepared(lambda: ctx.xp.copyto(out, x.T),
                        lambda: assert_close(ctx, out, x.T, "CuPy transpose", rtol=0.0),
                        **_transpose_work(ctx))

    return [Case("cupy_transpose", "CuPy transpose (copy of x.T)", prepare,
                 ratio="cupy_transpose_vs_copy", vs="copy", needs="cupy")]


def _attention_inputs(ctx: Ctx, shape: tuple[int, int, int]) -> tuple[Any, Any, Any]:
    """q, k in [-2, 2) (scores spread enough that the softmax is far from uniform, so a
    kernel that drops or repeats keys shows), v in [-1, 1)."""
    return ctx.memo(f"attention{shape}", lambda: (ctx.uniform(shape, -2.0, 2.0),
                                                  ctx.uniform(shape, -2.0, 2.0),
                                                  ctx.uniform(shape, -1.0, 1.0)))


def _check_attention(ctx: Ctx, q: Any, k: Any, v: Any, got: Any, what: str) -> None:
    """Compare the first and last heads on sampled query rows with a float64 softmax."""
    xp = ctx.xp
    h, s, d = q.shape
    rows = _sample_rows(ctx, s)
    for head in sorted({0, h - 1}):
        qh = q[head][rows].astype(xp.float64)
        kh, vh = k[head].astype(xp.float64), v[head].astype(xp.float64)
        scores = qh @ kh.T / math.sqrt(d)
        p = xp.exp(scores - scores.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        assert_close(ctx, got[head][rows], p @ vh, f"{what} (head {head})", rtol=1e-3,
                     atol=1e-4)


def _attention_work(shape: tuple[int, int, int]) -> dict:
    h, s, d = shape
    return dict(flops=4.0 * h * s * s * d, bytes=16.0 * h * s * d,
                shape=f"{h} heads x {s} x {d} float32")


def _attention_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.attention", "flash_attention", "attention_unfused")
    shape = ctx.sizes["attention"]

    def fused(ctx: Ctx) -> Prepared:
        q, k, v = _attention_inputs(ctx, shape)
        dq, dk, dv = (ctx.dev(t) for t in (q, k, v))
        out = ctx.output(shape)
        return Prepared(lambda: mod.flash_attention(dq, dk, dv, out=out),
                        lambda: _check_attention(ctx, q, k, v, ctx.read(out), "flash_attention"),
                        **_attention_work(shape))

    def unfused(ctx: Ctx) -> Prepared:
        q, k, v = _attention_inputs(ctx, shape)
        result: list[Any] = []

        def run() -> Any:
            result[:] = [mod.attention_unfused(q, k, v)]

        return Prepared(run, lambda: _check_attention(ctx, q, k, v, result[0],
                                                      "attention_unfused"),
                        **_attention_work(shape))

    return [Case("attention_unfused", "attention, unfused (CuPy: cuBLAS + softmax)", unfused,
                 kind="compute", needs="cupy"),
            Case("attention_fused", "attention, fused (Numba flash_attention)", fused,
                 ratio="attention_fused_vs_unfused", vs="attention_unfused", kind="compute")]


def extra_memory_gib(fn: Callable[[], Any], keep_bytes: int = 0) -> float:
    """GiB of device memory ``fn()`` takes beyond ``keep_bytes`` (what it returns). GPU only.

    Numba's deallocations are deferred for the call and CuPy's pool keeps freed blocks, so
    the drop in free memory is the memory the call needed (an upper bound of its peak).
    """
    from numba import cuda

    import cupy as cp

    cp.get_default_memory_pool().free_all_blocks()
    cuda.synchronize()
    ctx = cuda.current_context()
    with cuda.defer_cleanup():
        free_before = ctx.get_memory_info().free
        result = fn()
        cuda.synchronize()
        free_after = ctx.get_memory_info().free
        del result
    cp.get_default_memory_pool().free_all_blocks()
    return max(0, free_before - free_after - keep_bytes) / 2**30


def _attention_memory_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.attention", "flash_attention", "attention_unfused")
    shape = ctx.sizes["attention_memory"]
    if shape is None:
        raise Skipped("memory is measured on a GPU only")
    h, s, d = shape
    out_bytes = 4 * h * s * d

    def fused(ctx: Ctx) -> Prepared:
        q, k, v = _attention_inputs(ctx, shape)
        dq, dk, dv = (ctx.dev(t) for t in (q, k, v))
        out = ctx.output(shape)
        return Prepared(lambda: mod.flash_attention(dq, dk, dv, out=out),
                        lambda: _check_attention(ctx, q, k, v, ctx.read(out), "flash_attention"),
                        shape=f"{h} heads x {s} x {d}",
                        value=lambda: extra_memory_gib(
                            lambda: mod.flash_attention(dq, dk, dv, out=out)))

    def unfused(ctx: Ctx) -> Prepared:
        q, k, v = _attention_inputs(ctx, shape)
        result: list[Any] = []

        def run() -> Any:
            result[:] = [mod.attention_unfused(q, k, v)]

        return Prepared(run, lambda: _check_attention(ctx, q, k, v, result.pop(),
                                                      "attention_unfused"),
                        shape=f"{h} heads x {s} x {d}",
                        value=lambda: extra_memory_gib(lambda: mod.attention_unfused(q, k, v),
                                                       keep_bytes=out_bytes))

    return [Case(f"attention_fused_extra_memory_s{s}", "fused attention: extra GiB", fused,
                 ratio=f"attention_fused_extra_gib_s{s}", kind="value"),
            Case(f"attention_unfused_extra_memory_s{s}", "unfused attention: extra GiB", unfused,
                 ratio=f"attention_unfused_extra_gib_s{s}", kind="value", needs="cupy")]


@dataclass(frozen=True)
class Entry:
    name: str
    help: str
    family: str  # entries of one family share inputs; memory is freed between families
    cases: Callable[[Ctx], list[Case]]
    ceiling: str | None = None  # the entry whose measurement its ratios divide by


ENTRIES: dict[str, Entry] = {e.name: e for e in [
    Entry("copy", "ceiling: device-to-device copy bandwidth (bytes read + written)", "copy",
          _copy_cases),
    Entry("vector_add", "Numba vector add, every variant and the best one", "vector",
          _vector_add_cases, "copy"),
    Entry("cupy_add", "CuPy's add on the same arrays", "vector", _library_add_cases("cupy"),
          "copy"),
    Entry("torch_add", "PyTorch's add on the same arrays (when installed)", "vector",
          _library_add_cases("torch"), "copy"),
    Entry("reduce_sum", "Numba sum (cudacourse.reduce.reduce_sum_into)", "sum", _reduce_cases,
          "copy"),
    Entry("cupy_sum", "CuPy's sum", "sum", _library_sum_cases("cupy"), "copy"),
    Entry("torch_sum", "PyTorch's sum (when installed)", "sum", _library_sum_cases("torch"),
          "copy"),
    Entry("transpose", "Numba transpose, every variant (cudacourse.transpose)", "transpose",
          _transpose_cases, "copy"),
    Entry("cupy_transpose", "CuPy transpose (a copy of x.T)", "transpose", _cupy_transpose_cases,
          "copy"),
    Entry("cublas", "ceiling: cuBLAS SGEMM through CuPy", "matmul", _cublas_cases),
    Entry("matmul", "Numba matmul, every variant and the best one", "matmul", _matmul_cases,
          "cublas"),
    Entry("attention", "fused (Numba) vs unfused (CuPy) attention", "attention",
          _attention_cases),
    Entry("attention_memory", "extra device memory of fused and unfused attention, long "
          "sequence", "attention_memory", _attention_memory_cases),
]}


def select(only: str | None) -> list[str]:
    """Entry names to run, in registry order, with the ceilings they need."""
    if not only:
        return list(ENTRIES)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in ENTRIES]
    if unknown:
        raise ValueError(f"unknown benchmark {', '.join(unknown)}; choose from "
                         f"{', '.join(ENTRIES)} (see --list)")
    needed = set(wanted) | {ENTRIES[w].ceiling for w in wanted if ENTRIES[w].ceiling}
    return [name for name in ENTRIES if name in needed]


# --- running ------------------------------------------------------------------------------------

def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise Skipped("PyTorch is not installed") from None
    if not torch.cuda.is_available():
        raise Skipped("PyTorch cannot use the GPU (torch.cuda.is_available() is False)")
    return torch


def event_times(fn: Callable[[], Any], repeats: int = 20, warmup: int = 2,
                budget_s: float = 2.0) -> list[float]:
    """Milliseconds of each of up to ``repeats`` runs of ``fn``, from CUDA events. GPU only.

    All runs are queued back to back and synchronised once, so that while Python launches
    run i+1, the GPU is still busy with run i: the events time the GPU's work, not Python.
    """
    from numba import cuda

    for _ in range(warmup):
        fn()
    start, stop = cuda.event(timing=True), cuda.event(timing=True)
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    first = cuda.event_elapsed_time(start, stop)
    repeats = max(3, min(repeats, int(budget_s * 1e3 / max(first, 1e-3))))
    events = [(cuda.event(timing=True), cuda.event(timing=True)) for _ in range(repeats)]
    for s, e in events:
        s.record()
        fn()
        e.record()
    events[-1][1].synchronize()
    return [cuda.event_elapsed_time(s, e) for s, e in events]


def run_case(case: Case, ctx: Ctx, timer: Callable[[Callable[[], Any]], list[float]] | None
             ) -> Measurement:
    """Prepare, run once, check; time only what passed the check (and only with a timer)."""
    m = Measurement(case.name, case.label, case.kind, ratio=case.ratio, vs=case.vs)
    try:
        if case.needs != "course" and ctx.sim:
            raise Skipped(f"{'CuPy' if case.needs == 'cupy' else 'PyTorch'} needs a real GPU")
        if case.needs == "torch":
            _torch()
        prep = case.prepare(ctx)
        m.bytes, m.flops, m.shape = prep.bytes, prep.flops, prep.shape
        prep.run()
        ctx.sync()
        prep.check()
        if prep.value is not None:
            if not ctx.sim:  # device memory figures exist on a GPU only
                m.value = float(prep.value())
        elif timer is not None:  # the simulator passes none: its timings mean nothing
            m.times_ms = [float(t) for t in timer(prep.run)]
    except Missing as exc:
        m.status, m.detail = "missing", str(exc)
    except Skipped as exc:
        m.status, m.detail = "skipped", str(exc)
    except AssertionError as exc:
        m.status, m.detail = "FAILED", str(exc) or "wrong result"
    except Exception as exc:  # noqa: BLE001 - any crash of a kernel is its failure
        if "out of memory" in str(exc).lower():
            m.status, m.detail = "skipped", f"not enough GPU memory: {exc}"
        else:
            m.status, m.detail = "FAILED", f"{type(exc).__name__}: {exc}"
    return m


def plan(names: list[str], ctx: Ctx) -> list[tuple[Entry, Case | Measurement]]:
    """The cases of the chosen entries; an entry that cannot start gives one Measurement."""
    steps: list[tuple[Entry, Case | Measurement]] = []
    for name in names:
        entry = ENTRIES[name]
        try:
            steps.extend((entry, c) for c in entry.cases(ctx))
        except (Missing, Skipped) as exc:
            status = "missing" if isinstance(exc, Missing) else "skipped"
            steps.append((entry, Measurement(name, entry.help, "memory", status, str(exc))))
        except Exception as exc:  # noqa: BLE001 - e.g. a module that fails to import
            steps.append((entry, Measurement(name, entry.help, "memory", "FAILED",
                                             f"{type(exc).__name__}: {exc}")))
    return steps


def run(names: list[str], ctx: Ctx, repeats: int = 20, progress: bool = True
        ) -> dict[str, Measurement]:
    from tqdm.auto import tqdm

    steps = plan(names, ctx)
    timer = None if ctx.sim else (lambda fn: event_times(fn, repeats=repeats))
    results: dict[str, Measurement] = {}
    with tqdm(total=len(steps), desc="bench", unit="kernel", file=sys.stderr,
              disable=not progress) as bar:
        for entry, step in steps:
            bar.set_postfix_str(step.name)
            if isinstance(step, Measurement):
                results[step.name] = step
            else:
                ctx.enter(entry.family)
                results[step.name] = run_case(step, ctx, timer)
            bar.update()
    ctx.enter("")
    return results


# --- the report: ratios, environment, JSON, markdown, table ----------------------------------

def ratios(measurements: dict[str, Measurement]) -> tuple[dict[str, float], dict[str, str]]:
    """(JSON ratio name -> value, ratio name -> why it has no value)."""
    values: dict[str, float] = {}
    problems: dict[str, str] = {}
    for m in measurements.values():
        if not m.ratio:
            continue
        if m.status != "ok":
            problems[m.ratio] = f"{m.status}: {m.detail}"
            continue
        if m.vs is None:
            if m.value is not None:
                values[m.ratio] = m.value
            continue
        d = measurements.get(m.vs)
        if d is None or d.status != "ok":
            problems[m.ratio] = (f"{m.vs} was not measured" if d is None
                                 else f"{m.vs} {d.status}: {d.detail}")
            continue
        num, den = m.rate(d.kind), d.rate()
        if num and den:
            values[m.ratio] = num / den
    return values, problems


def _v(pkg: str) -> str | None:
    try:
        return version(pkg)
    except PackageNotFoundError:
        return None


def environment() -> dict[str, Any]:
    """GPU, driver, CUDA and library versions, for the record."""
    import shutil
    import subprocess

    choice = device.current()
    env: dict[str, Any] = {"mode": choice.mode, "python": platform.python_version(),
                           "platform": platform.platform()}
    if choice.gpu is not None:
        g = choice.gpu
        env.update(gpu=g.name, compute_capability=".".join(map(str, g.compute_capability)),
                   sm_count=g.sm_count, memory_gib=round(g.total_memory / 2**30, 1),
                   cuda_driver_api=f"{g.driver_version[0]}.{g.driver_version[1]}")
        smi = shutil.which("nvidia-smi")
        if smi:
            out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True)
            if out.returncode == 0 and out.stdout.strip():
                env["driver"] = out.stdout.strip().splitlines()[0]
        try:
            from numba import cuda

            env["cuda_runtime"] = ".".join(map(str, cuda.runtime.get_version()))
        except Exception:  # noqa: BLE001 - informational only
            pass
    libs = {}
    for pkg in ("numpy", "numba", "numba-cuda", "cupy-cuda13x", "cupy-cuda12x", "cupy", "torch",
                "tqdm", "cudacourse"):
        v = _v(pkg)
        if v:
            libs[pkg] = v
    env["libraries"] = libs
    return env


def build_report(measurements: dict[str, Measurement], *, command: str, size: str,
                 seed: int, repeats: int, env: dict[str, Any] | None = None,
                 date: str | None = None) -> dict[str, Any]:
    """The JSON document. In the simulator: statuses only, no times and no ratios."""
    env = env if env is not None else environment()
    date = date or datetime.now(timezone.utc).isoformat(timespec="seconds")
    mode = env.get("mode", device.mode())
    base = {"schema": SCHEMA, "mode": mode, "date": date, "command": command,
            "environment": env}
    if mode == "sim":
        return {**base, "note": SIM_NOTE,
                "smoke": {m.name: m.status + (f": {m.detail}" if m.detail else "")
                          for m in measurements.values()}}
    vals, problems = ratios(measurements)
    copy, cublas = measurements.get("copy"), measurements.get("cublas_sgemm")
    ceilings = {}
    if copy and copy.status == "ok":
        ceilings["copy_gb_s"] = copy.rate() / 1e9
    if cublas and cublas.status == "ok":
        ceilings["cublas_sgemm_tflop_s"] = cublas.rate() / 1e12
    meas = {}
    for m in measurements.values():
        d = {k: v for k, v in asdict(m).items() if k not in ("name",)}
        d["median_ms"] = m.median_ms
        if m.median_ms:
            d["gb_s"] = m.rate("memory") / 1e9 if m.bytes else None
            d["tflop_s"] = m.rate("compute") / 1e12 if m.flops else None
        meas[m.name] = d
    return {**base, "size": size, "seed": seed, "repeats": repeats,
            "timing": ("CUDA events around each run, runs queued back to back, median after "
                       "2 warm-up runs; correctness checked before timing"),
            "ceilings": ceilings, "ratios": vals, "problems": problems, "measurements": meas}


def _fmt_time(ms: float | None) -> str:
    return "" if ms is None else (f"{ms:.3f}" if ms < 10 else f"{ms:.1f}")


def table_rows(report: dict[str, Any]) -> list[list[str]]:
    """kernel, size, time, achieved, compared with, ratio: one row per measurement."""
    rows = []
    by_ratio = report.get("ratios", {})
    for name, m in report.get("measurements", {}).items():
        if m["status"] != "ok":
            rows.append([m["label"], m["shape"], m["status"], m["detail"][:90], "", ""])
            continue
        if m["kind"] == "value":
            rows.append([m["label"], m["shape"], "", f"{m['value']:.2f} GiB", "", ""])
            continue
        rate = m.get("tflop_s") if m["kind"] == "compute" else m.get("gb_s")
        achieved = "" if rate is None else (f"{rate:.2f} TFLOP/s" if m["kind"] == "compute"
                                            else f"{rate:.0f} GB/s")
        r = by_ratio.get(m["ratio"]) if m["ratio"] else None
        rows.append([m["label"], m["shape"], _fmt_time(m["median_ms"]), achieved,
                     m["vs"] or "", "" if r is None else f"{r:.2f}"])
    return rows


HEADER = ["kernel", "size", "median ms", "achieved", "vs", "ratio"]


def format_table(report: dict[str, Any]) -> str:
    if report["mode"] == "sim":
        lines = [f"{'kernel':<40} result"]
        lines += [f"{k:<40} {v}" for k, v in report["smoke"].items()]
        return "\n".join(lines)
    rows = [HEADER] + table_rows(report)
    widths = [min(46, max(len(r[i]) for r in rows)) for i in range(len(HEADER))]
    return "\n".join("  ".join(c[:w].ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in rows)


def to_markdown(report: dict[str, Any]) -> str:
    """The committed table: what was measured, where, when, with what, by which command."""
    env = report["environment"]
    libs = ", ".join(f"{k} {v}" for k, v in env.get("libraries", {}).items())
    lines = []
    if report["mode"] == "sim":
        lines += ["# Benchmarks: simulator smoke pass (no timings)", "", SIM_NOTE, "",
                  f"Run on {report['date']} with `{report['command']}`.", "",
                  "| kernel | result |", "| --- | --- |"]
        lines += [f"| {k} | {v.replace('|', '/')} |" for k, v in report["smoke"].items()]
        return "\n".join(lines) + "\n"
    gpu = env.get("gpu", "unknown GPU")
    lines += [GPU_MARKER, "# Benchmarks: the course's kernels against measured ceilings", "",
              f"Measured on an **{gpu}** on {report['date'][:10]} ({report['date']} UTC), "
              "written by the command below. Every ratio divides by a ceiling measured in the "
              "same run: the device-to-device copy for memory-bound kernels, cuBLAS SGEMM for "
              "matmul. The copy (cudaMemcpy) is a practical ceiling, not a physical one: a "
              "kernel with enough bytes in flight can beat it by a few percent, so ratios "
              "slightly above 1 are real.", "",
              "| | |", "| --- | --- |",
              f"| GPU | {gpu} (compute capability {env.get('compute_capability', '?')}, "
              f"{env.get('sm_count', '?')} SMs, {env.get('memory_gib', '?')} GiB) |",
              f"| driver | {env.get('driver', 'unknown')} (supports CUDA "
              f"{env.get('cuda_driver_api', '?')}) |",
              f"| CUDA runtime (Numba) | {env.get('cuda_runtime', 'unknown')} |",
              f"| Python | {env.get('python')} |",
              f"| libraries | {libs} |",
              f"| command | `{report['command']}` |",
              f"| method | {report['timing']}; up to {report['repeats']} repeats; "
              f"sizes `{report['size']}`, seed {report['seed']} |", ""]
    ceil = report.get("ceilings", {})
    if ceil:
        lines += ["## Ceilings", ""]
        if "copy_gb_s" in ceil:
            lines.append(f"- device-to-device copy: **{ceil['copy_gb_s']:.0f} GB/s** "
                         "(bytes read + written)")
        if "cublas_sgemm_tflop_s" in ceil:
            lines.append(f"- cuBLAS SGEMM (CuPy): **{ceil['cublas_sgemm_tflop_s']:.1f} "
                         "TFLOP/s**")
        lines.append("")
    lines += ["## Kernels", "", "| " + " | ".join(HEADER) + " |",
              "|" + "|".join(" --- " for _ in HEADER) + "|"]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in r) + " |"
              for r in table_rows(report)]
    lines += ["", "## Ratios (names as in the JSON)", "", "| name | value |", "| --- | --- |"]
    lines += [f"| `{k}` | {v:.3f} |" for k, v in report.get("ratios", {}).items()]
    lines += [f"| `{k}` | {v.replace('|', '/')} |" for k, v in report.get("problems", {}).items()]
    return "\n".join(lines) + "\n"


def _is_gpu_result(path: Path) -> bool:
    """Whether ``path`` already holds results of a GPU run (never overwritten from the sim)."""
    try:
        text = path.read_text()
    except OSError:
        return False
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text).get("mode") == "gpu"
        except ValueError:
            return False
    return GPU_MARKER in text


def _command(argv: list[str]) -> str:
    prog = os.environ.get("CUDACOURSE_BENCH_PROG", "cudacourse bench")
    return " ".join([prog, *(shlex.quote(a) for a in argv)])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cudacourse bench",
        description="Time the course's kernels against ceilings measured in the same run "
                    "(GPU); in the simulator, a correctness smoke pass only.")
    p.add_argument("--only", metavar="NAME[,NAME]", help="run only these benchmarks "
                   "(and the ceilings they need); see --list")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--size", choices=("full", "small"), default="full",
                   help="full: GPU-filling sizes (default); small: quick sizes for tests")
    p.add_argument("--repeats", type=int, default=20, help="timed repeats (default 20)")
    p.add_argument("--seed", type=int, help="input seed (default: fresh each run)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON")
    p.add_argument("--markdown", metavar="PATH", help="write the results as a markdown table")
    p.add_argument("--plot", metavar="PATH", help="write a roofline plot (PNG, SVG or PDF)")
    p.add_argument("--force", action="store_true",
                   help="in the simulator, overwrite files that hold GPU results")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.list:
        for e in ENTRIES.values():
            print(f"{e.name:<18} {e.help}")
        return 0
    try:
        names = select(args.only)
    except ValueError as exc:
        print(f"cudacourse bench: {exc}", file=sys.stderr)
        return 2
    sim = device.is_simulator()
    if sim:
        print(f"cudacourse bench: {SIM_NOTE}")
        for path in (args.json, args.markdown):
            if path and not args.force and _is_gpu_result(Path(path)):
                print(f"cudacourse bench: {path} holds GPU results; not replacing them with a "
                      "simulator smoke pass (use --force to overwrite)", file=sys.stderr)
                return 2
    else:
        ok, why = device.cupy_usable()
        if not ok:
            print(f"cudacourse bench: the ceilings and references need CuPy: {why}",
                  file=sys.stderr)
            return 2
    ctx = Ctx(args.size, args.seed)
    results = run(names, ctx, repeats=args.repeats, progress=not args.no_progress)
    report = build_report(results, command=_command(argv), size=ctx.size, seed=ctx.seed,
                          repeats=args.repeats)
    print(format_table(report))
    if not sim:  # the table truncates; the reasons matter
        for m in results.values():
            if m.status in ("FAILED", "missing"):
                print(f"{m.status} {m.name}: {m.detail}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(to_markdown(report))
        print(f"wrote {args.markdown}")
    if args.plot:
        if sim:
            print(f"no plot written to {args.plot}: the simulator has no timings to plot")
        else:
            from .viz.bench import plot_report

            plot_report(report, args.plot)
            print(f"wrote {args.plot}")
    failed = [m.name for m in results.values() if m.status == "FAILED"]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("CUDACOURSE_BENCH_PROG", "python -m cudacourse.bench")
    sys.exit(main())
