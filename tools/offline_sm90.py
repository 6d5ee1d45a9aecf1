"""Compile the course's Numba kernels for an H200 (sm_90) on a machine without a GPU.

Imported first by tools/ptx_*.py. The work is done by the same code the simulator's compile
gate uses (src/cudacourse/check/_child.py, loaded by path so that ``cudacourse`` is not
imported before its mode is chosen): ``cudacourse.MODE`` then chooses GPU mode (a fake
H200 answers the driver probe; no driver call is ever made), and Numba uses libNVVM,
libdevice and ptxas from the nvidia-nvvm / nvidia-cuda-nvcc pip wheels (or $CUDA_HOME).
After this, ``cuda.compile_ptx(..., cc=(9, 0))`` works, and ``PTXAS -v`` reports registers,
spills and shared memory.

Usage: ``import offline_sm90`` first in a tool that lives in tools/ (``python
tools/ptx_matmul.py``), or ``python tools/offline_sm90.py`` to print the toolkit it found.
"""
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_SRC = os.path.join(os.path.dirname(_HERE), "src")
_spec = importlib.util.spec_from_file_location(
    "_cudacourse_child", os.path.join(_SRC, "cudacourse", "check", "_child.py"))
_child = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_child)

TOOLKIT = _child.find_toolkit()
if isinstance(TOOLKIT, str):
    sys.exit(f"offline_sm90: {TOOLKIT}")
CUDA = TOOLKIT["root"]
PTXAS = TOOLKIT["ptxas"]
if _SRC not in sys.path:
    sys.path.insert(0, _SRC)
_child.setup_offline_sm90(TOOLKIT, _SRC)

import cudacourse  # noqa: E402

assert cudacourse.MODE == "gpu"

if __name__ == "__main__":
    print(f"CUDA toolkit: {CUDA}\nptxas: {PTXAS}\ncudacourse mode: {cudacourse.MODE} (sm_90, offline)")
