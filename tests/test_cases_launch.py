"""cudacourse.bench.cases_launch: the launch-overhead cases check their result first."""

from __future__ import annotations

import itertools

import pytest

from cudacourse.runtime import device, timing
from cudacourse.kernels import vector
from cudacourse.bench import cases_launch as CL
from cudacourse.bench.core import Ctx, run_case


def test_per_call_us_is_the_median_batch_divided_by_the_calls(monkeypatch):
    clock = itertools.count(step=0.001)  # every reading 1 ms after the previous one
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    calls = []
    assert CL.per_call_us(lambda: calls.append(1), calls=4, batches=3, warmup=2) == \
        pytest.approx(1e3 / 4)
    assert len(calls) == 2 + 3 * 4


def test_every_case_is_named_for_its_json_key():
    cases = CL.launch_overhead_cases(Ctx("small", seed=0))
    assert [c.ratio for c in cases] == [f"{c.name}_us" for c in cases]
    assert cases[0].ratio == "launch_overhead_us" and all(c.kind == "value" for c in cases)


def test_course_and_bare_cases_pass_their_check_here():
    ctx = Ctx("small", seed=0)
    for case in CL.launch_overhead_cases(ctx):
        m = run_case(case, ctx, timer=None)
        if case.needs == "course":
            assert m.status == "ok", m.detail
        elif device.is_simulator():
            assert m.status == "skipped"


def test_a_launcher_that_writes_nothing_fails(monkeypatch):
    monkeypatch.setattr(vector, "vector_add", lambda a, b, out: out)
    ctx = Ctx("small", seed=0)
    m = run_case(CL.launch_overhead_cases(ctx)[0], ctx, timer=None)
    assert m.status == "FAILED" and "1 of 1 values differ" in m.detail
