"""bench/cases_tensorcore: lesson 7's cases feed the ratio names issue 40 asks for, and pass
their correctness checks (a smoke pass in the simulator)."""

from __future__ import annotations

import pytest

from cudacourse import bench
from cudacourse.runtime import device

RATIOS = {"matmul_mma_bf16_vs_cublas_bf16", "attention_mma_bf16_vs_sdpa_bf16",
          "attention_mma_bf16_vs_sdpa_bf16_causal", "attention_mma_bf16_vs_sdpa_bf16_d128",
          "attention_mma_bf16_vs_fused_f32"}
NAMES = ["tensorcore_matmul", "tensorcore_attention"]


def test_the_ratio_names_and_what_they_divide_by():
    ctx = bench.Ctx("small", seed=1)
    cases = {c.name: c for n in NAMES for c in bench.ENTRIES[n].cases(ctx)}
    pairs = {c.ratio: c.vs for c in cases.values() if c.ratio}
    pairs.update(p for c in cases.values() for p in c.more)
    assert set(pairs) == RATIOS
    assert all(vs in cases for vs in pairs.values()), "every divisor is measured in the entry"
    assert pairs["attention_mma_bf16_vs_fused_f32"] == "attention_tc_fused_f32"


@pytest.mark.skipif(not device.is_simulator(), reason="the simulator's smoke pass")
def test_the_course_cases_pass_their_checks_in_the_simulator():
    ctx = bench.Ctx("sim", seed=3)
    ms = bench.run(NAMES, ctx, repeats=1, progress=False)
    ours = {m.name: m for m in ms.values() if not m.name.startswith(("cublas", "attention_tc_sdpa"))}
    assert set(ours) == {"matmul_mma_bf16", "attention_tc_fused_f32", "attention_mma_bf16",
                         "attention_mma_bf16_causal", "attention_mma_bf16_d128"}
    bad = {n: f"{m.status}: {m.detail}" for n, m in ours.items() if m.status != "ok"}
    assert not bad
