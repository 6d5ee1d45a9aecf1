"""cudacourse.kernels.cpu_vs_gpu: lesson 1's measurements (what is measured, not how fast)."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import cpu_vs_gpu
from cudacourse.runtime import device

matplotlib.use("Agg")

pytestmark = pytest.mark.lesson1

KINDS = {"numpy", "numba_cpu", "gpu_kernel", "gpu_copy_in", "gpu_copy_out"}


def test_measure_times_every_method_at_every_size():
    t = cpu_vs_gpu.measure(sizes=[37, 300], repeats=1)
    assert t.sizes == [37, 300] and t.mode == device.mode()
    assert set(t.seconds) == KINDS
    assert all(len(v) == 2 and all(np.isfinite(x) and x >= 0 for x in v)
               for v in t.seconds.values())
    lines = t.table().splitlines()
    assert len(lines) == 3 and lines[1].split()[0] == "37" and lines[2].split()[0] == "300"
    assert lines[0].split() == ["n", *t.seconds]


@cuda.jit
def _forgets_b(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i]


def test_measure_refuses_a_wrong_kernel(monkeypatch):
    monkeypatch.setattr(cpu_vs_gpu, "_vector_add", _forgets_b)
    with pytest.raises(AssertionError, match="the GPU vector add is wrong at n=40"):
        cpu_vs_gpu.measure(sizes=[40], repeats=1)


def test_default_sizes_follow_the_mode():
    sizes = cpu_vs_gpu.default_sizes()
    assert sizes == sorted(sizes)
    assert max(sizes) <= (4_000 if device.is_simulator() else 2**27)


def test_plot_draws_four_series_and_warns_about_the_simulator():
    t = cpu_vs_gpu.Timings([10, 100], "sim", {k: [1e-3, 2e-3] for k in KINDS})
    ax = cpu_vs_gpu.plot(t)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["NumPy (1 core)", "Numba CPU, parallel", "GPU kernel only",
                      "GPU incl. copies"]
    np.testing.assert_allclose(ax.get_lines()[3].get_ydata(), [3e-3, 6e-3])
    assert "simulator" in ax.get_title()


def test_variant_bandwidth_needs_a_gpu():
    if not device.is_simulator():
        pytest.skip("on a GPU it runs (test_variant_bandwidth_on_gpu)")
    with pytest.raises(device.DeviceError, match="measuring memory bandwidth needs a real"):
        cpu_vs_gpu.variant_bandwidth()


@pytest.mark.gpu
def test_variant_bandwidth_on_gpu():
    from cudacourse.kernels import vector

    r = cpu_vs_gpu.variant_bandwidth(n=2**22, repeats=3)
    assert set(r) == {"copy", *vector.VARIANTS}
