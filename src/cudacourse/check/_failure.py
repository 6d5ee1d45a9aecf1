"""A checker's verdict as data: :class:`CheckFailure` (diagnosis, stable cause id, hint,
case), ``fail``, the success line ``passes``, and the formatting that puts values and the
simulator's internals in a learner's words (``at``, ``fmt``, ``plain``).

Checkers reach it through the kit (``K.fail(cause, message)``); its contract is at the top of
``check/kit.py``.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

import numpy as _np

from . import _launches

from .. import i18n as _i18n

# Stable causes: what each id means. An exercise spec adds its own (``causes={...}`` of
# ``check.spec.exercise``, through ``register_causes``); list one here when two lessons
# need it.
CAUSES = {
    "wrong_values": "the output differs from the NumPy reference",
    "off_by_one": "every value sits one index away from where it belongs",
    "unwritten": "some outputs were never written",
    "accumulated_into_output": "the kernel added into an output nobody had initialised",
    "wrong_index": "an index computed from the wrong quantity (a thread's where a block's belongs)",
    "swapped_before_first_step": "the buffers swapped before the first step: it read the scratch buffer",
    "only_first_block": "only block 0 did its work",
    "wrong_formula": "the output matches a different formula",
    "nonfinite": "NaN or inf where the reference is finite",
    "wrong_scale": "every element off by the same factor",
    "wrong_shape": "the output has the wrong shape",
    "out_of_bounds_write": "a write past the end (or before the start) of an array",
    "out_of_bounds_read": "an index outside an array (the simulator saw it)",
    "illegal_address": "memory the kernel does not own",
    "inputs_changed": "the kernel wrote into an input",
    "missing_barrier": "a shared-memory read before the writes it needs were all done",
    "divergent_barrier": "a barrier or warp call not reached by every thread that must",
    "warp_ub": "undefined behaviour in a warp intrinsic (mask, exited lane)",
    "wrong_technique": "the right numbers, but not by the technique the exercise asks for",
    "race": "the host read results before the stream producing them was synchronized",
    "bad_launch": "a grid or block shape a GPU refuses",
    "does_not_compile": "a GPU (sm_90) would refuse to compile the kernel",
    "kernel_raised": "the kernel raised an exception while running",
    "not_a_kernel": "a plain function, device function or other object where a kernel is needed",
    "not_a_function": "something else where a Python function is needed",
    "not_device_array": "a host array where a device array is needed",
    "stub": "the exercise's untouched stub (raise NotImplementedError())",
    "wrong_signature": "the kernel takes the wrong number of parameters",
    "package_kernel": "the course's own kernel or function handed in as the answer",
    "replay_error": "the simulator re-run of the kernel could not be carried out",
    "not_checked": "the check was stopped before it could finish",
    "endless_loop": "a loop whose condition never turns false",
    "tuple_for_number": "a tuple (a fragment, a pair) where one number belongs",
    "tuple_for_array": "a tuple indexed as if it were an array",
    # compile refusals that name the mistake (check/_compile.refusal_cause)
    "grid_dimensions": "cuda.grid() or cuda.gridsize() asked for a number of dimensions the code does not use",
    "missing_axis": "a.shape[k] of an axis the array does not have",
    "float_index": "an array indexed with a float",
    # what a learner's host function raised, when it singles out the mistake (check/_raised)
    "used_before_assigned": "a variable read before it was given a value",
    "number_for_array": "a number used where an array belongs",
    "array_for_number": "an array used where a number belongs",
    "list_for_array": "a Python list used where an array belongs",
    "shape_mismatch": "a copy or assignment between arrays of different shapes",
    "list_index": "a Python list indexed past its end",
    "stream_argument": "a value that is not a stream passed as stream=",
    # lesson 1 and the shared verdicts on what each thread did (_observe)
    "off_by_one_guard": "the bounds guard lets one thread too many through (i <= n)",
    "nan_result": "the kernel computed NaN",
    "kernel_returns_value": "the kernel returns a value, which a GPU throws away",
    "redundant_work": "several threads (or blocks) redo the same elements",
    "serial_work": "one thread does the work of many",
    # lesson 2: 2D grids, grid-stride loops, warp shuffles
    "swapped_axes": "x and y (columns and rows) swapped",
    "guard_wrong_axis": "the bounds guard compares an index with the other axis' size",
    "no_grid_stride": "no grid-stride loop: some elements get no thread",
    "early_return": "lanes left before the warp's shuffles",
    "no_shuffle": "the warp's sum is not made with shuffles",
    # lesson 3: memory between host and device
    "host_function_raised": "the host function raised an exception",
    "implicit_copy": "a host array passed to a kernel: an implicit copy on every launch",
    "result_on_device": "the result was left in GPU memory",
    "no_result": "no NumPy array returned",
    "needless_upload": "a buffer copied to the device that the kernel only overwrites",
    "wrong_dtype": "the result has the wrong dtype",
    "returned_before_sync": "returned while queued GPU work could still be running",
    "stream_race": "two streams use one buffer with nothing ordering them",
    "copied_back_early": "the result was copied back before the kernel ran",
    "no_kernel": "no kernel launched: the work did not run on the GPU",
    "same_buffer_in_out": "one buffer as a step's input and output",
    "copies_in_loop": "copies between host and device inside the loop",
    "launch_count": "the wrong number of kernel launches",
    "allocs_in_loop": "device memory allocated inside the loop",
    "dropped_tail": "the last elements were dropped when splitting into chunks",
    "default_stream": "everything on the default stream: nothing overlaps",
    "too_few_streams": "fewer streams used than asked for",
    "sync_copies": "copies not made asynchronously on the streams",
    "pageable_copy": "an asynchronous copy from pageable (not pinned) host memory",
    "copy_instead_of_swap": "a device-to-device copy instead of swapping the two buffers",
    "stale_buffer": "the buffer the last step read copied back, not the one it wrote",
    "no_overlap": "the host waited for the GPU between chunks: nothing overlaps",
    # lesson 4: shared memory, tiles and reductions
    "unfilled_tile": "a shared tile read where no thread had stored a value",
    "no_tiles": "no shared-memory tiles: the technique the exercise asks for is missing",
    "no_tree": "the block's sum is not a tree reduction",
    "constant_offset": "every element off by the same amount (added, not multiplied)",
    "division_by_zero": "a division by zero in the kernel",
    "input_ignored": "an input the formula needs was never read by the thread that wrote the value",
    "slot_collision": "two threads met at one shared slot at one line: an index, not a barrier",
    # lesson 5: fused attention
    "overflow": "exp overflowed: the running maximum was not subtracted",
    "causal_mask_off_by_one": "the causal mask is off by one",
    "stale_tile_keys": "keys of an earlier tile read again from a shared tile not reloaded",
    # lesson 6: stencils and the lattice Boltzmann method
    "halo_missing": "the tile's halo (the cells around it) was not loaded",
    "nondeterministic": "different results for the same input: a race",
    "buffers_reallocated": "new device arrays made instead of swapping the two buffers",
    "buffers_not_swapped": "the two buffers are not swapped between steps",
    "wrong_buffer": "the state returned is not the last step's",
    "grid_axes_swapped": "the grid's x and y swapped: part of the field never updated",
    "grid_too_small": "a grid too small for the field: some cells never updated",
    "periodic_wrap": "the periodic wrap-around at the lattice's edges is wrong",
    "push_race": "populations pushed into neighbours' slots: a race",
    "pulled_from_output": "populations read from the output array, not the input",
    "solid_not_copied": "solid nodes do not keep their populations",
    "lost_population": "populations are lost at the walls",
    "mass_not_conserved": "mass is not conserved",
    "wrong_opposite": "bounce-back takes the wrong opposite direction",
    "wrong_axis": "a term acts on the wrong axis or with the wrong sign",
    # lesson 7: tensor cores
    "fragment_layout": "a fragment holds the wrong elements: the lane mapping of mma is wrong",
    "k_tile_skipped": "the k loop leaves out a tile of the sum",
    "bf16_accumulator": "the sum was accumulated in bfloat16, rounded at every step",
    "no_rescale": "the accumulator is not rescaled when a row's maximum grows",
}



def register_causes(new: dict) -> None:
    """Add an exercise spec's own causes (id -> what it means) when its checker module is
    imported (before any learner cell: ``import cudacourse.check`` imports every checker);
    an id already listed must keep its meaning."""
    for cause, meaning in new.items():
        if not cause.isidentifier() or cause != cause.lower():
            raise ValueError(f"cause {cause!r}: a lower_snake_case id")
        if CAUSES.get(cause, meaning) != meaning:
            raise ValueError(f"cause {cause!r} already means {CAUSES[cause]!r}")
        CAUSES[cause] = meaning


WIDTH = 88  # the width of a notebook's traceback box


class CheckFailure(AssertionError):
    """A learner kernel gave a wrong answer: the diagnosis, its cause id, the fix, the case.

    ``str()`` is the diagnosis first (``message``), then the hint when the message does not
    already contain it, then the case (``context``). ``cause`` is stable for tests and for
    checkers that branch on a failure; never parse the message.
    """

    def __init__(self, message: str = "", *, cause: str = "wrong_values", hint: str = "",
                 context: dict | None = None) -> None:
        # A message or hint made with ``T(template, **values)`` (cudacourse.i18n.Text) keeps
        # its template, so it is shown in the learner's language; a plain str is English.
        self.text_message = message if isinstance(message, _i18n.Text) else None
        self.text_hint = hint if isinstance(hint, _i18n.Text) else None
        self.message = plain(str(message)).strip()
        if self.text_message is not None and self.message == message:
            # the Text itself: a checker that builds a new diagnosis from this one's message
            # (``T("{message} ...", message=exc.message)``) keeps it translatable
            self.message = self.text_message
        self.cause = cause
        self.hint = _capital(plain(str(hint)).strip())
        self.context = dict(context or {})
        super().__init__(self.text())

    def text(self) -> str:
        message, hint = self.shown()
        parts = [message]
        if hint and hint not in message:
            parts.append(hint)
        if self.context:
            parts.append("[" + ", ".join(f"{k}={fmt(v)}" for k, v in self.context.items()) + "]")
        return " ".join(p for p in parts if p)

    def shown(self) -> tuple[str, str]:
        """(diagnosis, hint) in the course's language (``cudacourse.i18n``): the catalogue's
        translation of each, else the English, headed by the translated cause so that every
        failure says in the learner's language what kind of mistake it is."""
        message = (plain(self.text_message.shown(), translate=True).strip()
                   if self.text_message is not None else _i18n.gettext(self.message))
        hint = (_capital(plain(self.text_hint.shown(), translate=True).strip())
                if self.text_hint is not None else _i18n.gettext(self.hint))
        if _i18n.language() != _i18n.DEFAULT and message == self.message and \
                self.cause in CAUSES:
            cause = _i18n.gettext(CAUSES[self.cause])
            if cause != CAUSES[self.cause]:
                message = f"[{cause}] {message}"
        return message, hint

    def wrapped(self, width: int = WIDTH) -> str:
        """The text wrapped for a notebook: the diagnosis alone on the first lines (the
        first one shorter, as the traceback prints ``CheckFailure: `` before it)."""
        import textwrap

        head = " " * len("CheckFailure: ")  # the first line follows the exception's name
        message, hint = self.shown()
        lines = [textwrap.fill(message, width, initial_indent=head)[len(head):]]
        if hint and hint not in message:
            lines.append(textwrap.fill(_i18n.gettext("Fix: ") + hint, width))
        if self.context:
            lines.append(textwrap.fill(_i18n.gettext("Case: ") + ", ".join(
                f"{_i18n.shown(k)}={_i18n.shown(v) if isinstance(v, _i18n.Text) else fmt(v)}"
                for k, v in self.context.items()), width))  # T(...) keys in the language
        return "\n".join(lines)

    def to_dict(self) -> dict:
        d = {"message": self.message, "cause": self.cause, "hint": self.hint,
             "context": {k: _jsonable(v) for k, v in self.context.items()}}
        if self.text_message is not None:
            d["message_text"] = self.text_message.to_dict()
        if self.text_hint is not None:
            d["hint_text"] = self.text_hint.to_dict()
        launched = _launches.launched()
        if launched:  # a replay child: the GPU process compiles these for real (_replay)
            d["launches"] = launched
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CheckFailure":
        message = (_i18n.Text.from_dict(d["message_text"]) if "message_text" in d
                   else d.get("message", ""))
        hint = _i18n.Text.from_dict(d["hint_text"]) if "hint_text" in d else d.get("hint", "")
        return cls(message, cause=d.get("cause", "wrong_values"), hint=hint,
                   context=d.get("context") or {})

    def __reduce__(self):  # pickles with its fields (multiprocessing, pytest-xdist)
        return (_rebuild, (self.to_dict(),))


def _capital(text: str) -> str:
    return text[0].upper() + text[1:] if text else text


def _rebuild(d: dict) -> CheckFailure:
    return CheckFailure.from_dict(d)


def fail(cause: str, message: "str | _i18n.Text", context: Any = None, hint: Any = "",
         **more: Any) -> NoReturn:
    """Raise a :class:`CheckFailure`, the one way every checker fails: ``cause`` a stable id
    from :data:`CAUSES` (counted by reports, branched on by tests), ``message`` the diagnosis
    a learner reads (a ``T(...)`` template), ``context`` the case (a dict, or a sentence kept
    as ``case``), ``hint`` the fix in one sentence; extra keywords join the context."""
    __tracebackhide__ = True  # pytest and IPython: show the checker's caller, not this frame
    if isinstance(context, str) or isinstance(context, _i18n.Text):
        context = {"case": context} if str(context) else {}
    raise CheckFailure(message, cause=cause, hint=hint, context={**(context or {}), **more})


class Passed(str):
    """A checker's success line; a notebook shows it as text, without quotes."""

    def __repr__(self) -> str:
        return str(self)


def passes(name: str, *facts: str, hidden: bool = False) -> Passed:
    """The one-line success message a checker returns: what was checked, and what grading
    adds (``vector_add passes: 3 sizes, 2 block sizes, a spare block; grading reruns it on
    hidden cases (other sizes and seeds)``): the hidden tests, which the learner's copy does
    not contain, call the same checker with ``hidden=True``."""
    _ = _i18n.gettext  # the whole line in one language: its frame, joints and facts
    if facts:  # the facts: T(...) texts by their template, plain phrases if listed
        line = _("{name} passes: {facts}").format(
            name=name, facts=_(", ").join(_i18n.shown(f) for f in facts))
    else:
        line = _("{name} passes").format(name=name)
    tail = "" if hidden else _("; grading reruns it on hidden cases (other sizes and seeds)")
    return Passed(line + tail)


# --- values in the learner's words ----------------------------------------------------------

def fmt(value: Any) -> str:
    """``-13.8`` for ``np.float32(-13.8)``, ``(0, 0)`` for a tuple of ``np.int64``."""
    if isinstance(value, (bool, _np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, _np.integer)):
        return str(int(value))
    if isinstance(value, (float, _np.floating)):
        v = float(value)
        if v != v:
            return "NaN"
        return f"{v:.6g}"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(fmt(v) for v in value)
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, _np.ndarray):
        return f"array of shape {tuple(value.shape)}"
    return str(value)


def at(name: str, index: Any) -> str:
    """``c[0, 0]`` for ``("c", (np.int64(0), np.int64(0)))``."""
    if isinstance(index, (tuple, list)):
        return f"{name}[{', '.join(fmt(i) for i in index)}]"
    return f"{name}[{fmt(index)}]"


def _jsonable(v: Any) -> Any:
    if isinstance(v, (bool, _np.bool_)):
        return bool(v)
    if isinstance(v, (int, _np.integer)):
        return int(v)
    if isinstance(v, (float, _np.floating)):
        return float(v)
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if v is None or isinstance(v, str):
        return v
    return str(v)


# the words replacing simulator internals, translated where they are shown
_SIM_WORDS = [
    (re.compile(r"tid=\[(-?\d+), (-?\d+), (-?\d+)\] ctaid=\[(-?\d+), (-?\d+), (-?\d+)\]"),
     _i18n.N_(r"thread (\1, \2, \3) of block (\4, \5, \6)")),
    (re.compile(r"ctaid=\[(-?\d+), (-?\d+), (-?\d+)\]"), _i18n.N_(r"block (\1, \2, \3)")),
    (re.compile(r"tid=\[(-?\d+), (-?\d+), (-?\d+)\]"), _i18n.N_(r"thread (\1, \2, \3)")),
    (re.compile(r"np\.(?:float|int|uint|bool)\d*\(([^()]*)\)"), r"\1"),
    (re.compile(r"\bFakeCUDAArray\b"), _i18n.N_("device array")),
    (re.compile(r"\bFakeCUDAKernel\b"), _i18n.N_("kernel")),
    (re.compile(r"\bFakeCUDAModule\b"), "cuda"),
    (re.compile(r"\bFakeShared\w*\b"), _i18n.N_("shared array")),
]
_SIM_TRANSLATED = {rep for _pat, rep in _SIM_WORDS} - {r"\1", "cuda"}


def plain(text: str, translate: bool = False) -> str:
    """Simulator internals in plain words, for any message shown to a learner (in the
    course's language with ``translate``; the English otherwise)."""
    for pat, rep in _SIM_WORDS:
        if translate and rep in _SIM_TRANSLATED:
            rep = _i18n.gettext(rep)
        text = pat.sub(rep, text)
    return text
