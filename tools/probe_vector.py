"""Measure every vector-add configuration on the GPU in one run and name the fastest.

    python tools/probe_vector.py [--json PATH] [--n N] [--quick]

Run it on a GPU machine from the repository root (on the offline H200 machine prefix it with
``bash .whl/on-device.sh``, the wheelhouse ``../shared/gpu/wheelhouse.sh`` writes; it is not
in this repository). Until ``cudacourse bench sweep`` replaces it, this is where
``vector.REGISTRY``'s best configuration is chosen. For each candidate (kernel x threads per block x work per
thread x grid size x cache hint) it

1. checks the result exactly (out == a + b for every element, outputs poisoned with NaN
   first) on the full size, on an odd size, and on inputs that start 4 bytes past an
   allocation (not 16-byte aligned: the vec4 kernels must fall back);
2. times it: median of CUDA-event-timed runs queued back to back, after warm-up;
3. re-times the fastest few, interleaved, to separate real differences from noise.

It prints a table (GB/s and fraction of the device-to-device copy measured in the same run)
and the configuration to paste into ``src/cudacourse/kernels/vector.py`` as ``REGISTRY``'s ``best``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("CUDACOURSE_QUIET", "1")

import cudacourse  # noqa: E402

cudacourse.setup()  # the device, before numba.cuda is imported
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from cudacourse.runtime import device  # noqa: E402
from cudacourse.bench import environment, event_times  # noqa: E402
from cudacourse.kernels.vector import Config, run  # noqa: E402


@cuda.jit
def _mismatches(a, b, out, count):
    """Count elements where out != a + b (NaN, i.e. unwritten, counts too)."""
    i = cuda.grid(1)
    if i < out.shape[0] and not (out[i] == a[i] + b[i]):
        cuda.atomic.add(count, 0, 1)


@cuda.jit
def _fill_nan(x):
    """Poison an output so that unwritten elements show."""
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        x[i] = np.float32(np.nan)


def candidates(quick: bool = False) -> list[Config]:
    """Every configuration worth measuring."""
    tpbs = (128, 256, 512, 1024)
    c = [Config("simple", threads=t) for t in tpbs]
    c += [Config("grid_stride", threads=t, blocks_per_sm=b) for t in (256, 512)
          for b in (4, 8, 16, 32)]
    c += [Config("ilp", threads=t, per_thread=k) for t in (128, 256, 512) for k in (4, 8, 16)]
    c += [Config("vec4", threads=t, per_thread=v, hint=h) for t in tpbs for v in (1, 2, 4)
          for h in ("", "cs", "nc")]
    c += [Config("vec4_stride", threads=t, per_thread=v, blocks_per_sm=b) for t in (256, 512)
          for v in (1, 2, 4) for b in (2, 4, 8, 16)]
    if quick:
        c = [x for x in c if x.threads == 256][:12]
    return c


def count_wrong(cfg: Config, a, b, out) -> int:
    _fill_nan[256, 256](out)
    run(cfg, a, b, out)
    count = cuda.to_device(np.zeros(1, np.int64))
    n = out.shape[0]
    _mismatches[(n + 255) // 256, 256](a, b, out, count)
    return int(count.copy_to_host()[0])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", help="write all results here")
    p.add_argument("--n", type=int, default=2**28, help="elements (default 2^28: 1 GiB/array)")
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--top", type=int, default=8, help="re-time this many, interleaved")
    p.add_argument("--quick", action="store_true", help="a dozen candidates (for tests)")
    args = p.parse_args()
    device.require_gpu("tools/probe_vector.py")
    n = args.n
    gen = np.random.default_rng()
    # Inputs in [0.5, 1.5): never zeros; 1 extra element so that a view 4 bytes in exists.
    a_full = cuda.to_device((gen.random(n + 1, dtype=np.float32) + np.float32(0.5)))
    b_full = cuda.to_device((gen.random(n + 1, dtype=np.float32) + np.float32(0.5)))
    out_full = cuda.device_array(n + 1, np.float32)
    a, b, out = a_full[:n], b_full[:n], out_full[:n]
    odd = min(2**20 + 3, n - 1)
    shifted = (a_full[1:odd + 1], b_full[1:odd + 1], out_full[1:odd + 1])  # not 16-B aligned
    dst = cuda.device_array(n, np.float32)
    stream = cuda.default_stream()
    copy_ms = statistics.median(event_times(lambda: dst.copy_to_device(a, stream=stream),
                                            repeats=args.repeats))
    copy_gbs = 8 * n / copy_ms / 1e6
    print(f"copy: {copy_ms:.3f} ms, {copy_gbs:.0f} GB/s (bytes read + written)", flush=True)

    rows = []
    for cfg in candidates(args.quick):
        row = {"name": cfg.name, "config": asdict(cfg)}
        try:
            wrong = {"full": count_wrong(cfg, a, b, out),
                     "odd": count_wrong(cfg, a[:odd], b[:odd], out[:odd]),
                     "unaligned": count_wrong(cfg, *shifted)}
        except Exception as exc:  # noqa: BLE001 - a candidate that cannot run is reported
            row.update(status="FAILED", detail=f"{type(exc).__name__}: {exc}")
            rows.append(row)
            print(f"{cfg.name:<28} FAILED {row['detail']}", flush=True)
            continue
        if any(wrong.values()):
            row.update(status="FAILED", detail=f"wrong elements: {wrong}")
            rows.append(row)
            print(f"{cfg.name:<28} FAILED {row['detail']}", flush=True)
            continue
        ms = statistics.median(event_times(lambda: run(cfg, a, b, out), repeats=args.repeats))
        row.update(status="ok", ms=ms, gb_s=12 * n / ms / 1e6, vs_copy=12 * n / ms / 1e6 / copy_gbs)
        rows.append(row)
        print(f"{cfg.name:<28} {ms:8.3f} ms {row['gb_s']:8.0f} GB/s {row['vs_copy']:6.3f} of copy",
              flush=True)

    ok = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: r["ms"])
    top = ok[:args.top]
    by_name = {r["name"]: r for r in top}
    cfgs = {r["name"]: Config(**r["config"]) for r in top}
    again: dict[str, list[float]] = {k: [] for k in cfgs}
    for _ in range(3):  # interleaved rounds: drifts (clocks, temperature) hit all alike
        copy_again = statistics.median(event_times(
            lambda: dst.copy_to_device(a, stream=stream), repeats=args.repeats))
        for name, cfg in cfgs.items():
            ms = statistics.median(event_times(lambda: run(cfg, a, b, out),
                                               repeats=args.repeats))
            again[name].append((12 * n / ms) / (8 * n / copy_again))
    for name, ratios in again.items():
        by_name[name]["vs_copy_rounds"] = ratios
        by_name[name]["vs_copy_final"] = statistics.median(ratios)
    final = sorted(top, key=lambda r: -r["vs_copy_final"])
    print("\nfastest, re-timed in 3 interleaved rounds (fraction of the copy):")
    for r in final:
        print(f"  {r['name']:<28} {r['vs_copy_final']:.3f}  rounds "
              + " ".join(f"{x:.3f}" for x in r["vs_copy_rounds"]))
    best = Config(**final[0]["config"]) if final else None
    if best:
        print(f"\nBEST = {best!r}  # {final[0]['vs_copy_final']:.2f} of the copy")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "n": n, "copy_ms": copy_ms, "copy_gb_s": copy_gbs, "environment": environment(),
            "candidates": rows, "best": asdict(best) if best else None}, indent=1) + "\n")
        print(f"wrote {args.json}")
    return 0 if best else 1


if __name__ == "__main__":
    sys.exit(main())
