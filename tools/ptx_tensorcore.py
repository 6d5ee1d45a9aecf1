"""Compile lesson 7's tensor-core kernels for sm_90 without a GPU (Numba, NVVM, ptxas -v) and
write what ptxas reports for every configuration the H200 sweep tries
(tools/gpu/tune_tensorcore.py): registers, stack, spills, shared memory, the mma.sync count of
one k-loop trip, any local-memory access in the PTX, and the blocks per SM that registers and
shared memory allow (sm_90: 65536 registers, 228 KiB of shared memory, 1 KiB of it reserved
per block, 64 warps). Rendered into docs/performance.md by tools/probe_perfdoc.py.

    .venv/bin/python tools/ptx_tensorcore.py [docs/ptxas_tensorcore.json]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import offline_sm90  # first: GPU mode and the toolkit, without a GPU
from numba import boolean, cuda, float32, int16, int32, uint32

from cudacourse.kernels import attention_mma as am, matmul_mma as mm

PATS = {"registers": r"Used (\d+) registers", "stack": r"(\d+) bytes stack frame",
        "spill_stores": r"(\d+) bytes spill stores", "spill_loads": r"(\d+) bytes spill loads",
        "static_shared": r"(\d+) bytes smem"}
MATMUL = [(128, 128, 32, 64, 32, 3), (128, 128, 32, 64, 32, 4), (128, 256, 32, 64, 64, 3),
          (128, 256, 32, 64, 64, 4), (256, 128, 32, 64, 64, 3), (128, 128, 32, 64, 64, 4),
          (128, 128, 64, 64, 32, 3), (128, 128, 32, 32, 64, 3)]
ATTENTION = {64: [(4, 64), (4, 64, 0, False, 2), (4, 32, 0, False, 2), (4, 128), (8, 64),
                  (8, 128), (4, 32)],
             128: [(4, 32, 168), (4, 32), (4, 64), (8, 64), (8, 32)]}


def ptxas(ptx: str, maxreg: int = 0) -> dict:
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [offline_sm90.PTXAS, "-v", "-arch=sm_90", src, "-o", os.path.join(d, "k.o")]
        if maxreg:
            cmd.insert(1, f"--maxrregcount={maxreg}")
        r = subprocess.run(cmd, capture_output=True, text=True)
    text = r.stderr + r.stdout
    if r.returncode:
        return {"error": text[-500:]}
    return {k: int((re.findall(p, text) or ["0"])[0]) for k, p in PATS.items()}


def ptxas_version() -> str:
    r = subprocess.run([offline_sm90.PTXAS, "--version"], capture_output=True, text=True)
    return (r.stdout.strip().splitlines() or ["?"])[-1]


def occupancy(res: dict, threads: int, shared: int) -> dict:
    per_warp = -(-max(res["registers"], 1) * 32 // 256) * 256  # allocated 256 at a time
    regs = (65536 // per_warp) // (threads // 32)
    smem = (228 * 1024) // (shared + 1024) if shared else 32
    blocks = min(regs, smem, 64 * 32 // threads)
    return {"blocks_per_sm": blocks, "warps_per_sm": blocks * threads // 32,
            "limited_by": "registers" if regs <= smem else "shared memory"}


def main() -> None:
    out = {"what": "ptxas -v -arch=sm_90 on the PTX Numba generates for each configuration "
                   "(bfloat16 output); compiled offline, no GPU", "ptxas": ptxas_version(),
           "matmul": {}, "attention": {}}
    for c in MATMUL:
        cfg = mm.MmaConfig(*c)
        sig = (int16[:, ::1], int16[:, ::1], uint32[:, ::1])
        ptx, _ = cuda.compile_ptx(mm.mma_kernel(cfg, True).py_func, sig, cc=(9, 0))
        res = ptxas(ptx, cfg.max_registers)
        res.update(shared=cfg.shared_bytes(), threads=cfg.threads, dynamic=cfg.dynamic,
                   mma_per_k_slice=ptx.count("mma.sync"), local_in_ptx="ld.local" in ptx)
        if "error" not in res:
            res.update(occupancy(res, cfg.threads, cfg.shared_bytes()))
        out["matmul"][str(c)] = res
        print("matmul", c, res, flush=True)
    for d, cfgs in ATTENTION.items():
        for c in cfgs:
            cfg = am.MmaAttentionConfig(*c)
            sig = (int16[:, ::1],) * 3 + (uint32[:, ::1], int32, int32, float32, boolean)
            kern = am.attention_kernel(d, cfg, True)
            ptx, _ = cuda.compile_ptx(kern.py_func, sig, cc=(9, 0))
            res = ptxas(ptx, cfg.max_registers)
            res.update(shared=cfg.shared_bytes(d), threads=cfg.threads, dynamic=kern.dynamic,
                       mma_per_key_tile=ptx.count("mma.sync"), local_in_ptx="ld.local" in ptx)
            if "error" not in res:
                res.update(occupancy(res, cfg.threads, cfg.shared_bytes(d)))
            out["attention"][f"d{d} {c}"] = res
            print("attention", d, c, res, flush=True)
    path = sys.argv[1] if len(sys.argv) > 1 else "docs/ptxas_tensorcore.json"
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
