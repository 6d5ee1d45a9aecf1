"""An exercise as data: one call to :func:`exercise` states everything its check needs, and
returns the ``check_<name>`` function (docs/authoring.md, *An exercise as data*)::

    check_vector_add = K.exercise(
        "vector_add", params=("a", "b", "out"),
        inputs={"a": K.Random(), "b": K.Random()}, outputs={"out": K.Output()},
        reference=vector_add_ref, formula="a[i] + b[i]",
        cases=[(1000, 128), (257, 256), (1, 32)], seed=1,
        alternatives={"a[i] - b[i]": lambda a, b: a - b},
        observe=("spread",), points=3)

What the call says, the check does, in this order for every case ``(n, threads per
block)``: fresh inputs from their generators (the visible check draws them from ``seed``, so
the same answer always meets the same numbers; a hidden ``Cases`` brings its own seed),
inputs between guard zones, outputs poisoned (NaN for floats, a marker or zeros for
integers), a launch of ``ceil(n / block) + 1`` blocks (one spare block whose threads must do
nothing), the thread record of the simulator (or of a GPU's replay), the guards, computed
NaN, the comparison with ``reference`` (called in float64 with the NumPy functions it names,
captured when the spec was made: a learner cell that rebinds ``np.add`` cannot change it),
the ``alternatives`` (wrong formulas, named when the output matches one), the inputs
unchanged; after every case matched, the ``observe``\\d techniques (``"spread"``: each
element written once, by its own thread). A simple exercise needs no checker code at all.

``lessons.OBSERVED_CAUSES`` says which causes each observed technique raises after the
values matched (partial credit keeps the value thirds for them); the lesson validator
(:mod:`cudacourse.lessoncheck`) reads a spec from its module's text, without importing it.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as _np

from ..course import lessons as _lessons
from ..i18n import T
from . import _cases, _engine, _failure, _observe

__all__ = ["Exercise", "Output", "Random", "Scalar", "exercise", "trusted", "protected_names"]


# --- the trusted NumPy of a reference ---------------------------------------------------------

def protected_names(fn: Callable, _seen: set | None = None) -> set[str]:
    """The NumPy functions ``fn`` uses as ``xp.<name>`` or ``np.<name>`` (and those of the
    package functions it calls with ``xp``): what must be captured before learner code runs."""
    seen = _seen if _seen is not None else set()
    if fn in seen:
        return set()
    seen.add(fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return set()
    names: set[str] = set()
    glb = getattr(fn, "__globals__", {})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in ("xp", "np", "numpy") and hasattr(_np, node.attr):
            names.add(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            callee = glb.get(node.func.id)
            if inspect.isfunction(callee) and str(getattr(callee, "__module__", "")).startswith(
                    "cudacourse"):
                names |= protected_names(callee, seen)
    return names


def trusted(fn: Callable) -> Callable:
    """``fn`` (a reference ``f(..., xp=np)``) with the NumPy functions it uses captured now:
    the returned function calls ``fn(..., xp=<those functions>)`` whatever a learner cell
    later rebinds in ``numpy``. Call it at import time (module level), never at check time."""
    names = sorted(protected_names(fn))
    xp = types.SimpleNamespace(**{n: getattr(_np, n) for n in names})
    takes_xp = "xp" in inspect.signature(fn).parameters

    def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, xp=xp, **kwargs) if takes_xp else fn(*args, **kwargs)

    call.__name__ = getattr(fn, "__name__", "reference")
    call.protected = tuple(names)  # type: ignore[attr-defined]
    return call


# --- what goes in and out ---------------------------------------------------------------------

def _shape(spec: Any, size: Any) -> tuple:
    if spec is None:
        spec = size
    if callable(spec):
        spec = spec(size)
    return (int(spec),) if isinstance(spec, (int, _np.integer)) else tuple(int(s) for s in spec)


@dataclass(frozen=True)
class Random:
    """An input array of random values: floats in [low, high) away from 0 and 1, or integers
    in [low, high) (``dtype="int32"``...). ``shape``: None for the case's size, an int or a
    tuple, or a function of the case's size (``n``, or ``(rows, cols)``)."""

    low: float = -4.0
    high: float = 4.0
    dtype: str = "float32"
    shape: Any = None

    def make(self, gen: Any, size: Any) -> Any:
        shape = _shape(self.shape, size)
        if _np.dtype(self.dtype).kind in "iu":
            return gen.integers(int(self.low), int(self.high), size=shape).astype(self.dtype)
        return _engine.random_array(gen, shape, dtype=_np.dtype(self.dtype), low=self.low,
                                    high=self.high)


@dataclass(frozen=True)
class Scalar:
    """A scalar argument, passed to the kernel as ``dtype`` and to the reference as is."""

    value: float
    dtype: str = "float32"

    def make(self, gen: Any, size: Any) -> Any:
        return _np.dtype(self.dtype).type(self.value)


@dataclass(frozen=True)
class Output:
    """An output array: ``fill="poison"`` (NaN for floats, a marker for integers: an element
    never written is found) or ``"zero"`` (an accumulator the kernel adds into, e.g. with
    ``cuda.atomic.add``). ``shape`` as for :class:`Random`."""

    dtype: str = "float32"
    shape: Any = None
    fill: str = "poison"


# --- the spec ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exercise:
    name: str
    params: tuple[str, ...]
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Output]
    reference: Callable
    cases: tuple
    formula: str = ""
    seed: int = 1
    alternatives: Mapping[str, Callable] = field(default_factory=dict)
    observe: tuple[str, ...] = ("spread",)
    causes: Mapping[str, str] = field(default_factory=dict)
    points: int = 1
    spare_blocks: int = 1
    rtol: float = 1e-5
    atol: float = 1e-5
    guard_hint: Any = None

    @property
    def technique(self) -> tuple[str, ...]:
        """Causes raised only after the values matched (from what it observes)."""
        return tuple(c for o in self.observe for c in _lessons.OBSERVED_CAUSES[o])


def _grid(shape: tuple, block: Any, spare: int) -> tuple[Any, Any]:
    """Blocks covering ``shape`` (x along the last axis), ``spare`` extra along x."""
    if isinstance(block, int):
        return -(-shape[-1] // block) + spare, block
    block = tuple(block)
    dims = list(reversed(shape))[:len(block)]
    grid = [-(-d // b) for d, b in zip(dims, block)]
    grid[0] += spare
    return tuple(grid), block


def _threads(grid: Any, block: Any) -> int:
    g = (grid,) if isinstance(grid, int) else grid
    b = (block,) if isinstance(block, int) else block
    return int(_engine._prod(g)) * int(_engine._prod(b))


def _run_cases(ex: Exercise, ref: Callable, alts: dict, kernel: Any, *, hidden: Any = False,
               seed: int | None = None) -> list:
    """Every case of ``ex`` on ``kernel``; the values first, then the observed technique."""
    __tracebackhide__ = True
    cases, seed = _cases.resolve(hidden, list(ex.cases), ex.seed if seed is None else seed,
                            name=f"check_{ex.name}")
    gen = _engine.rng(seed)
    hint = ex.guard_hint if ex.guard_hint is not None else T("missing bounds guard (if i < n)?")
    observed = []
    for raw, block in cases:
        raw = raw if isinstance(raw, int) else tuple(raw)  # n, or (rows, cols)
        size = (raw,) if isinstance(raw, int) else raw
        host = {p: gen_.make(gen, raw) for p, gen_ in ex.inputs.items()}
        guarded = {p: _engine.to_device_guarded(v, p) for p, v in host.items()
                   if isinstance(v, _np.ndarray)}
        outs = {p: _observe.output(_shape(o.shape, raw), p, dtype=_np.dtype(o.dtype), fill=o.fill)
                for p, o in ex.outputs.items()}
        grid, blk = _grid(size, block, ex.spare_blocks)
        ctx = {"n": size[0] if len(size) == 1 else size, "blocks": grid,
               "threads_per_block": blk}
        with _observe.observing() as obs:
            args = []
            for p in ex.params:
                if p in outs:
                    args.append(obs.watch(outs[p].view, p))
                elif p in guarded:
                    args.append(obs.watch(guarded[p].view, p))
                else:
                    args.append(host[p])
            _observe.launch(kernel, grid, blk, *args, name=ex.name, context=ctx, obs=obs)
        first_out = next(iter(ex.outputs))
        _observe.no_return_value(obs, ex.name, f"{first_out}[i]", ctx)
        for p in ex.outputs:
            _observe.check_guards(outs[p], hint, ctx)
        wide = [v.astype(_engine._float64) if isinstance(v, _np.ndarray) and v.dtype.kind == "f"
                else v for v in (host[p] for p in ex.params if p in host)]
        want = ref(*wide)
        wants = want if isinstance(want, tuple) else (want,)
        plain_args = [host[p] for p in ex.params if p in host]
        for (p, o), w in zip(ex.outputs.items(), wants):
            got = outs[p].result()
            if _np.dtype(o.dtype).kind == "f":
                _observe.no_computed_nan(got, p, ctx)
            # the kit's one compare: with the record of the launch, "never written" is told
            # from written twice / accumulated into poison, and a wrong value explained
            _observe.compare(got, w, name=p, formula=ex.formula,
                             block=blk if isinstance(blk, int) else None, rtol=ex.rtol,
                             atol=ex.atol, context=ctx, alternatives={label: f(*plain_args)
                                                 for label, f in alts.items()})
        changed = [p for p, g in guarded.items() if not _engine._array_equal(g.result(), host[p])]
        if changed:
            _failure.fail("inputs_changed",
                   T("{name} changed its inputs {inputs}; only {outputs} should be written.",
                     name=ex.name, inputs=", ".join(changed),
                     outputs=", ".join(ex.outputs)), context=ctx)
        observed.append((obs, outs, _threads(grid, blk), ctx))
    for obs, outs, threads, ctx in observed:
        if "spread" in ex.observe:
            for p in ex.outputs:
                _observe.spread(obs, p, int(_engine._prod(outs[p].shape)), threads, ex.name, ctx)
    return cases


def exercise(name: str, *, params: Sequence[str], inputs: Mapping[str, Any],
             outputs: Mapping[str, Output], reference: Callable, cases: Sequence[tuple],
             formula: str = "", seed: int = 1, alternatives: Mapping[str, Callable] | None = None,
             observe: Sequence[str] = ("spread",), causes: Mapping[str, str] | None = None,
             points: int = 1, spare_blocks: int = 1, rtol: float = 1e-5, atol: float = 1e-5,
             guard_hint: Any = None, module: str | None = None) -> Callable:
    """The ``check_<name>(kernel, *, hidden=False, seed=None)`` of an exercise stated as data.

    ``params``: the kernel's parameters in order, each an input, an output or a scalar;
    ``inputs``: name -> :class:`Random` or :class:`Scalar`; ``outputs``: name ->
    :class:`Output`; ``reference(*inputs, xp=np)``: the NumPy reference (its NumPy functions
    captured now); ``cases``: the visible ``(size, threads per block)``; ``seed``: the
    visible cases' seed; ``alternatives``: label -> ``f(*inputs)``, wrong formulas to name;
    ``observe``: techniques checked after the values (``"spread"``); ``causes``: new cause
    ids this exercise may report -> what each means (registered in ``CAUSES``); ``points``:
    the test cell's points (the lesson validator holds the lesson to them). Call it at the
    top level of the lesson's checker module: the cases function it makes is registered
    there as ``_<name>_cases``, so that a GPU can replay it in the simulator.
    """
    params = tuple(params)
    unknown = [p for p in params if p not in inputs and p not in outputs]
    extra = [p for p in (*inputs, *outputs) if p not in params]
    if unknown or extra:
        raise ValueError(f"exercise {name}: params {params} must name each input and output "
                         f"once (unknown {unknown}, not in params {extra})")
    bad = [o for o in observe if o not in _lessons.OBSERVED_CAUSES]
    if bad:
        raise ValueError(f"exercise {name}: observe {bad}: one of "
                         f"{sorted(_lessons.OBSERVED_CAUSES)}")
    _failure.register_causes(dict(causes or {}))
    ex = Exercise(name, params, dict(inputs), dict(outputs), reference, tuple(cases), formula,
                  seed, dict(alternatives or {}), tuple(observe), dict(causes or {}), points,
                  spare_blocks, rtol, atol, guard_hint)
    ref = trusted(reference)  # captured now, before any learner cell runs
    alts = {label: trusted(f) for label, f in ex.alternatives.items()}
    caller = sys._getframe(1).f_globals if module is None else sys.modules[module].__dict__

    def part(kernel: Any, *, hidden: Any = False, seed: int | None = None) -> list:
        __tracebackhide__ = True
        return _run_cases(ex, ref, alts, kernel, hidden=hidden, seed=seed)

    part.__name__ = part.__qualname__ = f"_{name}_cases"
    part.__module__ = caller["__name__"]
    caller[part.__name__] = part  # module-level: the GPU's simulator replay imports it

    def check(kernel: Any, *, hidden: Any = False, seed: int | None = None) -> str:
        __tracebackhide__ = True
        done = _observe.kernel_cases(part, kernel, name, len(params), hidden=hidden, seed=seed)
        sizes = [c[0] for c in done]
        facts = [T("{n_cases} sizes ({cases})", n_cases=len(done),
                   cases=", ".join(str(s) for s in sizes)),
                 T("{n_cases} block sizes", n_cases=len({str(c[1]) for c in done}))]
        if ex.spare_blocks:
            facts.append(T("a spare block each"))
        if "spread" in ex.observe:
            facts.append(T("each element written once, by its own thread"))
        return _failure.passes(name, *facts, hidden=hidden)

    check.__name__ = check.__qualname__ = f"check_{name}"
    check.__module__ = caller["__name__"]
    check.__doc__ = (f"Check ``kernel({', '.join(params)})`` computes "
                     f"{formula or 'the reference'} for every element (an exercise spec: "
                     f"cudacourse.check.spec).")
    check.exercise = ex  # type: ignore[attr-defined]
    return check
