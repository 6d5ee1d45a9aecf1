"""cudacourse: learn to program NVIDIA GPUs from Python.

Importing this package chooses the device (a real GPU, or Numba's CUDA simulator) before
``numba.cuda`` is imported, and prints one line saying which. Set ``CUDACOURSE_DEVICE`` to
``sim`` or ``gpu`` to force a mode, and ``CUDACOURSE_QUIET=1`` to silence the notice.
"""

from __future__ import annotations

import os as _os

from . import device as _device

__version__ = "0.1.0"

_problem = _device.numpy_problem()
if _problem and _os.environ.get("CUDACOURSE_CLI") != "1":  # the CLI's doctor explains it
    raise ImportError(_problem)

_choice = _device.choose()
_device._set_choice(_choice)

MODE = _choice.mode  # "gpu" or "sim"

if MODE == "sim":
    from . import simblock as _simblock  # a block scheduler that waits, not spins
    from . import simwarp as _simwarp  # warp intrinsics the stock simulator lacks

    _simblock.install()  # first: simwarp wraps the thread class it patches
    _simwarp.install()

if _os.environ.get("CUDACOURSE_QUIET") != "1":
    print(_choice.notice())

__all__ = ["MODE", "__version__"]
