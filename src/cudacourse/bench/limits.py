"""Issue 35's goals beside the figures, and the profiler's evidence of what stops a kernel.

``limits(report)`` gives, for each goal of issue 35 ("Fast where users call it"), the bench's
ratio, the goal, whether it is met, and, where it is not, Nsight Compute's counters of the
kernel that ratio timed (one full-size launch of that kernel in the same GPU run, from the
committed CSVs ``docs/sweeps/ncu_<gpu>_<date>_<family>.csv``), with a sentence that names the
limit from those counters. ``tools/bench_limits.py`` writes it into ``docs/benchmarks.json``
as ``limits``; ``report.to_markdown`` renders it; ``tools/probe_perfdoc.py`` reads it for
``docs/performance.md``. The kernel each goal profiles is the module's present choice (its
label in the run's manifest is built from the constants), so a moved constant without a new
profile fails loudly instead of citing another kernel's counters.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

SWEEPS = Path(__file__).resolve().parents[3] / "docs" / "sweeps"
NCU_RUN = "ncu_h200_2026-12-02"  # the run whose CSVs the committed benchmarks cite

# ratio name -> goal (issue 35's table), what the ratio divides (for the sentence)
GOALS: dict[str, float] = {
    "transpose_vs_copy": 0.97,
    "matmul_best_vs_cublas": 0.75,
    "attention_fused_vs_torch_eager": 1.2,
    "attention_fused_vs_sdpa_f32": 0.85,
    "attention_fused_vs_sdpa_f32_causal": 0.85,
    "attention_fused_vs_torch_eager_d128": 1.0,
    "attention_fused_vs_sdpa_f32_d128": 0.75,
    "attention_fused_vs_torch_eager_d128_s16384": 1.0,
    "stencil_vs_copy": 0.88,
    "lbm_vs_copy": 0.85,
    "attention_triton_bf16_vs_sdpa_bf16": 0.8,
    "attention_triton_bf16_vs_sdpa_bf16_causal": 0.8,
    "attention_triton_bf16_vs_sdpa_bf16_d128": 0.8,
}

# (section, metric) -> short name; "Memory Throughput" is both a percentage (Speed Of Light)
# and bytes per second (Memory Workload Analysis)
METRICS = {
    ("GPU Speed Of Light Throughput", "Duration"): "duration_ns",
    ("GPU Speed Of Light Throughput", "SM Frequency"): "sm_hz",
    ("GPU Speed Of Light Throughput", "Compute (SM) Throughput"): "sm_pct",
    ("GPU Speed Of Light Throughput", "DRAM Throughput"): "dram_pct",
    ("GPU Speed Of Light Throughput", "L1/TEX Cache Throughput"): "l1_pct",
    ("GPU Speed Of Light Throughput", "L2 Cache Throughput"): "l2_pct",
    ("Memory Workload Analysis", "Memory Throughput"): "dram_bytes_per_s",
    ("Memory Workload Analysis", "L1/TEX Hit Rate"): "l1_hit_pct",
    ("Memory Workload Analysis", "L2 Hit Rate"): "l2_hit_pct",
    ("Memory Workload Analysis", "Local Memory Spilling Requests"): "spill_requests",
    ("Launch Statistics", "Registers Per Thread"): "registers",
    ("Launch Statistics", "Dynamic Shared Memory Per Block"): "dyn_shared_bytes",
    ("Launch Statistics", "Static Shared Memory Per Block"): "static_shared_bytes",
    ("Launch Statistics", "Waves Per SM"): "waves",
    ("Occupancy", "Block Limit Registers"): "blocks_by_registers",
    ("Occupancy", "Block Limit Shared Mem"): "blocks_by_shared",
    ("Occupancy", "Theoretical Occupancy"): "theoretical_occupancy_pct",
    ("Occupancy", "Achieved Occupancy"): "occupancy_pct",
    ("Occupancy", "Achieved Active Warps Per SM"): "warps_per_sm",
    ("Scheduler Statistics", "Active Warps Per Scheduler"): "warps_per_scheduler",
    ("Scheduler Statistics", "Eligible Warps Per Scheduler"): "eligible_per_scheduler",
    ("Scheduler Statistics", "No Eligible"): "no_eligible_pct",
    ("Compute Workload Analysis", "Issue Slots Busy"): "issue_pct",
    ("Warp State Statistics", "Warp Cycles Per Issued Instruction"): "cycles_per_issue",
    ("Instruction Statistics", "Issued Instructions"): "instructions",
}
# numbers ncu states only in its rules' sentences
RULES = {
    "l1tex_stall_cycles": r"spends ([\d.]+) cycles being stalled waiting for a scoreboard "
                          r"dependency on a L1TEX",
    "top_pipe_pct": r"is the highest-utilized pipeline \(([\d.]+)%\)",
    "fused_fp32": r"executes (\d+) fused and \d+ non-fused FP32",
    "nonfused_fp32": r"executes \d+ fused and (\d+) non-fused FP32",
    "fuse_gain_pct": r"FP32 performance could be increased by up to (\d+)%",
}
PIPE = r"(\w+) is the highest-utilized pipeline"


def ncu_launches(path: Path, labels: list[str]) -> dict[str, dict[str, Any]]:
    """label -> counters of each launch of one ncu CSV (``--csv --page details``); ``labels``
    names the launches in the order of their IDs (the run's manifest)."""
    rows = [r for r in csv.reader(path.open()) if len(r) > 14]
    head = rows[0]
    col = {n: i for i, n in enumerate(head)}
    by_id: dict[int, dict[str, Any]] = {}
    for r in rows[1:]:
        d = by_id.setdefault(int(r[col["ID"]]), {"block": r[col["Block Size"]],
                                                  "grid": r[col["Grid Size"]]})
        name = METRICS.get((r[col["Section Name"]], r[col["Metric Name"]]))
        if name and r[col["Metric Value"]]:
            d[name] = float(r[col["Metric Value"]].replace(",", ""))
        rule = r[col["Rule Description"]] if len(r) > col["Rule Description"] else ""
        for key, pattern in RULES.items():
            hit = re.search(pattern, rule)
            if hit:
                d[key] = float(hit[1])
        pipe = re.search(PIPE, rule)
        if pipe:
            d["top_pipe"] = pipe[1]
    if len(by_id) != len(labels):
        raise ValueError(f"{path.name}: {len(by_id)} launches, the manifest names {len(labels)}")
    return {label: by_id[i] for i, label in enumerate(labels)}


def run_launches(run: str = NCU_RUN) -> dict[str, dict[str, Any]]:
    """Every full-size launch of one ncu run, by its manifest label."""
    manifest = json.loads((SWEEPS / f"{run}_manifest.json").read_text())["launches"]
    out: dict[str, dict[str, Any]] = {}
    for family, labels in manifest.items():
        for label, counters in ncu_launches(SWEEPS / f"{run}_{family}.csv", labels).items():
            if not label.startswith("compile:"):
                out[label] = {"family": family, **counters}
    return out


def profiled_label(ratio: str) -> str | None:
    """The manifest label of the launch that ``ratio``'s kernel is: the module's choice."""
    from ..kernels import attention as A
    from ..kernels import lbm, matmul, stencil
    from ..kernels import transpose as T

    if ratio.startswith("attention_triton"):
        return None  # Triton's kernel: not among the profiled Numba kernels
    if ratio.startswith("attention_fused"):
        d = 128 if "_d128" in ratio else 64
        return f"attention d={d} {A.FAST_GPU_CONFIGS[d]}"
    return {"transpose_vs_copy": f"transpose {T.BEST.name}",
            "matmul_best_vs_cublas": f"matmul {matmul.BEST}",
            "stencil_vs_copy": f"stencil {stencil.BEST[0]} {tuple(stencil.BEST[1])}",
            "lbm_vs_copy": f"lbm {lbm.BEST_KERNEL} {tuple(lbm.DEFAULT_BLOCK)}"}.get(ratio)


def floor_bytes(ratio: str, report: dict[str, Any]) -> float | None:
    """The compulsory DRAM bytes of the memory-bound kernel ``ratio`` times: every value
    read once and written once (the LBM also reads its 1-byte mask once)."""
    m = report["measurements"]
    if ratio == "lbm_vs_copy":  # 72 bytes of populations a node, counted by the bench
        nodes = m["lbm"]["bytes"] / 72
        return m["lbm"]["bytes"] + nodes
    name = {"stencil_vs_copy": "stencil", "transpose_vs_copy": "transpose"}.get(ratio)
    return m[name]["bytes"] if name else None


def profiled_flops(label: str) -> float | None:
    """Flops of the profiled launch (the full sizes of tools/probe_candidates.py)."""
    from ..kernels.attention import attention_flops

    if label.startswith("matmul"):
        return 2.0 * 4096 ** 3
    if label.startswith("attention d="):
        return attention_flops(16, 4096, int(label.split()[1][2:]))
    return None


def explain(ratio: str, n: dict[str, Any], report: dict[str, Any],
            label: str = "") -> str:
    """One sentence naming the limit, every number from ``n`` (ncu) or the report."""
    occ = (f"{n['occupancy_pct']:.1f}% occupancy ({n['warps_per_sm']:.0f} warps/SM): "
           f"{n['registers']:.0f} registers/thread allow {n['blocks_by_registers']:.0f} "
           f"block(s)/SM, shared memory {n['blocks_by_shared']:.0f}")
    issue = (f"issue slots {n['issue_pct']:.0f}% busy, {n['no_eligible_pct']:.0f}% of cycles "
             f"with no eligible warp ({n['eligible_per_scheduler']:.2f} eligible of "
             f"{n['warps_per_scheduler']:.2f} per scheduler)")
    floor = floor_bytes(ratio, report)
    if floor:
        moved = n["dram_bytes_per_s"] * n["duration_ns"] * 1e-9
        peak = n["dram_bytes_per_s"] / (n["dram_pct"] / 100)
        copy = report["ceilings"]["copy_gb_s"] * 1e9
        stall = (f"; {n['l1tex_stall_cycles']:.1f} of the {n['cycles_per_issue']:.1f} cycles "
                 "between a warp's instructions wait on global loads (L1TEX scoreboard)"
                 if "l1tex_stall_cycles" in n else
                 f"; {n['cycles_per_issue']:.1f} cycles between a warp's instructions")
        return (f"memory: DRAM moved {moved / 1e9:.2f} GB, {moved / floor:.2f} of the "
                f"compulsory {floor / 1e9:.2f} GB, at {n['dram_pct']:.0f}% of DRAM peak "
                f"({peak / 1e12:.2f} TB/s; the copy ceiling reaches {copy / peak:.0%} of it); "
                f"L2 {n['l2_pct']:.0f}% busy; {occ}{stall}; {issue}")
    fp = (f"; {n['fused_fp32']:.3g} fused and {n['nonfused_fp32']:.3g} non-fused FP32 "
          "instructions" if "fused_fp32" in n else "")
    pipe = (f"; busiest pipe {n['top_pipe']} {n['top_pipe_pct']:.0f}%" if "top_pipe" in n else "")
    flops = profiled_flops(label)
    per_fma = (f" ({n['instructions'] / (flops / 64):.2f} per warp-wide FMA that its "
               f"{flops:.3g} flops need)" if flops else "")
    return (f"issue and latency: {occ}; {issue}; {n['instructions']:.3g} instructions issued"
            f"{per_fma}{fp}{pipe}; DRAM {n['dram_pct']:.1f}%, L1/shared {n['l1_pct']:.0f}%, "
            f"{n['waves']:.2f} waves of blocks")


COUNTERS = ("duration_ns", "registers", "occupancy_pct", "warps_per_sm", "blocks_by_registers",
            "blocks_by_shared", "issue_pct", "cycles_per_issue", "no_eligible_pct",
            "eligible_per_scheduler", "dram_pct", "l2_pct", "l1_pct", "dram_bytes_per_s",
            "instructions", "l1tex_stall_cycles", "top_pipe", "top_pipe_pct", "fused_fp32",
            "nonfused_fp32", "waves", "spill_requests")


def limits(report: dict[str, Any], run: str = NCU_RUN) -> dict[str, Any]:
    """The ``limits`` section: per goal, the figure, the goal, met or not, and, where not,
    the counters and the sentence naming the limit."""
    launches = run_launches(run)
    goals: dict[str, Any] = {}
    for ratio, goal in GOALS.items():
        value = report["ratios"].get(ratio)
        entry: dict[str, Any] = {"value": value, "goal": goal,
                                 "met": value is not None and value >= goal}
        label = profiled_label(ratio)
        if not entry["met"]:
            if label is None:
                entry["limit"] = ("not profiled: Triton's kernel was outside this run's "
                                  "Nsight Compute launches")
            else:
                n = launches[label]  # KeyError: the module's choice was not profiled
                entry["kernel"] = label
                entry["ncu"] = {k: n[k] for k in COUNTERS if k in n}
                entry["limit"] = explain(ratio, n, report, label)
        goals[ratio] = entry
    return {"issue": 35, "ncu_run": run,
            "ncu_files": [f"docs/sweeps/{run}_{f}.csv" for f in
                          json.loads((SWEEPS / f"{run}_manifest.json").read_text())["launches"]],
            "goals": goals}
