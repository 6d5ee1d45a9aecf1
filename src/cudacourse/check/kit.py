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
  ``output`` (a poisoned guarded output), ``poison``, ``poisoned``, ``counting_array``;
* **launch**: ``launch(kernel, grid, block, *args, name=...)`` (validated against GPU limits,
  compiled for sm_90 in the simulator, crashes turned into one diagnosis) and
  ``launch_observed(obs, kernel, ...)`` (the same, then a precise diagnosis of any index
  outside a watched array), ``observing()`` (the per-thread record, ``Observation``),
  ``kernel_cases`` (a kernel checker's common start), ``sim_part`` (checks only the
  simulator can make, replayed in a simulator child on a GPU), ``tracing`` / ``Trace`` /
  ``DEFAULT`` (host steps: copies, streams, syncs);
* **verdicts**: ``compare(got, want, name=..., context=...)`` (the diagnosing comparison),
  ``fail(message, cause=..., hint=..., context=...)`` (raise a ``CheckFailure``; ``context``
  a dict of the case, or a sentence kept as ``case``), ``passes(name, *facts, hidden=...)``
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

from typing import Any, NoReturn

from . import _cases, _compile, _engine, _observe, _replay, _trace
from ._failure import CAUSES, CheckFailure, Passed, at, fmt, passes, plain

# --- trusted NumPy (the engine's references, taken before any learner cell ran) ----------
np = _engine._np
float32 = _engine._float32
float64 = _engine._float64
isclose = _engine._isclose
array_equal = _engine._array_equal
isnan = _engine._isnan
full = _engine._full
empty = _engine._empty
array = _engine._array
asarray = _engine._asarray
abs = _engine._abs  # noqa: A001 - NumPy's, as checkers name it
flatnonzero = _engine._flatnonzero
ndarray = _engine._ndarray
count_nonzero = _engine._count_nonzero
prod = _engine._prod
unravel_index = _engine._unravel_index

# --- cases ---------------------------------------------------------------------------------
Cases = _cases.Cases
resolve = _cases.resolve
rng = _engine.rng
random_array = _engine.random_array
sizes = _engine.sizes
simulator = _engine.simulator

# --- what was handed in --------------------------------------------------------------------
require_kernel = _engine.require_kernel
require_device_function = _engine.require_device_function
require_function = _engine.require_function
require_device_array = _engine.require_device_array

# --- arrays, launches, observation ---------------------------------------------------------
Guarded = _engine.Guarded
to_device_guarded = _engine.to_device_guarded
counting_array = _engine.counting_array
validate_launch = _engine.validate_launch
launch = _engine.launch
launch_observed = _observe.launch
observing = _observe.observing
Observation = _observe.Observation
kernel_cases = _observe.kernel_cases
output = _observe.output
poison = _observe.poison
poisoned = _observe.poisoned
thread_name = _observe.thread_name
verb = _observe._verb  # 'wrote' / 'read', in the learner's language
dims = _observe._dims
sim_part = _replay.sim_part
tracing = _trace.tracing
Trace = _trace.Trace
DEFAULT = _trace.DEFAULT
same_memory = _trace.same_memory
memory_range = _trace.memory_range

# --- the sm_90 compile gate (the simulator compiles each kernel for a real GPU) ------------
CompileRefused = _compile.CompileRefused
compile_status = _compile.status
compile_resources = _compile.resources
compile_kernel = _compile.compile_kernel
type_spec = _compile.type_spec

# --- verdicts ------------------------------------------------------------------------------
GUARD = _engine.GUARD
SENTINEL = _engine.SENTINEL
spread = _observe.spread
no_divergent_barrier = _observe.no_divergent_barrier
no_return_value = _observe.no_return_value
no_computed_nan = _observe.no_computed_nan
check_guards = _observe.check_guards
out_of_bounds_words = _observe.out_of_bounds_words
off_by_one_index = _observe.off_by_one_index
cause_of = _observe.cause_of
ctx_text = _observe.ctx_text
compare = _observe.compare


def fail(message: Any, *, cause: str = "wrong_values", hint: Any = "", context: Any = None,
         **more: Any) -> NoReturn:
    """Raise a :class:`CheckFailure`: ``message`` the diagnosis a learner reads (a ``T(...)``
    template), ``cause`` a stable id from ``CAUSES``, ``hint`` the fix in one sentence,
    ``context`` the case (a dict, or a sentence kept as ``case``); extra keywords join it."""
    __tracebackhide__ = True
    if isinstance(context, str):
        context = {"case": context} if context else {}
    raise CheckFailure(message, cause=cause, hint=hint, context={**(context or {}), **more})


__all__ = [name for name in dir() if not name.startswith("_")
           and name not in ("annotations", "Any", "NoReturn")]
