"""The checkers' shared engine: structured failures, the one detector, clean failure display,
launch diagnoses. Runs in the simulator and on a GPU (the few simulator-only cases say why).
"""

from __future__ import annotations

import inspect
import pickle
import time
import traceback

import numpy as np
import pytest

import cudacourse
from cudacourse.kernels import vector as V
from cudacourse.check import CheckFailure, _engine as E, _origin
from cudacourse.check import check_vector_add
from numba import cuda

SIM = cudacourse.MODE == "sim"


# --- learner kernels used below ---------------------------------------------------------------

@cuda.jit
def add_kernel(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def stub_kernel(a, b, out):
    # YOUR CODE HERE
    raise NotImplementedError()


@cuda.jit
def leftover_kernel(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]
    raise NotImplementedError()


@cuda.jit(device=True)
def add_device(x, y):
    return x + y


def add_plain(a, b, out):
    out[:] = a + b


@cuda.jit
def two_params(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i]


@cuda.jit
def returns_value(a, b, out):
    i = cuda.grid(1)
    return a[i] + b[i]


@cuda.jit
def calls_np_dot(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = np.dot(a, b)


# --- structured failures ---------------------------------------------------------------------

def test_failure_carries_fields_and_reads_diagnosis_first():
    with pytest.raises(CheckFailure) as info:
        E.fail("unwritten", "out[5] was never written.", hint="does every element get a thread?", context={"n": np.int64(7)})
    exc = info.value
    assert isinstance(exc, AssertionError)
    assert (exc.cause, exc.context) == ("unwritten", {"n": np.int64(7)})
    assert exc.hint == "Does every element get a thread?"
    assert str(exc).startswith("out[5] was never written. Does every element")
    assert str(exc).endswith("[n=7]")


def test_old_style_fail_still_works_and_extra_keywords_join_context():
    with pytest.raises(CheckFailure) as info:
        E.fail("wrong_values", "plain message")
    assert (info.value.cause, info.value.hint, str(info.value)) == ("wrong_values", "",
                                                                    "plain message")
    with pytest.raises(CheckFailure) as info:
        E.fail("race", "m", index=3)
    assert info.value.context == {"index": 3}


def test_failure_survives_json_and_pickle_with_its_fields():
    exc = CheckFailure("msg", cause="missing_barrier", hint="sync", context={"i": (1, 2)})
    back = CheckFailure.from_dict(exc.to_dict())
    again = pickle.loads(pickle.dumps(exc))
    for other in (back, again):
        assert (other.message, other.cause, other.hint) == ("msg", "missing_barrier", "Sync")
        assert other.context == {"i": [1, 2]}


def test_wrapped_text_puts_the_diagnosis_alone_first():
    long = "x" * 20 + " " + "word " * 40
    exc = CheckFailure(long, cause="wrong_values", hint="fix it", context={"n": 3})
    lines = exc.wrapped().splitlines()
    assert all(len(line) <= E.WIDTH for line in lines)
    assert lines[0].startswith("x" * 20) and len("CheckFailure: " + lines[0]) <= E.WIDTH
    assert lines[-2].startswith("Fix: Fix it") and lines[-1] == "Case: n=3"


def test_values_are_formatted_as_a_learner_writes_them():
    assert E.at("c", (np.int64(0), np.int64(3))) == "c[0, 3]"
    assert E.at("out", np.int64(5)) == "out[5]"
    assert E.fmt(np.float32(-13.8)) == "-13.8"
    assert E.fmt((np.int64(2), 3)) == "(2, 3)"
    assert E.fmt(float("nan")) == "NaN"


def test_simulator_internals_become_plain_words():
    text = E.plain("tid=[3, 0, 0] ctaid=[7, 0, 0]: FakeCUDAArray got np.float32(2.5)")
    assert text == "thread (3, 0, 0) of block (7, 0, 0): device array got 2.5"
    assert E.plain("ctaid=[7, 0, 0]") == "block (7, 0, 0)"


def test_compare_reports_a_2d_index_and_value_plainly():
    got = np.zeros((2, 3), np.float32)
    want = got.copy()
    want[1, 2] = 1.5
    got[1, 2] = -13.8
    with pytest.raises(CheckFailure) as info:
        E.compare(got, want, name="c")
    assert "c[1, 2] = -13.8, expected 1.5" in str(info.value)
    assert "np." not in str(info.value)
    assert info.value.cause == "wrong_values"


def test_compare_takes_the_case_as_a_dict_into_the_failure_context():
    got = np.array([1.0, 2.0, 9.0], np.float32)
    want = np.array([1.0, 2.0, 3.0], np.float32)
    with pytest.raises(CheckFailure) as info:
        E.compare(got, want, name="out", context={"n": 3, "block": 32})
    assert info.value.context == {"n": 3, "block": 32, "index": 2, "wrong": 1}
    assert str(info.value).startswith("out[2] = 9, expected 3;")
    with pytest.raises(CheckFailure, match=r"\[n=3\]"):
        E.compare(got, want, name="out", context="n=3")


def test_passes_is_one_line_shown_without_quotes():
    msg = E.passes("vector_add", "3 sizes", "2 block sizes", "a spare block")
    assert msg == ("vector_add passes: 3 sizes, 2 block sizes, a spare block; grading reruns "
                   "it on hidden cases (other sizes and seeds)")
    assert repr(msg) == str(msg)
    assert E.passes("saxpy", hidden=True) == "saxpy passes"


def test_a_public_checker_hides_its_own_frames():
    try:
        check_vector_add(two_params)
    except CheckFailure as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        assert exc.__cause__ is None and exc.__suppress_context__
    else:
        pytest.fail("a kernel with two parameters passed check_vector_add")
    files = [f.filename for f in frames]
    assert not any(f.endswith(("check/_engine.py", "check/_origin.py", "check/vector.py"))
                   for f in files)
    assert len(frames) <= 2  # this test's line and the checker's clean re-raise


# --- the one detector ---------------------------------------------------------------------------

@pytest.mark.parametrize("obj, cause, phrase", [
    (stub_kernel, "stub", "replace `raise NotImplementedError()`"),
    (leftover_kernel, "stub", "still contains `raise NotImplementedError()`"),
    (add_plain, "not_a_kernel", "add @cuda.jit above its def"),
    (add_device, "not_a_kernel", "device function"),
    (None, "not_a_kernel", "did the cell that defines it run"),
    (42, "not_a_kernel", "got a int"),
    (two_params, "wrong_signature", "must take 3 parameters, yours takes 2"),
], ids=["stub", "leftover", "plain", "device", "none", "int", "arity"])
def test_require_kernel_refuses(obj, cause, phrase):
    with pytest.raises(CheckFailure) as info:
        E.require_kernel(obj, "vector_add", 3)
    assert info.value.cause == cause
    assert phrase in str(info.value)


def test_require_kernel_accepts_the_learners_kernel():
    E.require_kernel(add_kernel, "vector_add", 3)
    sub = _origin.examine(add_kernel)
    assert (sub.kind, sub.stub, sub.package, sub.nparams) == ("kernel", "", "", 3)


def _package_copies():
    """The course's own vector kernel: itself, re-jitted, and re-made from its source."""
    ns: dict = {}
    exec(inspect.getsource(V._vector_add.py_func), vars(V).copy(), ns)  # noqa: S102
    copy = getattr(ns["_vector_add"], "py_func", ns["_vector_add"])  # the source's @cuda.jit
    return [V._vector_add, cuda.jit(V._vector_add.py_func), cuda.jit(copy)]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["itself", "re-jitted", "exec-copy"])
def test_the_packages_own_kernel_is_refused(which):
    kernel = _package_copies()[which]
    with pytest.raises(CheckFailure) as info:
        check_vector_add(kernel)
    assert info.value.cause == "package_kernel"
    assert "cudacourse.kernels.vector._vector_add" in str(info.value)
    assert "write your own" in str(info.value)


def test_a_kernel_doing_its_work_with_the_courses_device_function_is_refused():
    from cudacourse.kernels import reduce as R

    add = R._add

    @cuda.jit(device=True)
    def my_helper(x, y):
        return add(x, y)

    @cuda.jit
    def via_helper(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = my_helper(a[i], b[i])

    @cuda.jit
    def via_module(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = R._add(a[i], b[i])

    for kernel in (via_helper, via_module):
        with pytest.raises(CheckFailure) as info:
            E.require_kernel(kernel, "vector_add", 3)
        assert info.value.cause == "package_kernel"
        assert "calls the course's own function cudacourse.kernels.reduce._add" in str(info.value)


def test_a_learner_kernel_equal_to_the_master_is_not_refused():
    # Same code as cudacourse.kernels.vector._vector_add, typed here: it has its own source.
    @cuda.jit
    def _vector_add(a, b, out):
        """One thread per element."""
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = a[i] + b[i]

    assert _origin.examine(_vector_add).package == ""


def test_require_device_function_and_function():
    E.require_device_function(add_device, "add", 2)
    with pytest.raises(CheckFailure, match="not @cuda.jit") as info:
        E.require_device_function(add_kernel, "add", 2)
    assert info.value.cause == "not_a_kernel"
    E.require_function(add_plain, "host_add", 3)
    with pytest.raises(CheckFailure, match="plain Python function that runs on the host"):
        E.require_function(add_kernel, "host_add", 3)
    with pytest.raises(CheckFailure) as info:
        E.require_function(V.vector_add, "host_add")
    assert info.value.cause == "package_kernel"


def test_require_device_array():
    E.require_device_array(cuda.to_device(np.zeros(3, np.float32)), "x")
    with pytest.raises(CheckFailure, match="NumPy array in host memory") as info:
        E.require_device_array(np.zeros(3), "x")
    assert info.value.cause == "not_device_array"


# --- launching ---------------------------------------------------------------------------------

def test_a_block_a_gpu_refuses_is_refused():
    with pytest.raises(CheckFailure) as info:
        E.launch(add_kernel, 1, 2048, name="vector_add")
    assert info.value.cause == "bad_launch"


@pytest.mark.parametrize("kernel, phrase", [
    (returns_value, "a kernel returns nothing"),
    (calls_np_dot, "kernels cannot call numpy.dot"),
], ids=["return", "np.dot"])
def test_what_a_gpu_cannot_compile_is_refused_on_every_device(kernel, phrase):
    """The simulator compiles it for sm_90 first (the gate); a GPU compiles it for real."""
    with pytest.raises(CheckFailure) as info:
        check_vector_add(kernel)
    assert info.value.cause == "does_not_compile"
    assert phrase in str(info.value)


@pytest.mark.sim_only
def test_an_exception_in_every_simulated_thread_gives_one_message(monkeypatch, capfd):
    """Simulator only: on a GPU a kernel cannot raise (and this one does not compile)."""
    from cudacourse.check import _compile

    monkeypatch.setattr(_compile, "GATE_OFF", True)  # reach the simulated run itself

    @cuda.jit
    def adds_a_string(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] + "x"

    a = cuda.to_device(np.ones(64, np.float32))
    with pytest.raises(CheckFailure) as info:
        E.launch(adds_a_string, 2, 32, a, a, a, name="vector_add")
    err = capfd.readouterr().err
    assert info.value.cause == "kernel_raised"
    assert "of block (" in str(info.value) and "tid=" not in str(info.value)
    assert err.count("Traceback") == 0


@pytest.mark.sim_only
def test_an_out_of_bounds_read_names_the_thread_in_words(monkeypatch):
    """Simulator only: it checks every index; a GPU reads garbage (the guards catch that)."""

    @cuda.jit
    def reads_past(a, b, out):
        i = cuda.grid(1)
        out[i] = a[i + 1]

    a = cuda.to_device(np.ones(32, np.float32))
    with pytest.raises(CheckFailure) as info:
        E.launch(reads_past, 1, 32, a, a, a, name="vector_add")
    assert info.value.cause == "out_of_bounds_read"
    assert "thread (31, 0, 0) of block (0, 0, 0)" in str(info.value)


def test_check_cell_timing_is_reported(capsys):
    """How long a learner's check cell takes here (printed, not asserted)."""
    t0 = time.perf_counter()
    check_vector_add(add_kernel)
    seconds = time.perf_counter() - t0
    with capsys.disabled():
        print(f"\n[timing] check_vector_add, a right kernel, {cudacourse.MODE}: {seconds:.2f} s")


NOTEBOOK_SCRIPT = r'''
import os
from IPython.core.interactiveshell import InteractiveShell
sh = InteractiveShell.instance(colors="NoColor")
sh.run_cell("import cudacourse, cudacourse.check\nfrom numba import cuda")
sh.run_cell("""@cuda.jit
def vector_add(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i]""")
print("@@CELL@@")
sh.run_cell("cudacourse.check.check_vector_add(vector_add)")
'''


def test_a_notebook_shows_the_diagnosis_and_not_the_checkers_insides(tmp_path):
    """What a learner sees in JupyterLab: IPython's traceback of a failing check cell."""
    import os
    import subprocess
    import sys

    script = tmp_path / "cell.py"
    script.write_text(NOTEBOOK_SCRIPT)
    env = dict(os.environ, CUDACOURSE_QUIET="1")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=env)
    shown = proc.stdout.split("@@CELL@@", 1)[-1]
    assert "CheckFailure: vector_add must take 3 parameters, yours takes 2." in shown, shown
    assert "in check_vector_add(" in shown  # the one checker frame IPython always shows
    assert "_engine.py" not in shown and "check/vector.py" not in shown
    message = shown[shown.index("CheckFailure: "):]
    assert all(len(line) <= E.WIDTH for line in message.splitlines())


def test_a_check_changes_nothing_the_grading_audit_watches():
    """The engine keeps run-time state (caches, 'said once') where the tamper audit does not
    look, so a check that passes, fails or refuses a compile is not mistaken for tampering."""
    from cudacourse.grader import audit as grading_audit

    ns: dict = {}
    base = grading_audit.snapshot(ns, load=True)
    check_vector_add(add_kernel)
    for wrong in (two_params, returns_value, stub_kernel, V._vector_add):
        with pytest.raises(CheckFailure):
            check_vector_add(wrong)
    assert grading_audit.compare(base, grading_audit.snapshot(ns)) == []


def test_every_numba_internal_the_engine_uses_is_still_there():
    from importlib import metadata

    from cudacourse.check import _numba_hooks

    gone = []
    for name, touch in _numba_hooks.seams().items():
        try:
            touch()
        except Exception as exc:  # noqa: BLE001 - any way of being gone
            gone.append(f"{name} ({type(exc).__name__}: {exc})")
    assert not gone, (f"numba-cuda {metadata.version('numba-cuda')} lacks what the check "
                      f"engine uses: {'; '.join(gone)}")


def test_a_compile_that_starts_the_compiler_changes_nothing_the_audit_watches(tmp_path,
                                                                              monkeypatch):
    """The same with an empty cache, so the compiler child really runs (sim) and the
    child's module is loaded (it must not join the package's modules)."""
    from cudacourse.grader import audit as grading_audit
    from cudacourse.check import _compile

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setitem(_compile._STATE, "memo", {})

    @cuda.jit
    def fresh_add(a, b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = b[i] + a[i]

    ns: dict = {}
    base = grading_audit.snapshot(ns, load=True)
    check_vector_add(fresh_add)
    assert grading_audit.compare(base, grading_audit.snapshot(ns)) == []


class _Res:  # what compile_gate reports: static shared memory per block, in bytes
    shared = 40 * 1024


def test_shared_memory_a_gpu_refuses_is_refused():
    E.validate_shared(None, 48 * 1024)  # the most a block may use without an opt-in
    E.validate_shared(_Res(), 8 * 1024)
    with pytest.raises(CheckFailure) as info:
        E.validate_shared(_Res(), 16 * 1024, "k")
    assert info.value.cause == "bad_launch"
    assert "49152" in str(info.value) and "40960 bytes static + 16384 dynamic" in str(info.value)


@pytest.mark.sim_only(reason="a GPU refuses such a launch itself; the traced simulator must too")
def test_traced_launch_with_too_much_dynamic_shared_memory_is_refused():
    from cudacourse.check._trace import tracing

    @cuda.jit
    def touch(out):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = 1.0

    d = cuda.device_array(4, np.float32)
    with tracing():
        with pytest.raises(CheckFailure) as info:
            touch[1, 32, 0, 64 * 1024](d)
    assert info.value.cause == "bad_launch" and "65536 bytes" in str(info.value)
