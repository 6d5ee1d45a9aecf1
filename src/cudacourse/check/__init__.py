"""Checkers for every exercise: ``check_<exercise>(learner_kernel)``.

Each checker owns the launch, compares with the NumPy reference and raises
``AssertionError`` (a ``CheckFailure``, with ``cause``, ``hint`` and ``context`` fields) whose
message names the likely cause. The same call serves the visible check cell and nbgrader's
hidden tests (``hidden=Cases(seed=..., sizes=[...])``: the master's hidden test cell names
shapes and a seed the learner has not seen; the package holds none, see ``_cases``). The
machinery they share is in ``_engine`` (its docstring is the contract), ``_origin`` (what
was handed in), ``_compile`` (the sm_90 compile gate in the simulator), ``_replay`` (the
simulator-only checks, re-run in a simulator subprocess on a GPU) and ``_preflight`` (on a
GPU, every launch of learner code runs its index-checked instrumented build first, so an
index outside an array is named and never poisons the process's CUDA context).

A failure shows the learner its diagnosis and the check cell's line, not the checker's
frames: every public ``check_*`` re-raises its ``CheckFailure`` from a clean frame, wrapped
to the notebook's width under IPython.

This module cannot be modified after import: an answer cell that assigns
``cudacourse.check.check_vector_add = lambda k: None`` gets an error instead of a free pass.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import functools
import importlib
import sys
import types

# Imported eagerly, in this order, so that no module appears later (the grading audit
# compares the loaded modules before and after the learner's cells).
from . import _cases, _engine, _origin, _source, _compile, _replay  # noqa: F401
from . import _numba_hooks, _budget  # noqa: F401
from . import _observe, _instrument, _preflight, _copies  # noqa: F401
from . import kit  # noqa: F401 - the checkers' one import
from ..course import lessons
from ._cases import Cases
from ._engine import CheckFailure

# One checker module per lesson, in the registry's order; each defines check_* functions.
_TOPICS = lessons.CHECKER_MODULES


def _in_ipython() -> bool:
    ipy = sys.modules.get("IPython")
    try:
        return ipy is not None and ipy.get_ipython() is not None
    except Exception:  # noqa: BLE001 - a broken or partial IPython: plain text then
        return False


def _clean(failure: CheckFailure) -> CheckFailure:
    """The failure as a learner sees it: no checker frames, no chained exceptions, and under
    IPython its text wrapped to the notebook's width."""
    if _in_ipython():
        failure.args = (failure.wrapped(),)
    return failure.with_traceback(None)


def _public(fn):
    """The checker as learners call it: its failure without the checker's own frames.

    IPython always shows the frame that raised, so that frame is this one, named after the
    checker, and its lines say where to look.
    """

    @functools.wraps(fn)
    def check(*args, **kwargs):
        __tracebackhide__ = True  # pytest hides this frame
        try:
            # every kernel it launches must compile for sm_90; on a GPU every launch of learner
            # code runs its index-checked build first; no check runs past its budget
            # (and a copy from an empty host slice is refused on a GPU as in the simulator)
            with _compile.gating(), _preflight.guarding(), _budget.budget(), _copies.exact():
                return fn(*args, **kwargs)
        except CheckFailure as failure:
            # Your code did not pass this check: the reason is printed below.
            raise _clean(failure) from None

    check.__code__ = check.__code__.replace(co_name=fn.__name__, co_qualname=fn.__name__)
    return check


__all__ = ["Cases", "CheckFailure"]
for _topic in _TOPICS:
    _mod = importlib.import_module(f"{__name__}.{_topic}")
    for _name in dir(_mod):
        if _name.startswith("check_") and callable(getattr(_mod, _name)):
            globals()[_name] = _public(getattr(_mod, _name))
            __all__.append(_name)


class _ReadOnlyModule(types.ModuleType):
    """A module whose existing attributes cannot be rebound or deleted from learner code."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in self.__dict__:
            raise AttributeError(f"{self.__name__} is read-only: {name} cannot be replaced")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{self.__name__} is read-only: {name} cannot be deleted")


sys.modules[__name__].__class__ = _ReadOnlyModule
