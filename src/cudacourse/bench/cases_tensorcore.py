"""Lesson 7: the tensor-core kernels (``matmul_mma``, ``attention_mma``) against cuBLAS bf16,
SDPA bf16 (cuDNN or flash) and the course's own float32 flash attention.

All in bfloat16 with float32 accumulation, outputs in bfloat16 for both sides (PyTorch's
bfloat16 matmul and SDPA return bfloat16; the course's kernels write bfloat16 bit patterns
into an int16 CuPy array). Inputs are the same bits on both sides: float32 uniforms rounded
once to bfloat16 (CuPy), viewed as ``torch.bfloat16`` for PyTorch and passed as int16 to the
course. Correctness first (sampled rows against a float64 reference on the bfloat16-rounded
inputs), then the public calls are timed.

Ratios: ``matmul_mma_bf16_vs_cublas_bf16`` (4096^3), ``attention_mma_bf16_vs_sdpa_bf16``,
``..._causal``, ``..._d128`` (16 x 4096 x 64 / 128) and ``attention_mma_bf16_vs_fused_f32``
(the same shape against ``attention.flash_attention``, float32 on CUDA cores).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .core import Case, Ctx, Entry, Prepared, _need, _sample_rows, _torch, assert_close

SIZES = {"full": {"matmul": (4096, 4096, 4096), "attention": (16, 4096)},
         "small": {"matmul": (512, 256, 384), "attention": (2, 256)},
         "sim": {"matmul": (32, 64, 32), "attention": (1, 32)}}
SHAPES = (("", 64, False), ("_causal", 64, True), ("_d128", 128, False))


def _bits(ctx: Ctx, x: Any) -> Any:
    """float32 -> bfloat16 bit patterns (int16), round to nearest even, on ``ctx.xp``."""
    xp = ctx.xp
    u = x.view(xp.uint32)
    r = (u + xp.uint32(0x7FFF) + ((u >> 16) & xp.uint32(1))) >> 16
    return r.astype(xp.uint16).view(xp.int16)


def _float(ctx: Ctx, b: Any) -> Any:
    xp = ctx.xp
    return (xp.asarray(b).view(xp.uint16).astype(xp.uint32) << 16).view(xp.float32)


def _dev(ctx: Ctx, x: Any) -> Any:
    from numba import cuda

    return cuda.to_device(x) if ctx.sim else x


def _out16(ctx: Ctx, shape: tuple) -> Any:
    """An int16 output poisoned with 0xFFFF (a bfloat16 NaN), so unwritten elements show."""
    from numba import cuda

    x = np.full(shape, -1, np.int16)
    return cuda.to_device(x) if ctx.sim else ctx.xp.asarray(x)


def _read16(ctx: Ctx, out: Any) -> Any:
    return _float(ctx, ctx.read(out))


def _torch_bf16(ctx: Ctx, bits: Any) -> Any:
    torch = _torch()
    return torch.as_tensor(bits, device="cuda").view(torch.bfloat16)


def _describe(cfg: Any) -> str:
    """A configuration in a label, so the report says which tiles were timed."""
    from dataclasses import fields

    return " ".join(f"{f.name}={getattr(cfg, f.name)}" for f in fields(cfg)
                    if getattr(cfg, f.name) != f.default or f.name in ("bm", "bn", "warps",
                                                                      "bc"))


# --- matmul -----------------------------------------------------------------------------------

def _matmul_inputs(ctx: Ctx) -> tuple[Any, Any, Any, Any]:
    m, k, n = SIZES[ctx.size]["matmul"]
    return ctx.memo("mma_matmul", lambda: _make_matmul(ctx, m, k, n))


def _make_matmul(ctx: Ctx, m: int, k: int, n: int) -> tuple:
    a, b = ctx.uniform((m, k), -1.0, 1.0), ctx.uniform((k, n), -1.0, 1.0)
    ab, bb = _bits(ctx, a), _bits(ctx, b)
    return ab, bb, _float(ctx, ab), _float(ctx, bb)


def _check_matmul(ctx: Ctx, a: Any, b: Any, got: Any, what: str) -> None:
    """Sampled rows against float64 on the same bfloat16 inputs; the output is bfloat16,
    so the tolerance is bfloat16's half step (2^-9) of |a| @ |b|, plus float32 noise."""
    xp = ctx.xp
    rows = _sample_rows(ctx, a.shape[0])
    a64, b64 = a[rows].astype(xp.float64), b.astype(xp.float64)
    assert_close(ctx, got[rows], a64 @ b64, what, rtol=2.0**-8,
                 scale=xp.abs(a64) @ xp.abs(b64))


def _matmul_work(ctx: Ctx) -> dict:
    m, k, n = SIZES[ctx.size]["matmul"]
    return dict(flops=2.0 * m * k * n, bytes=2.0 * (m * k + k * n + m * n),
                shape=f"{m}x{k} @ {k}x{n} bfloat16")


def _matmul_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.kernels.matmul_mma", "matmul_bf16")

    def cublas(ctx: Ctx) -> Prepared:
        torch = _torch()
        ab, bb, af, bf = _matmul_inputs(ctx)
        ta, tb = _torch_bf16(ctx, ab), _torch_bf16(ctx, bb)
        c = torch.empty((ta.shape[0], tb.shape[1]), device="cuda", dtype=torch.bfloat16)
        return Prepared(lambda: torch.matmul(ta, tb, out=c),
                        lambda: _check_matmul(ctx, af, bf, ctx.xp.asarray(c.float()),
                                              "torch.matmul bfloat16"), **_matmul_work(ctx))

    def mma(ctx: Ctx) -> Prepared:
        ab, bb, af, bf = _matmul_inputs(ctx)
        da, db = _dev(ctx, ab), _dev(ctx, bb)
        out = _out16(ctx, (ab.shape[0], bb.shape[1]))
        return Prepared(lambda: mod.matmul_bf16(da, db, out=out),
                        lambda: _check_matmul(ctx, af, bf, _read16(ctx, out),
                                              "matmul_mma.matmul_bf16"), **_matmul_work(ctx))

    return [Case("cublas_bf16", "cuBLAS bfloat16 (torch.matmul)", cublas, kind="compute",
                 needs="torch"),
            Case("matmul_mma_bf16", "matmul on tensor cores (Numba mma.sync, bfloat16, "
                 f"{_describe(mod._default_config())})", mma,
                 ratio="matmul_mma_bf16_vs_cublas_bf16", vs="cublas_bf16", kind="compute",
                 overhead="matmul_mma_bf16")]


# --- attention --------------------------------------------------------------------------------

def _attention_inputs(ctx: Ctx, d: int) -> tuple:
    h, s = SIZES[ctx.size]["attention"]

    def make() -> tuple:
        raw = (ctx.uniform((h, s, d), -2.0, 2.0), ctx.uniform((h, s, d), -2.0, 2.0),
               ctx.uniform((h, s, d), -1.0, 1.0))
        bits = tuple(_bits(ctx, x) for x in raw)
        return bits, tuple(_float(ctx, b) for b in bits)

    return ctx.memo(f"mma_attention{d}", make)


def _check_attention(ctx: Ctx, qkv: tuple, got: Any, what: str, causal: bool,
                     tol: float = 2e-2) -> None:
    """First and last heads, sampled query rows, against a float64 softmax."""
    xp = ctx.xp
    q, k, v = qkv
    h, s, d = q.shape
    rows = _sample_rows(ctx, s)
    got = xp.asarray(got)
    for head in sorted({0, h - 1}):
        sc = q[head][rows].astype(xp.float64) @ k[head].astype(xp.float64).T / math.sqrt(d)
        if causal:
            sc = xp.where(xp.arange(s)[None, :] > rows[:, None], -xp.inf, sc)
        p = xp.exp(sc - sc.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        assert_close(ctx, got[head][rows], p @ v[head].astype(xp.float64),
                     f"{what} (head {head})", rtol=tol, atol=tol)


def _attention_work(ctx: Ctx, d: int, causal: bool) -> dict:
    h, s = SIZES[ctx.size]["attention"]
    return dict(flops=4.0 * h * s * s * d / (2 if causal else 1), bytes=8.0 * h * s * d,
                shape=f"{h} heads x {s} x {d} bfloat16" + (", causal" if causal else ""))


def _attention_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.kernels.attention_mma", "flash_attention_bf16")
    cases: list[Case] = []
    for sfx, d, causal in SHAPES:
        def sdpa(ctx: Ctx, d=d, causal=causal) -> Prepared:
            _torch()
            from torch.nn.functional import scaled_dot_product_attention as f

            bits, qkv = _attention_inputs(ctx, d)
            q4, k4, v4 = (_torch_bf16(ctx, b)[None] for b in bits)
            res: list[Any] = []

            def run() -> None:
                res[:] = [f(q4, k4, v4, is_causal=causal)[0]]

            return Prepared(run, lambda: _check_attention(ctx, qkv, ctx.xp.asarray(
                res.pop().float()), "SDPA bfloat16", causal), **_attention_work(ctx, d, causal))

        def mma(ctx: Ctx, d=d, causal=causal) -> Prepared:
            bits, qkv = _attention_inputs(ctx, d)
            dq, dk, dv = (_dev(ctx, b) for b in bits)
            out = _out16(ctx, tuple(bits[0].shape))
            return Prepared(lambda: mod.flash_attention_bf16(dq, dk, dv, causal=causal,
                                                             out=out),
                            lambda: _check_attention(ctx, qkv, _read16(ctx, out),
                                                     "flash_attention_bf16", causal),
                            **_attention_work(ctx, d, causal))

        shp = f"d = {d}" + (", causal" if causal else "")
        more: tuple = ()
        if not sfx:
            more = (("attention_mma_bf16_vs_fused_f32", "attention_tc_fused_f32"),)
        cases += [Case(f"attention_tc_sdpa_bf16{sfx}", f"PyTorch SDPA bfloat16, {shp}", sdpa,
                       kind="compute", needs="torch"),
                  Case(f"attention_mma_bf16{sfx}", f"attention on tensor cores (Numba "
                       f"mma.sync, bfloat16, {_describe(mod._default_config(d))}), {shp}", mma,
                       ratio=f"attention_mma_bf16_vs_sdpa_bf16{sfx}",
                       vs=f"attention_tc_sdpa_bf16{sfx}", kind="compute", more=more,
                       overhead=f"attention_mma_bf16{sfx}")]

    def fused(ctx: Ctx) -> Prepared:
        f32 = _need("cudacourse.kernels.attention", "flash_attention")
        bits, qkv = _attention_inputs(ctx, 64)
        dq, dk, dv = (_dev(ctx, x) for x in qkv)  # the same (bfloat16-exact) values, float32
        out = ctx.output(tuple(qkv[0].shape))
        return Prepared(lambda: f32.flash_attention(dq, dk, dv, out=out),
                        lambda: _check_attention(ctx, qkv, ctx.read(out), "flash_attention "
                                                 "float32", False, tol=1e-3),
                        **_attention_work(ctx, 64, False))

    # first, so that the mma case finds it when its ratio is computed
    return [Case("attention_tc_fused_f32", "attention, fused float32 (lesson 5), d = 64",
                 fused, kind="compute"), *cases]


ENTRIES = [
    Entry("tensorcore_matmul", "lesson 7: bfloat16 matmul on tensor cores vs cuBLAS bf16",
          "tensorcore_matmul", _matmul_cases),
    Entry("tensorcore_attention", "lesson 7: bfloat16 flash attention on tensor cores vs SDPA "
          "bf16 and the float32 fused kernel", "tensorcore_attention", _attention_cases),
]
