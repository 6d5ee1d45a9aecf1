"""cudacourse.intrinsics: 16-byte loads and stores, their alignment rule and cache hints."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse import device, intrinsics


@pytest.mark.skipif(not device.is_simulator(), reason="exercises the simulator's load helpers")
def test_simulator_load_helpers_mirror_the_intrinsics():
    x = np.arange(12, dtype=np.float32)
    assert intrinsics.load4(x, 2) == (8.0, 9.0, 10.0, 11.0)
    intrinsics.store4(x, 0, 1.5, 2.5, 3.5, 4.5)
    np.testing.assert_array_equal(x[:4], [1.5, 2.5, 3.5, 4.5])
    assert intrinsics.load4_shared(x, 1) == (4.0, 5.0, 6.0, 7.0)


def test_hinted_pairs_and_unknown_hint():
    for hint in intrinsics.HINTS:
        load4, store4 = intrinsics.hinted(hint)
        assert callable(load4) and callable(store4)
    assert intrinsics.hinted("nc")[1] is intrinsics.store4, "nc is a load hint only"
    with pytest.raises(ValueError, match=r"hint must be one of \('', 'cs', 'nc'\), got 'lu'"):
        intrinsics.hinted("lu")


@cuda.jit
def _copy4(src, dst, hint_cs):
    """One thread per 16-byte group: dst[4j:4j+4] = src[4j:4j+4]."""
    j = cuda.grid(1)
    if j < src.shape[0] // 4:
        if hint_cs:
            v0, v1, v2, v3 = _LOAD_CS(src, j)
            _STORE_CS(dst, j, v0, v1, v2, v3)
        else:
            v0, v1, v2, v3 = intrinsics.load4(src, j)
            intrinsics.store4(dst, j, v0, v1, v2, v3)


_LOAD_CS, _STORE_CS = intrinsics.hinted("cs")


@pytest.mark.parametrize("hint_cs", [False, True])
def test_a_kernel_copies_16_bytes_at_a_time(hint_cs):
    x = np.random.default_rng(0).standard_normal(40).astype(np.float32)
    d = cuda.to_device(np.full(40, np.nan, np.float32))
    _copy4[2, 8](cuda.to_device(x), d, hint_cs)
    np.testing.assert_array_equal(d.copy_to_host(), x)


@pytest.mark.gpu
def test_alignment_rule_on_a_gpu():
    d = cuda.device_array(64, np.float32)
    assert intrinsics.aligned16(d)
    assert not intrinsics.aligned16(d[1:]), "4 bytes past a 16-byte boundary"
    assert not intrinsics.aligned16(d[::2]), "strided: not contiguous"


@pytest.mark.gpu
def test_ptx_has_vector_loads_and_stores():
    x = cuda.to_device(np.arange(64, dtype=np.float32))
    y = cuda.device_array(64, np.float32)
    _copy4[2, 8](x, y, False)
    ptx = "\n".join(_copy4.inspect_asm().values())
    assert "ld.global.v4.f32" in ptx and "st.global.v4.f32" in ptx
