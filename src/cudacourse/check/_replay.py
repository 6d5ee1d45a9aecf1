"""One verdict on every device: run the simulator-only checks on a GPU too.

Some checks can only be made in Numba's CUDA simulator: counting global reads, poisoning
shared memory, seeing a barrier or a warp call that not every thread reaches (simwarp),
forcing a serial execution order, the stream happens-before trace. On a GPU the same checker
re-runs them in a simulator SUBPROCESS, on the learner's kernel rebuilt from its source
(``_source.bundle``: the function's text, its constants, the device functions it calls;
notebook cells included), with small sizes, and raises the child's ``CheckFailure`` with
the same cause, hint and context.

For checker authors::

    from ._replay import sim_part

    @sim_part
    def _warp_sum_technique(kernel, *, seed=None, hidden=False):
        ...  # simulator-only checks; raise with E.fail(cause, message)

    def check_warp_sum(kernel, *, hidden=False, seed=None):
        E.require_kernel(kernel, "warp_sum", 2)
        ...  # the real launches, on whichever device this is
        _warp_sum_technique(kernel, seed=seed, hidden=hidden)

In the simulator ``_warp_sum_technique(kernel, ...)`` simply runs. On a GPU it runs in the
child instead. Rules: a sim part is a module-level function of a ``cudacourse.check``
module; its positional arguments are the learner's functions (kernels, device functions,
host functions) and its keyword arguments are JSON values (numbers, strings, lists).
``run_sim_checks(part, *subjects, **kw)`` does the same without the decorator.

Since issue 20 a kernel checker (``_observe.kernel_cases``) first gathers its evidence
natively, from an instrumented build of the kernel run on the GPU itself (``_instrument``);
this replay is then only the fallback for a kernel the rewrite cannot follow (a view, an
array handed to a function), and the judge of warp-level undefined behaviour, which no GPU
shows. Every replay has a time budget (``TIMEOUT_S``, 25 s; ``CUDACOURSE_REPLAY_BUDGET_S``
changes it): past it, the answer is "not checked: <why>", never a hang.

A kernel that cannot be rebuilt in another process (its source is missing, or it reads a
global the bundle cannot carry) fails on a GPU with cause ``"replay_error"`` and says which
name: a grader must not give marks for checks it could not make.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any, Callable

from . import _cases, _compile, _origin, _source
from ._engine import COMPILE_HINT, CheckFailure, fail
from ..i18n import T

# Well before any cell's timeout, and within "no check runs longer than 30 s": a replay that
# needs longer ends in "not checked: <why>" instead of hanging the notebook.
TIMEOUT_S = float(os.environ.get("CUDACOURSE_REPLAY_BUDGET_S", "25"))
_STATE: dict = {"last_seconds": 0.0, "runs": 0}


def sim_part(fn: Callable) -> Callable:
    """Decorate the simulator-only part of a checker (see the module docstring)."""

    @functools.wraps(fn)
    def part(*subjects: Any, **kw: Any) -> None:
        __tracebackhide__ = True
        run_sim_checks(fn, *subjects, **kw)

    part.__sim_part__ = True
    return part


def run_sim_checks(part: Callable, *subjects: Any, **kw: Any) -> None:
    """Run ``part(*subjects, **kw)`` in the simulator: in this process when it is the
    simulator, else in a simulator subprocess on the subjects rebuilt from their source."""
    __tracebackhide__ = True
    from ..runtime import device

    inner = getattr(part, "__wrapped__", part)
    if device.is_simulator():
        inner(*subjects, **kw)
        return
    verdict = replay(inner, *subjects, **kw)
    if verdict is not None:
        raise verdict


def run_remaining_sim_checks(what: str, part: Callable, *subjects: Any, **kw: Any) -> None:
    """``run_sim_checks`` for the one thing native evidence could not show (``what``, in
    words): a replay past its time budget is a note, "not checked: <what>", not a failure,
    since the GPU run already checked the numbers and everything else it observed."""
    __tracebackhide__ = True
    from ..runtime import device

    inner = getattr(part, "__wrapped__", part)
    if device.is_simulator():
        inner(*subjects, **kw)
        return
    verdict = replay(inner, *subjects, **kw)
    if verdict is not None and verdict.context.get("timed_out"):
        print(f"not checked: {what} (the simulator re-run took longer than {TIMEOUT_S} s); "
              "everything else was checked on the GPU.")
        return
    if verdict is not None:
        raise verdict


def replay(part: Callable, *subjects: Any, **kw: Any) -> CheckFailure | None:
    """Run ``part`` on ``subjects`` in a simulator subprocess; None when it passes, else the
    ``CheckFailure`` it raised there (fields intact)."""
    mod = getattr(part, "__module__", "")
    qual = getattr(part, "__qualname__", "")
    if not mod.startswith("cudacourse.") or "<" in qual:
        raise TypeError(f"{mod}.{qual} cannot be replayed: a sim part must be a module-level "
                        "function of a cudacourse module")
    bundle, objects = _source.bundle_with_objects(*subjects)
    if bundle["problems"]:
        return CheckFailure(
            T("the simulator part of this check cannot run on a GPU for your code: {problems}.",
              problems='; '.join(bundle['problems'])), cause="replay_error",
            hint=T("define the kernel (and what it uses) with def in a cell or a file, using "
                   "only numbers, arrays, modules and other @cuda.jit functions as globals"))
    kw = {k: _cases.wire(v) for k, v in kw.items()}  # hidden=Cases(...) crosses as JSON
    _check_json(kw)
    req = {"bundle": bundle, "entries": bundle["entries"], "checker": f"{mod}:{qual}",
           "kwargs": kw}
    t0 = time.perf_counter()
    answer = _compile.run_child("replay", req, timeout=TIMEOUT_S)
    _STATE["last_seconds"] = time.perf_counter() - t0
    _STATE["runs"] += 1
    if "child_error" in answer:
        if answer["child_error"].startswith("it took longer than"):
            return CheckFailure(
                T("not checked: the simulator re-run of your kernel (for what a GPU cannot "
                  "show) {child_error}, its time budget.",
                  child_error=answer['child_error']), cause="replay_error",
                hint=T("a kernel that does less work per thread, or fewer loop trips, is "
                       "re-run faster"), context={"timed_out": True})
        return CheckFailure(T("the simulator re-run of your kernel could not be carried out: "
                              "{child_error}",
                              child_error=answer['child_error']), cause="replay_error",
                            context={"traceback": answer.get("traceback", "")[-800:]})
    if answer.get("ok"):
        return None
    failure = answer["failure"]
    refused = _refused_here(failure, objects)
    return refused or CheckFailure.from_dict(failure)


def _refused_here(failure: dict, objects: dict) -> CheckFailure | None:
    """The child's failing verdict, when a kernel it launched does not compile here.

    The child simulates without the compile gate (it runs before this GPU's own launch, and
    a simulator child cannot host the real compiler), so a kernel no GPU compiles (it
    returns a value, calls np.dot) fails there with what its simulated run did. The
    simulator's gate says ``does_not_compile`` first; so does this: every kernel the child
    launched is compiled here, by this GPU's compiler, with the child's argument types."""
    if failure.get("cause") in _compile.COMPILE_CAUSES:
        return None
    for kernel_name, name, specs in failure.get("launches") or []:
        kernel = objects.get(kernel_name)
        if kernel is None or not _origin.is_dispatcher(kernel) \
                or _origin.is_device_function(kernel):
            continue
        refusal = _compile.compile_here(kernel, specs)
        if refusal is not None:
            where = T(" ({line})", line=refusal.line) if refusal.line else ""
            return CheckFailure(T("{name} would not compile for a GPU{where}: {reason}.",
                                  name=name, where=where,
                                  reason=refusal.reason), cause=refusal.cause,
                                hint=COMPILE_HINT)
    return None


def _check_json(kw: dict) -> None:
    import json

    try:
        json.dumps(kw)
    except TypeError as exc:
        fail("replay_error", T("internal: a sim part's keyword arguments must be JSON values ({exc})", exc=exc))


def last_seconds() -> float:
    """Wall time of the latest replay subprocess (for the course's timing notes)."""
    return _STATE["last_seconds"]


@sim_part
def selfcheck_plus_one(kernel: Any, *, n: int = 100, block: int = 32) -> None:
    """A sim part of the engine's own, for its tests and for ``cudacourse doctor``: the kernel
    must compute ``out[i] = a[i] + 1`` reading each ``a[i]`` exactly once (a read count only
    the simulator can take)."""
    from . import _engine as E

    a = E._array(E._np.arange(n, dtype=E._float32))
    counted, reads = E.counting_array(a)
    out = E.Guarded.make(n, E._float32, "out")
    E.launch(kernel, (n + block - 1) // block, block, counted, out.view, name="plus_one")
    out.check_guards()
    E.compare(out.result(), a + 1, name="out", formula="a[i] + 1", block=block)
    if reads.n != n:
        E.fail("wrong_technique", T("plus_one read a {n} times for {n_2} elements; each element once is enough.",
                 n=reads.n,
                 n_2=n), hint=T("Read a[i] once into a local "
                                                          "variable."), context={"n": n, "reads": reads.n})
