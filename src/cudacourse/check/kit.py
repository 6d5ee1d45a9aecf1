"""The checker's kit: everything a checker module (``check/<topic>.py``) uses, by public name.

A checker imports this module only (``from . import kit as K``); what is underneath
(``_engine``, ``_observe``, ``_cases``, ``_trace``, ``_replay``, ``_compile``) is the
machinery's own business and may be rearranged without touching a checker. The contract:

* **cases**: ``resolve(hidden, visible, seed)`` (the visible cases, or the hidden
  ``Cases(seed=..., sizes=[...])`` the master's hidden test names), ``rng(seed)``,
  ``random_array(gen, shape)`` (fresh values, never all-ones or zeros);
* **what was handed in**: ``require_kernel``, ``require_device_function``,
  ``require_function``, ``require_device_array`` (the one detector of stubs, plain
  functions and the course's own code);
* **arrays**: ``Guarded``/``to_device_guarded`` (outputs between sentinel guard zones),
  ``output(shape, name, dtype=float32, fill="poison"|"zero")`` (a guarded output: NaN or
  -999999 for integers, or zeros for an accumulator), ``poison``, ``poisoned``,
  ``counting_array``, ``poisoned_shared()`` (shared arrays start poisoned, simulator);
* **diagnoses**: ``diagnose`` (the named families of wrong results, ``_diagnose``);
* **an exercise as data**: ``exercise(...)`` makes a simple exercise's whole ``check_<name>``
  from its spec (``Random``, ``Scalar``, ``Output``; see :mod:`.spec`); ``trusted(ref)``
  captures the NumPy functions a reference uses;
* **launch**: ``launch(kernel, grid, block, *args, name=..., obs=None)`` (the one launch:
  validated against GPU limits, compiled for sm_90 in the simulator, crashes turned into one
  diagnosis; with ``obs`` a precise diagnosis of any index outside a watched array),
  ``observing()`` (the per-thread record, ``Observation``),
  ``kernel_cases`` (a kernel checker's common start), ``sim_part`` (checks only the
  simulator can make, replayed in a simulator child on a GPU), ``tracing`` / ``Trace`` /
  ``DEFAULT`` (host steps: copies, streams, syncs);
* **verdicts**: ``compare(got, want, name=..., context=...)`` (the one diagnosing
  comparison), ``fail(cause, message, context=None, hint="")`` (the one way to fail: raise a
  ``CheckFailure``; ``context`` a dict of the case, or a sentence kept as ``case``; extra
  keywords join it), ``passes(name, *facts, hidden=...)``
  (the one success line), the observation's checks (``spread``, ``no_divergent_barrier``,
  ``no_return_value``, ``no_computed_nan``, ``check_guards``, ``out_of_bounds_words``,
  ``off_by_one_index``), ``thread_name``, ``fmt``, ``at``, ``plain``, ``cause_of``;
* **trusted NumPy**: ``np`` and the functions a checker compares with (``float32``,
  ``isclose``, ``array_equal``...), captured when the engine was first imported, before any
  answer cell could rebind ``np.isclose``: a checker computes with these, never with a
  ``numpy`` it imports itself.

Module-level values here never change after import (the grading audit watches them).
"""

from __future__ import annotations

import types
import warnings
from typing import Any

# trusted NumPy: bound here when the kit is first imported (by ``import cudacourse.check``,
# before any learner cell could rebind ``np.isclose``)
import numpy as np
from numpy import (abs, array, array_equal, asarray, count_nonzero, empty,  # noqa: A004
                   flatnonzero, float32, float64, full, isclose, isnan, ndarray, prod,
                   unravel_index)

from . import _cases
from . import _diagnose as diagnose
from ._cases import Cases
from ._compile import CompileRefused, compile_kernel, ptx_text, type_spec
from ._compile import resources as compile_resources
from ._compile import status as compile_status
from ._compile import toolkit as compile_toolkit
from ._engine import (GUARD, SENTINEL, Guarded, counting_array, random_array, require_device_array,
                      require_device_function, require_function, require_kernel, rng, simulator,
                      sizes, to_device_guarded, validate_launch)
from ._failure import CAUSES, CheckFailure, Passed, at, fail, fmt, passes, plain
from ._observation import Observation, thread_name, verb
from ._observation import _dims as dims
from ._observe import (cause_of, check_guards, ctx_text, kernel_cases, launch, no_computed_nan,
                       no_divergent_barrier, no_return_value, observing, off_by_one_index,
                       out_of_bounds_words, output, poison, poisoned, spread)
from ._observe import compare  # the engine's compare, with the evidence of the last observed launch
from ._replay import sim_part
from ._shared import SHARED_POISON, poisoned_shared
from ._trace import DEFAULT, Trace, memory_range, same_memory, tracing
from .spec import Exercise, Output, Random, Scalar, exercise, trusted


# Every other NumPy function a checker names (``K.bincount``, ``K.cumsum``): captured here
# too, at the same moment, so no list of them needs an edit when a checker needs a new one.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # deprecated aliases warn when read
    _NUMPY = types.MappingProxyType({
        name: value for name in dir(np) if not name.startswith("_")
        and callable(value := getattr(np, name, None)) and not isinstance(value, type(np))})


def __getattr__(name: str) -> Any:
    try:
        return _NUMPY[name]
    except KeyError:
        raise AttributeError(f"the check kit has no {name!r} (nor has NumPy)") from None


def resolve(hidden: Any, visible: list, seed: int | None, **kw: Any) -> tuple[list, int | None]:
    """The visible cases and seed, or the hidden ``Cases`` the master's hidden test names
    (``_cases.resolve``, looked up at each call: tests watch the one definition there)."""
    return _cases.resolve(hidden, visible, seed, **kw)


__all__ = [
    # trusted NumPy
    "np", "abs", "array", "array_equal", "asarray", "count_nonzero", "empty", "flatnonzero",
    "float32", "float64", "full", "isclose", "isnan", "ndarray", "prod", "unravel_index",
    # cases
    "Cases", "resolve", "rng", "random_array", "sizes", "simulator",
    # an exercise as data
    "Exercise", "Output", "Random", "Scalar", "exercise", "trusted",
    # what was handed in
    "require_kernel", "require_device_function", "require_function", "require_device_array",
    # arrays, launches, observation
    "Guarded", "to_device_guarded", "counting_array", "validate_launch", "launch",
    "observing", "Observation", "kernel_cases", "output", "poison", "poisoned",
    "poisoned_shared", "SHARED_POISON", "thread_name", "verb", "dims", "sim_part", "tracing",
    "Trace", "DEFAULT", "same_memory", "memory_range",
    # the sm_90 compile gate
    "CompileRefused", "compile_status", "compile_resources", "compile_kernel", "type_spec",
    "ptx_text", "compile_toolkit",
    # verdicts
    "GUARD", "SENTINEL", "CAUSES", "CheckFailure", "Passed", "at", "fmt", "plain", "fail",
    "passes", "compare", "diagnose", "spread", "no_divergent_barrier", "no_return_value",
    "no_computed_nan", "check_guards", "out_of_bounds_words", "off_by_one_index", "cause_of",
    "ctx_text",
]
