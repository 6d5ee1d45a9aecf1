"""Below CUDA C: the PTX of a Numba kernel, and its SASS where NVIDIA's disassembler is here.

*PTX* is the virtual instruction set Numba (through NVIDIA's libNVVM) compiles a kernel to;
*SASS* is the machine code ``ptxas`` (or the driver) makes of that PTX for one GPU
generation. On a GPU, :func:`ptx` is Numba's ``kernel.inspect_asm``; in the simulator the
course's compile gate compiles the kernel for sm_90 with the libNVVM and ptxas wheels, in a
child process (``cudacourse.check.kit.ptx_text``), so the text is the one an H200 would get.
SASS needs ``nvdisasm`` or ``cuobjdump`` from a CUDA toolkit: :func:`disassembler` says
where it is, or None, and :func:`sass` returns None then (pip's wheels do not ship it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any

from .._numba_private import simulating


def ptx(kernel: Any, *args: Any) -> str:
    """The PTX of ``kernel`` (a ``@cuda.jit`` kernel) for the argument types of ``args``
    (the arrays and scalars you would launch it with), for sm_90 in the simulator."""
    if simulating():
        from ..check import kit  # the compile gate (a child process with the wheels); here,
        # not at the top: importing the checkers is for lessons that ask for PTX

        return kit.ptx_text(kernel, tuple(args))
    from numba import typeof

    sig = tuple(typeof(a) for a in args)
    kernel.compile(sig)
    return kernel.inspect_asm(sig)


def disassembler() -> str | None:
    """The path of ``nvdisasm`` (or ``cuobjdump``), from PATH or $CUDA_HOME/bin, or None."""
    dirs = [os.path.join(os.environ[v], "bin") for v in ("CUDA_HOME", "CUDA_PATH")
            if os.environ.get(v)]
    for tool in ("nvdisasm", "cuobjdump"):
        found = shutil.which(tool) or next(
            (os.path.join(d, tool) for d in dirs if os.path.exists(os.path.join(d, tool))),
            None)
        if found:
            return found
    return None


def sass(kernel: Any, *args: Any) -> str | None:
    """The SASS of ``kernel`` for sm_90 (on a GPU: its own architecture), or None when no
    disassembler is installed (see :func:`disassembler`)."""
    tool = disassembler()
    if tool is None:
        return None
    if not simulating():
        from numba import typeof

        sig = tuple(typeof(a) for a in args)
        kernel.compile(sig)
        return kernel.inspect_sass(sig)
    from ..check import kit

    tk = kit.compile_toolkit()
    if isinstance(tk, str):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx(kernel, *args))
        subprocess.run([tk["ptxas"], "-arch=sm_90", "-o", cubin, src], check=True,
                       capture_output=True)
        flag = ["-c"] if os.path.basename(tool).startswith("nvdisasm") else ["-sass"]
        return subprocess.run([tool, *flag, cubin], check=True, capture_output=True,
                              text=True).stdout
