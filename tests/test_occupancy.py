"""The occupancy model for compute capability 9.0, kernel resources, and the GPU checks
that the model agrees with the driver."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import device
from cudacourse.runtime import occupancy as O

pytestmark = pytest.mark.lesson2


@pytest.mark.parametrize("tpb, regs, smem, blocks, limiter", [
    (32, 32, 0, 32, "blocks"),        # tiny blocks: the 32-blocks-per-SM cap, 50% occupancy
    (128, 32, 0, 16, "warps"),        # 16 blocks x 4 warps = 64 warps
    (256, 64, 0, 4, "registers"),     # 64 regs: 2048 per warp, 32 warps fit
    (256, 40, 0, 6, "registers"),     # 40 regs -> 1280 per warp: 12 warps per partition
    (1024, 128, 0, 0, "registers"),   # 131072 registers for one block: cannot launch
    (256, 32, 48 * 1024, 4, "shared memory"),  # 49 KiB per block with the 1 KiB reserved
    (96, 32, 0, 21, "warps"),         # 3 warps per block: 21 blocks, 63 warps
])
def test_occupancy_model(tpb, regs, smem, blocks, limiter):
    occ = O.occupancy(tpb, regs, smem)
    assert occ.blocks_per_sm == blocks
    assert occ.limiter == limiter
    assert occ.warps_per_sm == blocks * -(-tpb // 32)
    assert occ.occupancy == pytest.approx(occ.warps_per_sm / 64)


def test_occupancy_refuses_impossible_inputs():
    with pytest.raises(ValueError, match="threads_per_block"):
        O.occupancy(2048, 32)
    with pytest.raises(ValueError, match="registers_per_thread"):
        O.occupancy(128, 300)
    with pytest.raises(ValueError, match="shared_per_block"):
        O.occupancy(128, 32, 300 * 1024)


def test_occupancy_curve_covers_the_block_sizes():
    curve = O.occupancy_curve(32)
    assert [o.threads_per_block for o in curve] == list(range(32, 1025, 32))
    assert max(o.occupancy for o in curve) == 1.0


def test_kernel_resources_in_the_simulator_come_from_an_sm90_compile_or_are_examples():
    if not device.is_simulator():
        pytest.skip("GPU: see test_kernel_resources_on_gpu")
    from cudacourse.check import _compile

    res = O.kernel_resources(O._copy_scale_kernel(), np.zeros(4, np.float32),
                             np.zeros(4, np.float32), np.float32(2))
    if _compile.status()[0]:  # the nvidia-nvvm / nvidia-cuda-nvcc wheels are installed
        assert res.measured and "sm_90" in res.source
        assert 1 <= res.registers_per_thread <= 255 and res.shared_per_block == 0
        assert res.max_threads_per_block == 1024
    else:
        assert not res.measured and "example numbers" in res.source


def test_gpu_only_functions_refuse_in_the_simulator():
    if not device.is_simulator():
        pytest.skip("GPU run")
    with pytest.raises(device.DeviceError, match="needs a real NVIDIA GPU"):
        O.block_size_sweep()


@pytest.mark.gpu
def test_kernel_resources_on_gpu():
    k = O._copy_scale_kernel()
    x = cuda.device_array(16, np.float32)
    res = O.kernel_resources(k, x, x, np.float32(2))
    assert res.measured and 1 <= res.registers_per_thread <= 255
    assert res.shared_per_block == 0


@pytest.mark.gpu
@pytest.mark.parametrize("tpb", [32, 96, 128, 256, 512, 1024])
def test_model_agrees_with_the_driver(tpb):
    k = O._copy_scale_kernel()
    x = cuda.device_array(16, np.float32)
    args = (x, x, np.float32(2))
    res = O.kernel_resources(k, *args)
    model = O.occupancy(tpb, res.registers_per_thread, res.shared_per_block)
    assert O.driver_blocks_per_sm(k, args, tpb) == model.blocks_per_sm


@pytest.mark.gpu
def test_block_size_sweep_runs():
    rows = O.block_size_sweep(n=1 << 20, sizes=(64, 256), repeats=2)
    assert [r["threads_per_block"] for r in rows] == [64, 256]
    assert all(r["gb_per_s"] > 0 for r in rows)
