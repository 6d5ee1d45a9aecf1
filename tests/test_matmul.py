"""Tests for cudacourse.kernels.matmul: every variant against the NumPy reference, any shape."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import matmul as M

pytestmark = pytest.mark.lesson4


def _inputs(m, k, n, seed=0):
    g = np.random.default_rng(seed)
    return (g.uniform(-2, 2, (m, k)).astype(np.float32),
            g.uniform(-2, 2, (k, n)).astype(np.float32))


@pytest.mark.parametrize("variant", M.MATMUL_VARIANTS + ("best",))
def test_matches_reference_on_odd_shapes(variant):
    a, b = _inputs(19, 21, 23)  # not multiples of any tile
    got = M.matmul(a, b, variant=variant)
    np.testing.assert_allclose(got, M.matmul_ref(a, b), rtol=1e-4, atol=1e-4)


def test_device_in_device_out_and_out_argument():
    a, b = _inputs(9, 30, 7, seed=1)
    out = cuda.device_array((9, 7), dtype=np.float32)
    res = M.matmul(cuda.to_device(a), cuda.to_device(b), out=out, variant="register")
    assert res is out
    np.testing.assert_allclose(out.copy_to_host(), a @ b, rtol=1e-4, atol=1e-4)


def test_empty_inner_dimension_gives_zeros():
    a, b = _inputs(3, 0, 4)
    assert np.array_equal(M.matmul(a, b, variant="naive"), np.zeros((3, 4), np.float32))


@pytest.mark.parametrize("bad, err, words", [
    (lambda a, b: (a.astype(np.float64), b), TypeError, "a has dtype float64"),
    (lambda a, b: (a, b[0]), ValueError, "b must be 2-dimensional"),
    (lambda a, b: (a, b[:-1]), ValueError, "shape mismatch"),
    (lambda a, b: ([[1.0]], b), TypeError, "a must be a NumPy array"),
])
def test_refuses_wrong_inputs_naming_the_argument(bad, err, words):
    a, b = bad(*_inputs(4, 5, 6))
    with pytest.raises(err, match=words):
        M.matmul(a, b)


def test_refuses_unknown_variant_and_wrong_out():
    a, b = _inputs(4, 5, 6)
    with pytest.raises(ValueError, match="variant"):
        M.matmul(a, b, variant="fastest")
    with pytest.raises(ValueError, match="out has shape"):
        M.matmul(a, b, out=cuda.device_array((6, 4), np.float32))


def test_naive_grid_puts_x_along_columns():
    """threadIdx.x must run along the columns of c (and of b): neighbouring lanes then read
    and write neighbouring addresses (coalesced). A tall, narrow product shows the grid
    shape: blocks along x cover the n columns."""
    assert M.launch_config(64, 16, "naive") == ((1, 4), (16, 16))
    a, b = _inputs(40, 7, 17, seed=5)  # 40 rows, 17 columns: partial blocks both ways
    np.testing.assert_allclose(M.matmul(a, b, variant="naive"), a @ b, rtol=1e-5, atol=1e-5)


def test_flops():
    assert M.flops(2, 3, 4) == 48


@pytest.mark.gpu
def test_register_kernels_fit_the_gpu_and_use_shared_memory():
    a, b = _inputs(300, 200, 260, seed=2)
    for v in ("register", "register128", "register128x256"):
        np.testing.assert_allclose(M.matmul(a, b, variant=v), a @ b, rtol=1e-4, atol=1e-3)
    kern = M._register_kernel("register128")
    smem = kern.get_shared_mem_per_block()
    assert max(smem.values()) > 0


# --- 16-byte shared loads (register128x256v4) ----------------------------------------------

@pytest.mark.parametrize("shape", [(67, 45, 131), (130, 9, 260)])
def test_v4_variant_matches_reference_with_partial_tiles(shape):
    # (67, 45, 131): one partial 128 x 256 tile, 6 k-slices, the last one partial.
    # (130, 9, 260): 2 x 2 blocks, each edge block partial, k just past one slice.
    m, k, n = shape
    a, b = _inputs(m, k, n, seed=3)
    got = M.matmul(a, b, variant="register128x256v4")
    np.testing.assert_allclose(got, M.matmul_ref(a, b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cfg", [(16, 32, 4, 4, 4, 4, None),   # 1 warp
                                 (32, 64, 4, 4, 4, 4, None),   # 2 x 2 warps of 4 x 8
                                 (32, 64, 8, 8, 4, 2, None),   # warps of 2 x 16
                                 (16, 32, 4, 4, 4, 4, None, True)])  # two shared buffers
def test_v4_kernel_factory_on_small_tiles(cfg):
    # Small tiles: many blocks, partial in every direction, quick in the simulator.
    kern = M._make_register_v4_kernel(*cfg)
    a, b = _inputs(45, 19, 70, seed=4)
    bm, bn = kern.tile
    c = cuda.device_array((45, 70), np.float32)
    kern[(-(-70 // bn), -(-45 // bm)), kern.block](cuda.to_device(a), cuda.to_device(b), c)
    np.testing.assert_allclose(c.copy_to_host(), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cfg", [(16, 32, 8, 4, 4, 4, None, False, True),   # 1 warp
                                 (32, 64, 8, 4, 8, 4, None, False, True),   # 4 warps
                                 (32, 32, 16, 4, 4, 4, None, True, True)])  # two buffers
def test_v4_kernel_with_global_vector_loads(cfg):
    """The unchecked 16-byte tile loads: on matrices the tiles divide exactly (matmul picks
    the checked twin for any other)."""
    kern = M._make_register_v4_kernel(*cfg)
    bm, bn = kern.tile
    m, k, n = 2 * bm, 3 * cfg[2], 2 * bn
    a, b = _inputs(m, k, n, seed=5)
    c = cuda.device_array((m, n), np.float32)
    kern[(n // bn, m // bm), kern.block](cuda.to_device(a), cuda.to_device(b), c)
    np.testing.assert_allclose(c.copy_to_host(), a @ b, rtol=1e-4, atol=1e-4)


def test_vector_tiles_are_used_only_where_they_fit():
    kern = M._register_kernel("register128x256v4g")
    assert kern.global_v4 and M._checked_twin("register128x256v4g") == "register128x256v4"

    class Fake:  # the array interface of a device array, as CuPy and Numba give it
        def __init__(self, shape, ptr=1 << 20, strides=None):
            self.shape = shape
            self.__cuda_array_interface__ = {"shape": shape, "data": (ptr, False),
                                             "strides": strides, "typestr": "<f4",
                                             "version": 3}

    ok = Fake((256, 64)), Fake((64, 512))
    assert M._vector_tiles_fit(kern, *ok)
    assert not M._vector_tiles_fit(kern, Fake((200, 64)), ok[1])  # a partial row tile
    assert not M._vector_tiles_fit(kern, Fake((256, 60)), Fake((60, 512)))  # k % 8
    assert not M._vector_tiles_fit(kern, Fake((256, 64), ptr=(1 << 20) + 4), ok[1])
    assert not M._vector_tiles_fit(kern, ok[0], Fake((64, 512), strides=(4096, 4)))
    assert not M.vector_loads_ok(np.ones((4, 4), np.float32))  # host memory: no interface


def test_v4_variant_is_listed_and_is_the_best():
    assert "register128x256v4" in M.MATMUL_VARIANTS
    assert M.BEST == "register128x256v4"  # measured fastest on the H200, 2026-11-30
    assert M.launch_config(67, 131, "register128x256v4") == ((1, 1), (16, 16))


def test_no_kernel_answers_lesson_4s_exercise():
    """The tiled matmul is lesson 4's graded exercise: the package carries no copy of it."""
    assert "tiled" not in M.MATMUL_VARIANTS and not hasattr(M, "_matmul_tiled")
    with pytest.raises(ValueError, match="variant must be"):
        M.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32), variant="tiled")
