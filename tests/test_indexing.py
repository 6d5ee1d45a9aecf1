"""Thread maps, 2D launches, grid-stride loops and launch configurations."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import indexing as I

pytestmark = pytest.mark.lesson2


@pytest.mark.parametrize("shape, block", [((10, 13), (4, 3)), ((7, 40), (32, 2)), ((1, 1), (8, 8))])
def test_thread_map_matches_reference(shape, block):
    got, want = I.thread_map(shape, block), I.thread_map_ref(shape, block)
    for g, w, name in zip(got, want, want._fields):
        np.testing.assert_array_equal(g, w, err_msg=name)


def test_thread_map_ids_and_warps():
    tm = I.thread_map_ref((8, 16), (8, 8))
    assert tm.block_id(2)[0, 15] == 1 and tm.block_id(2)[7, 0] == 0
    assert tm.thread_id(8)[7, 7] == 63
    np.testing.assert_array_equal(tm.warp(8)[:, 0], [0, 0, 0, 0, 1, 1, 1, 1])


def test_launch_configs():
    assert I.launch_config_1d(1000, 256) == (4, 256)
    assert I.launch_config_1d(0, 128) == (1, 128)
    assert I.launch_config_2d((100, 300), (16, 8)) == ((19, 13), (16, 8))
    with pytest.raises(ValueError, match="multiple of the warp size"):
        I.launch_config_1d(100, 100)
    with pytest.raises(ValueError, match="1 to 1024"):
        I.launch_config_1d(100, 2048)
    with pytest.raises(ValueError, match="at most 1024"):
        I.launch_config_2d((10, 10), (64, 32))


@pytest.mark.parametrize("shape", [(9, 14), (17, 5)])
def test_radial(shape):
    np.testing.assert_allclose(I.radial(shape, block=(8, 4)), I.radial_ref(shape), atol=1e-6)


def test_radial_into_device_and_host_out():
    out = np.zeros((6, 7), np.float32)
    assert I.radial((6, 7), out=out) is out
    np.testing.assert_allclose(out, I.radial_ref((6, 7)), atol=1e-6)
    d = cuda.device_array((6, 7), np.float32)
    res = I.radial((6, 7), out=d)
    np.testing.assert_allclose(res.copy_to_host(), I.radial_ref((6, 7)), atol=1e-6)
    with pytest.raises(ValueError, match="out has shape"):
        I.radial((6, 7), out=np.zeros((7, 6), np.float32))
    with pytest.raises(TypeError, match="out has dtype"):
        I.radial((6, 7), out=np.zeros((6, 7), np.float64))


def test_scale_variants():
    x = np.random.default_rng(0).standard_normal(300).astype(np.float32)
    want = I.scale_ref(x, 2.5)
    np.testing.assert_allclose(I.scale(x, 2.5, threads=64), want)
    np.testing.assert_allclose(I.scale(x, 2.5, blocks=2, threads=64, grid_stride=True), want)
    dres = I.scale(cuda.to_device(x), 2.5, blocks=1, threads=32, grid_stride=True)
    np.testing.assert_allclose(dres.copy_to_host(), want)


def test_scale_refuses_bad_input():
    x = np.ones(100, np.float32)
    with pytest.raises(ValueError, match="grid_stride=True"):
        I.scale(x, 2.0, blocks=1, threads=32)
    with pytest.raises(TypeError, match="x has dtype int64"):
        I.scale(np.arange(5), 2.0)
    with pytest.raises(ValueError, match="x must be 1-dimensional"):
        I.scale(np.ones((2, 2), np.float32), 2.0)


@pytest.mark.parametrize("grid_stride", [False, True])
def test_coverage(grid_stride):
    got = I.coverage(300, 2, 64, grid_stride)
    np.testing.assert_array_equal(got, I.coverage_ref(300, 2, 64, grid_stride))
