"""Candidate kernels on the GPU (issue 35), one process: beside the current ones and their
peers, each checked against a reference before it is timed. Writes $OUT/probe_candidates.json
(a row per timing; ``current`` marks the module's present choice) after every section, so a
run cut short still leaves what it measured.

    bash .whl/on-device.sh python3 tools/probe_candidates.py     # on the GPU machine
    CUDACOURSE_DEVICE=sim python3 tools/probe_candidates.py      # a dry run, simulator

``PROBE_NCU=1``: instead, launch each module's kernel (its constant, or the choice of
CUDACOURSE_CHOICES, and the ``previous`` one that file names) once at full size after a
small compiling launch, for ``ncu`` (``-k regex:...``, every launch profiled);
$OUT/ncu_manifest.json lists the launches in order, so the CSV's IDs can be named.

Timing: CUDA events around one call, median of the runs after a warm-up (float32, TF32 off).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from dataclasses import astuple
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import cudacourse  # noqa: E402,F401  (chooses GPU or simulator first)
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from cudacourse.kernels import attention as A  # noqa: E402
from cudacourse.runtime import device
from cudacourse.kernels import lbm, stencil  # noqa: E402
from cudacourse.kernels import matmul as M  # noqa: E402
from cudacourse.kernels import transpose as T  # noqa: E402

SIM = device.is_simulator()
NCU = os.environ.get("PROBE_NCU") == "1"
T0 = time.time()
BUDGET = float(os.environ.get("PROBE_BUDGET_S", "150"))
OUT = Path(os.environ.get("OUT", "."))
R: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "mode": device.mode(), "commit": os.environ.get("CUDACOURSE_COMMIT", ""),
           "errors": [], "rows": []}
MANIFEST: list = []
PREVIOUS: dict = {}  # the module constants a CUDACOURSE_CHOICES file replaced
if os.environ.get("CUDACOURSE_CHOICES"):
    PREVIOUS = json.loads(Path(os.environ["CUDACOURSE_CHOICES"]).read_text()).get("previous", {})


def unique(items: list) -> list:
    out = []
    for it in items:
        if it not in out:
            out.append(it)
    return out
if not SIM:
    R["gpu"] = device.current().gpu.describe()
    import cupy as xp
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
else:
    import numpy as xp

FULL = not SIM
N_MM = 4096 if FULL else 64
N_TR = 16384 if FULL else 64
N_ST = 16384 if FULL else 40
LBM_SHAPE = (2048, 8192) if FULL else (9, 21)
ATT = [(16, 4096, 128), (16, 4096, 64)] if FULL else [(1, 40, 64)]


def save() -> None:
    R["elapsed_s"] = round(time.time() - T0, 1)
    tail = f"_{os.environ['PROBE_ONLY']}" if os.environ.get("PROBE_ONLY") else ""
    name = f"probe_candidates_ncu{tail}.json" if NCU else "probe_candidates.json"
    (OUT / name).write_text(json.dumps(R, indent=1))
    if NCU:
        (OUT / f"ncu_manifest{tail}.json").write_text(json.dumps(MANIFEST, indent=1))


def left() -> float:
    return BUDGET - (time.time() - T0)


def timeit(fn, reps: int = 10) -> float:
    fn()
    cuda.synchronize()
    if SIM:
        return float("nan")
    ts = []
    spent = 0.0
    while len(ts) < 3 or (len(ts) < reps and spent < 1500):
        e0, e1 = cuda.event(timing=True), cuda.event(timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(cuda.event_elapsed_time(e0, e1))
        spent += ts[-1]
    return float(np.median(ts))


def row(**kw) -> None:
    R["rows"].append(kw)
    print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                   for k, v in kw.items()), flush=True)


def attempt(what: str, fn, **kw) -> None:
    """Run one timing (fn returns a dict of fields) or record why it failed."""
    if left() < 0:
        row(what=what, skipped="budget", **kw)
        return
    try:
        row(what=what, **kw, **fn())
    except Exception as exc:  # noqa: BLE001
        row(what=what, **kw, failed=f"{type(exc).__name__}: {str(exc)[:300]}")
        R["errors"].append(traceback.format_exc()[-2000:])


def launch_once(label: str, fn) -> None:
    """PROBE_NCU: one launch, named in the manifest (ncu profiles it)."""
    try:
        fn()
        cuda.synchronize()
        MANIFEST.append(label)
    except Exception as exc:  # noqa: BLE001
        R["errors"].append(f"{label}: {type(exc).__name__}: {exc}")
        MANIFEST.append(label + " (FAILED)")


def regs(kern) -> dict:
    if SIM:
        return {}
    try:
        return {"regs": [int(v) for v in kern.get_regs_per_thread().values()],
                "local": [int(v) for v in kern.get_local_mem_per_thread().values()]}
    except Exception:  # noqa: BLE001
        return {}


def close(got, want, tol) -> float:
    got = np.asarray(got if SIM else xp.asnumpy(xp.asarray(got)), np.float64)
    want = np.asarray(want if SIM else xp.asnumpy(xp.asarray(want)), np.float64)
    e = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    if not e <= tol:
        raise AssertionError(f"relative error {e:.3g} > {tol}")
    return e


def rand(shape, seed=0, lo=0.0, hi=1.0):
    g = np.random.default_rng(seed)
    return xp.asarray(g.uniform(lo, hi, shape).astype(np.float32))


# --- ceilings ---------------------------------------------------------------------------------

def ceilings() -> None:
    if SIM or NCU:
        return
    n = 1 << 28
    src, dst = xp.ones(n, np.float32), xp.empty(n, np.float32)

    def copy():
        dst.data.copy_from_device(src.data, 4 * n)

    ms = timeit(copy, 20)
    row(what="copy", ms=ms, gb_s=8 * n / ms / 1e6)
    R["copy_gb_s"] = 8 * n / ms / 1e6
    del src, dst
    a, b = rand((N_MM, N_MM), 1), rand((N_MM, N_MM), 2)
    c = xp.empty_like(a)
    ms = timeit(lambda: xp.matmul(a, b, out=c), 20)
    row(what="cublas_sgemm", ms=ms, tflops=2 * N_MM ** 3 / ms / 1e9)
    R["cublas_tflops"] = 2 * N_MM ** 3 / ms / 1e9
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    tc = torch.empty_like(ta)
    ms = timeit(lambda: torch.matmul(ta, tb, out=tc), 20)
    row(what="torch_matmul", ms=ms, tflops=2 * N_MM ** 3 / ms / 1e9)


# --- matmul -------------------------------------------------------------------------------------

def matmul_section() -> None:
    a, b = rand((N_MM, N_MM), 1, -1, 1), rand((N_MM, N_MM), 2, -1, 1)
    want = None if NCU else xp.matmul(a, b)
    c = xp.empty((N_MM, N_MM), np.float32)
    names = [M.BEST] + [n for n in M.CANDIDATE_V4_CONFIGS
                        if n.endswith("g") or n == "register128v4r128"]
    if NCU:
        names = unique([M.BEST, PREVIOUS.get("matmul", M.BEST)])
    if SIM:  # the simulator: small tiles of the same kernels
        names = []
        for name, cfg in (("sim_v4", (32, 32, 8, 4, 4, 4)),
                          ("sim_v4g", (32, 32, 8, 4, 4, 4, None, False, True))):
            M.CANDIDATE_V4_CONFIGS[name] = cfg
            names.append(name)
    for name in names:
        def one(name=name):
            kern = M._register_kernel(name)
            if getattr(kern, "global_v4", False) and not M._vector_tiles_fit(kern, a, b) \
                    and not SIM:
                raise RuntimeError("vector tiles do not fit these arrays")
            grid, block = M.launch_config(N_MM, N_MM, name) if name in M.MATMUL_VARIANTS \
                else ((N_MM // kern.tile[1], N_MM // kern.tile[0]), kern.block)
            run = lambda: kern[grid, block](a, b, c)  # noqa: E731
            if NCU:
                launch_once(f"matmul {name}", run)
                return {}
            run()
            e = close(c, want, 1e-4)
            ms = timeit(run)
            return dict(err=e, ms=ms, tflops=2 * N_MM ** 3 / ms / 1e9,
                        current=name == M.BEST, **regs(kern))

        if NCU:  # compile on a small matrix first: one profiled launch at full size
            continue
        attempt("matmul", one, variant=name)
    if NCU:
        sa, sb = rand((256, 256), 3), rand((256, 256), 4)
        sc = xp.empty((256, 256), np.float32)
        for name in names:
            kern = M._register_kernel(name)
            launch_once(f"compile: matmul {name} 256^2",
                        lambda kern=kern: kern[(1, 1), kern.block](sa, sb, sc))
        for name in names:
            kern = M._register_kernel(name)
            grid = (N_MM // kern.tile[1], N_MM // kern.tile[0])
            launch_once(f"matmul {name}", lambda kern=kern, grid=grid: kern[grid, kern.block](
                a, b, c))


# --- transpose ---------------------------------------------------------------------------------

TR_CANDIDATES = [T.Config("tiled", 64, 8, 1), T.Config("tiled", 64, 2, 1),
                 T.Config("tiled", 32, 4, 1), T.Config("tiled", 64, 4, 2)]


def transpose_section() -> None:
    if NCU:
        x, out = rand((N_TR, N_TR), 5), xp.empty((N_TR, N_TR), np.float32)
        small = rand((256, 256), 5)
        so = xp.empty_like(small)
        prev = PREVIOUS.get("transpose")
        cfgs = unique([T.BEST, T.Config("tiled", *prev) if prev else T.BEST])
        for cfg in cfgs:
            launch_once(f"compile: transpose {cfg.name} 256^2",
                        lambda cfg=cfg: T.transpose(small, so, cfg))
        for cfg in cfgs:
            launch_once(f"transpose {cfg.name}", lambda cfg=cfg: T.transpose(x, out, cfg))
        return
    x, out = rand((N_TR, N_TR), 5), xp.empty((N_TR, N_TR), np.float32)
    want = x.T.copy()
    for cfg in [T.BEST, *TR_CANDIDATES]:
        def one(cfg=cfg):
            run = lambda: T.transpose(x, out, cfg)  # noqa: E731
            run()
            e = close(out, want, 0)
            ms = timeit(run)
            return dict(err=e, ms=ms, gb_s=8 * N_TR * N_TR / ms / 1e6,
                        current=cfg == T.BEST, fields=[cfg.tile, cfg.rows, cfg.pad])

        attempt("transpose", one, variant=cfg.name)


# --- stencil -------------------------------------------------------------------------------------

ST_CANDIDATES = [("rows", (128, 1, 32)), ("rowsblock", (256, 1, 16)),
                 ("rowsblock", (256, 1, 32)), ("rowsblock", (128, 1, 32)),
                 ("rowsblock", (512, 1, 16)), ("rowsblock", (1024, 1, 8)),
                 ("rowsblock", (512, 1, 8))]
if SIM:
    ST_CANDIDATES = [("rowsblock", (16, 1, 8))]


def stencil_section() -> None:
    u = rand((N_ST, N_ST), 6)
    out = xp.empty_like(u)
    cands = [stencil.BEST, *ST_CANDIDATES]
    if NCU:
        prev = PREVIOUS.get("stencil")
        cands = unique([stencil.BEST, (prev[0], tuple(prev[1])) if prev else stencil.BEST])
        su = rand((256, 256), 6)
        so = xp.empty_like(su)
        for v, b in cands:
            launch_once(f"compile: stencil {v} {b} 256^2",
                        lambda v=v, b=b: stencil.heat_step(su, so, 0.2, v, b))
        for v, b in cands:
            launch_once(f"stencil {v} {b}", lambda v=v, b=b: stencil.heat_step(u, out, 0.2, v, b))
        return
    want = stencil.heat_step(u, xp.empty_like(u), 0.2, "naive", (32, 8, 1))
    for v, b in cands:
        def one(v=v, b=b):
            run = lambda: stencil.heat_step(u, out, 0.2, v, b)  # noqa: E731
            run()
            e = close(out, want, 1e-5)
            ms = timeit(run)
            kern = stencil.launch_config(N_ST, N_ST, v, b)[0]
            return dict(err=e, ms=ms, gb_s=stencil.bytes_per_step(N_ST, N_ST) / ms / 1e6,
                        current=(v, b) == stencil.BEST, **regs(kern))

        attempt("stencil", one, variant=v, block=list(b))


# --- LBM -------------------------------------------------------------------------------------------

def lbm_section() -> None:
    ny, nx = LBM_SHAPE
    solid_h = lbm.channel(ny, nx) | lbm.cylinder(ny, nx, nx / 4, ny / 2, max(ny / 8, 1.5))
    g = np.random.default_rng(7)
    f_h = lbm.equilibrium(g.uniform(0.95, 1.05, (ny, nx)), g.uniform(0, 0.1, (ny, nx)),
                          g.uniform(-0.02, 0.02, (ny, nx))).astype(np.float32)
    dev = cuda.to_device if SIM else xp.asarray  # the simulator's device arrays
    f, out = dev(f_h), dev(np.empty(f_h.shape, np.float32))
    ds = dev(solid_h.astype(np.uint8))
    combos = [(k, b) for k in lbm.KERNELS for b in ((128, 2), (256, 1))]
    if NCU:
        runs = unique([(lbm.BEST_KERNEL, tuple(lbm.DEFAULT_BLOCK)),
                       (PREVIOUS.get("lbm_kernel", lbm.BEST_KERNEL),
                        tuple(PREVIOUS.get("lbm_block", lbm.DEFAULT_BLOCK)))])
        sf = dev(f_h[:, :64, :128].copy())
        sds = dev(solid_h[:64, :128].astype(np.uint8))
        so = dev(np.empty(sf.shape, np.float32))
        for k, blk in runs:
            launch_once(f"compile: lbm {k} {blk} 64x128", lambda k=k, blk=blk: lbm.lbm_step(
                sf, so, sds, 1 / 0.6, (1e-5, 0.0), None, blk, k))
        for k, blk in runs:
            launch_once(f"lbm {k} {blk}", lambda k=k, blk=blk: lbm.lbm_step(
                f, out, ds, 1 / 0.6, (1e-5, 0.0), None, blk, k))
        return
    want = lbm.ReferenceStepper(xp.asarray(solid_h), 1 / 0.6, (1e-5, 0.0), xp=xp).step(
        xp.asarray(f_h))
    for k, b in combos:
        def one(k=k, b=b):
            run = lambda: lbm.lbm_step(f, out, ds, 1 / 0.6, (1e-5, 0.0), None, b, k)  # noqa
            run()
            e = close(out.copy_to_host() if SIM else out, want, 1e-5)
            ms = timeit(run)
            return dict(err=e, ms=ms, gb_s=lbm.BYTES_PER_NODE * ny * nx / ms / 1e6,
                        current=(k == lbm.BEST_KERNEL and b == tuple(lbm.DEFAULT_BLOCK)),
                        **regs(lbm.fused_kernel(k)))

        attempt("lbm", one, kernel=k, block=list(b))


# --- attention --------------------------------------------------------------------------------

def att_candidates(d: int) -> list:
    if SIM:
        return [A.FastConfig(32, 16, 4, 4), A.FastConfig(32, 16, 4, 4, prefetch=True)]
    cur = A.FAST_GPU_CONFIGS[d]
    if NCU:
        prev = PREVIOUS.get(f"attention_d{d}")
        return unique([cur, A.FastConfig(*prev) if prev else cur])
    if d == 128:
        return [cur, A.FastConfig(128, 32, 4, 4, prefetch=True), A.FastConfig(128, 32, 4, 2),
                A.FastConfig(128, 32, 4, 2, maxreg=128)]
    return [cur]


def attention_section() -> None:
    for shape in ATT:
        bh, s, d = shape
        q, k, v = rand(shape, 8, -2, 2), rand(shape, 9, -2, 2), rand(shape, 10, -1, 1)
        out = xp.empty_like(q)
        cands = att_candidates(d)
        if not NCU and d != 128 and not SIM:  # the bench times d = 64; nothing to choose
            continue
        if NCU:
            sq = rand((1, 256, d), 11)
            so = xp.empty_like(sq)
            for cfg in cands:
                launch_once(f"compile: attention d={d} {cfg} 1x256",
                            lambda cfg=cfg: A.flash_attention(sq, sq, sq, out=so, config=cfg))
            for cfg in cands:
                launch_once(f"attention d={d} {cfg}", lambda cfg=cfg: A.flash_attention(
                    q, k, v, out=out, config=cfg))
            continue
        fl = A.attention_flops(bh, s, d)
        for causal in (False, True):
            if SIM:
                want = A.attention_ref(xp.asarray(q), k, v, causal)
            else:
                tq, tk, tv = (torch.as_tensor(a, device="cuda")[None] for a in (q, k, v))
                from torch.nn.functional import scaled_dot_product_attention as sdpa

                with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
                    want = xp.asarray(sdpa(tq.double(), tk.double(), tv.double(),
                                           is_causal=causal)[0].float())
            f = fl / 2 if causal else fl
            for cfg in cands:
                def one(cfg=cfg, causal=causal):
                    run = lambda: A.flash_attention(q, k, v, causal, out=out, config=cfg)  # noqa
                    run()
                    e = close(out, want, 2e-5)
                    ms = timeit(run, 5)
                    return dict(err=e, ms=ms, tflops=f / ms / 1e9, fields=list(astuple(cfg)),
                                current=cfg == A.FAST_GPU_CONFIGS.get(d),
                                **regs(A.fast_kernel(d, cfg)))

                attempt("attention", one, shape=list(shape), causal=causal, cfg=str(cfg))
            if SIM or os.environ.get("PROBE_PEERS") != "1":  # the bench times the peers
                continue
            t3 = [torch.as_tensor(a, device="cuda") for a in (q, k, v)]
            mask = torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1) if causal else None

            def eager(causal=causal, mask=mask):
                sc = torch.matmul(t3[0], t3[1].transpose(-1, -2)) * (1 / math.sqrt(d))
                if causal:
                    sc.masked_fill_(mask, float("-inf"))
                return torch.matmul(torch.softmax(sc, dim=-1), t3[2])

            for name, fn in (("torch_eager", eager),
                             ("sdpa_f32", lambda causal=causal: sdpa(tq, tk, tv,
                                                                    is_causal=causal))):
                def peer(fn=fn):
                    o = fn()
                    e = close(xp.asarray(o.reshape(bh, s, d)), want, 2e-5)
                    ms = timeit(fn, 5)
                    return dict(err=e, ms=ms, tflops=f / ms / 1e9)

                attempt(name, peer, shape=list(shape), causal=causal)
            del t3, mask
            torch.cuda.empty_cache()


SECTIONS = (("ceilings", ceilings), ("stencil", stencil_section), ("lbm", lbm_section),
            ("matmul", matmul_section), ("transpose", transpose_section),
            ("attention", attention_section))
ONLY = os.environ.get("PROBE_ONLY")  # one section (ncu runs each in its own process)
for name, section in SECTIONS:
    if ONLY and name != ONLY:
        continue
    try:
        section()
    except Exception:  # noqa: BLE001
        R["errors"].append(f"{name}: " + traceback.format_exc()[-2000:])
        print(R["errors"][-1], flush=True)
    if not SIM:
        xp.get_default_memory_pool().free_all_blocks()
    save()
print(f"probe_candidates: done in {time.time() - T0:.0f} s, {len(R['errors'])} error(s)")
