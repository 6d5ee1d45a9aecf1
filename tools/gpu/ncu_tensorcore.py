"""Launches for Nsight Compute (tools/gpu/tensorcore.sh): lesson 7's tensor-core kernels at
the bench's shapes, each a few times (the profiler skips the first launches: compilation
and warm-up), and PyTorch's bfloat16 matmul and SDPA beside them.

    ncu --clock-control none --kernel-name-base mangled -k regex:'matmul_mma|attention_mma' \
        --launch-skip 2 --launch-count 4 --section SpeedOfLight python3 tools/gpu/ncu_tensorcore.py
"""
import cupy as cp
import torch
from torch.nn.functional import scaled_dot_product_attention as sdpa

from cudacourse.kernels import attention_mma as am, matmul_mma as mm

rng = cp.random.default_rng(0)


def bits(shape, lo, hi):
    x = rng.random(shape, dtype=cp.float32) * (hi - lo) + lo
    u = x.view(cp.uint32)
    r = (u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16  # round to nearest even
    return r.astype(cp.uint16).view(cp.int16)


a, b = bits((4096, 4096), -1, 1), bits((4096, 4096), -1, 1)
c = cp.empty((4096, 4096), cp.int16)
for _ in range(3):
    mm.matmul_bf16(a, b, out=c)
ta, tb = (torch.as_tensor(x, device="cuda").view(torch.bfloat16) for x in (a, b))
for _ in range(3):
    torch.matmul(ta, tb)
for d, causal in ((64, False), (64, True), (128, False)):
    q, k, v = (bits((16, 4096, d), -2, 2) for _ in range(3))
    o = cp.empty((16, 4096, d), cp.int16)
    for _ in range(3):
        am.flash_attention_bf16(q, k, v, causal=causal, out=o)
    tq, tk, tv = (torch.as_tensor(x, device="cuda").view(torch.bfloat16)[None] for x in (q, k, v))
    for _ in range(3):
        sdpa(tq, tk, tv, is_causal=causal)
torch.cuda.synchronize()
