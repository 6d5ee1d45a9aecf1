"""Pictures of a ``cudacourse bench`` report: a roofline and each kernel's share of its ceiling.

Both take the report dictionary that ``cudacourse bench --json`` writes (``json.load`` it back),
so a notebook can draw the committed ``docs/benchmarks.json`` without a GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from .words import T


def _axes(ax: Any, figsize: tuple[float, float]) -> Any:
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _timed(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if report.get("mode") != "gpu":
        raise ValueError("this report comes from the simulator: it has no timings to plot")
    return {k: m for k, m in report.get("measurements", {}).items()
            if m.get("status") == "ok" and m.get("median_ms")}


def roofline(report: dict[str, Any], ax: Any = None) -> Any:
    """Achieved TFLOP/s against arithmetic intensity (flop per byte), under two roofs.

    Both roofs were measured in the same run: memory = the copy's bandwidth times the
    intensity, compute = cuBLAS SGEMM. A kernel left of the ridge is memory-bound: only more
    bytes per second can speed it up. Intensity counts compulsory bytes (each input read once,
    each output written once), so a kernel that re-reads memory sits lower than its point.
    """
    ax = _axes(ax, (7, 4.5))
    ceil = report.get("ceilings", {})
    bw = ceil.get("copy_gb_s")  # GB/s
    peak = ceil.get("cublas_sgemm_tflop_s")  # TFLOP/s
    points = [(m["flops"] / m["bytes"], m["tflop_s"], m["label"])
              for m in _timed(report).values()
              if m.get("flops") and m.get("bytes") and m.get("tflop_s")]
    xs = [p[0] for p in points] or [0.1, 100.0]
    lo, hi = min(xs + [0.05]) / 2, max(xs + [2000.0]) * 2
    grid = np.logspace(np.log10(lo), np.log10(hi), 200)
    if bw:
        mem = bw * grid / 1e3  # GB/s x flop/B = Gflop/s -> TFLOP/s
        roof = np.minimum(mem, peak) if peak else mem
        ax.plot(grid, roof, "k-", lw=2, label=T("roof: copy {bw:.0f} GB/s{t}", bw=bw,
                                                t=T(', cuBLAS {peak:.1f} TFLOP/s', peak=peak) if peak else ''))
        if peak:
            ax.axvline(peak * 1e3 / bw, color="0.6", ls=":", lw=1)
            ax.annotate(T("ridge"), (peak * 1e3 / bw, peak), textcoords="offset points",
                        xytext=(4, -14), fontsize=8, color="0.4")
    elif peak:
        ax.axhline(peak, color="k", lw=2, label=T("cuBLAS {peak:.1f} TFLOP/s", peak=peak))
    markers = "os^Dv<>pP*X"
    for k, (x, y, label) in enumerate(sorted(points)):
        ax.loglog(x, y, markers[k % len(markers)], ms=7, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(T("arithmetic intensity (flop per compulsory byte)"))
    ax.set_ylabel(T("achieved TFLOP/s"))
    gpu = report.get("environment", {}).get("gpu", "GPU")
    ax.set_title(T("roofline, {gpu}, {get}", gpu=gpu, get=str(report.get('date', ''))[:10]))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the points
    return ax


def ratio_bars(report: dict[str, Any], ax: Any = None) -> Any:
    """Each ratio of the report as a bar: 1.0 is the ceiling it is compared with."""
    ax = _axes(ax, (7, 4.5))
    vals = {k: v for k, v in report.get("ratios", {}).items() if "_vs_" in k}
    names = list(vals)[::-1]
    if ax.figure.get_figheight() < 0.17 * len(names) + 1:  # a label per bar, none overlapping
        ax.figure.set_figheight(0.17 * len(names) + 1)
    ax.barh(names, [vals[n] for n in names], color="tab:blue")
    ax.axvline(1.0, color="k", lw=1)
    for y, n in enumerate(names):
        ax.annotate(T("{vals:.2f}",
                      vals=vals[n]), (vals[n], y), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7)
    ax.set_xlabel(T("ratio (achieved / ceiling measured in the same run)"))
    ax.set_ylabel(T("measurement"))
    ax.tick_params(axis="y", labelsize=7)
    ax.set_title(T("share of the ceiling"))
    return ax


def plot_report(report: dict[str, Any], path: str | None = None) -> Any:
    """Roofline and ratio bars side by side; saved to ``path`` when given. Returns the figure."""
    import matplotlib.pyplot as plt

    _timed(report)  # refuses a simulator report with a clear message
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 5.5))
    roofline(report, left)
    ratio_bars(report, right)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
        plt.close(fig)
    return fig
