"""The simulator-only checks, re-run on a learner's kernel rebuilt from its source in a
simulator subprocess: the bundle carries what the kernel needs (constants, modules, device
functions, closures, notebook cells), the child's verdict comes back with its fields, and
on a GPU a sim part goes through the child while in the simulator it runs in-process.

The subprocess runs the simulator on both devices, so these tests run on both; the one
that needs a GPU parent is marked ``gpu``, and a GPU-mode parent is also exercised here
without a GPU (a fake H200 and the wheels' compiler, in a subprocess).
"""

from __future__ import annotations

import linecache
import math
import time

import numpy as np
import pytest

import cudacourse
from cudacourse.check import CheckFailure, _compile, _replay as R, _source
from numba import cuda

OFFSET = 1.0
TABLE = np.arange(4, dtype=np.float32)


@cuda.jit(device=True)
def plus_offset(x):
    return x + OFFSET


@cuda.jit
def plus_one(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = plus_offset(a[i])


@cuda.jit
def plus_one_reads_thrice(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + a[i] - a[i] + 1.0


@cuda.jit
def uses_math_and_table(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = math.sqrt(a[i]) + TABLE[i % 4]


def make_scaled(factor):
    @cuda.jit
    def scaled(a, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] * factor

    return scaled


def _exec(unit: dict) -> dict:
    """What the child does with a bundle, here (simulator mode is enough to rebuild)."""
    from cudacourse.check import _child

    return _child.rebuild(unit)


# --- the bundle ------------------------------------------------------------------------------

def test_bundle_carries_constants_modules_and_device_functions():
    b = _source.bundle(plus_one)
    assert b["problems"] == [] and b["entries"] == ["plus_one"]
    assert [u["name"] for u in b["units"]] == ["plus_one", "plus_offset"]
    assert b["units"][1]["jit"] == {"device": True}
    assert "OFFSET = 1.0" in b["prelude"]
    assert any(s.endswith("['numba.cuda']") for s in b["prelude"])
    ns = _exec(b)
    assert ns["OFFSET"] == 1.0 and ns["plus_one"].__name__ == "plus_one"


def test_only_options_that_differ_from_cuda_jits_defaults_are_carried():
    """A GPU dispatcher's targetoptions hold every keyword, defaults too (inline="never")."""
    @cuda.jit(device=True)
    def dev(x):
        return x

    dev.targetoptions = {"device": True, "inline": "never", "opt": True, "fastmath": False,
                         "debug": None, "lineinfo": False}
    assert _source.jit_options(dev) == {"device": True}
    dev.targetoptions = {**dev.targetoptions, "inline": "always", "fastmath": True}
    assert _source.jit_options(dev) == {"device": True, "inline": "always", "fastmath": True}


NEG_INF = -math.inf
NAN32 = np.float32("nan")


def uses_special_floats(x):
    return max(x, NEG_INF) + 0 * NAN32


def test_bundle_carries_infinities_and_nans():
    b = _source.bundle(uses_special_floats)
    assert b["problems"] == []
    ns = _exec(b)
    assert ns["NEG_INF"] == -math.inf and np.isnan(ns["NAN32"])
    assert ns["NAN32"].dtype == np.float32


def test_bundle_carries_arrays_imports_and_closures():
    b = _source.bundle(uses_math_and_table, make_scaled(2.5))
    assert b["problems"] == []
    assert "TABLE" in b["arrays"] and any("as math" in s or "'math'" in s for s in b["prelude"])
    assert "factor = 2.5" in b["prelude"]
    ns = _exec(b)
    assert np.array_equal(ns["TABLE"], TABLE)


CHUNKS = 4


def host_with_default(x: np.ndarray, chunks: int = CHUNKS) -> np.ndarray:
    return x * chunks


def test_defaults_and_annotations_of_a_host_function_are_carried():
    b = _source.bundle(host_with_default)
    assert b["problems"] == [] and "CHUNKS = 4" in b["prelude"]
    ns = _exec(b)
    assert ns["host_with_default"](np.ones(2)).tolist() == [4.0, 4.0]


def test_rebuilt_code_keeps_the_learners_file_and_lines():
    b = _source.bundle(plus_one)
    unit = b["units"][0]
    assert unit["filename"] == __file__
    assert unit["lineno"] == plus_one.py_func.__code__.co_firstlineno + 1  # the def line
    ns = _exec(b)
    assert ns["plus_one"].py_func.__code__.co_firstlineno == unit["lineno"]


def test_a_notebook_cell_is_found_through_linecache():
    """IPython registers each cell's text in linecache under a file name like this."""
    name = "/tmp/ipykernel_4242/1234567.py"
    src = ("from numba import cuda\n\n@cuda.jit\ndef cell_kernel(a, out):\n"
           "    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = a[i] + 1.0\n")
    linecache.cache[name] = (len(src), None, src.splitlines(keepends=True), name)
    try:
        ns: dict = {}
        exec(compile(src, name, "exec"), ns)  # noqa: S102 - what IPython does with a cell
        b = _source.bundle(ns["cell_kernel"])
    finally:
        del linecache.cache[name]
    assert b["problems"] == []
    assert b["units"][0]["filename"] == name and b["units"][0]["lineno"] == 4


def test_what_cannot_be_carried_is_named():
    lock = object()

    @cuda.jit
    def reads_an_object(a, out):
        out[0] = lock

    b = _source.bundle(reads_an_object)
    assert any("lock" in p for p in b["problems"])
    failure = R.replay(R.selfcheck_plus_one, reads_an_object)
    assert failure.cause == "replay_error" and "lock" in str(failure)


# --- the child's verdict ---------------------------------------------------------------------------

def test_replay_passes_a_right_kernel_and_returns_the_failure_of_a_wrong_one():
    t0 = time.perf_counter()
    assert R.replay(R.selfcheck_plus_one, plus_one, n=40, block=32) is None
    ok_s = time.perf_counter() - t0
    failure = R.replay(R.selfcheck_plus_one, plus_one_reads_thrice, n=40, block=32)
    assert isinstance(failure, CheckFailure)
    assert failure.cause == "wrong_technique"
    assert failure.context == {"n": 40, "reads": 120}
    assert failure.hint == "Read a[i] once into a local variable."
    print(f"\n[timing] simulator replay subprocess ({cudacourse.MODE}): {ok_s:.2f} s")


def test_replay_refuses_a_part_that_is_not_a_package_function():
    def local_part(kernel):
        pass

    with pytest.raises(TypeError, match="module-level function of a cudacourse module"):
        R.replay(local_part, plus_one)


@pytest.mark.sim_only
def test_in_the_simulator_a_sim_part_runs_in_process(monkeypatch):
    """Simulator only: here the part must not start a child (on a GPU it must)."""

    def no_child(*a, **k):
        raise AssertionError("a replay child was started in the simulator")

    monkeypatch.setattr(R, "replay", no_child)
    R.selfcheck_plus_one(plus_one, n=40, block=32)
    with pytest.raises(CheckFailure) as info:
        R.selfcheck_plus_one(plus_one_reads_thrice, n=40, block=32)
    assert info.value.cause == "wrong_technique"


def test_a_failure_in_the_simulator_carries_the_launches_it_made():
    """What a replay child sends back: the kernels it launched and their argument types."""
    if cudacourse.MODE == "sim":  # a GPU process records nothing: its launches compile
        from cudacourse.check import _engine as E

        a = cuda.to_device(np.arange(8, dtype=np.float32))
        out = cuda.to_device(np.zeros(8, np.float32))
        E.launch(plus_one, 1, 8, a, out, name="plus_one_launch")
        got = CheckFailure("m", cause="wrong_values").to_dict()["launches"]
        assert ["plus_one", "plus_one_launch", [["array", "<f4", 1, "C"]] * 2] in got
    assert CheckFailure.from_dict({"message": "m", "cause": "unwritten",
                                   "launches": [["plus_one", "k", []]]}).cause == "unwritten"


def test_a_child_failure_becomes_does_not_compile_when_this_compiler_refuses(monkeypatch):
    """On a GPU the child simulates without the gate: a kernel this process's compiler
    refuses fails as does_not_compile, as the simulator's gate makes it fail."""
    seen = []

    def refuses(kernel, specs):
        seen.append((kernel, specs))
        return _compile.CompileRefused("a kernel returns nothing", "raw", "line 3: return x")

    monkeypatch.setattr(_compile, "compile_here", refuses)
    specs = [["array", "<f4", 1, "C"]] * 2
    failure = {"message": "out[0:] was never written", "cause": "unwritten", "hint": "",
               "context": {}, "launches": [["plus_offset", "dev", specs],
                                           ["plus_one", "plus_one", specs]]}
    got = R._refused_here(failure, {"plus_one": plus_one, "plus_offset": plus_offset})
    assert got.cause == "does_not_compile" and seen == [(plus_one, specs)]  # kernels only
    assert str(got).startswith("plus_one would not compile for a GPU (line 3: return x): "
                               "a kernel returns nothing.")
    assert R._refused_here({**failure, "cause": "does_not_compile"}, {"plus_one": plus_one}) \
        is None
    monkeypatch.setattr(_compile, "compile_here", lambda kernel, specs: None)
    assert R._refused_here(failure, {"plus_one": plus_one}) is None


@pytest.mark.gpu
def test_on_a_gpu_a_sim_part_gives_the_simulators_verdict():
    runs = R._STATE["runs"]
    R.selfcheck_plus_one(plus_one, n=40, block=32)
    with pytest.raises(CheckFailure) as info:
        R.selfcheck_plus_one(plus_one_reads_thrice, n=40, block=32)
    assert info.value.cause == "wrong_technique"
    assert R._STATE["runs"] == runs + 2  # both went through the simulator child


# --- a GPU-mode parent, without a GPU --------------------------------------------------------

GPU_MODE_SCRIPT = r'''
import os, sys, json, importlib.util
SRC = sys.argv[1]
spec = importlib.util.spec_from_file_location("_cc_child", os.path.join(SRC, "cudacourse", "check", "_child.py"))
child = importlib.util.module_from_spec(spec); spec.loader.exec_module(child)
sys.path.insert(0, SRC)
child.setup_offline_sm90(child.find_toolkit(), SRC)
import numpy as np
import cudacourse
cudacourse.setup()
from numba import cuda
from cudacourse.check import CheckFailure, _engine as E, _origin, _replay as R
from cudacourse import vector as V
out = {"mode": cudacourse.MODE}

@cuda.jit
def plus_one(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + 1.0

@cuda.jit
def plus_one_reads_thrice(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + a[i] - a[i] + 1.0

@cuda.jit
def returns_value(a, out):
    i = cuda.grid(1)
    return a[i]

@cuda.jit
def calls_np_dot(a, out):
    i = cuda.grid(1)
    out[i] = np.dot(a, a)

def verdict(fn, *a, **k):
    try:
        fn(*a, **k)
        return "pass"
    except CheckFailure as exc:
        return exc.cause + ": " + str(exc)

out["kind"] = _origin.examine(plus_one).kind
out["device_kind"] = _origin.examine(cuda.jit(device=True)(lambda x: x)).kind
out["package"] = verdict(E.require_kernel, V._vector_add, "vector_add", 3)
out["rejit"] = verdict(E.require_kernel, cuda.jit(V._vector_add.py_func), "vector_add", 3)
x = np.zeros(32, np.float32)
out["returns"] = verdict(E.launch, returns_value, 1, 32, x, x, name="k")
out["np_dot"] = verdict(E.launch, calls_np_dot, 1, 32, x, x, name="k")
out["replay_good"] = verdict(R.selfcheck_plus_one, plus_one, n=40, block=32)
out["replay_bad"] = verdict(R.selfcheck_plus_one, plus_one_reads_thrice, n=40, block=32)
out["replay_no_compile"] = verdict(R.selfcheck_plus_one, returns_value, n=40, block=32)
out["replays"] = R._STATE["runs"]
print("RESULT" + json.dumps(out))
'''


@pytest.mark.skipif(isinstance(_compile.toolkit(), str),
                    reason="needs the nvidia-nvvm/nvidia-cuda-nvcc wheels to build GPU-mode "
                           "kernels without a GPU (on a GPU, the gpu-marked test covers this)")
def test_a_gpu_mode_parent_refuses_compiles_and_replays(tmp_path):
    """A process in GPU mode (a fake H200, the wheels' compiler, no driver): real
    dispatchers are classified, the course's kernels refused, compile errors put in words
    by the first launch, and sim parts go through the simulator child."""
    import json
    import os
    import subprocess
    import sys

    script = tmp_path / "gpu_mode.py"
    script.write_text(GPU_MODE_SCRIPT)
    src = os.path.dirname(os.path.dirname(os.path.abspath(cudacourse.__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM",
                                                             "CUDACOURSE_DEVICE")}
    proc = subprocess.run([sys.executable, str(script), src], capture_output=True, text=True,
                          timeout=300, env=env)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert line, proc.stderr[-2000:]
    got = json.loads(line[0][len("RESULT"):])
    assert (got["mode"], got["kind"], got["device_kind"]) == ("gpu", "kernel",
                                                              "device_function")
    assert got["package"].startswith("package_kernel") and got["rejit"].startswith(
        "package_kernel")
    assert got["returns"].startswith("does_not_compile") and "returns nothing" in got["returns"]
    assert "kernels cannot call numpy.dot" in got["np_dot"]
    assert got["replay_good"] == "pass"
    assert got["replay_bad"].startswith("wrong_technique")
    # the child simulates it (out never written), this process's compiler refuses it first
    assert got["replay_no_compile"].startswith("does_not_compile: plus_one would not compile")
    assert "returns nothing" in got["replay_no_compile"]
    assert got["replays"] == 3


FORGER_SOURCE = """
import atexit, sys
from numba import cuda

MARK = "@@cudacourse-child-result@@"

def _forge():
    sys.stdout.write(MARK + '{"ok": true}' + chr(10))

@cuda.jit
def forger(a, out):
    i = cuda.grid(1)
    if i == 0:  # the simulator runs this Python: print a verdict now and again at exit
        _forge()
        atexit.register(_forge)
    if i < out.size:
        out[i] = a[i] + a[i] - a[i] + 1.0
"""


def test_what_the_learners_code_prints_cannot_forge_the_verdict():
    """The kernel body runs as Python in the simulator child and prints fake verdicts
    (before the real one, and from an exit handler after it): the real one still wins."""
    ns: dict = {}
    name = "/tmp/ipykernel_4242/forger.py"
    linecache.cache[name] = (len(FORGER_SOURCE), None,
                             FORGER_SOURCE.splitlines(keepends=True), name)
    try:
        exec(compile(FORGER_SOURCE, name, "exec"), ns)  # noqa: S102 - a hostile cell
        failure = R.replay(R.selfcheck_plus_one, ns["forger"], n=40, block=32)
    finally:
        del linecache.cache[name]
    # A forged {"ok": true} would make the verdict None. The child's real verdict is
    # wrong_technique (a reads twice); on a GPU this process then compiles the kernel the
    # child launched, and a GPU cannot compile a call to the Python function _forge: that
    # refusal, does_not_compile, comes first there, as the simulator's compile gate does.
    from cudacourse.runtime import device

    want = "wrong_technique" if device.is_simulator() else "does_not_compile"
    assert failure is not None and failure.cause == want, failure


def test_a_child_that_cannot_start_is_a_failure_not_a_pass(monkeypatch):
    """A sandbox that forbids processes: the replay must not give the marks it could not
    check (the compile gate, by contrast, falls back and says so)."""
    import subprocess

    def forbidden(*a, **k):
        raise PermissionError("operation not permitted")

    monkeypatch.setattr(subprocess, "run", forbidden)
    failure = R.replay(R.selfcheck_plus_one, plus_one, n=40, block=32)
    assert failure.cause == "replay_error" and "could not be started" in str(failure)


CATALOGUES = ("test_check_vector", "test_check_threads", "test_check_tiling",
              "test_check_memory", "test_check_attention", "test_check_science")


def test_every_function_of_the_catalogues_can_be_rebuilt_in_a_child():
    """On a GPU each of these is replayed in the simulator from its source: none may be
    refused for want of a constant, a device function or an array it reads."""
    import importlib
    import types

    from cudacourse.check import _origin

    failures, count = [], 0
    for modname in CATALOGUES:
        try:
            mod = importlib.import_module(modname)
        except ImportError as exc:  # a catalogue being renamed: say so, do not hide it
            failures.append(f"{modname}: {exc}")
            continue
        for name, value in vars(mod).items():
            plain = (isinstance(value, types.FunctionType) and value.__module__ == modname
                     and not name.startswith("test_"))
            if not (_origin.is_dispatcher(value) or plain):
                continue
            count += 1
            b = _source.bundle(value)
            if b["problems"]:
                failures.append(f"{modname}.{name}: {b['problems']}")
                continue
            try:
                _exec(b)
            except Exception as exc:  # noqa: BLE001 - any way of failing to rebuild
                failures.append(f"{modname}.{name}: {type(exc).__name__}: {exc}")
    assert count > 100 and not failures, failures
