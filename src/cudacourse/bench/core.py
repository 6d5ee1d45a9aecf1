"""The benchmark's building blocks: sizes, cases, measurements, inputs, timing."""

from __future__ import annotations

import importlib
import os
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..runtime import device

SCHEMA = "cudacourse-bench/1"
SIM_NOTE = ("simulator mode: timings mean nothing here (every GPU thread is a Python call on "
            "the CPU), so this is only a correctness smoke pass on tiny inputs: no times, no "
            "ratios. Run on an NVIDIA GPU for the real benchmark.")
GPU_MARKER = "<!-- cudacourse-bench mode=gpu -->"

# Problem sizes per mode. "full" fills an H200 and exceeds its 50-60 MB L2 many times over.
SIZES: dict[str, dict[str, Any]] = {
    "full": {"copy": 2**28, "vector": 2**28, "sum": 2**28, "transpose": (16384, 16384),
             "softmax": (16384, 4096),
             "matmul": (4096, 4096, 4096), "attention": (16, 4096, 64),
             "attention_memory": (16, 16384, 64),
             # (heads, seq, head_dim) x causal: the PyTorch comparison of issue 15
             "attention_peers": [(16, s, d, c) for s in (4096, 16384) for d in (64, 128)
                                 for c in (False, True) if (s, d) != (4096, 64) or c],
             # (heads, seq, head_dim, cap, window): soft-capped scores, causal window
             "attention_softcap": (16, 4096, 64, 50.0, 1024)},
    "small": {"copy": 2**22, "vector": 2**20 + 3, "sum": 2**20 + 3, "transpose": (1000, 1027),
              "softmax": (300, 1000),
              "matmul": (300, 257, 263), "attention": (2, 300, 64),
              "attention_memory": (2, 1024, 64),
              "attention_peers": [(2, 300, 64, True), (2, 300, 128, False)],
              "attention_softcap": (2, 300, 64, 5.0, 100)},
    "sim": {"copy": 4096, "vector": 1003, "sum": 2051, "transpose": (40, 33),
            "softmax": (4, 70),
            "matmul": (33, 20, 31), "attention": (1, 24, 64), "attention_memory": None,
            "attention_peers": [(1, 24, 128, True)], "attention_softcap": (1, 40, 64, 5.0, 7)},
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
    more: tuple = ()  # further (ratio name, measurement it is divided by) pairs
    overhead: str | None = None  # "<kernel>": also measure <kernel>_call_overhead_us


@dataclass(frozen=True)
class Entry:
    """One benchmark of the registry (``bench.cases.ENTRIES``): a kernel family's cases."""

    name: str
    help: str
    family: str  # entries of one family share inputs; memory is freed between families
    cases: Callable[["Ctx"], list[Case]]
    ceiling: str | None = None  # the entry whose measurement its ratios divide by


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
    more: tuple = ()  # further (ratio name, vs) pairs, as Case.more
    values: dict = field(default_factory=dict)  # further measured values, by ratio name
    entry: str = ""  # the registry entry that measured it (``--merge`` replaces by entry)

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
        return self.xp.full(shape, np.nan, np.float32)

    def poison(self, dev_array: Any) -> None:
        if self.sim:
            dev_array.copy_to_device(np.full(dev_array.shape, np.nan, np.float32))
        else:
            self.xp.asarray(dev_array).fill(np.nan)

    def dev(self, x: Any) -> Any:
        """``x`` as a user of the course holds it on the device: the CuPy array itself on a
        GPU (the public calls are timed on what users pass them), a Numba device array in
        the simulator."""
        from numba import cuda

        return cuda.to_device(x) if self.sim else x

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
                import sys

                if "torch" in sys.modules:  # PyTorch's caching allocator keeps freed blocks
                    sys.modules["torch"].cuda.empty_cache()

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

def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise Skipped("PyTorch is not installed") from None
    if not torch.cuda.is_available():
        raise Skipped("PyTorch cannot use the GPU (torch.cuda.is_available() is False)")
    return torch


TIMING = ("one call between two CUDA events, then a synchronisation, as a user times a call: "
          "the host's work before the launch counts; median after 2 warm-up calls; "
          "correctness checked before timing")


def event_times(fn: Callable[[], Any], repeats: int = 20, warmup: int = 2,
                budget_s: float = 2.0) -> list[float]:
    """Milliseconds of each of up to ``repeats`` calls of ``fn``, from CUDA events. GPU only.

    Each call is timed alone, the way a user times one: record an event, call, record an
    event, synchronise. The GPU is idle when the first event is recorded, so whatever the
    host does before the launch (argument checks, conversions) is in the time, as it is in
    a user's program; a launcher whose host work is slower than its kernel shows it.
    """
    from numba import cuda

    for _ in range(warmup):
        fn()
    cuda.synchronize()
    start, stop = cuda.event(timing=True), cuda.event(timing=True)
    times: list[float] = []
    spent = 0.0
    while len(times) < 3 or (len(times) < repeats and spent < budget_s * 1e3):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop))
        spent += times[-1]
    return times


def call_overhead_us(fn: Callable[[], Any], calls: int = 30, warmup: int = 3) -> float:
    """Median microseconds the host spends in one call of ``fn`` with the GPU idle: what a
    launcher costs before its kernel starts (checks, conversions, the launch). GPU only."""
    import time

    from numba import cuda

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(calls):
        cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    cuda.synchronize()
    return statistics.median(times) * 1e6


def run_case(case: Case, ctx: Ctx, timer: Callable[[Callable[[], Any]], list[float]] | None
             ) -> Measurement:
    """Prepare, run once, check; time only what passed the check (and only with a timer)."""
    m = Measurement(case.name, case.label, case.kind, ratio=case.ratio, vs=case.vs,
                    more=tuple(case.more))
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
            if case.overhead:
                m.values[f"{case.overhead}_call_overhead_us"] = call_overhead_us(prep.run)
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


