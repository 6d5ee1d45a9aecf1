"""Hidden cases come from the instructor's side: the master's hidden test cell names them.

A checker's visible cases live in the package (the learner runs them, so they are no secret).
Its hidden ones do not: the master's hidden test cell, which nbgrader strips from the learner
copy and puts back at autograding, passes them in::

    ### BEGIN HIDDEN TESTS
    cudacourse.check.check_vector_add(vector_add, hidden=Cases(seed=..., sizes=[...]))
    ### END HIDDEN TESTS

``seed`` seeds the random inputs; ``sizes`` are the checker's case tuples, in the same form as
its visible ones (its docstring says which). ``hidden=True`` no longer means anything: there is
no hidden case in the package to draw (issue 19, class 7), so it is refused with the reason.

Between processes (the simulator replay on a GPU) a ``Cases`` travels as JSON (``to_json``) and
``resolve`` reads either form back.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any

_SEED_MAX = 2**32 - 1
_MAX_CASES = 64


def _frozen(v: Any, where: str) -> Any:
    """Lists (from JSON or the cell) to tuples; only numbers and bools inside."""
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x, where) for x in v)
    if isinstance(v, bool) or isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    raise TypeError(f"{where}: a case holds numbers only, got {v!r}")


@dataclass(frozen=True)
class Cases:
    """The hidden cases of one check, as the master's hidden test cell chooses them."""

    seed: int
    sizes: tuple

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) \
                or not 0 <= self.seed <= _SEED_MAX:
            raise ValueError(f"Cases: seed must be an int in 0..{_SEED_MAX}, got {self.seed!r}")
        sizes = _frozen(self.sizes, "Cases.sizes")
        if not isinstance(sizes, tuple) or not 1 <= len(sizes) <= _MAX_CASES:
            raise ValueError(f"Cases: sizes must list 1 to {_MAX_CASES} cases")
        object.__setattr__(self, "sizes", sizes)

    def to_json(self) -> dict[str, Any]:
        return {"seed": self.seed, "sizes": self.sizes}


def visible_seed(name: str) -> int:
    """The fixed seed of a check's visible cases (issue 45, stable evidence): the same answer
    gets the same inputs, so the same numbers in its diagnosis, on every run and device. It
    is no secret (the learner runs the visible cases); the hidden cases bring their own."""
    return zlib.crc32(name.encode("utf-8")) & _SEED_MAX


def resolve(hidden: Any, visible: list, seed: int | None, *, arity: int | None = None,
            name: str = "check") -> tuple[list, int]:
    """(the cases to run, their seed): ``visible`` and ``seed`` unless ``hidden`` is a
    ``Cases`` (or its JSON form), whose sizes and seed then replace them. Without a seed the
    visible cases take the check's fixed one (``visible_seed(name)``).

    ``arity`` is how many entries each case tuple has (as in ``visible``); a case of another
    length is refused with a message naming the checker.
    """
    if hidden is None or hidden is False:
        return list(visible), (visible_seed(name) if seed is None else seed)
    if hidden is True:
        raise TypeError(
            f"{name}: hidden=True draws nothing: the hidden cases are chosen by the master's "
            "hidden test cell, as hidden=Cases(seed=..., sizes=[...])")
    if isinstance(hidden, dict) and set(hidden) == {"seed", "sizes"}:
        hidden = Cases(hidden["seed"], hidden["sizes"])
    if not isinstance(hidden, Cases):
        raise TypeError(f"{name}: hidden must be a Cases(seed=..., sizes=[...]), "
                        f"got {type(hidden).__name__}")
    if visible and not isinstance(visible[0], (tuple, list)):  # one number per case
        bad = [c for c in hidden.sizes if isinstance(c, tuple)]
        if bad:
            raise ValueError(f"{name}: each hidden case is one number, like {visible[0]!r}; "
                             f"got {bad[0]!r}")
        return list(hidden.sizes), hidden.seed
    arity = arity if arity is not None else (len(visible[0]) if visible else None)
    for case in hidden.sizes:
        if not isinstance(case, tuple) or (arity is not None and len(case) != arity):
            raise ValueError(f"{name}: each hidden case is a tuple of {arity} entries, "
                             f"like {tuple(visible[0]) if visible else '()'}; got {case!r}")
    return list(hidden.sizes), hidden.seed


def wire(hidden: Any) -> Any:
    """``hidden`` in a form that crosses a JSON boundary (the simulator replay)."""
    return hidden.to_json() if isinstance(hidden, Cases) else hidden
