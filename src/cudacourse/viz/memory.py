"""Pictures for lesson 3: copy bandwidth across sizes, stream timelines, when offloading pays,
and what a launch costs."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from .. import i18n
from .words import T

_COLOURS = {"H2D": "#4c72b0", "kernel": "#55a868", "D2H": "#c44e52"}


def _axes(ax: Any, figsize: tuple[float, float]) -> Any:
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _finish_log_plot(ax: Any, xlabel: str, ylabel: str, title: str) -> Any:
    """Labels, a title, a grid at the minor ticks too (log axes span decades) and a legend
    beside the axes, never on the lines."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return ax


def plot_bandwidth(rows: Sequence[dict[str, float]], title: str = "", ax: Any = None) -> Any:
    """GB/s against copy size for pageable and pinned host memory (``bandwidth_sweep`` rows)."""
    ax = _axes(ax, (6.5, 3.8))
    sizes = [r["bytes"] for r in rows]
    # Distinct line styles and hollow markers: where the two lines coincide (small copies,
    # or the simulator, where both are NumPy copies) both stay visible.
    words = {"pageable": T("pageable"), "pinned": T("pinned")}  # the rows' keys, in words
    for label, marker, style in (("pageable", "o", "-"), ("pinned", "s", "--")):
        ax.plot(sizes, [r[label] for r in rows], marker=marker, linestyle=style,
                markerfacecolor="none", markersize=7 if label == "pinned" else 5,
                label=words[label])
    ax.set_xscale("log", base=2)
    return _finish_log_plot(ax, T("bytes per copy"), "GB/s", title or T("host-to-device copy "
                                                                     "bandwidth"))


def plot_timeline(bars: Sequence[Any], title: str = "", unit: str = "ms",
                  ax: Any = None) -> Any:
    """One row per stream, one bar per operation (``transfer.Bar``), coloured by kind."""
    ax = _axes(ax, (8, 0.7 * (1 + len({b.stream for b in bars})) + 1.2))
    streams = sorted({b.stream for b in bars})
    row = {s: k for k, s in enumerate(streams)}
    for b in bars:
        ax.barh(row[b.stream], b.end - b.start, left=b.start, height=0.6,
                color=_COLOURS.get(b.kind, "grey"), edgecolor="black", linewidth=0.5)
        if b.end - b.start > 0:
            ax.text((b.start + b.end) / 2, row[b.stream], str(b.chunk), ha="center",
                    va="center", fontsize=7, color="white")
    ax.set_yticks(range(len(streams)), [T("stream {s}", s=s) for s in streams])
    ax.invert_yaxis()
    ax.set_xlabel(T("time ({unit})", unit=unit))
    ax.set_ylabel(T("CUDA stream"))
    ax.set_title(title or T("pipeline timeline (numbers: chunk)"))
    from matplotlib.patches import Patch

    # Outside the axes, so that it never covers a bar.
    words = {"H2D": T("copy to the device"), "kernel": T("kernel"),
             "D2H": T("copy to the host")}
    ax.legend(handles=[Patch(color=c, label=words.get(k, k)) for k, c in _COLOURS.items()],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    return ax


def plot_offload(model: dict[str, Any], title: str = "", ax: Any = None,
                 break_even: float | None = None) -> Any:
    """CPU and GPU (copies included) time against arithmetic intensity (``offload_times``).

    ``break_even`` (``transfer.break_even_intensity``) marks the crossing; without it the
    first sampled intensity where the GPU wins is marked, which is only as fine as the grid.
    """
    ax = _axes(ax, (6.5, 3.8))
    x = np.asarray(model["intensity"])
    ax.loglog(x, model["cpu"], label=T("CPU"))
    ax.loglog(x, model["gpu"], label=T("GPU, copies included"))
    if break_even is None:
        wins = np.flatnonzero(np.asarray(model["gpu"]) < np.asarray(model["cpu"]))
        break_even = float(x[wins[0]]) if wins.size else None
    if break_even is not None and np.isfinite(break_even):
        ax.axvline(break_even, color="grey", linestyle="--", linewidth=1)
        ax.text(break_even, ax.get_ylim()[1], T(" GPU wins above {break_even:.1f} FLOP/byte",
                                                break_even=break_even),
                va="top", fontsize=8)
    return _finish_log_plot(ax, T("arithmetic intensity (FLOP per byte moved)"), T("seconds"),
                            title or T("when offloading pays"))


def plot_launch_costs(costs: dict[str, float], title: str = "", ax: Any = None) -> Any:
    """Horizontal bars: microseconds per launch by kind of argument (``launch_costs``)."""
    ax = _axes(ax, (7, 0.5 * len(costs) + 1.2))
    labels = list(costs)
    ax.barh(range(len(labels)), [costs[k] for k in labels], color="#8172b2")
    # A linear axis: bars compare by length, and on a log axis 4,279 us looks a tenth of
    # 6,647 us. Each bar carries its value, so the shortest still reads.
    for y, k in enumerate(labels):
        ax.annotate(T("{costs:,.1f}",
                      costs=costs[k]), (costs[k], y), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7)
    ax.set_xlim(0, max([*costs.values(), 0.0]) * 1.18 or 1.0)
    ax.set_yticks(range(len(labels)), [i18n.shown(k) for k in labels])  # words: translated
    ax.invert_yaxis()
    ax.set_xlabel(T("microseconds per launch"))
    ax.set_ylabel(T("how the kernel is launched"))
    ax.set_title(title or T("what one launch costs from Python"))
    return ax
