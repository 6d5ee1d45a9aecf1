"""The time budget of every check (check/_budget.py): an answer that would run past it is
told "not checked" in plain words instead of keeping the cell busy."""

from __future__ import annotations

import time

import pytest
from numba import cuda

import cudacourse.check as check
from cudacourse.check import _budget

pytestmark = pytest.mark.lesson1


@cuda.jit
def spins_forever(a, b, out):
    # compiles for a GPU; never ends (a loop whose exit the kernel never reaches)
    i = cuda.grid(1)
    j = 0
    while j >= 0:
        j += 1 if i >= 0 else 0


@cuda.jit
def right(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


@pytest.mark.sim_only(reason="the budget stops simulated threads; a GPU kernel of this "
                             "kind is ended by the replay's own limit")
def test_an_endless_kernel_is_told_not_checked(monkeypatch):
    monkeypatch.setattr(_budget, "BUDGET_S", 2.0)
    start = time.monotonic()
    with pytest.raises(check.CheckFailure) as info:
        check.check_vector_add(spins_forever)
    assert info.value.cause == "not_checked", str(info.value)
    assert str(info.value).startswith("not checked:"), str(info.value)
    # the budget, not a grading timeout, ended it (generous: the machine is shared)
    assert time.monotonic() - start < 60
    assert not _budget.expired()  # the state is reset for the next check
    # and no simulated thread of the stopped kernel is left spinning (it would eat the
    # next check's budget)
    import threading

    assert not [t for t in threading.enumerate() if hasattr(t, "threadIdx") and t.is_alive()]


def test_a_right_answer_is_untouched_by_the_budget():
    assert "passes" in str(check.check_vector_add(right))
