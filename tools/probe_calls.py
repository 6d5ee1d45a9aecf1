"""The public calls timed the way a user times one (issue 22), with PyTorch and cuBLAS beside
them in the same process, and each call's host overhead with and without the prepared launch
path (``cudacourse.runtime.launch.DevicePlans``). Writes $OUT/probe_calls.json.

    bash .whl/on-device.sh python3 tools/probe_calls.py       # on the GPU machine

Timing: CUDA events around one call, then synchronize (``cudacourse.bench.core.event_times``),
median; CuPy arrays in and ``out`` given, as a user calls them; float32, TF32 off. Overhead:
median host microseconds of one call with the GPU idle (``call_overhead_us``). "unprepared"
switches the module's plans off (every call checks and converts, as before issue 22).
"""

from __future__ import annotations

import json
import math
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import cudacourse  # noqa: E402

cudacourse.setup()  # the device, before numba.cuda is imported
import numpy as np  # noqa: E402

from cudacourse.kernels import attention, lbm, matmul, softmax, stencil
from cudacourse.runtime import device  # noqa: E402
from cudacourse.bench.core import call_overhead_us, event_times  # noqa: E402

OUT = Path(os.environ.get("OUT", "."))
R: dict = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "gpu": device.current().gpu.describe() if device.current().gpu else None,
           "method": __doc__.split("Timing: ")[1].strip(), "rows": []}


def med(xs: list[float]) -> float:
    return float(np.median(xs))


class Unprepared:
    """Within the block, ``mod``'s launcher never replays a plan (the path before issue 22)."""

    def __init__(self, mod):
        self.plans = mod._PLANS

    def __enter__(self):
        self.run, self.plans.run = self.plans.run, (lambda *a, **k: False)

    def __exit__(self, *exc):
        self.plans.run = self.run


def row(name: str, mod, fn, work: float, unit: str, peers: dict) -> None:
    fn()
    ms = med(event_times(fn, repeats=30))
    over = call_overhead_us(fn)
    with Unprepared(mod):
        ms_old = med(event_times(fn, repeats=30))
        over_old = call_overhead_us(fn)
    r = {"name": name, "ms": ms, "rate": work / ms / 1e9, "unit": unit,
         "call_overhead_us": over, "unprepared_ms": ms_old, "unprepared_rate": work / ms_old / 1e9,
         "unprepared_call_overhead_us": over_old, "peers": {}}
    for p, pf in peers.items():
        pf()
        pms = med(event_times(pf, repeats=30))
        r["peers"][p] = {"ms": pms, "rate": work / pms / 1e9, "ratio": pms / ms}
    R["rows"].append(r)
    print(json.dumps(r), flush=True)
    (OUT / "probe_calls.json").write_text(json.dumps(R, indent=1))


def main() -> None:
    import cupy as cp
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    g = cp.random.default_rng(1)
    for d in (64, 128):
        h, s = 16, 4096
        q, k, v = (g.random((h, s, d), dtype=np.float32) * 4 - 2 for _ in range(3))
        out = cp.empty_like(q)
        tq, tk, tv = (torch.as_tensor(x, device="cuda") for x in (q, k, v))
        q4, k4, v4 = (t[None] for t in (tq, tk, tv))

        def eager():
            sc = torch.matmul(tq, tk.transpose(-1, -2)) * (1.0 / math.sqrt(d))
            return torch.matmul(torch.softmax(sc, dim=-1), tv)

        fn = (lambda: attention.flash_attention(q, k, v, out=out))
        ref = eager()
        fn()
        err = float(cp.abs(out - cp.asarray(ref)).max())
        assert err < 1e-3, f"attention d={d} wrong: {err}"
        row(f"attention 16x4096x{d}", attention, fn, 4.0 * h * s * s * d, "TFLOP/s",
            {"torch_eager": eager, "sdpa_f32": lambda: F.scaled_dot_product_attention(q4, k4, v4)})
        del q, k, v, out, tq, tk, tv, q4, k4, v4, ref
        cp.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()
    n = 4096
    a, b = (g.random((n, n), dtype=np.float32) - 0.5 for _ in range(2))
    c, c2 = cp.empty((n, n), np.float32), cp.empty((n, n), np.float32)
    ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
    tc = torch.empty((n, n), device="cuda")
    row("matmul 4096^3", matmul, lambda: matmul.matmul(a, b, out=c), 2.0 * n**3, "TFLOP/s",
        {"cublas": lambda: cp.matmul(a, b, out=c2),
         "torch": lambda: torch.matmul(ta, tb, out=tc)})
    del a, b, c, c2, ta, tb, tc
    x = g.random((16384, 4096), dtype=np.float32)
    xo = cp.empty_like(x)
    row("softmax 16384x4096", softmax, lambda: softmax.fused_softmax(x, 0.125, out=xo),
        8.0 * x.size, "TB/s", {"torch": (lambda t=torch.as_tensor(x, device="cuda"):
                                         torch.softmax(t * 0.125, dim=-1))})
    del x, xo
    u = g.random((16384, 16384), dtype=np.float32)
    uo = cp.empty_like(u)
    cp_copy = (lambda: uo.__setitem__(Ellipsis, u))
    row("stencil 16384^2", stencil, lambda: stencil.heat_step(u, uo, 0.2), 8.0 * u.size, "TB/s",
        {"copy": cp_copy})
    del u, uo
    ny, nx = 2048, 8192
    solid = cp.asarray((lbm.channel(ny, nx)).astype(np.uint8))
    f = cp.asarray(lbm.init_f(lbm.channel(ny, nx), (0.05, 0.0)))
    fo = cp.empty_like(f)
    row("lbm 2048x8192", lbm, lambda: lbm.lbm_step(f, fo, solid, 1 / 0.6, (1e-5, 0.0)),
        72.0 * ny * nx, "TB/s", {"copy": lambda: fo.__setitem__(Ellipsis, f)})


if __name__ == "__main__":
    main()
