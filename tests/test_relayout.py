"""tools/codemods/relayout.py on a scratch copy of the checkout (relayout: this file names the
old layout on purpose).

The codemod moves the top-level modules into ``kernels/``, ``runtime/`` and ``course/`` and
rewrites every reference; run on a copy of the tree it must leave nothing to do on a second
run, a package whose every module imports, the learner notebooks' old names served (and no
other), and (nightly, ``CUDACOURSE_NIGHTLY=1``) a tree whose architecture, docs, registry and
new-lesson tests pass. The checkout itself is not moved
(the lead runs the codemod after merging every branch).
"""
# relayout: this file names the old layout on purpose (its strings are the codemod's inputs)

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cudacourse.course.authoring import ROOT

TOOL = ROOT / "tools" / "codemods" / "relayout.py"


def _load():
    spec = importlib.util.spec_from_file_location("codemod_relayout", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


relayout = _load()


def test_relative_imports_are_rewritten_from_where_they_were_written():
    src = ("from . import _device_first  # noqa: F401 - first\n\n"
           "from . import device, quiz, i18n\nfrom .arrays import (check_array,\n"
           "                     to_device)\n\n\ndef f():\n    from .launch import blocks_for\n")
    pkg = Path("/x/src/cudacourse")
    out = relayout._rewrite_relative(src, pkg / "kernels" / "vector.py", pkg,
                                     "cudacourse.kernels")
    assert out.startswith("from .. import _device_first  # noqa: F401 - first\n")
    assert "from ..runtime import device\nfrom ..course import quiz\nfrom .. import i18n\n" in out
    assert "from ..runtime.arrays import check_array, to_device\n" in out
    assert "    from ..runtime.launch import blocks_for\n" in out
    # a second run finds them relative to the layer already
    assert relayout._rewrite_relative(out, pkg / "kernels" / "vector.py", pkg,
                                      "cudacourse.kernels") == out


def test_absolute_imports_names_and_paths_are_rewritten():
    src = ('from cudacourse import quiz, vector, check\nimport cudacourse.device as d\n'
           'x = "cudacourse.launch.blocks_for"  # see src/cudacourse/timing.py\n'
           'y = "cudacourse.check.vector"  # src/cudacourse/check/vector.py stays\n')
    out = relayout.rewrite_text(relayout.rewrite_imports(src))
    assert out.splitlines()[:4] == [
        "from cudacourse.course import quiz", "from cudacourse.kernels import vector",
        "from cudacourse import check", "import cudacourse.runtime.device as d"]
    assert '"cudacourse.runtime.launch.blocks_for"  # see src/cudacourse/runtime/timing.py' in out
    assert 'y = "cudacourse.check.vector"  # src/cudacourse/check/vector.py stays' in out
    assert relayout.rewrite_text(relayout.rewrite_imports(out)) == out


def test_every_learner_name_is_one_the_lessons_use():
    import re

    if (ROOT / "src" / "cudacourse" / "kernels").is_dir():
        pytest.skip("the relayout is applied: the lessons name the layers now, and "
                    "LEARNER_NAMES keeps the names they had before it")

    used = set()
    for path in sorted((ROOT / "lessons").glob("[0-9][0-9]_*.py")):
        text = path.read_text()
        for m in re.finditer(r"from cudacourse import ([\w, ]+)", text):
            used |= {n.strip() for n in m.group(1).split(",")}
        used |= set(re.findall(r"(?<![\w.])cudacourse\.(\w+)", text))
    assert set(relayout.LEARNER_NAMES) == used & set(relayout.MOVED)


def _copy(dest: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\n")
    for rel in files:
        if not rel or not (ROOT / rel).is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_bytes((ROOT / rel).read_bytes())
    return dest


IMPORTS = """
import importlib, pkgutil
import cudacourse
cudacourse.setup()
import cudacourse.check, cudacourse.cli
from cudacourse import vector, device, quiz  # a learner notebook's old names
assert vector.__name__ == "cudacourse.kernels.vector", vector.__name__
assert device.__name__ == "cudacourse.runtime.device"
for pkg in ("kernels", "runtime", "course", "grader", "viz", "bench", "check"):
    p = importlib.import_module("cudacourse." + pkg)
    for m in pkgutil.iter_modules(p.__path__):
        if m.name != "instructor_server_config":
            importlib.import_module(f"cudacourse.{pkg}.{m.name}")
try:
    cudacourse.lessons
except AttributeError:
    print("ok")
"""


def test_the_moved_tree_imports_and_keeps_its_architecture(tmp_path):
    root = _copy(tmp_path)
    assert relayout.main(["--root", str(root)]) == 0
    assert relayout.main(["--root", str(root), "--check"]) == 0  # nothing left: idempotent
    pkg = root / "src" / "cudacourse"
    assert {p.name for p in pkg.glob("*.py")} == {"__init__.py", "_device_first.py",
                                                   "_numba_private.py", "cli.py"}
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "CUDACOURSE_QUIET": "1",
           "NUMBA_ENABLE_CUDASIM": "1", "CUDACOURSE_DEVICE": "sim"}
    proc = subprocess.run([sys.executable, "-c", IMPORTS], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
    if os.environ.get("CUDACOURSE_NIGHTLY") != "1":
        return  # the moved tree's own tests (about 40 s more): nightly, and by the lead on the tree
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-n", "0", "tests/test_architecture.py", "tests/test_docs.py",
                           "tests/test_lessons.py", "tests/test_new_lesson.py", "-k",
                           "not scaffolded_built"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:]


def test_a_lesson_added_before_the_move_moves_with_it(tmp_path):
    """A lesson scaffolded since the layers were listed (lesson 7 is written before the
    merge): its topic module goes to kernels/ too, and its checker imports it there."""
    import shutil

    from cudacourse.course import lessonrules, scaffold

    root = tmp_path
    shutil.copytree(ROOT / "src" / "cudacourse", root / "src" / "cudacourse",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (root / "lessons" / "quizkeys").mkdir(parents=True)
    stem = f"{len(lessonrules.stems(ROOT)) + 1:02d}_added"
    scaffold.new(root, stem)
    assert relayout.main(["--root", str(root)]) == 0
    assert relayout.main(["--root", str(root), "--check"]) == 0
    assert (root / "src/cudacourse/kernels/added.py").exists()
    assert "from ..kernels.added import added_offset_ref" in (
        root / "src/cudacourse/check/added.py").read_text()
    assert "from cudacourse.kernels import added" in (root / "lessons" / f"{stem}.py").read_text()
    env = {**os.environ, "PYTHONPATH": str(root / "src"), "CUDACOURSE_QUIET": "1",
           "NUMBA_ENABLE_CUDASIM": "1", "CUDACOURSE_DEVICE": "sim"}
    proc = subprocess.run([sys.executable, "-c", "import cudacourse.check as C; "
                           "print(C.check_added_offset.__module__)"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.stdout.strip() == "cudacourse.check.added", proc.stderr[-2000:]
