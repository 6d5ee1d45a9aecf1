"""check_vector_add: the catalogue of wrong kernels it must reject, and right ones it passes."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import cudacourse.check as check
from cudacourse.check import _engine

pytestmark = pytest.mark.lesson1


@cuda.jit
def right_grid(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@cuda.jit
def right_explicit(a, b, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < a.size:
        out[i] = a[i] + b[i]


@cuda.jit
def right_grid_stride(a, b, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = a[i] + b[i]


@cuda.jit
def no_guard(a, b, out):
    i = cuda.grid(1)
    out[i] = a[i] + b[i]


@cuda.jit
def first_block_only(a, b, out):
    i = cuda.threadIdx.x
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@cuda.jit
def off_by_one_read(a, b, out):
    i = cuda.grid(1)
    if i + 1 < out.shape[0]:
        out[i] = a[i + 1] + b[i + 1]


@cuda.jit
def guard_off_by_one(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0] - 1:
        out[i] = a[i] + b[i]


@cuda.jit
def subtracts(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] - b[i]


@cuda.jit
def ignores_b(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i]


@cuda.jit
def writes_nothing(a, b, out):
    i = cuda.grid(1)
    if i < 0:
        out[i] = a[i] + b[i]


@cuda.jit
def half_written(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0] and i % 2 == 0:
        out[i] = a[i] + b[i]


@cuda.jit
def clobbers_input(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]
        a[i] = 0.0


@cuda.jit
def wrong_block_stride(a, b, out):
    # uses gridDim where blockDim belongs: right only by accident for some launches
    i = cuda.blockIdx.x * cuda.gridDim.x + cuda.threadIdx.x
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@cuda.jit
def right_while_early_return(a, b, out):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= out.shape[0]:
        return
    while i < out.shape[0]:
        out[i] = b[i] + a[i]
        i += cuda.blockDim.x * cuda.gridDim.x


@cuda.jit
def one_thread_does_all(a, b, out):
    # right numbers, but thread 0 walks the whole vector while every other thread idles
    if cuda.grid(1) == 0:
        for j in range(out.shape[0]):
            out[j] = a[j] + b[j]


@cuda.jit
def every_block_does_all(a, b, out):
    # each block covers the whole vector: blocks x the work, each element written many times
    for j in range(cuda.threadIdx.x, out.shape[0], cuda.blockDim.x):
        out[j] = a[j] + b[j]


@cuda.jit
def guard_lets_n_through(a, b, out):
    i = cuda.grid(1)
    if i <= out.shape[0]:
        out[i] = a[i] + b[i]


@cuda.jit
def returns_the_sum(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        return a[i] + b[i]


@cuda.jit
def computes_nan(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        z = a[i] - a[i]
        out[i] = z / z + b[i]


@cuda.jit
def two_elements_each(a, b, out):
    # every element written by two threads (its own and its left neighbour)
    i = cuda.grid(1)
    for j in (i, i + 1):
        if j < out.shape[0]:
            out[j] = a[j] + b[j]


@cuda.jit
def one_thread_through_transpose(a, b, out):
    # one thread does all the work, writing through a view: the view is `out` itself
    o = out.T
    if cuda.grid(1) == 0:
        for j in range(o.shape[0]):
            o[j] = a[j] + b[j]


@cuda.jit
def one_thread_through_slice(a, b, out):
    o = out[0:]
    if cuda.grid(1) == 0:
        for j in range(o.shape[0]):
            o[j] = a[j] + b[j]


@cuda.jit
def one_thread_through_real(a, b, out):
    o = out.real
    if cuda.grid(1) == 0:
        for j in range(o.shape[0]):
            o[j] = a[j] + b[j]


@cuda.jit
def right_through_views(a, b, out):
    # right, written through views of the arrays (they alias the same memory)
    o = out.T
    x = a[0:]
    i = cuda.grid(1)
    if i < o.shape[0]:
        o[i] = x[i] + b.T[i]


@cuda.jit
def stub(a, b, out):
    raise NotImplementedError()


@cuda.jit
def grid_dim_for_block_dim(a, b, out):  # issue 45: the launch is fine, the index is not
    i = cuda.blockIdx.x * cuda.gridDim.x + cuda.threadIdx.x
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


def host_function(a, b, out):
    out[:] = a + b


WRONG = [
    (no_guard, "missing bounds guard"),
    (first_block_only, "only the first block"),
    (off_by_one_read, "off by one"),
    (guard_off_by_one, "never written"),
    (subtracts, "a[i] - b[i]"),
    (ignores_b, "a[i] (b ignored)"),
    (writes_nothing, "never written"),
    (half_written, "never written"),
    (clobbers_input, "changed its inputs"),
    (wrong_block_stride, "out"),
    (one_thread_does_all, "not spread over the threads"),
    (every_block_does_all, "redo the same elements"),
    (two_elements_each, "written 2 times"),
    (guard_lets_n_through, "the guard lets thread n"),
    (returns_the_sum, "returns nothing"),
    (computes_nan, "wrote nan"),
    (stub, "not written yet"),
    (host_function, "@cuda.jit"),
    (grid_dim_for_block_dim, "several threads onto one element"),
    # views alias their array: accesses through them are observed as accesses to it
    (one_thread_through_transpose, "not spread over the threads"),
    (one_thread_through_slice, "not spread over the threads"),
    (one_thread_through_real, "not spread over the threads"),
]


@pytest.mark.parametrize("kernel, why", WRONG, ids=[k.__name__ for k, _ in WRONG])
@pytest.mark.parametrize("hidden", [False, check.Cases(11, [(1531, 64), (97, 96), (700, 512)])],
                         ids=["visible", "hidden"])
def test_wrong_kernels_are_rejected_with_a_diagnosis(kernel, why, hidden):
    with pytest.raises(AssertionError) as info:
        check.check_vector_add(kernel, hidden=hidden)
    assert why.lower() in str(info.value).lower(), str(info.value)


RIGHT = [right_grid, right_explicit, right_grid_stride, right_while_early_return,
         right_through_views]


@pytest.mark.parametrize("kernel", RIGHT, ids=lambda k: k.__name__)
def test_right_kernels_pass(kernel):
    lines = [check.check_vector_add(kernel), check.check_vector_add(kernel, hidden=check.Cases(11, [(1531, 64), (97, 96), (700, 512)]))]
    assert lines[0].startswith("vector_add passes: 3 sizes (1000, 257, 1)"), lines
    assert lines[0].endswith("grading reruns it on hidden cases (other sizes and seeds)"), lines
    assert "hidden" not in lines[1], lines


def test_diagnoses_carry_a_stable_cause():
    causes = {}
    for kernel in (one_thread_does_all, every_block_does_all, guard_lets_n_through,
                   computes_nan):
        with pytest.raises(AssertionError) as info:
            check.check_vector_add(kernel, seed=3)
        causes[kernel.__name__] = getattr(info.value, "cause", None)
    assert causes == {"one_thread_does_all": "serial_work",
                      "every_block_does_all": "redundant_work",
                      "guard_lets_n_through": "off_by_one_guard",
                      "computes_nan": "nan_result"}


def test_wrong_parameter_count_is_named():
    @cuda.jit
    def two(a, out):
        pass

    with pytest.raises(AssertionError, match="must take 3 parameters, yours takes 2"):
        check.check_vector_add(two)


def test_checker_cannot_be_replaced_from_a_notebook_cell():
    with pytest.raises(AttributeError, match="read-only"):
        check.check_vector_add = lambda kernel: None  # type: ignore[misc]
    with pytest.raises(AttributeError, match="read-only"):
        del check.check_vector_add


def test_rebinding_numpy_does_not_make_a_wrong_kernel_pass(monkeypatch):
    monkeypatch.setattr(np, "allclose", lambda *a, **k: True)
    monkeypatch.setattr(np, "isclose", lambda a, b, **k: np.ones(np.shape(a), bool))
    monkeypatch.setattr(np.testing, "assert_allclose", lambda *a, **k: None)
    with pytest.raises(AssertionError, match="a\\[i\\] - b\\[i\\]"):
        check.check_vector_add(subtracts)


@pytest.mark.parametrize("grid, block, why", [
    (8, 2048, "at most 1024 per block"),
    (1, (32, 32, 2), "2048 threads"),
    (0, 32, "positive integers"),
    (1, (1, 1, 65), "exceeds the GPU limit of 64"),
])
def test_launch_shapes_a_gpu_refuses_are_refused(grid, block, why):
    with pytest.raises(AssertionError, match=why):
        _engine.validate_launch(grid, block)
