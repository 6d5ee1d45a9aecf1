"""Lesson 5: softmax, two ways to compute it, and a fused row-softmax kernel.

``softmax_ref`` is the textbook two-pass version (find the row maximum, then exponentiate and
normalise). ``online_softmax_ref`` reads each row once, keeping a running maximum and a running
sum that is rescaled whenever the maximum grows: the trick that lets attention be fused.
``fused_softmax`` does the whole scaled softmax of each row in one kernel: every thread keeps
an online (max, sum) pair over its share of the row, then a warp reduction (shuffles) and a
block reduction (shared memory) merge the pairs.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import math
from typing import Any

import numpy as np
from numba import cuda

from ..runtime.arrays import check_array, is_device_array, return_like_input, to_device
from ..runtime.launch import DevicePlans

# A finite stand-in for -infinity: fastmath lets the compiler assume there are no infinities.
NEG_BIG = -1.0e30
_NEG = np.float32(NEG_BIG)
_ZERO = np.float32(0.0)
_ONE = np.float32(1.0)


def softmax_ref(x: Any, scale: float = 1.0, xp: Any = np) -> Any:
    """softmax(scale * x) along the last axis, in float64 for NumPy input (two passes)."""
    x = xp.asarray(x)
    if xp is np:
        x = x.astype(np.float64)
    s = x * scale
    s = s - s.max(axis=-1, keepdims=True)  # the largest exponent becomes exp(0) = 1: no overflow
    e = xp.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def online_softmax_ref(x: Any, scale: float = 1.0, chunk: int = 1,
                       return_stats: bool = False) -> Any:
    """softmax(scale * x) along the last axis, reading each row once in chunks of ``chunk``.

    Running state per row: ``m`` (the largest score seen so far) and ``l`` (the sum of
    exp(score - m) so far). When a chunk raises the maximum from m to m_new, every term already
    in ``l`` was computed against the old m, so ``l`` is multiplied by exp(m - m_new).
    With ``return_stats`` also returns (m, l): the softmax is exp(scale * x - m) / l.
    """
    s = np.asarray(x, dtype=np.float64) * scale
    rows = s.reshape(-1, s.shape[-1]) if s.ndim else s.reshape(1, 1)
    m = np.full(rows.shape[0], -np.inf)
    l = np.zeros(rows.shape[0])
    for start in range(0, rows.shape[1], max(1, int(chunk))):
        block = rows[:, start:start + chunk]
        m_new = np.maximum(m, block.max(axis=1))
        l = l * np.exp(m - m_new) + np.exp(block - m_new[:, None]).sum(axis=1)
        m = m_new
    p = (np.exp(rows - m[:, None]) / l[:, None]).reshape(s.shape)
    if return_stats:
        return p, m.reshape(s.shape[:-1]), l.reshape(s.shape[:-1])
    return p


# --- the fused kernel ------------------------------------------------------------------------

def _shuffles_available() -> bool:
    """Warp shuffles exist on a GPU; in the simulator only once cudacourse.runtime.simwarp adds them."""
    from ..runtime.device import is_simulator

    if not is_simulator():
        return True
    from numba.cuda.simulator.kernelapi import FakeCUDAModule

    return hasattr(FakeCUDAModule, "shfl_xor_sync")


def _merge(m1, l1, m2, l2):
    """Combine two online-softmax states (max, sum) into one."""
    m = max(m1, m2)
    return m, l1 * math.exp(m1 - m) + l2 * math.exp(m2 - m)


_merge_dev = cuda.jit(device=True)(_merge)


@cuda.jit(device=True)
def _warp_merge(m, l):
    """Merge the 32 lanes' states in 5 butterfly steps through registers (no shared memory,
    no barrier); every lane ends with the warp's state."""
    off = 16
    while off > 0:
        m2 = cuda.shfl_xor_sync(0xFFFFFFFF, m, off)
        l2 = cuda.shfl_xor_sync(0xFFFFFFFF, l, off)
        m, l = _merge_dev(m, l, m2, l2)
        off //= 2
    return m, l


def _make_softmax_kernel(threads: int, use_shuffles: bool):
    """Build the row-softmax kernel for ``threads`` per block (a power of two, >= 32)."""
    warps = threads // 32

    @cuda.jit(fastmath=True)
    def kernel(x, out, scale):
        """One block per row: online (max, sum) per thread, merged across the block."""
        row = cuda.blockIdx.x
        t = cuda.threadIdx.x
        n = x.shape[1]
        # 1) each thread reads its share of the row once, strided so that neighbouring threads
        #    read neighbouring addresses (coalesced), keeping its own running max and sum
        m = _NEG
        l = _ZERO
        for j in range(t, n, threads):
            s = x[row, j] * scale
            m_new = max(m, s)
            l = l * math.exp(m - m_new) + math.exp(s - m_new)
            m = m_new
        sm_m = cuda.shared.array(threads, np.float32)
        sm_l = cuda.shared.array(threads, np.float32)
        if use_shuffles:
            # 2a) inside a warp, lanes swap states through registers: no shared memory, no barrier
            m, l = _warp_merge(m, l)
            # 2b) one state per warp goes through shared memory to the first warp
            if t % 32 == 0:
                sm_m[t // 32] = m
                sm_l[t // 32] = l
            cuda.syncthreads()  # every warp's state must be written before warp 0 reads them
            if t < 32:
                m = sm_m[t] if t < warps else _NEG
                l = sm_l[t] if t < warps else _ZERO
                m, l = _warp_merge(m, l)
                if t == 0:
                    sm_m[0] = m
                    sm_l[0] = l
        else:
            # 2) tree reduction in shared memory: halve the active threads at every step
            sm_m[t] = m
            sm_l[t] = l
            cuda.syncthreads()  # all states written before anyone reads a neighbour's
            half = threads // 2
            while half > 0:
                if t < half:
                    mm, ll = _merge_dev(sm_m[t], sm_l[t], sm_m[t + half], sm_l[t + half])
                    sm_m[t] = mm
                    sm_l[t] = ll
                cuda.syncthreads()  # finish this level before the next one reads it
                half //= 2
        cuda.syncthreads()  # the row's (max, sum) in sm_m[0], sm_l[0] is ready for all
        m = sm_m[0]
        inv_l = _ONE / sm_l[0]
        # 3) second and last read of the row: write the normalised probabilities
        for j in range(t, n, threads):
            out[row, j] = math.exp(x[row, j] * scale - m) * inv_l

    return kernel


_KERNELS: dict[tuple[int, bool], Any] = {}


def _kernel(threads: int) -> Any:
    key = (threads, _shuffles_available())
    if key not in _KERNELS:
        _KERNELS[key] = _make_softmax_kernel(*key)
    return _KERNELS[key]


def fused_softmax(x: Any, scale: float = 1.0, out: Any = None, threads: int | None = None) -> Any:
    """softmax(scale * x) along the last axis in one kernel launch (float32).

    Host input gives a host result; device input (Numba or CuPy) gives a Numba device array.
    """
    if out is not None and _PLANS.run((scale, threads), x, out):  # device arrays seen before
        return out
    from ..runtime.device import pick

    check_array(x, "x")
    shape = tuple(x.shape)
    if len(shape) < 1 or shape[-1] == 0:
        raise ValueError(f"x must have at least one element along its last axis, got shape "
                         f"{shape}")
    threads_asked = threads
    if threads is None:
        threads = pick(sim=32, gpu=256)
    if threads not in (32, 64, 128, 256, 512, 1024):
        raise ValueError(f"threads must be a power of two from 32 to 1024, got {threads}")
    n = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64)) if len(shape) > 1 else 1
    on_host = not is_device_array(x)
    dx = to_device(x).reshape(rows, n)
    if out is None:
        dout = cuda.device_array((rows, n), dtype=np.float32)
    else:
        check_array(out, "out")
        if tuple(out.shape) != shape:
            raise ValueError(f"shape mismatch: x {shape}, out {tuple(out.shape)}")
        dout = to_device(out).reshape(rows, n)
    if rows:
        args = (dx, dout, np.float32(scale))
        _kernel(threads)[rows, threads](*args)
        if not on_host and out is not None and is_device_array(out):
            _PLANS.remember((scale, threads_asked), (x, out),
                            [(_kernel(threads), rows, threads, args, (0, 1))])
    if on_host:
        return return_like_input(dout, out, on_host, shape)
    return dout.reshape(shape)


_PLANS = DevicePlans()  # launches worked out for device arrays, reused while they look alike
