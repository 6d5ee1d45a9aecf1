"""Compile the course's Numba kernels for an H200 (sm_90) on a machine without a GPU.

Imported first by tools/ptx_*.py. It makes ``import cudacourse`` choose GPU mode (a fake
H200 answers the driver probe; no driver call is ever made), points Numba at the CUDA
toolkit's libNVVM and libdevice on disk, and stops the dispatcher from asking a driver for
the current device. After this, ``cuda.compile_ptx(..., cc=(9, 0))`` works, and ``ptxas``
from the same toolkit reports registers, spills and shared memory.
"""
import importlib.util
import os
import sys
import types
from collections import namedtuple

CUDA = "/usr/local/cuda-13.0"
PTXAS = f"{CUDA}/bin/ptxas"

os.environ["CUDA_HOME"] = CUDA
os.environ["CUDACOURSE_QUIET"] = "1"
os.environ.pop("NUMBA_ENABLE_CUDASIM", None)

# Load cudacourse.device alone, and make its probe report an H200, before the package loads.
_pkg = types.ModuleType("cudacourse")
_pkg.__path__ = ["src/cudacourse"]
sys.modules["cudacourse"] = _pkg
_spec = importlib.util.spec_from_file_location("cudacourse.device", "src/cudacourse/device.py")
_dev = importlib.util.module_from_spec(_spec)
sys.modules["cudacourse.device"] = _dev
_spec.loader.exec_module(_dev)
_dev.probe_gpu = lambda: (_dev.GPUInfo("fake H200", (9, 0), 132, 2**37, (13, 0), 1), "")
del sys.modules["cudacourse"]

import cudacourse  # noqa: E402

assert cudacourse.MODE == "gpu"

from numba.cuda import cuda_paths as _cp  # noqa: E402
from numba.cuda import dispatcher as _disp  # noqa: E402
from numba.cuda.cudadrv import nvrtc as _nv  # noqa: E402

_nv.get_supported_ccs = lambda: ((9, 0),)
_I = namedtuple("_I", "by info")
_cp.get_cuda_paths._cached_result = {
    "nvrtc": _I("x", None), "nvvm": _I("x", f"{CUDA}/lib/libnvvm.so.4"),
    "libdevice": _I("x", f"{CUDA}/nvvm/libdevice/libdevice.10.bc"),
    "cudalib_dir": _I("x", f"{CUDA}/lib"), "static_cudalib_dir": _I("x", f"{CUDA}/lib"),
    "include_dir": _I("x", f"{CUDA}/include")}
_disp.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
