"""cudacourse.runtime.arrays: the host-or-device half of the launcher contract."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import arrays


class CAIOnly:
    """A foreign GPU array: only __cuda_array_interface__, as CuPy or PyTorch offer."""

    def __init__(self, d):
        self._d = d
        self.shape, self.dtype = d.shape, d.dtype
        self.__cuda_array_interface__ = getattr(d, "__cuda_array_interface__", {})


def test_device_arrays_are_told_from_host_arrays():
    h = np.zeros(3, np.float32)
    d = cuda.to_device(h)
    assert not arrays.is_device_array(h)
    assert arrays.is_device_array(d)
    assert arrays.is_device_array(CAIOnly(d))
    assert not arrays.is_device_array([1.0, 2.0])


def test_describe_names_library_type_dtype_and_shape():
    assert arrays.describe(np.zeros((2, 3), np.float64)) == "NumPy array float64[2, 3]"
    assert arrays.describe(cuda.to_device(np.zeros(4, np.float32))).startswith("numba ")
    assert arrays.describe(3.5) == "float"


@pytest.mark.parametrize("bad, exc, msg", [
    ([1.0], TypeError, r"x must be a NumPy array or a GPU array \(Numba, CuPy\), got list"),
    (np.zeros(2, np.int32), TypeError,
     r"x has dtype int32, expected float32: convert it with \.astype\(np\.float32\)"),
    (np.zeros((2, 2), np.float32), ValueError, r"x must be 1-dimensional, got shape \(2, 2\)"),
])
def test_check_array_names_the_argument_and_the_fix(bad, exc, msg):
    with pytest.raises(exc, match=msg):
        arrays.check_array(bad, "x", ndim=1)


def test_check_array_accepts_any_of_several_dtypes():
    arrays.check_array(np.zeros(2, np.float64), "x", dtype=(np.float32, np.float64))
    with pytest.raises(TypeError, match="expected float32 or float64"):
        arrays.check_array(np.zeros(2, np.int8), "x", dtype=(np.float32, np.float64))


def test_require_device_refuses_host_arrays_with_the_fix():
    with pytest.raises(TypeError, match=r"x is a host \(NumPy\) array.*cuda.to_device\(x\)"):
        arrays.require_device(np.zeros(2, np.float32), "x")
    with pytest.raises(TypeError, match="x must be a device array, got int"):
        arrays.require_device(3, "x")
    arrays.require_device(cuda.to_device(np.zeros(2, np.float32)), "x")


def test_to_device_copies_host_arrays_and_shares_device_ones():
    h = np.arange(6, dtype=np.float32)[::2]  # not contiguous: made contiguous on the way
    d = arrays.to_device(h)
    np.testing.assert_array_equal(d.copy_to_host(), h)
    assert arrays.to_device(d) is d


def test_same_shape_lists_every_shape():
    arrays.same_shape(a=np.zeros(3), b=np.zeros(3))
    with pytest.raises(ValueError, match=r"shape mismatch: a \(3,\), b \(4,\)"):
        arrays.same_shape(a=np.zeros(3), b=np.zeros(4))


def test_output_array_new_or_checked():
    d = arrays.output_array(None, (2, 3))
    assert tuple(d.shape) == (2, 3) and np.dtype(d.dtype) == np.float32
    mine = cuda.device_array((2, 3), np.float32)
    assert arrays.output_array(mine, (2, 3)) is mine
    with pytest.raises(ValueError, match=r"out has shape \(3, 2\), expected \(2, 3\)"):
        arrays.output_array(np.zeros((3, 2), np.float32), (2, 3))


def test_return_like_input_host_device_and_in_place():
    d = cuda.to_device(np.arange(4, dtype=np.float32))
    assert arrays.return_like_input(d, None, on_host=False) is d
    got = arrays.return_like_input(d, None, on_host=True, shape=(2, 2))
    assert isinstance(got, np.ndarray) and got.shape == (2, 2)
    out = np.zeros(4, np.float32)
    assert arrays.return_like_input(d, out, on_host=True) is out
    np.testing.assert_array_equal(out, [0, 1, 2, 3])
