"""What a learner's host code raised, in catalogue words.

Python's exception texts are English; a diagnosis quotes them only where no entry below
knows the shape. ``launch_not_integers(exc)`` singles out a grid or block computed with ``/``
(Numba refuses a float there), a mistake the check can name (``bad_launch``);
``words(exc)`` gives the exception's text as a catalogue sentence where one is known.
"""

from __future__ import annotations

import re
from typing import Any

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


def launch_not_numbers(exc: BaseException) -> str:
    """The kind of value (not a number) a launch got as its grid or block, in the simulator:
    its check compares the configuration with None, which an array answers elementwise, so
    Numba says "launch configuration was not specified" where a GPU's Numba says "griddim
    must be a sequence of integers" (:func:`launch_not_integers`). '' for anything else."""
    if not isinstance(exc, ValueError) or "launch configuration was not specified" not in \
            str(exc):
        return ""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "normalize_kernel_dimensions":
            for key in ("griddim", "blockdim"):
                v = tb.tb_frame.f_locals.get(key)
                if v is not None and hasattr(v, "shape"):
                    return type(v).__name__
        tb = tb.tb_next
    return ""


# Python's texts that single out what a learner's host function did wrong: (cause, pattern)
_NAMED = [
    ("used_before_assigned",
     re.compile(r"cannot access local variable '(?P<var>\w+)' where it is not associated|"
                r"local variable '(?P<var2>\w+)' referenced before assignment")),
    ("used_before_assigned", re.compile(r"^name '(?P<var>\w+)' is not defined$")),
    ("shape_mismatch",
     re.compile(r"incompatible shape: (?P<a>\([\d, ]*\)) vs\. (?P<b>\([\d, ]*\))|"
                r"could not broadcast input array from shape (?P<a2>\([\d, ]*\)) into "
                r"shape (?P<b2>\([\d, ]*\))")),
    ("list_index", re.compile(r"^list index out of range$")),
    # a GPU's Numba, copying between a device array and an empty host slice (h[lo:lo]);
    # the simulator says "could not broadcast ..." of the same copy
    ("shape_mismatch", re.compile(r"^null buffer pointer$")),
    # a GPU's Numba, given a value that is not a stream as stream= (the simulator ignores it)
    # (and the simulator, through runtime/simstreams.py, in the same words)
    ("stream_argument", re.compile(r"^Expected a Stream object(?:, ExperimentalStream, "
                                   r"GraphBuilder,)? or 0, got (?P<type>[\w.]+)$")),
    ("list_for_array",
     re.compile(r"^'list' object has no attribute '(?P<attr>\w+)'$")),
    ("number_for_array",
     re.compile(r"^'(?P<type>int|float|complex|bool|(?:numpy\.)?(?:float|int|uint)\d+)' "
                r"object has no attribute '(?P<attr>\w+)'$")),
    ("array_for_number",
     re.compile(r"^unsupported operand type\(s\) for (?P<op>\S+): '(?P<a>[\w. ]+)' and "
                r"'(?P<b>[\w. ]+)'$")),
    # an array where a count belongs (range(d_u), a size): Python's words name its type
    ("array_for_number",
     re.compile(r"^'(?P<kind>[\w. ]+)' object cannot be interpreted as an integer$")),
]
_ARRAY_TYPES = re.compile(r"device array|DeviceNDArray|FakeCUDAArray|ndarray")
_NUMBER_TYPES = re.compile(r"^(?:int|float|complex|bool|(?:numpy\.)?(?:float|int|uint)\d+)$")


def learner_line(exc: BaseException, fn: Any) -> tuple[int, str]:
    """(line number, code) of the last line of ``fn`` (the learner's function) the exception
    went through; (0, '') when it did not."""
    import linecache

    code = getattr(fn, "__code__", None)
    found = (0, "")
    tb = exc.__traceback__
    while tb is not None:
        if code is not None and tb.tb_frame.f_code is code:
            line = linecache.getline(code.co_filename, tb.tb_lineno).strip()
            if "'" not in line and '"' not in line:  # the code, without its comment
                line = re.sub(r"\s*#.*$", "", line)
            found = (tb.tb_lineno, line)
        tb = tb.tb_next
    return found


def named(exc: BaseException, fn: Any, name: str) -> tuple[str, Text] | None:
    """(cause, diagnosis) when what ``fn`` (the learner's host function ``name``) raised
    singles out its mistake: a variable read before it was assigned, a number used as an
    array (an array's attribute asked of it), a device array in host arithmetic where a
    number belongs; None otherwise (the exception is shown as raised)."""
    text = str(exc)
    number, code = learner_line(exc, fn)
    where = T(" (line {number}: {code})", number=number, code=code) if number else ""
    for cause, pattern in _NAMED:
        hit = pattern.search(text)
        if not hit:
            continue
        if cause == "used_before_assigned" and isinstance(exc, NameError) and \
                not isinstance(exc, UnboundLocalError):
            return cause, T("{name} read the name {var}, which has no value where it is read"
                            "{where}: a loop's or a comprehension's variable exists only "
                            "inside it", name=name, var=hit.group("var"), where=where)
        if cause == "shape_mismatch" and isinstance(exc, ValueError) and \
                text == "null buffer pointer":
            return cause, T("{name} copied between a device array and an empty host slice"
                            "{where}: a copy moves a whole array into one of the same shape: "
                            "slice both sides to the same chunk (h[lo:hi] with d[:hi - lo])",
                            name=name, where=where)
        if cause == "stream_argument" and isinstance(exc, TypeError):
            return cause, T("{name} passed a value of type {type} as a stream{where}: "
                            "stream= takes a stream made by cuda.stream() (the chunk's own: "
                            "streams[s])", name=name, type=hit.group("type"), where=where)
        if cause == "shape_mismatch" and isinstance(exc, ValueError):
            a, b = hit.group("a") or hit.group("a2"), hit.group("b") or hit.group("b2")
            return cause, T("{name} copied between arrays of different shapes, {a} and {b}"
                            "{where}: a copy or an assignment moves a whole array into one of "
                            "the same shape: slice both sides to the same chunk (h[lo:hi] "
                            "with d[:hi - lo])", name=name, a=a, b=b, where=where)
        if cause == "list_index" and isinstance(exc, IndexError):
            return cause, T("{name} indexed a Python list past its end{where}: check which "
                            "number indexes it (a list of one item per stream takes a stream's "
                            "number, 0 to n_streams - 1)", name=name, where=where)
        if cause == "used_before_assigned" and isinstance(exc, UnboundLocalError):
            var = hit.group("var") or hit.group("var2")
            return cause, T("{name} read the variable {var} before giving it a value{where}: "
                            "a variable must be assigned on a line that runs before the one "
                            "that reads it", name=name, var=var, where=where)
        if cause == "list_for_array" and isinstance(exc, AttributeError):
            return cause, T("{name} used a Python list where an array belongs{where}: a list "
                            "has no .{attr}; take the list's item (one array per stream: "
                            "d_out[s])", name=name, attr=hit.group("attr"), where=where)
        if cause == "number_for_array" and isinstance(exc, AttributeError):
            return cause, T("{name} used a number where an array belongs{where}: a number "
                            "({type}) has no .{attr}, which an array has", name=name,
                            type=hit.group("type"), attr=hit.group("attr"), where=where)
        if cause == "array_for_number" and isinstance(exc, TypeError) and \
                "kind" in hit.groupdict():
            if _ARRAY_TYPES.search(hit.group("kind")):
                return cause, T("{name} gave a device array where a whole number belongs "
                                "(a count, a range or a size){where}: check which name is "
                                "passed there", name=name, where=where)
            continue
        if cause == "array_for_number" and isinstance(exc, TypeError):
            a, b = hit.group("a"), hit.group("b")
            if (_ARRAY_TYPES.search(a) and _NUMBER_TYPES.match(b)) or \
                    (_ARRAY_TYPES.search(b) and _NUMBER_TYPES.match(a)):
                return cause, T("{name} used a device array in host arithmetic ({op}) where a "
                                "number belongs{where}: sizes and counts are numbers, such as "
                                "x.shape[0]", name=name, op=hit.group("op"), where=where)
    return None


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
    hit = re.match(r"^list indices must be integers or slices, not (\w+)$", text)
    if hit:
        return T("a Python list indexed with a {type}, where an integer belongs",
                 type=hit.group(1))
    if text in _PYTHON:
        return _PYTHON[text]
    for pattern, make in _SHAPES:
        hit = pattern.search(text)
        if hit:
            return make(hit)
    return text
