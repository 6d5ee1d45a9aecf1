"""Pictures for lesson 2: who handles which element, how threads form warps, occupancy."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..kernels.indexing import ThreadMap
from ..kernels.warps import WARP_SIZE, warp_layout_ref
from .. import i18n
from .words import T


def _axes(ax: Any, figsize: tuple[float, float]) -> Any:
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _block_colours(n: int) -> Any:
    from matplotlib.colors import ListedColormap
    import matplotlib

    base = matplotlib.colormaps["tab20"].colors
    return ListedColormap([base[k % len(base)] for k in range(max(n, 1))])


def plot_thread_map(tmap: ThreadMap, block: tuple[int, int], ax: Any = None,
                    label: str = "thread") -> Any:
    """An image of a 2D array: one colour per block, each cell labelled with the
    ``(threadIdx.x, threadIdx.y)`` (``label="thread"``) or the warp (``label="warp"``) that
    handles it. Thin lines mark block edges."""
    rows, cols = tmap.block_x.shape
    grid_x = int(tmap.block_x.max()) + 1
    ids = tmap.block_id(grid_x)
    ax = _axes(ax, (min(0.55 * cols + 1.5, 14), min(0.45 * rows + 1.2, 10)))
    ax.imshow(ids, cmap=_block_colours(int(ids.max()) + 1), vmin=-0.5,
              vmax=int(ids.max()) + 0.5, interpolation="nearest")
    small = rows * cols <= 24 * 32
    if small:
        warp = tmap.warp(block[0])
        for r in range(rows):
            for c in range(cols):
                text = (f"{tmap.thread_x[r, c]},{tmap.thread_y[r, c]}" if label == "thread"
                        else f"w{warp[r, c]}")
                ax.text(c, r, text, ha="center", va="center", fontsize=6.5)
    bx, by = block
    for c in range(bx, cols, bx):
        ax.axvline(c - 0.5, color="black", lw=1.2)
    for r in range(by, rows, by):
        ax.axhline(r - 0.5, color="black", lw=1.2)
    ax.set_xlabel(T("column = x (cuda.grid(2)[0])"))
    ax.set_ylabel(T("row = y (cuda.grid(2)[1])"))
    what = "(threadIdx.x, threadIdx.y)" if label == "thread" else T("warp inside its block")
    ax.set_title(T("{rows}x{cols} array, blocks of {bx}x{by}: colour = block, text = {what}",
                   rows=rows, cols=cols, bx=bx, by=by,
                   what=what) if small else T("{rows}x{cols} array, colour = block",
                                                  rows=rows, cols=cols))
    return ax


def plot_warps(block: tuple[int, int], ax: Any = None) -> Any:
    """A 2D block's threads coloured by warp, each labelled with its lane (0..31)."""
    warp, lane = warp_layout_ref(block)
    by, bx = warp.shape
    ax = _axes(ax, (min(0.5 * bx + 1.5, 14), min(0.45 * by + 1.2, 10)))
    ax.imshow(warp, cmap=_block_colours(int(warp.max()) + 1), vmin=-0.5,
              vmax=int(warp.max()) + 0.5, interpolation="nearest")
    for y in range(by):
        for x in range(bx):
            ax.text(x, y, str(lane[y, x]), ha="center", va="center", fontsize=7)
    ax.set_xlabel(T("threadIdx.x"))
    ax.set_ylabel(T("threadIdx.y"))
    ax.set_title(T("block {bx}x{by}: colour = warp ({warp_size} consecutive linear ids x + "
                   "blockDim.x*y), text = lane", bx=bx, by=by, warp_size=WARP_SIZE))
    return ax


def plot_coverage(counts: dict[str, np.ndarray], ax: Any = None, title: str = "") -> Any:
    """How many threads handled each element, one line per launch variant."""
    ax = _axes(ax, (8, 2.8))
    # Offset and styled apart, so that two variants with the same count stay visible; the
    # legend sits above the axes, never on the data.
    styles = ("-", "--", ":", "-.")
    for k, (label, c) in enumerate(counts.items()):
        ax.step(np.arange(c.size), c + 0.08 * k, where="mid", label=i18n.shown(label),
                linestyle=styles[k % len(styles)], linewidth=1.6)
    ax.set_xlabel(T("element index"))
    ax.set_ylabel(T("threads that handled it"))
    ax.set_yticks([0, 1, 2])
    ax.set_ylim(-0.3, 2.3)
    ax.set_title(title or T("threads per element, per launch"))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)  # beside the data
    return ax


def plot_passes(passes: dict[str, np.ndarray], ax: Any = None, title: str = "") -> Any:
    """Branch paths each warp executes, per pattern (a model: 2 means both sides ran)."""
    ax = _axes(ax, (6, 2.8))
    labels = list(passes)
    means = [float(np.mean(p)) for p in passes.values()]
    ax.bar([i18n.shown(k) for k in labels], means,  # the patterns' names, translated
           color=["#c0504d", "#4f81bd", "#9bbb59"][:len(labels)])
    ax.set_ylabel(T("paths run per warp (mean)"))
    ax.set_xlabel(T("branch pattern"))
    ax.set_title(title or T("branch paths per warp (model)"))
    ax.set_ylim(0, 2.2)
    for k, m in enumerate(means):
        ax.text(k, m + 0.05, f"{m:.2f}", ha="center")
    return ax


def plot_occupancy(curves: dict[str, Sequence[Any]], ax: Any = None, title: str = "") -> Any:
    """Occupancy against block size; ``curves`` maps a label to a list of ``Occupancy``."""
    ax = _axes(ax, (8, 3.4))
    # Curves can coincide (a kernel at 32 registers is the 32-register curve): distinct line
    # styles and hollow markers keep every one visible.
    styles = (("-", "."), ("--", "o"), (":", "s"), ("-.", "^"))
    for k, (label, occ) in enumerate(curves.items()):
        style, marker = styles[k % len(styles)]
        ax.plot([o.threads_per_block for o in occ], [100 * o.occupancy for o in occ],
                linestyle=style, marker=marker, markerfacecolor="none", markersize=4 + k,
                label=label)
    ax.set_xlabel(T("threads per block"))
    ax.set_ylabel(T("occupancy (% of 64 warps)"))
    ax.set_ylim(0, 105)
    ax.set_xticks([32, 128, 256, 384, 512, 640, 768, 896, 1024])
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the data
    ax.set_title(title or T("occupancy per block size, compute capability 9.0 SM"))
    ax.grid(alpha=0.3)
    return ax


def plot_block_sweep(rows: list[dict[str, float]], ax: Any = None, title: str = "") -> Any:
    """Measured bandwidth per block size (from ``occupancy.block_size_sweep``)."""
    ax = _axes(ax, (6, 3))
    sizes = [r["threads_per_block"] for r in rows]
    ax.plot(sizes, [r["gb_per_s"] for r in rows], marker="o")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_xlabel(T("threads per block"))
    ax.set_ylabel(T("GB/s (read + write)"))
    ax.set_title(title or T("bandwidth per block size"))
    ax.grid(alpha=0.3)
    return ax
