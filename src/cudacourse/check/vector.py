"""Checker for lesson 1's exercise: the vector-add kernel."""

from __future__ import annotations

from typing import Any

from . import _engine as E


def check_vector_add(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> None:
    """Check ``kernel(a, b, out)`` computes ``out[i] = a[i] + b[i]`` for every i.

    Sizes are not multiples of the block size, the grid has a spare block, outputs start as
    NaN (to find unwritten elements) and sit between guard zones (to find writes past the
    end). ``hidden=True`` uses other sizes and block sizes, for grading.
    """
    E.require_kernel(kernel, "vector_add", 3)
    gen = E.rng(seed)
    cases = [(1000, 128), (257, 256), (1, 32)] if not hidden else [(1531, 64), (97, 96), (700, 512)]
    for n, tpb in cases:
        a = E.random_array(gen, n)
        b = E.random_array(gen, n)
        ga, gb = E.to_device_guarded(a, "a"), E.to_device_guarded(b, "b")
        out = E.Guarded.make(n, E._float32, "out")
        blocks = (n + tpb - 1) // tpb + 1  # one spare block: its threads must do nothing
        ctx = f"n={n}, {blocks} blocks of {tpb} threads"
        E.launch(kernel, blocks, tpb, ga.view, gb.view, out.view, name="vector_add")
        out.check_guards()
        want = a.astype(E._float64) + b.astype(E._float64)
        E.compare(out.result(), want, name="out", formula="a[i] + b[i]", block=tpb,
                  context=ctx, alternatives={"a[i] - b[i]": a - b, "a[i] * b[i]": a * b,
                                             "a[i] (b ignored)": a, "b[i] (a ignored)": b,
                                             "2 * a[i]": 2 * a})
        if not E._array_equal(ga.result(), a) or not E._array_equal(gb.result(), b):
            E.fail(f"vector_add changed its inputs a or b; only out should be written [{ctx}].")
