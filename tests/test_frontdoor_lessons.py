"""Lessons in a course without committed GPU figures: one line says so, nothing raises.

The cells of lessons 1, 4 and 5 that read ``docs/benchmarks.json`` (bench.committed_report)
run as the built masters hold them, with the report missing (a course folder without a GPU
run) and, for lesson 4, a report that lacks the matmul steps."""

from __future__ import annotations

import contextlib
import io

import matplotlib
import nbformat
import numpy as np
import pytest

import cudacourse
from cudacourse.course import authoring, prose
from cudacourse import bench
from cudacourse.kernels import cpu_vs_gpu
from cudacourse.runtime import device

matplotlib.use("Agg")

ROOT = authoring.ROOT


def _cell(lesson: str, marker: str) -> str:
    nb = nbformat.read(ROOT / "solutions" / lesson / f"{lesson}.ipynb", as_version=4)
    (src,) = [c.source for c in nb.cells if c.cell_type == "code" and marker in c.source]
    return src


def _run(source: str, report, monkeypatch) -> str:
    import matplotlib.pyplot as plt

    monkeypatch.setattr(bench, "committed_report", lambda *a, **k: report)
    ns = {"bench": bench, "cudacourse": cudacourse, "device": device, "np": np, "plt": plt,
          "prose": prose,  # the setup cell's: the cells print through prose.shown
          "cpu_vs_gpu": cpu_vs_gpu, "rng": np.random.default_rng(0)}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<lesson cell>", "exec"), ns)  # noqa: S102 - the course's own
    plt.close("all")
    return out.getvalue()


@pytest.mark.parametrize("lesson, marker", [
    ("04_shared_memory", "STEPS = ("),
    ("05_fused_attention", "attention_fused_vs_sdpa_f32"),
])
def test_no_figures_is_one_line_not_a_traceback(lesson, marker, monkeypatch):
    source = _cell(lesson, marker)
    if lesson == "05_fused_attention":
        source = source.split("\n# %% [markdown]")[0]
    for report in (None, {"mode": "gpu", "measurements": {}, "ratios": {}}):
        said = _run(source, report, monkeypatch)
        assert "No committed" in said and "cudacourse bench" in said, said


@pytest.mark.skipif(not device.is_simulator(), reason="the cell's simulator branch")
def test_lesson_1_without_figures_says_so(monkeypatch):
    said = _run(_cell("01_gpu_vs_cpu", "bench.committed_report()"), None, monkeypatch)
    assert "No committed GPU figures in this course" in said
    assert "GB/s" not in said.split("No committed")[1]  # and no figure after it
