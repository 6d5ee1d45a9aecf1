"""Lesson 5: scaled dot-product attention, unfused (CuPy) and fused (a Numba kernel).

    attention(Q, K, V) = softmax(Q K^T / sqrt(d)) V        per head; Q, K, V: (seq, d)

``attention_ref`` is the float64 NumPy reference. ``attention_unfused`` is the usual library
composition (cuBLAS matmul, a softmax, a second matmul) and writes the whole seq x seq score
matrix to GPU memory. ``flash_attention`` never does: one kernel streams K and V through
shared memory in tiles and keeps, per query row, a running maximum, a running sum and an
output accumulator that is rescaled whenever the maximum grows (the online softmax).

Arrays are shaped (batch_heads, seq, head_dim); a 4-D (batch, heads, seq, head_dim) input is
accepted too and flattened to batch * heads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from numba import cuda

from .arrays import check_array, describe, is_device_array, return_like_input, to_device
from .softmax import NEG_BIG, _shuffles_available

LOG2E = 1.4426950408889634
_NEG = np.float32(NEG_BIG)
_NEG_HALF = np.float32(NEG_BIG / 2)  # anything below this is a masked score
_ZERO = np.float32(0.0)


def attention_ref(q: Any, k: Any, v: Any, causal: bool = False, xp: Any = np,
                  scale: float | None = None) -> Any:
    """softmax(q k^T * scale) v per head, scale = 1/sqrt(head_dim); float64 for NumPy input."""
    q, k, v = (xp.asarray(a) for a in (q, k, v))
    if xp is np:
        q, k, v = (a.astype(np.float64) for a in (q, k, v))
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = xp.matmul(q, xp.swapaxes(k, -1, -2)) * scale
    if causal:  # query i sees keys 0..i only
        n_q, n_k = s.shape[-2], s.shape[-1]
        mask = xp.arange(n_k)[None, :] > xp.arange(n_q)[:, None]
        s = xp.where(mask, -xp.inf, s)
    s = s - s.max(axis=-1, keepdims=True)  # subtract the row maximum: exp never overflows
    p = xp.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    return xp.matmul(p, v)


def attention_flops(batch_heads: int, seq: int, head_dim: int, causal: bool = False) -> float:
    """Multiply-adds of the two matmuls, counted as 2 flops each (4 * BH * S^2 * d)."""
    f = 4.0 * batch_heads * seq * seq * head_dim
    return f / 2 if causal else f


# --- memory model ------------------------------------------------------------------------

def extra_memory_bytes(batch_heads: int, seq: int, head_dim: int, method: str = "fused",
                       itemsize: int = 4) -> int:
    """Device memory an attention call allocates beyond its inputs (a model, not a measure).

    ``unfused``: the seq x seq score matrix per head (softmax works on it in place) plus the
    output. ``fused``: the output only; scores live in registers and shared memory.
    """
    out = batch_heads * seq * head_dim * itemsize
    if method == "fused":
        return out
    if method == "unfused":
        return batch_heads * seq * seq * itemsize + out
    raise ValueError(f"method must be 'fused' or 'unfused', got {method!r}")


def measure_extra_memory(fn: Callable[[], Any]) -> tuple[int, Any]:
    """(bytes of device memory ``fn()`` left allocated or cached, its result). GPU only.

    Counts what the driver reports as no longer free plus what CuPy's memory pool grew by
    (the pool keeps freed blocks, so its growth is the peak of CuPy's temporaries).
    """
    from .device import require_gpu

    require_gpu("measuring device memory")
    try:
        import cupy as cp

        pool = cp.get_default_memory_pool()
        pool.free_all_blocks()
        pool_before = pool.total_bytes()
    except ImportError:
        pool, pool_before = None, 0
    cuda.synchronize()
    free_before = cuda.current_context().get_memory_info().free
    result = fn()
    cuda.synchronize()
    free_after = cuda.current_context().get_memory_info().free
    extra = free_before - free_after
    if pool is not None:  # the pool's growth is already in the driver's figure; show peak
        extra = max(extra, pool.total_bytes() - pool_before)
    return max(0, int(extra)), result


# --- input checks ------------------------------------------------------------------------

SUPPORTED_HEAD_DIMS = (16, 32, 64, 128)


def _check_qkv(q: Any, k: Any, v: Any) -> tuple[int, int, int, tuple]:
    for a, name in ((q, "q"), (k, "k"), (v, "v")):
        check_array(a, name)
        if len(a.shape) not in (3, 4):
            raise ValueError(f"{name} must be 3-D (batch_heads, seq, head_dim) or 4-D "
                             f"(batch, heads, seq, head_dim), got shape {tuple(a.shape)}")
    shapes = {n: tuple(a.shape) for n, a in (("q", q), ("k", k), ("v", v))}
    if len(set(shapes.values())) > 1:
        raise ValueError("shape mismatch: q, k and v must have the same shape, got "
                         + ", ".join(f"{n} {s}" for n, s in shapes.items()))
    shape = shapes["q"]
    seq, d = shape[-2], shape[-1]
    bh = int(np.prod(shape[:-2]))
    return bh, seq, d, shape


def _as_3d(a: Any, bh: int, seq: int, d: int) -> Any:
    dev = to_device(a)
    return dev if len(dev.shape) == 3 else dev.reshape(bh, seq, d)


def _is_cupy(a: Any) -> bool:
    return type(a).__module__.split(".")[0] == "cupy"


# --- the teaching kernel: one thread per query row ------------------------------------------

ROWS_TILE = 16  # keys per shared-memory tile and query rows per block


def _make_rows_kernel(d_max: int, tile: int = ROWS_TILE):
    """The simple fused kernel the exercise is built on (one thread per query row)."""

    @cuda.jit(fastmath=True)
    def kernel(q, k, v, out, scale, causal):
        """One thread per query row; K and V tiles staged in shared memory."""
        bh = cuda.blockIdx.y
        t = cuda.threadIdx.x
        row = cuda.blockIdx.x * tile + t
        seq = q.shape[1]
        d = q.shape[2]
        k_tile = cuda.shared.array((tile, d_max), np.float32)
        v_tile = cuda.shared.array((tile, d_max), np.float32)
        acc = cuda.local.array(d_max, np.float32)
        for c in range(d):
            acc[c] = 0.0
        m = _NEG
        l = _ZERO
        for start in range(0, seq, tile):
            # every thread loads one key row and one value row: the tile is shared by all rows
            j = start + t
            if j < seq:
                for c in range(d):
                    k_tile[t, c] = k[bh, j, c]
                    v_tile[t, c] = v[bh, j, c]
            cuda.syncthreads()  # wait until the whole tile is loaded
            if row < seq:
                for jj in range(tile):
                    j = start + jj
                    if j < seq and (not causal or j <= row):
                        s = _ZERO
                        for c in range(d):
                            s += q[bh, row, c] * k_tile[jj, c]
                        s *= scale
                        m_new = max(m, s)
                        alpha = math.exp(m - m_new)  # rescales what was summed against m
                        p = math.exp(s - m_new)
                        l = l * alpha + p
                        for c in range(d):
                            acc[c] = acc[c] * alpha + p * v_tile[jj, c]
                        m = m_new
            cuda.syncthreads()  # everyone is done with this tile before it is overwritten
        if row < seq:
            for c in range(d):
                out[bh, row, c] = acc[c] / l

    return kernel


# --- the fast kernel: FlashAttention-style, several warps per query tile ---------------------

@dataclass(frozen=True)
class FlashConfig:
    """Tile shape of the fused kernel.

    A block computes ``bq`` query rows of one head with ``(bq // tr) * (bk // tc)`` threads;
    each thread owns ``tr`` query rows and, per key tile of ``bk`` keys, a ``tr x tc`` patch
    of the scores (register blocking, like a good matmul) and a ``tr x (d // (bk // tc))``
    patch of the output accumulator.
    """

    bq: int = 64
    bk: int = 32
    tr: int = 4
    tc: int = 4

    def threads(self) -> int:
        return (self.bq // self.tr) * (self.bk // self.tc)

    def shared_bytes(self, d: int, shuffles: bool = True) -> int:
        ncg = self.bk // self.tc
        prow = self.bk + (ncg - self.bk) % 32
        words = d * (self.bq + 1) + self.bk * (d + 1) + self.bk * d + self.bq * prow
        if not shuffles:
            words += self.bq * ncg
        return 4 * words

    def validate(self, d: int) -> None:
        ncg = self.bk // self.tc
        problems = []
        if self.bq % self.tr or self.bk % self.tc:
            problems.append("bq must be a multiple of tr and bk of tc")
        if ncg not in (1, 2, 4, 8, 16, 32):
            problems.append("bk // tc (threads sharing a row) must be a power of two <= 32")
        if d % ncg:
            problems.append(f"head_dim {d} must be a multiple of bk // tc = {ncg}")
        if (self.threads() % 32) or self.threads() > 1024:
            problems.append(f"{self.threads()} threads: need a multiple of 32, at most 1024")
        if self.shared_bytes(d, False) > 48 * 1024:
            problems.append(f"needs {self.shared_bytes(d, False)} bytes of shared memory > 48 KiB")
        if problems:
            raise ValueError(f"bad FlashConfig {self} for head_dim {d}: " + "; ".join(problems))


# Chosen per head_dim to fit 48 KiB of static shared memory. The kernel is bound by shared-
# memory loads more than by FMAs, so the larger per-thread patches (8 query rows) win on
# paper: (64, 32, 8, 4) issues ~1.3 shared loads per score against ~1.8 for (64, 32, 4, 4).
# ptxas (sm_90) gives 197 / 152 registers and no spills for them. Not yet timed on the GPU:
# tools/probe_attention.py times every candidate and prints the best per head_dim.
GPU_CONFIGS = {16: FlashConfig(64, 64, 4, 8), 32: FlashConfig(64, 64, 4, 8),
               64: FlashConfig(64, 32, 4, 4), 128: FlashConfig(32, 16, 2, 2)}
# The simulator runs every thread in Python: small tiles, 32 threads per block.
SIM_CONFIG = FlashConfig(16, 16, 2, 4)


def _make_flash_kernel(d: int, cfg: FlashConfig, use_shuffles: bool):
    """Compile-time constants (tile sizes, head_dim) make every inner loop fixed-length, so
    the compiler can unroll it and keep the small per-thread arrays in registers."""
    cfg.validate(d)
    BQ, BK, TR, TC, D = cfg.bq, cfg.bk, cfg.tr, cfg.tc, d
    NCG = BK // TC          # threads sharing a query row: consecutive lanes of one warp
    NRG = BQ // TR          # groups of rows
    NT = NRG * NCG          # threads per block
    TD = D // NCG           # output columns per thread
    PROW = BK + (NCG - BK) % 32  # padded row of P: the lanes of a warp hit distinct banks
    RED = 1 if use_shuffles else BQ * NCG
    FULL = 0xFFFFFFFF
    QCOLS = BQ + 1  # shared-array shapes must be plain constants, not expressions
    KCOLS = D + 1

    @cuda.jit(fastmath=True)
    def kernel(q, k, v, out, qscale, causal):
        """FlashAttention-style forward: one block per BQ query rows of one head."""
        bh = cuda.blockIdx.y
        q0 = cuda.blockIdx.x * BQ
        t = cuda.threadIdx.x
        rg = t // NCG  # this thread's query rows: rg, rg + NRG, rg + 2 NRG, ...
        cg = t % NCG   # its key columns and output columns: cg, cg + NCG, ...
        seq = q.shape[1]
        # Q transposed (+1 column of padding: no bank conflicts when it is written)
        sQ = cuda.shared.array((D, QCOLS), np.float32)
        sK = cuda.shared.array((BK, KCOLS), np.float32)  # +1: lanes reading a column differ
        sV = cuda.shared.array((BK, D), np.float32)
        sP = cuda.shared.array((BQ, PROW), np.float32)
        sR = cuda.shared.array(RED, np.float32)  # row maxima, when shuffles are unavailable

        # The Q tile is read once, pre-multiplied by scale * log2(e): exp2 then gives exp.
        for idx in range(t, BQ * D, NT):
            r = idx // D
            c = idx % D
            if q0 + r < seq:
                sQ[c, r] = q[bh, q0 + r, c] * qscale
            else:
                sQ[c, r] = _ZERO

        acc = cuda.local.array((TR, TD), np.float32)  # output rows, rescaled as m grows
        m = cuda.local.array(TR, np.float32)          # running maximum per row
        l = cuda.local.array(TR, np.float32)          # running sum (this thread's columns)
        sc = cuda.local.array((TR, TC), np.float32)   # this thread's patch of scores
        qa = cuda.local.array(TR, np.float32)
        kb = cuda.local.array(TC, np.float32)
        vb = cuda.local.array(TD, np.float32)
        mx = cuda.local.array(TR, np.float32)
        for i in range(TR):
            m[i] = _NEG
            l[i] = _ZERO
            for j in range(TD):
                acc[i, j] = _ZERO

        kend = seq
        if causal:  # keys after the block's last query row are masked for every row
            kend = min(seq, q0 + BQ)
        for k0 in range(0, kend, BK):
            cuda.syncthreads()  # the previous tile's K, V and P are no longer being read
            for idx in range(t, BK * D, NT):
                r = idx // D
                c = idx % D
                if k0 + r < seq:
                    sK[r, c] = k[bh, k0 + r, c]
                    sV[r, c] = v[bh, k0 + r, c]
                else:  # past the end: zeros, masked below, so no garbage enters a sum
                    sK[r, c] = _ZERO
                    sV[r, c] = _ZERO
            cuda.syncthreads()  # wait until the whole tile (and the Q tile) is loaded

            # scores: a TR x TC patch, each Q and K value loaded once, used TC or TR times
            for i in range(TR):
                for j in range(TC):
                    sc[i, j] = _ZERO
            for c in range(D):
                for i in range(TR):
                    qa[i] = sQ[c, rg + i * NRG]
                for j in range(TC):
                    kb[j] = sK[cg + j * NCG, c]
                for i in range(TR):
                    for j in range(TC):
                        sc[i, j] += qa[i] * kb[j]

            # mask (past the end, or a future key) and the tile's row maxima
            for i in range(TR):
                row = q0 + rg + i * NRG
                best = _NEG
                for j in range(TC):
                    col = k0 + cg + j * NCG
                    if col >= seq or (causal and col > row):
                        sc[i, j] = _NEG
                    best = max(best, sc[i, j])
                mx[i] = best
            # the NCG lanes holding one row agree on its maximum
            if use_shuffles:
                for i in range(TR):
                    off = NCG // 2
                    while off > 0:
                        mx[i] = max(mx[i], cuda.shfl_xor_sync(FULL, mx[i], off))
                        off //= 2
            else:
                for i in range(TR):
                    sR[(rg + i * NRG) * NCG + cg] = mx[i]
                cuda.syncthreads()  # every lane's maximum is written before any is read
                for i in range(TR):
                    best = _NEG
                    for j in range(NCG):
                        best = max(best, sR[(rg + i * NRG) * NCG + j])
                    mx[i] = best
                cuda.syncthreads()  # read before the next tile overwrites them

            # online softmax: new maximum, rescale the running sum and the accumulator
            for i in range(TR):
                m_new = max(m[i], mx[i])
                alpha = math.exp2(m[i] - m_new)
                m[i] = m_new
                part = _ZERO
                for j in range(TC):
                    p = _ZERO
                    if sc[i, j] > _NEG_HALF:
                        p = math.exp2(sc[i, j] - m_new)
                    sP[rg + i * NRG, cg + j * NCG] = p
                    part += p
                l[i] = l[i] * alpha + part  # each lane sums its own columns; merged at the end
                for j in range(TD):
                    acc[i, j] *= alpha
            cuda.syncthreads()  # all of P is written before threads read each other's columns

            # acc += P V: a TR x TD patch of the output
            for c in range(BK):
                for i in range(TR):
                    qa[i] = sP[rg + i * NRG, c]
                for j in range(TD):
                    vb[j] = sV[c, cg + j * NCG]
                for i in range(TR):
                    for j in range(TD):
                        acc[i, j] += qa[i] * vb[j]

        # the row's sum is spread over its NCG lanes: add them up, then normalise and store
        for i in range(TR):
            total = l[i]
            if use_shuffles:
                off = NCG // 2
                while off > 0:
                    total += cuda.shfl_xor_sync(FULL, total, off)
                    off //= 2
            else:
                cuda.syncthreads()
                sR[(rg + i * NRG) * NCG + cg] = l[i]
                cuda.syncthreads()  # all partial sums written
                total = _ZERO
                for j in range(NCG):
                    total += sR[(rg + i * NRG) * NCG + j]
            row = q0 + rg + i * NRG
            if row < seq:
                inv = np.float32(1.0) / total
                for j in range(TD):
                    out[bh, row, cg + j * NCG] = acc[i, j] * inv

    return kernel


_FLASH: dict[tuple, Any] = {}
_ROWS: dict[int, Any] = {}


def flash_kernel(d: int, cfg: FlashConfig | None = None, use_shuffles: bool | None = None):
    """The compiled-on-first-use fused kernel for head_dim ``d`` (cached)."""
    from .device import is_simulator

    if cfg is None:
        cfg = SIM_CONFIG if is_simulator() else GPU_CONFIGS[d]
    if use_shuffles is None:
        use_shuffles = _shuffles_available()
    key = (d, cfg, use_shuffles)
    if key not in _FLASH:
        _FLASH[key] = _make_flash_kernel(d, cfg, use_shuffles)
    return _FLASH[key]


def _rows_kernel(d: int):
    d_max = max(16, 1 << (d - 1).bit_length())
    if d_max not in _ROWS:
        _ROWS[d_max] = _make_rows_kernel(d_max)
    return _ROWS[d_max]


VARIANTS = ("tiled", "rows")


def flash_attention(q: Any, k: Any, v: Any, causal: bool = False, out: Any = None,
                    variant: str = "tiled", config: FlashConfig | None = None,
                    use_shuffles: bool | None = None) -> Any:
    """Fused attention in one kernel launch, float32, without materialising the scores.

    ``variant="tiled"`` is the fast FlashAttention-style kernel; ``"rows"`` the simple one
    thread per query row version (what the lesson's exercise builds). Host input gives a host
    result; device input gives a device array (CuPy in, CuPy out).
    """
    bh, seq, d, shape = _check_qkv(q, k, v)
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if variant == "tiled" and d not in SUPPORTED_HEAD_DIMS and config is None:
        raise ValueError(f"head_dim (last axis of q) must be one of {SUPPORTED_HEAD_DIMS}, "
                         f"got {d}")
    if variant == "rows" and not 1 <= d <= 128:
        raise ValueError(f"head_dim (last axis of q) must be 1 to 128, got {d}")
    on_host = not all(is_device_array(a) for a in (q, k, v))
    dq, dk, dv = (_as_3d(a, bh, seq, d) for a in (q, k, v))
    if out is None:
        dout = cuda.device_array((bh, seq, d), dtype=np.float32)
    else:
        check_array(out, "out")
        if tuple(out.shape) != shape:
            raise ValueError(f"shape mismatch: q {shape}, out {tuple(out.shape)}")
        if not is_device_array(out) and not on_host:
            raise TypeError(f"out is {describe(out)}, but q, k, v are on the device: pass a "
                            "device array for out")
        dout = _as_3d(out, bh, seq, d) if is_device_array(out) else \
            cuda.device_array((bh, seq, d), dtype=np.float32)
    if bh and seq:
        scale = 1.0 / math.sqrt(d)
        if variant == "rows":
            grid = ((seq + ROWS_TILE - 1) // ROWS_TILE, bh)
            _rows_kernel(d)[grid, ROWS_TILE](dq, dk, dv, dout, np.float32(scale), bool(causal))
        else:
            from .device import is_simulator

            cfg = config or (SIM_CONFIG if is_simulator() else GPU_CONFIGS[d])
            kern = flash_kernel(d, cfg, use_shuffles)
            grid = ((seq + cfg.bq - 1) // cfg.bq, bh)
            kern[grid, cfg.threads()](dq, dk, dv, dout, np.float32(scale * LOG2E),
                                      bool(causal))
    if on_host:
        return return_like_input(dout, out, on_host, shape)
    if out is not None:
        return out
    if _is_cupy(q):
        import cupy as cp

        return cp.asarray(dout).reshape(shape)
    return dout.reshape(shape) if len(shape) == 4 else dout


# --- the unfused baseline (CuPy: cuBLAS matmuls, separate softmax kernels) -------------------

_CAUSAL_MASK = None


def _causal_mask_kernel():
    global _CAUSAL_MASK
    if _CAUSAL_MASK is None:
        import cupy as cp

        _CAUSAL_MASK = cp.ElementwiseKernel(
            "int64 n", "float32 s",
            "if ((i % n) > ((i / n) % n)) s = __int_as_float((int)0xff800000);", "cudacourse_causal_mask")
    return _CAUSAL_MASK


def attention_unfused(q: Any, k: Any, v: Any, causal: bool = False) -> Any:
    """Attention the library way: S = Q K^T (cuBLAS), softmax over S, then S V. GPU only.

    The score matrix (batch_heads x seq x seq float32) is written to and read back from GPU
    memory several times. CuPy or NumPy input; the result is of the same kind.
    """
    from .device import cupy_usable, require_gpu

    require_gpu("attention_unfused (CuPy)")
    ok, why = cupy_usable()
    if not ok:
        raise RuntimeError(f"attention_unfused needs CuPy on a GPU: {why}")
    import cupy as cp

    bh, seq, d, shape = _check_qkv(q, k, v)
    host = isinstance(q, np.ndarray)
    cq, ck, cv = (cp.asarray(a).reshape(bh, seq, d) for a in (q, k, v))
    s = cp.matmul(cq, ck.transpose(0, 2, 1))      # (bh, seq, seq): the big one
    s *= np.float32(1.0 / math.sqrt(d))
    if causal:
        _causal_mask_kernel()(seq, s)
    s -= s.max(axis=-1, keepdims=True)
    cp.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    o = cp.matmul(s, cv).reshape(shape)
    del s
    return cp.asnumpy(o) if host else o


def relative_error(got: Any, want: Any) -> float:
    """max |got - want| / max |want|: the error measure used for attention outputs."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
