"""The launches a checker simulated in this process, by kernel name, launch name and types.

``_compile`` records each simulated launch of a learner's kernel here; a failure raised in a
replay child carries the record back (``_failure.CheckFailure.to_dict``), so that the GPU
process compiles those kernels for real (``_replay``). Below both, so that neither imports
the other for it.
"""

from __future__ import annotations

from typing import Any

_RECORD: list[list[Any]] = []


def record(entry: list[Any], keep: int) -> None:
    """Remember ``entry`` once, keeping the last ``keep`` entries."""
    if entry[0] and entry not in _RECORD:
        _RECORD.append(entry)
        del _RECORD[:-keep]


def launched() -> list:
    """The launches recorded in this process: ``[kernel name, launch name, type specs]``."""
    return [list(e) for e in _RECORD]
