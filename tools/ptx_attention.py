"""Compile lesson 5's kernels for sm_90 without a GPU: Numba typing, NVVM, then ptxas -v.

Needs a CUDA toolkit with libnvvm and ptxas (here /usr/local/cuda-13.0). Prints registers,
stack frame and spills per kernel: a kernel whose small local arrays were not kept in
registers shows a stack frame. Run from the project root:

    .venv/bin/python tools/ptx_attention.py [fast] [flash] [softmax] [checks]

Caution: on the H200 (2026-12-01) Numba's own compile of the same kernels sometimes used
far more registers than ptxas reports here (the "fast" 64 x 32 x 4 x 4 tile: 243 there,
121 here; 128 x 32 x 4 x 4 with prefetch: 211 there, 201 here), so read occupancy from
tools/probe_attention.py's GPU figures, and use this for spills and 16-byte loads.
"""
import os, re, subprocess, sys, tempfile

import offline_sm90  # first: GPU mode and the toolkit, without a GPU
from numba import cuda, types as nt
from cudacourse.kernels import attention as A, softmax as SM
arr3 = nt.float32[:, :, ::1]
arr2 = nt.float32[:, ::1]
def ptxas(ptx, name):
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "k.ptx"); open(p, "w").write(ptx)
        r = subprocess.run([offline_sm90.PTXAS, "-v", "-arch=sm_90", p, "-o", os.path.join(d, "k.o")], capture_output=True, text=True)
        out = r.stderr + r.stdout
        regs = re.findall(r"Used (\d+) registers", out); spill = re.findall(r"(\d+) bytes spill stores", out)
        stack = re.findall(r"(\d+) bytes stack frame", out); smem = re.findall(r"(\d+) bytes smem", out)
        print(f"{name}: regs {regs} stack {stack} spill-stores {spill} smem {smem}", "" if r.returncode == 0 else out[-500:])
which = sys.argv[1:] or ["fast", "flash", "softmax", "checks"]
if "fast" in which:
    sig = (arr3, arr3, arr3, arr3, nt.float32, nt.boolean, nt.int32, nt.float32, nt.float32)
    for d, cfg in sorted(A.FAST_GPU_CONFIGS.items()):
        for cap in (False, True):
            k = A._make_fast_kernel(d, cfg, True, cap)
            ptx, _ = cuda.compile_ptx(k.py_func, sig, fastmath=True, cc=(9, 0))
            v4 = ptx.count("ld.shared.v4.f32")
            ptxas(ptx, f"fast d={d} {cfg} softcap={cap} smem={cfg.shared_bytes(d)} "
                       f"ld.shared.v4={v4}")
if "flash" in which:
    cands = {64: [(64, 32, 4, 4), (64, 32, 8, 4), (64, 16, 4, 2), (64, 32, 4, 8), (64, 32, 2, 4), (32, 32, 2, 4), (64, 16, 8, 2)],
             32: [(64, 64, 4, 8), (64, 32, 4, 4), (64, 64, 8, 8)], 128: [(32, 16, 2, 2), (16, 32, 2, 4), (32, 16, 4, 2)], 16: [(64, 64, 4, 8)]}
    for d, cs in cands.items():
        for c in cs:
            for sh in (True, False) if (d, c) == (64, (64, 32, 4, 4)) else (True,):
                k = A._make_flash_kernel(d, A.FlashConfig(*c), sh)
                ptx, _ = cuda.compile_ptx(k.py_func, (arr3, arr3, arr3, arr3, nt.float32, nt.boolean), fastmath=True, cc=(9, 0))
                ptxas(ptx, f"flash d={d} {c} shfl={sh}")
if "softmax" in which:
    for t in (128, 256):
        for sh in (True, False):
            k = SM._make_softmax_kernel(t, sh)
            ptx, _ = cuda.compile_ptx(k.py_func, (arr2, arr2, nt.float32), fastmath=True, cc=(9, 0))
            ptxas(ptx, f"softmax t={t} shfl={sh}")
if "checks" in which:
    import math
    import cudacourse.check.attention as CA

    @cuda.jit(device=True)
    def upd(m, l, acc, s, v):
        m_new = max(m, s)
        a = math.exp(m - m_new)
        p = math.exp(s - m_new)
        return m_new, l * a + p, acc * a + p * v
    a1 = nt.float32[::1]
    ptx, _ = cuda.compile_ptx(CA._step_kernel(upd).py_func, (a1,) * 8, cc=(9, 0))
    ptxas(ptx, "check step kernel")
    ptx, _ = cuda.compile_ptx(CA._stream_kernel(upd).py_func, (arr2, arr2, a1), cc=(9, 0))
    ptxas(ptx, "check stream kernel")
