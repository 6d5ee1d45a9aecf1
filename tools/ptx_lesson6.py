"""Compile lesson 6's kernels (the fused LBM step, the heat stencils) for sm_90 without a
GPU and print what ptxas reports (registers, spills, shared memory), plus any float64
arithmetic left in the PTX (it should be float32 throughout). From the project root:

    .venv/bin/python tools/ptx_lesson6.py
"""
import os, re, subprocess, sys, tempfile

import offline_sm90  # first: GPU mode and the toolkit, without a GPU
from numba import cuda, types as nt
from cudacourse.kernels import lbm, stencil


def ptxas(ptx):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx")
        open(p, "w").write(ptx)
        r = subprocess.run([offline_sm90.PTXAS, "-v", "-arch=sm_90", p, "-o",
                            os.path.join(d, "k.o")], capture_output=True, text=True)
        out = r.stderr + r.stdout
        if r.returncode:
            return "ptxas failed: " + out[-500:]
        pats = {"regs": r"Used (\d+) registers", "spill": r"(\d+) bytes spill stores",
                "smem": r"(\d+) bytes smem"}
        v = {k: (re.findall(pat, out) or ["0"])[0] for k, pat in pats.items()}
        return f"regs {v['regs']}  spill stores {v['spill']}  smem {v['smem']}"


f3 = nt.float32[:, :, ::1]
m2 = nt.uint8[:, ::1]
a2 = nt.float32[:, ::1]
f32, i32 = nt.float32, nt.int32
kernels = [("lbm._lbm_fused", lbm._lbm_fused, (f3, f3, m2, f32, f32, f32, f32, i32)),
           ("stencil._heat_naive", stencil._heat_naive, (a2, a2, f32))]
for cfg in ((32, 8, 1), (32, 8, 4), (64, 4, 4), (128, 2, 8)):
    kernels.append((f"stencil tiled {cfg}", stencil.tiled_kernel(*cfg), (a2, a2, f32)))
for cfg in ((128, 1, 8), (64, 4, 8), (128, 1, 16), (256, 1, 8)):
    kernels.append((f"stencil rows {cfg}", stencil.rows_kernel(*cfg), (a2, a2, f32)))
bad = False
for name, k, sig in kernels:
    ptx, _ = cuda.compile_ptx(k.py_func, sig, cc=(9, 0))
    f64 = len(re.findall(r"\.f64\b", ptx))
    body = [ln for ln in ptx.splitlines() if ln.startswith("\t")
            and not ln.strip().startswith(("//", ".", ")"))]
    loads = sum("ld.global" in ln for ln in body)
    div = sum(bool(re.search(r"\b(div|rem)\.", ln)) for ln in body)
    print(f"{name:26s} {ptxas(ptx)}  PTX {len(body)} (ld.global {loads}, div/rem {div})  "
          f"f64 instructions: {f64}")
    bad |= f64 > 0
sys.exit(1 if bad else 0)
