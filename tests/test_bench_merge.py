"""``python -m cudacourse.bench --merge``: one lesson's cases re-measured into the committed
report (fake GPU reports here: the simulator produces no timings)."""

from __future__ import annotations

import copy
import json

import pytest

from cudacourse.runtime import device
from cudacourse.bench import __main__ as bench_main
from cudacourse.bench.report import merge_reports, to_markdown


def _m(ratio=None, vs=None, ms=1.0, kind="memory", value=None, label="k"):
    return {"label": label, "kind": kind, "status": "ok", "detail": "", "ratio": ratio,
            "vs": vs, "shape": "s", "bytes": 8.0, "flops": 0.0, "times_ms": [ms],
            "value": value, "more": [], "median_ms": None if kind == "value" else ms,
            "gb_s": None if kind == "value" else 8.0 / ms}


def _report(date, copy_gb_s, measurements, ratios, gpu="NVIDIA H200"):
    return {"schema": 1, "mode": "gpu", "date": date, "command": "bench", "size": "full",
            "environment": {"gpu": gpu}, "seed": 1, "repeats": 20, "timing": "events",
            "ceilings": {"copy_gb_s": copy_gb_s, "cublas_sgemm_tflop_s": 51.0},
            "ratios": ratios, "problems": {}, "measurements": measurements}


def _old():
    meas = {"copy": _m(), "vector_add": _m("vector_add_vs_copy", "copy"),
            "stencil": _m("stencil_vs_copy", "copy", 4.0),
            "stencil_tiled_32x8x1": _m("stencil_tiled_32x8x1_vs_copy", "copy", 6.0),
            "lbm_mlups": _m("lbm_mlups", kind="value", value=34681.0)}
    return _report("2026-12-01T07:39:56+00:00", 4219.0, meas,
                   {"vector_add_vs_copy": 0.83, "stencil_vs_copy": 0.24,
                    "stencil_tiled_32x8x1_vs_copy": 0.16, "lbm_mlups": 34681.0})


def _new():
    meas = {"copy": _m(ms=0.9), "stencil": _m("stencil_vs_copy", "copy", 1.1),
            "stencil_rows_64x4x8": _m("stencil_rows_64x4x8_vs_copy", "copy", 1.2),
            "lbm_mlups": _m("lbm_mlups", kind="value", value=45000.0)}
    return _report("2026-12-01T09:00:00+00:00", 4300.0, meas,
                   {"stencil_vs_copy": 0.9, "stencil_rows_64x4x8_vs_copy": 0.85,
                    "lbm_mlups": 45000.0})


def test_merge_replaces_only_the_named_entries():
    old, new = _old(), _new()
    before = copy.deepcopy(old)
    got = merge_reports(old, new, ["stencil", "lbm"], command="python -m cudacourse.bench X")
    assert old == before  # the input is not modified
    r = got["ratios"]
    assert r["vector_add_vs_copy"] == 0.83  # another lesson's ratio: untouched
    assert r["stencil_vs_copy"] == 0.9 and r["stencil_rows_64x4x8_vs_copy"] == 0.85
    assert r["lbm_mlups"] == 45000.0
    # a case the new run no longer has is dropped with its ratio, not left stale
    assert "stencil_tiled_32x8x1" not in got["measurements"]
    assert "stencil_tiled_32x8x1_vs_copy" not in r
    # the old run's ceilings stay at the top (the untouched ratios divide by them); the new
    # copy is recorded with every re-measured case and in the merge record
    assert got["ceilings"]["copy_gb_s"] == 4219.0
    assert got["measurements"]["copy"] == old["measurements"]["copy"]
    assert got["measurements"]["stencil"]["remeasured"]["ceilings"]["copy_gb_s"] == 4300.0
    assert "remeasured" not in got["measurements"]["vector_add"]
    assert list(got["measurements"])[:3] == ["copy", "vector_add", "stencil"]  # order kept
    (mg,) = got["merges"]
    assert mg["only"] == ["stencil", "lbm"] and mg["date"] == new["date"]
    assert mg["measurements"] == ["lbm_mlups", "stencil", "stencil_rows_64x4x8"]
    md = to_markdown(got)
    assert "re-measured on 2026-12-01" in md and "**4300 GB/s**" in md
    assert "| `stencil_vs_copy` | 0.900 |" in md and "| `vector_add_vs_copy` | 0.830 |" in md
    assert "34681" not in md and "45000.00 MLUPS" in md  # the value's unit, not "GiB"


def test_merge_tells_an_entry_from_a_longer_one_with_its_prefix():
    old, new = _old(), _new()
    old["measurements"]["lbm_cupy"] = _m()
    old["measurements"]["lbm_fused_vs_cupy"] = _m("lbm_vs_cupy", "lbm_cupy")
    old["ratios"]["lbm_vs_cupy"] = 27.2
    got = merge_reports(old, new, ["stencil", "lbm"], entries=["stencil", "lbm", "lbm_cupy"])
    assert got["ratios"]["lbm_vs_cupy"] == 27.2  # lbm_cupy's, not re-run: kept
    assert "lbm_fused_vs_cupy" in got["measurements"]
    assert "lbm_cupy" in got["measurements"]
    both = merge_reports(old, new, ["stencil", "lbm", "lbm_cupy"],
                         entries=["stencil", "lbm", "lbm_cupy"])
    assert "lbm_vs_cupy" not in both["ratios"]  # re-run without it: a stale case, dropped
    assert "lbm_fused_vs_cupy" not in both["measurements"]


def test_merge_owns_cases_by_the_entry_the_run_recorded():
    """Lesson 7's entries (tensorcore_matmul, tensorcore_attention) name their cases after
    the kernels and peers (cublas_bf16, matmul_mma_bf16, attention_mma_bf16): the run
    records each case's entry, and that, not the name, says what a merge replaces. (On the
    H200, 2026-12-05, the merge refused the whole run: "not part of".)"""
    old, new = _old(), _new()
    new["measurements"] = {"copy": _m(ms=0.9),
                           "cublas_bf16": {**_m(kind="compute"), "entry": "tensorcore_matmul"},
                           "matmul_mma_bf16": {**_m("matmul_mma_bf16_vs_cublas_bf16",
                                                    "cublas_bf16", kind="compute"),
                                               "entry": "tensorcore_matmul"}}
    new["ratios"] = {"matmul_mma_bf16_vs_cublas_bf16": 0.48}
    got = merge_reports(old, new, ["tensorcore_matmul"],
                        entries=["stencil", "lbm", "tensorcore_matmul"])
    assert got["ratios"]["matmul_mma_bf16_vs_cublas_bf16"] == 0.48
    assert got["ratios"]["stencil_vs_copy"] == 0.24  # not re-run: kept
    assert got["measurements"]["matmul_mma_bf16"]["entry"] == "tensorcore_matmul"
    new["measurements"]["stencil"] = {**_m("stencil_vs_copy", "copy"), "entry": "stencil"}
    with pytest.raises(ValueError, match="not part"):  # a case of another entry: refused
        merge_reports(old, new, ["tensorcore_matmul"],
                      entries=["stencil", "lbm", "tensorcore_matmul"])


@pytest.mark.parametrize("spoil,match", [
    (lambda o, n: n.update(mode="sim"), "simulator"),
    (lambda o, n: n["environment"].update(gpu="NVIDIA A100"), "two GPUs"),
    (lambda o, n: n.update(size="small"), "sizes differ"),
    (lambda o, n: n["measurements"].update(vector_add=_m("vector_add_vs_copy")), "not part"),
])
def test_merge_refuses_what_would_mix_runs(spoil, match):
    old, new = _old(), _new()
    spoil(old, new)
    with pytest.raises(ValueError, match=match):
        merge_reports(old, new, ["stencil", "lbm"])


def test_cli_merges_into_the_json_and_rewrites_the_markdown(tmp_path, monkeypatch):
    target, md = tmp_path / "b.json", tmp_path / "b.md"
    target.write_text(json.dumps(_old()))
    seen = []

    def fake_main(argv):  # what `cudacourse bench --only ... --json TMP` writes on a GPU
        seen.append(argv)
        out = argv[argv.index("--json") + 1]
        open(out, "w").write(json.dumps(_new()))
        return 0

    monkeypatch.setattr(bench_main, "main", fake_main)
    rc = bench_main.merge_main(["--only", "stencil,lbm", "--json", str(target), "--merge",
                                "--markdown", str(md), "--no-progress"])
    assert rc == 0
    assert seen[0][:1] == ["--no-progress"] and "--merge" not in seen[0]
    assert str(target) not in seen[0]  # the run writes elsewhere; the target is merged into
    got = json.loads(target.read_text())
    assert got["ratios"]["stencil_vs_copy"] == 0.9 and got["ratios"]["vector_add_vs_copy"] == 0.83
    assert "--merge" in got["merges"][0]["command"]
    assert "re-measured on" in md.read_text()


@pytest.mark.skipif(not device.is_simulator(), reason="on a GPU the run really measures "
                    "(minutes, and a real merge); the fake-run test above covers the CLI")
def test_cli_in_the_simulator_leaves_the_report_unchanged(tmp_path, capsys):
    target = tmp_path / "b.json"
    target.write_text(json.dumps(_old()))
    before = target.read_text()
    rc = bench_main.merge_main(["--only", "lbm_cupy", "--json", str(target), "--merge",
                                "--no-progress"])
    assert rc == 2 and target.read_text() == before
    assert "simulator smoke pass" in capsys.readouterr().err
    assert bench_main.merge_main(["--merge", "--json", str(target)]) == 2  # no --only
