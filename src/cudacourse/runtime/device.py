"""Choose where kernels run: a real NVIDIA GPU, or Numba's CUDA simulator on the CPU.

Numba reads ``NUMBA_ENABLE_CUDASIM`` into ``numba.config`` when ``numba`` is imported, and
``numba.cuda`` imports the simulator or the real device API once, at its own import, by that
value. So the choice is made before ``numba.cuda`` is imported, without importing it: this
module asks the NVIDIA driver directly through ctypes, sets the ``NUMBA_*`` variables and has
an already-imported ``numba`` re-read them (``numba.core.config.reload_config()``); a
``numba.cuda`` already imported in the other mode is refused with a clear error. Importing
this module does nothing: the choice is made by :func:`ensure`, called by
``cudacourse.setup()`` (the first line of every lesson's setup cell) or, lazily, by the first
module of the package that needs ``numba.cuda`` (``cudacourse._device_first``). It then asks
``numba.cuda`` which mode it is in, installs the simulator's additions in simulator mode and
prints one line saying that mode, in the course's language.

``CUDACOURSE_DEVICE`` selects the policy:

* ``auto`` (default): a GPU when a usable driver and device exist, else the simulator;
* ``sim``: always the simulator;
* ``gpu``: a GPU or a clear error saying what is missing.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Literal, TypeVar

from .. import i18n
from ..i18n import N_

Mode = Literal["gpu", "sim"]
T = TypeVar("T")

POLICIES = ("auto", "sim", "gpu")


class DeviceError(RuntimeError):
    """The environment cannot give the device the course was asked to use."""


@dataclass(frozen=True)
class GPUInfo:
    """What the driver says about device 0 (the one Numba uses by default)."""

    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    total_memory: int  # bytes
    driver_version: tuple[int, int]  # highest CUDA version the driver supports
    device_count: int

    def describe(self) -> str:
        cc = ".".join(map(str, self.compute_capability))
        return (f"{self.name} (compute capability {cc}, {self.sm_count} SMs, "
                f"{self.total_memory / 2**30:.1f} GiB)")


@dataclass(frozen=True)
class Choice:
    """The decision taken at ``import cudacourse``."""

    mode: Mode
    policy: str
    reason: str
    gpu: GPUInfo | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    def notice(self) -> str:
        """One line saying where kernels run, in the course's language."""
        from ..i18n import T

        if self.mode == "gpu":
            assert self.gpu is not None
            return T("cudacourse: GPU mode on {gpu}.", gpu=self.gpu.describe()).shown()
        return T("cudacourse: simulator mode ({reason}): kernels run on the CPU in Numba's "
                 "CUDA simulator, thousands of times slower than a GPU, so demos use reduced "
                 "sizes and timings say nothing about GPU speed.",
                 reason=i18n.shown(self.reason)).shown()  # the reason in the same language


# --- asking the driver, without numba --------------------------------------------------

_CU_ATTR_CC_MAJOR = 75
_CU_ATTR_CC_MINOR = 76
_CU_ATTR_SM_COUNT = 16


# A process that must not initialise the driver itself (the grader's verdict server forks
# one clean child per test cell, and a CUDA driver initialised before fork is unusable in
# the child) is handed the probe of a short-lived child in this variable, as JSON.
PROBED_ENV = "CUDACOURSE_GPU_PROBED"


def probe_json() -> str:
    """This process's probe as JSON, for :data:`PROBED_ENV` of a process that must not run it."""
    info, why = probe_gpu()
    return json.dumps({"info": asdict(info) if info else None, "why": why})


def _handed_down() -> tuple[GPUInfo | None, str] | None:
    text = os.environ.get(PROBED_ENV)
    if not text:
        return None
    try:
        got = json.loads(text)
        d = got["info"]
        if d is None:
            return None, str(got["why"])
        d["compute_capability"] = tuple(d["compute_capability"])
        d["driver_version"] = tuple(d["driver_version"])
        return GPUInfo(**d), ""
    except (ValueError, KeyError, TypeError):
        return None  # unreadable: probe here, as usual


def probe_gpu() -> tuple[GPUInfo | None, str]:
    """Return (info, "") for a usable GPU, or (None, why not) in plain words."""
    if os.environ.get("NUMBA_DISABLE_CUDA") == "1":
        return None, N_("NUMBA_DISABLE_CUDA=1 is set")
    handed = _handed_down()
    if handed is not None:
        return handed
    try:
        lib = ctypes.CDLL("libcuda.so.1" if sys.platform != "win32" else "nvcuda.dll")
    except OSError:
        return None, N_("no NVIDIA driver found (libcuda could not be loaded)")
    try:
        rc = lib.cuInit(0)
        if rc == 100:
            return None, N_("the NVIDIA driver reports no CUDA-capable device")
        if rc != 0:
            return None, i18n.T("the NVIDIA driver failed to initialise (cuInit error {rc})", rc=rc)
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
            return None, N_("the NVIDIA driver reports no CUDA-capable device")
        dev = ctypes.c_int(0)
        lib.cuDeviceGet(ctypes.byref(dev), 0)
        buf = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName(buf, 256, dev)

        def attr(code: int) -> int:
            v = ctypes.c_int(0)
            lib.cuDeviceGetAttribute(ctypes.byref(v), code, dev)
            return v.value

        mem = ctypes.c_size_t(0)
        lib.cuDeviceTotalMem_v2(ctypes.byref(mem), dev)
        drv = ctypes.c_int(0)
        lib.cuDriverGetVersion(ctypes.byref(drv))
    except (AttributeError, OSError) as exc:  # a broken or partial driver install
        return None, i18n.T("the NVIDIA driver is unusable ({exc})", exc=str(exc))
    info = GPUInfo(
        name=buf.value.decode(errors="replace"),
        compute_capability=(attr(_CU_ATTR_CC_MAJOR), attr(_CU_ATTR_CC_MINOR)),
        sm_count=attr(_CU_ATTR_SM_COUNT),
        total_memory=mem.value,
        driver_version=(drv.value // 1000, (drv.value % 1000) // 10),
        device_count=count.value,
    )
    return info, ""


def numpy_problem() -> str:
    """A known-bad numpy/numba-cuda pairing, described with its fix; "" when fine."""
    import numpy as np

    major, minor = (int(p) for p in np.__version__.split(".")[:2])
    try:
        from importlib.metadata import version

        nc = version("numba-cuda")
    except Exception:  # noqa: BLE001 - not installed is reported elsewhere
        return ""
    if (major, minor) >= (2, 5) and nc.startswith("0.30."):
        return (f"numpy {np.__version__} breaks numba-cuda {nc} (np.row_stack was removed "
                "in numpy 2.5): install the course's pins, e.g. pip install 'numpy<2.5'")
    return ""


def _numba_cuda_already_imported() -> Mode | None:
    """If numba.cuda is already imported, the mode it was imported in."""
    from .._numba_private import loaded_cuda_mode

    return loaded_cuda_mode()  # type: ignore[return-value]


def choose(policy: str | None = None) -> Choice:
    """Decide the mode and prepare the environment for ``numba.cuda``'s import."""
    policy = (policy or os.environ.get("CUDACOURSE_DEVICE", "auto")).strip().lower() or "auto"
    if policy not in POLICIES:
        raise DeviceError(f"CUDACOURSE_DEVICE={policy!r} is not one of {', '.join(POLICIES)}")
    already = _numba_cuda_already_imported()
    early = ("numba.cuda was imported before cudacourse.setup(), so the mode can no longer "
             "be changed: restart the Python kernel and run `import cudacourse; "
             "cudacourse.setup()` first")

    if policy == "sim":
        if already == "gpu":
            raise DeviceError(f"CUDACOURSE_DEVICE=sim, but {early}.")
        mode: Mode = "sim"
        gpu, reason = None, "CUDACOURSE_DEVICE=sim"
    else:
        if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" and already != "gpu":
            # Set by the user, or inherited from a parent process that chose the simulator
            # (pytest workers, notebook kernels): then say why the parent chose it.
            inherited = os.environ.get("CUDACOURSE_SIM_REASON")
            gpu, why = None, (inherited or "NUMBA_ENABLE_CUDASIM=1 is set")
        else:
            gpu, why = probe_gpu()
        if already == "sim" and gpu is not None:
            why, gpu = "numba.cuda was already imported in simulator mode", None
        if policy == "gpu" and gpu is None:
            raise DeviceError(f"CUDACOURSE_DEVICE=gpu demands a GPU, but {why}. Check "
                              "`nvidia-smi`, install the GPU extra (`pip install -e .[cu13]` "
                              "or `.[cu12]`), or unset CUDACOURSE_DEVICE to use the simulator.")
        if gpu is None and already == "gpu":
            raise DeviceError(f"No usable GPU ({why}) and {early}, with "
                              "NUMBA_ENABLE_CUDASIM unset.")
        mode = "gpu" if gpu is not None else "sim"
        reason = "a usable NVIDIA GPU was found" if gpu else why

    if mode == "sim":
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        os.environ.setdefault("CUDACOURSE_SIM_REASON", reason)
    else:
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "0")
    # Checkers launch deliberately small grids; that warning would only be noise there.
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    from .._numba_private import reload_numba_config

    # `import numba` (by the learner, or by any library) read NUMBA_ENABLE_CUDASIM into
    # numba.config already: without this, numba.cuda would be imported in the other mode
    reload_numba_config()
    return Choice(mode=mode, policy=policy, reason=reason, gpu=gpu)


# --- the one choice of a process --------------------------------------------------------

_choice: Choice | None = None
QUIET_ENV = "CUDACOURSE_QUIET"  # "1": no notice line


def ensure(policy: str | None = None) -> Choice:
    """The device of this process, chosen now if nothing chose it yet: the mode, the
    ``NUMBA_*`` variables, in simulator mode the block scheduler and warp intrinsics the stock
    simulator lacks, and one notice line (unless ``CUDACOURSE_QUIET=1``). A later call returns
    the same choice; asking then for another policy's mode is an error."""
    global _choice
    if _choice is not None:
        wanted = (policy or "").strip().lower()
        if wanted in ("sim", "gpu") and wanted != _choice.mode:
            raise DeviceError(f"this process already runs in {_choice.mode} mode "
                              f"({_choice.reason}): restart the Python kernel to use {wanted}")
        return _choice
    problem = numpy_problem()
    if problem:
        raise DeviceError(problem)
    choice = choose(policy)
    _numba_agrees(choice)  # or an error: the notice below says the mode numba.cuda is in
    if choice.mode == "sim":
        from . import simalign, simblock, simstreams, simwarp

        simblock.install()  # first: simwarp wraps the thread class it patches
        simwarp.install()
        simalign.install()
        simstreams.install()
    _choice = choice
    if os.environ.get(QUIET_ENV) != "1":
        print(choice.notice())
    return choice


def _numba_agrees(choice: Choice) -> None:
    """Ask numba which mode numba.cuda is in once ``choice`` was made (importing numba.cuda
    now, in that mode), and refuse a choice it does not follow: the notice must be true."""
    from .._numba_private import cuda_mode

    actual = cuda_mode()
    if actual != choice.mode:
        raise DeviceError(
            f"cudacourse chose {choice.mode} mode ({choice.reason}), but numba.cuda runs in "
            f"{actual} mode (numba.config.ENABLE_CUDASIM could not be changed): restart the "
            "Python kernel and run `import cudacourse; cudacourse.setup()` first.")


def chosen() -> bool:
    """Whether this process has chosen its device (without choosing it)."""
    return _choice is not None


def current() -> Choice:
    """The device of this process (chosen now, by :func:`ensure`, if it was not yet)."""
    return ensure()


def mode() -> Mode:
    return current().mode


def is_simulator() -> bool:
    return current().mode == "sim"


def pick(sim: T, gpu: T) -> T:
    """The value for the current mode: small work for the simulator, GPU-filling work else."""
    return sim if is_simulator() else gpu


def require_gpu(what: str) -> None:
    """Raise a clear error when ``what`` needs real hardware."""
    if is_simulator():
        raise DeviceError(f"{what} needs a real NVIDIA GPU; this session runs in the simulator "
                          f"({current().reason}).")


def cupy_usable() -> tuple[bool, str]:
    """Whether CuPy can allocate on a GPU here, with the reason when it cannot.

    CuPy imports fine without a GPU and fails only at the first array, so try one.
    """
    if is_simulator():
        return False, "simulator mode: CuPy needs a real GPU"
    try:
        import cupy as cp
    except ImportError:
        return False, "CuPy is not installed (install the cu12 or cu13 extra)"
    try:
        cp.arange(4).sum().item()
    except Exception as exc:  # noqa: BLE001 - any CUDA failure means "not usable"
        return False, f"CuPy cannot use the GPU: {exc}"
    return True, ""
