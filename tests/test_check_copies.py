"""check/_copies.py: on a GPU a copy from an empty host slice is refused as the simulator
refuses it (one mistake, one verdict: issue 45's pipelined_scale mutants on the H200)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.check import _copies, _raised


class _FakeDeviceArray:
    """What a GPU's DeviceNDArray gives the wrapper: a shape, a size, the copy methods."""

    def __init__(self, n: int) -> None:
        self.shape, self.size, self.copied = (n,), n, []

    def copy_to_device(self, ary, stream=0):
        self.copied.append(("to", ary.size, stream))

    def copy_to_host(self, ary=None, stream=0):
        self.copied.append(("from", None if ary is None else ary.size, stream))


@pytest.mark.parametrize("method", ["copy_to_device", "copy_to_host"])
def test_an_empty_host_side_is_the_simulators_shape_error(method):
    d = _FakeDeviceArray(64)
    wrapped = _copies._checked(getattr(_FakeDeviceArray, method))
    h = np.arange(100, dtype=np.float32)
    with pytest.raises(ValueError, match=r"incompatible shape: \(64,\) vs\. \(0,\)") as err:
        wrapped(d, h[70:70], stream=0)
    with pytest.raises(ValueError, match="incompatible shape"):
        wrapped(d, ary=h[10:3])
    assert d.copied == []  # refused before any copy
    wrapped(d, h[:64], 0)  # a right chunk goes through, arguments as given
    assert d.copied == [("to" if method == "copy_to_device" else "from", 64, 0)]
    if method == "copy_to_host":
        wrapped(d)  # no host array: the device array's own copy
        assert d.copied[-1] == ("from", None, 0)

    def pipelined(x):
        wrapped(d, x[64:64])

    try:
        pipelined(h)
    except ValueError as exc:
        assert _raised.named(exc, pipelined, "pipelined_scale")[0] == "shape_mismatch"


def test_an_empty_device_array_is_left_alone():
    _copies.refuse_empty(_FakeDeviceArray(0), np.zeros(0))


@pytest.mark.sim_only(reason="the simulator's own copy refuses it; exact() is a no-op there")
def test_in_the_simulator_exact_changes_nothing():
    before = cuda.cudadrv.devicearray.FakeCUDAArray.copy_to_device \
        if hasattr(cuda, "cudadrv") else None
    with _copies.exact():
        d = cuda.to_device(np.zeros(4, np.float32))
        with pytest.raises(ValueError, match="incompatible shape"):
            d.copy_to_device(np.zeros(0, np.float32))
    if before is not None:
        assert cuda.cudadrv.devicearray.FakeCUDAArray.copy_to_device is before


@pytest.mark.gpu
def test_on_a_gpu_exact_refuses_and_restores():
    from numba.cuda.cudadrv import devicearray

    original = devicearray.DeviceNDArrayBase.copy_to_device
    d = cuda.to_device(np.zeros(4, np.float32))
    with _copies.exact():
        with pytest.raises(ValueError, match="incompatible shape"):
            d.copy_to_device(np.zeros(0, np.float32))
        d.copy_to_device(np.ones(4, np.float32))
    assert devicearray.DeviceNDArrayBase.copy_to_device is original
    assert "copy_to_device" not in devicearray.DeviceNDArray.__dict__  # no shadowing
    assert (d.copy_to_host() == 1).all()


def test_exact_patches_the_class_the_host_trace_patches():
    """A wrapper on DeviceNDArray would shadow _trace's on DeviceNDArrayBase (which defines
    the copies): the record of host steps then lost every copy, and on the H200 (2026-12-05)
    lesson 3's master was told it returned before its streams finished."""
    import inspect

    from cudacourse.check import _trace

    assert "devicearray.DeviceNDArrayBase" in inspect.getsource(_copies.exact)
    assert 'patch(devicearray.DeviceNDArrayBase, "copy_to_host"' in inspect.getsource(_trace)
