"""tools/codemods/i18n_messages.py: the checkers' messages as catalogue templates, stably."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "i18n_messages", ROOT / "tools" / "codemods" / "i18n_messages.py")
codemod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(codemod)

SAMPLE = '''
from . import _engine as E


def check(out, n, name, exc, seconds):
    E.fail(f"wrote past the end of {out.name} (size {n}) at index {n + 1}: {exc!r}",
           cause="out_of_bounds_write", hint="guard with `if i < n`")
    O.fail("no_tiles", f"{name} took {seconds:.0f} s", ctx, "load {a} once")
    raise TypeError(f"internal: {name} is not a kernel at all")
    words = ("H2D", "to the device")
    if name == "the same thing":
        pass
    return O.passed(name, f"{len(cases)} sizes", "a spare block")
'''


def test_f_strings_become_templates_named_after_their_expressions():
    made = codemod.convert(SAMPLE, "vector")
    out = " ".join(made.split())  # the layout aside
    assert ('T("wrote past the end of {name} (size {n}) at index {n_plus_1}: {exc!r}", '
            'name=out.name, n=n, n_plus_1=n + 1, exc=exc)') in out
    assert 'hint=T("guard with `if i < n`")' in out
    # _observe.fail(cause, message, context, hint): the message and the hint, not the cause
    assert 'O.fail("no_tiles", T("{name} took {seconds:.0f} s", name=name, seconds=seconds)' in out
    assert 'T("load {{a}} once")' in out  # a literal brace stays literal
    assert 'T("to the device")' in out and '"H2D"' in out
    assert 'T("{n_cases} sizes", n_cases=len(cases)), T("a spare block")' in out
    # not messages: an internal error, a comparison, the docstring-free rest
    assert 'raise TypeError(f"internal: {name} is not a kernel at all")' in out
    assert 'name == "the same thing"' in out
    assert "from ..i18n import T" in out
    ast.parse(made)
    assert max(len(line) for line in made.splitlines()) <= codemod.WIDTH


def test_the_templates_fill_in_as_the_f_strings_did():
    ns: dict = {}
    src = codemod.convert('x = f"{a[0]:>4} and {b!r} of {c.d}: {{literal}}"\n', "vector")
    src = src.replace("from ..i18n import T", "from cudacourse.i18n import T")
    exec(compile(src, "<codemod>", "exec"), {"a": [7], "b": "s", "c": type("C", (), {"d": 2})},
         ns)
    assert ns["x"] == f"{7:>4} and {'s'!r} of 2: {{literal}}"
    assert ns["x"].template == "{a:>4} and {b!r} of {d}: {{literal}}"


def test_running_it_twice_changes_nothing_more():
    once = codemod.convert(SAMPLE, "vector")
    assert codemod.convert(once, "vector") == once


@pytest.mark.parametrize("path", codemod.files([]), ids=lambda p: p.stem)
def test_the_checkers_and_plots_are_converted(path):
    """Every module the codemod covers is as it leaves it: a message written since (an
    f-string in a fail(...)) makes this fail until the codemod runs again."""
    src = path.read_text()
    assert codemod.convert(src, codemod.module_of(path)) == src, (
        f"run: python tools/codemods/i18n_messages.py {path.relative_to(ROOT)}")


def test_plot_options_are_not_labels():
    src = 'ax.legend(loc="lower right", title="the runs")\nax.set_title("speed and flow")\n'
    out = codemod.convert(src, "viz/flow")
    assert 'loc="lower right"' in out and 'title=T("the runs")' in out
    assert 'set_title(T("speed and flow"))' in out and "from .words import T" in out
