"""The instrumented build bounds every ``while`` loop (check/_instrument.py, ``LOOP_CAP``).

A GPU kernel that never ends cannot be interrupted: the learner's notebook would hang. So the
instrumented build, which on a GPU runs before any launch of learner code (``_preflight``) and
is the observed launch of a native session, counts each thread's while-loop trips; past the
cap the first thread there records its loop and the numbers its condition reads and leaves,
the launch ends, and the check fails ``endless_loop`` naming the line and the thread, while
the learner's own kernel never runs.

Here the GPU's path runs in the simulator (CUDACOURSE_NATIVE=1, CUDACOURSE_PREFLIGHT=1) with a
small cap (the simulator runs ~4,400 threads/s); on a GPU (CUDACOURSE_DEVICE=gpu) the very same
tests run the build compiled for the GPU with the real cap, 2**20 trips per thread.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import cudacourse.check as check
from cudacourse.check import _compile
from cudacourse.check import _engine as E
from cudacourse.check import _instrument as I
from cudacourse.check import _observe as O
from cudacourse.check import _preflight as P
from cudacourse.check.mutate import masters, operators, runner
from cudacourse.runtime import device

ROOT = Path(__file__).resolve().parents[1]
SIM_CAP = 32  # simulated trips per thread before the build calls a loop endless


@pytest.fixture
def gpu_path(monkeypatch):
    """The GPU's path (instrumented first, native evidence), with the simulator's small cap;
    on a GPU the real cap."""
    monkeypatch.setenv("CUDACOURSE_NATIVE", "1")
    monkeypatch.setenv("CUDACOURSE_PREFLIGHT", "1")
    if device.is_simulator():
        monkeypatch.setattr(I, "LOOP_CAP", SIM_CAP)
    return I.LOOP_CAP


@cuda.jit
def halves_to_zero(a, b, out):
    # never ends: offset reaches 0, and 0 // 2 stays 0 (the test should have been > 0)
    i = cuda.grid(1)
    offset = 16
    while offset >= 0:
        offset //= 2
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@cuda.jit
def tree_then_add(a, b, out):
    # a right loop (a tree's levels: 16, 8, 4, 2, 1), then the sum
    i = cuda.grid(1)
    offset = 16
    while offset > 0:
        offset //= 2
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


def _line_of(kernel, text: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(kernel.py_func)
    return first + next(k for k, ln in enumerate(lines) if text in ln)


def test_an_endless_while_loop_is_refused_with_its_line(gpu_path):
    with P.spying() as seen:
        with pytest.raises(check.CheckFailure) as info:
            check.check_vector_add(halves_to_zero, seed=3)
    exc = info.value
    assert exc.cause == "endless_loop", str(exc)
    text = str(exc)
    line = _line_of(halves_to_zero, "while offset >= 0:")
    assert f"the loop at line {line} (`while offset >= 0:`) never ends" in text, text
    assert "offset = 0" in text and f"went round it {gpu_path} times" in text, text
    assert "of block (" in text, text  # the thread is named
    # the learner's kernel itself never ran: its build was, and refused it
    assert ("refused", "halves_to_zero") in seen and ("raw", "halves_to_zero") not in seen, seen


def test_a_launch_of_an_endless_kernel_never_runs_raw(gpu_path):
    """However it is launched (here as a learner's host function would, inside a check's
    hook), the launch's instrumented first run refuses it: the raw kernel never starts."""
    a = cuda.to_device(np.ones(8, np.float32))
    out = cuda.to_device(np.zeros(8, np.float32))
    with P.guarding(), P.spying() as seen, pytest.raises(E.CheckFailure) as err:
        halves_to_zero[2, 4](a, a, out)
    assert err.value.cause == "endless_loop", str(err.value)
    assert seen == [("instrumented", "halves_to_zero"), ("refused", "halves_to_zero")], seen
    assert (out.copy_to_host() == 0).all()  # the first run wrote copies; the raw one never ran


def test_the_record_names_the_first_thread_its_loop_and_numbers(gpu_path):
    obs = I.NativeObservation()
    a = obs.watch(cuda.to_device(np.ones(8, np.float32)), "a")
    b = obs.watch(cuda.to_device(np.ones(8, np.float32)), "b")
    out = obs.watch(cuda.to_device(np.zeros(8, np.float32)), "out")
    with pytest.raises(E.CheckFailure) as info:
        obs.run(halves_to_zero, 2, 4, a, b, out, name="halves_to_zero", strict=True)
    assert info.value.cause == "endless_loop"
    rec = obs.endless
    assert rec["line"] == _line_of(halves_to_zero, "while offset >= 0:")
    assert rec["code"] == "while offset >= 0:" and rec["values"] == "offset = 0"
    assert rec["trips"] == gpu_path and rec["hits"] == 8  # every thread met the cap, once
    (bx, by, bz), (tx, ty, tz) = rec["thread"]
    assert 0 <= bx < 2 and 0 <= tx < 4 and (by, bz, ty, tz) == (0, 0, 0, 0)


def test_a_right_loop_is_untouched(gpu_path):
    with P.spying() as seen:
        assert "passes" in check.check_vector_add(tree_then_add, seed=3)
    assert ("raw", "tree_then_add") in seen or ("instrumented", "tree_then_add") in seen


@cuda.jit
def counts_to(out, n):
    i = cuda.grid(1)
    j = 0
    while j < n:
        j += 1
    if i < out.shape[0]:
        out[i] = j


@pytest.mark.parametrize("extra", [0, 1])
def test_the_cap_is_the_boundary(gpu_path, extra):
    """A loop of exactly LOOP_CAP trips is a right loop; one trip more is endless, and the
    record keeps the numbers its condition read (a local and a number argument)."""
    obs = I.NativeObservation()
    out = obs.watch(cuda.to_device(np.zeros(4, np.int64)), "out")
    n = gpu_path + extra
    if not extra:
        obs.run(counts_to, 1, 4, out, n, name="counts_to", strict=True)
        assert obs.endless is None and (out.copy_to_host() == n).all()
        return
    with pytest.raises(E.CheckFailure) as info:
        obs.run(counts_to, 1, 4, out, n, name="counts_to", strict=True)
    assert info.value.cause == "endless_loop"
    assert obs.endless["values"] == f"j = {gpu_path}, n = {n}", obs.endless
    assert f"j = {gpu_path}, n = {n}" in str(info.value)


def _exercise(name: str):
    return next(e for e in masters.exercises(ROOT) if e.name == name)


# the master's endless mutants: (exercise, operator, the mutated line)
ENDLESS = [("warp_sum", "widen_guard", "while offset >= 0:"),
           ("warp_sum", "constant_off_by_one", "offset //= 1"),
           ("block_sum", "widen_guard", "while s >= 0:"),
           ("block_sum", "constant_off_by_one", "s //= 1")]


@pytest.mark.parametrize("name,operator,changed", ENDLESS,
                         ids=[f"{n}-{o}" for n, o, _ in ENDLESS])
def test_the_masters_endless_mutants_are_named_endless_loop(gpu_path, monkeypatch, name,
                                                           operator, changed):
    ex = _exercise(name)
    found = [m for m in operators.mutants(ex.source)
             if m.operator == operator and changed in m.source]
    assert len(found) == 1, [m.source for m in found]
    # warp_sum shuffles: after a failure its native session would re-run the kernel in the
    # simulator for warp-level undefined behaviour, not after a loop it bounded (on a GPU the
    # re-run would spin until the simulator's budget, to say the same)
    reran = []
    monkeypatch.setattr(O, "_remaining", lambda *a, **k: reran.append(a))
    out = runner.evaluate(ex, found[0].source, operator, found[0].line)
    assert (out.verdict, out.cause) == ("named", "endless_loop"), out
    assert not reran
    assert "while " in out.message and "never ends" in out.message, out.message
    assert out.english_in_ja == 0, out.ja


@pytest.mark.parametrize("name", ["warp_sum", "block_sum"])
def test_the_tree_reduction_masters_pass_on_the_gpus_path(gpu_path, name):
    ex = _exercise(name)
    out = runner.evaluate(ex, ex.source, "none")
    assert out.verdict == "equivalent" and not out.cause, out


# --- what the build keeps of a loop's condition, and that it compiles -------------------------

@cuda.jit
def loops_of_every_kind(x, out, n):
    shp = x.shape  # a tuple: never stored in the record (it would not compile)
    i, j = cuda.grid(2)
    k = 0
    v = 0.0
    # k and v are numbers; shp is not; n is a number argument
    while k < shp[0] and v < n:
        v += x[k, j] * 0.5
        k += 1
    done = False
    # a bool: not kept either
    while not done:
        done = True
    for t in range(2):
        while k > t + 100:  # never entered
            k -= 1
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = v


def test_only_names_that_surely_hold_numbers_are_kept():
    built = I.build(loops_of_every_kind, (0, 1), (2, 2), (2,))
    (_, code0, names0), (_, code1, names1), (_, _, names2) = built["loops"]
    assert code0 == "while k < shp[0] and v < n:" and names0 == ("k", "n", "v")
    assert code1 == "while not done:" and names1 == ()
    assert names2 == ("k", "t")  # t: a for loop's number over a range


@pytest.mark.sim_only(reason="the offline sm_90 compile gate runs in the simulator only")
def test_a_bounded_build_compiles_for_sm90():
    ok, why = _compile.status()
    if not ok:
        pytest.skip(f"no offline sm_90 compiler here: {why}")
    cases = ((loops_of_every_kind, (np.zeros((4, 4), np.float32),) * 2, (np.float32(3),)),
             (halves_to_zero, (np.zeros(8, np.float32),) * 3, ()))
    for kernel, arrays, scalars in cases:
        built = I.build(kernel, tuple(range(len(arrays))), tuple(a.ndim for a in arrays),
                        tuple(range(len(arrays), len(arrays) + len(scalars))))
        z = lambda n, dt: cuda.to_device(np.zeros(n, dt))  # noqa: E731
        extra = [z(8, np.int64), z(8, np.int32), z(8, np.int32), z(8, np.int32),
                 z(1, np.int32), z(8, np.int64), z(8, np.int64), z(4, np.int64),
                 z(I.LOOP_NAMES, np.float64)]
        for a in arrays:
            extra += [z(8, np.int32), z(8, np.int32), z(a.size, np.int32), np.float32(0)]
        args = [cuda.to_device(a) for a in arrays] + list(scalars) + extra
        k = built["kernel"]
        del k.__cc_instrumented__  # unmarked, so that the gate compiles the build itself
        try:
            res = _compile.gate(k, tuple(args), kernel.__name__)
        finally:
            k.__cc_instrumented__ = True
        assert res is not None, f"{kernel.__name__}: not compiled"


@cuda.jit(device=True)
def _count_down(k):
    while k > 0:
        k -= 1
    return k


@cuda.jit
def calls_a_looping_device_function(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i] + _count_down(3)


def test_a_while_loop_in_a_device_function_is_left_to_the_replay():
    # only the kernel's own loops are bounded: one in a device function the build calls
    # unchanged could spin beyond interruption, so the simulator replay decides instead
    assert "has a while loop" in I.plan(calls_a_looping_device_function)
