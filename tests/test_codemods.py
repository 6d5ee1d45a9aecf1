"""tools/codemods/: re-runnable rewrites of the source, tested on scratch copies.

``check_kit.py`` moves the checker modules onto the public kit (``cudacourse.check.kit``);
``device_first.py`` puts the device choice before ``numba.cuda`` in every module that needs
it. Both must be idempotent (the lead re-runs them after merging other branches' edits) and
leave modules that import and give the same verdicts.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cudacourse import lessons
from cudacourse.authoring import ROOT

TOOLS = ROOT / "tools" / "codemods"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"codemod_{name}", TOOLS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_kit = _load("check_kit")
device_first = _load("device_first")


def test_o_fail_takes_the_engine_order_and_keeps_its_arguments_text():
    src = textwrap.dedent('''\
        from . import _engine as E
        from . import _observe as O
        from ._cases import resolve


        def f(ctx, n):
            if E._isclose(1.0, 2.0):
                O.fail("off_by_one", T("wrote past {n}", n=n), ctx,
                       hint="guard with `if i < n`")
            O.fail("race", f"{E.fmt(n) if hasattr(E, 'fmt') else n} threads wrote a slot.")
            return O.passed("f", hasattr(E, "fmt"), E._np.float32(1))
        ''')
    out = check_kit.convert(src, "<test>", check_kit.kit_names())
    assert "from . import kit as K\nfrom .kit import resolve\n" in out
    assert "_engine" not in out and "_observe" not in out and "O." not in out
    assert ('K.fail(T("wrote past {n}", n=n), cause="off_by_one", context=ctx,\n'
            '               hint="guard with `if i < n`")') in out
    # inside an f-string's fields too (one token in Python 3.11), never in its text
    assert ('K.fail(f"{K.fmt(n) if hasattr(K, \'fmt\') else n} threads wrote a slot.", '
            'cause="race")') in out
    assert 'K.passes("f", hasattr(K, "fmt"), K.np.float32(1))' in out
    assert "K.isclose(1.0, 2.0)" in out
    assert check_kit.convert(out, "<test>", check_kit.kit_names()) == out  # idempotent


def test_a_name_the_kit_lacks_stops_the_run_naming_it():
    with pytest.raises(SystemExit, match=r"E\._nonesuch has no kit name"):
        check_kit.convert("from . import _engine as E\nE._nonesuch()\n", "<test>",
                          check_kit.kit_names())


def test_every_kit_name_exists_in_the_kit():
    from cudacourse.check import kit

    assert check_kit.kit_names() <= set(dir(kit))
    assert check_kit.kit_names() == set(kit.__all__)


@pytest.fixture(scope="module")
def scratch_package(tmp_path_factory) -> Path:
    """A copy of src/ with both codemods applied (twice: the second run changes nothing)."""
    src = tmp_path_factory.mktemp("codemod") / "src"
    shutil.copytree(ROOT / "src" / "cudacourse", src / "cudacourse",
                    ignore=shutil.ignore_patterns("__pycache__"))
    files = [src / "cudacourse" / "check" / f"{m}.py" for m in lessons.CHECKER_MODULES]
    assert check_kit.main([str(f) for f in files]) == 0
    assert check_kit.main(["--check", *map(str, files)]) == 0  # nothing left to change
    for f in files:
        text = f.read_text()
        assert "from . import kit as K" in text
        assert not any(f"_{m}" in text for m in ("engine as E", "observe as O")), f.name
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
