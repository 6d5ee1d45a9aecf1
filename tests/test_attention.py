"""Lesson 5: attention references, the fused kernels, the unfused CuPy baseline."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import attention as A
from cudacourse.runtime import device

pytestmark = pytest.mark.lesson5


def qkv(bh, s, d, seed=0, mag=1.0):
    g = np.random.default_rng(seed)
    return [(g.standard_normal((bh, s, d)) * mag).astype(np.float32) for _ in range(3)]


def test_reference_causal_row_zero_is_v_zero():
    q, k, v = qkv(2, 9, 8)
    o = A.attention_ref(q, k, v, causal=True)
    np.testing.assert_allclose(o[:, 0], v[:, 0], rtol=1e-12)
    o_full = A.attention_ref(q, k, v)
    np.testing.assert_allclose(o[:, -1], o_full[:, -1], rtol=1e-12)  # last row sees all keys


# In the simulator every config runs the same code paths; sizes stay tiny (seq 37).
@pytest.mark.parametrize("bh, s, d, causal", [(2, 37, 16, False), (1, 37, 32, True),
                                              (1, 17, 64, True), (1, 5, 128, False)])
@pytest.mark.parametrize("variant", ["fast", "tiled"])
def test_flash_attention_matches_reference(bh, s, d, causal, variant):
    q, k, v = qkv(bh, s, d, seed=s + d)
    got = A.flash_attention(q, k, v, causal=causal, variant=variant)
    assert got.shape == q.shape and got.dtype == np.float32
    assert A.relative_error(got, A.attention_ref(q, k, v, causal)) <= 1e-5


@pytest.mark.parametrize("cfg, shuffles", [((64, 32, 4, 4), True), ((64, 32, 4, 4), False),
                                           ((64, 32, 8, 4), True)])
def test_gpu_tile_config_runs_right(cfg, shuffles):
    """GPU-shaped tiles (64 query rows, 64 or 128 threads), with and without warp shuffles."""
    if shuffles and not A._shuffles_available():
        pytest.skip("warp shuffles unavailable in this simulator (cudacourse.runtime.simwarp)")
    q, k, v = qkv(1, 70, 64, seed=3) if device.is_simulator() else qkv(3, 1000, 64, seed=3)
    for causal in (False, True):
        got = A.flash_attention(q, k, v, causal=causal, config=A.FlashConfig(*cfg),
                                use_shuffles=shuffles, variant="tiled")
        assert A.relative_error(got, A.attention_ref(q, k, v, causal)) <= 1e-5


def test_reference_softcap_and_window():
    q, k, v = qkv(1, 12, 8, seed=6, mag=3.0)
    capped = A.attention_ref(q, k, v, causal=True, softcap=2.0)
    assert A.relative_error(capped, A.attention_ref(q, k, v, causal=True)) > 1e-3
    # window 1: every query sees only its own key
    np.testing.assert_allclose(A.attention_ref(q, k, v, causal=True, window=1), v, rtol=1e-12)
    # a window as long as the sequence hides nothing
    np.testing.assert_allclose(A.attention_ref(q, k, v, causal=True, window=12),
                               A.attention_ref(q, k, v, causal=True), rtol=1e-12)


# seq 40 with the simulator's 32-row tiles: two query blocks, so with window 7 the second
# block skips the first key tile (the window's start) and masks inside the next ones.
@pytest.mark.parametrize("softcap, window", [(5.0, None), (None, 7), (5.0, 7), (None, 1)])
@pytest.mark.parametrize("shuffles", [False, True])
def test_fast_softcap_and_window_match_reference(softcap, window, shuffles):
    if shuffles and not A._shuffles_available():
        pytest.skip("warp shuffles unavailable in this simulator (cudacourse.runtime.simwarp)")
    q, k, v = qkv(1, 40, 64, seed=7, mag=2.0)
    got = A.flash_attention(q, k, v, causal=True, softcap=softcap, window=window,
                            use_shuffles=shuffles)
    want = A.attention_ref(q, k, v, causal=True, softcap=softcap, window=window)
    assert A.relative_error(got, want) <= 1e-5


@pytest.mark.parametrize("cfg", [(32, 16, 4, 4, True), (64, 32, 4, 4), (64, 16, 4, 4)])
def test_fast_tile_configs_run_right(cfg):
    """GPU-shaped tiles of the fast kernel (64 threads and more), K/V prefetch included."""
    q, k, v = qkv(1, 70, 64, seed=8) if device.is_simulator() else qkv(3, 1000, 64, seed=8)
    for causal in (False, True):
        got = A.flash_attention(q, k, v, causal=causal, config=A.FastConfig(*cfg),
                                use_shuffles=False if device.is_simulator() else None)
        assert A.relative_error(got, A.attention_ref(q, k, v, causal)) <= 1e-5


def test_fast_config_validation_names_the_problem():
    with pytest.raises(ValueError, match="lanes sharing a row"):
        A.FastConfig(64, 32, 4, 16).validate(64)
    with pytest.raises(ValueError, match="multiple of 4"):
        A.FastConfig(64, 32, 4, 4).validate(16)  # 8 lanes x 4 columns do not fit 16
    with pytest.raises(ValueError, match="shared memory"):
        A.FastConfig(512, 32, 4, 4).validate(128)
    for d, cfg in A.FAST_GPU_CONFIGS.items():
        cfg.validate(d)  # the shipped GPU tiles are valid for their head_dim


@pytest.mark.parametrize("kwargs, phrase", [
    (dict(softcap=5.0, variant="tiled"), "need variant='fast'"),
    (dict(window=4), "window needs causal=True"),
    (dict(window=0, causal=True), "positive integer"),
    (dict(softcap=-1.0), "positive number"),
    (dict(variant="other"), "variant must be"),
    (dict(config=A.FlashConfig()), "FastConfig"),
])
def test_fast_options_refuse_bad_values(kwargs, phrase):
    q, k, v = qkv(1, 4, 16)
    with pytest.raises(ValueError, match=phrase):
        A.flash_attention(q, k, v, **kwargs)


def test_large_scores_do_not_overflow():
    q, k, v = qkv(1, 37, 16, seed=4)
    q, k = q * 100, k * 100
    for causal in (False, True):
        got = A.flash_attention(q, k, v, causal=causal)
        assert np.isfinite(got).all()
        assert A.relative_error(got, A.attention_ref(q, k, v, causal)) <= 1e-5


def test_four_d_input_and_device_round_trip():
    q, k, v = qkv(2, 20, 16, seed=5)
    q4, k4, v4 = (a.reshape(1, 2, 20, 16) for a in (q, k, v))
    got = A.flash_attention(q4, k4, v4)
    assert got.shape == (1, 2, 20, 16)
    dev = A.flash_attention(*(cuda.to_device(a) for a in (q, k, v)))
    assert not isinstance(dev, np.ndarray)
    np.testing.assert_allclose(dev.copy_to_host(), got.reshape(2, 20, 16), rtol=1e-6, atol=1e-7)
    out = np.empty_like(q)
    assert A.flash_attention(q, k, v, out=out) is out


@pytest.mark.parametrize("args, exc, phrase", [
    ((np.zeros((1, 4, 16), np.float64),) * 3, TypeError, "q has dtype float64"),
    ((np.zeros((4, 16), np.float32),) * 3, ValueError, "q must be 3-D"),
    ((np.zeros((1, 4, 16), np.float32), np.zeros((1, 5, 16), np.float32),
      np.zeros((1, 4, 16), np.float32)), ValueError, "shape mismatch"),
    ((np.zeros((1, 4, 24), np.float32),) * 3, ValueError, "head_dim"),
])
def test_flash_attention_refuses_bad_input(args, exc, phrase):
    with pytest.raises(exc, match=phrase):
        A.flash_attention(*args)


def test_config_validation_names_the_problem():
    with pytest.raises(ValueError, match="shared memory"):
        A.FlashConfig(128, 64, 4, 8).validate(128)
    with pytest.raises(ValueError, match="multiple of"):
        A.FlashConfig(64, 32, 4, 4).validate(20)


def test_memory_model():
    gib = 2**30
    assert A.extra_memory_bytes(16, 16384, 64, "unfused") >= 16 * gib  # the scores alone
    assert A.extra_memory_bytes(16, 16384, 64, "fused") <= gib // 4
    with pytest.raises(ValueError, match="method"):
        A.extra_memory_bytes(1, 1, 1, "other")


def test_unfused_needs_a_gpu_in_the_simulator():
    if not device.is_simulator():
        pytest.skip("checks the simulator's error message")
    q, k, v = qkv(1, 4, 16)
    with pytest.raises(device.DeviceError, match="needs a real NVIDIA GPU"):
        A.attention_unfused(q, k, v)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [32, 64, 128])
@pytest.mark.parametrize("causal", [False, True])
def test_gpu_fused_and_unfused_agree_with_reference(d, causal):
    q, k, v = qkv(4, 1000, d, seed=d)
    want = A.attention_ref(q, k, v, causal)
    assert A.relative_error(A.flash_attention(q, k, v, causal=causal), want) <= 1e-5
    assert A.relative_error(A.attention_unfused(q, k, v, causal=causal), want) <= 1e-5


@pytest.mark.gpu
@pytest.mark.parametrize("d", [16, 32, 64, 128])
def test_gpu_fast_kernel_shipped_tiles(d):
    """The shipped GPU tiles (above 48 KiB of shared memory for d = 64 and 128), soft-capping
    and the sliding window included."""
    q, k, v = qkv(2, 1000, d, seed=d + 1, mag=2.0)
    for causal in (False, True):
        got = A.flash_attention(q, k, v, causal=causal, variant="fast")
        assert A.relative_error(got, A.attention_ref(q, k, v, causal)) <= 1e-5
    got = A.flash_attention(q, k, v, causal=True, softcap=5.0, window=300)
    want = A.attention_ref(q, k, v, causal=True, softcap=5.0, window=300)
    assert A.relative_error(got, want) <= 1e-5


@pytest.mark.gpu
def test_gpu_cupy_in_cupy_out_and_memory_bound():
    cp = pytest.importorskip("cupy")
    bh, s, d = 16, 16384, 64
    q = cp.random.standard_normal((bh, s, d), dtype=cp.float32)
    # The driver's free memory is the whole GPU's: another test process that creates its
    # CUDA context meanwhile (pytest-xdist on one GPU) takes a few hundred MB of it. The
    # fewest bytes of three calls is this call's own (the unfused scores would be 16 GiB).
    seen = []
    for _ in range(3):
        extra, out = A.measure_extra_memory(lambda: A.flash_attention(q, q, q))
        assert isinstance(out, cp.ndarray) and out.shape == q.shape
        seen.append(extra)
        del out
    assert min(seen) <= 2**30 // 4, seen


def test_fast_configs_are_the_fastest_of_the_committed_sweep():
    """The "fast" tile shapes at d = 64 and 128 are what the committed H200 sweep measured
    fastest (docs/sweeps/probe_attention_h200_2026-12-01_run2.json)."""
    import ast
    import json
    from pathlib import Path

    from cudacourse.kernels import attention
    from cudacourse.kernels.attention import FastConfig

    path = Path(__file__).resolve().parents[1] / "docs/sweeps/probe_attention_h200_2026-12-01_run2.json"
    rows = json.loads(path.read_text())["rows"]
    for d in (64, 128):
        timed = [r for r in rows if r.get("what") == "fast" and r.get("ms") and not r["causal"]
                 and r["shape"] == f"(16, 4096, {d})"]
        assert len(timed) >= 5, d
        best = min(timed, key=lambda r: r["ms"])
        assert FastConfig(*ast.literal_eval(best["cfg"])) == attention.FAST_GPU_CONFIGS[d], d


def test_no_kernel_answers_lesson_5s_exercise():
    """One thread per query row is lesson 5's graded flash_rows: not in the package."""
    assert "rows" not in A.VARIANTS and not hasattr(A, "_rows_kernel")
    q, k, v = qkv(1, 5, 16, seed=1)
    with pytest.raises(ValueError, match="variant must be"):
        A.flash_attention(q, k, v, variant="rows")
