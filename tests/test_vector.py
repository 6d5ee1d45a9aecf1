"""cudacourse.kernels.vector: every variant against the NumPy reference, inputs from anywhere, and
clear errors for wrong arguments."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import vector
from cudacourse.kernels.vector import Config, vector_add, vector_add_ref

pytestmark = pytest.mark.lesson1

ALL = (*vector.VARIANTS, "best")
# Sizes around the edges: tiny, not a multiple of 4 (the vec4 tail), not a multiple of any
# block size, and one more than a whole number of 16-byte groups per block.
SIZES = (1, 3, 5, 257, 1029)


def rand(n: int, seed: int = 0) -> np.ndarray:
    gen = np.random.default_rng(seed + n)
    x = gen.uniform(-4, 4, n).astype(np.float32)
    x[np.abs(x) < 0.25] += 0.75  # no near-zeros: they hide a kernel that ignores an input
    return x


@pytest.mark.parametrize("variant", ALL)
@pytest.mark.parametrize("n", SIZES)
def test_every_variant_matches_the_reference(variant, n):
    a, b = rand(n), rand(n, 1)
    got = vector_add(a, b, variant=variant)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, vector_add_ref(a, b))


def test_empty_input_gives_empty_output():
    a = np.zeros(0, np.float32)
    assert vector_add(a, a, variant="best").shape == (0,)


@pytest.mark.parametrize("variant", ["simple", "vec4"])
def test_device_in_device_out(variant):
    a, b = rand(301), rand(301, 1)
    da, db = cuda.to_device(a), cuda.to_device(b)
    got = vector_add(da, db, variant=variant)
    assert not isinstance(got, np.ndarray), "device input must give a device result"
    np.testing.assert_array_equal(got.copy_to_host(), a + b)


def test_device_out_is_written_in_place():
    a, b = rand(203), rand(203, 1)
    dout = cuda.to_device(np.full(203, np.nan, np.float32))
    ret = vector_add(cuda.to_device(a), cuda.to_device(b), dout, variant="best")
    assert ret is dout
    np.testing.assert_array_equal(dout.copy_to_host(), a + b)


def test_host_out_is_filled_and_returned():
    a, b = rand(77), rand(77, 1)
    out = np.full(77, np.nan, np.float32)
    assert vector_add(a, b, out, variant="ilp") is out
    np.testing.assert_array_equal(out, a + b)


def test_mixed_host_and_device_inputs_give_a_host_result():
    a, b = rand(99), rand(99, 1)
    got = vector_add(a, cuda.to_device(b))
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, a + b)


def test_wrong_dtype_names_the_argument():
    with pytest.raises(TypeError, match=r"b has dtype float64, expected float32"):
        vector_add(rand(8), rand(8).astype(np.float64))


def test_wrong_ndim_names_the_argument():
    with pytest.raises(ValueError, match=r"a must be 1-dimensional"):
        vector_add(rand(8).reshape(2, 4), rand(8).reshape(2, 4))


def test_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"shape mismatch: a \(8,\), b \(9,\)"):
        vector_add(rand(8), rand(9))
    with pytest.raises(ValueError, match=r"shape mismatch: a \(8,\), out \(7,\)"):
        vector_add(rand(8), rand(8), np.empty(7, np.float32))


def test_not_an_array_is_refused():
    with pytest.raises(TypeError, match=r"a must be a NumPy array or a GPU array"):
        vector_add([1.0, 2.0], rand(2))


def test_unknown_variant_and_bad_block_size():
    with pytest.raises(ValueError, match=r"variant must be one of .*'best'"):
        vector_add(rand(4), rand(4), variant="fast")
    with pytest.raises(ValueError, match=r"threads must be an int from 1 to 1024"):
        vector_add(rand(4), rand(4), threads=2048)


@pytest.mark.parametrize("variant", ALL)
@pytest.mark.parametrize("n", [1, 1000, 4099])
def test_launch_config_covers_every_element(variant, n):
    cfg = vector.resolve(variant)
    blocks, threads = vector.launch_config(n, variant)
    assert threads == cfg.threads
    if cfg.kernel in ("grid_stride", "vec4_stride"):
        assert blocks >= 1  # the loop covers the rest
    else:
        assert blocks * cfg.elements_per_block() >= n
        assert (blocks - 1) * cfg.elements_per_block() < n


def test_best_is_a_resolvable_configuration():
    assert vector.resolve("best") == vector.BEST
    assert vector.BEST.kernel in ("simple", "grid_stride", "ilp", "vec4", "vec4_stride")


# Configurations the probe measures, run through the same launcher: odd sizes, block sizes
# smaller than the vec4 tail, grid-stride grids much smaller than the array.
CONFIGS = [
    Config("ilp", threads=64, per_thread=8),
    Config("ilp", threads=32, per_thread=16),
    Config("vec4", threads=32, per_thread=1),
    Config("vec4", threads=1, per_thread=1),  # one thread: the 3-element tail is a loop
    Config("vec4", threads=64, per_thread=4, hint="cs"),
    Config("vec4", threads=128, per_thread=2, hint="nc"),
    Config("vec4_stride", threads=32, per_thread=2, blocks_per_sm=1),
    Config("grid_stride", threads=64, blocks_per_sm=1),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: c.name)
@pytest.mark.parametrize("n", [7, 1031])
def test_probe_configurations_are_correct(cfg, n):
    a, b = rand(n), rand(n, 1)
    out = cuda.to_device(np.full(n, np.nan, np.float32))
    vector.run(cfg, cuda.to_device(a), cuda.to_device(b), out)
    np.testing.assert_array_equal(out.copy_to_host(), a + b)


def test_strided_device_input_is_correct():
    """A strided view cannot use 16-byte loads (on a GPU the launcher falls back to ilp)."""
    a, b = rand(400), rand(400, 1)
    da, db = cuda.to_device(a), cuda.to_device(b)
    got = vector_add(da[::2], db[::2], variant="vec4")
    np.testing.assert_array_equal(got.copy_to_host(), a[::2] + b[::2])


@pytest.mark.gpu
def test_unaligned_device_input_falls_back_and_is_correct():
    n = 2**16 + 3
    a, b = rand(n + 1), rand(n + 1, 1)
    da, db = cuda.to_device(a)[1:], cuda.to_device(b)[1:]  # 4 bytes past a 16-byte boundary
    assert not vector._vec4_ok(da, db, da)
    got = vector_add(da, db, variant="vec4")
    np.testing.assert_array_equal(got.copy_to_host(), a[1:] + b[1:])


@pytest.mark.gpu
def test_vec4_kernel_issues_16_byte_loads_and_stores():
    """The point of vec4: PTX ld.global.v4.f32 / st.global.v4.f32, and no local memory."""
    n = 4099
    a = cuda.to_device(rand(n))
    out = cuda.device_array(n, np.float32)
    kernel = vector._vec4_kernel(2, "")  # the same cache key as vector.run uses
    vector.run(Config("vec4", per_thread=2), a, a, out)
    ptx = "\n".join(kernel.inspect_asm().values())
    assert "ld.global.v4.f32" in ptx and "st.global.v4.f32" in ptx
    assert "ld.local" not in ptx, "the per-thread arrays should live in registers"


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", ["vec4", "vec4_stride"])
def test_cache_hint_reaches_both_vec4_kernels(kernel):
    """One factory for both vec4 kernels: the streaming hint must not be dropped."""
    n = 4099
    a = cuda.to_device(rand(n))
    out = cuda.device_array(n, np.float32)
    cfg = Config(kernel, per_thread=2, blocks_per_sm=1, hint="cs")
    vector.run(cfg, a, a, out)
    ptx = "\n".join(vector._kernel_for(cfg).inspect_asm().values())
    assert "ld.global.cs.v4.f32" in ptx and "st.global.cs.v4.f32" in ptx
    np.testing.assert_array_equal(out.copy_to_host(), 2 * a.copy_to_host())


@pytest.mark.gpu
def test_repeated_device_launches_take_the_prepared_path(monkeypatch):
    """After the first call, the same shapes on device arrays with ``out`` reuse the plan:
    no checks run again (a check that would fail is never reached), the result is right."""
    a, b = rand(1031), rand(1031, 1)
    da, db = cuda.to_device(a), cuda.to_device(b)
    out = cuda.device_array(1031, np.float32)
    vector._PLANS.clear()
    vector_add(da, db, out, variant="vec4")
    assert len(vector._PLANS) == 1, "Numba's internals differ from _numba_private's"
    db2 = cuda.to_device(rand(1031, 2))
    out.copy_to_device(np.full(1031, np.nan, np.float32))

    def no_checks(*args, **kwargs):
        raise AssertionError("the prepared path must not check again")

    monkeypatch.setattr(vector, "check_array", no_checks)
    assert vector_add(da, db2, out, variant="vec4") is out
    np.testing.assert_array_equal(out.copy_to_host(), a + db2.copy_to_host())
    monkeypatch.undo()
    with pytest.raises(ValueError, match="shape mismatch"):  # a new layout is checked again
        vector_add(da, cuda.to_device(rand(7)), out, variant="vec4")


@pytest.mark.gpu
@pytest.mark.parametrize("variant", ALL)
def test_large_odd_size_on_gpu(variant):
    n = 2**22 + 3
    a, b = rand(n), rand(n, 1)
    got = vector_add(cuda.to_device(a), cuda.to_device(b), variant=variant).copy_to_host()
    np.testing.assert_array_equal(got, a + b)
