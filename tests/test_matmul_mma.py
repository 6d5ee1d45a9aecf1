"""cudacourse.kernels.matmul_mma: the bfloat16 tensor-core matmul against its NumPy reference."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import device, fragments as fr
from cudacourse.kernels import matmul_mma as mm


def _inputs(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((k, n)).astype(np.float32))


def _tol(k):  # float32 accumulation over k products of bf16 values: ~1e-6 relative each
    return 1e-5 * np.sqrt(k) + 1e-5


@pytest.mark.parametrize("m,k,n", [(32, 64, 32), (40, 50, 33), (64, 96, 64), (1, 16, 8)])
def test_matches_the_reference(m, k, n):
    a, b = _inputs(m, k, n)
    c = mm.matmul_bf16(a, b)
    assert c.shape == (m, n) and c.dtype == np.float32
    np.testing.assert_allclose(c, mm.matmul_bf16_ref(a, b), rtol=_tol(k), atol=_tol(k))
    # bfloat16 inputs are not float32 ones: the float32 product differs by far more
    assert np.abs(c - a @ b).max() > 1e-3


def test_the_gpu_config_in_one_block():
    """The H200's tiles (128 x 128, 8 warps, a 4-stage ring) on a 128 x 160 x 128 product:
    five k-slices, so the ring wraps around."""
    cfg = mm.GPU_CONFIG
    assert cfg.stages == 4
    a, b = _inputs(128, 160, 128, seed=1)
    np.testing.assert_allclose(mm.matmul_bf16(a, b, config=cfg), mm.matmul_bf16_ref(a, b),
                               rtol=_tol(160), atol=_tol(160))


def test_the_gpu_config_is_the_sweeps_fastest_correct_one():
    """GPU_CONFIG is what the committed H200 sweep measured fastest among the configurations
    whose result agreed with cuBLAS (docs/sweeps/README.md)."""
    import json
    from pathlib import Path

    sweep = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sweeps" /
                        "tensorcore-h200-2026-12-05.json").read_text())["matmul"]
    right = {k: r for k, r in sweep.items() if isinstance(r, dict) and "ratio" in r
             and r["max_rel_err_vs_cublas"] < 0.05}
    best = max(right, key=lambda k: right[k]["ratio"])
    assert mm.MmaConfig(*json.loads(best.replace("(", "[").replace(")", "]"))) == mm.GPU_CONFIG


def test_dynamic_shared_memory_and_a_register_cap():
    """The same kernel with its rings in dynamic shared memory (how configurations above
    48 KiB run), 4 stages, and max_registers: the result does not change."""
    cfg = mm.MmaConfig(bm=32, bn=64, bk=32, wm=16, wn=32, stages=4, max_registers=128,
                       dynamic_smem=True)
    assert cfg.dynamic and not mm.SIM_CONFIG.dynamic
    assert mm.MmaConfig(bm=128, bn=256, wm=64, wn=64, stages=3).dynamic  # 72 KiB
    a, b = _inputs(64, 80, 64, seed=4)
    np.testing.assert_allclose(mm.matmul_bf16(a, b, config=cfg), mm.matmul_bf16_ref(a, b),
                               rtol=_tol(80), atol=_tol(80))


def test_bits_in_bits_out_and_device_arrays():
    a, b = _inputs(32, 64, 32, seed=2)
    ab, bb = fr.to_bf16_bits(a), fr.to_bf16_bits(b)
    out = np.zeros((32, 32), np.uint16)
    got = mm.matmul_bf16(ab, bb.view(np.int16), out=out)
    assert got is out
    want = fr.to_bf16_bits(mm.matmul_bf16_ref(a, b))
    # one bfloat16 step at most (the float32 sums differ in their last bits)
    diff = np.abs(out.astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1 and (diff == 0).mean() > 0.9
    # device inputs are whole tiles of this device's configuration (128 on the H200)
    cfg = mm._default_config()
    a, b = _inputs(cfg.bm, 2 * cfg.bk, cfg.bn, seed=3)
    dout = cuda.device_array((cfg.bm, cfg.bn), np.float32)
    res = mm.matmul_bf16(cuda.to_device(fr.to_bf16_bits(a)), cuda.to_device(fr.to_bf16_bits(b)),
                         out=dout)
    assert res is dout
    np.testing.assert_allclose(dout.copy_to_host(), mm.matmul_bf16_ref(a, b), rtol=1e-4,
                               atol=1e-4)


def test_clear_errors():
    a, b = _inputs(32, 64, 32)
    with pytest.raises(ValueError, match=r"shape mismatch: a \(32, 64\) @ b \(32, 64\)"):
        mm.matmul_bf16(a, a)
    with pytest.raises(TypeError, match="dtype float64"):
        mm.matmul_bf16(a.astype(np.float64), b)
    with pytest.raises(TypeError, match="pass bfloat16 bit patterns"):
        mm.matmul_bf16(cuda.to_device(a), cuda.to_device(b))
    with pytest.raises(ValueError, match="device inputs must be whole tiles"):
        mm.matmul_bf16(cuda.to_device(fr.to_bf16_bits(a[:, :40])),
                       cuda.to_device(fr.to_bf16_bits(b[:40])))
    with pytest.raises(ValueError, match="warp tile must divide the block tile"):
        mm.MmaConfig(bm=128, wm=48).validate()
    with pytest.raises(ValueError, match="at most 232448"):
        mm.MmaConfig(bm=256, bn=256, bk=64, wm=64, wn=64, stages=4).validate()


@pytest.mark.skipif(not device.is_simulator(), reason="the simulator's cp.async order check")
def test_a_missing_wait_is_caught(monkeypatch):
    """The kernel's cp_async_wait removed (a mutant): the simulator names the race."""
    from cudacourse.runtime import tensorcore as tc

    monkeypatch.setattr(tc, "cp_async_wait", lambda n: None)
    mm._KERNELS.clear()
    try:
        a, b = _inputs(32, 64, 32)
        with pytest.raises(tc.AsyncCopyError, match="still in flight"):
            mm.matmul_bf16(a, b)
    finally:
        mm._KERNELS.clear()


@pytest.mark.gpu
def test_large_on_a_gpu():
    a, b = _inputs(1024, 512, 768, seed=3)
    np.testing.assert_allclose(mm.matmul_bf16(a, b), mm.matmul_bf16_ref(a, b),
                               rtol=_tol(512), atol=_tol(512))
