"""Lesson 6's plots draw what they are given (small fields, no simulation)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from cudacourse.kernels import lbm  # noqa: E402
from cudacourse.viz import flow  # noqa: E402

pytestmark = pytest.mark.lesson6


def _field(ny=20, nx=40):
    y, x = np.mgrid[0:ny, 0:nx]
    solid = lbm.cylinder(ny, nx, 10, 10, 3)
    ux = 0.1 + 0.01 * np.sin(x / 5.0)
    uy = 0.01 * np.cos(y / 3.0)
    return np.where(solid, 0, ux), np.where(solid, 0, uy), solid


def test_field_plots_return_figures_with_the_obstacle_drawn():
    ux, uy, solid = _field()
    for fig in (flow.plot_vorticity(ux, uy, solid), flow.plot_speed_streamlines(ux, uy, solid)):
        ax = fig.axes[0]
        assert len(ax.images) == 2  # the field and the grey obstacle on top
        assert ax.images[1].get_array().count() == solid.sum()


def test_profile_plot_draws_the_exact_parabola():
    u = lbm.poiseuille_ref(10, 1e-5, 0.8)
    fig = flow.plot_profile(u, u)
    line = fig.axes[0].lines[0]
    xs, ys = line.get_data()
    assert np.isclose(xs.max(), 1e-5 / (2 * lbm.viscosity(0.8)) * 4.0 ** 2, rtol=1e-3)


def test_forces_heat_and_bandwidth_plots():
    fig = flow.plot_forces([-4, 0, 4], [-1, 0, 1], [2, 2, 2])
    assert [len(l.get_xdata()) for l in fig.axes[0].lines[1:]] == [3, 3]
    fig = flow.plot_heat([np.zeros((4, 4)), np.ones((4, 4))], ["a", "b"])
    assert [a.get_title() for a in fig.axes[:2]] == ["a", "b"]
    fig = flow.plot_bandwidth({"k": 10.0}, 20.0)
    assert fig.axes[0].patches[0].get_width() == 10.0


def test_animation_has_one_frame_per_snapshot():
    ux, uy, solid = _field()
    html = flow.animate([(ux, uy)] * 3, solid, every=10, stride=2)
    assert html.data.count("frames[") >= 3


def test_field_plots_have_a_labelled_colour_bar():
    ux, uy, solid = _field()
    for fig, unit in ((flow.plot_vorticity(ux, uy, solid), "1 / time step"),
                      (flow.plot_speed_streamlines(ux, uy, solid), "lattice units")):
        bar = fig.axes[-1]  # the colour bar is an axes of its own
        assert len(fig.axes) == 2 and unit in bar.get_ylabel()


def test_bandwidth_bars_stay_visible_when_the_simulator_makes_them_tiny():
    # simulated kernels run at MB/s beside a copy at GB/s: linear bars would be invisible
    fig = flow.plot_bandwidth({"naive": 0.0004, "tiled": 0.0009}, 3.2)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    assert ax.get_xlim()[0] < 0.0004
    assert "copy 3.2 GB/s" in ax.get_legend().get_texts()[0].get_text()
    assert flow.plot_bandwidth({"k": 10.0}, 20.0).axes[0].get_xscale() == "linear"
