"""cudacourse.viz.threads: lesson 2's pictures show the data they are given."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from cudacourse.kernels import indexing, warps
from cudacourse.runtime import occupancy  # noqa: E402
from cudacourse.viz import threads as viz  # noqa: E402

pytestmark = pytest.mark.lesson2


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_thread_map_colours_blocks_and_labels_threads():
    tmap = indexing.thread_map_ref((6, 10), (4, 3))
    ax = viz.plot_thread_map(tmap, (4, 3))
    image = ax.get_images()[0].get_array()
    np.testing.assert_array_equal(image, tmap.block_id(3))  # 10 columns / 4 = 3 blocks in x
    texts = {(round(t.get_position()[0]), round(t.get_position()[1])): t.get_text()
             for t in ax.texts}
    assert texts[(5, 4)] == "1,1"  # column 5 = block 1, thread x 1; row 4 = thread y 1
    assert len(ax.lines) == 2 + 1  # block edges: x at 4 and 8, y at 3


def test_thread_map_can_label_warps_and_drops_labels_when_large():
    tmap = indexing.thread_map_ref((4, 16), (16, 4))
    ax = viz.plot_thread_map(tmap, (16, 4), label="warp")
    assert {t.get_text() for t in ax.texts} == {"w0", "w1"}
    big = viz.plot_thread_map(indexing.thread_map_ref((40, 40), (8, 8)), (8, 8))
    assert not big.texts and "colour = block" in big.get_title()


def test_warps_picture_matches_the_layout_reference():
    ax = viz.plot_warps((8, 8))
    warp, lane = warps.warp_layout_ref((8, 8))
    np.testing.assert_array_equal(ax.get_images()[0].get_array(), warp)
    assert sorted(int(t.get_text()) for t in ax.texts) == sorted(lane.ravel().tolist())


def test_line_and_bar_plots_carry_their_values():
    cov = {"grid-stride": np.ones(5, np.int32), "too few blocks": np.array([1, 1, 0, 0, 0])}
    ax = viz.plot_coverage(cov)
    assert [ln.get_label() for ln in ax.get_lines()] == list(cov)
    ax = viz.plot_passes({"a": np.array([2, 2]), "b": np.array([1, 2])})
    assert [p.get_height() for p in ax.patches] == [2.0, 1.5]
    curve = occupancy.occupancy_curve(32, sizes=[64, 128])
    ax = viz.plot_occupancy({"32 regs": curve})
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [100 * o.occupancy for o in curve])
    rows = [{"threads_per_block": 32, "gb_per_s": 1.0}, {"threads_per_block": 64,
                                                         "gb_per_s": 3.0}]
    ax = viz.plot_block_sweep(rows)
    np.testing.assert_array_equal(ax.get_lines()[0].get_ydata(), [1.0, 3.0])
