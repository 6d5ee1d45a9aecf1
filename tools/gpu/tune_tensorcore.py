"""Lesson 7 on the H200: time tile configurations of matmul_mma and attention_mma against
cuBLAS bf16 and SDPA bf16 (median of CUDA-event timings of the public call), and check each
configuration's result first. Writes a JSON of every figure to argv[1] (default tune.json).

    python3 tools/gpu/tune_tensorcore.py OUT.json [quick|full|matmul] [CHOICES.json]

(matmul: the matmul configurations only, the first sweep's best beside the second's.)

CHOICES.json gets the fastest correct configuration of each kernel, for
CUDACOURSE_TC_CONFIGS (the bench then times the public calls with them).
"""
import json
import math
import sys
import time

import cupy as cp
import numpy as np
import torch

from cudacourse.kernels import attention_mma as am, matmul_mma as mm


def bits(x):
    u = x.view(cp.uint32)
    r = (u + cp.uint32(0x7FFF) + ((u >> 16) & cp.uint32(1))) >> 16  # round to nearest even
    return r.astype(cp.uint16).view(cp.int16)


def flt(b):
    return (cp.asarray(b).view(cp.uint16).astype(cp.uint32) << 16).view(cp.float32)


def timed(fn, reps=30, warm=3):
    for _ in range(warm):
        fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(ts))


out = {"matmul": {}, "attention": {}}


def best(results):
    """The fastest configuration whose result agreed with PyTorch's (to bfloat16 noise)."""
    ok = {k: r for k, r in results.items() if isinstance(r, dict) and "ratio" in r
          and r[next(x for x in r if x.startswith("max_"))] < 0.05}
    return list(eval(max(ok, key=lambda k: ok[k]["ratio"]))) if ok else None


def save():
    """Write what is measured so far (a timeout keeps it) and the choices file."""
    json.dump(out, open(sys.argv[1] if len(sys.argv) > 1 else "tune.json", "w"), indent=1)
    picks = {"matmul": best(out["matmul"]),
             "attention_d64": best(out["attention"].get("d64", {})),
             "attention_d128": best(out["attention"].get("d128", {}))}
    picks = {k: v for k, v in picks.items() if v}
    if len(sys.argv) > 3:  # the choices file for CUDACOURSE_TC_CONFIGS
        json.dump(picks, open(sys.argv[3], "w"))
    return picks

quick = len(sys.argv) > 2 and sys.argv[2] == "quick"
rng = cp.random.default_rng(0)
M = N = K = 4096
a = bits(rng.random((M, K), dtype=cp.float32) * 2 - 1)
b = bits(rng.random((K, N), dtype=cp.float32) * 2 - 1)
ta, tb = (torch.as_tensor(x, device="cuda").view(torch.bfloat16) for x in (a, b))
tc_ = torch.empty((M, N), device="cuda", dtype=torch.bfloat16)
ms = timed(lambda: torch.matmul(ta, tb, out=tc_))
ref = tc_.float()
fl = 2.0 * M * N * K
out["matmul"]["cublas_bf16"] = fl / ms / 1e9
print(f"cuBLAS bf16: {ms:.3f} ms {fl / ms / 1e9:.0f} TFLOP/s", flush=True)
cfgs = [(128, 128, 32, 64, 32, 3), (128, 128, 32, 64, 32, 4), (128, 256, 32, 64, 64, 3),
        (128, 256, 32, 64, 64, 4), (256, 128, 32, 64, 64, 3), (128, 128, 32, 64, 64, 4),
        (128, 128, 64, 64, 32, 3), (128, 128, 32, 32, 64, 3)]
# the second sweep (2026-12-05, after the first put 4 stages first): deeper rings, a wider
# k-slice with 4 stages, and register caps that may let two blocks share an SM
more = [(128, 128, 32, 64, 32, 5), (128, 128, 32, 64, 32, 6), (128, 128, 64, 64, 32, 4),
        (128, 128, 32, 64, 32, 4, 128), (128, 128, 32, 64, 32, 4, 168),
        (256, 128, 32, 64, 64, 4), (128, 256, 32, 64, 64, 4, 168)]
matmul_only = len(sys.argv) > 2 and sys.argv[2] == "matmul"
for c in (cfgs[:2] if quick else [cfgs[1]] + more if matmul_only else cfgs + more):
    cfg = mm.MmaConfig(*c)
    try:
        cfg.validate()
        o = cp.full((M, N), -1, cp.int16)
        t0 = time.time()
        mm.matmul_bf16(a, b, out=o, config=cfg)
        cp.cuda.Device().synchronize()
        comp = time.time() - t0
        r256 = cp.asarray(ref[:256])
        err = float(cp.abs(flt(o)[:256] - r256).max() / cp.abs(r256).max())
        ms = timed(lambda: mm.matmul_bf16(a, b, out=o, config=cfg))
        r = dict(ms=ms, tflops=fl / ms / 1e9, ratio=fl / ms / 1e9 / out["matmul"]["cublas_bf16"],
                 max_rel_err_vs_cublas=err, compile_s=comp)
    except Exception as exc:  # noqa: BLE001
        r = dict(error=f"{type(exc).__name__}: {exc}"[:300])
    out["matmul"][str(c)] = r
    print("matmul", c, r, flush=True)
    save()

if matmul_only:
    print("picks", save())
    sys.exit(0)

from torch.nn.functional import scaled_dot_product_attention as sdpa  # noqa: E402

H, S = 16, 4096
acfgs = {64: [(4, 64), (4, 64, 0, False, 2), (4, 32, 0, False, 2), (4, 128), (8, 64),
              (8, 128), (4, 32)],
         128: [(4, 32, 168), (4, 32), (4, 64), (8, 64), (8, 32)]}
for d in (64, 128):
    q, k, v = (bits(rng.random((H, S, d), dtype=cp.float32) * 4 - 2) for _ in range(3))
    tq, tk, tv = (torch.as_tensor(x, device="cuda").view(torch.bfloat16)[None] for x in (q, k, v))
    for causal in ((False, True) if d == 64 else (False,)):
        fl = 4.0 * H * S * S * d / (2 if causal else 1)
        res = []
        ms = timed(lambda: res.append(sdpa(tq, tk, tv, is_causal=causal)) or res.clear())
        ref = sdpa(tq, tk, tv, is_causal=causal)[0].float()
        key = f"d{d}" + ("_causal" if causal else "")
        out["attention"][key] = {"sdpa_bf16": fl / ms / 1e9}
        print(f"SDPA bf16 {key}: {ms:.3f} ms {fl / ms / 1e9:.0f} TFLOP/s", flush=True)
        for c in (acfgs[d][:1] if quick else acfgs[d]):
            cfg = am.MmaAttentionConfig(*c)
            try:
                cfg.validate(d)
                o = cp.full((H, S, d), -1, cp.int16)
                t0 = time.time()
                am.flash_attention_bf16(q, k, v, causal=causal, out=o, config=cfg)
                cp.cuda.Device().synchronize()
                comp = time.time() - t0
                err = float(cp.abs(flt(o) - cp.asarray(ref)).max())
                ms = timed(lambda: am.flash_attention_bf16(q, k, v, causal=causal, out=o,
                                                           config=cfg))
                r = dict(ms=ms, tflops=fl / ms / 1e9,
                         ratio=fl / ms / 1e9 / out["attention"][key]["sdpa_bf16"],
                         max_err_vs_sdpa=err, compile_s=comp)
            except Exception as exc:  # noqa: BLE001
                r = dict(error=f"{type(exc).__name__}: {exc}"[:300])
            out["attention"][key][str(c)] = r
            print("attention", key, c, r, flush=True)
            save()
save()
print("picks", save())

