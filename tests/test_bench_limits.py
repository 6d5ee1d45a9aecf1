"""docs/benchmarks.json carries issue 35's goals beside its figures, and, for each goal it
misses, the Nsight Compute counters of the kernel that figure timed (bench/limits.py); the
kernel choices that run used are the modules' constants."""

import json
import runpy
from pathlib import Path

import pytest

from cudacourse.kernels import attention, lbm, matmul, stencil
from cudacourse.kernels import transpose as T
from cudacourse.bench import limits as L

ROOT = Path(__file__).resolve().parents[1]
REPORT = json.loads((ROOT / "docs" / "benchmarks.json").read_text())


def test_committed_limits_are_rendered_from_the_committed_run():
    assert REPORT["mode"] == "gpu" and REPORT["environment"]["gpu"] == "NVIDIA H200"
    assert len(REPORT["commit"]) == 40 and REPORT["date"].startswith(L.NCU_RUN[-10:])
    assert REPORT["limits"] == json.loads(json.dumps(L.limits(REPORT))), \
        "docs/benchmarks.json is stale: run python3 tools/bench_limits.py"


def test_every_missed_goal_of_a_course_kernel_carries_its_counters():
    goals = REPORT["limits"]["goals"]
    assert set(goals) == set(L.GOALS)
    for name, g in goals.items():
        assert g["value"] == REPORT["ratios"][name] and g["met"] == (g["value"] >= g["goal"])
        if not g["met"] and not name.startswith("attention_triton"):
            assert g["ncu"]["duration_ns"] > 0 and g["ncu"]["registers"] > 0, name
            assert g["kernel"] == L.profiled_label(name) and g["limit"], name


def test_the_run_used_the_modules_present_choices():
    """The bench of that run timed the kernels the modules now choose: what
    CUDACOURSE_CHOICES set then is what the constants say now."""
    picks = REPORT["choices"]
    now = {"matmul": matmul.BEST, "stencil": stencil.BEST, "lbm_kernel": lbm.BEST_KERNEL,
           "lbm_block": tuple(lbm.DEFAULT_BLOCK),
           "transpose": (T.BEST.tile, T.BEST.rows, T.BEST.pad),
           "attention_d128": tuple(getattr(attention.FAST_GPU_CONFIGS[128], f)
                                   for f in ("bq", "bk", "tr", "tc", "prefetch", "maxreg"))}
    for key, value in picks.items():
        if key in ("previous", "why"):
            continue
        assert json.loads(json.dumps(now[key])) == value, key
    for key in set(now) - set(picks):  # not chosen by the run: the constant it ran with
        assert json.loads(json.dumps(now[key])) == picks.get("previous", {}).get(key, json.loads(
            json.dumps(now[key]))), key
    assert REPORT["measurements"]["stencil"]["label"].startswith(
        f"heat step (9-point), {stencil.BEST[0]}, {stencil.BEST[1][0]}x{stencil.BEST[1][1]}")


def test_ncu_csv_and_manifest_disagreeing_is_refused(tmp_path):
    src = L.SWEEPS / f"{L.NCU_RUN}_lbm.csv"
    with pytest.raises(ValueError, match="manifest names 3"):
        L.ncu_launches(src, ["a", "b", "c"])
    got = L.ncu_launches(src, ["compile", "full"])
    assert got["full"]["registers"] == 44 and got["full"]["l1tex_stall_cycles"] > 0


CHOOSE = runpy.run_path(str(ROOT / "tools" / "choose_candidates.py"))


def _row(what, ms, current=False, **kw):
    return {"what": what, "ms": ms, "current": current, **kw}


def test_chooser_takes_a_clear_winner_and_keeps_the_choice_within_noise():
    rows = [_row("stencil", 0.66, True, variant="rows", block=[128, 1, 16]),
            _row("stencil", 0.59, variant="rowsblock", block=[256, 1, 16]),
            _row("lbm", 0.3846, True, kernel="plain", block=[128, 2]),
            _row("lbm", 0.3826, kernel="maxreg40", block=[128, 2]),  # 0.5%: noise
            _row("matmul", 4.5, True, variant="register128x256v4"),
            {"what": "matmul", "variant": "register128x256v4g", "failed": "TypingError"},
            {"what": "matmul", "variant": "register128v4r128", "skipped": "budget"}]
    got = CHOOSE["choose"]({"rows": rows})
    assert got["stencil"] == ("rowsblock", (256, 1, 16))
    assert got["lbm_kernel"] == "plain" and got["lbm_block"] == (128, 2)
    assert got["matmul"] == "register128x256v4"  # the others failed or were not timed
    assert got["previous"]["stencil"] == ("rows", (128, 1, 16))


def test_chooser_ignores_a_faster_kernel_that_failed_its_check():
    rows = [_row("matmul", 4.5, True, variant="a"), _row("matmul", 1.0, variant="b"),
            {"what": "matmul", "variant": "b", "failed": "AssertionError"}]
    assert CHOOSE["choose"]({"rows": rows})["matmul"] == "a"


def test_a_choices_file_moves_the_modules_choices(tmp_path):
    """launch.chosen: read once at import, so a child process sees the file."""
    import os
    import subprocess
    import sys

    f = tmp_path / "choices.json"
    f.write_text(json.dumps({"stencil": ["rows", [128, 1, 8]], "lbm_kernel": "maxreg40",
                             "matmul": "register128v4r128", "transpose": [32, 8, 1]}))
    code = ("from cudacourse import stencil, lbm, matmul, transpose; "
            "print(stencil.BEST, lbm.BEST_KERNEL, matmul.BEST, matmul.MATMUL_VARIANTS[-1], "
            "transpose.BEST.name)")
    env = {**os.environ, "CUDACOURSE_CHOICES": str(f), "NUMBA_ENABLE_CUDASIM": "1",
           "CUDACOURSE_DEVICE": "sim",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                      os.environ.get("PYTHONPATH")]))}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=True).stdout.strip().splitlines()[-1]
    assert out == ("('rows', (128, 1, 8)) maxreg40 register128v4r128 register128v4r128 "
                   "tiled_padded")
