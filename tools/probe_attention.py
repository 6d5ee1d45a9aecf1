"""One-shot GPU probe for lesson 5 (fused attention): correctness first, then timings.

    bash .whl/on-device.sh python3 tools/probe_attention.py          # on the GPU machine
    CUDACOURSE_DEVICE=sim python3 tools/probe_attention.py --tiny      # a dry run, simulator

Checks every kernel against the float64 NumPy reference, then times (CUDA events, median of
repeats after warm-up) several tile configurations of the fused kernel against CuPy's
unfused attention, sweeps the sequence length, measures extra device memory, and writes
everything to $OUT/probe_attention.json (or ./probe_attention.json).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import cudacourse  # noqa: E402  (chooses GPU or simulator first)
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from cudacourse import attention as A  # noqa: E402
from cudacourse import device  # noqa: E402
from cudacourse import softmax as SM  # noqa: E402

TINY = "--tiny" in sys.argv or device.is_simulator()
T0 = time.time()
BUDGET = 195.0  # seconds: later sections are skipped past this
OUT = Path(os.environ.get("OUT", "."))
RESULT: dict = {"date": "2026-11-30", "mode": device.mode(), "tiny": TINY, "errors": []}
if not device.is_simulator():
    RESULT["gpu"] = device.current().gpu.describe()


def save() -> None:
    RESULT["elapsed_s"] = round(time.time() - T0, 1)
    (OUT / "probe_attention.json").write_text(json.dumps(RESULT, indent=1))


def left() -> float:
    return BUDGET - (time.time() - T0)


SECTIONS: dict = {}


def section(name):
    def deco(fn):
        SECTIONS[name] = fn
        return fn
    return deco


def run_section(name) -> None:
    if left() < 0:
        RESULT["errors"].append(f"{name}: skipped, out of time")
        print(f"== {name}: skipped (time)", flush=True)
        return
    print(f"== {name} ({time.time() - T0:.0f}s)", flush=True)
    try:
        SECTIONS[name]()
    except Exception as exc:  # noqa: BLE001 - record and go on to the next section
        RESULT["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
        traceback.print_exc()
    save()


def timeit(fn, warmup: int = 2, reps: int = 7) -> float:
    """Median milliseconds of ``fn()`` by CUDA events (wall clock in the simulator)."""
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    times = []
    for _ in range(reps):
        if device.is_simulator():
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
            continue
        e0, e1 = cuda.event(timing=True), cuda.event(timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(cuda.event_elapsed_time(e0, e1))
    return float(np.median(times))


def qkv(bh, s, d, seed=0, mag=1.0):
    g = np.random.default_rng(seed)
    return [(g.standard_normal((bh, s, d)) * mag).astype(np.float32) for _ in range(3)]


def dev(*arrays):
    return [cuda.to_device(a) for a in arrays]


try:
    import cupy as cp

    HAVE_CUPY = device.cupy_usable()[0]
except ImportError:
    HAVE_CUPY = False


def kernel_info(d, cfg, shuffles=None):
    k = A.flash_kernel(d, cfg, shuffles)
    info = {}
    for what in ("get_regs_per_thread", "get_local_mem_per_thread", "get_shared_mem_per_block"):
        try:
            info[what[4:]] = getattr(k, what)()
        except Exception as exc:  # noqa: BLE001
            info[what[4:]] = f"n/a ({type(exc).__name__})"
    return info


# --- 1. correctness -------------------------------------------------------------------------

@section("correctness")
def _():
    rows = []
    dims = (16, 32) if TINY else (32, 64, 128)
    seqs = (1, 37) if TINY else (1, 37, 300, 1000)
    for d in dims:
        for s in seqs:
            for causal in (False, True):
                q, k, v = qkv(3 if not TINY else 1, s, d, seed=s + d)
                want = A.attention_ref(q, k, v, causal)
                for variant in ("tiled", "rows"):
                    if variant == "rows" and s > 300:
                        continue
                    got = A.flash_attention(q, k, v, causal=causal, variant=variant)
                    rows.append(dict(d=d, s=s, causal=causal, variant=variant,
                                     rel_err=A.relative_error(got, want)))
    # large magnitude: inputs scaled by 100
    for d in dims[:2]:
        q, k, v = qkv(2, 37 if TINY else 500, d, seed=7)
        q, k = q * 100, k * 100
        for causal in (False, True):
            got = A.flash_attention(q, k, v, causal=causal)
            rows.append(dict(d=d, s=q.shape[1], causal=causal, variant="tiled x100",
                             finite=bool(np.isfinite(got).all()),
                             rel_err=A.relative_error(got, A.attention_ref(q, k, v, causal))))
    # device in, device out; CuPy in, CuPy out
    q, k, v = qkv(2, 50, dims[0], seed=3)
    out = A.flash_attention(*dev(q, k, v))
    rows.append(dict(check="numba device out", type=type(out).__name__,
                     rel_err=A.relative_error(out.copy_to_host(), A.attention_ref(q, k, v))))
    if HAVE_CUPY:
        out = A.flash_attention(*(cp.asarray(a) for a in (q, k, v)))
        rows.append(dict(check="cupy in/out", type=type(out).__name__,
                         rel_err=A.relative_error(cp.asnumpy(out), A.attention_ref(q, k, v))))
        for causal in (False, True):
            got = A.attention_unfused(q, k, v, causal=causal)
            rows.append(dict(check=f"unfused causal={causal}",
                             rel_err=A.relative_error(got, A.attention_ref(q, k, v, causal))))
    x = np.random.default_rng(1).standard_normal((7, 1000)).astype(np.float32) * 30
    rows.append(dict(check="fused_softmax", rel_err=float(np.abs(
        SM.fused_softmax(x, 0.5) - SM.softmax_ref(x, 0.5)).max())))
    worst = max(r["rel_err"] for r in rows)
    RESULT["correctness"] = rows
    RESULT["correctness_worst_rel_err"] = worst
    print(f"  {len(rows)} checks, worst relative error {worst:.2e}; all finite:",
          all(r.get("finite", True) for r in rows), flush=True)


# --- 2. tile configurations at the goal size ------------------------------------------------

BH, S_GOAL = (2, 64) if TINY else (16, 4096)
CANDIDATES = {
    64: [(64, 32, 8, 4), (64, 32, 4, 4), (64, 16, 4, 2), (64, 32, 4, 8), (64, 32, 2, 4),
         (32, 32, 2, 4), (64, 16, 8, 2)],
    32: [(64, 64, 4, 8), (64, 32, 4, 4), (64, 64, 8, 8)],
    128: [(32, 16, 4, 2), (32, 16, 2, 2), (16, 32, 2, 4)],
}
if TINY:
    CANDIDATES = {16: [(16, 16, 2, 4), (32, 16, 4, 4)]}


def unfused_ms(q, k, v, causal):
    if not HAVE_CUPY:
        return None
    cq, ck, cv = (cp.asarray(a) for a in (q, k, v))
    return timeit(lambda: A.attention_unfused(cq, ck, cv, causal=causal))


@section("configs")
def _():
    rows = []
    best = {}
    for d, cands in CANDIDATES.items():
        q, k, v = qkv(BH, S_GOAL, d, seed=11)
        dq, dk, dv = dev(q, k, v)
        base = {c: unfused_ms(q, k, v, c) for c in (False, True)}
        qs, ks, vs = qkv(2, 37 if TINY else 300, d, seed=12)
        shuffle_opts = [None, False] if d == 64 or TINY else [None]
        for cand in cands:
            cfg = A.FlashConfig(*cand)
            for sh in shuffle_opts:
                if left() < 40:
                    break
                row = dict(d=d, cfg=cand, threads=cfg.threads(),
                           shuffles=SM._shuffles_available() if sh is None else sh)
                try:
                    cfg.validate(d)
                    t = time.time()
                    errs = [A.relative_error(A.flash_attention(qs, ks, vs, causal=c, config=cfg,
                                                               use_shuffles=sh),
                                             A.attention_ref(qs, ks, vs, c)) for c in (False, True)]
                    row["compile_s"] = round(time.time() - t, 2)
                    row["rel_err"] = max(errs)
                    row.update(kernel_info(d, cfg, sh))
                    if row["rel_err"] > 1e-4:
                        row["skipped"] = "wrong results"
                    else:
                        for c in (False, True):
                            ms = timeit(lambda: A.flash_attention(dq, dk, dv, causal=c,
                                                                  config=cfg, use_shuffles=sh))
                            key = "causal" if c else "full"
                            row[f"ms_{key}"] = round(ms, 3)
                            row[f"tflops_{key}"] = round(
                                A.attention_flops(BH, S_GOAL, d, c) / ms / 1e9, 2)
                            if base[c]:
                                row[f"speedup_vs_unfused_{key}"] = round(base[c] / ms, 3)
                        if sh is None and ("ms_full" in row) and (
                                d not in best or row["ms_full"] < best[d]["ms_full"]):
                            best[d] = row
                except Exception as exc:  # noqa: BLE001
                    row["error"] = f"{type(exc).__name__}: {exc}"[:400]
                rows.append(row)
                print("  ", {k: row[k] for k in row if k in (
                    "d", "cfg", "threads", "shuffles", "rel_err", "ms_full", "ms_causal",
                    "speedup_vs_unfused_full", "regs_per_thread", "local_mem_per_thread",
                    "error")}, flush=True)
        RESULT.setdefault("unfused_ms", {})[d] = base
        print(f"   d={d}: unfused CuPy ms {base}", flush=True)
    RESULT["configs"] = rows
    RESULT["best"] = {d: r["cfg"] for d, r in best.items()}
    # the simple one-thread-per-row kernel, for the lesson's story
    d = 64 if not TINY else 16
    q, k, v = qkv(BH, S_GOAL, d, seed=11)
    dq, dk, dv = dev(q, k, v)
    ms = timeit(lambda: A.flash_attention(dq, dk, dv, variant="rows"), warmup=1, reps=3)
    RESULT["rows_kernel_ms"] = ms
    print(f"   rows kernel d={d}: {ms:.3f} ms", flush=True)


# --- 3. torch, for context ------------------------------------------------------------------

@section("torch")
def _():
    if TINY:
        return
    import torch
    import torch.nn.functional as F

    q, k, v = (torch.randn(1, BH, S_GOAL, 64, device="cuda") for _ in range(3))
    res = {}
    for causal in (False, True):
        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        res[f"sdpa_causal={causal}"] = timeit(sdpa)
    RESULT["torch_ms"] = res
    print("  ", res, flush=True)


# --- 4. sweep over sequence length (time and memory) -----------------------------------------

@section("sweep")
def _():
    d = 64 if not TINY else 16
    best = RESULT.get("best", {}).get(d)
    cfg = A.FlashConfig(*best) if best else (A.SIM_CONFIG if TINY else A.GPU_CONFIGS[d])
    seqs = (16, 40, 64) if TINY else (512, 1024, 2048, 4096, 8192, 16384)
    rows = []
    for s in seqs:
        if left() < 25:
            break
        q, k, v = qkv(BH, s, d, seed=s)
        dq, dk, dv = dev(q, k, v)
        row = dict(seq=s, bh=BH, d=d, cfg=list(cfg.__dict__.values()))
        for c in (False, True):
            key = "causal" if c else "full"
            row[f"fused_ms_{key}"] = round(timeit(
                lambda: A.flash_attention(dq, dk, dv, causal=c, config=cfg),
                reps=5 if s >= 8192 else 7), 3)
            if HAVE_CUPY:
                row[f"unfused_ms_{key}"] = round(unfused_ms(q, k, v, c), 3)
        if not device.is_simulator():
            row["fused_extra_bytes"], _r = A.measure_extra_memory(
                lambda: A.flash_attention(dq, dk, dv, config=cfg))
            del _r
            if HAVE_CUPY:
                cq, ck, cv = (cp.asarray(a) for a in (q, k, v))
                row["unfused_extra_bytes"], _r = A.measure_extra_memory(
                    lambda: A.attention_unfused(cq, ck, cv))
                del _r, cq, ck, cv
                cp.get_default_memory_pool().free_all_blocks()
        row["model_fused_bytes"] = A.extra_memory_bytes(BH, s, d, "fused")
        row["model_unfused_bytes"] = A.extra_memory_bytes(BH, s, d, "unfused")
        rows.append(row)
        print("  ", row, flush=True)
    RESULT["sweep"] = rows


# --- 5. fused softmax against CuPy's composition ------------------------------------------------

@section("softmax")
def _():
    rows, n = (64, 300) if TINY else (BH * 4096, 4096)
    x = np.random.default_rng(5).standard_normal((rows, n)).astype(np.float32)
    dx = cuda.to_device(x)
    dout = cuda.device_array_like(dx)
    res = {"shape": [rows, n]}
    for threads in ((32,) if TINY else (128, 256, 512)):
        ms = timeit(lambda: SM.fused_softmax(dx, 0.125, out=dout, threads=threads))
        res[f"fused_ms_t{threads}"] = ms
        res[f"fused_GBps_t{threads}"] = round(3 * x.nbytes / ms / 1e6, 1)  # 2 reads + 1 write
    got = dout.copy_to_host()
    res["max_abs_err"] = float(np.abs(got[:64] - SM.softmax_ref(x[:64], 0.125)).max())
    if HAVE_CUPY:
        cx = cp.asarray(x)

        def cupy_softmax():
            s = cx * np.float32(0.125)
            s -= s.max(axis=-1, keepdims=True)
            cp.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            return s
        res["cupy_ms"] = timeit(cupy_softmax)
    RESULT["softmax"] = res
    print("  ", res, flush=True)


@section("pytest")
def _():
    if TINY:
        return
    import subprocess

    tests = [t for t in ("tests/test_softmax.py", "tests/test_attention.py",
                         "tests/test_check_attention.py") if Path(t).exists()]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p",
                           "no:cacheprovider", *tests], capture_output=True, text=True,
                          timeout=max(10, int(left()) - 35))
    RESULT["pytest_rc"] = proc.returncode
    RESULT["pytest_tail"] = proc.stdout[-3000:] + proc.stderr[-1500:]
    print(RESULT["pytest_tail"], flush=True)


for _name in ("correctness", "configs", "pytest", "sweep", "softmax", "torch"):
    run_section(_name)
save()
print("wrote", OUT / "probe_attention.json", f"in {time.time() - T0:.0f}s;", "errors:",
      RESULT["errors"], flush=True)
