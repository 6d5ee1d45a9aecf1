"""Which lane holds which element: the warp-level ``mma`` and ``ldmatrix`` layouts, in NumPy.

A tensor core instruction is issued by a whole warp. Its operands are not arrays but
*fragments*: each of the 32 lanes holds a few registers, and the PTX ISA fixes which matrix
element sits in which register of which lane ("Matrix Fragments for mma.m16n8k16 with
floating point type", "... for mma.m16n8k8" with ``.tf32``, and the ``ldmatrix`` section).
This module writes those tables down once, for the lesson's pictures, the simulator's
emulation (``cudacourse.runtime.tensorcore``) and the checkers.

Lane ``l`` is split as ``g = l // 4`` (the *group*, PTX ``groupID``) and ``t = l % 4``
(``threadID_in_group``). For ``mma.m16n8k16`` (bf16 or f16 in, f32 out):

* A, 16 x 16, row-major, 4 registers of 2 halves (bf16 pairs packed in one 32-bit register,
  the lower column in the low 16 bits): register ``r``, half ``h`` holds
  ``A[g + 8 * (r % 2), 2 * t + h + 8 * (r // 2)]``;
* B, 16 x 8 (K x N), 2 registers of 2 halves: register ``r``, half ``h`` holds
  ``B[2 * t + h + 8 * r, g]``;
* C and D, 16 x 8 float32, 4 registers: register ``i`` holds
  ``C[g + 8 * (i // 2), 2 * t + i % 2]``.

For ``mma.m16n8k8`` with ``.tf32`` (one 32-bit value per register):

* A, 16 x 8: register ``r`` holds ``A[g + 8 * (r % 2), t + 4 * (r // 2)]``;
* B, 8 x 8: register ``r`` holds ``B[t + 4 * r, g]``;
* C and D as above.

``ldmatrix.m8n8.x{1,2,4}`` loads 1, 2 or 4 matrices of 8 x 8 16-bit elements: lanes
``8 m .. 8 m + 7`` give the addresses of the rows of matrix ``m``, and every lane gets, in
its register ``m``, the pair ``M_m[g, 2 t], M_m[g, 2 t + 1]`` (``.trans``:
``M_m[2 t, g], M_m[2 t + 1, g]``) -- exactly an A or B fragment's register.

bfloat16 has no NumPy or Numba type here: values travel as their 16-bit patterns
(``uint16``), and pairs packed in ``uint32`` (:func:`to_bf16_bits`, :func:`pack_pairs`).
"""

from __future__ import annotations

import numpy as np

WARP = 32
SHAPES = {"m16n8k16": (16, 8, 16), "m16n8k8": (16, 8, 8)}


# --- bfloat16, float16 and TF32 as bit patterns ------------------------------------------------

def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (``uint16``), rounded to nearest, ties to even, as
    PTX ``cvt.rn.bf16.f32`` does; NaN stays NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    out = np.where(nan, (u >> 16) | 0x40, rounded).astype(np.uint16)
    return out.reshape(np.shape(x))


def from_bf16_bits(b: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (``uint16``) -> float32 (exact: bf16 is float32's top half)."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bf16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to the nearest bfloat16, as float32."""
    return from_bf16_bits(to_bf16_bits(x))


def to_f16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> IEEE half bit patterns (``uint16``), round to nearest even."""
    return np.asarray(x, dtype=np.float32).astype(np.float16).view(np.uint16)


def from_f16_bits(b: np.ndarray) -> np.ndarray:
    return np.asarray(b, dtype=np.uint16).view(np.float16).astype(np.float32)


def round_tf32(x: np.ndarray) -> np.ndarray:
    """What a tensor core reads of a float32 given to ``mma ... .tf32``: the top 19 bits
    (sign, 8 exponent bits, 10 mantissa bits); the 13 low bits are ignored (truncation).
    ``cvt.rna.tf32.f32`` would round instead; the course's kernels pass raw float32."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return (u & np.uint32(0xFFFFE000)).view(np.float32).reshape(np.shape(x))


def to_tf32(x: np.ndarray) -> np.ndarray:
    """float32 rounded to TF32 as PTX ``cvt.rna.tf32.f32`` does: to nearest, ties away from
    zero, at 10 mantissa bits (the result is a float32 whose 13 low bits are zero)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x1000) & 0xFFFFE000).astype(np.uint32)
    nan_or_inf = (u & 0x7F800000) == 0x7F800000
    r = np.where(nan_or_inf, u.astype(np.uint32), r).astype(np.uint32)
    return r.view(np.float32).reshape(np.shape(x))


def pack_pairs(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Two 16-bit patterns -> one ``uint32`` register (``lo`` in bits 0-15)."""
    return (np.asarray(lo, np.uint16).astype(np.uint32)
            | (np.asarray(hi, np.uint16).astype(np.uint32) << 16))


def unpack_pairs(r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One ``uint32`` register -> its (low, high) 16-bit patterns."""
    r = np.asarray(r, dtype=np.uint32)
    return (r & 0xFFFF).astype(np.uint16), (r >> 16).astype(np.uint16)


# --- the layouts --------------------------------------------------------------------------------

def _lanes() -> tuple[np.ndarray, np.ndarray]:
    lane = np.arange(WARP)
    return lane // 4, lane % 4


def a_layout(shape: str = "m16n8k16") -> np.ndarray:
    """(row, col) of A held by each lane's registers.

    ``m16n8k16``: shape (32, 4, 2, 2) -- [lane, register, half] -> (row, col);
    ``m16n8k8`` (tf32): shape (32, 4, 2) -- [lane, register] -> (row, col)."""
    g, t = _lanes()
    if shape == "m16n8k16":
        r = np.arange(4)[None, :, None]
        h = np.arange(2)[None, None, :]
        row = g[:, None, None] + 8 * (r % 2) + 0 * h
        col = 2 * t[:, None, None] + h + 8 * (r // 2)
        return np.stack([row, col], axis=-1)
    _check_shape(shape)
    r = np.arange(4)[None, :]
    return np.stack([g[:, None] + 8 * (r % 2), t[:, None] + 4 * (r // 2)], axis=-1)


def b_layout(shape: str = "m16n8k16") -> np.ndarray:
    """(row k, col n) of B held by each lane: (32, 2, 2, 2) for ``m16n8k16`` ([lane, register,
    half]), (32, 2, 2) for ``m16n8k8``."""
    g, t = _lanes()
    if shape == "m16n8k16":
        r = np.arange(2)[None, :, None]
        h = np.arange(2)[None, None, :]
        row = 2 * t[:, None, None] + h + 8 * r
        col = g[:, None, None] + 0 * row
        return np.stack([row, col], axis=-1)
    _check_shape(shape)
    r = np.arange(2)[None, :]
    row = t[:, None] + 4 * r
    return np.stack([row, g[:, None] + 0 * row], axis=-1)


def c_layout() -> np.ndarray:
    """(row, col) of the 16 x 8 float32 C (and D) held by each lane: shape (32, 4, 2)."""
    g, t = _lanes()
    i = np.arange(4)[None, :]
    return np.stack([g[:, None] + 8 * (i // 2), 2 * t[:, None] + i % 2], axis=-1)


def ldmatrix_layout(trans: bool = False) -> np.ndarray:
    """(row, col) inside an 8 x 8 matrix of the pair a lane gets: shape (32, 2, 2) --
    [lane, half] -> (row, col)."""
    g, t = _lanes()
    h = np.arange(2)[None, :]
    row, col = g[:, None] + 0 * h, 2 * t[:, None] + h
    return np.stack([col, row] if trans else [row, col], axis=-1)


def _check_shape(shape: str) -> None:
    if shape not in SHAPES:
        raise ValueError(f"unknown mma shape {shape!r}: one of {sorted(SHAPES)}")


def owner(layout: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """The inverse table, for pictures: ``owner[row, col] = (lane, register[, half])``."""
    out = np.full((rows, cols, layout.ndim - 1), -1, dtype=np.int64)
    for idx in np.ndindex(layout.shape[:-1]):
        r, c = layout[idx]
        out[r, c] = idx
    return out


# --- from matrices to fragments and back -------------------------------------------------------

def a_fragments(a_bits: np.ndarray) -> np.ndarray:
    """A 16 x 16 matrix of 16-bit patterns -> the A registers of every lane, (32, 4) uint32."""
    lay = a_layout()
    v = np.asarray(a_bits, np.uint16)[lay[..., 0], lay[..., 1]]
    return pack_pairs(v[..., 0], v[..., 1])


def b_fragments(b_bits: np.ndarray) -> np.ndarray:
    """A 16 x 8 (K x N) matrix of 16-bit patterns -> every lane's B registers, (32, 2)."""
    lay = b_layout()
    v = np.asarray(b_bits, np.uint16)[lay[..., 0], lay[..., 1]]
    return pack_pairs(v[..., 0], v[..., 1])


def c_fragments(c: np.ndarray) -> np.ndarray:
    """A 16 x 8 float32 matrix -> every lane's C registers, (32, 4) float32."""
    lay = c_layout()
    return np.asarray(c, np.float32)[lay[..., 0], lay[..., 1]]


def c_from_fragments(d: np.ndarray) -> np.ndarray:
    """Every lane's D registers (32, 4) -> the 16 x 8 float32 matrix."""
    lay = c_layout()
    out = np.zeros((16, 8), np.float32)
    out[lay[..., 0], lay[..., 1]] = np.asarray(d, np.float32)
    return out


def a_from_fragments(regs: np.ndarray) -> np.ndarray:
    """Every lane's A registers (32, 4) uint32 -> the 16 x 16 matrix of 16-bit patterns."""
    lay = a_layout()
    lo, hi = unpack_pairs(regs)
    out = np.zeros((16, 16), np.uint16)
    out[lay[..., 0, 0], lay[..., 0, 1]] = lo
    out[lay[..., 1, 0], lay[..., 1, 1]] = hi
    return out


def b_from_fragments(regs: np.ndarray) -> np.ndarray:
    """Every lane's B registers (32, 2) uint32 -> the 16 x 8 matrix of 16-bit patterns."""
    lay = b_layout()
    lo, hi = unpack_pairs(regs)
    out = np.zeros((16, 8), np.uint16)
    out[lay[..., 0, 0], lay[..., 0, 1]] = lo
    out[lay[..., 1, 0], lay[..., 1, 1]] = hi
    return out


def tf32_a_from_fragments(regs: np.ndarray) -> np.ndarray:
    lay = a_layout("m16n8k8")
    out = np.zeros((16, 8), np.float32)
    out[lay[..., 0], lay[..., 1]] = regs
    return out


def tf32_b_from_fragments(regs: np.ndarray) -> np.ndarray:
    lay = b_layout("m16n8k8")
    out = np.zeros((8, 8), np.float32)
    out[lay[..., 0], lay[..., 1]] = regs
    return out


def mma_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray, kind: str = "bf16") -> np.ndarray:
    """D = A @ B + C as a tensor core computes it: inputs rounded to ``kind`` ("bf16",
    "f16" or "tf32"), products and sums in float32 (here float64, then rounded once: the
    hardware's order of additions is not specified, so compare with a tolerance)."""
    rnd = {"bf16": round_bf16, "tf32": round_tf32,
           "f16": lambda x: np.asarray(x, np.float32).astype(np.float16).astype(np.float32)}
    if kind not in rnd:
        raise ValueError(f"kind must be 'bf16', 'f16' or 'tf32', got {kind!r}")
    a, b = rnd[kind](a).astype(np.float64), rnd[kind](b).astype(np.float64)
    return (a @ b + np.asarray(c, np.float64)).astype(np.float32)


# --- the typical mistakes, for checkers and the lesson's pictures ------------------------------

def _permuted_a(a: np.ndarray, regs: list[int]) -> np.ndarray:
    """The A a warp actually multiplies when each lane puts its register ``regs[r]`` where
    register ``r`` belongs."""
    lay = a_layout()
    out = np.empty_like(a)
    for r, src in enumerate(regs):
        for h in range(2):
            out[lay[:, r, h, 0], lay[:, r, h, 1]] = a[lay[:, src, h, 0], lay[:, src, h, 1]]
    return out


def _halves_swapped_a(a: np.ndarray) -> np.ndarray:
    """Each register's two bfloat16 values in the wrong order (high half first)."""
    lay = a_layout()
    out = np.empty_like(a)
    for h in range(2):
        out[lay[:, :, h, 0], lay[:, :, h, 1]] = a[lay[:, :, 1 - h, 0], lay[:, :, 1 - h, 1]]
    return out


def mma_mistakes(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    """What one warp's ``mma_bf16`` (16 x 8 x 16) gives for the usual fragment mistakes, by
    name, each as the 16 x 8 D the warp would store (float32 in, bfloat16 rounding as the
    tensor core does). For a checker: compare a learner's D with these to name the mistake.

    * ``a_transposed``: A[col, row] loaded where A[row, col] belongs;
    * ``a_rows_swapped``: registers 0/1 (and 2/3) exchanged: rows g and g + 8 swapped;
    * ``k_halves_swapped``: A's registers 0/2 (and 1/3) exchanged, columns 0-7 and 8-15,
      or B's registers 0 and 1, k 0-7 and 8-15 (the same D: one operand's k halves do not
      meet the other's);
    * ``a_pair_order``: each register's two values in the wrong halves;
    * ``b_transposed``: B loaded as if it were stored n-major (B^T's layout);
    * ``c_ignored``: the accumulator not passed (zeros instead of C);
    * ``accumulate_bf16``: D rounded to bfloat16 (a bfloat16 accumulator)."""
    a = np.asarray(a, np.float32)
    b = np.asarray(b, np.float32)
    c = np.asarray(c, np.float32)
    ref = mma_reference
    out = {"a_transposed": ref(a.T, b, c),
           "a_rows_swapped": ref(_permuted_a(a, [1, 0, 3, 2]), b, c),
           "k_halves_swapped": ref(_permuted_a(a, [2, 3, 0, 1]), b, c),
           "a_pair_order": ref(_halves_swapped_a(a), b, c),
           "c_ignored": ref(a, b, np.zeros_like(c)),
           "accumulate_bf16": round_bf16(ref(a, b, c))}
    # B^T's layout: lane (g, t) takes B[g, 2t .. 2t+1] etc. -- only square blocks transpose;
    # the 16 x 8 B read through its transpose gives B' with B'[k, n] = B[n + 8 (k // 8), k % 8]
    bt = np.empty_like(b)
    for k in range(16):
        for n in range(8):
            bt[k, n] = b[8 * (k // 8) + n, k % 8]
    out["b_transposed"] = ref(a, bt, c)
    return out


def which_mistake(got: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray,
                  tol: float = 1e-3) -> str | None:
    """The name of the :func:`mma_mistakes` entry that ``got`` matches (and the right answer
    does not), else None. ``tol`` is relative to the largest |D|."""
    got = np.asarray(got, np.float64)
    scale = max(float(np.abs(mma_reference(a, b, c)).max()), 1e-30)
    right = mma_reference(a, b, c)
    if np.abs(got - right).max() <= tol * scale:
        return None
    for name, d in mma_mistakes(a, b, c).items():
        if np.abs(d - right).max() > tol * scale and np.abs(got - d).max() <= tol * scale:
            return name
    return None
