"""tools/codemods/: re-runnable rewrites of the source, tested on scratch copies.

``one_kit.py`` puts every ``fail`` on the one signature ``fail(cause, message, ...)`` and the
checkers on the kit's one launch, compare, ``diagnose`` and ``poisoned_shared``;
``device_first.py`` puts the device choice before ``numba.cuda`` in every module that needs
it. Both must be idempotent (the lead re-runs them after merging other branches' edits) and
leave modules that import and give the same verdicts.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudacourse.course import lessons
from cudacourse.course.authoring import ROOT

TOOLS = ROOT / "tools" / "codemods"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"codemod_{name}", TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


one_kit = _load("one_kit")
device_first = _load("device_first")


def test_every_fail_takes_the_cause_first_and_keeps_its_arguments_text():
    src = textwrap.dedent('''\
        from . import kit as K


        def f(ctx, n, obs, k):
            if K.isclose(1.0, 2.0):
                K.fail(T("wrote past {n}", n=n), cause="off_by_one", context=ctx,
                       hint="guard with `if i < n`")
            K.fail(f"{K.fmt(n) if hasattr(K, 'fmt') else n} threads wrote a slot.")
            K.fail("race", T("two threads wrote {n}", n=n), ctx)
            K.fail(T("outer {m}", m=K.fail(T("inner"), cause="stub")), cause="race")
            K.launch_observed(obs, k, 1, 32, n, name="k", context=ctx)
            E.compare(3, 4, name="y")
            return O.compare(1, 2, name="x")
        ''')
    out = one_kit._run_until_stable(src, bare=True, checker=True)
    assert ('K.fail("off_by_one", T("wrote past {n}", n=n), context=ctx, '
            'hint="guard with `if i < n`")') in out
    # no cause: the old default; an f-string's fields are left as they are
    assert ('K.fail("wrong_values", f"{K.fmt(n) if hasattr(K, \'fmt\') else n} threads wrote '
            'a slot.")') in out
    assert 'K.fail("race", T("two threads wrote {n}", n=n), ctx)' in out  # already new
    assert 'K.fail("race", T("outer {m}", m=K.fail("stub", T("inner"))))' in out  # nested
    assert 'K.launch(k, 1, 32, n, name="k", context=ctx, obs=obs)' in out
    # one compare in a checker: the kit's, which carries the launch's evidence
    assert 'K.compare(1, 2, name="x")' in out and 'K.compare(3, 4, name="y")' in out
    assert "O.compare" not in out and "E.compare" not in out
    # the machinery keeps the engine's own compare
    machinery = one_kit._run_until_stable(src, bare=True, checker=False)
    assert 'E.compare(3, 4, name="y")' in machinery
    assert one_kit._run_until_stable(out, bare=True, checker=True) == out  # idempotent


def test_checkers_reach_diagnose_and_poisoned_shared_through_the_kit():
    src = ("from . import kit as K\nfrom . import _diagnose as D\n"
           "from .tiling import poisoned_shared\n\n\ndef f(g, w):\n"
           "    with poisoned_shared():\n        D.factor(g, w)\n")
    out = one_kit.rewrite(src, bare=True, checker=True)
    assert "_diagnose" not in out and "from .tiling" not in out
    assert "with K.poisoned_shared():" in out and "K.diagnose.factor(g, w)" in out


def test_the_tree_is_converted():
    assert one_kit.main(["--check"]) == 0, "run: python tools/codemods/one_kit.py"


def test_the_kit_is_imports_and_definitions_with_all():
    import ast

    from cudacourse.check import kit

    tree = ast.parse(Path(kit.__file__).read_text())
    aliases = [node.lineno for node in tree.body if isinstance(node, ast.Assign)
               and isinstance(node.value, ast.Attribute)]
    assert not aliases, f"check/kit.py: X = _mod.Y aliases at lines {aliases}"
    assert sorted(kit.__all__) == sorted(set(kit.__all__))
    assert all(hasattr(kit, name) for name in kit.__all__)


@pytest.fixture(scope="module")
def scratch_package(tmp_path_factory) -> Path:
    """A copy of src/ with both codemods applied (twice: the second run changes nothing)."""
    src = tmp_path_factory.mktemp("codemod") / "src"
    shutil.copytree(ROOT / "src" / "cudacourse", src / "cudacourse",
                    ignore=shutil.ignore_patterns("__pycache__"))
    files = [src / "cudacourse" / "check" / f"{m}.py" for m in lessons.CHECKER_MODULES]
    for f in files:  # back to the message-first calls other branches may still write
        f.write_text(re.sub(r'K\.fail\(("\w+"), (T\("[^"\n]*"\))\)', r"K.fail(\2, cause=\1)",
                            f.read_text()))
    assert one_kit.main([str(f) for f in files]) == 0
    assert one_kit.main(["--check", *map(str, files)]) == 0  # nothing left to change
    for f in files:
        text = f.read_text()
        assert "from . import kit as K" in text and "cause=" not in text, f.name
    return src


CHILD = """
import json, sys
import cudacourse
cudacourse.setup(device="sim")
import cudacourse.check as C
from numba import cuda

@cuda.jit
def right(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]

@cuda.jit
def unguarded(a, b, out):
    i = cuda.grid(1)
    out[i] = a[i] + b[i]

got = {"file": C.vector.__file__, "uses_kit": hasattr(C.vector, "K")}
got["right"] = str(C.check_vector_add(right))
try:
    C.check_vector_add(unguarded)
except C.CheckFailure as exc:
    got["wrong"] = [exc.cause, str(exc)]
print(json.dumps(got))
"""


def _verdicts(src: Path) -> dict:
    env = {**os.environ, "CUDACOURSE_QUIET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          env=env, timeout=300, cwd=src)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import json

    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_converted_checkers_import_and_give_the_same_verdicts(scratch_package):
    after = _verdicts(scratch_package)
    assert after["file"].startswith(str(scratch_package)) and after["uses_kit"]
    before = _verdicts(ROOT / "src")
    assert after["right"] == before["right"] and "vector_add passes" in after["right"]
    assert after["wrong"] == before["wrong"] and after["wrong"][0]


def test_device_first_is_idempotent_and_covers_every_module_importing_numba(tmp_path):
    pkg = tmp_path / "cudacourse"
    shutil.copytree(ROOT / "src" / "cudacourse", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    for path in pkg.rglob("*.py"):  # undo it, then redo it
        path.write_text(path.read_text().replace(
            f"from . import {device_first.MARK}\n\n", "").replace(
            f"from .. import {device_first.MARK}\n\n", ""))
    device_first.PACKAGE = pkg
    assert device_first.main([]) == 0
    assert device_first.main(["--check"]) == 0
    for path in sorted((ROOT / "src" / "cudacourse").rglob("*.py")):
        rel = path.relative_to(ROOT / "src" / "cudacourse")
        assert (pkg / rel).read_text() == path.read_text(), f"{rel}: differs from the codemod's"
