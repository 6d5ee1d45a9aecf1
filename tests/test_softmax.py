"""Lesson 5: softmax references and the fused row-softmax kernel."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import softmax as sm

pytestmark = pytest.mark.lesson5


def rand(shape, scale=1.0, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def test_softmax_ref_rows_sum_to_one_and_survive_large_scores():
    x = rand((4, 50), scale=1000.0)
    p = sm.softmax_ref(x, scale=2.0)
    assert np.isfinite(p).all()
    np.testing.assert_allclose(p.sum(axis=-1), 1.0, rtol=1e-12)
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.exp(2.0 * x.astype(np.float64))
        assert not np.isfinite(naive / naive.sum(-1, keepdims=True)).all()  # why max is subtracted


@pytest.mark.parametrize("chunk", [1, 3, 16, 1000])
def test_online_softmax_matches_two_pass(chunk):
    x = rand((5, 37), scale=300.0, seed=chunk)
    p, m, l = sm.online_softmax_ref(x, scale=0.5, chunk=chunk, return_stats=True)
    np.testing.assert_allclose(p, sm.softmax_ref(x, scale=0.5), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(m, 0.5 * x.astype(np.float64).max(axis=-1))
    np.testing.assert_allclose(l, np.exp(0.5 * x.astype(np.float64) - m[:, None]).sum(-1))


@pytest.mark.parametrize("shape, scale", [((3, 100), 1.0), ((2, 2, 37), 0.125), ((1,), 3.0),
                                          ((5, 1), 1.0)])
def test_fused_softmax_matches_reference(shape, scale):
    x = rand(shape, scale=20.0, seed=len(shape))
    got = sm.fused_softmax(x, scale)
    assert got.shape == x.shape and isinstance(got, np.ndarray)
    np.testing.assert_allclose(got, sm.softmax_ref(x, scale), rtol=2e-6, atol=1e-7)


def test_fused_softmax_large_scores_and_block_reduction_without_shuffles():
    x = rand((2, 300), scale=1e4, seed=3)  # exp(1e4) overflows float64 and float32
    kern = sm._make_softmax_kernel(64, use_shuffles=False)
    out = cuda.device_array((2, 300), np.float32)
    kern[2, 64](cuda.to_device(x), out, np.float32(1.0))
    got = out.copy_to_host()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, sm.softmax_ref(x), rtol=2e-6, atol=1e-7)


def test_fused_softmax_device_in_device_out_and_out_argument():
    x = rand((3, 70), seed=4)
    dout = cuda.device_array((3, 70), np.float32)
    res = sm.fused_softmax(cuda.to_device(x), 0.5, out=dout)
    assert not isinstance(res, np.ndarray)
    np.testing.assert_allclose(dout.copy_to_host(), sm.softmax_ref(x, 0.5), rtol=2e-6, atol=1e-7)
    host_out = np.empty_like(x)
    assert sm.fused_softmax(x, out=host_out) is host_out


@pytest.mark.parametrize("x, exc, phrase", [
    (np.zeros((2, 3), np.float64), TypeError, "x has dtype float64"),
    (np.zeros((2, 0), np.float32), ValueError, "at least one element"),
    ([1.0, 2.0], TypeError, "x must be a NumPy array"),
])
def test_fused_softmax_refuses_bad_input(x, exc, phrase):
    with pytest.raises(exc, match=phrase):
        sm.fused_softmax(x)


def test_fused_softmax_refuses_bad_threads_and_out_shape():
    x = rand((2, 8))
    with pytest.raises(ValueError, match="threads"):
        sm.fused_softmax(x, threads=48)
    with pytest.raises(ValueError, match="shape mismatch"):
        sm.fused_softmax(x, out=np.empty((2, 9), np.float32))
