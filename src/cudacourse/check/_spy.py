"""What the tests see of a check's launches of learner code: ``spying()``.

The order of events ("instrumented": its index-checked run, "replayed": that run in the
simulator, "refused": an index outside an array or a loop past its cap, "raw": the launch
itself) is what shows that no raw learner kernel runs before its checked run on a GPU
(tests/test_check_preflight.py). Both ``_preflight`` (a launch's first run) and
``_instrument`` (a checker's launch that is the instrumented build itself) note here, a
module below both.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

_SPIES: list = []


@contextlib.contextmanager
def spying() -> Iterator[list]:
    """The list of (event, kernel name) this process's launches of learner code make, in
    order, within the block."""
    seen: list = []
    _SPIES.append(seen)
    try:
        yield seen
    finally:
        _SPIES.remove(seen)


def note(event: str, name: str) -> None:
    for seen in _SPIES:
        seen.append((event, name))


def noting() -> bool:
    """Whether anyone listens (the notes cost nothing then)."""
    return bool(_SPIES)


__all__ = ["note", "noting", "spying"]
