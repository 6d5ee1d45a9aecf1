"""The static allow-list of answer code: every master answer passes, every escape is refused.

Escapes are a catalogue, one construct per entry, each with the phrase its refusal must
name (like the wrong-kernel catalogues of the checkers). Runs in-process: the allow-list is
static analysis, nothing of the samples is executed here.
"""

from __future__ import annotations

import math

import nbformat
import numpy as np
import pytest

import cudacourse  # noqa: F401 - chooses the device before numba.cuda
from cudacourse.course import authoring
from cudacourse.grader import allowlist, prepare
from numba import cuda, float32

ROOT = authoring.ROOT
MASTERS = sorted((ROOT / "solutions").glob("*/*.ipynb"))


@cuda.jit
def _context_kernel(x, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i]


CONTEXT = {"cuda": cuda, "np": np, "math": math, "float32": float32, "TILE": 16,
           "scale_kernel": _context_kernel, "quiz": object(), "cudacourse": cudacourse}


def _select(source: str, grade_id: str = "vector_add", context: dict | None = None):
    return allowlist.select([(grade_id, source)], CONTEXT if context is None else context)


ESCAPES = {
    "__import__": ("def f(a):\n    __import__('os')\n", "name '__import__'"),
    "import in a body": ("def f(a):\n    import os\n", "Import statement"),
    "getattr": ("def f(a):\n    return getattr(a, 'x')\n", "name 'getattr'"),
    "exec": ("def f(a):\n    exec('1')\n", "name 'exec'"),
    "open": ("def f(a):\n    open('/etc/passwd')\n", "name 'open'"),
    "globals()": ("def f(a):\n    globals()\n", "name 'globals'"),
    "dunder attribute": ("def f(a):\n    return a.__class__\n", "attribute '.__class__'"),
    "function globals": ("def f(a):\n    return f.__globals__\n", "attribute '.__globals__'"),
    "private attribute": ("def f(a):\n    return np._core\n", "attribute '._core'"),
    "unlisted attribute": ("def f(a):\n    return np.testing\n", "attribute '.testing'"),
    "str.format": ("def f(a):\n    return '{0.__class__}'.format(a)\n", "attribute '.format'"),
    "attribute store": ("def f(a):\n    np.allclose = None\n", "attribute '.allclose'"),
    "store into a global": ("def f(a):\n    TILE[0] = 1\n", "not a local variable"),
    "global statement": ("def f(a):\n    global TILE\n    TILE = 2\n", "Global statement"),
    "lambda": ("def f(a):\n    g = lambda: 1\n", "Lambda"),
    "nested def": ("def f(a):\n    def g():\n        pass\n", "FunctionDef statement"),
    "class": ("class f:\n    pass\n", "ClassDef statement"),
    "try": ("def f(a):\n    try:\n        pass\n    except Exception:\n        pass\n",
            "Try statement"),
    "with": ("def f(a):\n    with a:\n        pass\n", "With statement"),
    "yield": ("def f(a):\n    yield 1\n", "Yield"),
    "walrus": ("def f(a):\n    if (b := 1):\n        pass\n", "NamedExpr"),
    "course module": ("def f(a):\n    return cudacourse\n", "name 'cudacourse'"),
    "course object": ("def f(a):\n    return quiz\n", "name 'quiz'"),
    "decorator": ("def d(f):\n    return f\n@d\ndef f(a):\n    pass\n",
                  "decorator other than @cuda.jit"),
    "decorator argument": ("@cuda.jit(debug=print('x'))\ndef f(a):\n    pass\n",
                           "decorator argument that is not a literal"),
    # Numba evaluates a signature string with builtins: Python inside it would run in the
    # verdict process on a GPU grader. The whole class: strings, tuples of strings, types.
    "signature string": ("@cuda.jit(\"void(float32[:])\")\ndef f(a):\n    pass\n",
                         "signature string"),
    "signature string with code": (
        "@cuda.jit(\"__import__('os').system('id') or void()\")\ndef f(a):\n    pass\n",
        "signature string"),
    "signature strings in a list": ("@cuda.jit([\"void(float32[:])\"])\ndef f(a):\n"
                                    "    pass\n", "signature string"),
    "signature object": ("@cuda.jit((float32[:],))\ndef f(a):\n    pass\n",
                         "positional argument"),
    "signature by keyword": ("@cuda.jit(func_or_sig=\"void()\")\ndef f(a):\n    pass\n",
                             "decorator option 'func_or_sig='"),
    "link a file": ("@cuda.jit(link=[\"/tmp/x.cu\"])\ndef f(a):\n    pass\n",
                    "decorator option 'link='"),
    "cache to disk": ("@cuda.jit(cache=True)\ndef f(a):\n    pass\n",
                      "decorator option 'cache='"),
    "string option": ("@cuda.jit(inline=\"always\")\ndef f(a):\n    pass\n",
                      "must be bool"),
    "string annotation": ("def f(a: \"__import__('os')\"):\n    pass\n",
                          "string annotation"),
    "string return annotation": ("def f(a) -> \"open('/x')\":\n    pass\n",
                                 "string annotation"),
    "default argument": ("def f(a, b=open('/etc/hostname')):\n    pass\n", "name 'open'"),
    "annotation": ("def f(a: open('/etc/hostname')):\n    pass\n", "name 'open'"),
    "raise a non-builtin": ("def f(a):\n    raise a\n", "raise of something other"),
    "non-literal answer": ("f = chr(98)\n", "not a literal"),
    "computed constant": ("f = 2 ** 7\n", "not a literal"),
    "answer from a loop": ("for f in ['b']:\n    pass\n", "For statement"),
    "import os": ("import os as f\n", "'import os'"),
    "from numba import a private": ("from numba import _helperlib as f\n",
                                    "'from numba import _helperlib'"),
    "uses a refused name": ("import os\ndef f(a):\n    return os\n", "name 'os'"),
}


@pytest.mark.parametrize("label", list(ESCAPES))
def test_each_escape_is_refused_with_its_construct_named(label):
    source, phrase = ESCAPES[label]
    sel = _select(source, "f")
    why = sel.reason_for(["f"])
    assert why is not None and phrase in why, (label, why, sel.accepted)
    assert "line" in why  # where it is, for the learner


@pytest.mark.parametrize("decorator", ["@cuda.jit", "@cuda.jit()", "@cuda.jit(device=True)",
                                       "@numba.cuda.jit(fastmath=True, max_registers=32)",
                                       "@cuda.jit(device=True, inline=True, opt=False)"])
def test_plain_jit_options_are_accepted(decorator):
    sel = _select(f"{decorator}\ndef f(a):\n    a[0] = 1\n", "f",
                  {**CONTEXT, "numba": __import__("numba")})
    assert "f" in sel.accepted, sel.rejected


def test_a_later_refused_definition_replaces_an_accepted_one():
    ok = "@cuda.jit\ndef vector_add(a, b, out):\n    out[0] = a[0]\n"
    bad = "@cuda.jit\ndef vector_add(a, b, out):\n    __import__('os')\n"
    sel = _select(ok + bad)
    assert "vector_add" not in sel.accepted and sel.reason_for(["vector_add"])
    sel = _select(bad + ok)  # and a later accepted one wins over a refused one
    assert "vector_add" in sel.accepted and sel.reason_for(["vector_add"]) is None


def test_setup_names_cannot_be_rebound_by_answers():
    sel = _select("quiz = 'b'\ncuda = 1\ndef np(x):\n    return x\nanswer = 'b'\n", "a")
    assert "quiz" not in sel.accepted and "cuda" not in sel.accepted
    assert "np" not in sel.accepted
    assert sel.accepted["answer"].value == "b"
    assert any("rebinds 'quiz'" in i for i in sel.ignored)


def test_statements_are_never_kept_only_definitions():
    src = "print('hi')\nx = 'b'\nget_ipython().events.register('x', 1)\n"
    sel = _select(src, "a")
    assert set(sel.accepted) == {"x"}
    assert len(sel.ignored) == 2


def test_syntax_errors_make_the_cell_not_gradable():
    sel = _select("def vector_add(a, b, out)\n    pass\n")
    assert "syntax error" in sel.reason_for(["vector_add"])


def test_allowed_imports_bind_the_module():
    sel = _select("import numpy as npy\nfrom numba import int32\n", "a", context={})
    assert sel.accepted["npy"].kind == "import" and sel.accepted["int32"].kind == "import"


@pytest.mark.parametrize("master", MASTERS, ids=lambda p: p.parent.name)
def test_every_master_answer_passes_with_its_real_context(master):
    """What the lessons ask for must be gradable: each master answer, against the context
    the grader builds for its test cell (executed here: it is the instructor's code)."""
    nb = nbformat.read(master, 4)
    contexts = prepare.context_for(nb)
    answers, refused = [], []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code":
            answers.append((meta["grade_id"], cell.source))
        if prepare.is_test_cell(cell):
            ns: dict = {"__name__": "__main__"}
            for src in contexts[meta["grade_id"]]:
                exec(compile(src, "<context>", "exec"), ns)  # noqa: S102 - master code
            sel = allowlist.select(answers, ns)
            why = sel.reason_for(
                [a for a, _ in answers if a in cell.source or a == meta["grade_id"]])
            if why:
                refused.append((meta["grade_id"], why))
    assert not refused, refused


def test_context_keeps_definitions_and_drops_demos():
    nb = nbformat.read(ROOT / "solutions" / "03_memory" / "03_memory.ipynb", 4)
    ctx = "\n".join(prepare.context_for(nb)["test_gpu_scale"])
    assert "def scale_kernel" in ctx  # a master definition the exercise needs
    assert "cudacourse" in ctx  # the setup cell, whole
    assert "show(\"before:\")" not in ctx and "copy_to_host()\nprint" not in ctx


def test_tensor_cores_come_from_the_setup_cell_not_from_an_import():
    # lesson 7: answer kernels call tc.mma_bf16 & co. on the module the setup cell bound;
    # importing course modules in an answer stays refused
    from cudacourse.runtime import tensorcore

    src = ("@cuda.jit\ndef k(a, d):\n    l = cuda.threadIdx.x\n"
           "    r = tc.mma_bf16((tc.pack_bf16x2(a[l], a[l]),) * 4, (0, 0), (d[l],) * 4)\n"
           "    d[l] = r[0]\n")
    assert _select(src, "k", context={**CONTEXT, "tc": tensorcore}).reason_for(["k"]) is None
    assert "tc" in _select(src, "k").reason_for(["k"])  # without the setup's binding
    sel = _select("import cudacourse.runtime.tensorcore as tc2\n", "k", context={})
    assert sel.reason_for(["tc2"])
