"""Plots for lesson 5: memory of unfused vs fused attention, timings, the online softmax."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..kernels.attention import extra_memory_bytes
from .. import i18n
from .words import T

GIB = 2**30


def _axes(ax: Any) -> Any:
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.6))
    return ax


def plot_memory_model(seqs: Sequence[int], batch_heads: int = 16, head_dim: int = 64,
                      device_gib: float | None = 139.8, ax: Any = None) -> Any:
    """Extra device memory (model) of unfused and fused attention against sequence length."""
    ax = _axes(ax)
    seqs = np.asarray(seqs)
    unf = [extra_memory_bytes(batch_heads, int(s), head_dim, "unfused") / GIB for s in seqs]
    fus = [extra_memory_bytes(batch_heads, int(s), head_dim, "fused") / GIB for s in seqs]
    ax.loglog(seqs, unf, "o-", label=T("unfused: scores S x S per head + output"))
    ax.loglog(seqs, fus, "s-", label=T("fused: output only"))
    ax.axhline(0.25, color="grey", ls=":", label=T("0.25 GiB"))
    if device_gib:
        ax.axhline(device_gib, color="red", ls="--", label=T("H200 memory ({device_gib:g} GiB)",
                                                             device_gib=device_gib))
    ax.set_xscale("log", base=2)
    ax.set_xlabel(T("sequence length S"))
    ax.set_ylabel(T("extra device memory (GiB)"))
    ax.set_title(T("{batch_heads} heads, head_dim {head_dim}, float32", batch_heads=batch_heads,
                   head_dim=head_dim))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def plot_timings(seqs: Sequence[int], times_ms: dict[str, Sequence[float]],
                 ax: Any = None, title: str = "") -> Any:
    """Median milliseconds per call against sequence length, one line per method."""
    ax = _axes(ax)
    for label, ms in times_ms.items():
        ax.loglog(seqs, ms, "o-", label=i18n.shown(label))  # a word label: translated
    ax.set_xscale("log", base=2)
    ax.set_xlabel(T("sequence length S"))
    ax.set_ylabel(T("time per call (ms)"))
    ax.set_title(title or T("attention: time per call"))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return ax


def plot_online_softmax(scores: Sequence[float], ax: Any = None) -> Any:
    """One row streamed score by score: the running max m and the running sum l."""
    ax = _axes(ax)
    s = np.asarray(scores, dtype=np.float64)
    m = np.maximum.accumulate(s)
    l = np.array([np.exp(s[:i + 1] - m[i]).sum() for i in range(s.size)])
    steps = np.arange(1, s.size + 1)
    ax.plot(steps, s, ".", color="grey", label=T("score s_j"))
    ax.step(steps, m, where="post", label=T("running max m"))
    ax2 = ax.twinx()
    ax2.plot(steps, l, "r-", label=T("running sum l (right axis)"))
    grow = np.flatnonzero(np.diff(m) > 0) + 2
    ax2.plot(grow, l[grow - 1], "rv", label=T("m grew: l rescaled by exp(m_old - m_new)"))
    ax.set_xlabel(T("scores seen"))
    ax.set_ylabel(T("score / max"))
    ax2.set_ylabel(T("running sum l"), color="r")
    ax.set_title(T("online softmax of one row, score by score"))
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    # below the axes, never on the points (a row's scores fill the whole plot)
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2),
              ncol=2)
    ax.figure.tight_layout()
    return ax
