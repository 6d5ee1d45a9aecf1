"""What a learner's host code raised, in catalogue words.

Python's exception texts are English; a diagnosis quotes them only where no entry below
knows the shape. ``launch_not_integers(exc)`` singles out a grid or block computed with ``/``
(Numba refuses a float there), a mistake the check can name (``bad_launch``);
``words(exc)`` gives the exception's text as a catalogue sentence where one is known.
"""

from __future__ import annotations

import re

from ..i18n import T, Text

# Numba's launch configuration refusing a non-integer grid or block (numba-cuda's wording
# across versions): the value it got is the only part quoted
_NOT_INTEGERS = re.compile(r"(?:griddim|blockdim) must be a sequence of integers, got (.+)$|"
                           r"expected a sequence of integers or a single integer, got (.+)$")

# Python's own texts for the exceptions learners' host code raises most -> catalogue words
_PYTHON = {
    "list index out of range": T("an index past the end of a Python list"),
    "tuple index out of range": T("an index past the end of a tuple"),
    "division by zero": T("a division by zero"),
    "float division by zero": T("a division by zero"),
    "integer division or modulo by zero": T("a division by zero"),
}


def launch_not_integers(exc: BaseException) -> str:
    """The value Numba refused as a grid or block (not whole numbers); '' for anything else."""
    if not isinstance(exc, TypeError):
        return ""
    hit = _NOT_INTEGERS.search(str(exc))
    return (hit.group(1) or hit.group(2)).strip() if hit else ""


def words(exc: BaseException) -> Text | str:
    """The exception's text as a catalogue sentence when its shape is known, else as raised."""
    return _PYTHON.get(str(exc), str(exc))
