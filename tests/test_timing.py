"""cudacourse.runtime.timing: the one timing helper (CUDA events on a GPU, the host clock else)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import device, timing


def test_host_median_warms_up_then_takes_the_median(monkeypatch):
    clock = iter([0.0, 1.0, 10.0, 12.0, 20.0, 27.0])  # spans 1, 2, 7: median 2
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    calls = []
    assert timing.host_median(lambda: calls.append(1), repeats=3, warmup=2) == 2.0
    assert len(calls) == 5


def test_bad_repeat_counts_are_refused():
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        timing.host_median(lambda: None, repeats=0)


def test_median_seconds_in_the_simulator_uses_the_host_clock(monkeypatch):
    if not device.is_simulator():
        pytest.skip("on a GPU it uses CUDA events (test_event_times_on_gpu)")
    clock = itertools.count(step=0.5)
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    assert timing.median_seconds(lambda: None, repeats=3) == 0.5


def test_events_need_a_gpu_in_the_simulator():
    if not device.is_simulator():
        pytest.skip("on a GPU the events exist")
    with pytest.raises(device.DeviceError, match="timing with CUDA events needs a real NVIDIA"):
        timing.event_times(lambda: None)


@pytest.mark.gpu
def test_event_times_on_gpu():
    @cuda.jit
    def spin(x, k):
        v = x[0]
        for _ in range(k):
            v = v * 0.999 + 1.0
        x[0] = v

    d = cuda.to_device(np.zeros(1, np.float32))
    calls = []

    def fn():
        calls.append(1)
        spin[1, 1](d, 1000)

    samples = timing.event_times(fn, repeats=4, warmup=1, inner=3)
    assert len(samples) == 4 and len(calls) == 1 + 4 * 3
    assert all(s > 0 for s in samples)
    with pytest.raises(ValueError, match="inner must be >= 1"):
        timing.event_times(fn, inner=0)


@pytest.mark.gpu
def test_queued_samples_and_the_budget():
    @cuda.jit
    def nothing(x):
        if cuda.grid(1) == 0:
            x[0] += 1.0

    d = cuda.to_device(np.zeros(1, np.float32))
    samples = timing.event_times(lambda: nothing[1, 32](d), repeats=50, warmup=2, queued=True,
                                 budget_s=1e-9)
    assert len(samples) == 3, "a tiny budget still takes 3 samples"
    assert float(d.copy_to_host()[0]) == 2 + 1 + 3  # warm-up, sizing run, samples


def test_host_per_call_takes_the_median_batch(monkeypatch):
    clock = iter([0.0, 4.0, 10.0, 12.0, 20.0, 30.0])  # batches of 2 calls: 4, 2 and 10 s
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    calls = []
    assert timing.host_per_call(lambda: calls.append(1), calls=2, batches=3) == 2.0
    assert len(calls) == 1 + 3 * 2
    with pytest.raises(ValueError, match="calls and batches must be >= 1"):
        timing.host_per_call(lambda: None, calls=0)
