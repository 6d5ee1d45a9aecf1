"""Lesson 2: occupancy, how many warps an SM can keep resident for a given kernel.

An SM holds the registers and shared memory of every resident block at once. A block can
only be placed when its whole allocation fits, so the kernel's resource use and the block
size together cap the resident warps: that fraction of the SM's 64 warp slots is the
*occupancy*. More resident warps give the scheduler more independent work to switch to while
others wait on memory.

``occupancy()`` follows the allocation rules of NVIDIA's occupancy calculator
(``cuda_occupancy.h``) for compute capability 9.0 (H100/H200): registers in units of 256
per warp from four 16384-register partitions, shared memory in 128-byte units plus 1 KiB
reserved per block. On a GPU, ``kernel_resources`` reads a compiled kernel's registers and
shared memory; ``driver_blocks_per_sm`` asks the driver, to compare against the model.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .device import is_simulator, require_gpu
from ..i18n import N_, _
from .launch import blocks_for
from .timing import event_median


# The resource that caps the blocks per SM, as a learner reads it (describe translates it).
LIMITERS = {"warps": N_("warps"), "blocks": N_("blocks"), "registers": N_("registers"),
            "shared memory": N_("shared memory")}


@dataclass(frozen=True)
class SMLimits:
    """What one streaming multiprocessor offers (defaults: compute capability 9.0)."""

    name: str = "compute capability 9.0 (H100/H200) SM"
    max_warps: int = 64
    max_blocks: int = 32
    max_threads_per_block: int = 1024
    registers: int = 65536  # 32-bit registers per SM
    register_unit: int = 256  # registers are handed to a warp in chunks of this many
    register_partitions: int = 4  # one register file slice per warp scheduler
    max_registers_per_thread: int = 255
    shared_memory: int = 228 * 1024  # bytes per SM (the largest shared/L1 carve-out)
    max_shared_per_block: int = 227 * 1024
    shared_unit: int = 128  # shared memory is allocated in 128-byte units
    shared_reserved_per_block: int = 1024  # the CUDA runtime keeps 1 KiB of each block's
    warp_size: int = 32


H200_SM = SMLimits()


@dataclass(frozen=True)
class Occupancy:
    threads_per_block: int
    registers_per_thread: int
    shared_per_block: int
    blocks_per_sm: int
    warps_per_sm: int
    occupancy: float  # resident warps / max warps
    limiter: str  # "warps", "blocks", "registers" or "shared memory" (LIMITERS)
    limits: dict[str, int] = field(default_factory=dict)  # blocks allowed by each resource

    def describe(self) -> str:
        return _("{tpb} threads/block, {regs} regs/thread, {shared} B shared/block: {blocks} "
                 "blocks = {warps} warps per SM, occupancy {occ:.0%} (limited by {limiter})").format(
            tpb=self.threads_per_block, regs=self.registers_per_thread,
            shared=self.shared_per_block, blocks=self.blocks_per_sm, warps=self.warps_per_sm,
            occ=self.occupancy, limiter=_(LIMITERS.get(self.limiter, self.limiter)))


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(threads_per_block: int, registers_per_thread: int, shared_per_block: int = 0,
              limits: SMLimits = H200_SM) -> Occupancy:
    """Resident blocks and warps per SM for a kernel's resources and a block size."""
    if not 1 <= threads_per_block <= limits.max_threads_per_block:
        raise ValueError(f"threads_per_block must be 1 to {limits.max_threads_per_block}, "
                         f"got {threads_per_block}")
    if not 0 <= registers_per_thread <= limits.max_registers_per_thread:
        raise ValueError(f"registers_per_thread must be 0 to "
                         f"{limits.max_registers_per_thread}, got {registers_per_thread}")
    if not 0 <= shared_per_block <= limits.max_shared_per_block:
        raise ValueError(f"shared_per_block must be 0 to {limits.max_shared_per_block} bytes, "
                         f"got {shared_per_block}")
    warps_per_block = math.ceil(threads_per_block / limits.warp_size)  # a partial warp is whole

    by_warps = limits.max_warps // warps_per_block
    by_blocks = limits.max_blocks
    if registers_per_thread == 0:
        by_regs = by_blocks
    else:
        # Each warp gets whole 256-register units, from one of the four partitions.
        per_warp = _round_up(registers_per_thread * limits.warp_size, limits.register_unit)
        warps_per_partition = (limits.registers // limits.register_partitions) // per_warp
        by_regs = (warps_per_partition * limits.register_partitions) // warps_per_block
        if per_warp * warps_per_block > limits.registers:  # the block alone does not fit
            by_regs = 0
    per_block_smem = _round_up(shared_per_block + limits.shared_reserved_per_block,
                               limits.shared_unit)
    by_smem = limits.shared_memory // per_block_smem
    allowed = {"warps": by_warps, "blocks": by_blocks, "registers": by_regs,
               "shared memory": by_smem}
    blocks = min(allowed.values())
    limiter = min(allowed, key=lambda k: (allowed[k], list(allowed).index(k)))
    warps = blocks * warps_per_block
    return Occupancy(threads_per_block, registers_per_thread, shared_per_block, blocks, warps,
                     warps / limits.max_warps, limiter, allowed)


def occupancy_curve(registers_per_thread: int, shared_per_block: int = 0,
                    sizes: Any = range(32, 1025, 32),
                    limits: SMLimits = H200_SM) -> list[Occupancy]:
    """``occupancy`` for every block size in ``sizes``."""
    return [occupancy(int(s), registers_per_thread, shared_per_block, limits) for s in sizes]


# --- a compiled kernel's resources -----------------------------------------------------------

@dataclass(frozen=True)
class KernelResources:
    registers_per_thread: int
    shared_per_block: int  # static shared memory, bytes
    local_per_thread: int  # bytes spilled to (slow, off-chip) local memory
    max_threads_per_block: int
    source: str  # where the numbers come from

    @property
    def measured(self) -> bool:
        return self.source.startswith("compiled")


# Illustrative numbers, not measured. The simulator compiles nothing, so it has nothing to
# report; these let the occupancy arithmetic be shown anyway.
EXAMPLE_RESOURCES = KernelResources(
    registers_per_thread=32, shared_per_block=0, local_per_thread=0,
    max_threads_per_block=1024,
    source=N_("example numbers, not measured (the simulator compiles no kernel, so there is "
              "nothing to read; on a GPU the compiled kernel's own numbers appear here)"))


def kernel_resources(kernel: Any, *args: Any) -> KernelResources:
    """Registers, shared and local memory of ``kernel`` compiled for ``args``' types.

    On a GPU the numbers come from the compiled kernel (``specialize`` compiles it for those
    argument types). In the simulator they come from a real sm_90 compile of the same kernel
    by libNVVM and ptxas from the pip wheels (``cudacourse.check.kit.compile_resources``); without those
    wheels the result is ``EXAMPLE_RESOURCES``, whose ``source`` says so.
    """
    if is_simulator():
        return _sm90_resources(kernel, args)
    spec = kernel.specialize(*args)
    return KernelResources(
        registers_per_thread=int(spec.get_regs_per_thread()),
        shared_per_block=int(spec.get_shared_mem_per_block()),
        local_per_thread=int(spec.get_local_mem_per_thread()),
        max_threads_per_block=int(spec.get_max_threads_per_block()),
        source=N_("compiled kernel (read from the GPU driver)"))


def _sm90_resources(kernel: Any, args: tuple) -> KernelResources:
    """The simulator's answer: ptxas's report for an sm_90 build, else the examples."""
    from ..check import kit

    try:
        res = kit.compile_resources(kernel, *args)
    except kit.CompileRefused:
        res = None
    if res is None:
        return EXAMPLE_RESOURCES
    # The most threads a block can have with this many registers: whole warps, each taking
    # its registers in units of 256 from one of four 16384-register partitions.
    lim = SMLimits()
    per_warp = _round_up(max(res.registers, 1) * lim.warp_size, lim.register_unit)
    warps = lim.register_partitions * ((lim.registers // lim.register_partitions) // per_warp)
    return KernelResources(
        registers_per_thread=res.registers, shared_per_block=res.shared,
        local_per_thread=res.local,
        max_threads_per_block=min(lim.max_threads_per_block, warps * lim.warp_size),
        source=N_("compiled for sm_90 by NVVM and ptxas (no GPU here: the simulator runs the "
                  "kernel, the pip-installed compiler reports its resources)"))


def driver_blocks_per_sm(kernel: Any, args: tuple, threads_per_block: int,
                         dynamic_shared: int = 0) -> int:
    """The driver's own answer (``cuOccupancyMaxActiveBlocksPerMultiprocessor``). GPU only."""
    require_gpu("asking the driver for occupancy")
    from .._numba_private import max_cooperative_grid_blocks
    from .launch import sm_count

    blocks = max_cooperative_grid_blocks(kernel, args, threads_per_block, dynamic_shared)
    return blocks // sm_count()


# --- block size against bandwidth, measured (GPU only) ---------------------------------------

def _copy_scale_kernel():
    from numba import cuda

    @cuda.jit
    def copy_scale(x, out, factor):
        """One thread per element: out = factor * x, purely memory-bound."""
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = factor * x[i]

    return copy_scale


def block_size_sweep(n: int = 1 << 26, sizes: Any = (32, 64, 128, 256, 512, 1024),
                     repeats: int = 10) -> list[dict[str, float]]:
    """GB/s of a memory-bound kernel (read + write float32) per block size. GPU only.

    Small blocks hit the 32-blocks-per-SM limit before the 64-warp limit, so fewer bytes are
    in flight per SM and bandwidth drops.
    """
    require_gpu("measuring bandwidth against block size")
    from numba import cuda

    kernel = _copy_scale_kernel()
    x = cuda.to_device(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    out = cuda.device_array_like(x)
    res = kernel_resources(kernel, x, out, np.float32(2.0))
    rows = []
    for tpb in sizes:
        blocks = blocks_for(n, tpb)
        # The first (untimed) launch compiles; then CUDA events time each launch.
        ms = event_median(lambda: kernel[blocks, tpb](x, out, np.float32(2.0)), repeats)
        occ = occupancy(tpb, res.registers_per_thread, res.shared_per_block)
        rows.append({"threads_per_block": tpb, "ms": ms, "gb_per_s": 2 * 4 * n / ms / 1e6,
                     "occupancy": occ.occupancy})
    return rows
