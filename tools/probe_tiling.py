"""Probe lesson 4's kernels on a GPU: correctness first, then event-timed medians.

    bash .whl/on-device.sh python3 tools/probe_tiling.py        # on the GPU machine
    CUDACOURSE_DEVICE=sim python tools/probe_tiling.py           # tiny sizes, a dry run

Measures, in one run: device-to-device copy bandwidth (the ceiling), float32 matmul at
4096^3 against cuBLAS (through CuPy), sum of 256M float32 and transpose of 16384^2 against
that copy bandwidth, for every variant and a few configurations around each. Prints a
compact summary and writes probe_tiling.json to $OUT (or the current folder).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

import cudacourse  # noqa: E402

cudacourse.setup()  # the device, before numba.cuda is imported
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from cudacourse.runtime import device
from cudacourse.kernels import matmul as MM, reduce as RD, transpose as TR  # noqa: E402

SIM = device.is_simulator()
BEST_NAME = MM.BEST
OUT = os.environ.get("OUT", ".")
T0 = time.time()
BUDGET = float(os.environ.get("PROBE_BUDGET_S", "140" if not SIM else "3000"))
results: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "mode": device.mode(),
                 "gpu": device.current().gpu.describe() if not SIM else "simulator",
                 "copy": {}, "matmul": {}, "reduce": {}, "transpose": {}, "errors": []}


def save() -> None:
    with open(os.path.join(OUT, "probe_tiling.json"), "w") as f:
        json.dump(results, f, indent=1)


def left() -> bool:
    return time.time() - T0 < BUDGET


def timeit(fn, reps: int = 10, warm: int = 2) -> float:
    """Median seconds of ``fn()``: CUDA events on a GPU, wall clock in the simulator
    (where one run only checks that the code works: its timings mean nothing)."""
    if SIM:
        reps, warm = 1, 0
    for _ in range(warm):
        fn()
    cuda.synchronize()
    times = []
    for _ in range(reps):
        if SIM:
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        else:
            e0, e1 = cuda.event(timing=True), cuda.event(timing=True)
            e0.record()
            fn()
            e1.record()
            e1.synchronize()
            times.append(cuda.event_elapsed_time(e0, e1) / 1e3)
    return float(np.median(times))


# PROBE_SECTIONS=extra: only the copy, cuBLAS and the EXTRA matmul configurations.
SECTIONS = os.environ.get("PROBE_SECTIONS", "all")


def guarded(section: str, name: str, fn) -> None:
    if SECTIONS == "extra" and section != "copy" and not name.startswith("cfg_") \
            and name not in ("cublas_cupy", BEST_NAME):
        return
    if not left():
        results[section][name] = {"skipped": "time budget"}
        return
    try:
        results[section][name] = fn()
    except Exception as exc:  # noqa: BLE001 - record and go on: one call must cover all
        results["errors"].append(f"{section}/{name}: {type(exc).__name__}: {exc}")
        results[section][name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        traceback.print_exc()
    print(f"[{time.time() - T0:6.1f}s] {section:9s} {name:34s} {results[section][name]}",
          flush=True)
    save()


def cupy_ok() -> bool:
    return device.cupy_usable()[0]


# --- copy bandwidth: the ceiling --------------------------------------------------------

N_COPY = device.pick(sim=4096, gpu=256 * 2**20)  # float32 elements (1 GiB on a GPU)
src = cuda.to_device(np.arange(N_COPY, dtype=np.float32))
dst = cuda.device_array_like(src)


def copy_numba():
    t = timeit(lambda: dst.copy_to_device(src), reps=10)
    return {"s": t, "TBps": 2 * 4 * N_COPY / t / 1e12}


guarded("copy", "numba_d2d", copy_numba)
COPY_BW = results["copy"]["numba_d2d"]["TBps"] * 1e12
if cupy_ok():
    import cupy as cp

    def copy_cupy():
        a = cp.asarray(src)
        t = timeit(lambda: a.copy(), reps=10)
        return {"s": t, "TBps": 2 * 4 * N_COPY / t / 1e12}

    guarded("copy", "cupy_copy", copy_cupy)
results["copy_TBps"] = COPY_BW / 1e12

# --- matmul ---------------------------------------------------------------------------------

S = device.pick(sim=32, gpu=4096)
CHECK = device.pick(sim=(40, 17, 45), gpu=(1000, 777, 1100))
gen = np.random.default_rng(0)
A = cuda.to_device(gen.standard_normal((S, S)).astype(np.float32))
B = cuda.to_device(gen.standard_normal((S, S)).astype(np.float32))
C = cuda.device_array((S, S), dtype=np.float32)
m, k, n = CHECK
a_chk = gen.standard_normal((m, k)).astype(np.float32)
b_chk = gen.standard_normal((k, n)).astype(np.float32)
want = a_chk.astype(np.float64) @ b_chk.astype(np.float64)
FLOP = MM.flops(S, S, S)

if cupy_ok():
    def cublas():
        ca, cb = cp.asarray(A), cp.asarray(B)
        t = timeit(lambda: cp.matmul(ca, cb), reps=10)
        return {"s": t, "TFLOPs": FLOP / t / 1e12}

    guarded("matmul", "cublas_cupy", cublas)


def run_matmul(kernel, grid_fn, reps=10):
    got = np.zeros((m, n), np.float32)
    grid, block = grid_fn(m, n)
    dc = cuda.device_array((m, n), np.float32)
    kernel[grid, block](cuda.to_device(a_chk), cuda.to_device(b_chk), dc)
    got = dc.copy_to_host()
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    if not err < 1e-4:
        return {"correct": False, "rel_err": err}
    grid, block = grid_fn(S, S)
    t = timeit(lambda: kernel[grid, block](A, B, C), reps=reps, warm=1)
    out = {"correct": True, "rel_err": err, "s": t, "TFLOPs": FLOP / t / 1e12}
    if not SIM:
        try:
            out["regs"] = list(kernel.get_regs_per_thread().values())[0] \
                if isinstance(kernel.get_regs_per_thread(), dict) else kernel.get_regs_per_thread()
            sm = kernel.get_shared_mem_per_block()
            out["smem"] = list(sm.values())[0] if isinstance(sm, dict) else sm
        except Exception as exc:  # noqa: BLE001
            out["regs"] = str(exc)[:80]
    return out


for name in MM.MATMUL_VARIANTS:
    kern = {"naive": MM._matmul_naive}.get(name) or \
        MM._register_kernel(name)
    guarded("matmul", name, lambda kern=kern, name=name: run_matmul(
        kern, lambda mm, nn: MM.launch_config(mm, nn, name), reps=3 if name == "naive" else 10))


# --- reductions ------------------------------------------------------------------------------

NR = device.pick(sim=3000, gpu=256 * 2**20)
xr_host = gen.uniform(-1, 1, NR).astype(np.float32)
xr = cuda.to_device(xr_host)
want_sum = float(np.sum(xr_host, dtype=np.float64))
want_max = float(np.max(xr_host))
out1 = cuda.device_array(1, np.float32)


def run_reduce(launch, op="sum"):
    launch(xr, out1)
    got = float(out1.copy_to_host()[0])
    wanted = want_sum if op == "sum" else want_max
    ok = abs(got - wanted) <= 1e-3 * max(1.0, abs(wanted)) + 1e-4 * NR ** 0.5
    if not ok:
        return {"correct": False, "got": got, "want": wanted}
    t = timeit(lambda: launch(xr, out1), reps=20)
    bw = 4 * NR / t
    return {"correct": True, "s": t, "TBps": bw / 1e12, "vs_copy": bw / COPY_BW}


for op in ("sum", "max"):
    for v in RD.REDUCE_VARIANTS:
        guarded("reduce", f"{op}_{v}", lambda v=v, op=op: run_reduce(
            lambda x, o: RD._reduce_into(x, o, op, v), op))

for items in (4, 8, 16, 32):
    ks = RD._make_kernels("sum", items)
    for bps in (2, 4, 8, 16, 32):
        def launch(x, o, ks=ks, items=items, bps=bps):
            ks["fill"][1, 32](o)
            ks["single_pass"][RD.grid_size(x.shape[0], items, bps), RD.TPB](x, o)

        guarded("reduce", f"sum_single_items{items}_bps{bps}",
                lambda launch=launch: run_reduce(launch))

if cupy_ok():
    def cupy_sum():
        cx = cp.asarray(xr)
        t = timeit(lambda: cx.sum(), reps=20)
        return {"s": t, "TBps": 4 * NR / t / 1e12, "vs_copy": 4 * NR / t / COPY_BW}

    guarded("reduce", "cupy_sum", cupy_sum)
del xr

# --- transpose --------------------------------------------------------------------------------

ST = device.pick(sim=(40, 33), gpu=(16384, 16384))
xt_host = gen.standard_normal(ST).astype(np.float32)
xt = cuda.to_device(xt_host)
ot = cuda.device_array((ST[1], ST[0]), np.float32)
chk = device.pick(sim=(37, 20), gpu=(1000, 1333))
xc_host = gen.standard_normal(chk).astype(np.float32)


def run_transpose(kernel, grid_fn):
    dc = cuda.device_array((chk[1], chk[0]), np.float32)
    grid, block = grid_fn(*chk)
    kernel[grid, block](cuda.to_device(xc_host), dc)
    if not np.array_equal(dc.copy_to_host(), xc_host.T):
        return {"correct": False}
    grid, block = grid_fn(*ST)
    t = timeit(lambda: kernel[grid, block](xt, ot), reps=10)
    bw = 2 * 4 * ST[0] * ST[1] / t
    return {"correct": True, "s": t, "TBps": bw / 1e12, "vs_copy": bw / COPY_BW}


for v in TR.TRANSPOSE_VARIANTS:
    kern = TR._transpose_naive if v == "naive" else TR._tiled_kernel(v)
    guarded("transpose", v, lambda kern=kern, v=v: run_transpose(
        kern, lambda mm, nn: TR.launch_config(mm, nn, v)))

for cfg in [(32, 4, 1), (32, 16, 1), (32, 32, 1), (64, 4, 1), (64, 8, 1), (64, 16, 1), (32, 8, 2)]:
    def one_t(cfg=cfg):
        kern = TR._make_tiled(*cfg)
        t_ = kern.tile[0]  # (rows, cols), square here
        return run_transpose(kern, lambda mm, nn: ((-(-nn // t_), -(-mm // t_)), kern.block))

    guarded("transpose", "cfg_" + "_".join(map(str, cfg)), one_t)

if cupy_ok():
    def cupy_t():
        cx = cp.asarray(xt)
        t = timeit(lambda: cx.T.copy(), reps=10)
        bw = 2 * 4 * ST[0] * ST[1] / t
        return {"s": t, "TBps": bw / 1e12, "vs_copy": bw / COPY_BW}

    guarded("transpose", "cupy_T_copy", cupy_t)

# --- matmul configurations (last: they take the longest to compile) -------------------

# Configurations around the best: (bm, bn, bk, tm, tn, prefetch, max_registers)
CONFIGS = [(128, 128, 8, 8, 8, False, None), (128, 128, 8, 8, 8, True, 128),
           (128, 128, 16, 8, 8, True, None), (128, 256, 8, 8, 16, True, None),
           (128, 64, 8, 8, 4, True, None), (64, 64, 8, 4, 4, True, None),
           (64, 64, 16, 4, 4, True, None), (128, 128, 8, 8, 8, True, None)]
# Second round (after the first run on 2026-11-30): around the best, 128 x 256 / 8 x 16.
EXTRA = [(256, 128, 8, 16, 8, True, None), (128, 256, 8, 8, 16, False, None),
         (128, 128, 8, 8, 8, False, 128), (128, 256, 8, 8, 8, True, 128),
         (256, 128, 8, 8, 8, True, 128), (128, 256, 8, 8, 16, True, None)]
if SECTIONS == "extra":
    CONFIGS = EXTRA
for cfg in CONFIGS:
    if SIM and cfg[1] > 128:
        continue

    def one(cfg=cfg):
        kern = MM._make_register_kernel(*cfg)
        bm, bn = kern.tile
        return run_matmul(kern, lambda mm, nn: ((-(-nn // bn), -(-mm // bm)), kern.block))

    guarded("matmul", "cfg_" + "_".join(map(str, cfg)), one)

if "cublas_cupy" in results["matmul"] and "TFLOPs" in results["matmul"]["cublas_cupy"]:
    ref = results["matmul"]["cublas_cupy"]["TFLOPs"]
    for v in results["matmul"].values():
        if isinstance(v, dict) and "TFLOPs" in v:
            v["vs_cublas"] = v["TFLOPs"] / ref

save()
print(json.dumps({s: {k: {kk: (round(vv, 3) if isinstance(vv, float) else vv)
                          for kk, vv in v.items() if kk in ("TFLOPs", "TBps", "vs_copy",
                                                            "vs_cublas", "correct", "regs",
                                                            "error", "skipped")}
                      for k, v in results[s].items()}
                  for s in ("copy", "matmul", "reduce", "transpose")}, indent=0))
print(f"total {time.time() - T0:.1f}s, errors: {len(results['errors'])}")
