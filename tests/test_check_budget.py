"""The time budget of every check (check/_budget.py): an answer that would run past it is
told "not checked" in plain words instead of keeping the cell busy."""

from __future__ import annotations

import hashlib
import os
import threading
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
def halves_to_zero(a, b, out):
    # never ends: offset reaches 0, and 0 // 2 stays 0 (the test should have been > 0)
    i = cuda.grid(1)
    offset = 16
    while offset >= 0:
        offset //= 2
    if i < out.shape[0]:
        out[i] = a[i] + b[i]


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


_PER_THREAD = pytest.mark.skipif(not os.path.isdir("/proc/self/task"),
                                 reason="per-thread CPU times come from Linux's /proc; "
                                        "elsewhere the budget counts the whole process")


@_PER_THREAD
def test_another_threads_work_is_not_charged_to_the_check():
    # CI once cut a right diagnosis at "25 s of work" that needs about 2: the process's CPU
    # time had counted some other thread. Hashing large blocks releases the GIL, so this
    # thread burns CPU beside the check's, which only sleeps.
    stop = threading.Event()

    def burn() -> None:
        block = b"x" * (4 << 20)
        while not stop.is_set():
            hashlib.sha256(block).digest()

    burner = threading.Thread(target=burn, daemon=True)
    with _budget.budget(0.5):
        burner.start()
        end = time.monotonic() + 30
        while _budget._clock() - _budget._STATE["start"] < 1.0 and time.monotonic() < end:
            time.sleep(0.1)
        total = _budget._clock() - _budget._STATE["start"]
        spent = _budget._spent()
        stop.set()
        burner.join()
    assert total >= 1.0, total  # the process spent it ...
    assert spent < 0.4, (spent, total)  # ... the check did not


@_PER_THREAD
@pytest.mark.sim_only(reason="the budget counts simulated threads")
def test_the_budget_counts_the_checks_own_kernels(monkeypatch):
    # as if other threads had spent 1000 s of the process's CPU: a right answer still passes,
    # and an endless kernel is still stopped (its simulated threads are the check's own)
    real = _budget._clock
    monkeypatch.setattr(_budget, "_clock", lambda: real() + (1000.0 if _budget._STATE["deadline"]
                                                              is not None else 0.0))
    assert "passes" in str(check.check_vector_add(right))
    monkeypatch.setattr(_budget, "BUDGET_S", 2.0)
    with pytest.raises(check.CheckFailure) as info:
        check.check_vector_add(spins_forever)
    assert info.value.cause == "not_checked", str(info.value)


@pytest.mark.sim_only(reason="two looks at simulated threads; on a GPU the replay's own "
                             "limit ends such a kernel")
def test_a_loop_whose_numbers_never_move_is_named_with_its_line(monkeypatch):
    monkeypatch.setattr(_budget, "BUDGET_S", 2.0)
    with pytest.raises(check.CheckFailure) as info:
        check.check_vector_add(halves_to_zero)
    assert info.value.cause == "endless_loop", str(info.value)
    text = str(info.value)
    assert "while offset >= 0:" in text and "offset = 0" in text, text
    assert not _budget.expired() and _budget._STATE["stuck"] is None


def test_two_looks_single_out_an_endless_loop_only_when_nothing_moves(tmp_path):
    src = tmp_path / "k.py"
    src.write_text("def k(n):\n    s = n\n    while s >= 0:\n        s //= 2\n"
                   "    for i in range(n):\n        pass\n", encoding="utf-8")
    f = str(src)
    still = {1: (f, "k", 4, {"s": 0, "n": 8}), 2: (f, "k", 3, {"s": 0, "n": 8})}
    stuck = _budget.stuck_loop(still, still)
    assert stuck == {"line": 3, "code": "while s >= 0:", "threads": 2, "values": "s = 0"}
    moving = {1: (f, "k", 4, {"s": 4, "n": 8})}
    assert _budget.stuck_loop(moving, still) is None  # s moved: not shown endless
    in_for = {1: (f, "k", 6, {"s": 0, "i": 3, "n": 8})}
    assert _budget.stuck_loop(in_for, in_for) is None  # no while loop there
    assert _budget.stuck_loop({}, still) is None
