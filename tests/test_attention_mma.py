"""cudacourse.kernels.attention_mma: bfloat16 flash attention on tensor cores against the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import attention_mma as am
from cudacourse.runtime import device, fragments as fr

TOL = 1e-2  # P is rounded to bfloat16 before P V (as FlashAttention does): ~2^-8 relative


def _qkv(bh, s, d, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal((bh, s, d)).astype(np.float32) for _ in range(3))


@pytest.mark.parametrize("bh,s,d,causal", [(1, 64, 64, False), (2, 50, 64, True),
                                           (1, 64, 128, True), (1, 40, 128, False)])
def test_matches_the_reference(bh, s, d, causal):
    q, k, v = _qkv(bh, s, d)
    o = am.flash_attention_bf16(q, k, v, causal=causal)
    assert o.shape == q.shape and o.dtype == np.float32
    ref = am.attention_bf16_ref(q, k, v, causal)
    np.testing.assert_allclose(o, ref, atol=TOL, rtol=TOL)
    # the mask matters: the other kind of attention is far away
    assert np.abs(o - am.attention_bf16_ref(q, k, v, not causal)).max() > 0.1


def test_the_gpu_tiles_with_several_key_tiles():
    """d = 64 with the H200's tiles (4 warps of two m-tiles, 64 keys a tile): 2 query
    blocks, 4 key tiles, causal (the diagonal tiles are masked, those above skipped)."""
    q, k, v = _qkv(1, 256, 64, seed=1)
    o = am.flash_attention_bf16(q, k, v, causal=True, config=am.GPU_CONFIGS[64])
    np.testing.assert_allclose(o, am.attention_bf16_ref(q, k, v, True), atol=TOL, rtol=TOL)


def test_the_gpu_configs_are_the_sweeps_fastest_correct_ones():
    """GPU_CONFIGS is what the committed H200 sweep measured fastest, per head_dim, among the
    configurations whose result agreed with SDPA (docs/sweeps/README.md)."""
    import ast
    import json
    from pathlib import Path

    sweep = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sweeps" /
                        "tensorcore-h200-2026-12-05.json").read_text())["attention"]
    for d in (64, 128):
        right = {k: r for k, r in sweep[f"d{d}"].items() if isinstance(r, dict)
                 and "ratio" in r and r["max_err_vs_sdpa"] < 0.05}
        best = max(right, key=lambda k: right[k]["ratio"])
        assert am.MmaAttentionConfig(*ast.literal_eval(best)) == am.GPU_CONFIGS[d], d


@pytest.mark.parametrize("d", [64, 128])
def test_two_m_tiles_per_warp(d):
    """Each warp owns 32 query rows (two 16-row m-tiles sharing every K and V fragment);
    causal, with a ragged last tile."""
    cfg = am.MmaAttentionConfig(warps=1, bc=16, m_tiles=2)
    assert cfg.br == 32
    q, k, v = _qkv(1, 56, d, seed=5)
    o = am.flash_attention_bf16(q, k, v, causal=True, config=cfg)
    np.testing.assert_allclose(o, am.attention_bf16_ref(q, k, v, True), atol=TOL, rtol=TOL)


def test_dynamic_shared_memory():
    """Q, K and V buffers in dynamic shared memory (how tiles above 48 KiB run: d = 128 with
    64 keys a tile is 80 KiB), a register cap: the same result."""
    cfg = am.MmaAttentionConfig(warps=2, bc=16, max_registers=255, dynamic_smem=True)
    q, k, v = _qkv(1, 48, 128, seed=4)
    o = am.flash_attention_bf16(q, k, v, causal=True, config=cfg)
    np.testing.assert_allclose(o, am.attention_bf16_ref(q, k, v, True), atol=TOL, rtol=TOL)


def test_four_dimensional_bits_and_device_arrays():
    # device inputs are whole tiles of this device's configuration (64 keys on the H200)
    cfg = am._default_config(64)
    seq = math.lcm(cfg.br, cfg.bc)
    q, k, v = (x.reshape(1, 2, seq, 64) for x in _qkv(2, seq, 64, seed=2))
    qb, kb, vb = (fr.to_bf16_bits(x) for x in (q, k, v))
    out = np.zeros(q.shape, np.uint16)
    assert am.flash_attention_bf16(qb, kb, vb.view(np.int16), out=out) is out
    ref = am.attention_bf16_ref(q, k, v)
    np.testing.assert_allclose(fr.from_bf16_bits(out), ref, atol=2 * TOL, rtol=2 * TOL)
    dout = cuda.device_array(q.shape, np.float32)
    got = am.flash_attention_bf16(*(cuda.to_device(x) for x in (qb, kb, vb)), out=dout)
    assert got is dout
    np.testing.assert_allclose(dout.copy_to_host(), ref, atol=TOL, rtol=TOL)


def test_clear_errors():
    q, k, v = _qkv(1, 32, 64)
    with pytest.raises(ValueError, match="head_dim .* must be one of \\(64, 128\\), got 32"):
        am.flash_attention_bf16(q[..., :32], k[..., :32], v[..., :32])
    with pytest.raises(ValueError, match="must have the same shape"):
        am.flash_attention_bf16(q, k[:, :16], v)
    with pytest.raises(TypeError, match="dtype float64"):
        am.flash_attention_bf16(q.astype(np.float64), k, v)
    with pytest.raises(TypeError, match="pass bfloat16 bit patterns"):
        am.flash_attention_bf16(*(cuda.to_device(x) for x in (q, k, v)))
    bits = [cuda.to_device(fr.to_bf16_bits(x[:, :20])) for x in (q, k, v)]
    with pytest.raises(ValueError, match="device inputs need seq to be a multiple"):
        am.flash_attention_bf16(*bits)
    with pytest.raises(ValueError, match="at most 232448"):
        am.MmaAttentionConfig(warps=4, bc=256).validate(128)


@pytest.mark.skipif(not device.is_simulator(), reason="the simulator's cp.async order check")
def test_a_missing_wait_is_caught(monkeypatch):
    from cudacourse.runtime import tensorcore as tc

    monkeypatch.setattr(tc, "cp_async_wait", lambda n: None)
    am._KERNELS.clear()
    try:
        with pytest.raises(tc.AsyncCopyError, match="still in flight"):
            am.flash_attention_bf16(*_qkv(1, 32, 64))
    finally:
        am._KERNELS.clear()


@pytest.mark.gpu
@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, False), (128, True)])
def test_bench_shape_slice_on_a_gpu(d, causal):
    q, k, v = _qkv(2, 1000, d, seed=3)
    o = am.flash_attention_bf16(q, k, v, causal=causal)
    np.testing.assert_allclose(o, am.attention_bf16_ref(q, k, v, causal), atol=TOL, rtol=TOL)
