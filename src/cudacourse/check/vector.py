"""Checker for lesson 1's exercise: the vector-add kernel."""

from __future__ import annotations
from ..i18n import T

# Causes each checker here raises only after a case's values matched the reference (the
# technique, not the values, was wrong): partial credit keeps the value thirds for them
# (cudacourse.grader.partial, through cudacourse.lessons.technique).
TECHNIQUE = {
    "check_vector_add": ("serial_work", "redundant_work"),
}

from typing import Any

from . import kit as K
from .kit import resolve
from ..i18n import T


def _vector_add_cases(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> list:
    """check_vector_add's cases, observed here in the simulator (see O.kernel_cases)."""
    # (n, threads per block); the hidden ones come from the master's hidden test cell
    cases, seed = resolve(hidden, [(1000, 128), (257, 256), (1, 32)], seed, name="check_vector_add")
    gen = K.rng(seed)
    # How the work is spread is judged after every size gave right results: a kernel doing
    # two elements per thread that writes past the end for odd n is told that first.
    spreads = []
    for n, tpb in cases:
        a = K.random_array(gen, n)
        b = K.random_array(gen, n)
        ga, gb = K.to_device_guarded(a, "a"), K.to_device_guarded(b, "b")
        out = K.output(n, "out")
        blocks = (n + tpb - 1) // tpb + 1  # one spare block: its threads must do nothing
        ctx = {"n": n, "blocks": blocks, "threads_per_block": tpb}
        with K.observing() as obs:
            K.launch_observed(obs, kernel, blocks, tpb, obs.watch(ga.view, "a"), obs.watch(gb.view, "b"),
                              obs.watch(out.view, "out"), name="vector_add", context=ctx)
        K.no_return_value(obs, "vector_add", "out[i]", ctx)
        K.check_guards(out, T("missing bounds guard (if i < n)?"), ctx)
        got = out.result()
        K.no_computed_nan(got, "out", ctx)
        want = a.astype(K.float64) + b.astype(K.float64)
        K.compare(got, want, name="out", formula="a[i] + b[i]", block=tpb,
                  context=ctx, alternatives={"a[i] - b[i]": a - b, "a[i] * b[i]": a * b,
                                             T("a[i] (b ignored)"): a, T("b[i] (a ignored)"): b,
                                             "2 * a[i]": 2 * a})
        if not K.array_equal(ga.result(), a) or not K.array_equal(gb.result(), b):
            K.fail(T("vector_add changed its inputs a or b; only out should "
                                       "be written."), cause="inputs_changed", context=ctx)
        spreads.append((obs, n, blocks * tpb, ctx))
    for obs, n, threads, ctx in spreads:
        K.spread(obs, "out", n, threads, "vector_add", ctx)
    return cases


def check_vector_add(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> str:
    """Check ``kernel(a, b, out)`` computes ``out[i] = a[i] + b[i]`` for every i.

    Sizes are not multiples of the block size, the grid has a spare block, outputs start as
    NaN (to find unwritten elements) and sit between guard zones (to find writes past the
    end). In the simulator every element write is attributed to its thread, so one thread
    doing the whole vector, or every block redoing it, fails although the sum is right; on a
    GPU the same observations come from a simulator replay. ``hidden=Cases(seed, sizes)``
    (from the master's hidden test cell) runs its sizes and block sizes, for grading.
    """
    cases = K.kernel_cases(_vector_add_cases, kernel, "vector_add", 3, hidden=hidden, seed=seed)
    return K.passes("vector_add", T("{n_cases} sizes ({cases})", n_cases=len(cases),
                                    cases=', '.join((str(n) for n, _ in cases))),
             T("{n_cases} block sizes",
               n_cases=len({t for _, t in cases})), T("a spare block each"),
             T("each element written once, by its own thread"), hidden=hidden)
