"""cudacourse.bench: the simulator smoke pass, --only, the JSON names, wrong kernels reported
as FAILED and never timed, the markdown and plot writers; GPU-marked tests for a real run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from numba import cuda

from cudacourse import bench
from cudacourse.runtime import device
from cudacourse.bench import Case, Ctx, Entry, Measurement, Prepared

REQUIRED_RATIOS = {
    "vector_add_vs_copy", "vector_add_best_vs_copy", "cupy_add_vs_copy", "torch_add_vs_copy",
    "reduce_sum_vs_copy", "transpose_vs_copy", "matmul_best_vs_cublas",
    "attention_fused_vs_unfused", "attention_fused_extra_gib_s16384",
    # issue 15: the course's kernels against PyTorch, measured in the same run
    "matmul_best_vs_torch", "torch_matmul_vs_cublas",
    "attention_fused_vs_torch_eager", "attention_fused_vs_torch_eager_d128",
    "attention_fused_vs_torch_eager_causal", "attention_fused_vs_torch_eager_d128_causal",
    "attention_fused_vs_torch_eager_s16384", "attention_fused_vs_sdpa_f32",
    "attention_fused_vs_sdpa_f32_d128", "attention_fused_vs_sdpa_f32_causal",
    "attention_fused_vs_sdpa_f32_d128_causal", "attention_fused_vs_sdpa_f32_causal_s16384",
    "attention_fused_vs_sdpa_f32_d128_causal_s16384", "attention_sdpa_bf16_vs_sdpa_f32",
    "attention_triton_bf16_vs_sdpa_bf16", "attention_softcap_fused_vs_torch_eager",
    "attention_softcap_fused_vs_flex", "attention_softcap_torch_eager_extra_gib",
    "attention_fused_vs_unfused_d128", "attention_fused_vs_unfused_causal_s16384",
}


# --- a deliberately wrong kernel, to inject ----------------------------------------------------

@cuda.jit
def _subtract(a, b, out):
    """Wrong on purpose: a - b where a + b is wanted."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] - b[i]


@cuda.jit
def _add(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


def _add_case(kernel, name: str) -> Case:
    def prepare(ctx: Ctx) -> Prepared:
        n = 300
        a, b = ctx.uniform(n), ctx.uniform(n)
        da, db, out = ctx.dev(a), ctx.dev(b), ctx.output(n)
        return Prepared(lambda: kernel[3, 128](da, db, out),
                        lambda: bench.assert_close(ctx, ctx.read(out), a + b, name, rtol=0.0),
                        bytes=12.0 * n)

    return Case(name, f"{name} kernel", prepare, ratio=f"{name}_vs_copy", vs="copy")


class SpyTimer:
    def __init__(self):
        self.calls = 0

    def __call__(self, fn):
        self.calls += 1
        fn()
        return [1.0, 2.0, 3.0]


@pytest.fixture
def inject(monkeypatch):
    """Register extra entries for one test."""
    def add(name: str, cases) -> None:
        monkeypatch.setitem(bench.ENTRIES, name, Entry(name, f"test entry {name}", name, cases,
                                                       "copy"))
    return add


# --- the simulator smoke pass --------------------------------------------------------------------

@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One smoke pass of the vector entries, with every output option."""
    if not device.is_simulator():
        pytest.skip("the smoke pass is what the simulator runs")
    d = tmp_path_factory.mktemp("bench")
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = bench.main(["--only", "vector_add", "--json", str(d / "b.json"), "--markdown",
                         str(d / "b.md"), "--plot", str(d / "b.png"), "--no-progress"])
    return rc, out.getvalue(), d


def test_smoke_pass_says_timings_mean_nothing_and_exits_0(smoke):
    rc, out, _ = smoke
    assert rc == 0
    assert "timings mean nothing" in out
    for name in ("copy", "vector_add", "vector_add_best", "vector_add_vec4"):
        assert any(line.split()[:2] == [name, "ok"] for line in out.splitlines()), out


def test_smoke_json_cannot_pass_for_gpu_results(smoke):
    _, _, d = smoke
    report = json.loads((d / "b.json").read_text())
    assert report["mode"] == "sim"
    assert "timings mean nothing" in report["note"]
    assert "ratios" not in report and "measurements" not in report
    assert "ms" not in json.dumps(report["smoke"])
    assert report["smoke"]["vector_add_best"] == "ok"


def test_smoke_markdown_and_no_plot(smoke):
    _, out, d = smoke
    md = (d / "b.md").read_text()
    assert "no timings" in md and bench.GPU_MARKER not in md
    assert not (d / "b.png").exists()
    assert "no plot written" in out


@pytest.mark.skipif(not device.is_simulator(), reason="the smoke pass is what the sim runs")
def test_full_smoke_pass_reports_every_entry(tmp_path, capsys):
    """Every entry runs or is reported (ok, FAILED, missing, skipped): nothing crashes."""
    rc = bench.main(["--json", str(tmp_path / "b.json"), "--no-progress"])
    report = json.loads((tmp_path / "b.json").read_text())
    statuses = report["smoke"]
    assert rc == (1 if any(s.startswith("FAILED") for s in statuses.values()) else 0)
    assert all(s.split(":")[0] in ("ok", "FAILED", "missing", "skipped")
               for s in statuses.values())
    assert statuses["cupy_add"].startswith("skipped") and "GPU" in statuses["cupy_add"]
    assert statuses["attention_memory"].startswith("skipped")


def test_list_names_every_benchmark(capsys):
    assert bench.main(["--list"]) == 0
    out = capsys.readouterr().out
    for name in ("copy", "vector_add", "cupy_add", "torch_add", "reduce_sum", "transpose",
                 "cublas", "matmul", "attention", "attention_memory"):
        assert any(line.split()[0] == name for line in out.splitlines()), name


# --- --only ----------------------------------------------------------------------------------------

def test_only_runs_the_chosen_entries_and_the_ceilings_they_need():
    assert bench.select("matmul") == ["cublas", "matmul"]
    assert bench.select("reduce_sum,vector_add") == ["copy", "vector_add", "reduce_sum"]
    assert bench.select(" attention ") == ["attention"]
    assert bench.select(None) == list(bench.ENTRIES)


def test_only_with_an_unknown_name_lists_the_known_ones(capsys):
    assert bench.main(["--only", "vector_add,warp_speed"]) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark warp_speed" in err and "vector_add" in err


def test_only_filters_what_runs(inject, capsys):
    inject("good_add", lambda ctx: [_add_case(_add, "good_add")])
    assert bench.main(["--only", "good_add", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "good_add" in out
    # nothing else ran: no other kernel, no other ceiling than the copy it is compared with
    for other in ("Numba vector add", "CuPy", "cuBLAS", "transpose", "attention", "sum"):
        assert other not in out, out


# --- wrong and missing kernels ---------------------------------------------------------------------

def test_a_wrong_kernel_is_failed_and_never_timed():
    ctx = Ctx("small", seed=3)
    spy = SpyTimer()
    m = bench.run_case(_add_case(_subtract, "broken_add"), ctx, spy)
    assert m.status == "FAILED"
    assert "broken_add is wrong" in m.detail and "differ from the reference" in m.detail
    assert spy.calls == 0 and m.times_ms == [] and m.median_ms is None
    good = bench.run_case(_add_case(_add, "good_add"), ctx, spy)
    assert good.status == "ok" and spy.calls == 1 and good.median_ms == 2.0


def test_a_wrong_kernel_fails_the_command(inject, capsys):
    inject("broken_add", lambda ctx: [_add_case(_subtract, "broken_add")])
    assert bench.main(["--only", "broken_add", "--no-progress"]) == 1
    out, err = capsys.readouterr()
    # the table marks it FAILED (the simulator's and the GPU's tables lay it out differently)
    assert any("broken_add" in line and "FAILED" in line for line in out.splitlines()), out
    assert "broken_add is wrong" in out
    assert "FAILED: broken_add" in err


def test_a_crashing_kernel_is_failed_with_its_error():
    def prepare(ctx):
        def boom():
            raise RuntimeError("launch failed")
        return Prepared(boom, lambda: None)

    m = bench.run_case(Case("boom", "boom", prepare), Ctx("small"), SpyTimer())
    assert m.status == "FAILED" and m.detail == "RuntimeError: launch failed"


def test_a_module_not_written_yet_is_missing_not_a_crash(inject, capsys):
    with pytest.raises(bench.Missing, match="cudacourse.not_written_yet is not written yet"):
        bench._need("cudacourse.not_written_yet", "f")
    with pytest.raises(bench.Missing, match="cudacourse.kernels.vector has no no_such_function"):
        bench._need("cudacourse.kernels.vector", "vector_add", "no_such_function")
    inject("ghost", lambda ctx: [bench._need("cudacourse.not_written_yet", "ghost")])
    assert bench.main(["--only", "ghost", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert any("ghost" in line and "missing" in line and
               "cudacourse.not_written_yet is not written yet" in line
               for line in out.splitlines()), out


def test_assert_close_names_unwritten_outputs():
    ctx = Ctx("small")
    want = np.arange(1, 11, dtype=np.float32)
    got = want.copy()
    got[[3, 7]] = np.nan
    with pytest.raises(AssertionError, match=r"2 of 10 values differ.*first at \(3,\): got nan"):
        bench.assert_close(ctx, got, want, "out")
    bench.assert_close(ctx, want * (1 + 1e-7), want, "out", rtol=1e-6)


# --- the report: JSON names, ratios, markdown, plot --------------------------------------------

H200_ENV = {"mode": "gpu", "gpu": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132,
            "memory_gib": 139.8, "cuda_driver_api": "13.0", "driver": "580.95.05",
            "cuda_runtime": "13.0", "python": "3.12.3",
            "libraries": {"numpy": "2.4.6", "numba-cuda": "0.30.4", "cupy-cuda13x": "14.2.0",
                          "torch": "2.11.0"}}


def fake_gpu_measurements() -> dict[str, Measurement]:
    """Every case the full-size bench plans, with made-up times (no kernel runs)."""
    ctx = Ctx("full")
    ctx.sizes = bench.SIZES["full"]  # planning only: nothing is allocated
    results = {}
    for _, step in bench.plan(list(bench.ENTRIES), ctx):
        assert isinstance(step, Case), f"{step.name}: {step.status} {step.detail}"
        m = Measurement(step.name, step.label, step.kind, ratio=step.ratio, vs=step.vs,
                        shape="fake", bytes=1e9, flops=1e12, times_ms=[1.0, 1.0, 1.0],
                        more=step.more)
        if step.kind == "value":
            m.times_ms, m.value = [], 0.0625
        results[m.name] = m
    n = 2**28
    results["copy"].bytes, results["copy"].times_ms = 8.0 * n, [0.5]
    results["vector_add"].bytes, results["vector_add"].times_ms = 12.0 * n, [1.1]
    return results


def fake_report(**changes) -> dict:
    ms = fake_gpu_measurements()
    for name, (status, detail) in changes.items():
        ms[name].status, ms[name].detail, ms[name].times_ms = status, detail, []
    return bench.build_report(ms, command="cudacourse bench --json docs/benchmarks.json",
                              size="full", seed=7, repeats=20, env=H200_ENV,
                              date="2026-11-30T12:00:00+00:00")


def test_json_names_each_ratio_by_what_it_compares():
    report = fake_report()
    from cudacourse.kernels.matmul import MATMUL_VARIANTS

    names = set(report["ratios"])
    assert REQUIRED_RATIOS <= names, REQUIRED_RATIOS - names
    assert {f"matmul_{v}_vs_cublas" for v in MATMUL_VARIANTS} <= names
    for m in report["measurements"].values():  # a ratio names what it is divided by
        for ratio, vs in ([(m["ratio"], m["vs"])] if m["vs"] else []) + list(m["more"]):
            assert "_vs_" in ratio, (ratio, vs)
    # vector add: 12 bytes per element in 1.1 ms against the copy's 8 in 0.5 ms
    assert report["ratios"]["vector_add_vs_copy"] == pytest.approx((12 / 1.1) / (8 / 0.5))
    assert report["ratios"]["attention_fused_extra_gib_s16384"] == 0.0625
    assert report["mode"] == "gpu" and report["environment"]["gpu"] == "NVIDIA H200"
    assert report["measurements"]["vector_add"]["times_ms"] == [1.1]
    assert report["ceilings"]["copy_gb_s"] == pytest.approx(8 * 2**28 / 0.5e-3 / 1e9)
    json.dumps(report)  # serialisable as is


def test_one_measurement_feeds_several_ratios():
    """The fused kernel is divided by eager PyTorch and by SDPA: rates of the same work."""
    ms = fake_gpu_measurements()
    ms["attention_fused"].times_ms = [2.0]
    ms["attention_torch_eager"].times_ms = [3.0]
    ms["attention_sdpa_f32"].times_ms = [1.0]
    vals, _ = bench.ratios(ms)
    assert vals["attention_fused_vs_torch_eager"] == pytest.approx(1.5)
    assert vals["attention_fused_vs_sdpa_f32"] == pytest.approx(0.5)
    ms["attention_sdpa_f32"].status, ms["attention_sdpa_f32"].detail = "skipped", "no torch"
    vals, problems = bench.ratios(ms)
    assert "attention_fused_vs_sdpa_f32" not in vals and "attention_fused_vs_torch_eager" in vals
    assert "attention_sdpa_f32 skipped" in problems["attention_fused_vs_sdpa_f32"]


def test_attention_peer_names_follow_the_shape():
    """Suffixes name what differs from 16 x 4096 x 64, not causal; SIZES covers issue 15."""
    from cudacourse.bench.cases import _suffix

    assert _suffix(4096, 64, False) == ""
    assert _suffix(4096, 128, True) == "_d128_causal"
    assert _suffix(16384, 64, True) == "_causal_s16384"
    # relative to the attention entry's own length: at small size (300) the same names
    assert _suffix(300, 64, False, 300) == "" and _suffix(300, 128, False, 300) == "_d128"
    assert _suffix(4096, 64, True, 300) == "_causal_s4096"
    shapes = {(s, d, c) for _, s, d, c in bench.SIZES["full"]["attention_peers"]}
    assert {(s, d, c) for s in (4096, 16384) for d in (64, 128) for c in (False, True)} == \
        shapes | {(4096, 64, False)}


def test_plot_view_keeps_one_attention_shape():
    view = bench.plot_view(fake_report())
    assert "attention_fused_vs_sdpa_f32" in view["ratios"]
    assert "vector_add_vs_copy" in view["ratios"] and "attention_fused" in view["measurements"]
    assert not any(s in k for k in view["ratios"] for s in ("_d128", "_causal", "_s16384", "bf16"))
    assert "attention_sdpa_f32_d128" not in view["measurements"]
    assert "attention_sdpa_f32_d128" in fake_report()["measurements"]  # the report keeps all


def test_a_failed_kernel_has_no_ratio_and_no_time():
    report = fake_report(vector_add_best=("FAILED", "vector_add variant 'best' is wrong"))
    assert "vector_add_best_vs_copy" not in report["ratios"]
    assert report["problems"]["vector_add_best_vs_copy"].startswith("FAILED: vector_add")
    assert report["measurements"]["vector_add_best"]["median_ms"] is None


def test_a_failed_ceiling_leaves_its_ratios_unvalued():
    report = fake_report(cublas_sgemm=("skipped", "CuPy needs a real GPU"))
    assert not any(k.endswith("_vs_cublas") for k in report["ratios"])
    assert "cublas_sgemm skipped" in report["problems"]["matmul_best_vs_cublas"]


def test_markdown_records_where_when_and_how():
    md = bench.to_markdown(fake_report(reduce_sum=("missing", "cudacourse.kernels.reduce has no x")))
    assert md.startswith(bench.GPU_MARKER)
    for fact in ("NVIDIA H200", "2026-11-30", "580.95.05", "CUDA 13.0", "numba-cuda 0.30.4",
                 "cupy-cuda13x 14.2.0", "torch 2.11.0",
                 "`cudacourse bench --json docs/benchmarks.json`"):
        assert fact in md, fact
    assert "| `vector_add_vs_copy` | 0.682 |" in md  # (12/1.1)/(8/0.5) = 0.68
    assert "missing" in md and "cudacourse.kernels.reduce has no x" in md
    rows = [line for line in md.splitlines() if line.startswith("| Numba vector add, one")]
    assert len(rows) == 1 and rows[0].rstrip(" |").endswith("0.68")


def test_table_has_kernel_time_rate_and_ratio():
    table = bench.format_table(fake_report())
    head = table.splitlines()[0].split()
    assert head[:3] == ["kernel", "size", "median"]
    assert "TFLOP/s" in table and "GB/s" in table


def test_plot_report_draws_a_roofline(tmp_path):
    from cudacourse.viz.bench import plot_report

    path = tmp_path / "roofline.png"
    plot_report(fake_report(), str(path))
    assert path.stat().st_size > 10_000
    with pytest.raises(ValueError, match="simulator"):
        plot_report({"mode": "sim", "smoke": {}})


def test_simulator_never_overwrites_gpu_results(tmp_path, capsys):
    if not device.is_simulator():
        pytest.skip("simulator behaviour")
    path = tmp_path / "benchmarks.json"
    path.write_text(json.dumps({"mode": "gpu", "ratios": {"vector_add_vs_copy": 0.7}}))
    assert bench.main(["--only", "copy", "--json", str(path), "--no-progress"]) == 2
    assert "holds GPU results" in capsys.readouterr().err
    assert json.loads(path.read_text())["mode"] == "gpu"
    md = tmp_path / "benchmarks.md"
    md.write_text(bench.to_markdown(fake_report()))
    assert bench.main(["--only", "copy", "--markdown", str(md), "--no-progress"]) == 2
    assert bench.main(["--only", "copy", "--json", str(path), "--force", "--no-progress"]) == 0
    assert json.loads(path.read_text())["mode"] == "sim"


# --- on a real GPU (small sizes) --------------------------------------------------------------------

@pytest.mark.gpu
def test_event_times_are_positive_medians():
    a = cuda.to_device(np.ones(2**20, np.float32))
    out = cuda.device_array_like(a)
    times = bench.event_times(lambda: _add[4096, 256](a, a, out), repeats=5)
    assert len(times) >= 3 and all(t > 0 for t in times)


@pytest.mark.gpu
def test_real_run_small(tmp_path, capsys):
    p = tmp_path
    rc = bench.main(["--size", "small", "--repeats", "5", "--no-progress",
                     "--only", "vector_add,cupy_add,torch_add,reduce_sum,transpose,matmul,"
                     "attention", "--json", str(p / "b.json"), "--markdown", str(p / "b.md"),
                     "--plot", str(p / "b.png")])
    out = capsys.readouterr().out
    report = json.loads((p / "b.json").read_text())
    assert rc == 0, out
    assert report["mode"] == "gpu" and report["size"] == "small"
    assert report["ceilings"]["copy_gb_s"] > 0 and report["ceilings"]["cublas_sgemm_tflop_s"] > 0
    for name in ("vector_add_vs_copy", "vector_add_best_vs_copy", "cupy_add_vs_copy",
                 "matmul_best_vs_cublas", "attention_fused_vs_unfused"):
        assert report["ratios"][name] > 0, name
    for m in report["measurements"].values():
        assert m["status"] in ("ok", "skipped", "missing"), m
        if m["status"] == "ok" and m["kind"] != "value":
            assert m["median_ms"] > 0 and len(m["times_ms"]) >= 3
    assert (p / "b.png").stat().st_size > 10_000
    md = (p / "b.md").read_text()
    assert report["environment"]["gpu"] in md and "vector_add_best_vs_copy" in md


@pytest.mark.gpu
def test_real_attention_peers_small(tmp_path):
    """PyTorch eager, SDPA, Triton and FlexAttention cases run and are checked on a GPU."""
    pytest.importorskip("torch")
    rc = bench.main(["--size", "small", "--repeats", "3", "--no-progress", "--only",
                     "attention,attention_torch,attention_softcap,torch_matmul,matmul",
                     "--json", str(tmp_path / "p.json")])
    report = json.loads((tmp_path / "p.json").read_text())
    assert rc == 0, report["problems"]
    for name in ("attention_fused_vs_torch_eager", "attention_fused_vs_sdpa_f32",
                 "attention_fused_vs_torch_eager_d128", "attention_softcap_fused_vs_torch_eager",
                 "matmul_best_vs_torch"):
        assert report["ratios"][name] > 0, name
    assert "(" in report["measurements"]["attention_sdpa_f32"]["label"]  # names its backend


@pytest.mark.gpu
def test_real_attention_memory_small(tmp_path):
    rc = bench.main(["--size", "small", "--only", "attention_memory", "--no-progress",
                     "--json", str(tmp_path / "m.json")])
    report = json.loads((tmp_path / "m.json").read_text())
    assert rc == 0
    fused = report["ratios"]["attention_fused_extra_gib_s1024"]
    unfused = report["ratios"]["attention_unfused_extra_gib_s1024"]
    # The unfused scores alone are 2 heads x 1024^2 floats = 8 MiB. Free-memory readings move
    # in driver pages, so allow some slack (on the H200, 2026-11-30, it read 7.3 MiB).
    assert unfused >= 0.75 * 8 / 1024
    assert fused < unfused / 4


@pytest.mark.gpu
def test_wrong_kernel_is_failed_and_not_timed_on_gpu(inject, capsys):
    inject("broken_add", lambda ctx: [_add_case(_subtract, "broken_add")])
    assert bench.main(["--only", "broken_add", "--size", "small", "--no-progress"]) == 1
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.startswith("broken_add kernel")]
    assert row and "FAILED" in row[0] and " ms" not in row[0]


def test_call_overhead_values_reach_the_ratios():
    """A measurement's extra values (``<kernel>_call_overhead_us``) are reported; a failed
    measurement's are not."""
    ok = bench.Measurement("m", "m", "compute", values={"matmul_call_overhead_us": 12.5})
    bad = bench.Measurement("b", "b", "compute", status="FAILED",
                            values={"softmax_call_overhead_us": 1.0})
    values, _ = bench.ratios({"m": ok, "b": bad})
    assert values == {"matmul_call_overhead_us": 12.5}


def test_every_public_kernel_reports_its_call_overhead():
    """The headline case of each public function measures the host cost of one call."""
    ctx = bench.Ctx("small", seed=1)
    names = {c.overhead for e in bench.ENTRIES.values() if e.name in
             ("vector_add", "reduce_sum", "transpose", "softmax", "matmul", "attention",
              "stencil", "lbm") for c in e.cases(ctx)} - {None}
    assert names == {"vector_add", "reduce_sum", "transpose", "softmax", "matmul",
                     "attention", "stencil", "lbm"}
