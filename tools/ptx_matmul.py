"""Compile lesson 4's register-blocked matmul kernels for sm_90 without a GPU: Numba typing,
NVVM, then ptxas -v. Prints, per kernel, the registers, stack frame, spills and shared memory
ptxas reports, and counts the PTX shared loads by width (ld.shared.f32 vs ld.shared.v4.f32)
and any local-memory accesses (ld.local/st.local: arrays that did not stay in registers).

Needs a CUDA toolkit with libnvvm and ptxas (here /usr/local/cuda-13.0). Run from the
project root:

    .venv/bin/python tools/ptx_matmul.py [variant ...] [--keep DIR]

With no variant it compiles every register variant; --keep DIR writes each kernel's PTX there.
"""
import os, re, subprocess, sys, tempfile

import offline_sm90  # first: GPU mode and the toolkit, without a GPU
from numba import cuda, types as nt
from cudacourse.kernels import matmul as MM

args = sys.argv[1:]
keep = None
if "--keep" in args:
    i = args.index("--keep"); keep = args[i + 1]; del args[i:i + 2]
    os.makedirs(keep, exist_ok=True)
names = args or [v for v in MM.MATMUL_VARIANTS if v not in ("naive", "tiled")]
arr2 = nt.float32[:, ::1]  # what cuda.to_device gives for C-contiguous host arrays


def ptxas(ptx, maxreg=None):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx"); open(p, "w").write(ptx)
        cmd = [offline_sm90.PTXAS, "-v", "-arch=sm_90", p, "-o", os.path.join(d, "k.o")]
        if maxreg:
            cmd[3:3] = [f"--maxrregcount={maxreg}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        out = r.stderr + r.stdout
        if r.returncode:
            return "ptxas failed: " + out[-500:]
        pats = {"regs": r"Used (\d+) registers", "stack": r"(\d+) bytes stack frame",
                "spill_st": r"(\d+) bytes spill stores", "spill_ld": r"(\d+) bytes spill loads",
                "smem": r"(\d+) bytes smem"}
        v = {key: (re.findall(pat, out) or ["?"])[0] for key, pat in pats.items()}
        return (f"regs {v['regs']}  stack {v['stack']}  spill st/ld {v['spill_st']}/{v['spill_ld']}"
                f"  smem {v['smem']}")


failed = False
for name in names:
    kern = MM._register_kernel(name)
    ptx, _ = cuda.compile_ptx(kern.py_func, (arr2, arr2, arr2), fastmath=True, cc=(9, 0))
    maxreg = getattr(kern, "targetoptions", {}).get("max_registers")  # applied by ptxas
    if keep:
        open(os.path.join(keep, f"{name}.ptx"), "w").write(ptx)
    lds = re.findall(r"ld\.shared\.(v[24]\.)?f32", ptx)
    v4, v2, f1 = lds.count("v4."), lds.count("v2."), lds.count("")
    local = len(re.findall(r"\b(?:ld|st)\.local\b", ptx))
    aligns = re.findall(r"\.shared \.align (\d+) \.b8 \S+\[(\d+)\]", ptx)
    print(f"{name:20s} {ptxas(ptx, maxreg)}" + (f" (max_registers={maxreg})" if maxreg else ""))
    print(f"{'':20s} PTX: ld.shared.v4.f32 x{v4}, ld.shared.v2.f32 x{v2}, ld.shared.f32 x{f1}, "
          f"ld/st.local x{local}; shared arrays (align, bytes): {aligns}")
    if name in MM.REGISTER_V4_CONFIGS and (v4 == 0 or local):
        print(f"{'':20s} FAIL: expected 16-byte shared loads and no local memory")
        failed = True
sys.exit(1 if failed else 0)
