"""Tests for cudacourse.kernels.reduce: sum and max, every variant, tails and one-element inputs."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import reduce as R

pytestmark = pytest.mark.lesson4


@pytest.mark.parametrize("variant", R.REDUCE_VARIANTS + ("best",))
@pytest.mark.parametrize("n", [1, 300, 1100])  # 1100: two blocks and a ragged tail
def test_sum_and_max_match_reference(variant, n):
    x = np.random.default_rng(n).uniform(-3, 3, n).astype(np.float32)
    assert R.reduce_sum(x, variant) == pytest.approx(float(R.reduce_sum_ref(x)),
                                                     rel=1e-5, abs=1e-3)
    assert R.reduce_max(x, variant) == float(R.reduce_max_ref(x))


def test_max_of_all_negative_values():
    x = -np.arange(1, 40, dtype=np.float32)
    assert R.reduce_max(x, "single_pass") == -1.0


def test_sum_into_writes_device_result():
    x = np.random.default_rng(1).uniform(-1, 1, 700).astype(np.float32)
    out = cuda.device_array(1, np.float32)
    assert R.reduce_sum_into(cuda.to_device(x), out) is out
    assert float(out.copy_to_host()[0]) == pytest.approx(float(x.sum(dtype=np.float64)),
                                                         abs=1e-3)


def test_refuses_wrong_inputs():
    with pytest.raises(TypeError, match="x has dtype float64"):
        R.reduce_sum(np.ones(4))
    with pytest.raises(ValueError, match="x must be 1-dimensional"):
        R.reduce_max(np.ones((2, 2), np.float32))
    with pytest.raises(ValueError, match="empty"):
        R.reduce_sum(np.ones(0, np.float32))
    with pytest.raises(ValueError, match="variant"):
        R.reduce_sum(np.ones(3, np.float32), "fast")
    with pytest.raises(TypeError, match="x is a host"):
        R.reduce_sum_into(np.ones(3, np.float32), cuda.device_array(1, np.float32))
    with pytest.raises(ValueError, match="exactly 1 element"):
        R.reduce_sum_into(cuda.to_device(np.ones(3, np.float32)),
                          cuda.device_array(2, np.float32))


def test_grid_size_never_exceeds_the_work():
    assert R.grid_size(1) == 1
    assert R.grid_size(10**9) == R._sm_count() * R.BLOCKS_PER_SM


@pytest.mark.gpu
def test_large_sum_on_gpu():
    x = np.random.default_rng(2).uniform(-1, 1, 10**7).astype(np.float32)
    for v in R.REDUCE_VARIANTS:
        assert R.reduce_sum(x, v) == pytest.approx(float(x.sum(dtype=np.float64)), abs=0.5)
        assert R.reduce_max(x, v) == float(x.max())


@pytest.mark.gpu
def test_repeated_sum_into_reuses_the_plan():
    out = cuda.device_array(1, np.float32)
    R._PLANS.clear()
    for seed in (5, 6):  # the second call takes the plan of the first
        x = np.random.default_rng(seed).uniform(-1, 1, 5000).astype(np.float32)
        R.reduce_sum_into(cuda.to_device(x), out)
        assert float(out.copy_to_host()[0]) == pytest.approx(float(x.sum(dtype=np.float64)),
                                                             abs=1e-3)
    assert len(R._PLANS) == 1
