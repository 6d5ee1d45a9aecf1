"""cudacourse.viz.memory: every plot draws from the data lesson 3 produces."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from cudacourse.kernels import transfer  # noqa: E402
from cudacourse.viz import memory as viz  # noqa: E402

pytestmark = pytest.mark.lesson3


def test_plots_draw():
    rows = [{"bytes": 4096.0, "pageable": 1.0, "pinned": 2.0},
            {"bytes": 8192.0, "pageable": 1.5, "pinned": 3.0}]
    ax = viz.plot_bandwidth(rows)
    assert len(ax.lines) == 2
    ax = viz.plot_timeline(transfer.modelled_timeline(4, 2))
    assert len(ax.patches) == 12 and [t.get_text() for t in ax.get_yticklabels()] == \
        ["stream 0", "stream 1"]
    model = transfer.offload_times(np.logspace(-2, 4, 50), 1e9, transfer.Machine.h200())
    ax = viz.plot_offload(model)
    assert any("GPU wins above" in t.get_text() for t in ax.texts)
    ax = viz.plot_launch_costs({"a": 40.0, "b": 125.0})
    assert len(ax.patches) == 2
    plt.close("all")
