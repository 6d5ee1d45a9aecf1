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


# Python's texts with a name in them (issue 45, mutants: a name read in place of another on
# the host) -> catalogue words around the name, which is code
_SHAPES = (
    (re.compile(r"cannot access local variable '(\w+)' where it is not associated with a "
                r"value$"),
     lambda m: T("the variable `{name}` is read before anything is assigned to it",
                 name=m.group(1))),
    (re.compile(r"local variable '(\w+)' referenced before assignment$"),
     lambda m: T("the variable `{name}` is read before anything is assigned to it",
                 name=m.group(1))),
    (re.compile(r"name '(\w+)' is not defined$"),
     lambda m: T("the name `{name}` is not defined", name=m.group(1))),
    (re.compile(r"'([\w .]+)' object has no attribute '(\w+)'$"),
     lambda m: T("a value of type `{kind}` has no attribute `{attr}`: a name that holds "
                 "something else than the one meant", kind=m.group(1), attr=m.group(2))),
    (re.compile(r"'([\w .]+)' object cannot be interpreted as an integer$"),
     lambda m: T("a value of type `{kind}` where a whole number belongs (a count, a range or "
                 "a size)", kind=m.group(1))),
)


def words(exc: BaseException) -> Text | str:
    """The exception's text as a catalogue sentence when its shape is known, else as raised."""
    text = str(exc)
    if text in _PYTHON:
        return _PYTHON[text]
    for pattern, make in _SHAPES:
        hit = pattern.search(text)
        if hit:
            return make(hit)
    return text
