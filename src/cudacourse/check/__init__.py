"""Checkers for every exercise: ``check_<exercise>(learner_kernel)``.

Each checker owns the launch, compares with the NumPy reference and raises
``AssertionError`` (a ``CheckFailure``) whose message names the likely cause. The same call
serves the visible check cell and nbgrader's hidden tests (``hidden=True`` draws shapes the
learner has not seen).

This module cannot be modified after import: an answer cell that assigns
``cudacourse.check.check_vector_add = lambda k: None`` gets an error instead of a free pass.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types

from ._engine import CheckFailure

# One module per lesson topic; each defines check_* functions.
_TOPICS = ("vector", "threads", "memory", "tiling", "attention")

__all__ = ["CheckFailure"]
for _topic in _TOPICS:
    if importlib.util.find_spec(f"{__name__}.{_topic}") is None:
        continue
    _mod = importlib.import_module(f"{__name__}.{_topic}")
    for _name in dir(_mod):
        if _name.startswith("check_"):
            globals()[_name] = getattr(_mod, _name)
            __all__.append(_name)


class _ReadOnlyModule(types.ModuleType):
    """A module whose existing attributes cannot be rebound or deleted from learner code."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in self.__dict__:
            raise AttributeError(f"{self.__name__} is read-only: {name} cannot be replaced")
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{self.__name__} is read-only: {name} cannot be deleted")


sys.modules[__name__].__class__ = _ReadOnlyModule
