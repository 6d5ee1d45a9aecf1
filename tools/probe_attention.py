"""One-call GPU sweep for issue 15: the fused attention kernels, PyTorch's, a Triton one, and
matmul tile shapes, each checked before it is timed. Writes $OUT/probe_attention.json and
$OUT/fast_configs.json (the fastest correct "fast" tile shape per head_dim, which
CUDACOURSE_FAST_CONFIGS=<that file> makes the bench use).

    bash .whl/on-device.sh python3 tools/probe_attention.py            # on the GPU machine
    CUDACOURSE_DEVICE=sim python3 tools/probe_attention.py             # a dry run, simulator

Timing: CUDA events around each run, median of the runs after one warm-up (float32, TF32
off). Correctness: the first and last heads of every output against a float64 reference.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import cudacourse  # noqa: E402

cudacourse.setup()  # the device, before numba.cuda is imported
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from cudacourse.kernels import attention as A  # noqa: E402
from cudacourse.runtime import device  # noqa: E402

SIM = device.is_simulator()
T0 = time.time()
BUDGET = float(os.environ.get("PROBE_BUDGET_S", "200"))
OUT = Path(os.environ.get("OUT", "."))
R: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "mode": device.mode(), "errors": [], "rows": []}
if not SIM:
    R["gpu"] = device.current().gpu.describe()

# (bq, bk, tr, tc[, prefetch[, maxreg]]): run 1 (2026-12-01) kept the 4 x 4 patches; the
# 8-row ones spilled on the GPU's compiler (255 registers + local memory).
D64 = [(64, 32, 4, 4), (64, 32, 4, 4, True), (64, 32, 4, 4, False, 128),
       (64, 32, 4, 4, False, 168), (64, 32, 4, 4, True, 168), (128, 32, 4, 4),
       (128, 32, 4, 4, False, 128), (128, 32, 4, 4, True), (64, 64, 4, 8), (128, 64, 8, 4),
       (128, 32, 8, 4)]
D128 = [(64, 32, 4, 4), (64, 32, 4, 4, False, 128), (64, 32, 4, 4, False, 168),
        (32, 32, 4, 4), (64, 16, 4, 2), (64, 16, 4, 2, False, 128), (32, 32, 2, 4),
        (128, 32, 4, 4), (128, 16, 4, 2), (64, 32, 4, 2), (64, 32, 4, 2, False, 128)]
if SIM:
    D64, D128 = [(32, 16, 4, 4)], [(32, 16, 4, 4)]
SHAPES = [(16, 4096, 64), (16, 4096, 128), (16, 16384, 64)] if not SIM else [(1, 40, 64)]


def save() -> None:
    R["elapsed_s"] = round(time.time() - T0, 1)
    (OUT / "probe_attention.json").write_text(json.dumps(R, indent=1))


def left() -> float:
    return BUDGET - (time.time() - T0)


def timeit(fn, reps: int = 5) -> float:
    fn()
    cuda.synchronize()
    if SIM:
        return float("nan")
    ts = []
    for _ in range(reps):
        e0, e1 = cuda.event(timing=True), cuda.event(timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(cuda.event_elapsed_time(e0, e1))
    return float(np.median(ts))


def row(**kw) -> None:
    R["rows"].append(kw)
    print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                   for k, v in kw.items()), flush=True)


# --- inputs and a float64 reference of two heads ------------------------------------------
if SIM:
    import numpy as xp
else:
    import cupy as xp
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def inputs(shape, seed=0):
    g = np.random.default_rng(seed)
    return [xp.asarray(g.uniform(-a, a, shape).astype(np.float32)) for a in (2.0, 2.0, 1.0)]


REF: dict = {}


def ref(key, q, k, v, causal, softcap=None, window=None):
    if key not in REF:
        heads = sorted({0, q.shape[0] - 1})
        rows = np.unique(np.r_[0, q.shape[1] - 1, np.random.default_rng(1).integers(
            0, q.shape[1], 48)])
        outs = []
        for h in heads:
            qh = np.asarray(q[h] if SIM else xp.asnumpy(q[h]), np.float64)
            kh = np.asarray(k[h] if SIM else xp.asnumpy(k[h]), np.float64)
            vh = np.asarray(v[h] if SIM else xp.asnumpy(v[h]), np.float64)
            s = qh[rows] @ kh.T / math.sqrt(q.shape[2])
            if softcap:
                s = softcap * np.tanh(s / softcap)
            if causal:
                j = np.arange(s.shape[1])[None, :]
                i = rows[:, None]
                mask = (j > i) | ((j <= i - window) if window else False)
                s = np.where(mask, -np.inf, s)
            p = np.exp(s - s.max(1, keepdims=True))
            outs.append((p / p.sum(1, keepdims=True)) @ vh)
        REF[key] = (heads, rows, outs)
    return REF[key]


def err(out, r) -> float:
    heads, rows, outs = r
    e = 0.0
    for h, want in zip(heads, outs):
        got = out[h][rows]
        got = np.asarray(got if SIM else xp.asnumpy(xp.asarray(got)), np.float64)
        e = max(e, float(np.abs(got - want).max() / np.abs(want).max()))
    return e if np.isfinite(e) else float("inf")


def section(name, fn) -> None:
    if left() < 0:
        R["errors"].append(f"{name}: skipped, out of time")
        print(f"== {name}: skipped (time)", flush=True)
        return
    print(f"== {name} ({time.time() - T0:.0f}s)", flush=True)
    try:
        fn()
    except Exception as exc:  # noqa: BLE001
        R["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
        traceback.print_exc()
    save()


def kinfo(kern, threads=None, smem=0):
    info = {}
    try:
        regs, local = kern.get_regs_per_thread(), kern.get_local_mem_per_thread()
        if isinstance(regs, dict):
            regs, local = sorted(regs.values()), sorted(local.values())
        info.update(regs=regs, local=local)
    except Exception as exc:  # noqa: BLE001
        info["info"] = f"n/a ({type(exc).__name__})"
    if threads and not SIM:
        try:
            ov = next(iter(kern.overloads.values()))
            occ = ov._codelibrary.get_cufunc().kernel.occupancy
            info["blocks_per_sm"] = occ.max_active_blocks_per_multiprocessor(threads, smem)
        except Exception as exc:  # noqa: BLE001
            info["blocks_per_sm"] = f"n/a ({type(exc).__name__}: {str(exc)[:80]})"
        try:
            ptx = "\n".join(kern.inspect_asm().values())
            info["ptx"] = {k: ptx.count(k) for k in ("ld.shared.v4", "ld.shared.f32",
                                                      "st.shared", "fma.rn", "ex2.approx",
                                                      "bar.sync", "ld.global", "ld.local")}
        except Exception as exc:  # noqa: BLE001
            info["ptx"] = f"n/a ({type(exc).__name__})"
    return info


BEST: dict = {}
TOP: dict = {}


def sweep_fast():
    for shape in SHAPES:
        bh, s, d = shape
        q, k, v = inputs(shape)
        dq, dk, dv = (cuda.as_cuda_array(a) if not SIM else cuda.to_device(a) for a in (q, k, v))
        out = cuda.device_array(shape, np.float32)
        for causal in ((False, True) if s <= 4096 else (False,)):
            r = ref((shape, causal), q, k, v, causal)
            fl = A.attention_flops(bh, s, d, causal)
            first = s == 4096 and not causal
            cands = D64 if d == 64 else D128
            if not first:  # the three fastest of the first pass only
                cands = TOP.get(d, cands)[:3]
            for c in cands:
                if left() < 20:
                    R["errors"].append(f"fast {shape} {c}: out of time")
                    break
                cfg = A.FastConfig(*c)
                try:
                    fn = lambda: A.flash_attention(dq, dk, dv, causal=causal, out=out,  # noqa
                                                   variant="fast", config=cfg)
                    fn()
                    cuda.synchronize()
                    e = err(out.copy_to_host() if SIM else xp.asarray(out), r)
                    ms = timeit(fn) if e < 1e-4 else float("nan")
                    kern = A.fast_kernel(d, cfg)
                    info = kinfo(kern, cfg.threads(), kern.shared_bytes) if first else {}
                    row(what="fast", shape=str(shape), causal=causal, cfg=str(c), err=e, ms=ms,
                        tflops=fl / ms / 1e9, smem=kern.shared_bytes, **info)
                    key = (d, causal, s)
                    if e < 1e-4 and ms == ms and (key not in BEST or ms < BEST[key][1]):
                        BEST[key] = (c, ms)
                except Exception as exc:  # noqa: BLE001
                    row(what="fast", shape=str(shape), causal=causal, cfg=str(c),
                        failed=f"{type(exc).__name__}: {str(exc)[:300]}")
            if first:
                TOP[d] = [tuple(x["cfg"]) for x in sorted(
                    (dict(cfg=eval(x["cfg"]), ms=x["ms"]) for x in R["rows"]
                     if x.get("what") == "fast" and x.get("shape") == str(shape)
                     and not x.get("causal") and x.get("ms") == x.get("ms") and "ms" in x),
                    key=lambda x: x["ms"])]
            for variant in ("tiled",) if s == 4096 and not SIM else ():
                fn = lambda: A.flash_attention(dq, dk, dv, causal=causal, out=out,  # noqa
                                               variant=variant)
                fn()
                cuda.synchronize()
                e = err(out.copy_to_host() if SIM else xp.asarray(out), r)
                ms = timeit(fn, reps=3)
                row(what=variant, shape=str(shape), causal=causal, err=e, ms=ms,
                    tflops=fl / ms / 1e9)
    # the fastest config per head_dim: by the non-causal S=4096 time, then causal
    pick = {}
    for d in (64, 128):
        cands = [BEST[key] for key in ((d, False, 4096),) if key in BEST]
        if cands:
            pick[str(d)] = list(cands[0][0])
    R["best"] = {f"d{d} causal={c} S={s}": dict(cfg=list(v[0]), ms=v[1])
                 for (d, c, s), v in BEST.items()}
    R["pick"] = pick
    (OUT / "fast_configs.json").write_text(json.dumps(pick))


def peers():
    if SIM:
        return
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    for shape in SHAPES:
        bh, s, d = shape
        q, k, v = inputs(shape)
        tq, tk, tv = (torch.as_tensor(a, device="cuda") for a in (q, k, v))
        bq, bk_, bv = (t.to(torch.bfloat16) for t in (tq, tk, tv))
        q4, k4, v4, b4q, b4k, b4v = (t[None] for t in (tq, tk, tv, bq, bk_, bv))  # SDPA: 4-D
        for causal in ((False, True) if s <= 4096 else (False,)):
            r = ref((shape, causal), q, k, v, causal)
            fl = A.attention_flops(bh, s, d, causal)
            mask = torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1) if causal else None

            def eager():
                sc = torch.matmul(tq, tk.transpose(-1, -2)) * (1 / math.sqrt(d))
                if causal:
                    sc.masked_fill_(mask, float("-inf"))
                return torch.matmul(torch.softmax(sc, dim=-1), tv)

            try:
                choice = torch._fused_sdp_choice(q4, k4, v4, is_causal=causal)
                backend = str(torch.nn.attention.SDPBackend(choice)).split(".")[-1]
            except Exception as exc:  # noqa: BLE001
                backend = f"n/a ({type(exc).__name__})"
            for name, fn in (("torch_eager", eager),
                             ("sdpa_f32", lambda: sdpa(q4, k4, v4, is_causal=causal)[0]),
                             ("sdpa_bf16", lambda: sdpa(b4q, b4k, b4v, is_causal=causal)[0]),
                             ("cupy_unfused", lambda: A.attention_unfused(q, k, v, causal))):
                try:
                    o = fn()
                    torch.cuda.synchronize()
                    e = err(xp.asarray(o.float() if hasattr(o, "float") else o), r)
                    ms = timeit(fn, reps=3 if s > 4096 else 5)
                    row(what=name, shape=str(shape), causal=causal, err=e, ms=ms,
                        tflops=fl / ms / 1e9, **({"backend": backend} if name == "sdpa_f32" else {}))
                except Exception as exc:  # noqa: BLE001
                    row(what=name, shape=str(shape), causal=causal,
                        failed=f"{type(exc).__name__}: {str(exc)[:300]}")
            try:
                from cudacourse.bench.triton_flash import triton_attention

                o = triton_attention(bq, bk_, bv, causal)
                torch.cuda.synchronize()
                e = err(xp.asarray(o.float()), r)
                ms = timeit(lambda: triton_attention(bq, bk_, bv, causal))
                row(what="triton_bf16", shape=str(shape), causal=causal, err=e, ms=ms,
                    tflops=fl / ms / 1e9)
            except Exception as exc:  # noqa: BLE001
                row(what="triton_bf16", shape=str(shape), causal=causal,
                    failed=f"{type(exc).__name__}: {str(exc)[:300]}")
            torch.cuda.empty_cache()
            xp.get_default_memory_pool().free_all_blocks()


def softcap():
    shape, cap, win = ((16, 4096, 64), 50.0, 1024) if not SIM else ((1, 40, 64), 5.0, 7)
    bh, s, d = shape
    q, k, v = inputs(shape, seed=2)
    # scores large enough that the cap matters: q * 8
    q = q * np.float32(8.0)
    r = ref(("cap", shape), q, k, v, True, cap, win)
    dq, dk, dv = (cuda.as_cuda_array(a) if not SIM else cuda.to_device(a) for a in (q, k, v))
    out = cuda.device_array(shape, np.float32)
    for c in TOP.get(64, D64)[:3]:
        cfg = A.FastConfig(*c)
        fn = lambda: A.flash_attention(dq, dk, dv, causal=True, out=out, variant="fast",  # noqa
                                       config=cfg, softcap=cap, window=win)
        try:
            fn()
            cuda.synchronize()
            e = err(out.copy_to_host() if SIM else xp.asarray(out), r)
            row(what="fast_softcap", shape=str(shape), cfg=str(c), err=e, ms=timeit(fn))
        except Exception as exc:  # noqa: BLE001
            row(what="fast_softcap", cfg=str(c), failed=f"{type(exc).__name__}: {exc}"[:300])
    if SIM:
        return
    tq, tk, tv = (torch.as_tensor(a, device="cuda") for a in (q, k, v))
    i = torch.arange(s, device="cuda")
    hide = (i[None, :] > i[:, None]) | (i[None, :] <= i[:, None] - win)

    def eager():
        sc = torch.matmul(tq, tk.transpose(-1, -2)) * (1 / math.sqrt(d))
        sc = cap * torch.tanh(sc / cap)
        sc.masked_fill_(hide, float("-inf"))
        return torch.matmul(torch.softmax(sc, dim=-1), tv)

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    o = eager()
    torch.cuda.synchronize()
    extra = (torch.cuda.max_memory_allocated() - base) / 2**30
    row(what="torch_eager_softcap", err=err(xp.asarray(o), r), ms=timeit(eager), extra_gib=extra)
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def score_mod(score, b, h, qi, ki):
            return cap * torch.tanh(score / cap)

        def mask_mod(b, h, qi, ki):
            return (qi >= ki) & (qi - ki < win)

        bm = create_block_mask(mask_mod, B=None, H=None, Q_LEN=s, KV_LEN=s, device="cuda")
        flex = torch.compile(flex_attention)
        fq, fk, fv = (t[None] for t in (tq, tk, tv))
        t0 = time.time()
        o = flex(fq, fk, fv, score_mod=score_mod, block_mask=bm)[0]
        torch.cuda.synchronize()
        row(what="flex_softcap", err=err(xp.asarray(o), r), compile_s=time.time() - t0,
            ms=timeit(lambda: flex(fq, fk, fv, score_mod=score_mod, block_mask=bm)))
    except Exception as exc:  # noqa: BLE001
        row(what="flex_softcap", failed=f"{type(exc).__name__}: {str(exc)[:400]}")


def matmul():
    from cudacourse.kernels import matmul as M

    n = 4096 if not SIM else 40
    g = np.random.default_rng(3)
    a = xp.asarray(g.uniform(-1, 1, (n, n)).astype(np.float32))
    b = xp.asarray(g.uniform(-1, 1, (n, n)).astype(np.float32))
    want = np.asarray(a[:64] if SIM else xp.asnumpy(a[:64]), np.float64) @ \
        np.asarray(b if SIM else xp.asnumpy(b), np.float64)
    da, db = (cuda.as_cuda_array(x) if not SIM else cuda.to_device(x) for x in (a, b))
    c = cuda.device_array((n, n), np.float32)
    fl = 2.0 * n ** 3
    cands = {"register128x256v4": None,
             "v4_256x128_bk8": (256, 128, 8, 16, 8, 4, None),
             "v4_128x256_bk8_db": (128, 256, 8, 8, 16, 4, None, True),
             "v4_256x128_bk8_db": (256, 128, 8, 16, 8, 4, None, True),
             "v4_128x128_bk8_db": (128, 128, 8, 8, 8, 4, None, True),
             "v4_128x128_bk16_db": (128, 128, 16, 8, 8, 4, None, True),
             "v4_128x256_bk8_db_r4": (128, 256, 8, 8, 16, 8, None, True)}
    for name, cfg in cands.items():
        if left() < 10:
            break
        try:
            if cfg is not None:
                M.REGISTER_V4_CONFIGS[name] = cfg
                if name not in M.MATMUL_VARIANTS:
                    M.MATMUL_VARIANTS = M.MATMUL_VARIANTS + (name,)
            fn = lambda: M.matmul(da, db, out=c, variant=name)  # noqa: E731
            fn()
            cuda.synchronize()
            got = np.asarray(c.copy_to_host()[:64], np.float64)
            e = float(np.abs(got - want).max() / np.abs(want).max())
            row(what="matmul", variant=name, err=e, ms=timeit(fn), tflops=fl / timeit(fn) / 1e9,
                **kinfo(M._register_kernel(name)))
        except Exception as exc:  # noqa: BLE001
            row(what="matmul", variant=name, failed=f"{type(exc).__name__}: {str(exc)[:300]}")
    if not SIM:
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        for name, fn in (("torch_matmul_f32", lambda: torch.matmul(ta, tb)),
                         ("cupy_matmul", lambda: xp.matmul(a, b))):
            fn()
            ms = timeit(fn)
            row(what="matmul", variant=name, ms=ms, tflops=fl / ms / 1e9)


for name, fn in (("fast sweep", sweep_fast), ("softcap", softcap), ("matmul", matmul)):
    section(name, fn)
save()
print(f"done in {time.time() - T0:.0f}s; errors: {R['errors']}")
print("pick:", R.get("pick"))
