"""The simulator's sm_90 compile gate: what a GPU refuses is refused, in plain words, with the
learner's line; what it accepts gives real registers and memory; results are cached; a
missing compiler is said once and checks still run.

The gate runs only in the simulator (on a GPU the real launch compiles the kernel, and
tests/test_check_engine.py checks that both give the same verdict), so these tests are
``sim_only``; the plain-words translation of canned compiler messages runs everywhere.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import cudacourse
from cudacourse.check import CheckFailure, _compile as C, _engine as E
from cudacourse.check import check_vector_add
from numba import cuda

SCALE = 3.0


@cuda.jit(device=True)
def times_scale(x):
    return x * SCALE


@cuda.jit
def good(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = times_scale(a[i]) + b[i]


@cuda.jit
def with_shared(a, b, out):
    tile = cuda.shared.array(128, np.float32)  # 512 bytes per block
    i = cuda.grid(1)
    tile[cuda.threadIdx.x] = a[i] if i < a.size else 0.0
    cuda.syncthreads()
    if i < out.size:
        out[i] = tile[cuda.threadIdx.x] + b[i]


def helper(x):
    return x + 1


@cuda.jit
def kern_np_dot(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = np.dot(a, b)


@cuda.jit
def kern_returns(a, b, out):
    i = cuda.grid(1)
    return a[i] + b[i]


@cuda.jit
def kern_sum_list(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = sum([a[i], b[i]])


@cuda.jit
def kern_plain_call(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = helper(a[i])


@cuda.jit
def kern_np_zeros(a, b, out):
    i = cuda.grid(1)
    scratch = np.zeros(4, np.float32)
    if i < out.size:
        out[i] = a[i] + scratch[0]


@cuda.jit
def kern_string(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = len(str(i))


def _args(n=64):
    a = cuda.to_device(np.ones(n, np.float32))
    return a, a, cuda.to_device(np.zeros(n, np.float32))


needs_gate = pytest.mark.skipif(not C.status()[0] or cudacourse.MODE != "sim",
                                reason="the sm_90 gate runs in the simulator with the "
                                       "nvidia-nvvm/nvidia-cuda-nvcc wheels: "
                                       + C.status()[1])


@pytest.mark.sim_only
@needs_gate
def test_a_right_kernel_compiles_and_reports_resources():
    res = C.gate(good, _args(), "vector_add")
    assert res is not None and 0 < res.registers <= 255
    assert res.local == 0
    shared = C.gate(with_shared, _args(), "vector_add")
    assert shared.shared == 512 and shared.barriers >= 1


@pytest.mark.sim_only
@needs_gate
@pytest.mark.parametrize("kernel, phrase, line", [
    (kern_np_dot, "kernels cannot call numpy.dot", "np.dot(a, b)"),
    (kern_returns, "a kernel returns nothing", ""),
    (kern_sum_list, "sum() of a list is not supported on the GPU", ""),
    (kern_plain_call, "calls the plain Python function helper", "helper(a[i])"),
    (kern_string, "strings (f-strings, str(), .format) do not exist on the GPU", ""),
    (kern_np_zeros, "use cuda.local.array(size, float32)", "np.zeros(4, np.float32)"),
], ids=["np.dot", "return", "sum-list", "plain-call", "str", "np.zeros"])
def test_what_sm90_refuses_is_refused_in_plain_words(kernel, phrase, line):
    with pytest.raises(CheckFailure) as info:
        E.launch(kernel, 1, 64, *_args(), name="vector_add")
    assert info.value.cause == "does_not_compile"
    assert phrase in str(info.value)
    assert line in str(info.value)
    assert "Traceback" not in str(info.value) and "site-packages" not in str(info.value)


@pytest.mark.sim_only
@needs_gate
def test_the_checker_refuses_before_simulating():
    with pytest.raises(CheckFailure, match="kernels cannot call numpy.dot"):
        check_vector_add(kern_np_dot)


@pytest.mark.sim_only
@needs_gate
def test_compiles_are_cached_by_source_and_types(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setitem(C._STATE, "memo", {})
    t0 = time.perf_counter()
    first = C.gate(good, _args(), "k")
    cold = time.perf_counter() - t0
    assert list(tmp_path.rglob("*.json"))  # on disk, for the next session

    def no_child(*a, **k):
        raise AssertionError("a cached compile started the compiler again")

    monkeypatch.setattr(C, "run_child", no_child)
    t0 = time.perf_counter()
    assert C.gate(good, _args(), "k") == first
    monkeypatch.setitem(C._STATE, "memo", {})  # a new session: the disk cache answers
    assert C.gate(good, _args(), "k") == first
    warm = time.perf_counter() - t0
    with pytest.raises(AssertionError, match="started the compiler"):  # new types: compile
        C.gate(good, (cuda.to_device(np.ones(4, np.float64)),) * 3, "k")
    print(f"\n[timing] sm_90 compile in a child: cold {cold:.2f} s, cached {warm:.3f} s")


@pytest.mark.sim_only
def test_without_the_wheels_checks_still_run_and_say_so_once(monkeypatch, capsys):
    monkeypatch.setitem(C._STATE, "toolkit", "the nvidia-nvvm wheel is not installed")
    monkeypatch.setitem(C._STATE, "said", set())
    assert C.status() == (False, "the nvidia-nvvm wheel is not installed")
    assert C.gate(kern_np_dot, _args(), "k") is None
    assert C.gate(kern_np_dot, _args(), "k") is None
    err = capsys.readouterr().err
    assert err.count("kernels are NOT compiled for a GPU") == 1
    assert "nvidia-nvvm wheel is not installed" in err


def test_arguments_are_typed_as_numba_types_them():
    assert C.type_spec(np.zeros((3, 4), np.float32)) == ["array", "<f4", 2, "C"]
    assert C.type_spec(np.zeros((3, 4), np.float32)[:, ::2]) == ["array", "<f4", 2, "A"]
    assert C.type_spec(np.zeros((3, 4), np.float32).T) == ["array", "<f4", 2, "F"]
    assert C.type_spec(cuda.to_device(np.zeros(5, np.int32))) == ["array", "<i4", 1, "C"]
    assert C.type_spec(2.0) == ["scalar", "<f8"] and C.type_spec(3) == ["scalar", "<i8"]
    assert C.type_spec(np.float32(2)) == ["scalar", "<f4"]
    assert C.type_spec("text") is None


@pytest.mark.parametrize("error, phrase", [
    ("Failed in cuda mode pipeline (step: nopython frontend)\nUnknown attribute 'linalg' of "
     "type Module(<module 'numpy' from '...'>)", "kernels cannot call numpy.linalg"),
    ("CUDA kernel must have void return type.", "a kernel returns nothing"),
    ("Untyped global name 'f': Cannot determine Numba type of <class 'function'>",
     "calls the plain Python function f"),
    ("Untyped global name 'pd': Cannot determine Numba type of <class 'module'>",
     "the kernel uses pd"),
    ("Unknown attribute 'prod' of type Module(<module 'math' (built-in)>)",
     "kernels cannot use math.prod"),
    # issue 45 (mutants): the grid calls' typing errors in catalogue words, no Numba English
    ("argument can only be 1, 2, 3", "take the number of the launch's dimensions"),
    ("failed to unpack int64", "cuda.grid(1) gives one index"),
    ("No implementation of function Function(<built-in function lt>) found for signature:\n"
     " \n >>> lt(UniTuple(int64 x 2), int64)", "the operation lt got a tuple"),
    ("No implementation of function Function(<built-in function pow>) found for signature:\n"
     # issue 45: arithmetic on a whole array, where one of its elements belongs
     " \n >>> pow(array(float32, 1d, C), float64)", "the operation pow got a whole array"),
    ("something new and strange\nmore", "the GPU compiler refused the kernel: something new"),
])
def test_compiler_messages_in_plain_words(error, phrase):
    reason, _ = C.explain(error, "")
    assert phrase in reason


def test_the_learners_line_is_found_in_numbas_message():
    error = ('Untyped global name \'f\'\n\nFile "/tmp/ipykernel_1/2.py", line 7:\n'
             'def k(a):\n    <source elided>\n    a[0] = f(a[1])\n    ^\n\n'
             'File "/x/site-packages/numba/core.py", line 3:\n  inner\n  ^\n')
    assert C._source_line(error) == "line 7: a[0] = f(a[1])"


@pytest.mark.sim_only
def test_doctor_says_whether_kernels_are_compiled_for_real(monkeypatch, capsys):
    """Simulator only: on a GPU, doctor compiles and launches a kernel for real instead."""
    from cudacourse import cli

    problems: list = []
    cli._doctor_sm90(problems)
    out = capsys.readouterr().out
    if C.status()[0]:
        assert "sm_90 compile yes, kernels are compiled for real" in out and not problems
    monkeypatch.setitem(C._STATE, "toolkit", "the nvidia-nvvm wheel is not installed")
    cli._doctor_sm90(problems)
    out = capsys.readouterr().out
    assert "kernels NOT compiled for a GPU: the nvidia-nvvm wheel is not installed" in out
    assert not problems  # a platform without the wheels is a fallback, not a failure


@cuda.jit
def scale_with_np_dot(x, out, alpha):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = np.dot(x, x) * alpha


def gpu_scale_launching_np_dot(x, alpha):
    d = cuda.to_device(x)
    out = cuda.device_array_like(d)
    scale_with_np_dot[(x.size + 127) // 128, 128](d, out, alpha)
    return out.copy_to_host()


@pytest.mark.sim_only
@needs_gate
def test_kernels_a_learners_host_function_launches_are_compiled_too():
    from cudacourse.check import check_gpu_scale

    with pytest.raises(CheckFailure) as info:
        check_gpu_scale(gpu_scale_launching_np_dot)
    assert info.value.cause == "does_not_compile"
    assert "scale_with_np_dot would not compile for a GPU" in str(info.value)
    assert "kernels cannot call numpy.dot" in str(info.value)


@pytest.mark.sim_only
@needs_gate
def test_gating_is_undone_after_a_check():
    from numba.cuda.simulator import kernel as sim_kernel

    before = sim_kernel.FakeCUDAKernel.__call__
    with C.gating():
        assert sim_kernel.FakeCUDAKernel.__call__ is not before
        with C.gating():  # nested: no second layer
            inner = sim_kernel.FakeCUDAKernel.__call__
        assert sim_kernel.FakeCUDAKernel.__call__ is inner
    assert sim_kernel.FakeCUDAKernel.__call__ is before


@pytest.mark.sim_only
@needs_gate
def test_an_answer_cell_cannot_switch_the_gate_off(monkeypatch):
    """The switch is read once, when cudacourse is imported: a cell setting it later has no
    effect (and rebinding GATE_OFF is a change the grading audit reports)."""
    monkeypatch.setenv("CUDACOURSE_COMPILE_GATE", "0")
    with pytest.raises(CheckFailure, match="kernels cannot call numpy.dot"):
        check_vector_add(kern_np_dot)


# What a GPU's first launch raises: Numba's dispatcher message, highlighted the way
# NUMBA_COLOR_SCHEME (with colorama) highlights it, with the notebook cell's file and line.
B, R = "\x1b[1m", "\x1b[0m"
GPU_NP_DOT_TYPING_ERROR = (
    f"{B}{B}Failed in cuda mode pipeline (step: nopython frontend)\n"
    f"{B}{B}No implementation of function {B}Function(<built-in function dot>){R} found for "
    f"signature:\n \n >>> {B}dot(array(float32, 1d, C), array(float32, 1d, C)){R}\n \n"
    "There are 4 candidate implementations:\n - Of which 2 did not match due to:\n"
    "  Overload in function 'dot_2': File: numba/cuda/np/linalg.py: Line 610.\n"
    f"{R}\n{R}{B}During: resolving callee type: Function(<built-in function dot>){R}\n"
    f"{R}{B}During: typing of call at /tmp/ipykernel_41/3051.py (12)\n{R}\n"
    f'{B}\nFile "/tmp/ipykernel_41/3051.py", line 12:{R}\r\n'
    f"{B}def calls_np_dot(a, b, out):\n    <source elided>\n    if i < out.size:\n"
    f"{B}        out[i] = np.dot(a, b)\n{R}        {B}^{R}{R}\n")


def test_a_gpus_highlighted_typing_error_is_translated_like_the_childs():
    """The real dispatcher's text (colour codes, CRLF, the cell's line) reads as the child's."""
    from numba.core.errors import TypingError

    reason, line = C.explain(GPU_NP_DOT_TYPING_ERROR, "TypingError")
    assert reason.startswith("kernels cannot call numpy.dot: a GPU thread has no NumPy")
    assert line == "line 12: out[i] = np.dot(a, b)"
    exc = TypingError(GPU_NP_DOT_TYPING_ERROR)
    assert C.is_compile_error(exc)
    assert C.is_compile_error(TypeError(f"{B}CUDA kernel must have void return type.{R}"))
    assert not C.is_compile_error(RuntimeError("CUDA_ERROR_ILLEGAL_ADDRESS"))
    with pytest.raises(CheckFailure) as info:
        E._launch_error(exc, "vector_add", {"grid": 2, "block": 32})
    assert info.value.cause == "does_not_compile"
    assert "kernels cannot call numpy.dot" in str(info.value) and "\x1b" not in str(info.value)
    assert "(line 12: out[i] = np.dot(a, b))" in str(info.value)


def test_colour_codes_are_removed_and_nothing_else():
    assert C.strip_ansi(f"{B}a{R} b\x1b[31;1mc\x1b[39m\r\n") == "a bc\n"
    assert C.strip_ansi("out[i] = a[i] # [1m is text") == "out[i] = a[i] # [1m is text"


# --- issue 45: refusals that name the exact mistake get a cause of their own ---------------

@pytest.mark.parametrize("error, line, source, cause", [
    ("argument can only be 1, 2, 3", "", "", "grid_dimensions"),
    ("failed to unpack int64", "line 4: c, r = cuda.grid(1)", "", "grid_dimensions"),
    ("('wrong tuple length for $44call.4: ', 'expected 2, got 3')",
     "line 7: c, r = cuda.grid(3)", "", "grid_dimensions"),
    (" >>> range(UniTuple(int64 x 2), int64, int64)",
     "line 4: for i in range(cuda.grid(2), n, cuda.gridsize(1)):", "", "grid_dimensions"),
    # the tuple met later, on a line of its own: the kernel's source shows where it came from
    (" >>> lt(UniTuple(int64 x 2), int64)", "line 6: if i < x.shape[0]:",
     "#line 3\n@cuda.jit\ndef k(x, out):\n    i = cuda.grid(2)\n    if i < x.shape[0]:\n"
     "        out[i] = x[i]\n", "grid_dimensions"),
    # ... but a pair unpacked to fit, or indexed, is not the grid's mistake: a tuple where a
    # number belongs, said as such
    (" >>> lt(UniTuple(int64 x 2), int64)", "line 6: if p < n:",
     "@cuda.jit\ndef k(x, out):\n    c, r = cuda.grid(2)\n    p = x.shape\n", "tuple_for_number"),
    (" >>> lt(UniTuple(int64 x 2), int64)", "",
     "@cuda.jit\ndef k(x, out):\n    pos = cuda.grid(2)\n    c = pos[0]\n", "tuple_for_number"),
    ("tuple index out of range", "line 8: if i < out.shape[1]:", "", "missing_axis"),
    ("tuple index out of range", "line 8: t = (1, 2)[k]", "", "does_not_compile"),
    ("NumbaTypeError: Unsupported array index type float32 in [float32]", "", "",
     "float_index"),
    ("Untyped global name 'f'", "", "", "does_not_compile"),
    # a number passed where the kernel indexes an array (uploaded, it is a 0-d array)
    (" >>> getitem(float64, int64)", "", "", "number_for_array"),
    (" >>> getitem(array(float64, 0d, C), int64)", "", "", "number_for_array"),
    (" >>> setitem(array(float32, 1d, C), int64, array(float32, 1d, C))", "", "",
     "array_for_number"),
    (" >>> getitem(array(float32, 1d, C), float32)", "", "", "does_not_compile"),
    # issue 45: a whole array in arithmetic with a number (the array's element belongs)
    (" >>> iadd(float64, array(float32, 2d, C))", "", "", "array_for_number"),
    (" >>> mul(array(float32, 1d, C), Literal[int](2))", "", "", "array_for_number"),
    (" >>> mul(Literal[int](2), UniTuple(uint32 x 4))", "", "", "tuple_for_number"),
    ("NameError: Variable 'g' is not defined.", "", "", "used_before_assigned"),
    # issue 45: a tile's row or column computed with / (a float) given to an intrinsic
    (" >>> ldmatrix(array(uint16, 2d, C), int64, float64)", "", "", "float_index"),
    # issue 45: a fragment (a tuple) converted to the float a register holds
    ("Cannot cast UniTuple(uint32 x 4) to float32: %\".1268\" = extractvalue", "", "",
     "tuple_for_number"),
])
def test_refusals_that_single_out_the_mistake_name_it(error, line, source, cause):
    assert C.refusal_cause(error, line, source) == cause
    assert cause in C.COMPILE_CAUSES


@cuda.jit
def saxpy_grid_pair(a, x, y, out):
    for i in range(cuda.grid(2), out.shape[0], cuda.gridsize(1)):  # a pair, not an index
        out[i] = a * x[i] + y[i]


@cuda.jit
def vector_add_other_axis(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[1]:  # a one-dimensional array has no axis 1
        out[i] = a[i] + b[i]


@cuda.jit
def warp_sum_value_as_index(x, out):
    i = cuda.grid(1)
    v = 0.0
    if i < x.shape[0]:
        v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[v // 32] = v  # the sum, a float, where the warp's number belongs


@pytest.mark.sim_only
@needs_gate
@pytest.mark.parametrize("checker, kernel, cause, phrase", [
    ("check_saxpy", saxpy_grid_pair, "grid_dimensions", "got a tuple where a number belongs"),
    ("check_vector_add", vector_add_other_axis, "missing_axis", "a.shape[k] exists only"),
    ("check_warp_sum", warp_sum_value_as_index, "float_index", "indexed with a float"),
], ids=["grid(2)-as-index", "shape[1]-of-1d", "value-as-index"])
def test_a_checker_names_a_refusal_that_singles_out_the_mistake(checker, kernel, cause, phrase):
    import cudacourse.check as check

    with pytest.raises(CheckFailure) as info:
        getattr(check, checker)(kernel)
    assert info.value.cause == cause and phrase in str(info.value), str(info.value)

def test_a_name_read_before_its_assignment_is_named_in_catalogue_words():
    # issue 45 (mutants): `j = j + t`, a name read to compute itself
    reason, _ = C.explain("Failed in cuda mode pipeline\nThe compiler failed to analyze the "
                          "bytecode. Variable 'j' is not defined.", "TypingError")
    assert str(reason).startswith("j is read before any value is assigned to it")


def test_a_tuple_that_is_no_grid_pair_gets_no_grid_advice():
    """A fragment or a pair of the learner's own used whole where a number belongs: the
    advice about cuda.grid(2) would point the wrong way; with a cuda.grid pair it stays."""
    fragment = C.explain(" >>> max(float32, UniTuple(int32 x 2))\n", "TypingError",
                         "@cuda.jit\ndef k(a):\n    x = max(m_hi, kb1)\n")[0]
    assert "cuda.grid" not in str(fragment) and "tuple" in str(fragment)
    pair = C.explain(" >>> lt(UniTuple(int64 x 2), int64)", "TypingError",
                     "#line 3\n@cuda.jit\ndef k(x, out):\n    i = cuda.grid(2)\n"
                     "    if i < x.shape[0]:\n        out[i] = x[i]\n")[0]
    assert "cuda.grid(2)" in str(pair)


@pytest.mark.parametrize("error, cause, words", [
    (" >>> ldmatrix(int32, int64, int64)", "number_for_array", "argument 1"),
    (" >>> cp_async(array(uint16, 2d, C), array(int64, 2d, C), int64, array(uint16, 2d, C), "
     "int64, int64)", "array_for_number", "argument 2"),
    (" >>> cp_async(array(uint16, 2d, C), int64, int64, array(uint16, 2d, C), int64, int64)",
     "does_not_compile", ""),  # the kinds fit: not this mistake
    (" >>> mul(UniTuple(float32 x 4), float32)", "tuple_for_number", "tuple"),
    (" >>> max(float32, Tuple(float32, int64))", "tuple_for_number", "tuple"),
    (" >>> setitem(UniTuple(float32 x 4), int64, float32)", "tuple_for_array", "tuple"),
])
def test_tensor_core_intrinsics_and_tuples_name_the_argument_of_the_wrong_kind(error, cause,
                                                                                 words):
    assert C.refusal_cause(error) == cause
    if words:
        assert words in str(C.explain(error, "TypingError", "")[0])
