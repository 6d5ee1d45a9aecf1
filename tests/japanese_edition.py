"""The Japanese edition of every diagnosis and pass line the checker catalogues produce.

A pytest plugin (tests/conftest.py imports its hook): while a test of a ``test_check_*.py``
catalogue runs, every :class:`CheckFailure` that the course's code makes and every pass line
``passes()`` returns is recorded; after the test, each is rendered again in Japanese
(``i18n.use("ja")``: ``CheckFailure.shown()``, and ``passes()`` called again with the same
facts) and :func:`not_japanese` must find no English sentence in it. No mutant runs twice:
the English run the catalogue makes is the one whose failures are re-rendered.
"""

from __future__ import annotations

import contextlib
import keyword
import os
import re
import sys
from pathlib import Path
from typing import Iterator

import pytest

from cudacourse import i18n
from cudacourse.course import lessonrules
from cudacourse.check import _engine, _failure

_SRC = str(Path(_failure.__file__).resolve().parents[1])

# Latin words a Japanese diagnosis keeps as they are: names of products and formats, units,
# and the names the exercises give their kernels and arrays (identifiers, not English).
ALLOWED = {
    "GPU", "GPUs", "CPU", "Python", "CUDA", "NumPy", "Numba", "NaN", "nan", "inf", "PCIe", "KiB", "JSON",
    "TILE", "TPB", "SAXPY", "ptxas", "libNVVM", "sm", "dtype", "float32", "float64",
    "mirror", "saxpy", "diffuse", "img", "out", "partial", "seq", "alpha", "omega", "rho",
    "scale", "steps", "chunk", "offset", "acc", "tile", "fx", "exp", "sqrt", "min", "max", "sum",
    "print", "yield", "shape", "size", "range", "column", "row", "lane", "rows", "cols",
    "result", "OPP", "CX", "CY", "NE", "NW", "SE", "SW", "TX", "TY", "head_dim", "causal",
    "bfloat16", "TF32", "mma", "ldmatrix", "Tensor",  # lesson 7: formats, PTX, Tensor Core
}
_CODE_SPAN = re.compile(r"`[^`]*`")
# a token with code inside it (not a word in parentheses): cuda.grid(1), a[i], x.<locals>.k
_CODE_TOKEN = re.compile(r"\S*(?:\w[.\[\]<>=#@/]|[\]>]\w|\w\()\S*")
# an indexing or call with its arguments: kernel[blocks, threads, streams[k % n]], f(a, b)
_INDEXING = re.compile(r"\w+[\[(](?:[^\[\]()]|[\[(][^\[\]()]*[\])])*[\])]")
# Tests whose failures carry English the test itself wrote into the course's template (a
# stand-in compiler's reason): there the Japanese frame is checked by test_i18n_messages.
TEST_DATA = {
    "test_a_child_failure_becomes_does_not_compile_when_this_compiler_refuses":
        "the refusal's reason and line are the test's own English",
}
# Two-letter English words; any other two-letter token is an identifier (nx, ty, xs, ...).
_SHORT_WORDS = {"of", "to", "by", "is", "be", "on", "at", "an", "no", "so", "do", "it", "as",
                "up", "we", "me", "my", "us"}
_WORD = re.compile(r"_*[A-Za-z][A-Za-z0-9_.']*(?:\[[^\]]*\]|\([^)]*\))?")
_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def not_japanese(text: str, names: set[str] = frozenset()) -> list[str]:
    """The English words left in ``text`` once code spans, identifiers (``a[i]``,
    ``cuda.grid(1)``, ``f_in``, one-letter names), numbers, Python keywords, ``names`` and
    :data:`ALLOWED` are set aside; and the text itself when it has Latin words but no
    Japanese at all. Empty: the text reads as Japanese."""
    rest = _CODE_SPAN.sub(" ", text)
    for code in sorted((n for n in names if not re.fullmatch(r"\w+", n)), key=len,
                       reverse=True):
        rest = rest.replace(code, " ")  # code excerpts filled in (a source line)
    rest = _INDEXING.sub(" ", rest)
    rest = _CODE_TOKEN.sub(" ", rest)
    words = []
    for m in _WORD.finditer(rest):
        w = m.group(0)
        if (len(w) == 1 or any(c in w for c in "_.[(0123456789'") or w in ALLOWED
                or w in names or keyword.iskeyword(w) or w.isupper()
                or (len(w) == 2 and w.lower() not in _SHORT_WORDS)
                or re.fullmatch(r"[A-Za-z][a-z]*[A-Z]\w*", w)):  # camelCase: an identifier
            continue
        words.append(w)
    if _WORD.search(rest) and not _JAPANESE.search(text) and words:
        return [text]
    return words


def _names(value: object) -> set[str]:
    """Identifier-like values filled into a message (array and kernel names)."""
    out = set()
    if isinstance(value, i18n.Text):
        for v in value.values.values():
            out |= _names(v)
    elif isinstance(value, str) and (re.fullmatch(r"[A-Za-z_]\w*", value)
                                     or re.search(r"[=\[\](){}]", value)):
        out.add(value)  # an identifier, or a line of code (a source excerpt, a formula)
    return out


def japanese():
    """The Japanese catalogue for a moment (i18n.speaking)."""
    return i18n.speaking("ja")


@contextlib.contextmanager
def recording() -> Iterator[tuple[list, list]]:
    """Record the failures the course's code makes, and the pass lines, while it runs."""
    failures: list = []
    lines: list = []
    init, passes = _failure.CheckFailure.__init__, _failure.passes

    def record_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name in (
                "fail", "__init__", "from_dict", "_rebuild") and \
                frame.f_code.co_filename.startswith(_SRC):
            frame = frame.f_back  # past the kit's fail(): who wrote the message?
        if frame is not None and frame.f_code.co_filename.startswith(_SRC):
            failures.append(self)  # not a test's own fail("msg") or CheckFailure("...")

    def record_passes(name, *facts, hidden=False):
        if sys._getframe(1).f_code.co_filename.startswith(_SRC):  # a checker's, not a test's
            lines.append((name, facts, hidden))
        return passes(name, *facts, hidden=hidden)

    _failure.CheckFailure.__init__ = record_init
    _failure.passes = _engine.passes = record_passes
    try:
        yield failures, lines
    finally:
        _failure.CheckFailure.__init__ = init
        _failure.passes = _engine.passes = passes


def problems(failures: list, lines: list) -> list[str]:
    """What does not read as Japanese in the failures and pass lines, re-rendered."""
    found = []
    with japanese():
        for f in failures:
            names = _names(f.text_message) | _names(f.text_hint)
            message, hint = f.shown()
            for part, text in (("diagnosis", message), ("fix", hint)):
                words = not_japanese(text, names) if text else []
                if words:
                    found.append(f"{f.cause} {part}: {text!r} (English: {words})")
        for name, facts, hidden in lines:
            text = _failure.passes(name, *facts, hidden=hidden)
            names = {name} | set().union(*(_names(x) for x in facts))
            words = not_japanese(text, names)
            if words:
                found.append(f"pass line: {text!r} (English: {words})")
    return found


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    if not Path(str(item.fspath)).name.startswith("test_check_") or \
            getattr(item, "originalname", item.name) in TEST_DATA:
        return (yield)
    with recording() as (failures, lines):
        result = yield
    found = problems(failures, lines)
    if found:
        rule = lessonrules.BY_ID["messages_translated"]  # the rule lesson check states
        raise AssertionError("not Japanese under CUDACOURSE_LANG=ja:\n" + "\n".join(found[:12])
                             + f"\n[{rule.id}] {rule.text}\n  Fix: {rule.fix}")
    return result
