"""Lesson 7: a bfloat16 matrix multiply on tensor cores (``mma.sync``), from Numba.

``matmul_bf16(a, b)`` computes ``a @ b`` with bfloat16 inputs and float32 accumulation, the
way cuBLAS runs ``torch.matmul`` on bfloat16 tensors. One block computes a ``bm x bn`` tile
of C; each of its warps a ``wm x wn`` part of it, as a grid of 16 x 8 ``mma`` tiles whose
accumulators stay in registers for the whole k loop. Per k-slice of ``bk``:

* ``cp.async`` copies the A (``bm x bk``) and B (``bk x bn``) tiles from global to shared
  memory without passing through registers, ``stages - 1`` slices ahead of the one being
  multiplied (a ring of ``stages`` buffers): the copy of the next slices overlaps the
  tensor-core work on this one;
* ``ldmatrix`` reads the fragments from shared memory (``.trans`` for B, which is stored
  k-major: the instruction transposes 8 x 8 blocks on the way);
* ``mma.m16n8k16`` multiplies them.

Shared memory rows are *swizzled*: 16-byte chunk ``c`` of row ``r`` is stored at chunk
``c ^ f(r)``, so the 8 rows that one ``ldmatrix`` matrix reads fall in 8 different bank
groups (without it, rows 64 or 256 bytes apart would hit the same banks: 4- or 8-way
conflicts).

Inputs are bfloat16 bit patterns (``uint16``/``int16``, host or device: a bfloat16 PyTorch
tensor ``t`` is passed as ``t.view(torch.int16)``) or float32 host arrays (rounded to
bfloat16 on the host: ``fragments.to_bf16_bits``). The result is float32, or bfloat16 bit
patterns when ``out`` is a 16-bit array. Device inputs must be whole tiles (``m % bm``,
``n % bn``, ``k % bk`` zero); host inputs of any shape are padded with zeros.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, float32, int32, uint16, uint32

from ..runtime import tensorcore as tc
from ..runtime.arrays import check_array, describe, is_device_array, to_device
from .attention import _launch_with_shared
from ..runtime.fragments import from_bf16_bits, to_bf16_bits
from ..runtime.launch import DevicePlans, json_named_by

BITS = (np.uint16, np.int16)  # bfloat16 travels as its bit pattern
# cp.async and ldmatrix need 16-byte aligned rows (the simulator's arrays take no option)
ALIGN = None if tc.SIM else 16


def matmul_bf16_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The reference: bfloat16-rounded inputs, products summed in float64, then float32.
    ``a``, ``b``: float32, or bfloat16 bit patterns (uint16)."""
    a, b = (from_bf16_bits(x) if x.dtype in (np.uint16, np.int16) else
            from_bf16_bits(to_bf16_bits(x)) for x in (np.asarray(a), np.asarray(b)))
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)


@dataclass(frozen=True)
class MmaConfig:
    """Tile sizes: block tile ``bm x bn``, k-slice ``bk``, warp tile ``wm x wn``, ``stages``
    buffers in the cp.async ring; ``max_registers`` per thread (0: the compiler's choice).
    Shared memory: ``stages * (bm + bn) * bk * 2`` bytes; up to 48 KiB it is static, above
    it dynamic (up to 227 KiB on sm_90, allowed at launch)."""

    bm: int = 128
    bn: int = 128
    bk: int = 32
    wm: int = 64
    wn: int = 32
    stages: int = 3
    max_registers: int = 0
    dynamic_smem: bool = False  # dynamic shared memory even when it would fit statically

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def shared_bytes(self) -> int:
        return self.stages * (self.bm * self.bk + self.bk * self.bn) * 2

    def validate(self) -> None:
        bm, bn, bk, wm, wn, st = self.bm, self.bn, self.bk, self.wm, self.wn, self.stages
        problems = []
        if bm % wm or bn % wn:
            problems.append("the warp tile must divide the block tile")
        if wm % 16 or wn % 16:
            problems.append("wm and wn must be multiples of 16 (ldmatrix.x4 loads 16 x 16)")
        if bk < 16 or bk & (bk - 1) or bn < 16 or bn & (bn - 1):
            problems.append("bk and bn must be powers of two, at least 16 (mma's k; the "
                            "swizzle XORs chunk indices)")
        if st < 2:
            problems.append("stages must be at least 2")
        if self.shared_bytes() > MAX_SHARED:
            problems.append(f"{self.shared_bytes()} bytes of shared memory: at most "
                            f"{MAX_SHARED}")
        if not problems and ((bm * bk // 8) % self.threads or (bk * bn // 8) % self.threads):
            problems.append("each thread must copy whole 16-byte chunks of both tiles")
        if problems:
            raise ValueError(f"bad MmaConfig {self}: " + "; ".join(problems))


    @property
    def dynamic(self) -> bool:
        """Above 48 KiB a block's shared memory must be dynamic (CUDA's static limit)."""
        return self.dynamic_smem or self.shared_bytes() > STATIC_SHARED


STATIC_SHARED = 48 * 1024
MAX_SHARED = 227 * 1024  # sm_90's most per block (dynamic, allowed per kernel)
# the fastest correct configuration of the H200 sweep of 2026-12-05 (docs/sweeps/
# tensorcore-h200-2026-12-05.json): a fourth buffer in the cp.async ring, 0.48 of cuBLAS
# bf16 at 4096^3 where three gave 0.44
GPU_CONFIG = MmaConfig(stages=4)
SIM_CONFIG = MmaConfig(bm=32, bn=32, bk=32, wm=16, wn=16, stages=2)


def _swizzle_mask(chunks: int):
    """The XOR mask of shared row ``r`` (rows of ``chunks`` 16-byte chunks, a power of two):
    chunk ``c`` of the row is stored at ``c ^ mask(r)``, so the 8 rows one ldmatrix matrix
    reads land on 8 different groups of 4 banks. It depends on ``r % 8`` only: every tile
    and ring buffer starts on a multiple of 8 rows, so a thread computes its mask once.
    Shifts and masks, not ``//`` and ``%``: Python's floor division of signed integers costs
    a dozen instructions of sign fix-ups."""
    if chunks >= 8:
        @cuda.jit(device=True, inline="always")
        def mask(r):
            return r & 7
    else:
        shift = (8 // chunks).bit_length() - 1  # rows in one 128-byte line, as a shift

        @cuda.jit(device=True, inline="always")
        def mask(r):
            return (r >> shift) & (chunks - 1)
    return mask


_KERNELS: dict = {}


def mma_kernel(cfg: MmaConfig, out_bits: bool) -> Any:
    """The kernel for ``cfg``; ``out_bits``: write bfloat16 bit patterns, else float32."""
    key = (cfg, out_bits)
    if key not in _KERNELS:
        cfg.validate()
        _KERNELS[key] = _make_kernel(cfg, out_bits)
    return _KERNELS[key]


def _make_kernel(cfg: MmaConfig, out_bits: bool) -> Any:
    BM, BN, BK, WM, WN, ST = cfg.bm, cfg.bn, cfg.bk, cfg.wm, cfg.wn, cfg.stages
    WARPS_N = BN // WN
    THREADS = cfg.threads
    MT, NT = WM // 16, WN // 8  # mma tiles of a warp: MT along m, NT along n
    AC, BC = BK // 8, BN // 8  # 16-byte chunks in a row of the A tile, of the B tile
    A_LOADS, B_LOADS = BM * AC // THREADS, BK * BC // THREADS
    ACC = MT * NT * 4
    SA_ROWS, SB_ROWS = ST * BM, ST * BK  # shapes must be constants, not expressions
    AF, BF = MT * 4, NT * 2
    IN_FLIGHT = ST - 2  # groups that may still be copying when slice t is needed
    mask_a, mask_b = _swizzle_mask(AC), _swizzle_mask(BC)
    AC_SHIFT, BC_SHIFT = AC.bit_length() - 1, BC.bit_length() - 1
    KK, NJ = BK // 16, NT // 2  # 16-deep k steps of a slice; ldmatrix.x4 loads of B

    @cuda.jit(device=True, inline="always")
    def load_slice(a, b, sa, sb, stage, row0, col0, k0, tid):
        """Issue the copies of one k-slice into ring buffer ``stage``: 16 bytes a copy,
        consecutive threads on consecutive chunks (coalesced global reads). Everything
        but the stage's and the slice's offsets is the same on every trip (hoisted)."""
        for q in range(A_LOADS):
            e = tid + q * THREADS
            r, c = e >> AC_SHIFT, e & (AC - 1)
            tc.cp_async16(sa, stage * BM + r, 8 * (c ^ mask_a(r)), a, row0 + r, k0 + 8 * c)
        for q in range(B_LOADS):
            e = tid + q * THREADS
            r, c = e >> BC_SHIFT, e & (BC - 1)
            tc.cp_async16(sb, stage * BK + r, 8 * (c ^ mask_b(r)), b, k0 + r, col0 + 8 * c)

    A_ELEMS = SA_ROWS * BK  # where the B ring starts in dynamic shared memory
    if cfg.dynamic:
        @cuda.jit(device=True, inline="always")
        def tiles():
            """Both rings in the block's dynamic shared memory, one after the other."""
            dyn = cuda.shared.array(0, uint16, alignment=ALIGN)
            return (tc.shared_tile(dyn, 0, SA_ROWS, BK),
                    tc.shared_tile(dyn, A_ELEMS, SB_ROWS, BN))
    else:
        @cuda.jit(device=True, inline="always")
        def tiles():
            return (cuda.shared.array((SA_ROWS, BK), uint16, alignment=ALIGN),
                    cuda.shared.array((SB_ROWS, BN), uint16, alignment=ALIGN))

    # (the simulator's jit takes no max_registers: it has no registers to cap)
    jit = cuda.jit(max_registers=cfg.max_registers) if cfg.max_registers and not tc.SIM \
        else cuda.jit

    @jit
    def kernel(a, b, c):
        sa, sb = tiles()
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        wrow = (warp // WARPS_N) * WM
        wcol = (warp % WARPS_N) * WN
        row0 = cuda.blockIdx.y * BM
        col0 = cuda.blockIdx.x * BN
        kt = a.shape[1] // BK
        # The accumulators: constant indices after unrolling, so they live in registers.
        acc = cuda.local.array(ACC, float32)
        for i in range(ACC):
            acc[i] = float32(0.0)
        af = cuda.local.array(AF, uint32)
        bf = cuda.local.array(BF, uint32)
        # ldmatrix.x4: lanes 0-15 address rows 0-15 of the first 8 columns, lanes 16-31 the
        # same rows 8 columns further on. Each lane's swizzled columns never change: the
        # rows it addresses are lrow plus multiples of 8.
        lrow, lchunk = lane & 15, lane >> 4
        acol = cuda.local.array(KK, int32)
        for kk in range(KK):
            acol[kk] = 8 * ((2 * kk + lchunk) ^ mask_a(lrow))
        bcol = cuda.local.array(NJ, int32)
        for j in range(NJ):
            bcol[j] = 8 * (((wcol >> 3) + 2 * j + lchunk) ^ mask_b(lrow))
        for s in range(ST - 1):  # the prologue: the first stages - 1 slices in flight
            if s < kt:
                load_slice(a, b, sa, sb, s, row0, col0, s * BK, tid)
            tc.cp_async_commit()  # an empty group keeps the counting uniform
        st = 0  # the ring buffer slice t is in; the refill goes to the one before it
        for t in range(kt):
            tc.cp_async_wait(IN_FLIGHT)  # this thread's copies of slice t have landed...
            cuda.syncthreads()  # ...and everyone's; and everyone is done with slice t - 1
            nxt = t + ST - 1
            if nxt < kt:  # refill the buffer slice t - 1 used
                load_slice(a, b, sa, sb, st - 1 if st > 0 else ST - 1, row0, col0,
                           nxt * BK, tid)
            tc.cp_async_commit()
            ra = st * BM + wrow + lrow
            rb = st * BK + lrow
            for kk in range(KK):
                for i in range(MT):
                    x = tc.ldmatrix_x4(sa, ra + 16 * i, acol[kk])
                    af[4 * i], af[4 * i + 1], af[4 * i + 2], af[4 * i + 3] = x
                for j in range(NJ):  # B is k-major: .trans gives the "col" fragment
                    y = tc.ldmatrix_x4_trans(sb, rb + 16 * kk, bcol[j])
                    bf[4 * j], bf[4 * j + 1], bf[4 * j + 2], bf[4 * j + 3] = y
                for i in range(MT):
                    for j in range(NT):
                        o = 4 * (i * NT + j)
                        d = tc.mma_bf16((af[4 * i], af[4 * i + 1], af[4 * i + 2], af[4 * i + 3]),
                                        (bf[2 * j], bf[2 * j + 1]),
                                        (acc[o], acc[o + 1], acc[o + 2], acc[o + 3]))
                        acc[o], acc[o + 1], acc[o + 2], acc[o + 3] = d
            st = st + 1 if st + 1 < ST else 0
        tc.cp_async_wait_all()  # no copy may still be writing when the block exits
        g, t4 = lane >> 2, lane & 3  # the C fragment: rows g and g + 8, columns 2t, 2t + 1
        for i in range(MT):
            for j in range(NT):
                o = 4 * (i * NT + j)
                r = row0 + wrow + 16 * i + g
                col = col0 + wcol + 8 * j + 2 * t4
                if out_bits:  # c is the output viewed as uint32: one pair a store
                    c[r, col >> 1] = tc.pack_bf16x2(acc[o], acc[o + 1])
                    c[r + 8, col >> 1] = tc.pack_bf16x2(acc[o + 2], acc[o + 3])
                else:
                    c[r, col], c[r, col + 1] = acc[o], acc[o + 1]
                    c[r + 8, col], c[r + 8, col + 1] = acc[o + 2], acc[o + 3]

    kernel.config = cfg
    return kernel


def flops(m: int, k: int, n: int) -> int:
    return 2 * m * k * n


def _default_config() -> MmaConfig:
    """SIM_CONFIG in the simulator; on a GPU, GPU_CONFIG, unless the environment variable
    CUDACOURSE_TC_CONFIGS names a JSON file whose "matmul" entry lists a configuration's
    fields (tools/gpu/tune_tensorcore.py writes one from a sweep)."""
    from ..runtime.device import is_simulator

    if is_simulator():
        return SIM_CONFIG
    tuned = json_named_by("CUDACOURSE_TC_CONFIGS").get("matmul")
    return MmaConfig(*tuned) if tuned else GPU_CONFIG


def _as_bits(x: Any, name: str) -> Any:
    """bfloat16 bit patterns of ``x``: as they are, or rounded from float32 (host only)."""
    if np.dtype(x.dtype) in [np.dtype(t) for t in BITS]:
        return x
    if isinstance(x, np.ndarray) and x.dtype == np.float32:
        return to_bf16_bits(x)
    if is_device_array(x):
        raise TypeError(f"{name} is {describe(x)} on the device: pass bfloat16 bit patterns "
                        "(uint16 or int16; a bfloat16 torch tensor as t.view(torch.int16))")
    check_array(x, name, dtype=(np.float32, np.uint16, np.int16), ndim=2)
    return x


def matmul_bf16(a: Any, b: Any, out: Any = None, config: MmaConfig | None = None) -> Any:
    """``a @ b`` on tensor cores: bfloat16 inputs, float32 accumulation.

    ``a`` (m, k) and ``b`` (k, n): bfloat16 bit patterns (uint16/int16, host or device), or
    float32 host arrays (rounded to bfloat16 first). Returns float32 (m, n), or writes
    ``out``: a float32 array, or a 16-bit one for bfloat16 bit patterns. Host inputs give a
    host result, device inputs a device array.
    """
    cfg = config or _default_config()
    key = ("mma_bf16", cfg)
    if out is not None and _PLANS.run(key, a, b, out):  # device arrays seen before
        return out
    for x, name in ((a, "a"), (b, "b")):
        check_array(x, name, dtype=(np.float32, np.uint16, np.int16), ndim=2)
    m, k = a.shape
    if b.shape[0] != k:
        raise ValueError(f"shape mismatch: a {tuple(a.shape)} @ b {tuple(b.shape)} needs b to "
                         f"have {k} rows")
    n = b.shape[1]
    cfg.validate()
    out_bits = out is not None and np.dtype(out.dtype) in [np.dtype(t) for t in BITS]
    if out is not None:
        check_array(out, "out", dtype=(np.float32, np.uint16, np.int16), ndim=2)
        if tuple(out.shape) != (m, n):
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {(m, n)}")
    on_host = not (is_device_array(a) and is_device_array(b))
    ab, bb = _as_bits(a, "a"), _as_bits(b, "b")
    mp, kp, np_ = (math.ceil(m / cfg.bm) * cfg.bm, math.ceil(k / cfg.bk) * cfg.bk,
                   math.ceil(n / cfg.bn) * cfg.bn)
    padded = (mp, kp, np_) != (m, k, n)
    if padded and not on_host:
        raise ValueError(f"device inputs must be whole tiles: m, k, n = {m}, {k}, {n} must be "
                         f"multiples of {cfg.bm}, {cfg.bk}, {cfg.bn} (or pass host arrays, "
                         "which are padded)")
    if m == 0 or n == 0:
        res = np.zeros((m, n), np.uint16 if out_bits else np.float32)
        return _finish(res, out, on_host)
    if padded:
        ab = np.pad(np.asarray(ab), ((0, mp - m), (0, kp - k)))
        bb = np.pad(np.asarray(bb), ((0, kp - k), (0, np_ - n)))
    da, db = to_device(np.ascontiguousarray(ab) if on_host else ab), \
        to_device(np.ascontiguousarray(bb) if on_host else bb)
    dtype = np.uint16 if out_bits else np.float32
    if out is not None and is_device_array(out) and not padded:
        dout = to_device(out)
    else:
        dout = cuda.device_array((mp, np_), dtype)
    # bfloat16 out: the kernel writes pairs, into the same bytes viewed as uint32
    kout = dout.view(np.uint32) if out_bits else dout
    kern = mma_kernel(cfg, out_bits)
    grid = (np_ // cfg.bn, mp // cfg.bm)
    nbytes = cfg.shared_bytes() if cfg.dynamic else 0
    if kp:
        _launch_with_shared(kern, grid, cfg.threads, nbytes, (da, db, kout))
    else:  # an empty sum
        dout.copy_to_device(np.zeros((mp, np_), dtype))
    if not on_host and out is not None and is_device_array(out) and not padded:
        _PLANS.remember(key, (a, b, out), [(kern, grid, cfg.threads, (da, db, kout),
                                            (0, 1, 2), nbytes)])
        return out
    if on_host:
        return _finish(dout.copy_to_host()[:m, :n], out, True)
    return dout


def _finish(res: np.ndarray, out: Any, on_host: bool) -> Any:
    if isinstance(out, np.ndarray):
        out[...] = res
        return out
    if out is not None and is_device_array(out):
        out.copy_to_device(np.ascontiguousarray(res))
        return out
    return res if on_host else cuda.to_device(res)


_PLANS = DevicePlans()
