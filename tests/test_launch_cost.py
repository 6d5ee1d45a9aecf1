"""cudacourse.launch_cost: per-launch overhead by kind of argument."""

from __future__ import annotations

import pytest

from cudacourse import device, launch_cost

pytestmark = pytest.mark.lesson3


def test_launch_costs_rows():
    costs = launch_cost.launch_costs(repeats=3)
    assert "Numba device array" in costs
    assert all(v > 0 for v in costs.values())


def test_launches_versus_one():
    t = launch_cost.launches_versus_one(2, 64)
    assert set(t) == {"many small launches", "one big launch"}
    assert all(v > 0 for v in t.values())


@pytest.mark.gpu
def test_cupy_rows_on_gpu():
    costs = launch_cost.launch_costs(repeats=200)
    ok, why = device.cupy_usable()
    if not ok:
        pytest.skip(why)
    assert any(k.startswith("CuPy array (read") for k in costs)
    assert any("as_cuda_array" in k for k in costs)
