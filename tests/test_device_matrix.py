"""The device choice, whatever was imported before ``import cudacourse`` (issue 43).

One fresh interpreter per cell (the mode is fixed once per process): a library imported
first, then ``import cudacourse``, then ``cudacourse.setup()`` or a course module's first use
(``cudacourse.kernels.vector.vector_add``), with ``CUDACOURSE_DEVICE`` unset, ``sim`` or ``gpu``. Each
cell ends in a kernel launch whose result is right, in the mode the notice line named and
numba.cuda is really in, or in the documented clear error. Where a GPU is present (the H200
runs this file in tools/gpu/verify.sh's suite stage) the ``gpu`` and unset rows launch on it;
where none is, the ``gpu`` rows end in the error that says what is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from functools import lru_cache

import pytest

from cudacourse.runtime import device

# What a learner's script or notebook may have imported before the course: numba itself (or
# a library that imports it), numba.cuda, the array libraries, the plotting library.
FIRST = ("nothing", "numba", "numba.cuda", "cupy", "numpy", "torch", "matplotlib")
ENTRY = ("setup", "first_use")
POLICY = ("unset", "sim", "gpu")

# The documented errors (src/cudacourse/runtime/device.py), by their stable words.
GPU_DEMANDED = "CUDACOURSE_DEVICE=gpu demands a GPU, but"
TOO_LATE_SIM = "CUDACOURSE_DEVICE=sim, but numba.cuda was imported before cudacourse.setup()"
TOO_LATE_AUTO = "and numba.cuda was imported before cudacourse.setup()"
RESTART = "restart the Python kernel"

CELL = """
    import json, sys
    {first}
    import cudacourse
    {setup}
    import numpy as np
    from cudacourse import vector
    a = np.arange(96, dtype=np.float32)
    b = np.full(96, 0.5, dtype=np.float32)
    out = vector.vector_add(a, b)
    from cudacourse import device
    from cudacourse._numba_private import cuda_mode
    from numba import cuda
    gpu = cuda.get_current_device().name if cuda_mode() == "gpu" else None
    if isinstance(gpu, bytes):
        gpu = gpu.decode()
    print("CELL", json.dumps({{"chosen": device.mode(), "numba": cuda_mode(),
                              "right": bool(np.array_equal(out, a + b)), "gpu": gpu}}))
"""


@lru_cache(maxsize=1)
def gpu_here() -> bool:
    """Whether a usable GPU is here (the driver's answer, as the cells will get it)."""
    if not device.is_simulator():
        return True
    return device.probe_gpu()[0] is not None


def expected(first: str, policy: str, has_gpu: bool) -> tuple[str, str]:
    """("ok", mode) for a working launch in ``mode``, or ("error", the words it must show)."""
    if first == "numba.cuda":  # imported in real mode: NUMBA_ENABLE_CUDASIM is unset
        if policy == "sim":
            return "error", TOO_LATE_SIM
        if has_gpu:
            return "ok", "gpu"
        return "error", GPU_DEMANDED if policy == "gpu" else TOO_LATE_AUTO
    if policy == "sim":
        return "ok", "sim"
    if has_gpu:
        return "ok", "gpu"
    return ("error", GPU_DEMANDED) if policy == "gpu" else ("ok", "sim")


def run_cell(first: str, entry: str, policy: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDACOURSE_DEVICE", "NUMBA_ENABLE_CUDASIM", "CUDACOURSE_QUIET",
                        "CUDACOURSE_SIM_REASON", device.PROBED_ENV, "CUDACOURSE_LANG")}
    if policy != "unset":
        env["CUDACOURSE_DEVICE"] = policy
    code = CELL.format(first="" if first == "nothing" else f"import {first}",
                       setup="cudacourse.setup()" if entry == "setup" else "")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=env, timeout=180)


@pytest.mark.parametrize("policy", POLICY)
@pytest.mark.parametrize("entry", ENTRY)
@pytest.mark.parametrize("first", FIRST)
def test_the_choice_holds_whatever_was_imported_first(first, entry, policy):
    if first not in ("nothing", "numba.cuda") and importlib.util.find_spec(first) is None:
        pytest.skip(f"{first} is not installed here (the cell imports it before cudacourse)")
    kind, want = expected(first, policy, gpu_here())
    p = run_cell(first, entry, policy)
    if kind == "error":
        assert p.returncode != 0, p.stdout
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith("cudacourse.runtime.device.DeviceError: "), p.stderr[-2000:]
        assert want in last, p.stderr[-2000:]
        if want != GPU_DEMANDED:
            assert RESTART in last
        return
    assert p.returncode == 0, p.stderr[-3000:]
    cell = json.loads(p.stdout.split("CELL ", 1)[1])
    assert cell == {"chosen": want, "numba": want, "right": True,
                    "gpu": cell["gpu"] if want == "gpu" else None}
    if want == "gpu":
        assert cell["gpu"], "GPU mode, but numba.cuda names no device"
    # the one notice line says the mode numba.cuda is in
    notice = p.stdout.splitlines()[0]
    assert notice.startswith("cudacourse: GPU mode on " if want == "gpu"
                             else "cudacourse: simulator mode ("), p.stdout


def test_a_choice_numba_does_not_follow_is_refused_not_announced():
    """Without the reload of numba's configuration (the bug of issue 43), ``import numba``
    first leaves numba.cuda in the other mode: setup() must then say so, not print a notice
    of the mode it asked for."""
    code = textwrap.dedent("""
        import numba
        from cudacourse import _numba_private
        _numba_private.reload_numba_config = lambda: None
        import cudacourse
        cudacourse.setup()
    """)
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_ENABLE_CUDASIM", "CUDACOURSE_QUIET", "CUDACOURSE_SIM_REASON")}
    env["CUDACOURSE_DEVICE"] = "sim"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=180)
    assert p.returncode != 0
    assert "simulator mode" not in p.stdout
    assert "cudacourse chose sim mode (CUDACOURSE_DEVICE=sim), but numba.cuda runs in gpu " \
           "mode" in p.stderr, p.stderr[-2000:]
