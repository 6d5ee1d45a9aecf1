"""Tests for cudacourse.kernels.transpose: every variant, shapes that are not tile multiples."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import transpose as T

pytestmark = pytest.mark.lesson4


@pytest.mark.parametrize("variant", T.TRANSPOSE_VARIANTS + ("best",))
@pytest.mark.parametrize("shape", [(37, 70), (1, 5)])
def test_matches_reference(variant, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    assert np.array_equal(T.transpose(x, variant=variant), T.transpose_ref(x))


def test_device_in_device_out_with_out():
    x = np.random.default_rng(1).standard_normal((20, 33)).astype(np.float32)
    out = cuda.device_array((33, 20), np.float32)
    assert T.transpose(cuda.to_device(x), out=out, variant="tiled") is out
    assert np.array_equal(out.copy_to_host(), x.T)


def test_refuses_wrong_inputs():
    with pytest.raises(TypeError, match="x has dtype int64"):
        T.transpose(np.ones((2, 2), np.int64))
    with pytest.raises(ValueError, match="x must be 2-dimensional"):
        T.transpose(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="out has shape"):
        T.transpose(np.ones((2, 3), np.float32), out=cuda.device_array((2, 3), np.float32))
    with pytest.raises(ValueError, match="variant"):
        T.transpose(np.ones((2, 3), np.float32), variant="fast")


@pytest.mark.gpu
def test_large_transpose_on_gpu():
    x = np.random.default_rng(2).standard_normal((2000, 3001)).astype(np.float32)
    for v in T.TRANSPOSE_VARIANTS:
        assert np.array_equal(T.transpose(x, variant=v), x.T)


@pytest.mark.gpu
def test_repeated_device_calls_reuse_the_plan():
    x = np.random.default_rng(3).standard_normal((130, 67)).astype(np.float32)
    dx, out = cuda.to_device(x), cuda.device_array((67, 130), np.float32)
    T._PLANS.clear()
    T.transpose(dx, out=out)
    assert len(T._PLANS) == 1
    x2 = np.random.default_rng(4).standard_normal((130, 67)).astype(np.float32)
    assert T.transpose(cuda.to_device(x2), out=out) is out
    assert len(T._PLANS) == 1 and np.array_equal(out.copy_to_host(), x2.T)
