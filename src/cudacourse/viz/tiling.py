"""Plots for lesson 4: global reads saved by tiles, the roofline, shared-memory banks."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from .words import T

BANKS = 32


def matmul_intensity(variant_tile: tuple[int, int] | None) -> float:
    """FLOP per byte of global traffic of a matmul that stages bm x bn output tiles
    (None: one thread per output, every operand from global memory)."""
    if variant_tile is None:
        return 2 / (2 * 4)  # one multiply-add per two float32 loads
    bm, bn = variant_tile
    # Per k step a bm x bn tile reads bm + bn floats and does 2 * bm * bn FLOP.
    return 2 * bm * bn / (4 * (bm + bn))


def reads_per_element(n: int, tiles: Sequence[int]) -> dict[str, float]:
    """How many times each element of A is read from global memory in an n x n product."""
    out = {"naive": float(n)}
    for t in tiles:
        out[T("{t}x{t} tiles", t=t)] = float(np.ceil(n / t))
    return out


def plot_reads(n: int = 4096, tiles: Sequence[int] = (16, 32, 64, 128)):
    """Bar chart: global reads of each A element, naive vs tiled."""
    import matplotlib.pyplot as plt

    data = reads_per_element(n, tiles)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    # Horizontal bars: the labels (Japanese ones are wide) never collide; a linear axis, so
    # the lengths compare, with each value written beside its bar.
    names = list(data)[::-1]
    ax.barh(names, [data[k] for k in names],
            color=["#1a7f37"] * len(tiles) + ["#b35900"])
    ax.set_xlim(0, max(data.values()) * 1.15)
    ax.set_xlabel(T("reads of each element of A"))
    ax.set_ylabel(T("kernel"))
    ax.set_title(T("{n} x {n} matmul: each tile is loaded once, reused by the block", n=n))
    for i, k in enumerate(names):
        ax.annotate(T("{data:,.0f}",
                      data=data[k]), (data[k], i), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=8)
    fig.tight_layout()
    return fig


def plot_roofline(points: dict[str, tuple[float, float]], peak_tflops: float,
                  bandwidth_tbps: float, title: str = ""):
    """Roofline: attainable TFLOP/s = min(peak, intensity x bandwidth), and each kernel
    as (intensity FLOP/byte, achieved TFLOP/s)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    x = np.logspace(-1.5, 3, 200)
    ax.plot(x, np.minimum(peak_tflops, x * bandwidth_tbps), "k-", lw=1.5,
            label=T("roof: {bandwidth_tbps:.2g} TB/s, {peak_tflops:.3g} TFLOP/s",
                    bandwidth_tbps=bandwidth_tbps, peak_tflops=peak_tflops))
    for name, (ai, tf) in points.items():
        ax.plot([ai], [tf], "o", ms=8, label=T("{name}: {tf:.3g} TFLOP/s", name=name, tf=tf))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(T("arithmetic intensity (FLOP per byte of global traffic)"))
    ax.set_ylabel(T("TFLOP/s"))
    ax.set_title(title or T("roofline"))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the points
    fig.tight_layout()
    return fig


def bank_map(pad: int, tile: int = 32) -> np.ndarray:
    """The bank of each element of a tile x (tile + pad) float32 shared array."""
    cols = tile + pad
    idx = np.arange(tile * cols).reshape(tile, cols)
    return (idx % BANKS)[:, :tile]


def plot_banks(pads: Sequence[int] = (0, 1), tile: int = 32):
    """For each padding, the banks a warp touches when it reads one column of the tile."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(pads), figsize=(4 * len(pads), 3.6))
    for ax, pad in zip(np.atleast_1d(axes), pads):
        banks = bank_map(pad, tile)
        ax.imshow(banks, cmap="twilight", interpolation="nearest")
        ax.add_patch(plt.Rectangle((-0.5, -0.5), 1, tile, fill=False, ec="red", lw=2))
        distinct = len(set(banks[:, 0]))
        ax.set_title(T("pad {pad}: column 0 spans {distinct} bank(s)\n"
                       "({tile_over_distinct}-way conflict)", pad=pad, distinct=distinct,
                       tile_over_distinct=tile // distinct) if distinct < tile else
                     T("pad {pad}: column 0 spans {distinct} banks\n(no conflict)", pad=pad,
                       distinct=distinct), fontsize=9)
        ax.set_xlabel(T("column"))
        ax.set_ylabel(T("row"))
    fig.suptitle(T("bank of each element (colour); red: what one warp reads"), fontsize=9)
    fig.tight_layout()
    return fig


def plot_bandwidth(results: dict[str, float], ceiling: float, unit: str = "GB/s",
                   title: str = ""):
    """Horizontal bars of achieved bandwidth with the copy ceiling as a line."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.5 * len(results) + 1.4))
    names = list(results)
    ax.barh(names, [results[k] for k in names], color="#1f6feb")
    ax.axvline(ceiling, color="k", ls="--", label=T("device copy {ceiling:.3g} {unit}",
                                                    ceiling=ceiling, unit=unit))
    for y, k in enumerate(names):  # the value, so that a short bar still reads
        ax.annotate(T("{results:.3g}", results=results[k]), (results[k], y), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=7)
    ax.set_xlim(0, max([*results.values(), ceiling]) * 1.15)
    ax.set_xlabel(T("bandwidth ({unit})", unit=unit))
    ax.set_ylabel(T("kernel"))
    ax.set_title(title or T("bandwidth against the device copy"))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig
