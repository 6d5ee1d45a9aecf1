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

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import math
from dataclasses import astuple, dataclass
from typing import Any, Callable

import numpy as np
from numba import cuda, float32

from ..runtime.arrays import check_array, describe, is_device_array, return_like_input, to_device
from ..runtime.launch import DevicePlans, chosen, json_named_by
from .softmax import NEG_BIG, _shuffles_available

LOG2E = 1.4426950408889634
_NEG = np.float32(NEG_BIG)
_NEG_HALF = np.float32(NEG_BIG / 2)  # anything below this is a masked score
_ZERO = np.float32(0.0)


def attention_ref(q: Any, k: Any, v: Any, causal: bool = False, xp: Any = np,
                  scale: float | None = None, softcap: float | None = None,
                  window: int | None = None) -> Any:
    """softmax(q k^T * scale) v per head, scale = 1/sqrt(head_dim); float64 for NumPy input.

    ``softcap``: scores become ``softcap * tanh(score / softcap)`` before the mask (Gemma 2);
    ``window`` (with ``causal``): query i sees keys i - window + 1 .. i only.
    """
    q, k, v = (xp.asarray(a) for a in (q, k, v))
    if xp is np:
        q, k, v = (a.astype(np.float64) for a in (q, k, v))
    d = q.shape[-1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = xp.matmul(q, xp.swapaxes(k, -1, -2)) * scale
    if softcap is not None:
        s = softcap * xp.tanh(s / softcap)
    if causal:  # query i sees keys 0..i only (and, with a window, not before i - window)
        n_q, n_k = s.shape[-2], s.shape[-1]
        mask = xp.arange(n_k)[None, :] > xp.arange(n_q)[:, None]
        if window is not None:
            mask |= xp.arange(n_k)[None, :] <= xp.arange(n_q)[:, None] - window
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
    from ..runtime.device import require_gpu

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


# --- one thread per query row: lesson 5's graded exercise (``flash_rows``) ------------------
#
# The package carries no copy of that answer (issue 19 item 7): lesson 5 runs the learner's
# own kernel; the public function offers the faster "tiled" and "fast" kernels below.


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


@cuda.jit(device=True, inline="always")
def _start_rows(m, l, acc, rows, cols):
    """Each of a thread's ``rows`` query rows starts with no keys seen: running maximum
    -big, running sum 0, output accumulator (rows x cols) 0. Inlined with the kernel's
    constant sizes, so the loops unroll and the arrays stay in registers."""
    for i in range(rows):
        m[i] = _NEG
        l[i] = _ZERO
        for j in range(cols):
            acc[i, j] = _ZERO


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
        _start_rows(m, l, acc, TR, TD)

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


# --- the faster kernel: 16-byte shared loads, larger register tiles, fewer exps --------------
#
# What changes against the "tiled" kernel above, each for a measured reason on the H200:
# - every shared-memory read is 16 bytes (``_load4_shared``: 4 floats per instruction), so a
#   thread issues (tr + tc) / 4 shared loads per 4 multiply-adds of each of its tr x tc
#   scores instead of tr + tc loads per one: the old kernel was bound by shared loads;
# - Q, K and P are stored row by row with a padded row length (4 words for Q and K, so the
#   8 lanes that read 8 different rows hit 8 different groups of banks; ``ncg`` words for P,
#   so its scalar stores are conflict-free too);
# - one flat shared buffer (dynamic shared memory), so tiles above 48 KiB are possible;
# - the running maximum is only raised when a tile's maximum exceeds it by more than
#   ``RESCALE_LOG2`` (factor 2^8): the rescale of the accumulator is skipped on most tiles
#   (p stays <= 2^8, far from float32's range), the deferred rescaling of FlashAttention-4;
# - masks are applied only on the tiles that need them (the diagonal tile, the last tile,
#   the first tile of a sliding window), decided per block, not per score;
# - with causal masking, the query tiles run last-first: the longest blocks start first and
#   the short ones fill the end of the grid (not yet timed separately on the GPU);
# - optional soft-capping ``cap * tanh(s / cap)`` and a causal sliding window, the variant
#   PyTorch's SDPA cannot express.

RESCALE_LOG2 = 8.0  # raise the running maximum only when a tile's exceeds it by 2^8


@dataclass(frozen=True)
class FastConfig:
    """Tile shape of the "fast" kernel: ``bq`` query rows per block, ``bk`` keys per tile;
    each thread owns ``tr`` query rows (rg, rg + nrg, ...) and ``tc`` keys of each tile
    (cg, cg + ncg, ...), and ``d / ncg`` output columns in groups of 4, ncg = bk // tc."""

    bq: int = 64
    bk: int = 32
    tr: int = 4
    tc: int = 4
    prefetch: bool = False  # load the next K, V tile into registers during this one's math
    maxreg: int = 0  # cap on registers per thread (0: the compiler's choice), for occupancy

    def ncg(self) -> int:
        return self.bk // self.tc

    def threads(self) -> int:
        return (self.bq // self.tr) * self.ncg()

    def layout(self, d: int, shuffles: bool = True) -> dict[str, int]:
        """Word offsets of Q, K, V, P (and the reduction scratch) in the shared buffer."""
        ncg = self.ncg()
        qst = kst = d + 4
        pst = self.bk + (ncg - self.bk) % 32
        o = {"qst": qst, "kst": kst, "pst": pst, "q": 0}
        o["k"] = o["q"] + self.bq * qst
        o["v"] = o["k"] + self.bk * kst
        o["p"] = o["v"] + self.bk * d
        o["r"] = o["p"] + self.bq * pst
        o["words"] = o["r"] + (0 if shuffles else self.bq * ncg)
        return o

    def shared_bytes(self, d: int, shuffles: bool = True) -> int:
        return 4 * self.layout(d, shuffles)["words"]

    def validate(self, d: int) -> None:
        ncg = self.ncg() if self.tc else 0
        nt = self.threads() if self.tr and self.tc else 0
        problems = []
        if not (self.tr and self.tc) or self.bq % self.tr or self.bk % self.tc:
            problems.append("bq must be a multiple of tr and bk of tc")
        if ncg not in (4, 8, 16, 32):
            problems.append("bk // tc (lanes sharing a row) must be 4, 8, 16 or 32")
        if d % 4 or (ncg and d % (4 * ncg)):
            problems.append(f"head_dim {d} must be a multiple of 4 * (bk // tc) = {4 * ncg}")
        if self.bk % 4:
            problems.append("bk must be a multiple of 4 (P is read 4 keys at a time)")
        if nt % 32 or nt > 1024:
            problems.append(f"{nt} threads: need a multiple of 32, at most 1024")
        elif (self.bq * d) % nt or (self.bk * d) % nt:
            problems.append(f"{nt} threads must divide the Q and K tiles evenly")
        if not problems and self.shared_bytes(d, False) > MAX_SHARED_BYTES:
            problems.append(f"needs {self.shared_bytes(d, False)} bytes of shared memory > "
                            f"{MAX_SHARED_BYTES}")
        if problems:
            raise ValueError(f"bad FastConfig {self} for head_dim {d}: " + "; ".join(problems))


MAX_SHARED_BYTES = 227 * 1024  # per block on sm_90, once the kernel's limit is raised


def _make_fast_kernel(d: int, cfg: FastConfig, use_shuffles: bool, softcap: bool):
    """The "fast" fused kernel for head_dim ``d``; ``softcap`` compiles the tanh in."""
    from .matmul import _load4_shared

    cfg.validate(d)
    BQ, BK, TR, TC, D = cfg.bq, cfg.bk, cfg.tr, cfg.tc, d
    NCG = BK // TC
    NT = cfg.threads()
    NRG = NT // NCG
    TD = D // NCG           # output columns per thread, in TD // 4 groups of 4
    TG = TD // 4
    D4 = D // 4
    lay = cfg.layout(d, use_shuffles)
    QST, KST, PST = lay["qst"], lay["kst"], lay["pst"]
    OQ, OK, OV, OP, OR = lay["q"], lay["k"], lay["v"], lay["p"], lay["r"]
    QST4, KST4, PST4 = QST // 4, KST // 4, PST // 4
    QLOADS = BQ * D // NT
    KLOADS = BK * D // NT
    FULL = 0xFFFFFFFF
    TH = np.float32(RESCALE_LOG2)
    ONE = np.float32(1.0)
    TWO = np.float32(2.0)
    ALIGN = None if _numba_sim() else 16  # bytes: 16-byte loads need 16-byte alignment
    PREFETCH = cfg.prefetch
    opts = {"max_registers": cfg.maxreg} if cfg.maxreg and not _numba_sim() else {}

    @cuda.jit(device=True, inline="always")
    def load_kv(k, v, rk, rv, bh, k0, t, seq):
        """This thread's share of a K and a V tile, global -> registers; 0 past the end."""
        for it in range(KLOADS):
            e = t + it * NT
            r = e // D
            c = e % D
            rk[it] = _ZERO
            rv[it] = _ZERO
            if k0 + r < seq:
                rk[it] = k[bh, k0 + r, c]
                rv[it] = v[bh, k0 + r, c]

    @cuda.jit(fastmath=True, **opts)
    def kernel(q, k, v, out, qscale, causal, window, cap2, capk):
        """One block per BQ query rows of one head; scores in the log2 domain."""
        sm = cuda.shared.array(0, float32, alignment=ALIGN)
        bh = cuda.blockIdx.y
        qt = cuda.blockIdx.x
        if causal:  # the last query tiles have the most keys: start them first (less tail)
            qt = cuda.gridDim.x - 1 - qt
        q0 = qt * BQ
        t = cuda.threadIdx.x
        lane = t % 32
        cg = lane % NCG                       # lanes of one row group are adjacent
        rg = (t // 32) * (32 // NCG) + lane // NCG
        seq = q.shape[1]

        for it in range(QLOADS):  # Q tile, scaled by scale * log2(e): exp2 gives exp
            e = t + it * NT
            r = e // D
            c = e % D
            val = _ZERO
            if q0 + r < seq:
                val = q[bh, q0 + r, c] * qscale
            sm[OQ + r * QST + c] = val

        acc = cuda.local.array((TR, TD), np.float32)
        sc = cuda.local.array((TR, TC), np.float32)
        qa = cuda.local.array((TR, 4), np.float32)
        kb = cuda.local.array((TC, 4), np.float32)
        vb = cuda.local.array(TD, np.float32)
        m = cuda.local.array(TR, np.float32)
        l = cuda.local.array(TR, np.float32)
        mx = cuda.local.array(TR, np.float32)
        _start_rows(m, l, acc, TR, TD)

        qlast = min(seq, q0 + BQ) - 1          # the block's last row
        kend = seq
        kbeg = 0
        if causal:
            kend = qlast + 1                   # tiles after the last row: never visited
            if window > 0:                     # tiles before the first row's window neither
                kbeg = max(0, q0 - window + 1) // BK * BK
        rk = cuda.local.array(KLOADS, np.float32)
        rv = cuda.local.array(KLOADS, np.float32)
        if PREFETCH:
            load_kv(k, v, rk, rv, bh, kbeg, t, seq)
        for k0 in range(kbeg, kend, BK):
            cuda.syncthreads()  # the previous tile's K, V and P are no longer read
            if not PREFETCH:
                load_kv(k, v, rk, rv, bh, k0, t, seq)
            for it in range(KLOADS):
                e = t + it * NT
                sm[OK + (e // D) * KST + e % D] = rk[it]
                sm[OV + e] = rv[it]  # V rows are unpadded: element e of the tile
            if PREFETCH and k0 + BK < kend:  # the next tile's loads fly during this math
                load_kv(k, v, rk, rv, bh, k0 + BK, t, seq)
            cuda.syncthreads()

            # S = Q K^T: a TR x TC patch, 4 dims per step, one 16-byte load per row and key
            for i in range(TR):
                for j in range(TC):
                    sc[i, j] = _ZERO
            for c4 in range(D4):
                for i in range(TR):
                    qa[i, 0], qa[i, 1], qa[i, 2], qa[i, 3] = _load4_shared(
                        sm, OQ // 4 + (rg + i * NRG) * QST4 + c4)
                for j in range(TC):
                    kb[j, 0], kb[j, 1], kb[j, 2], kb[j, 3] = _load4_shared(
                        sm, OK // 4 + (cg + j * NCG) * KST4 + c4)
                for i in range(TR):
                    for j in range(TC):
                        sc[i, j] += (qa[i, 0] * kb[j, 0] + qa[i, 1] * kb[j, 1]
                                     + qa[i, 2] * kb[j, 2] + qa[i, 3] * kb[j, 3])
            if softcap:  # cap * tanh(s / cap) = cap - 2 cap / (exp(2 s / cap) + 1)
                for i in range(TR):
                    for j in range(TC):
                        sc[i, j] = cap2 - TWO * cap2 / (math.exp2(sc[i, j] * capk) + ONE)

            # masks only where some score of the tile is hidden (decided per block)
            masked = (k0 + BK > seq or (causal and k0 + BK - 1 > q0)
                      or (window > 0 and k0 <= qlast - window))
            if masked:
                for i in range(TR):
                    row = q0 + rg + i * NRG
                    for j in range(TC):
                        col = k0 + cg + j * NCG
                        if col >= seq or (causal and (col > row or (
                                window > 0 and col <= row - window))):
                            sc[i, j] = _NEG
            for i in range(TR):
                best = sc[i, 0]
                for j in range(1, TC):
                    best = max(best, sc[i, j])
                mx[i] = best
            if use_shuffles:  # the NCG lanes of a row agree on its maximum
                for i in range(TR):
                    off = NCG // 2
                    while off > 0:
                        mx[i] = max(mx[i], cuda.shfl_xor_sync(FULL, mx[i], off))
                        off //= 2
            else:
                for i in range(TR):
                    sm[OR + (rg + i * NRG) * NCG + cg] = mx[i]
                cuda.syncthreads()
                for i in range(TR):
                    best = _NEG
                    for j in range(NCG):
                        best = max(best, sm[OR + (rg + i * NRG) * NCG + j])
                    mx[i] = best
                cuda.syncthreads()

            # online softmax; the maximum is raised (and the sums rescaled) only when the
            # tile's maximum passes it by 2^RESCALE_LOG2: most tiles skip the rescale
            for i in range(TR):
                if mx[i] > m[i] + TH:
                    alpha = math.exp2(m[i] - mx[i])
                    m[i] = mx[i]
                    l[i] *= alpha
                    for j in range(TD):
                        acc[i, j] *= alpha
                part = _ZERO
                prow = OP + (rg + i * NRG) * PST + cg
                for j in range(TC):
                    p = math.exp2(sc[i, j] - m[i])
                    if masked and sc[i, j] < _NEG_HALF:
                        p = _ZERO  # a hidden key, also while the row has no maximum yet
                    sm[prow + j * NCG] = p
                    part += p
                l[i] += part
            cuda.syncthreads()  # all of P is written before threads read each other's

            # O += P V: 4 keys per step, one 16-byte load per row of P and group of V
            for k4 in range(BK // 4):
                for i in range(TR):
                    qa[i, 0], qa[i, 1], qa[i, 2], qa[i, 3] = _load4_shared(
                        sm, OP // 4 + (rg + i * NRG) * PST4 + k4)
                for kk in range(4):
                    for g in range(TG):
                        vb[4 * g], vb[4 * g + 1], vb[4 * g + 2], vb[4 * g + 3] = \
                            _load4_shared(sm, OV // 4 + (4 * k4 + kk) * D4 + cg + g * NCG)
                    for i in range(TR):
                        for j in range(TD):
                            acc[i, j] += qa[i, kk] * vb[j]

        for i in range(TR):  # the row's sum is spread over its NCG lanes
            total = l[i]
            if use_shuffles:
                off = NCG // 2
                while off > 0:
                    total += cuda.shfl_xor_sync(FULL, total, off)
                    off //= 2
            else:
                cuda.syncthreads()
                sm[OR + (rg + i * NRG) * NCG + cg] = l[i]
                cuda.syncthreads()
                total = _ZERO
                for j in range(NCG):
                    total += sm[OR + (rg + i * NRG) * NCG + j]
            row = q0 + rg + i * NRG
            if row < seq:
                inv = ONE / total
                for g in range(TG):
                    for qq in range(4):
                        out[bh, row, 4 * (cg + g * NCG) + qq] = acc[i, 4 * g + qq] * inv

    kernel.shared_bytes = cfg.shared_bytes(d, use_shuffles)
    return kernel


_FLASH: dict[tuple, Any] = {}
_FAST: dict[tuple, Any] = {}


def _numba_sim() -> bool:
    from numba.cuda.core import config as _cfg

    return bool(_cfg.ENABLE_CUDASIM)


def flash_kernel(d: int, cfg: FlashConfig | None = None, use_shuffles: bool | None = None):
    """The compiled-on-first-use "tiled" kernel for head_dim ``d`` (cached)."""
    from ..runtime.device import is_simulator

    if cfg is None:
        cfg = SIM_CONFIG if is_simulator() else GPU_CONFIGS[d]
    if use_shuffles is None:
        use_shuffles = _shuffles_available()
    key = (d, cfg, use_shuffles)
    if key not in _FLASH:
        _FLASH[key] = _make_flash_kernel(d, cfg, use_shuffles)
    return _FLASH[key]


# Tile shapes of the "fast" kernel per head_dim, the fastest correct ones of
# tools/probe_attention.py on an NVIDIA H200, 2026-12-01 (docs/sweeps/probe_attention_h200_*.json):
# d = 64: (128, 32, 4, 4) with the K/V prefetch, 23.4 TFLOP/s in the sweep at 16 x 4096 x 64
# (the 64-row tile 21.4, the old "tiled" kernel 11.6); d = 128: (128, 32, 4, 4), 24.2 TFLOP/s
# (the 64-row tile spilled: 255 registers + 544 bytes of local memory, 13.7). The GPU's
# compiler gives them 211 and 254 registers per thread: one 256-thread block per SM (8 warps);
# capping registers at 128 fits two blocks but spills, and was slower in every case.
# d = 16 and 32 were not timed: the smallest tiles the kernel accepts for them.
FAST_GPU_CONFIGS = {16: FastConfig(64, 16, 4, 4), 32: FastConfig(64, 32, 4, 4),
                    64: FastConfig(128, 32, 4, 4, prefetch=True),
                    128: FastConfig(128, 32, 4, 4)}
FAST_SIM_CONFIG = FastConfig(32, 16, 4, 4)
FAST_GPU_CONFIGS[128] = FastConfig(*chosen("attention_d128", astuple(FAST_GPU_CONFIGS[128])))


def _fast_config(d: int, cfg: FastConfig | None) -> FastConfig:
    from ..runtime.device import is_simulator

    if cfg is not None:
        return cfg
    if is_simulator():
        return FAST_SIM_CONFIG
    # Tile shapes from a tuning run: CUDACOURSE_FAST_CONFIGS names a JSON file
    # {"64": [bq, bk, tr, tc], ...} (tools/probe_attention.py writes one), read once
    tuned = json_named_by("CUDACOURSE_FAST_CONFIGS").get(str(d))
    return FastConfig(*tuned) if tuned else FAST_GPU_CONFIGS[d]


def fast_kernel(d: int, cfg: FastConfig | None = None, use_shuffles: bool | None = None,
                softcap: bool = False):
    """The compiled-on-first-use "fast" kernel (cached)."""
    cfg = _fast_config(d, cfg)
    if use_shuffles is None:
        use_shuffles = _shuffles_available()
    key = (d, cfg, use_shuffles, bool(softcap))
    if key not in _FAST:
        _FAST[key] = _make_fast_kernel(d, cfg, use_shuffles, bool(softcap))
    return _FAST[key]


_RAISED: set = set()


def _launch_with_shared(kern: Any, grid: tuple, threads: int, nbytes: int, args: tuple) -> None:
    """Launch ``kern`` with ``nbytes`` of dynamic shared memory, above 48 KiB too.

    A block may use up to 227 KiB on sm_90, but only once the compiled function's limit is
    raised (cuFuncSetAttribute in CUDA C); Numba has no option for it, so a pre-launch
    callback sets it on the driver handle of the kernel Numba picked, once per kernel.
    """
    launch = kern[grid, threads, 0, nbytes]
    if nbytes > 48 * 1024 and not _numba_sim():
        launch.pre_launch_callbacks.append(
            lambda kernel, _config: _allow_shared(kernel, nbytes))
    launch(*args)


def _allow_shared(kernel: Any, nbytes: int) -> None:
    key = (id(kernel), nbytes)
    if key in _RAISED:
        return
    from cuda.bindings import driver as cu

    handle = kernel._codelibrary.get_cufunc().handle
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if isinstance(handle, cu.CUkernel):  # cuda.core loads kernels from a library
        err, = cu.cuKernelSetAttribute(attr, nbytes, handle,
                                       cu.CUdevice(cuda.get_current_device().id))
    else:
        err, = cu.cuFuncSetAttribute(handle, attr, nbytes)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cannot allow {nbytes} bytes of dynamic shared memory: {err}")
    _RAISED.add(key)


VARIANTS = ("fast", "tiled")
BEST_VARIANT = "fast"


def flash_attention(q: Any, k: Any, v: Any, causal: bool = False, out: Any = None,
                    variant: str = "best", config: Any = None,
                    use_shuffles: bool | None = None, softcap: float | None = None,
                    window: int | None = None) -> Any:
    """Fused attention in one kernel launch, float32, without materialising the scores.

    ``variant``: ``"fast"`` (16-byte shared loads, larger register tiles, deferred
    rescaling), ``"tiled"`` (the first FlashAttention-style kernel of the lesson; one thread
    per query row is the lesson's exercise, not part of the package); ``"best"`` is
    ``BEST_VARIANT``. ``softcap`` (fast only) replaces each score s by
    ``softcap * tanh(s / softcap)``, as Gemma 2 does; ``window`` (fast only, with
    ``causal``) lets query i see keys i - window + 1 .. i only. Host input gives a host
    result; device input gives a device array (CuPy in, CuPy out).
    """
    plan_key = (variant, causal, config, use_shuffles, softcap, window)
    if out is not None and _PLANS.run(plan_key, q, k, v, out):  # device arrays seen before
        return out
    bh, seq, d, shape = _check_qkv(q, k, v)
    if variant == "best":
        variant = BEST_VARIANT
    if variant not in VARIANTS:
        raise ValueError(f"variant must be 'best' or one of {VARIANTS}, got {variant!r}")
    if variant in ("tiled", "fast") and d not in SUPPORTED_HEAD_DIMS and config is None:
        raise ValueError(f"head_dim (last axis of q) must be one of {SUPPORTED_HEAD_DIMS}, "
                         f"got {d}")
    want = {"fast": FastConfig, "tiled": FlashConfig}.get(variant)
    if config is not None and (want is None or not isinstance(config, want)):
        raise ValueError(f"variant {variant!r} takes "
                         f"{want.__name__ + ' or None' if want else 'no config'} as config, "
                         f"got {config!r}")
    if (softcap is not None or window is not None) and variant != "fast":
        raise ValueError(f"softcap and window need variant='fast', got {variant!r}")
    if softcap is not None and not (math.isfinite(softcap) and softcap > 0):
        raise ValueError(f"softcap must be a positive number, got {softcap!r}")
    if window is not None:
        if not causal:
            raise ValueError("window needs causal=True (a causal sliding window)")
        if int(window) != window or window < 1:
            raise ValueError(f"window must be a positive integer, got {window!r}")
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
        nbytes = 0
        if variant == "tiled":
            from ..runtime.device import is_simulator

            cfg = config or (SIM_CONFIG if is_simulator() else GPU_CONFIGS[d])
            kern, grid, threads = flash_kernel(d, cfg, use_shuffles), \
                ((seq + cfg.bq - 1) // cfg.bq, bh), cfg.threads()
            args = (dq, dk, dv, dout, np.float32(scale * LOG2E), bool(causal))
            kern[grid, threads](*args)
        else:
            cfg = _fast_config(d, config)
            kern = fast_kernel(d, cfg, use_shuffles, softcap is not None)
            cap2 = float(softcap) * LOG2E if softcap is not None else 1.0
            args = (dq, dk, dv, dout, np.float32(scale * LOG2E), bool(causal),
                    np.int32(window or 0), np.float32(cap2), np.float32(2.0 * LOG2E / cap2))
            grid, threads, nbytes = ((seq + cfg.bq - 1) // cfg.bq, bh), cfg.threads(), \
                kern.shared_bytes
            _launch_with_shared(kern, grid, threads, nbytes, args)
        if not on_host and out is not None and is_device_array(out):
            # the scalars (scale, causal, window, cap) follow from plan_key and the shapes
            _PLANS.remember(plan_key, (q, k, v, out),
                            [(kern, grid, threads, args, (0, 1, 2, 3), nbytes)])
    if on_host:
        return return_like_input(dout, out, on_host, shape)
    if out is not None:
        return out
    if _is_cupy(q):
        import cupy as cp

        return cp.asarray(dout).reshape(shape)
    return dout.reshape(shape) if len(shape) == 4 else dout


_PLANS = DevicePlans()  # launches worked out for device arrays, reused while they look alike


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
    from ..runtime.device import cupy_usable, require_gpu

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
