"""cudacourse.runtime.intrinsics: 16-byte loads and stores, their alignment rule and cache hints."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import device, intrinsics


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


_SM90_SCRIPT = r'''
import sys
sys.path.insert(0, "tools")
import offline_sm90  # noqa: F401  GPU mode and the sm_90 toolkit, without a GPU
from numba import cuda, float32
from cudacourse.runtime import intrinsics
from cudacourse.kernels import vector
sig = (float32[::1], float32[::1], float32[::1])
for hint, load, store in (("", "ld.global.v4.f32", "st.global.v4.f32"),
                          ("cs", "ld.global.cs.v4.f32", "st.global.cs.v4.f32"),
                          ("nc", "ld.global.nc.v4.f32", "st.global.v4.f32")):
    for stride in (False, True):
        ptx, _ = cuda.compile_ptx(vector._vec4_kernel(2, hint, stride).py_func, sig, cc=(9, 0))
        assert load in ptx and store in ptx, (hint, stride)
        assert "ld.local" not in ptx, "per-thread arrays must live in registers"


def shared_copy(src, dst):
    sh = cuda.shared.array(64, float32, alignment=16)
    t = cuda.threadIdx.x
    sh[t] = src[t]
    cuda.syncthreads()
    if t < 16:
        v0, v1, v2, v3 = intrinsics.load4_shared(sh, t)
        intrinsics.store4(dst, t, v0, v1, v2, v3)


ptx, _ = cuda.compile_ptx(shared_copy, sig[:2], cc=(9, 0))
assert "ld.shared.v4.f32" in ptx
print("ok")
'''


def test_16_byte_accesses_compile_to_vector_instructions_for_sm90():
    """Without a GPU: compile for an H200 offline (tools/offline_sm90.py) and read the PTX."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM",
                                                              "CUDACOURSE_SIM_REASON")}
    env["CUDACOURSE_QUIET"] = "1"
    proc = subprocess.run([sys.executable, "-c", _SM90_SCRIPT], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    if proc.returncode and "offline_sm90:" in proc.stderr:
        pytest.skip(f"no CUDA toolkit for an offline sm_90 compile: {proc.stderr.strip()}")
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]
