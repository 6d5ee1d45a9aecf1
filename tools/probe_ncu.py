"""One launch of each kernel Nsight Compute is asked about (issue 22), at the benchmark's
full sizes: attention ("fast") at d = 64 and 128, matmul (BEST), the stencil (BEST), the
LBM step. Each kernel is compiled by a first call on a small input, so that the profiled
launches (``-k regex:...``) are exactly one per kernel at full size:

    ncu --clock-control none -k 'regex:_make_fast_kernel|_make_register|_make_rows[^_]|_lbm_fused' \
        --launch-skip 5 --launch-count 5 --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section WarpStateStats --csv python3 tools/probe_ncu.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import cudacourse  # noqa: E402

cudacourse.setup()  # the device, before numba.cuda is imported
import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from cudacourse.kernels import attention, lbm, matmul, stencil  # noqa: E402

PROFILE = os.environ.get("PROBE_NCU_PROFILE", "1") == "1"


def attn(h, s, d):
    q, k, v = (cp.random.random((h, s, d), dtype=np.float32) for _ in range(3))
    attention.flash_attention(q, k, v, out=cp.empty_like(q))


def mm(n):
    a, b = (cp.random.random((n, n), dtype=np.float32) for _ in range(2))
    matmul.matmul(a, b, out=cp.empty_like(a))


def st(n):
    u = cp.random.random((n, n), dtype=np.float32)
    stencil.heat_step(u, cp.empty_like(u), 0.2)


def lb(ny, nx):
    solid = lbm.channel(ny, nx)
    f = cp.asarray(lbm.init_f(solid, (0.05, 0.0)))
    lbm.lbm_step(f, cp.empty_like(f), cp.asarray(solid.astype(np.uint8)), 1 / 0.6, (1e-5, 0.0))


# compile first (these launches are profiled too unless skipped: ncu's --launch-skip 5)
for run, small, full in ((attn, (1, 256, 64), (16, 4096, 64)), (attn, (1, 256, 128), (16, 4096, 128)),
                         (mm, (512,), (4096,)), (st, (512,), (16384,)),
                         (lb, (64, 128), (2048, 8192))):
    run(*small)
cuda.synchronize()
for run, full in ((attn, (16, 4096, 64)), (attn, (16, 4096, 128)), (mm, (4096,)), (st, (16384,)),
                  (lb, (2048, 8192))):
    run(*full)
    cuda.synchronize()
print("probe_ncu: done")
