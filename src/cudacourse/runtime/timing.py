"""The one way the course times GPU work: CUDA events, medians, and the host clock where a
GPU clock does not exist.

A kernel launch returns before the kernel has run, so ``time.perf_counter()`` around it
measures Python, not the GPU. CUDA events are recorded into the stream between pieces of
work, and the GPU stamps them when it gets there: the difference is GPU time.

* ``event_times(fn)``: milliseconds of each of ``repeats`` calls, each between its own pair
  of events; with ``inner`` > 1 each sample queues that many calls back to back and is
  divided by ``inner``, so Python's launch overhead overlaps the previous kernel instead of
  being counted as GPU time; ``queued=True`` (all samples queued, one synchronisation) and
  ``budget_s`` are what the benchmark uses (``bench.core.event_times`` is this, with
  ``warmup=2, queued=True, budget_s=2.0``).
* ``event_median(fn)``: their median.
* ``host_median(fn)``: the host clock, synchronised after each call (what the simulator,
  which has no timing events, can offer; its numbers say nothing about a GPU);
* ``host_per_call(fn, calls)``: the host clock over many calls back to back, synchronised
  once: what Python pays per call (launch overhead), not what the GPU does.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import statistics
import time
from typing import Any, Callable

from .device import is_simulator


def event_times(fn: Callable[[], Any], repeats: int = 10, warmup: int = 1, inner: int = 1,
                stream: Any = 0, queued: bool = False,
                budget_s: float | None = None) -> list[float]:
    """Milliseconds per call of ``fn``, one sample per repeat, from CUDA events (GPU only).

    ``warmup`` calls run first, untimed: the first call of a kernel compiles it. By default
    each sample is synchronised before the next starts. With ``queued`` every sample is
    queued back to back (each between its own events) and synchronised once at the end, so
    that while Python launches sample i+1 the GPU is still busy with sample i: the events
    time the GPU's work, not Python's. With ``budget_s`` one more (untimed) sample sizes
    ``repeats`` down so that all of them take about that long (at least 3).
    """
    from numba import cuda

    from .device import require_gpu

    require_gpu("timing with CUDA events")
    if repeats < 1 or inner < 1:
        raise ValueError(f"repeats and inner must be >= 1, got {repeats} and {inner}")
    for _ in range(warmup):
        fn()

    def sample() -> tuple[Any, Any]:
        start, stop = cuda.event(timing=True), cuda.event(timing=True)
        start.record(stream)
        for _ in range(inner):
            fn()
        stop.record(stream)
        return start, stop

    if budget_s is not None:
        start, stop = sample()
        stop.synchronize()
        first = cuda.event_elapsed_time(start, stop)
        repeats = max(3, min(repeats, int(budget_s * 1e3 / max(first, 1e-3))))
    pairs = []
    for _ in range(repeats):
        pairs.append(sample())
        if not queued:
            pairs[-1][1].synchronize()
    pairs[-1][1].synchronize()
    return [cuda.event_elapsed_time(start, stop) / inner for start, stop in pairs]


def event_median(fn: Callable[[], Any], repeats: int = 10, warmup: int = 1,
                 inner: int = 1, stream: Any = 0) -> float:
    """Median milliseconds per call of ``fn`` (``event_times``)."""
    return float(statistics.median(event_times(fn, repeats, warmup, inner, stream)))


def host_median(fn: Callable[[], Any], repeats: int = 10, warmup: int = 1,
                sync: bool = True) -> float:
    """Median seconds per call of ``fn`` on the host clock, synchronising the device after
    each call when ``sync`` (so queued GPU work is counted)."""
    from numba import cuda

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    for _ in range(warmup):
        fn()
        if sync:
            cuda.synchronize()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        if sync:
            cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return float(statistics.median(times))


def host_per_call(fn: Callable[[], Any], calls: int, batches: int = 1,
                  warmup: int = 1) -> float:
    """Seconds per call of ``fn`` when ``calls`` calls run back to back, synchronised once
    per batch: the median over ``batches``. For what Python pays per call (launch overhead):
    the GPU work of each call must be far shorter than that."""
    from numba import cuda

    if calls < 1 or batches < 1:
        raise ValueError(f"calls and batches must be >= 1, got {calls} and {batches}")
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        cuda.synchronize()
        samples.append((time.perf_counter() - t0) / calls)
    return float(statistics.median(samples))


def median_seconds(fn: Callable[[], Any], repeats: int = 10, warmup: int = 1,
                   inner: int = 1) -> float:
    """Seconds per call: CUDA events on a GPU, the synchronised host clock in the simulator."""
    if is_simulator():
        return host_median(fn, repeats, warmup)
    return event_median(fn, repeats, warmup, inner) / 1e3
