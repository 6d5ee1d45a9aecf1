"""Published figures of the GPUs the lessons name, each with where it comes from.

The lessons quote these through ``cudacourse.course.prose`` (``{{const.hardware.H200.sms}}``), never
retyped, so a correction here reaches every lesson at the next ``./course build``. Measured
figures (bandwidth, TFLOP/s of this course's kernels) are not here: they come from
``docs/benchmarks.json``. The per-SM limits of compute capability 9.0 are
``cudacourse.runtime.occupancy.H200_SM`` (CUDA C++ Programming Guide, "Compute Capabilities").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    """A GPU's datasheet figures (dense, no sparsity)."""

    name: str
    sms: int  # streaming multiprocessors
    fp32_lanes_per_sm: int  # FP32 cores per SM
    memory_gb: int  # device memory, GB
    memory_tb_s: float  # peak device-memory bandwidth, TB/s
    fp32_tflop_s: float  # peak FP32 (CUDA cores, FMA = 2 flop), TFLOP/s
    l2_mb: int  # L2 cache, MB
    source: str

    @property
    def cuda_cores(self) -> int:
        return self.sms * self.fp32_lanes_per_sm


# NVIDIA H200 datasheet (SXM: 141 GB HBM3e, 4.8 TB/s, FP32 67 TFLOPS) and the Hopper tuning
# guide / H100 whitepaper (132 SMs on the SXM part, 128 FP32 cores per SM).
H200 = GPU("NVIDIA H200 SXM", sms=132, fp32_lanes_per_sm=128, memory_gb=141,
           memory_tb_s=4.8, fp32_tflop_s=67.0, l2_mb=50,
           source="NVIDIA H200 Tensor Core GPU datasheet; NVIDIA H100 architecture whitepaper")

# NVIDIA Ada GPU architecture whitepaper: the RTX 4090 has 128 SMs of 128 FP32 cores.
RTX_4090 = GPU("NVIDIA GeForce RTX 4090", sms=128, fp32_lanes_per_sm=128, memory_gb=24,
               memory_tb_s=1.008, fp32_tflop_s=82.6, l2_mb=72,
               source="NVIDIA Ada GPU architecture whitepaper")

# Numba's CUDA simulator runs each GPU thread as Python; on the course's 2-core development
# machines it managed about this many GPU threads per second (docs/authoring.md, "Sizes").
SIMULATOR_THREADS_PER_SECOND = 4400

# CUDA C++ Programming Guide, "Shared Memory": a block's static shared memory is limited to
# 48 KB; more needs dynamic shared memory and an explicit opt-in
# (cudaFuncAttributeMaxDynamicSharedMemorySize), up to 227 KB per block on compute capability 9.0.
STATIC_SHARED_KIB = 48

# NVIDIA H200 datasheet: BF16 tensor-core throughput, dense (the datasheet's 1,979 is with
# 2:4 sparsity).
H200_BF16_TENSOR_TFLOP_S = 989.5
