"""cudacourse: learn to program NVIDIA GPUs from Python.

Importing the package does nothing but define it. The first line of every lesson's setup
cell chooses the device and the language::

    import cudacourse
    cudacourse.setup()            # or cudacourse.setup(lang="ja") in the Japanese edition

which picks a real GPU or Numba's CUDA simulator before ``numba.cuda`` is imported, and
prints one line saying which (in the edition's language). A module of the package that needs
``numba.cuda`` makes the same choice itself if nothing made it yet. Set ``CUDACOURSE_DEVICE``
to ``sim`` or ``gpu`` to force a mode, and ``CUDACOURSE_QUIET=1`` to silence the notice.
"""

from __future__ import annotations

import types
import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runtime.device import Choice

__version__ = "0.1.0"


def setup(lang: str | None = None, *, device: str | None = None) -> "Choice":
    """Choose the course's language (first: the device notice is printed in it), then the
    device (``device``: ``"auto"``, ``"sim"`` or ``"gpu"``; default ``CUDACOURSE_DEVICE`` or
    auto). Returns the device choice; calling it again returns the same."""
    from .runtime import device as _device

    if lang is not None:
        from . import i18n

        i18n.use(lang)
    return _device.ensure(device)


def __getattr__(name: str) -> Any:
    if name == "MODE":  # "gpu" or "sim": the device of this process (chosen on first use)
        from .runtime import device as _device

        return _device.ensure().mode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["MODE", "__version__", "setup"]


# --- old names, for learner notebooks already in workspaces (relayout) ---
# Learner notebooks already copied into workspaces (learner work is never overwritten) say
# `from cudacourse import device, vector`, or reach a module as an attribute of `cudacourse`:
# those names, and only those, still resolve (to the module in its layer).
_LEARNER_NAMES = types.MappingProxyType({"asm": "runtime", "attention": "kernels", "cpu_vs_gpu": "kernels", "device": "runtime", "indexing": "kernels", "launch": "runtime", "launch_cost": "kernels", "lbm": "kernels", "matmul": "kernels", "occupancy": "runtime", "prose": "course", "quiz": "course", "reduce": "kernels", "simwarp": "runtime", "softmax": "kernels", "stencil": "kernels", "transfer": "kernels", "transpose": "kernels", "vector": "kernels", "warps": "kernels"})
_own_getattr = __getattr__  # the package's own lookup, for every other name


def __getattr__(name: str) -> Any:  # noqa: F811 - the old names first, then the package's own
    layer = _LEARNER_NAMES.get(name)
    if layer is None:
        return _own_getattr(name)
    return importlib.import_module(f"cudacourse.{layer}.{name}")
