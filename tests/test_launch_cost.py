"""cudacourse.kernels.launch_cost: per-launch overhead by kind of argument and launch path."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import device, timing
from cudacourse.kernels import launch_cost

pytestmark = pytest.mark.lesson3


def test_per_launch_divides_the_timed_span_by_the_repeats(monkeypatch):
    """One untimed warm-up, then ``repeats`` calls between two clock readings."""
    clock = itertools.count(start=10.0, step=4.0)  # perf_counter reads 10, then 14
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    calls = []
    assert launch_cost._per_launch(lambda: calls.append(1), 8) == pytest.approx(4.0 / 8)
    assert len(calls) == 9


def test_touch_kernel_adds_one_per_launch():
    d = cuda.to_device(np.zeros(4, np.float32))
    for _ in range(3):
        launch_cost._touch[1, 32](d)
    np.testing.assert_array_equal(d.copy_to_host(), [3, 0, 0, 0])


def test_launch_costs_rows():
    costs = launch_cost.launch_costs(repeats=3)
    assert {"Numba device array", "NumPy array (copied in and out on every launch)",
            "course launcher vector_add(a, b, out), Numba arrays"} <= set(costs)
    assert any("prepared once" in k for k in costs)
    assert all(np.isfinite(v) and v > 0 for v in costs.values())


def test_launches_versus_one_checks_both_results():
    t = launch_cost.launches_versus_one(2, 64)
    assert set(t) == {"many small launches", "one big launch"}


def test_launches_versus_one_refuses_a_wrong_kernel(monkeypatch):
    from cudacourse.kernels import transfer

    @cuda.jit
    def wrong(x, out, alpha):  # forgets alpha
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = x[i]

    monkeypatch.setattr(transfer, "_scale", wrong)
    with pytest.raises(AssertionError, match="many small launches: the result is not 2 \\* x"):
        launch_cost.launches_versus_one(2, 32)


@pytest.mark.gpu
def test_cupy_rows_on_gpu():
    costs = launch_cost.launch_costs(repeats=200)
    ok, why = device.cupy_usable()
    if not ok:
        pytest.skip(why)
    assert any(k.startswith("CuPy array (read") for k in costs)
    assert any("as_cuda_array" in k for k in costs)
    assert "course launcher vector_add(a, b, out), CuPy arrays" in costs
