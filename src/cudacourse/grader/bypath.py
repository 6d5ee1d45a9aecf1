"""A file of cudacourse loaded by its path, without importing the ``cudacourse`` package.

Importing ``cudacourse`` chooses a device (and sets NUMBA_* variables that every grading
child would inherit), so the processes that only grade load what they need by path, each
file as a top-level module of its own name: ``nbgrader_config.py`` (the autograde step, the
quiz mode), the grader package itself when nbgrader's process has it as
``cudacourse_grader`` (``prepare``'s device probe, ``autograde.load_grader``). This module
owns that one loader. It imports only the standard library, so where no package is there to
import it from, it is run from its file (``runpy.run_path``) and its :func:`load` used.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # src/cudacourse


def load(name: str, path: str | Path, *, package: bool = False) -> ModuleType:
    """The file ``path`` as module ``name``, once per process (later calls, and imports of
    ``name``, get the same module). ``package``: ``path`` is a package's ``__init__.py``,
    whose submodules then import as ``name.<sub>``."""
    if name in sys.modules:
        return sys.modules[name]
    path = Path(path)
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=[str(path.parent)] if package else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # before exec: its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def course_file(relative: str, name: str) -> ModuleType:
    """``cudacourse/<relative>`` (``"grader/autograde.py"``) as module ``name``."""
    return load(name, PACKAGE_DIR / relative)


__all__ = ["load", "course_file", "PACKAGE_DIR"]
