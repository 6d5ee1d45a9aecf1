"""Lesson 7: flash attention in bfloat16 on tensor cores (``mma.sync``), from Numba.

    attention(Q, K, V) = softmax(Q K^T / sqrt(d)) V      per head; Q, K, V: (seq, d)

The algorithm is lesson 5's fused kernel (``attention.flash_attention``): K and V stream
through shared memory in tiles of ``bc`` keys, and each query row keeps a running maximum,
a running sum and its output accumulator, rescaled when the maximum grows (the online
softmax); the seq x seq scores never leave the chip. What changes is who multiplies:

* a block owns ``16 * warps`` query rows, each warp 16 of them; the warp's Q fragments are
  read once (``ldmatrix``) and stay in registers;
* S = Q K^T for a 16 x ``bc`` tile is ``d / 16 * bc / 8`` ``mma.m16n8k16``: K is stored
  key-major in shared memory, which is exactly the "col" layout of B, so plain ``ldmatrix``
  gives its fragments;
* the softmax runs in float32 on the S accumulators, in the layout the ``mma`` left them:
  each lane holds 2 rows (``g`` and ``g + 8``) x 2 columns of every 8-key tile, so a row's
  maximum is 4 lanes' (two ``shfl_xor``); the sum is kept per lane and reduced once at the
  end;
* P (rounded to bfloat16) goes straight from the S accumulators into the A fragments of
  O += P V: the C layout of two neighbouring 8-key tiles *is* the A layout of a 16-key
  step, so P never touches shared memory; V's fragments come from ``ldmatrix.trans``;
* ``cp.async`` loads the next K and V tiles while this one is multiplied (two buffers).

Inputs are bfloat16 bit patterns (uint16/int16; a bfloat16 tensor ``t`` as
``t.view(torch.int16)``) or float32 host arrays (rounded on the host), shaped
(batch_heads, seq, d) or (batch, heads, seq, d); d = 64 or 128. The output is float32, or
bfloat16 bit patterns when ``out`` is 16-bit.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda, float32, uint16, uint32

from ..runtime import tensorcore as tc
from ..runtime.arrays import check_array, describe, is_device_array, to_device
from .attention import _launch_with_shared
from ..runtime.fragments import from_bf16_bits, to_bf16_bits
from ..runtime.launch import DevicePlans, json_named_by

LOG2E = 1.4426950408889634
HEAD_DIMS = (64, 128)
BITS = (np.uint16, np.int16)
ALIGN = None if tc.SIM else 16  # cp.async and ldmatrix: 16-byte aligned rows
_NEG_INF = float32(-np.inf)
_M0 = float32(-1e30)  # the running maximum before any key: finite, so m - m_new is never NaN


def attention_bf16_ref(q: Any, k: Any, v: Any, causal: bool = False) -> np.ndarray:
    """softmax(q k^T / sqrt(d)) v on bfloat16-rounded inputs, in float64, then float32."""
    q, k, v = (from_bf16_bits(x) if x.dtype in (np.uint16, np.int16) else
               from_bf16_bits(to_bf16_bits(x)) for x in (np.asarray(q), np.asarray(k),
                                                          np.asarray(v)))
    from .attention import attention_ref

    return np.asarray(attention_ref(q, k, v, causal=causal), dtype=np.float32)


@dataclass(frozen=True)
class MmaAttentionConfig:
    """``warps`` warps of ``16 * m_tiles`` query rows each; ``bc`` keys a tile;
    ``max_registers`` per thread (0: the compiler's choice). Shared memory: Q (``br`` x d)
    and two buffers of K and V (bc x d), bfloat16; static up to 48 KiB, dynamic above (or
    with ``dynamic_smem``), up to 227 KiB."""

    warps: int = 4
    bc: int = 64
    max_registers: int = 0
    dynamic_smem: bool = False
    m_tiles: int = 1  # 16-row m-tiles per warp: 2 reuses each K and V fragment twice

    @property
    def br(self) -> int:
        return 16 * self.m_tiles * self.warps

    @property
    def threads(self) -> int:
        return 32 * self.warps

    def shared_bytes(self, d: int) -> int:
        return (self.br + 4 * self.bc) * d * 2

    def validate(self, d: int) -> None:
        problems = []
        if d not in HEAD_DIMS:
            problems.append(f"head_dim must be one of {HEAD_DIMS}, got {d}")
        if self.bc % 16 or self.bc < 16:
            problems.append("bc must be a multiple of 16")
        if self.warps < 1 or self.m_tiles < 1:
            problems.append("warps and m_tiles must be at least 1")
        elif self.shared_bytes(d) > 227 * 1024:
            problems.append(f"{self.shared_bytes(d)} bytes of shared memory: at most 232448")
        elif (self.br * d // 8) % self.threads or (self.bc * d // 8) % self.threads:
            problems.append("each thread must copy whole 16-byte chunks of the tiles")
        if problems:
            raise ValueError(f"bad MmaAttentionConfig {self} for d = {d}: "
                             + "; ".join(problems))


# The fastest correct configurations of the H200 sweep of 2026-12-05
# (docs/sweeps/tensorcore-h200-2026-12-05.json, tools/gpu/tune_tensorcore.py, 16 x 4096):
# d = 64 with two 16-row m-tiles a warp (each K and V fragment used twice: 0.62 of SDPA
# bf16 where one m-tile gave 0.53); d = 128 with 64-key tiles (0.40; 32 keys capped at 168
# registers, the offline pick of docs/ptxas_tensorcore.json, gave 0.37)
GPU_CONFIGS = {64: MmaAttentionConfig(4, 64, 0, False, 2), 128: MmaAttentionConfig(4, 64)}
SIM_CONFIGS = {64: MmaAttentionConfig(2, 32), 128: MmaAttentionConfig(2, 32)}

_KERNELS: dict = {}


def attention_kernel(d: int, cfg: MmaAttentionConfig, out_bits: bool) -> Any:
    key = (d, cfg, out_bits)
    if key not in _KERNELS:
        cfg.validate(d)
        _KERNELS[key] = _make_kernel(d, cfg, out_bits)
    return _KERNELS[key]


def _make_kernel(D: int, cfg: MmaAttentionConfig, out_bits: bool) -> Any:
    NW, BC = cfg.warps, cfg.bc
    BR, THREADS = cfg.br, cfg.threads
    DC = D // 8  # 16-byte chunks in a row of Q, K or V
    KD = D // 16  # k-steps of S = Q K^T
    NS = BC // 8  # 8-key tiles of S
    KP = BC // 16  # k-steps of O += P V
    ND = D // 8  # 8-column tiles of O
    MW = cfg.m_tiles  # 16-row m-tiles of each warp
    WROWS = 16 * MW  # query rows of a warp
    QF, SACC, OACC = MW * KD * 4, MW * NS * 4, MW * ND * 4
    ROWS_LANE = 2 * MW  # query rows of a lane: g and g + 8 of each m-tile
    # One shared array of width d: Q's rows, then two buffers of K, then two of V
    KOFF, VOFF, ROWS = BR, BR + 2 * BC, BR + 4 * BC
    DYN = cfg.shared_bytes(D) > 48 * 1024 or cfg.dynamic_smem
    if DYN:
        @cuda.jit(device=True, inline="always")
        def tiles():
            return tc.shared_tile(cuda.shared.array(0, uint16, alignment=ALIGN), 0, ROWS, D)
    else:
        @cuda.jit(device=True, inline="always")
        def tiles():
            return cuda.shared.array((ROWS, D), uint16, alignment=ALIGN)
    Q_LOADS, KV_LOADS = BR * DC // THREADS, BC * DC // THREADS

    DC_SHIFT = DC.bit_length() - 1
    ROW_BYTES = 2 * D  # one row of Q, K or V in shared memory
    BUF_BYTES = BC * ROW_BYTES  # one buffer of K (or V)

    @cuda.jit(device=True, inline="always")
    def swz(r, c):
        """Where chunk c of a row r of 16-byte chunks is stored: rows of 128 or 256 bytes,
        so XOR with r % 8 puts the 8 rows one ldmatrix matrix reads on 8 different bank
        groups. Q, K and V tiles start on multiples of 8 rows, so r % 8 is the row's place
        in its tile, and a lane's ldmatrix rows all have r % 8 = lane % 8."""
        return 8 * (c ^ (r & 7))

    @cuda.jit(device=True, inline="always")
    def load_kv(k, v, sm, buf, base, tid):
        for q in range(KV_LOADS):
            e = tid + q * THREADS
            r, c = e >> DC_SHIFT, e & (DC - 1)  # (shifts: Python's // and % on signed
            col = swz(r, c)  # integers cost a dozen instructions of sign fix-ups)
            tc.cp_async16(sm, KOFF + buf * BC + r, col, k, base + r, 8 * c)
            tc.cp_async16(sm, VOFF + buf * BC + r, col, v, base + r, 8 * c)

    jit = cuda.jit(max_registers=cfg.max_registers) if cfg.max_registers and not tc.SIM \
        else cuda.jit  # (the simulator's jit takes no max_registers)

    @jit
    def kernel(q, k, v, out, seq, n_keys, qscale, causal):
        sm = tiles()
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        g, t4 = lane >> 2, lane & 3
        n_qt = cuda.gridDim.x
        # causal: the longest rows first, so the short ones fill the tail of the grid
        qt = n_qt - 1 - cuda.blockIdx.x if causal else cuda.blockIdx.x
        q0 = qt * BR
        base = cuda.blockIdx.y * seq  # row of this head's first query/key in (bh*seq, d)
        n_kt = (n_keys + BC - 1) // BC
        if causal:
            n_kt = min(n_kt, (q0 + BR + BC - 1) // BC)
        for i in range(Q_LOADS):
            e = tid + i * THREADS
            r, c = e >> DC_SHIFT, e & (DC - 1)
            tc.cp_async16(sm, r, swz(r, c), q, base + q0 + r, 8 * c)
        load_kv(k, v, sm, 0, base, tid)
        tc.cp_async_commit()
        qf = cuda.local.array(QF, uint32)
        s = cuda.local.array(SACC, float32)
        o = cuda.local.array(OACC, float32)
        for i in range(OACC):
            o[i] = float32(0.0)
        # per m-tile mi: the running maxima of rows g and g + 8 (raw scores) and this
        # lane's part of their running sums, at 2 mi and 2 mi + 1
        m = cuda.local.array(ROWS_LANE, float32)
        lsum = cuda.local.array(ROWS_LANE, float32)
        for i in range(ROWS_LANE):
            m[i] = _M0
            lsum[i] = float32(0.0)
        lrow, lchunk = lane & 15, lane >> 4
        m7 = lane & 7  # the swizzle of every row this lane gives ldmatrix
        khalf = (lane >> 3) & 1  # K: lanes 8-15 and 24-31 address the second 8 columns
        krow = (lane & 7) | (lchunk << 3)  # K: lanes 16-31 address the next 8 keys
        wrow0 = q0 + WROWS * warp  # this warp's first query row
        # ldmatrix addresses: a lane's row in the first buffer, bytes from there on (the
        # adds fold into the instruction's immediate offset)
        k_at = tc.smem_addr(sm, KOFF + krow, 0)
        v_at = tc.smem_addr(sm, VOFF + lrow, 0)
        for j in range(n_kt):
            buf = j & 1
            buf_bytes = buf * BUF_BYTES
            tc.cp_async_wait(0)  # tile j (and Q) landed for this thread's copies...
            cuda.syncthreads()  # ...and for everyone's; tile j - 1's buffer is free
            if j == 0:
                for mi in range(MW):  # Q fragments: once, into registers
                    for kk in range(KD):
                        x = tc.ldmatrix_x4(sm, WROWS * warp + 16 * mi + lrow,
                                           8 * ((2 * kk + lchunk) ^ m7))
                        f = 4 * (mi * KD + kk)
                        qf[f], qf[f + 1], qf[f + 2], qf[f + 3] = x
            if j + 1 < n_kt:
                load_kv(k, v, sm, 1 - buf, base + (j + 1) * BC, tid)
            tc.cp_async_commit()
            # S = Q K^T (16 MW x BC per warp), float32 accumulators; each K fragment
            # feeds the warp's MW m-tiles
            for i in range(SACC):
                s[i] = float32(0.0)
            for kk in range(KD):
                for jj in range(NS // 2):
                    y = tc.ldmatrix_x4_at(k_at + buf_bytes + 16 * jj * ROW_BYTES
                                          + 16 * ((2 * kk + khalf) ^ m7))
                    for mi in range(MW):
                        f = 4 * (mi * KD + kk)
                        for h in range(2):
                            o4 = 4 * (mi * NS + 2 * jj + h)
                            d4 = tc.mma_bf16((qf[f], qf[f + 1], qf[f + 2], qf[f + 3]),
                                             (y[2 * h], y[2 * h + 1]),
                                             (s[o4], s[o4 + 1], s[o4 + 2], s[o4 + 3]))
                            s[o4], s[o4 + 1], s[o4 + 2], s[o4 + 3] = d4
            k0 = j * BC
            mask = k0 + BC > n_keys or (causal and k0 + BC - 1 > wrow0)
            for mi in range(MW):
                # mask, and the rows' new maxima (of the raw scores: qscale > 0 keeps the
                # order)
                mx_lo, mx_hi = _NEG_INF, _NEG_INF
                for n in range(NS):
                    for i in range(4):
                        x = s[4 * (mi * NS + n) + i]
                        if mask:
                            key = k0 + 8 * n + 2 * t4 + (i & 1)
                            row = wrow0 + 16 * mi + g + 8 * (i >> 1)
                            if key >= n_keys or (causal and key > row):
                                x = _NEG_INF
                                s[4 * (mi * NS + n) + i] = x
                        if i < 2:
                            mx_lo = max(mx_lo, x)
                        else:
                            mx_hi = max(mx_hi, x)
                # a row lives in the 4 lanes of a group: their maximum, by two butterflies
                mx_lo = max(mx_lo, cuda.shfl_xor_sync(0xFFFFFFFF, mx_lo, 1))
                mx_lo = max(mx_lo, cuda.shfl_xor_sync(0xFFFFFFFF, mx_lo, 2))
                mx_hi = max(mx_hi, cuda.shfl_xor_sync(0xFFFFFFFF, mx_hi, 1))
                mx_hi = max(mx_hi, cuda.shfl_xor_sync(0xFFFFFFFF, mx_hi, 2))
                new_lo, new_hi = max(m[2 * mi], mx_lo), max(m[2 * mi + 1], mx_hi)
                a_lo = tc.exp2_approx((m[2 * mi] - new_lo) * qscale)
                a_hi = tc.exp2_approx((m[2 * mi + 1] - new_hi) * qscale)
                m[2 * mi], m[2 * mi + 1] = new_lo, new_hi
                ms_lo, ms_hi = new_lo * qscale, new_hi * qscale  # in log2 units
                l_lo, l_hi = lsum[2 * mi] * a_lo, lsum[2 * mi + 1] * a_hi
                for n in range(ND):
                    f = 4 * (mi * ND + n)
                    o[f] *= a_lo
                    o[f + 1] *= a_lo
                    o[f + 2] *= a_hi
                    o[f + 3] *= a_hi
                # P = exp2(S * qscale - m * qscale), one fused multiply-add each: in place,
                # and summed per lane
                for n in range(NS):
                    f = 4 * (mi * NS + n)
                    p0 = tc.exp2_approx(cuda.fma(s[f], qscale, -ms_lo))
                    p1 = tc.exp2_approx(cuda.fma(s[f + 1], qscale, -ms_lo))
                    p2 = tc.exp2_approx(cuda.fma(s[f + 2], qscale, -ms_hi))
                    p3 = tc.exp2_approx(cuda.fma(s[f + 3], qscale, -ms_hi))
                    l_lo += p0 + p1
                    l_hi += p2 + p3
                    s[f], s[f + 1], s[f + 2], s[f + 3] = p0, p1, p2, p3
                lsum[2 * mi], lsum[2 * mi + 1] = l_lo, l_hi
            # O += P V: two 8-key tiles of P's accumulators are one A fragment; each V
            # fragment feeds the warp's MW m-tiles
            for kp in range(KP):
                for jd in range(ND // 2):
                    y = tc.ldmatrix_x4_trans_at(v_at + buf_bytes + 16 * kp * ROW_BYTES
                                                + 16 * ((2 * jd + lchunk) ^ m7))
                    for mi in range(MW):
                        n0 = 4 * (mi * NS + 2 * kp)  # s index of 8-key tile 2 kp
                        a = (tc.pack_bf16x2(s[n0], s[n0 + 1]),
                             tc.pack_bf16x2(s[n0 + 2], s[n0 + 3]),
                             tc.pack_bf16x2(s[n0 + 4], s[n0 + 5]),
                             tc.pack_bf16x2(s[n0 + 6], s[n0 + 7]))
                        for h in range(2):
                            o4 = 4 * (mi * ND + 2 * jd + h)
                            d4 = tc.mma_bf16(a, (y[2 * h], y[2 * h + 1]),
                                             (o[o4], o[o4 + 1], o[o4 + 2], o[o4 + 3]))
                            o[o4], o[o4 + 1], o[o4 + 2], o[o4 + 3] = d4
        tc.cp_async_wait_all()
        for mi in range(MW):
            l_lo, l_hi = lsum[2 * mi], lsum[2 * mi + 1]
            l_lo += cuda.shfl_xor_sync(0xFFFFFFFF, l_lo, 1)
            l_lo += cuda.shfl_xor_sync(0xFFFFFFFF, l_lo, 2)
            l_hi += cuda.shfl_xor_sync(0xFFFFFFFF, l_hi, 1)
            l_hi += cuda.shfl_xor_sync(0xFFFFFFFF, l_hi, 2)
            inv_lo, inv_hi = float32(1.0) / l_lo, float32(1.0) / l_hi
            r_lo = base + wrow0 + 16 * mi + g
            for n in range(ND):
                col = 8 * n + 2 * t4
                f = 4 * (mi * ND + n)
                if out_bits:  # out viewed as uint32: one bfloat16 pair a store
                    out[r_lo, col >> 1] = tc.pack_bf16x2(o[f] * inv_lo, o[f + 1] * inv_lo)
                    out[r_lo + 8, col >> 1] = tc.pack_bf16x2(o[f + 2] * inv_hi,
                                                             o[f + 3] * inv_hi)
                else:
                    out[r_lo, col], out[r_lo, col + 1] = o[f] * inv_lo, o[f + 1] * inv_lo
                    out[r_lo + 8, col] = o[f + 2] * inv_hi
                    out[r_lo + 8, col + 1] = o[f + 3] * inv_hi

    kernel.config = cfg
    kernel.dynamic = DYN
    return kernel


def attention_flops(batch_heads: int, seq: int, head_dim: int, causal: bool = False) -> float:
    """4 seq^2 d per head (two matmuls), half of it with the causal mask."""
    f = 4.0 * batch_heads * seq * seq * head_dim
    return f / 2 if causal else f


def _default_config(d: int) -> MmaAttentionConfig:
    """SIM_CONFIGS[d] in the simulator; on a GPU, GPU_CONFIGS[d] unless the JSON file named
    by CUDACOURSE_TC_CONFIGS has an "attention_d<d>" entry (tools/gpu/tune_tensorcore.py)."""
    from ..runtime.device import is_simulator

    if is_simulator():
        return SIM_CONFIGS[d]
    tuned = json_named_by("CUDACOURSE_TC_CONFIGS").get(f"attention_d{d}")
    return MmaAttentionConfig(*tuned) if tuned else GPU_CONFIGS[d]


def _bits(x: Any, name: str) -> Any:
    if np.dtype(x.dtype) in [np.dtype(t) for t in BITS]:
        return x
    if isinstance(x, np.ndarray) and x.dtype == np.float32:
        return to_bf16_bits(x)
    raise TypeError(f"{name} is {describe(x)}: pass bfloat16 bit patterns (uint16 or int16; "
                    "a bfloat16 torch tensor as t.view(torch.int16)), or float32 host arrays")


def flash_attention_bf16(q: Any, k: Any, v: Any, causal: bool = False, out: Any = None,
                         config: MmaAttentionConfig | None = None) -> Any:
    """softmax(q k^T / sqrt(d)) v per head, on tensor cores (bfloat16 in, float32 softmax
    and accumulation), in one kernel and without the seq x seq scores.

    ``q``, ``k``, ``v``: (batch_heads, seq, d) or (batch, heads, seq, d), d = 64 or 128,
    bfloat16 bit patterns (host or device) or float32 host arrays. ``causal``: query i sees
    keys 0..i. ``out``: float32, or 16-bit for bfloat16 bit patterns. Host inputs (any seq)
    give a host result; device inputs (seq a multiple of the tiles) a device array.
    """
    shape = tuple(q.shape)
    d = shape[-1] if shape else 0
    cfg = config or (_default_config(d) if d in HEAD_DIMS else None)
    key = ("mma_bf16", bool(causal), cfg)
    if out is not None and _PLANS.run(key, q, k, v, out):
        return out
    for x, name in ((q, "q"), (k, "k"), (v, "v")):
        check_array(x, name, dtype=(np.float32, np.uint16, np.int16))
    if len(shape) not in (3, 4) or tuple(k.shape) != shape or tuple(v.shape) != shape:
        raise ValueError(f"q, k, v must have the same shape (batch_heads, seq, d) or (batch, "
                         f"heads, seq, d); got {shape}, {tuple(k.shape)}, {tuple(v.shape)}")
    if cfg is None:
        raise ValueError(f"head_dim (last axis of q) must be one of {HEAD_DIMS}, got {d}")
    cfg.validate(d)
    seq = shape[-2]
    bh = int(np.prod(shape[:-2]))
    out_bits = out is not None and np.dtype(out.dtype) in [np.dtype(t) for t in BITS]
    if out is not None:
        check_array(out, "out", dtype=(np.float32, np.uint16, np.int16))
        if tuple(out.shape) != shape:
            raise ValueError(f"shape mismatch: q {shape}, out {tuple(out.shape)}")
    on_host = not all(is_device_array(x) for x in (q, k, v))
    if not on_host:  # what the arrays hold is the first thing wrong, if it is wrong
        for x, n in ((q, "q"), (k, "k"), (v, "v")):
            _bits(x, n)
    tile = math.lcm(cfg.br, cfg.bc)
    sp = math.ceil(seq / tile) * tile
    if sp != seq and not on_host:
        raise ValueError(f"device inputs need seq to be a multiple of {tile} (the tiles of "
                         f"{cfg}); got {seq}; pass host arrays to have them padded")
    if bh == 0 or seq == 0:
        res = np.zeros(shape, np.uint16 if out_bits else np.float32)
        if isinstance(out, np.ndarray):
            out[...] = res
            return out
        return res if on_host else cuda.to_device(res)
    if on_host:
        qb, kb, vb = (np.asarray(_bits(x if isinstance(x, np.ndarray) else x.copy_to_host(),
                                       n)).reshape(bh, seq, d) for x, n in ((q, "q"), (k, "k"),
                                                                             (v, "v")))
        if sp != seq:
            qb, kb, vb = (np.pad(x, ((0, 0), (0, sp - seq), (0, 0))) for x in (qb, kb, vb))
        dq, dk, dv = (cuda.to_device(np.ascontiguousarray(x).reshape(bh * sp, d))
                      for x in (qb, kb, vb))
    else:
        dq, dk, dv = (to_device(x).reshape(bh * seq, d) for x in (q, k, v))
    dtype = np.uint16 if out_bits else np.float32
    direct = out is not None and is_device_array(out) and not on_host
    dout = to_device(out).reshape(bh * seq, d) if direct else \
        cuda.device_array((bh * sp, d), dtype)
    kout = dout.view(np.uint32) if out_bits else dout  # bfloat16 pairs, one store each
    kern = attention_kernel(d, cfg, out_bits)
    grid = (sp // cfg.br, bh)
    args = (dq, dk, dv, kout, np.int32(sp), np.int32(seq),
            np.float32(LOG2E / math.sqrt(d)), bool(causal))
    nbytes = cfg.shared_bytes(d) if kern.dynamic else 0
    _launch_with_shared(kern, grid, cfg.threads, nbytes, args)
    if direct:
        _PLANS.remember(key, (q, k, v, out), [(kern, grid, cfg.threads, args, (0, 1, 2, 3),
                                               nbytes)])
        return out
    if on_host:
        res = dout.copy_to_host().reshape(bh, sp, d)[:, :seq].reshape(shape)
        if isinstance(out, np.ndarray):
            out[...] = res
            return out
        return res
    return dout.reshape(shape)


_PLANS = DevicePlans()
