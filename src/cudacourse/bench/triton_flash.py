"""A small FlashAttention forward in Triton, bfloat16 on tensor cores: beyond the course.

The course's kernels are float32 Numba kernels on the FP32 cores. This one is here only to
measure, in ``cudacourse bench``, one Python route to the tensor cores against PyTorch's
bf16 SDPA (lesson 5's last section). Triton is imported on first use: where it is absent
(the development machines, the simulator), the bench case is skipped with that reason.

Structure, per program: a BLOCK_M x HEAD_DIM tile of Q stays in registers; K and V tiles of
BLOCK_N keys stream past; ``tl.dot`` runs both products on the tensor cores (bf16 inputs,
float32 accumulators); the online softmax in exp2 with the scale folded in, as in the Numba
kernels; causal programs stop at their last row.
"""

from __future__ import annotations

import math
from typing import Any

_KERNEL: Any = None


def available() -> tuple[bool, str]:
    """(True, "") if Triton and a CUDA device are usable, else (False, why not)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False, "Triton is not installed (it ships with PyTorch on the GPU image)"
    try:
        import torch
    except ImportError:
        return False, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return False, "PyTorch sees no GPU"
    return True, ""


def _kernel() -> Any:
    global _KERNEL
    if _KERNEL is not None:
        return _KERNEL
    import triton
    import triton.language as tl

    @triton.jit
    def fwd(Q, K, V, O, qk_scale, S, stride_h, stride_s, HEAD_DIM: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
        pid_m = tl.program_id(0)
        base = tl.program_id(1).to(tl.int64) * stride_h
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, HEAD_DIM)
        q = tl.load(Q + base + offs_m[:, None] * stride_s + offs_d[None, :],
                    mask=offs_m[:, None] < S, other=0.0)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        hi = S
        if CAUSAL:
            hi = tl.minimum(S, (pid_m + 1) * BLOCK_M)
        for start in range(0, hi, BLOCK_N):
            kn = start + offs_n
            k = tl.load(K + base + kn[None, :] * stride_s + offs_d[:, None],
                        mask=kn[None, :] < S, other=0.0)
            s = tl.dot(q, k) * qk_scale          # scores in the log2 domain
            valid = kn[None, :] < S
            if CAUSAL:
                valid = valid & (kn[None, :] <= offs_m[:, None])
            s = tl.where(valid, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            alpha = tl.math.exp2(m_i - m_new)
            p = tl.math.exp2(s - m_new[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(V + base + kn[:, None] * stride_s + offs_d[None, :],
                        mask=kn[:, None] < S, other=0.0)
            acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
            m_i = m_new
        acc = acc / l_i[:, None]
        tl.store(O + base + offs_m[:, None] * stride_s + offs_d[None, :],
                 acc.to(O.dtype.element_ty), mask=offs_m[:, None] < S)

    _KERNEL = fwd
    return fwd


def triton_attention(q: Any, k: Any, v: Any, causal: bool = False, out: Any = None) -> Any:
    """softmax(q k^T / sqrt(d)) v for contiguous (heads, seq, d) bf16 torch tensors."""
    ok, why = available()
    if not ok:
        raise RuntimeError(f"triton_attention: {why}")
    import triton

    if q.dim() != 3 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"q, k, v must share one (heads, seq, d) shape, got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    bh, s, d = q.shape
    if d not in (16, 32, 64, 128):
        raise ValueError(f"head_dim must be 16, 32, 64 or 128, got {d}")
    q, k, v = (t.contiguous() for t in (q, k, v))
    out = q.new_empty(q.shape) if out is None else out
    block_m, block_n = 128, 64
    grid = (triton.cdiv(s, block_m), bh)
    _kernel()[grid](q, k, v, out, (1.0 / math.sqrt(d)) * 1.4426950408889634, s, s * d, d,
                    HEAD_DIM=d, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=bool(causal),
                    num_warps=4 if d <= 64 else 8, num_stages=3)
    return out
