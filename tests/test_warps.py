"""Warp layout, the divergence model and kernels, and the warp-primitive demos."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import warps as W

pytestmark = pytest.mark.lesson2


def test_warp_layout():
    warp, lane = W.warp_layout_ref((8, 8))
    assert warp.shape == (8, 8)
    np.testing.assert_array_equal(warp[:, 0], [0, 0, 0, 0, 1, 1, 1, 1])
    assert lane[3, 7] == 31 and lane[4, 0] == 0
    warp1, lane1 = W.warp_layout_ref(48)
    np.testing.assert_array_equal(warp1, np.repeat([0, 1], [32, 16]))
    with pytest.raises(ValueError, match="at most 1024"):
        W.warp_layout_ref((64, 32))


def test_passes_model():
    pats = W.branch_patterns(128)
    np.testing.assert_array_equal(W.passes_ref(pats["lanes disagree"]), [2, 2, 2, 2])
    np.testing.assert_array_equal(W.passes_ref(pats["warps agree"]), [1, 1, 1, 1])
    np.testing.assert_array_equal(W.passes_ref(np.arange(40) < 35), [1, 2])


@pytest.mark.parametrize("variant", W.DIVERGENCE_VARIANTS)
def test_branchy_kernels_compute_the_reference(variant):
    x = np.random.default_rng(1).standard_normal(200).astype(np.float32)
    want = W.branchy_ref(x, 5, by_warp=variant == "warps agree")
    np.testing.assert_allclose(W.run_branchy(x, 5, variant, threads=64), want, rtol=1e-5)


def test_branchy_refuses_unknown_variant():
    with pytest.raises(ValueError, match="variant must be one of"):
        W.run_branchy(np.ones(4, np.float32), 1, "fast")


@pytest.mark.parametrize("n", [200, 64, 5])
def test_warp_sums(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(W.warp_sums(x, threads=64), W.warp_sums_ref(x), atol=1e-4)


def test_warp_sums_device_in_device_out():
    x = np.random.default_rng(3).standard_normal(100).astype(np.float32)
    d = W.warp_sums(cuda.to_device(x), threads=32)
    np.testing.assert_allclose(d.copy_to_host(), W.warp_sums_ref(x), atol=1e-4)


def test_warp_prefix_sums():
    x = np.random.default_rng(4).standard_normal(150).astype(np.float32)
    np.testing.assert_allclose(W.warp_prefix_sums(x, threads=64), W.warp_prefix_sums_ref(x),
                               atol=1e-4)


def test_warp_ballots():
    x = np.random.default_rng(5).standard_normal(150).astype(np.float32)
    np.testing.assert_array_equal(W.warp_ballots(x, threads=64), W.warp_ballots_ref(x > 0))


def test_warp_launchers_refuse_bad_input():
    with pytest.raises(ValueError, match="multiple of 32"):
        W.warp_sums(np.ones(10, np.float32), threads=48)
    with pytest.raises(TypeError, match="x has dtype int64"):
        W.warp_sums(np.arange(10))
    with pytest.raises(ValueError, match="x is empty"):
        W.warp_ballots(np.zeros(0, np.float32))


def test_time_divergence_needs_a_gpu_in_the_simulator():
    from cudacourse.runtime import device
    if not device.is_simulator():
        pytest.skip("on a GPU the measurement runs (test_time_divergence_on_gpu)")
    with pytest.raises(device.DeviceError, match="needs a real NVIDIA GPU"):
        W.time_divergence()


@pytest.mark.gpu
def test_time_divergence_on_gpu():
    t = W.time_divergence(n=1 << 20, k=32, repeats=3)
    assert set(t) == set(W.DIVERGENCE_VARIANTS)
    assert all(v > 0 for v in t.values())
