"""Plots for lesson 6: temperature fields, the channel profile, vorticity, the flow around a
wing (speed and streamlines), lift and drag against the angle of attack, an animation."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..kernels.lbm import vorticity
from .words import T


def vorticity_label() -> str:
    """The colour bar's label, in the language shown now (not the one at import)."""
    return T("vorticity du_y/dx - du_x/dy (1 / time step)\nred: counter-clockwise")


def _solid_overlay(ax: Any, solid: np.ndarray) -> None:
    masked = np.ma.masked_where(~solid, np.ones(solid.shape))
    ax.imshow(masked, origin="lower", cmap="gray_r", vmin=0, vmax=1.6,
              interpolation="nearest")


def plot_heat(fields: Sequence[np.ndarray], titles: Sequence[str]):
    """Temperature fields side by side."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(fields), figsize=(3.2 * len(fields), 3), squeeze=False)
    vmax = max(float(np.max(f)) for f in fields)
    for ax, f, t in zip(axes[0], fields, titles):
        im = ax.imshow(f, origin="lower", cmap="inferno", vmin=0, vmax=vmax)
        ax.set_title(t)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.colorbar(im, ax=list(axes[0]), shrink=0.8, label=T("temperature"))
    return fig


def plot_profile(u_sim: np.ndarray, u_ref: np.ndarray, title: str = ""):
    """A channel's velocity profile against the analytic parabola."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    y = np.arange(len(u_ref))
    yy = np.linspace(0.5, len(u_ref) - 1.5, 200)
    n = len(u_ref)
    a = u_ref[1] / (0.5 * (n - 2.5))  # u_ref = a (y - 0.5)(n - 1.5 - y) at the nodes
    ax.plot(a * (yy - 0.5) * (n - 1.5 - yy), yy, "k-", lw=1, label=T("analytic"))
    ax.plot(u_sim, y, "o", ms=5, label=T("lattice Boltzmann"))
    ax.set_xlabel(T("u_x"))
    ax.set_ylabel(T("y (lattice nodes)"))
    ax.set_title(title or T("Poiseuille flow"))
    ax.legend()
    fig.tight_layout()
    return fig


def plot_vorticity(ux: np.ndarray, uy: np.ndarray, solid: np.ndarray, title: str = "",
                   ax: Any = None):
    """Vorticity (red: counter-clockwise, blue: clockwise), obstacle in grey."""
    import matplotlib.pyplot as plt

    w = vorticity(ux, uy)
    w[solid] = 0.0
    w[:, [0, -1]] = 0.0  # the differences wrap around there: not the flow's
    lim = max(float(np.percentile(np.abs(w), 99.5)), 1e-12)
    if ax is None:
        ny, nx = solid.shape
        fig, ax = plt.subplots(figsize=(10, 10 * ny / nx + 0.6))
    else:
        fig = ax.figure
    im = ax.imshow(w, origin="lower", cmap="RdBu_r", vmin=-lim, vmax=lim,
                   interpolation="bilinear")
    _solid_overlay(ax, solid)
    ax.set_title(title or T("vorticity"))
    ax.set_xticks([])
    ax.set_yticks([])
    fig.colorbar(im, ax=ax, shrink=0.7, label=vorticity_label())
    fig.tight_layout()
    return fig


def plot_speed_streamlines(ux: np.ndarray, uy: np.ndarray, solid: np.ndarray,
                           title: str = "", ax: Any = None):
    """Speed |u| as colour, streamlines on top, obstacle in grey."""
    import matplotlib.pyplot as plt

    ny, nx = solid.shape
    speed = np.hypot(ux, uy)
    speed[solid] = np.nan
    if ax is None:
        fig, ax = plt.subplots(figsize=(10, 10 * ny / nx + 0.6))
    else:
        fig = ax.figure
    im = ax.imshow(speed, origin="lower", cmap="viridis", interpolation="bilinear")
    u = np.where(solid, 0.0, ux)
    v = np.where(solid, 0.0, uy)
    ax.streamplot(np.arange(nx), np.arange(ny), u, v, density=1.4, color="white",
                  linewidth=0.6, arrowsize=0.6)
    _solid_overlay(ax, solid)
    ax.set_xlim(0, nx - 1)
    ax.set_ylim(0, ny - 1)
    ax.set_title(title or T("speed and streamlines"))
    ax.set_xticks([])
    ax.set_yticks([])
    fig.colorbar(im, ax=ax, shrink=0.7, label=T("|u| (lattice units)"))
    return fig


def plot_forces(aoa: Sequence[float], lift: Sequence[float], drag: Sequence[float],
                title: str = "", ylabel: str = ""):
    """Lift and drag (momentum exchange) against the angle of attack."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    ax.axhline(0, color="k", lw=0.6)
    ax.plot(aoa, lift, "o-", label=T("lift $C_L$ (across the flow)"))
    ax.plot(aoa, drag, "s--", label=T("drag $C_D$ (along the flow)"))
    ax.set_xlabel(T("angle of attack (degrees)"))
    ax.set_ylabel(ylabel or T("coefficient (force / (rho u^2 c / 2))"))
    ax.set_title(title or T("NACA 0012: lift grows with the angle"))
    ax.legend()
    fig.tight_layout()
    return fig


def animate(frames: Sequence[tuple[np.ndarray, np.ndarray]], solid: np.ndarray,
            every: int, interval: int = 120, stride: int = 1) -> Any:
    """An HTML animation (JavaScript player, works in a saved notebook) of the vorticity in
    ``frames`` of (ux, uy), taken every ``every`` steps; ``stride`` > 1 keeps every
    stride-th node in each direction (a smaller notebook for large lattices)."""
    import matplotlib.pyplot as plt
    from matplotlib import animation
    from IPython.display import HTML

    if stride > 1:
        frames = [(ux[::stride, ::stride] * 1.0, uy[::stride, ::stride] * 1.0)
                  for ux, uy in frames]
        solid = solid[::stride, ::stride]
    ny, nx = solid.shape
    fig, ax = plt.subplots(figsize=(8, 8 * ny / nx + 0.5))
    ws = [vorticity(ux, uy) for ux, uy in frames]
    for w in ws:
        w[:, [0, -1]] = 0.0
    lim = max(float(np.percentile(np.abs(ws[-1]), 99.5)), 1e-12)
    im = ax.imshow(np.where(solid, 0.0, ws[0]), origin="lower", cmap="RdBu_r", vmin=-lim,
                   vmax=lim, interpolation="bilinear")
    _solid_overlay(ax, solid)
    fig.colorbar(im, ax=ax, shrink=0.7, label=vorticity_label())
    ax.set_xticks([])
    ax.set_yticks([])
    title = ax.set_title("")

    def update(k: int):
        im.set_data(np.where(solid, 0.0, ws[k]))
        title.set_text(T("vorticity, step {k_plus_1_times_every}",
                         k_plus_1_times_every=(k + 1) * every))
        return (im, title)

    anim = animation.FuncAnimation(fig, update, frames=len(ws), interval=interval, blit=False)
    html = HTML(anim.to_jshtml(default_mode="loop"))
    plt.close(fig)
    return html


def plot_bandwidth(rates: dict[str, float], copy: float, title: str = ""):
    """Achieved GB/s (compulsory bytes) per kernel against the copy ceiling.

    In the simulator a kernel runs thousands of times slower than the copy beside it: a
    linear axis would show no bars at all, so the axis turns logarithmic when the rates span
    more than a factor of 50 (and the copy's legend keeps three significant digits).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rates) + 1.6))
    names = list(rates)
    values = [rates[n] for n in names]
    ax.barh(names, values, color="#1a7f37")
    ax.axvline(copy, color="k", ls="--", label=T("copy {copy:.3g} GB/s (same run)", copy=copy))
    positive = [v for v in [*values, copy] if v > 0]
    if positive and max(positive) > 50 * min(positive):
        ax.set_xscale("log")
        ax.set_xlim(min(positive) / 3, max(positive) * 3)
        ax.set_xlabel(T("GB/s (compulsory reads + writes), log scale"))
    else:
        ax.set_xlabel(T("GB/s (compulsory reads + writes)"))
    ax.set_title(title or T("bandwidth against the device copy"))
    ax.set_ylabel(T("kernel"))
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return fig
