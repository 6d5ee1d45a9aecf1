"""grader/bypath.py: the one loader of a course file by path (no import of cudacourse)."""

from __future__ import annotations

import runpy
import sys

from cudacourse.grader import bypath, untrusted


def test_a_file_loads_once_under_its_name(tmp_path, monkeypatch):
    f = tmp_path / "thing.py"
    f.write_text("from dataclasses import dataclass\n\n@dataclass\nclass Box:\n    n: int = 1\n"
                 "LOADS = []\nLOADS.append(1)\n")
    monkeypatch.delitem(sys.modules, "cc_test_thing", raising=False)
    first = bypath.load("cc_test_thing", f)
    assert first.Box().n == 1  # a dataclass finds its module while the file runs
    assert bypath.load("cc_test_thing", f) is first and first.LOADS == [1]
    assert sys.modules["cc_test_thing"] is first


def test_a_package_loaded_by_path_imports_its_submodules_relatively(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("X = 7\n")
    (pkg / "high.py").write_text("from .low import X\nY = X * 2\n")
    for name in ("cc_test_pkg", "cc_test_pkg.low", "cc_test_pkg.high"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    bypath.load("cc_test_pkg", pkg / "__init__.py", package=True)
    import importlib

    assert importlib.import_module("cc_test_pkg.high").Y == 14


def test_run_from_its_file_it_loads_a_course_file_as_nbgrader_config_does(monkeypatch):
    monkeypatch.delitem(sys.modules, "cc_test_untrusted", raising=False)
    course_file = runpy.run_path(str(bypath.PACKAGE_DIR / "grader" / "bypath.py"))["course_file"]
    mod = course_file("grader/untrusted.py", "cc_test_untrusted")
    assert mod.__file__ == str(bypath.PACKAGE_DIR / "grader" / "untrusted.py")
    assert mod.line("a\nb") == untrusted.line("a\nb") and "cc_test_untrusted" in sys.modules
    assert mod is not untrusted  # its own module, not the package's
