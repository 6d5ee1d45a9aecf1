"""Lesson 2: warps, the 32 threads that execute in lock-step.

* ``warp_layout_ref``: which warp and lane each thread of a (2D) block belongs to;
* divergence: ``passes_ref`` models how many passes a warp makes over an ``if``/``else``
  when its lanes disagree; ``time_divergence`` measures it on a GPU (a branchy kernel whose
  lanes disagree, the same work with whole warps agreeing, and a branch-free version);
* warp-level primitives: a shuffle reduction (``warp_sums``), a shuffle prefix sum
  (``warp_prefix_sums``) and a vote (``warp_ballots``), each beside its NumPy reference. They
  run in the simulator through ``cudacourse.runtime.simwarp``.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

from typing import Any

import numpy as np
from numba import cuda

from ..runtime.arrays import check_array, is_device_array, return_like_input, to_device
from ..runtime.device import require_gpu
from ..runtime.launch import WARP_SIZE, blocks_for, check_block, check_threads
from ..runtime.timing import event_median
from ..i18n import N_

FULL_MASK = 0xFFFFFFFF


# --- how threads group into warps --------------------------------------------------------

def warp_layout_ref(block: int | tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(warp, lane) of every thread of a block, as arrays of shape ``(z, y, x)`` squeezed to
    the block's dimensions. Linear id = ``x + bx * (y + by * z)``; 32 consecutive ids form a
    warp, so a 2D block of width 8 packs 4 rows into each warp."""
    dims = (block,) if isinstance(block, int) else tuple(block)
    bx, by, bz = check_block((tuple(dims) + (1, 1))[:3])
    linear = np.arange(bx * by * bz, dtype=np.int32).reshape(bz, by, bx)
    shape = (bx,) if len(dims) == 1 else (by, bx) if len(dims) == 2 else (bz, by, bx)
    return (linear // WARP_SIZE).reshape(shape), (linear % WARP_SIZE).reshape(shape)


# --- divergence -------------------------------------------------------------------------------

def passes_ref(taken: np.ndarray) -> np.ndarray:
    """Per warp: the number of branch paths it must execute one after the other (1 or 2).

    ``taken[i]`` says whether thread ``i`` takes the ``if`` side. Lanes of a warp share one
    instruction stream, so a warp whose lanes disagree runs both sides, with the lanes of the
    other side masked off.
    """
    taken = np.asarray(taken, dtype=bool).ravel()
    nwarps = (taken.size + WARP_SIZE - 1) // WARP_SIZE
    padded = np.zeros(nwarps * WARP_SIZE, dtype=bool)
    valid = np.zeros_like(padded)
    padded[:taken.size], valid[:taken.size] = taken, True
    t, v = padded.reshape(nwarps, WARP_SIZE), valid.reshape(nwarps, WARP_SIZE)
    any_if = (t & v).any(axis=1)
    any_else = (~t & v).any(axis=1)
    return any_if.astype(np.int32) + any_else.astype(np.int32)


def branch_patterns(n: int) -> dict[str, np.ndarray]:
    """Which threads take the ``if`` side in ``time_divergence``'s kernels."""
    i = np.arange(n)
    return {N_("lanes disagree"): i % 2 == 0, N_("warps agree"): (i // WARP_SIZE) % 2 == 0}


def branchy_ref(x: np.ndarray, k: int, by_warp: bool) -> np.ndarray:
    """What the branchy kernels compute (float64, for checking them)."""
    x = np.asarray(x, dtype=np.float64)
    i = np.arange(x.size)
    take = (i // WARP_SIZE) % 2 == 0 if by_warp else i % 2 == 0
    a, b = x.copy(), x.copy()
    for _ in range(k):
        a = a * 0.999 + 0.5
        b = b * 0.998 - 0.25
    return np.where(take, a, b)


@cuda.jit
def _branchy(x, out, k, by_warp):
    """Two different loops; which one a thread runs depends on its index."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        v = x[i]
        # by_warp: whole warps pick a side (no divergence); else even and odd lanes of every
        # warp disagree, and each warp runs both loops one after the other.
        take = (i // 32) % 2 == 0 if by_warp else i % 2 == 0
        if take:
            for _ in range(k):
                v = v * 0.999 + 0.5
        else:
            j = 0
            while j < k:  # a different loop shape, so the compiler cannot merge the two
                v = v * 0.998 - 0.25
                j += 1
        out[i] = v


@cuda.jit
def _branch_free(x, out, k):
    """The same result as the divergent kernel, with the choice made by arithmetic."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        # One loop for every lane: the constants differ, the instructions do not.
        even = i % 2 == 0
        m = 0.999 if even else 0.998
        c = 0.5 if even else -0.25
        v = x[i]
        for _ in range(k):
            v = v * m + c
        out[i] = v


# Names of the variants, also their labels in the lesson's charts (translated where shown).
DIVERGENCE_VARIANTS = (N_("lanes disagree"), N_("warps agree"), N_("branch-free"))


def run_branchy(x: Any, k: int, variant: str, threads: int = 256) -> Any:
    """One launch of a divergence kernel; host in, host out (device in, device out)."""
    check_array(x, "x", dtype=(np.float32, np.float64), ndim=1)
    if variant not in DIVERGENCE_VARIANTS:  # a demonstration, not speed choices: no "best"
        raise ValueError(f"variant must be one of {DIVERGENCE_VARIANTS}, got {variant!r}")
    dx = to_device(x)
    dout = cuda.device_array(x.shape[0], dtype=x.dtype)
    blocks = blocks_for(x.shape[0], threads)
    if variant == "branch-free":
        _branch_free[blocks, threads](dx, dout, k)
    else:
        _branchy[blocks, threads](dx, dout, k, variant == "warps agree")
    return return_like_input(dout, None, not is_device_array(x))


def time_divergence(n: int = 1 << 24, k: int = 64, repeats: int = 10,
                    threads: int = 256) -> dict[str, float]:
    """Median milliseconds per launch of each variant, timed with CUDA events (GPU only)."""
    require_gpu("timing warp divergence")
    x = cuda.to_device(np.random.default_rng(0).standard_normal(n).astype(np.float32))
    return {variant: event_median(lambda v=variant: run_branchy(x, k, v, threads), repeats)
            for variant in DIVERGENCE_VARIANTS}


# --- warp shuffles and votes -----------------------------------------------------------------

def warp_sums_ref(x: Any, xp: Any = np) -> Any:
    """Sum of every group of 32 consecutive elements (the last group may be shorter)."""
    x = xp.asarray(x)
    n = x.shape[0]
    groups = (n + WARP_SIZE - 1) // WARP_SIZE
    padded = xp.zeros(groups * WARP_SIZE, dtype=xp.float64)
    padded[:n] = x
    return padded.reshape(groups, WARP_SIZE).sum(axis=1)


@cuda.jit
def _warp_sums(x, out):
    """Each warp adds its 32 values with shuffles; lane 0 writes the sum."""
    i = cuda.grid(1)
    # Lanes past the end still take part in every shuffle, with 0: a lane that returned
    # early would leave a hole its warp-mates read from.
    v = 0.0
    if i < x.shape[0]:
        v = x[i]
    offset = 16
    while offset > 0:
        # Lane j adds lane j + offset's value: after 5 steps lane 0 holds the total.
        v += cuda.shfl_down_sync(FULL_MASK, v, offset)
        offset //= 2
    w = i // 32
    if cuda.laneid == 0 and w < out.shape[0]:
        out[w] = v


def warp_prefix_sums_ref(x: Any, xp: Any = np) -> Any:
    """Inclusive prefix sum inside each group of 32 consecutive elements."""
    x = xp.asarray(x, dtype=xp.float64)
    n = x.shape[0]
    groups = (n + WARP_SIZE - 1) // WARP_SIZE
    padded = xp.zeros(groups * WARP_SIZE, dtype=xp.float64)
    padded[:n] = x
    return xp.cumsum(padded.reshape(groups, WARP_SIZE), axis=1).ravel()[:n]


@cuda.jit
def _warp_prefix_sums(x, out):
    """Inclusive scan of each warp's 32 values with shfl_up_sync (Hillis-Steele)."""
    i = cuda.grid(1)
    v = 0.0  # lanes past the end take part with 0
    if i < x.shape[0]:
        v = x[i]
    lane = cuda.laneid
    offset = 1
    while offset < 32:
        # Lane j receives lane j - offset's running total; lanes below offset get their own
        # value back and must not add it.
        up = cuda.shfl_up_sync(FULL_MASK, v, offset)
        if lane >= offset:
            v += up
        offset *= 2
    if i < out.shape[0]:
        out[i] = v


def warp_ballots_ref(predicate: Any) -> np.ndarray:
    """Per group of 32: bit ``j`` set when element ``32 w + j`` is true (as uint32)."""
    p = np.asarray(predicate, dtype=bool).ravel()
    groups = (p.size + WARP_SIZE - 1) // WARP_SIZE
    padded = np.zeros(groups * WARP_SIZE, dtype=np.uint64)
    padded[:p.size] = p
    weights = (np.uint64(1) << np.arange(WARP_SIZE, dtype=np.uint64))
    return (padded.reshape(groups, WARP_SIZE) * weights).sum(axis=1).astype(np.uint32)


@cuda.jit
def _warp_ballots(x, out):
    """Each warp votes on ``x > 0``; lane 0 stores the 32-bit ballot."""
    i = cuda.grid(1)
    positive = x[i] > 0 if i < x.shape[0] else False
    ballot = cuda.ballot_sync(FULL_MASK, positive)  # every lane gets the same mask
    w = i // 32
    if cuda.laneid == 0 and w < out.shape[0]:
        out[w] = ballot


def _warp_launch(kernel: Any, x: Any, out_len: int, out_dtype: Any, threads: int) -> Any:
    check_array(x, "x", dtype=(np.float32, np.float64), ndim=1)
    check_threads(threads, whole_warps=True)  # warp primitives need whole warps
    n = int(x.shape[0])
    if n == 0:
        raise ValueError("x is empty")
    dx = to_device(x)
    dout = cuda.device_array(out_len, dtype=out_dtype)
    kernel[blocks_for(n, threads), threads](dx, dout)
    return return_like_input(dout, None, not is_device_array(x))


def warp_sums(x: Any, threads: int = 128) -> Any:
    """Sums of each 32 consecutive elements, by warp shuffles (float64 for float64 input)."""
    n = int(x.shape[0])
    return _warp_launch(_warp_sums, x, (n + 31) // 32, x.dtype, threads)


def warp_prefix_sums(x: Any, threads: int = 128) -> Any:
    """Inclusive prefix sums inside each 32-element group, by ``shfl_up_sync``."""
    return _warp_launch(_warp_prefix_sums, x, int(x.shape[0]), x.dtype, threads)


def warp_ballots(x: Any, threads: int = 128) -> Any:
    """For each 32 consecutive elements, the ballot mask of ``x > 0`` (uint32)."""
    n = int(x.shape[0])
    return _warp_launch(_warp_ballots, x, (n + 31) // 32, np.uint32, threads)
