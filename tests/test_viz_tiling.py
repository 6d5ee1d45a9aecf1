"""cudacourse.viz.tiling: lesson 4's arithmetic (intensity, reads, banks) and its plots."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from cudacourse.viz import tiling as viz  # noqa: E402

pytestmark = pytest.mark.lesson4


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_matmul_intensity():
    assert viz.matmul_intensity(None) == 0.25  # 2 FLOP per 8 bytes
    assert viz.matmul_intensity((16, 16)) == 2 * 256 / (4 * 32)
    assert viz.matmul_intensity((128, 256)) == pytest.approx(2 * 128 * 256 / (4 * 384))


def test_reads_per_element_shrink_with_the_tile():
    r = viz.reads_per_element(100, (16, 32))
    assert r == {"naive": 100.0, "16x16 tiles": 7.0, "32x32 tiles": 4.0}


def test_bank_map_shows_the_conflict_and_the_padding_fix():
    assert set(viz.bank_map(0)[:, 0]) == {0}  # a column of an unpadded tile: one bank
    assert sorted(viz.bank_map(1)[:, 0]) == list(range(32))  # padded: all 32 banks
    assert viz.bank_map(1).shape == (32, 32)


def test_plots_draw_their_data():
    fig = viz.plot_reads(64, (16, 32))
    # horizontal bars, the naive kernel at the top (drawn last)
    assert [p.get_width() for p in fig.axes[0].patches] == [2.0, 4.0, 64.0]
    fig = viz.plot_roofline({"k": (10.0, 5.0)}, peak_tflops=50.0, bandwidth_tbps=4.0)
    roof = fig.axes[0].get_lines()[0].get_ydata()
    assert roof.max() == 50.0 and roof.min() == pytest.approx(10 ** -1.5 * 4.0)
    fig = viz.plot_banks((0, 1))
    titles = [ax.get_title() for ax in fig.axes]
    assert "32-way conflict" in titles[0] and "no conflict" in titles[1]
    fig = viz.plot_bandwidth({"a": 1.0, "b": 2.0}, ceiling=3.0)
    assert [p.get_width() for p in fig.axes[0].patches] == [1.0, 2.0]
    assert np.isclose(fig.axes[0].get_lines()[0].get_xdata()[0], 3.0)
