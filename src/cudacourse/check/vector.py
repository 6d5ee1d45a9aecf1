"""Checker for lesson 1's exercise, the vector-add kernel: an exercise spec
(:mod:`cudacourse.check.spec`), no checker code."""

from __future__ import annotations

from . import kit as K
from ..i18n import T
from ..kernels.vector import vector_add_ref

check_vector_add = K.exercise(
    "vector_add",
    params=("a", "b", "out"),
    inputs={"a": K.Random(), "b": K.Random()},
    outputs={"out": K.Output("float32")},
    reference=vector_add_ref,
    formula="a[i] + b[i]",
    # (n, threads per block): not block multiples, two block sizes, n = 1; the hidden ones
    # come from the master's hidden test cell
    cases=[(1000, 128), (257, 256), (1, 32)],
    seed=20250101,
    alternatives={"a[i] - b[i]": lambda a, b: a - b, "a[i] * b[i]": lambda a, b: a * b,
                  T("a[i] (b ignored)"): lambda a, b: a, T("b[i] (a ignored)"): lambda a, b: b,
                  "2 * a[i]": lambda a, b: 2 * a},
    observe=("spread",),  # each element written once, by its own thread
    points=3,
)
