"""Every plot the course draws reads at a glance, in both editions (issue 41): a title,
labelled axes, tick labels that do not overlap, legends off the data, bars on a linear axis
and none too short to see, and, in Japanese, no English left (cudacourse.viz.readable).

Each plot function of cudacourse.viz (and cpu_vs_gpu.plot) is drawn with data of the shape
the lessons give it, the cases learners met among them."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from cudacourse import i18n
from cudacourse.kernels import indexing, transfer
from cudacourse.runtime import occupancy  # noqa: E402
from cudacourse.i18n.glossary import english_left  # noqa: E402
from cudacourse.viz import attention, bench, flow, memory, readable, threads, tiling  # noqa: E402
from cudacourse.viz import words  # noqa: E402
from test_viz_flow import _field  # noqa: E402 - lesson 6's flow field, one definition


def _fig(obj):
    return obj if hasattr(obj, "axes") and hasattr(obj, "canvas") else obj.figure


def _timings():
    from cudacourse.kernels.cpu_vs_gpu import Timings

    sizes = [2**k for k in range(10, 20, 2)]
    t = Timings(sizes=sizes, mode="sim")
    for k, name in enumerate(("numpy", "numba_cpu", "gpu_kernel", "gpu_copy_in",
                              "gpu_copy_out")):
        t.seconds[name] = [1e-6 * (k + 1) * s / 1000 for s in sizes]
    return t


def _report():
    from tests.test_bench import fake_report

    return fake_report()


def _online():
    return np.random.default_rng(0).standard_normal(40) * 3


PLOTS = {
    # lesson 1
    "cpu_vs_gpu.plot": lambda: __import__("cudacourse.kernels.cpu_vs_gpu", fromlist=["plot"]).plot(
        _timings()),
    # lesson 2
    "threads.plot_thread_map": lambda: threads.plot_thread_map(
        indexing.thread_map_ref((12, 12), (4, 3)), (4, 3)),
    "threads.plot_warps": lambda: threads.plot_warps((8, 8)),
    "threads.plot_coverage": lambda: threads.plot_coverage(
        {words.T("one element per thread"): np.ones(100, int),
         words.T("grid-stride loop"): np.r_[np.ones(60, int), np.zeros(40, int)]}),
    "threads.plot_passes": lambda: threads.plot_passes(
        {"warps agree": np.array([1, 1, 1, 1]), "lanes disagree": np.array([2, 2, 1, 2])}),
    "threads.plot_occupancy": lambda: threads.plot_occupancy(
        {f"{r} registers/thread": occupancy.occupancy_curve(r) for r in (32, 64, 128)}),
    "threads.plot_block_sweep": lambda: threads.plot_block_sweep(
        [{"threads_per_block": t, "gb_per_s": 1000.0 + t, "occupancy": 0.5}
         for t in (32, 64, 128, 256, 512, 1024)]),
    # lesson 3, cell 48: 4,279 us against 6,647 us
    "memory.plot_launch_costs": lambda: memory.plot_launch_costs(
        {"Numba device array": 4279.0, "CuPy array (read through __cuda_array_interface__)": 6647.0,
         "course launcher vector_add(a, b, out), Numba arrays": 3120.5}),
    "memory.plot_bandwidth": lambda: memory.plot_bandwidth(
        [{"bytes": float(2**k), "pageable": 1.0 + k, "pinned": 2.0 + k} for k in range(10, 30, 4)]),
    "memory.plot_timeline": lambda: memory.plot_timeline(transfer.modelled_timeline(6, 3)),
    "memory.plot_offload": lambda: memory.plot_offload(
        transfer.offload_times(np.logspace(-2, 4, 50), 1e9, transfer.Machine(
            link=50e9, gpu_flops=50e12, cpu_flops=1e12, cpu_bandwidth=200e9))),
    # lesson 4: cell 13 (Japanese x labels overlapped), cell 33 (legend on 3 of 6 points),
    # cell 38 (empty bars in the simulator)
    "tiling.plot_reads": lambda: tiling.plot_reads(4096, (16, 32, 64, 128)),
    "tiling.plot_roofline": lambda: tiling.plot_roofline(
        {"naive": (0.25, 0.9), "your tiled_matmul": (4.0, 3.0), "register": (16.0, 12.0),
         "register128": (32.0, 20.0), "register128x256": (42.7, 26.0),
         "register128x256v4": (42.7, 30.0)}, 67.0, 4.2),
    "tiling.plot_banks": lambda: tiling.plot_banks((0, 1)),
    "tiling.plot_bandwidth": lambda: tiling.plot_bandwidth(
        {"two_pass": 0.0009, "warp_shuffle": 0.0012, "single_pass": 0.0021}, 4.2),
    # lesson 5, cell 20: the legend over the data, the right axis labelled "l"
    "attention.plot_online_softmax": lambda: attention.plot_online_softmax(_online()),
    "attention.plot_memory_model": lambda: attention.plot_memory_model([1024, 4096, 16384]),
    "attention.plot_timings": lambda: attention.plot_timings(
        [1024, 2048, 4096], {words.T("unfused (CuPy)"): [1.0, 4.0, 16.0],
                             words.T("fused (Numba)"): [0.5, 1.5, 5.0]}),
    # lesson 6
    "flow.plot_heat": lambda: flow.plot_heat(
        [np.random.default_rng(k).random((20, 30)) for k in range(3)],
        [words.T("start"), words.T("after {steps} steps", steps=50),
         words.T("after {steps} steps", steps=400)]),
    "flow.plot_profile": lambda: flow.plot_profile(np.linspace(0, 1, 20) * (1 - np.linspace(0, 1, 20)),
                                                   np.linspace(0, 1, 20) * (1 - np.linspace(0, 1, 20))),
    "flow.plot_vorticity": lambda: flow.plot_vorticity(*_field()),
    "flow.plot_speed_streamlines": lambda: flow.plot_speed_streamlines(*_field()),
    "flow.plot_forces": lambda: flow.plot_forces([-4, 0, 4, 8], [-0.4, 0, 0.4, 0.8],
                                                 [0.1, 0.1, 0.1, 0.12]),
    "flow.plot_bandwidth": lambda: flow.plot_bandwidth({"naive": 0.0004, "tiled": 0.0009}, 3.2),
    # the benchmark report
    "bench.roofline": lambda: bench.roofline(_report()),
    "bench.ratio_bars": lambda: bench.ratio_bars(_report()),
}


@pytest.fixture(params=["en", "ja"])
def lang(request):
    saved = i18n._chosen
    i18n.use(request.param)
    yield request.param
    i18n.use(saved or "en")
    words.use_font(i18n.language())
    plt.close("all")


@pytest.mark.parametrize("name", list(PLOTS))
def test_every_plot_reads_at_a_glance(name, lang):
    fig = _fig(PLOTS[name]())
    assert readable.problems(fig) == [], f"{name} ({lang})"
    if lang == "ja" and not name.startswith("bench."):  # bench: the records' own labels
        left = {t: english_left(_without_data(t), strict=True) for t in _words_of(fig)}
        assert not {t: w for t, w in left.items() if w}, f"{name}: English in a Japanese plot"


# The kernels' names the caller gives (code identifiers, kept as code in both editions),
# taken out before the words are searched. Labels that are words (a lesson's viz.T, a
# module's N_ keys: "grid-stride loop", "Numba device array") are not here: the plot
# functions show them through the catalogue, so a Japanese plot must show them in Japanese.
DATA_NAMES = sorted({"naive", "your tiled_matmul", "register128x256v4", "register128x256",
                     "register128", "register", "two_pass", "warp_shuffle", "single_pass",
                     "tiled", "vector_add(a, b, out)"}, key=len, reverse=True)


def _without_data(text: str) -> str:
    for n in DATA_NAMES:
        text = text.replace(n, " ")
    return text


def _words_of(fig):
    """Titles, axis labels, legends, annotations and the tick labels that hold letters (a
    bar chart's categories): the words of the plot, not the tick numbers."""
    out = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        legend = ax.get_legend()
        out += [t.get_text() for t in legend.get_texts()] if legend is not None else []
        out += [t.get_text() for t in ax.texts]
        # a bar chart's categories: words (translated) or kernels' names (DATA_NAMES)
        out += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()
                if any(ch.isalpha() for ch in t.get_text())]
    return [t for t in out if t.strip()]


# --- the check catches what learners met ------------------------------------------------------

def _axes():
    return plt.subplots(figsize=(5, 3))


def test_a_log_axis_under_close_bars_is_found():
    fig, ax = _axes()
    ax.barh(["a", "b"], [4279.0, 6647.0])
    ax.set_xscale("log")
    ax.set(title="t", xlabel="us", ylabel="route")
    assert any("log axis" in p for p in readable.problems(fig))


def test_a_legend_on_the_points_is_found():
    fig, ax = _axes()
    for k in range(6):
        ax.plot([1.0 + k], [1.0 + k], "o", label=f"point {k}")
    ax.set(title="t", xlabel="x", ylabel="y", xlim=(0, 7), ylim=(0, 7))
    ax.legend(loc="lower right", fontsize=14)
    assert any("legend covers" in p for p in readable.problems(fig))


def test_an_axis_named_by_a_symbol_and_a_missing_title_are_found():
    fig, ax = _axes()
    ax.plot([0, 1], [0, 1])
    ax.set(xlabel="steps", ylabel="l")
    found = readable.problems(fig)
    assert any("no title" in p for p in found)
    assert any("labelled only 'l'" in p for p in found)


def test_overlapping_tick_labels_are_found():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.bar(["naive (4096 reads)", "16x16 tiles (256)", "32x32 tiles (128)"], [4096, 256, 128])
    ax.set(title="t", ylabel="reads", xlabel="kernel")
    assert any("overlap" in p for p in readable.problems(fig))


def test_bars_too_short_to_see_are_found():
    fig, ax = _axes()
    ax.barh(["a", "b"], [0.0001, 0.0002])
    ax.axvline(5.0)
    ax.set(title="t", xlabel="GB/s", ylabel="kernel", xlim=(0, 6))
    assert any("reads as empty" in p for p in readable.problems(fig))


def test_english_left_in_a_japanese_plot_is_found():
    assert english_left("vorticity behind a cylinder, Re = 48", strict=True)
    assert english_left("start / 50 steps", strict=True)
    assert english_left("円柱の後ろの渦度、Re = 48 (NumPy, GB/s)", strict=True) == []
