"""cudacourse._numba_private: every private Numba attribute the course relies on still exists
in the installed numba-cuda; a failure names that version."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse import _numba_private as P
from cudacourse.runtime import device


@pytest.mark.parametrize("name", sorted(P.seams()))
def test_every_seam_is_present(name):
    try:
        P.seams()[name]()
    except (ImportError, AttributeError, P.NumbaInternalsChanged) as exc:
        pytest.fail(f"numba-cuda {P.NUMBA_CUDA_VERSION}: the private API {name!r} that "
                    f"src/cudacourse/_numba_private.py relies on is gone ({exc}); update that "
                    "module for this version, or install the pinned numba-cuda")


def test_the_version_is_known_and_named_in_errors():
    assert P.NUMBA_CUDA_VERSION != "unknown"
    msg = str(P._broken("something", AttributeError("x")))
    assert f"numba-cuda {P.NUMBA_CUDA_VERSION}" in msg and "something" in msg


def test_simulator_flag_agrees_with_the_device_choice():
    assert P.simulating() == device.is_simulator()


def test_numba_arrays_are_recognised_by_name():
    d = cuda.to_device(np.zeros(3, np.float32))
    assert P.is_numba_array(d)
    assert not P.is_numba_array(np.zeros(3, np.float32))


def test_no_prepared_launch_in_the_simulator_or_for_host_arrays():
    @cuda.jit
    def k(x):
        x[0] = 1.0

    d = cuda.to_device(np.zeros(1, np.float32))
    k[1, 1](d)
    if device.is_simulator():
        assert P.prepared_launch(k, 1, 1, (d,)) is None
    assert P.prepared_launch(k, 1, 1, (np.zeros(1, np.float32),)) is None


@pytest.mark.gpu
def test_prepared_launch_matches_numbas_own_flattening():
    """The flattened parameters must be exactly what Numba's launch would pass."""
    @cuda.jit
    def axpy(a, x, y, out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = a * x[i] + y[i]

    n = 1000
    x = cuda.to_device(np.arange(n, dtype=np.float32))
    y = cuda.to_device(np.ones(n, np.float32))
    out = cuda.device_array(n, np.float32)
    args = (np.float32(2.0), x, y, out)
    axpy[4, 256](*args)
    prepared = P.prepared_launch(axpy, 4, 256, args)
    assert prepared is not None and prepared.usable()
    y2 = cuda.to_device(np.full(n, 3.0, np.float32))
    prepared(np.float32(2.0), x, y2, out)
    cuda.synchronize()
    np.testing.assert_array_equal(out.copy_to_host(), 2 * np.arange(n) + 3.0)


@pytest.mark.gpu
def test_prepared_launch_steps_aside_for_a_patched_dispatcher(monkeypatch):
    """The checkers' tracer wraps Numba's launch: a prepared launch must then use it."""
    from numba.cuda import dispatcher

    @cuda.jit
    def inc(x):
        x[0] += 1.0

    d = cuda.to_device(np.zeros(1, np.float32))
    inc[1, 1](d)
    prepared = P.prepared_launch(inc, 1, 1, (d,))
    seen = []
    original = dispatcher._LaunchConfiguration.__call__

    def traced(self, *args):
        seen.append(args)
        return original(self, *args)

    monkeypatch.setattr(dispatcher._LaunchConfiguration, "__call__", traced)
    assert not prepared.usable()
    prepared(d)
    assert len(seen) == 1 and float(d.copy_to_host()[0]) == 2.0


@pytest.mark.gpu
def test_prepared_launch_goes_straight_to_the_driver_with_scalars_and_flags():
    """The driver path (one parameter buffer built once) is in use, and passes float32,
    int32 and bool scalars and 2-D arrays exactly: the result matches a NumPy reference."""
    @cuda.jit
    def affine(a, n, flip, x, out):
        i, j = cuda.grid(2)
        if i < out.shape[0] and j < out.shape[1]:
            v = a * x[i, j] + n
            out[i, j] = -v if flip else v

    x = cuda.to_device(np.arange(12 * 40, dtype=np.float32).reshape(12, 40))
    out = cuda.device_array((12, 40), np.float32)
    args = (np.float32(1.5), np.int32(7), True, x, out)
    grid = (1, 3)  # x (16 threads) covers the 12 rows, y (3 x 16) the 40 columns
    affine[grid, (16, 16)](*args)
    prepared = P.prepared_launch(affine, grid, (16, 16), args)
    assert prepared is not None and prepared._raw is not None, "the driver path is unused"
    x2 = cuda.to_device(np.full((12, 40), 2.0, np.float32))
    out2 = cuda.device_array((12, 40), np.float32)
    prepared.with_pointers(x2.__cuda_array_interface__["data"][0],
                           out2.__cuda_array_interface__["data"][0])
    cuda.synchronize()
    np.testing.assert_array_equal(out2.copy_to_host(), np.full((12, 40), -(1.5 * 2 + 7)))


def test_driver_initialised_reads_numbas_flag_without_initialising(monkeypatch):
    """driver_initialized() reads the Driver's own flag (never its __getattr__, which would
    call cuInit), and says False where numba's driver module was never imported."""
    import sys
    import types

    class FakeDriver:
        def __init__(self, done):
            self.is_initialized = done

        def __getattr__(self, name):  # numba's Driver initialises CUDA here
            raise AssertionError(f"driver_initialized() touched Driver.{name}")

    for done in (False, True):
        fake = types.ModuleType("numba.cuda.cudadrv.driver")
        fake.driver = FakeDriver(done)
        monkeypatch.setitem(sys.modules, "numba.cuda.cudadrv.driver", fake)
        assert P.driver_initialized() is done
    monkeypatch.delitem(sys.modules, "numba.cuda.cudadrv.driver")
    assert P.driver_initialized() is False
