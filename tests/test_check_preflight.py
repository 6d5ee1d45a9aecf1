"""Instrumented first (check/_preflight.py, issue 45 "No mistake poisons the learner's GPU").

On a GPU an out-of-bounds learner kernel leaves the process's CUDA context unusable, so no
launch of learner code may run before its index-checked instrumented build has run the same
launch and found no access outside an array. The simulator is the only device here:
``CUDACOURSE_PREFLIGHT=1`` takes the GPU's path in it (the same hook, the same instrumented
build, run by the simulator), and ``_preflight.spying()`` records the order of the launches.
Per exercise, an out-of-bounds mutant of its master (the mutation engine's) must be refused
before its raw kernel ever runs, with the index named as the simulator names it; a right
answer checked next in the same process passes. The whole set of masters under this path,
and the same verdict as the simulator's own path for every mutant, is the nightly profile's
(CUDACOURSE_NIGHTLY=1). What only an H200 can show (the context still usable after the
refusal) is listed in docs/architecture.md and run by the gpu-marked test at the end.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

import cudacourse.check as check
from cudacourse.check import _engine as E
from cudacourse.check import _preflight as P
from cudacourse.check.mutate import masters
from cudacourse.check.mutate.operators import BY_NAME, mutants
from cudacourse.course import lessons

ROOT = Path(__file__).resolve().parents[1]
NIGHTLY = os.environ.get("CUDACOURSE_NIGHTLY") == "1"
# Per exercise, the out-of-bounds mutant: (which source it changes, operator, which of that
# operator's mutants). The host-function exercises launch the lesson's kernel: their mistake
# is in that kernel (the prelude), launched by the master host function.
OOB = {
    "vector_add": ("cell", "drop_guard", 0),
    "mirror": ("cell", "drop_guard", 0),
    "saxpy": ("cell", "index_shift", 0),
    "warp_sum": ("cell", "drop_guard", 0),
    "gpu_scale": ("prelude", "drop_guard", 0),
    "smooth_on_device": ("prelude", "drop_guard", 0),
    "pipelined_scale": ("prelude", "drop_guard", 0),
    "tiled_matmul": ("cell", "drop_guard", 0),
    "block_sum": ("cell", "drop_guard", 0),
    "flash_rows": ("cell", "drop_guard", 0),
    "heat_step": ("cell", "drop_guard", 0),
    "diffuse": ("prelude", "drop_guard", 0),
    "lbm_step": ("cell", "widen_guard", 0),
    "mma_tile": ("cell", "index_shift", 1),
    "mma_matmul": ("cell", "index_shift", 1),  # not instrumentable: its first run is replayed
    "mma_attention": ("cell", "index_shift", 1),
}
# online_update is a device function of scalars: no index of it can leave an array. What it
# shows is the routing of a course kernel that calls learner code (its wrappers): a mutant
# with wrong values, whose check fails at its first launch.
ROUTED_ONLY = {"online_update": ("cell", "arithmetic", 0)}
_FILES = itertools.count()
OOB_CAUSES = {"out_of_bounds_read", "out_of_bounds_write", "off_by_one_guard", "off_by_one",
              "periodic_wrap"}


def _exercises() -> dict:
    return {ex.name: ex for ex in masters.exercises(ROOT)}


def _load(ex: masters.Exercise, tmp: Path, prelude: str, source: str):
    # a file of its own each (checkers and the rewrite read a kernel's lines by file name)
    path = tmp / f"subject_{ex.name}_{next(_FILES)}.py"
    path.write_text(prelude + "\n" + source + "\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_cc_preflight_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, ex.name)


def _mutant(ex: masters.Exercise, tmp: Path, where: str, operator: str, k: int):
    text = ex.source if where == "cell" else ex.prelude
    m = mutants(text, [BY_NAME[operator]])[k]
    if where == "cell":
        return _load(ex, tmp, ex.prelude, m.source)
    return _load(ex, tmp, m.source, ex.source)


def _first_runs_before_raw(seen: list) -> None:
    """Every raw launch comes right after its own first run (instrumented or replayed)."""
    for p, (event, name) in enumerate(seen):
        if event == "raw":
            assert p > 0 and seen[p - 1] in (("instrumented", name), ("replayed", name)), seen


@pytest.fixture
def gpu_path(monkeypatch):
    monkeypatch.setenv("CUDACOURSE_PREFLIGHT", "1")
    assert P.required()


def test_every_checker_is_an_exercise_whose_launches_are_tested_here():
    """The checkers, from the lesson registry and ``cudacourse.check.__all__``, are exactly
    the exercises below: none escapes the per-exercise test."""
    public = {n for n in check.__all__ if n.startswith("check_")}
    registry = {name for lesson in lessons.LESSONS for name in lesson.checkers}
    by_checker = {ex.checker: ex.name for ex in _exercises().values()}
    assert public == set(by_checker) == registry
    assert set(by_checker.values()) == set(OOB) | set(ROUTED_ONLY)


@pytest.mark.parametrize("name", sorted(OOB))
def test_an_out_of_bounds_mutant_is_refused_before_its_raw_kernel_runs(name, gpu_path,
                                                                       tmp_path):
    ex = _exercises()[name]
    subject = _mutant(ex, tmp_path, *OOB[name])
    with P.spying() as seen, pytest.raises(check.CheckFailure) as err:
        getattr(check, ex.checker)(subject)
    assert seen and seen[-1][0] == "refused", (seen, str(err.value))
    _first_runs_before_raw(seen)
    assert err.value.cause in OOB_CAUSES, str(err.value)
    where = getattr(err.value, "where", None)
    if where is not None:  # the first run's own verdict: the index it refused, by number
        assert str(where[1]) in err.value.message, str(err.value)


@pytest.mark.parametrize("name", sorted(ROUTED_ONLY))
def test_a_course_kernel_calling_learner_code_runs_first_too(name, gpu_path, tmp_path):
    ex = _exercises()[name]
    subject = _mutant(ex, tmp_path, *ROUTED_ONLY[name])
    with P.spying() as seen, pytest.raises(check.CheckFailure):
        getattr(check, ex.checker)(subject)
    assert seen[:2] == [("instrumented", "step"), ("raw", "step")], seen


CHEAP_AFTER = ["vector_add", "gpu_scale"] if not NIGHTLY else sorted(OOB) + sorted(ROUTED_ONLY)


@pytest.mark.parametrize("name", CHEAP_AFTER)
def test_the_next_check_in_the_same_process_passes(name, gpu_path, tmp_path):
    """After a refusal, a right answer checked in the same process passes, every launch of it
    run first (on an H200 this is the context left usable: see docs/architecture.md)."""
    ex = _exercises()[name]
    if name in OOB:
        with pytest.raises(check.CheckFailure):
            getattr(check, ex.checker)(_mutant(ex, tmp_path, *OOB[name]))
    master = _load(ex, tmp_path, ex.prelude, ex.source)
    with P.spying() as seen:
        assert "passes" in getattr(check, ex.checker)(master)
    assert seen and not any(e == "refused" for e, _ in seen)
    _first_runs_before_raw(seen)


SAME = ["gpu_scale", "vector_add"] if not NIGHTLY else sorted(OOB)


@pytest.mark.sim_only(reason="its simulator half runs the out-of-bounds kernel raw: on a GPU "
                     "that is the very launch that poisons the process")
@pytest.mark.parametrize("name", SAME)
def test_the_gpu_path_names_the_mistake_as_the_simulator_does(name, monkeypatch, tmp_path):
    """The simulator's own path (every index checked by the simulator, no first run) and the
    GPU's path give one verdict, up to which thread is named first. (A negative index is the
    exception: NumPy wraps it in the simulator; a GPU's first run refuses it, as it must.)"""
    ex = _exercises()[name]
    verdicts = []
    for forced in ("0", "1"):
        monkeypatch.setenv("CUDACOURSE_PREFLIGHT", forced)
        with pytest.raises(check.CheckFailure) as err:
            getattr(check, ex.checker)(_mutant(ex, tmp_path, *OOB[name]))
        verdicts.append((err.value.cause, err.value.message))
    if "index -1" not in verdicts[1][1]:
        # which thread is named first (and so its index) follows the order threads ran in
        assert verdicts[0][0] == verdicts[1][0]
        def shape(text: str) -> str:  # the words, without the thread's numbers
            return re.sub(r"\d+", "#", re.sub(r"(thread|block) (\([^)]*\)|\d+)", r"\1", text))

        assert shape(verdicts[0][1]) == shape(verdicts[1][1])


# --- the mechanism itself, on small kernels -------------------------------------------------

@cuda.jit
def _unguarded(a, ran):
    i = cuda.grid(1)
    ran[0] = 1.0  # any thread of the raw kernel leaves this mark in the caller's array
    a[i] = a[i] + 1.0  # no guard: threads past the end go outside


@cuda.jit
def _guarded_in_place(a, ran):
    i = cuda.grid(1)
    ran[0] = 1.0
    if i < a.shape[0]:
        a[i] = a[i] + 1.0


@cuda.jit(device=True)
def _add_all(a):
    for i in range(a.shape[0] + 1):  # one past the end
        a[i] += 1.0


@cuda.jit
def _through_a_device_function(a, ran):
    ran[0] = 1.0
    if cuda.grid(1) == 0:
        _add_all(a)  # the array goes into a call: the rewrite cannot follow it


def test_the_raw_kernel_never_runs_when_its_first_run_goes_outside(gpu_path):
    a = cuda.to_device(np.arange(10, dtype=np.float32))
    ran = cuda.to_device(np.zeros(1, np.float32))
    with P.guarding(), P.spying() as seen, pytest.raises(P.OutOfBoundsFound) as err:
        _unguarded[1, 16](a, ran)
    assert seen == [("instrumented", "_unguarded"), ("refused", "_unguarded")]
    assert ran.copy_to_host()[0] == 0.0  # the raw kernel left no mark: it never ran
    assert (a.copy_to_host() == np.arange(10)).all()  # and the first run wrote only copies
    assert err.value.cause == "out_of_bounds_read" and "index 10" in err.value.message


def test_a_kernel_that_writes_in_place_sees_its_inputs_unchanged_by_the_first_run(gpu_path):
    a = cuda.to_device(np.arange(10, dtype=np.float32))
    ran = cuda.to_device(np.zeros(1, np.float32))
    host = np.arange(10, dtype=np.float32)
    with P.guarding(), P.spying() as seen:
        _guarded_in_place[1, 16](a, ran)
        _guarded_in_place[1, 16](host, ran)  # a NumPy argument (Numba copies it in and out)
    assert seen == [("instrumented", "_guarded_in_place"), ("raw", "_guarded_in_place")] * 2
    assert (a.copy_to_host() == np.arange(10) + 1).all()  # once: the raw launch's add
    assert (host == np.arange(10) + 1).all()


def test_a_kernel_the_rewrite_cannot_follow_runs_first_in_the_simulator(gpu_path):
    """On a GPU this first run is a simulator child (``_replay``), on the same values sent as
    JSON; here the same part runs in this process, through the same wire format."""
    a = cuda.to_device(np.arange(10, dtype=np.float32))
    ran = cuda.to_device(np.zeros(1, np.float32))
    with P.guarding(), P.spying() as seen, pytest.raises(E.CheckFailure) as err:
        _through_a_device_function[1, 4](a, ran)
    assert seen == [("replayed", "_through_a_device_function"),
                    ("refused", "_through_a_device_function")], seen
    assert ran.copy_to_host()[0] == 0.0
    assert err.value.cause == "out_of_bounds_read" and "10" in err.value.message


def test_launch_arguments_cross_to_a_child_as_json_unchanged():
    import json

    values = [np.arange(12, dtype=np.float32).reshape(3, 4), np.float32(0.25), 7,
              np.arange(5, dtype=np.uint16), np.int64(-3),
              np.array(2.5, np.float32)]  # 0-d: cuda.to_device(alpha) makes one (H200)
    back = [P.unwire_arg(json.loads(json.dumps(P.wire_arg(v)))) for v in values]
    for v, b in zip(values, back):
        assert type(b) is type(v) or (isinstance(v, int) and isinstance(b, int))
        assert np.array_equal(np.asarray(b), np.asarray(v))
        assert np.asarray(b).dtype == np.asarray(v).dtype
    assert not P._is_array(np.float32(1.0)) and P._is_array(np.array(1.0))


def test_only_launches_of_learner_code_run_first():
    from cudacourse.check import attention
    from cudacourse.kernels import vector

    kernels = [getattr(vector, n) for n in dir(vector) if hasattr(getattr(vector, n), "py_func")
               and not getattr(getattr(vector, n), "_device", False)]
    assert kernels and not any(P.learner_code(k) for k in kernels)  # the course's own
    assert P.learner_code(_unguarded)
    assert P.learner_code(attention._step_kernel(_add_all))  # a course wrapper of learner code


def test_numbas_own_kernels_are_not_learner_code():
    """A learner's host code that assigns a device array into another (``d_u[:] = d_v``)
    makes Numba launch a kernel of its own on a GPU: it is not the learner's, and its
    first run must not be tried (the simulator cannot run it: on the H200, 2026-12-05,
    "<intrinsic to_fixed_tuple> is not usable in pure-python" failed two time-loop checks)."""
    import os

    import numba

    src = "def _assign(a, b):\n    a[0] = b[0]\n"
    where = os.path.join(os.path.dirname(numba.__file__), "_cc_fake_internal.py")
    namespace: dict = {}
    exec(compile(src, where, "exec"), namespace)
    assert not P.learner_code(cuda.jit(namespace["_assign"]))
    learner = {}
    exec(compile(src, "/tmp/ipykernel_1/123.py", "exec"), learner)  # a notebook cell's
    assert P.learner_code(cuda.jit(learner["_assign"]))


def test_off_by_default_in_the_simulator_and_on_by_default_on_a_gpu(monkeypatch):
    monkeypatch.delenv("CUDACOURSE_PREFLIGHT", raising=False)
    monkeypatch.setattr(E, "simulator", lambda: True)
    assert not P.required()  # the simulator checks every index itself
    monkeypatch.setattr(E, "simulator", lambda: False)
    assert P.required()
    monkeypatch.setenv("CUDACOURSE_PREFLIGHT", "0")
    assert not P.required()


@pytest.mark.gpu
def test_on_a_gpu_the_context_stays_usable_after_every_out_of_bounds_mutant(tmp_path):
    """The H200's proof, in one process: every exercise's out-of-bounds mutant is refused
    before its raw kernel runs; then every master's check and a plain copy still work
    (without the first run, the first refusal would leave every later CUDA call failing with
    CUDA_ERROR_ILLEGAL_ADDRESS)."""
    exs = _exercises()
    for name in sorted(OOB):
        ex = exs[name]
        with P.spying() as seen, pytest.raises(check.CheckFailure) as err:
            getattr(check, ex.checker)(_mutant(ex, tmp_path, *OOB[name]))
        assert seen and seen[-1][0] == "refused", (name, seen, str(err.value))
        _first_runs_before_raw(seen)
        assert err.value.cause in OOB_CAUSES, (name, str(err.value))
    for name in sorted(OOB) + sorted(ROUTED_ONLY):
        ex = exs[name]
        assert "passes" in getattr(check, ex.checker)(_load(ex, tmp_path, ex.prelude,
                                                            ex.source)), name
    assert (cuda.to_device(np.arange(4)).copy_to_host() == np.arange(4)).all()
