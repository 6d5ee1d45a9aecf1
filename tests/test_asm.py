"""cudacourse.runtime.asm: the PTX of a kernel (through the sm_90 compile gate in the simulator) and
its SASS only where NVIDIA's disassembler is installed."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import asm, device
from cudacourse.check import kit

pytestmark = pytest.mark.lesson7


@cuda.jit
def _saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@pytest.mark.skipif(device.is_simulator() and isinstance(kit.compile_toolkit(), str),
                    reason="the simulator's PTX needs the libNVVM and ptxas wheels")
def test_ptx_is_the_kernels_for_its_argument_types():
    x = np.ones(8, np.float32)
    text = asm.ptx(_saxpy, np.float32(2.0), x, x, x)
    assert ".entry" in text and "ld.global.f32" in text and "st.global.f32" in text
    if device.is_simulator():
        assert ".target sm_90" in text  # compiled for an H200, whatever this machine is
    doubles = asm.ptx(_saxpy, 2.0, x.astype(np.float64), x.astype(np.float64),
                      x.astype(np.float64))
    assert "ld.global.f64" in doubles


def test_no_disassembler_means_no_sass(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert asm.disassembler() is None
    x = np.ones(8, np.float32)
    assert asm.sass(_saxpy, np.float32(2.0), x, x, x) is None


def test_a_disassembler_on_path_is_found(monkeypatch, tmp_path):
    tool = tmp_path / "nvdisasm"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert asm.disassembler() == str(tool)
