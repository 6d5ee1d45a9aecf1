"""Checkers for lesson 7's exercises: tensor cores through ``mma.sync``, ``ldmatrix`` and
``cp.async`` (``cudacourse.runtime.tensorcore``; the fragment tables are ``cudacourse.runtime.fragments``).

``check_mma_tile(kernel)``: ``kernel(a, b, c, d)`` is one warp computing
``d = a @ b + c`` for a 16 x 16 ``a``, 16 x 8 ``b`` and ``c`` (float32 arrays, rounded to
bfloat16 by ``tc.pack_bf16x2`` on the way into the registers) with one ``mma_bf16``,
launched ``[1, 32]``.

``check_mma_matmul(kernel)``: ``kernel(a, b, c)`` multiplies bfloat16 bit patterns
(``uint16``, ``a`` m x k, ``b`` k x n) into float32 ``c``; a block of 64 threads (two warps)
computes a 16 x 16 tile of ``c`` from shared-memory tiles (``cp.async``, ``ldmatrix``,
``mma``), grid ``(n // 16, m // 16)``.

``check_mma_attention(kernel)``: ``kernel(q, k, v, o, scale)`` is the fused attention
loop of one warp over 16 query rows (head dimension 16, keys in tiles of 16): ``Q K^T``
and ``P V`` by ``mma_bf16``, the online softmax in float32; grid ``seq // 16``, 32 threads.

Each names the typical mistakes by comparing the learner's result with what each plausible
wrong layout or loop gives (the fragment tables make these references cheap): a transposed
lane mapping, a fragment from the wrong k half, ``ldmatrix`` without ``.trans`` for B, a k
loop that skips the last tile, a bfloat16 accumulator, a missing barrier between
``cp.async``'s wait and the reads, an accumulator not rescaled by the online softmax.
"""

from __future__ import annotations

# Causes raised only after a case's values matched (the technique, not the numbers, was
# wrong): partial credit keeps the value thirds for them (cudacourse.grader.partial).
TECHNIQUE = {"check_mma_matmul": ("missing_barrier", "wrong_technique"),
             "check_mma_tile": ("wrong_technique",),
             "check_mma_attention": ("wrong_technique",)}

import ast
import inspect
import math
import textwrap
from typing import Any

from numba import cuda as _cuda  # safe: importing cudacourse.check ran the device choice

from . import _variants
from . import kit as K
from .kit import resolve
from ..runtime import fragments as _fr
from ..i18n import T

# trusted NumPy, bound at import (before any learner cell could rebind it)
_np = K.np
_exp = _np.exp
_zeros = _np.zeros
_empty_like = _np.empty_like
_maximum = _np.maximum
_isnan = _np.isnan
_isfinite = _np.isfinite
_argwhere = _np.argwhere
_errstate = _np.errstate
_f64 = _np.float64
_f32 = _np.float32
_u16 = _np.uint16
_round_bf16 = _fr.round_bf16
_to_bits = _fr.to_bf16_bits
_C_OWNER = _fr.owner(_fr.c_layout(), 16, 8)
_LA, _LB, _LC = _fr.a_layout(), _fr.b_layout(), _fr.c_layout()  # [lane, register(, half)]  # [row, col] -> (lane, register) of C and D

_TOL = 1e-4  # relative to the largest |reference|: float32 sums in any order


def _close(got: Any, want: Any, tol: float = _TOL) -> bool:
    scale = max(float(abs(want).max()), 1e-30)
    with _errstate(invalid="ignore"):
        return bool(_isfinite(got).all()) and float(abs(got - want).max()) <= tol * scale


def _first_wrong(got: Any, want: Any, tol: float) -> tuple[int, int]:
    scale = max(float(abs(want).max()), 1e-30)
    with _errstate(invalid="ignore"):
        bad = _argwhere(~(abs(got - want) <= tol * scale))
    r, c = bad[0]
    return int(r), int(c)


def _named(got: Any, want: Any, mistakes: dict, tol: float) -> tuple | None:
    """The first mistake whose result ``got`` matches (and the right answer does not)."""
    for key, (result, cause, message) in mistakes.items():
        if not _close(result, want, tol) and _close(got, result, tol):
            return key, cause, message
    return None


def _source(kernel: Any) -> str:
    """The kernel's source text, '' when Python cannot find it."""
    try:
        return textwrap.dedent(inspect.getsource(getattr(kernel, "py_func", kernel)))
    except (OSError, TypeError):
        return ""


def _calls_in_order(source: str) -> list[str]:
    """The names of the functions the source calls (``tc.ldmatrix_x4`` -> ``ldmatrix_x4``),
    in the order they appear."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            calls.append((node.lineno, node.col_offset, name))
    return [name for _, _, name in sorted(calls)]


def _wait_without_barrier(source: str) -> bool:
    """Whether a ``cp_async_wait`` is followed by a shared read (``ldmatrix``) before any
    ``cuda.syncthreads()``: the wait covers only the calling thread's own copies."""
    pending = False
    for name in _calls_in_order(source):
        if name.startswith("cp_async_wait"):
            pending = True
        elif name == "syncthreads":
            pending = False
        elif name.startswith("ldmatrix") and pending:
            return True
    return False


def _uses(source: str, *prefixes: str) -> bool:
    return any(n.startswith(p) for n in _calls_in_order(source) for p in prefixes)


# --- exercise 1: one 16 x 8 tile on one warp --------------------------------------------------

def _k8_missing_a(a: Any) -> Any:
    out = a.copy()
    out[:, 8:16] = a[:, 0:8]
    return out


def _k8_missing_b(b: Any) -> Any:
    out = b.copy()
    out[8:16, :] = b[0:8, :]
    return out


def _tile_mistakes(a: Any, b: Any, c: Any) -> dict:
    """Every named wrong fragment of exercise 1: key -> (D it gives, cause, message)."""
    ref = _fr.mma_reference
    mm = _fr.mma_mistakes(a, b, c)
    layout = "fragment_layout"
    return {
        "a_transposed": (mm["a_transposed"], layout, T(
            "A is loaded transposed: the lane took a[col, row] where a[row, col] belongs. In "
            "A's fragment the row comes from the group g = lane // 4 (g or g + 8) and the "
            "column from t = lane % 4 (2t, 2t + 1, then + 8)")),
        "b_transposed": (mm["b_transposed"], layout, T(
            "B is loaded row-major: the lane took b[g, ...] where B's fragment needs "
            "b[2t + h + 8r, g]. B is the \"col\" operand: the k index (the row of b) comes "
            "from t = lane % 4, the column from g = lane // 4")),
        "a_rows_swapped": (mm["a_rows_swapped"], layout, T(
            "A's registers 0 and 1 (and 2 and 3) are exchanged: register 0 must hold row g, "
            "register 1 row g + 8")),
        "k_halves_swapped": (mm["k_halves_swapped"], layout, T(
            "the two k halves are exchanged: A's registers 0 and 1 must hold columns 0-7, "
            "registers 2 and 3 columns 8-15 (B's register 0 rows 0-7, register 1 rows "
            "8-15)")),
        "a_k8_missing": (ref(_k8_missing_a(a), b, c), layout, T(
            "the k offset 8 is missing in A: registers 2 and 3 repeat columns 0-7 instead "
            "of holding columns 8-15 (add 8 to the column)")),
        "b_k8_missing": (ref(a, _k8_missing_b(b), c), layout, T(
            "the k offset 8 is missing in B: register 1 repeats rows 0-7 of b instead of "
            "holding rows 8-15 (add 8 to the row)")),
        "a_pair_order": (mm["a_pair_order"], layout, T(
            "the two values of each A register are in the wrong order: "
            "pack_bf16x2(lo, hi) takes the lower column first")),
        "c_ignored": (mm["c_ignored"], "wrong_formula", T(
            "C was not added: the accumulator given to mma must be c's fragment "
            "(c[g, 2t], c[g, 2t + 1], c[g + 8, 2t], c[g + 8, 2t + 1]), not zeros")),
        "accumulate_bf16": (mm["accumulate_bf16"], "bf16_accumulator", T(
            "D was rounded to bfloat16: keep the accumulator and the result in float32 (the "
            "tensor core accumulates in float32; only A and B are bfloat16)")),
    }


# exercise 1 as the lesson writes it, for every lane at once (lane, g, t: arrays of 32): a
# one-change variant of it that gives every element of d is the learner's mistake, named by
# its statement (see _variants)
_TILE = _variants.program("""g = lane // 4
t = lane % 4
fa = (pack(a[g, 2 * t], a[g, 2 * t + 1]), pack(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]), \
pack(a[g, 2 * t + 8], a[g, 2 * t + 9]), pack(a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9]))
fb = (pack(b[2 * t, g], b[2 * t + 1, g]), pack(b[2 * t + 8, g], b[2 * t + 9, g]))
acc = (c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
r = mma(fa, fb, acc)
d = store(((g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)), r)
return (d,)
""")


def _pack(lo: Any, hi: Any) -> Any:
    return _fr.pack_pairs(_to_bits(_np.asarray(lo, _f32)), _to_bits(_np.asarray(hi, _f32)))


def _mma_lanes(fa: tuple, fb: tuple, acc: tuple) -> tuple:
    """What mma_bf16 returns to every lane, given every lane's registers."""
    a = _fr.from_bf16_bits(_fr.a_from_fragments(_np.stack(fa, axis=1)))
    b = _fr.from_bf16_bits(_fr.b_from_fragments(_np.stack(fb, axis=1)))
    c = _fr.c_from_fragments(_np.stack(acc, axis=1))
    return tuple(_fr.c_fragments(_fr.mma_reference(a, b, c)).T)


def _store(places: tuple, values: tuple) -> Any:
    d = _np.full((16, 8), _np.nan)
    for (rows, cols), v in zip(places, values):
        d[rows, cols] = v
    return d


def _one_change_tile(got: Any, want: Any, a: Any, b: Any, c: Any, ctx: dict) -> None:
    """Name the one change of the lesson's lane program that gives every element of d."""
    found = _variants.match(_TILE, {"a": a, "b": b, "c": c, "lane": _np.arange(32)}, (got,),
                            {"pack": _pack, "mma": _mma_lanes, "store": _store},
                            rtol=1e-3, atol=1e-3 * float(abs(want).max()))
    if found is None:
        return
    K.fail("wrong_index" if found.in_index else "wrong_formula", T(
        "mma_tile: d holds what the lesson's kernel gives with `{wrong}` in place of "
        "`{right}` (in the statement `{statement}`): every lane computes with that "
        "{what}. Lane l's g = l // 4 picks rows g and g + 8 of a, c and d and column g of b; "
        "t = l % 4 picks columns 2t, 2t + 1 (+ 8) of a and rows 2t, 2t + 1 (+ 8) of b.",
        wrong=found.wrong_part, right=found.right_part,
        statement=found.right.replace("pack(", "tc.pack_bf16x2(").replace("mma(", "tc.mma_bf16("),
        what=T("index") if found.in_index else T("expression")), context=ctx)


def check_mma_tile(kernel: Any, *, hidden: Any = False, seed: int | None = None) -> str:
    """One warp, one ``mma_bf16``: ``d = a @ b + c`` (16 x 16 times 16 x 8, plus 16 x 8).

    Cases: the range of the random inputs (values in [-r, r]); each case draws new
    matrices. Launched ``[1, 32]``: exactly one warp, as ``mma.sync`` needs."""
    K.require_kernel(kernel, "mma_tile", 4)
    cases, seed = resolve(hidden, [4, 1], 7001 if seed is None else seed,
                          name="check_mma_tile")
    gen = K.rng(seed)
    for r in cases:
        a = K.random_array(gen, (16, 16), low=-float(r), high=float(r))
        b = K.random_array(gen, (16, 8), low=-float(r), high=float(r))
        c = K.random_array(gen, (16, 8), low=-float(r), high=float(r))
        d = K.output((16, 8), "d")
        ctx = {"a": "16 x 16", "b": "16 x 8", "values": f"[-{r}, {r}]", "launch": "[1, 32]"}
        K.launch(kernel, 1, 32, K.to_device_guarded(a, "a").view,
                 K.to_device_guarded(b, "b").view, K.to_device_guarded(c, "c").view, d.view,
                 name="mma_tile", context=ctx)
        d.check_guards()
        got = d.result().astype(_f64)
        want = _fr.mma_reference(a, b, c).astype(_f64)
        if _isnan(got).any():
            row, col = (int(x) for x in _argwhere(_isnan(got))[0])
            lane, reg = (int(x) for x in _C_OWNER[row, col])
            K.fail("unwritten", T(
                "mma_tile: d[{row}, {col}] was never written ({count} of 128 elements "
                "unwritten). It is lane {lane}'s D register {reg}: lane l stores its four "
                "results at d[g, 2t], d[g, 2t + 1], d[g + 8, 2t], d[g + 8, 2t + 1] "
                "(g = l // 4, t = l % 4).", row=row, col=col, count=int(_isnan(got).sum()),
                lane=lane, reg=reg), context=ctx)
        if _close(got, want):
            continue
        named = _named(got, want, _tile_mistakes(a, b, c), 1e-3)
        if named:
            _, cause, message = named
            K.fail(cause, T("mma_tile: {mistake}.", mistake=message), context=ctx)
        _one_change_tile(got, want, a, b, c, ctx)
        row, col = _first_wrong(got, want, 1e-3)
        lane, reg = (int(x) for x in _C_OWNER[row, col])
        K.fail("wrong_values", T(
            "mma_tile: d[{row}, {col}] is {got:.6g}, the reference {want:.6g} (lane {lane}'s "
            "D register {reg}); no known fragment mistake gives this result: print each "
            "lane's row and column for a[...], b[...], c[...] and d[...] and compare with "
            "the layout picture.", row=row, col=col, got=float(got[row, col]),
            want=float(want[row, col]), lane=lane, reg=reg), context=ctx)
    src = _source(kernel)
    if src and not _uses(src, "mma_bf16"):
        K.fail("wrong_technique", T(
            "mma_tile: the numbers are right, but not from the tensor core: the exercise "
            "asks for one tc.mma_bf16 on the warp's fragments."))
    return K.passes("mma_tile", T("{n} random 16 x 8 x 16 tiles", n=len(cases)),
                    T("one warp, one mma"), hidden=hidden)


# --- exercise 2: a tiled bfloat16 matmul from shared memory ---------------------------------

def _blocks8_transposed(x: Any, rows: int, cols: int) -> Any:
    """``x`` with every aligned 8 x 8 block transposed (what ``ldmatrix`` gives with or
    without ``.trans`` where the other was needed)."""
    out = _empty_like(x)
    for r0 in range(0, rows, 8):
        for c0 in range(0, cols, 8):
            out[r0:r0 + 8, c0:c0 + 8] = x[r0:r0 + 8, c0:c0 + 8].T
    return out


def _tiled(a: Any, b: Any, *, tiles: int | None = None, round_acc: bool = False) -> Any:
    """float64 ``a @ b`` summed over k tiles of 16 (the first ``tiles`` only), each tile's
    sum rounded to bfloat16 with ``round_acc`` (a bfloat16 accumulator)."""
    m, k = a.shape
    acc = _zeros((m, b.shape[1]), _f64)
    for t in range(k // 16 if tiles is None else tiles):
        acc = acc + a[:, 16 * t:16 * t + 16] @ b[16 * t:16 * t + 16]
        if round_acc:
            acc = _round_bf16(acc.astype(_f32)).astype(_f64)
    return acc


def _matmul_mistakes(a: Any, b: Any) -> dict:
    """Exercise 2's named mistakes: key -> (c it gives, cause, message); a, b bf16 values."""
    m, k = a.shape
    n = b.shape[1]
    a_k8 = a.copy()
    for t in range(0, k, 16):
        a_k8[:, t + 8:t + 16] = a[:, t:t + 8]
    return {
        "last_tile": (_tiled(a, b, tiles=k // 16 - 1), "k_tile_skipped", T(
            "the k loop skips the last tile: c holds the sum over k = 0 .. {k_minus_16} "
            "only. Loop over every tile, range(0, k, 16) (k = {k})", k_minus_16=k - 16, k=k)),
        "first_tile": (_tiled(a, b, tiles=1), "k_tile_skipped", T(
            "only the first k tile was summed: the accumulator must carry over from one tile "
            "to the next (acc = mma(fa, fb, acc))")),
        "b_no_trans": (_tiled(a, _blocks8_transposed(b, k, n)), "fragment_layout", T(
            "B's fragments come out transposed: b's tile is stored k-major (row = k), so "
            "ldmatrix needs .trans (ldmatrix_x2_trans) to give the \"col\" operand")),
        "a_trans": (_tiled(_blocks8_transposed(a, m, k), b), "fragment_layout", T(
            "A's fragments come out transposed: a's tile is row-major, so ldmatrix_x4 without "
            ".trans gives A's fragment")),
        "a_k8": (_tiled(a_k8, b), "fragment_layout", T(
            "A's k offset 8 is missing: lanes 16-31 must give the addresses of columns 8-15 "
            "of the A tile (ldmatrix_x4(sa, lane % 16, 8 * (lane // 16)))")),
        "bf16_acc": (_tiled(a, b, round_acc=True), "bf16_accumulator", T(
            "the accumulator was rounded to bfloat16 after every k tile: keep it in float32 "
            "registers for the whole loop and round only the final result, if at all")),
    }


def _async_failure(exc: Any, name: str) -> None:
    text = str(exc)
    if "AsyncCopyError" in text or "still in flight" in text:
        K.fail("missing_barrier", T(
            "{name}: ldmatrix read a shared tile while another thread's cp.async into it was "
            "still in flight. cp_async_wait waits only for the calling thread's own copies: "
            "call cuda.syncthreads() after the wait, before any thread reads the tile.",
            name=name))


def check_mma_matmul(kernel: Any, *, hidden: Any = False, seed: int | None = None) -> str:
    """``c = a @ b`` from bfloat16 bit patterns on tensor cores, float32 result.

    Cases: ``(m, k, n)``, multiples of 16; grid ``(n // 16, m // 16)`` of 64 threads."""
    K.require_kernel(kernel, "mma_matmul", 3)
    cases, seed = resolve(hidden, [(32, 48, 32), (16, 64, 48)],
                          7002 if seed is None else seed, name="check_mma_matmul")
    gen = K.rng(seed)
    for case in cases:
        m, k, n = (int(x) for x in case)
        if m % 16 or k % 16 or n % 16 or min(m, k, n) <= 0:
            raise ValueError(f"check_mma_matmul: sizes must be multiples of 16, got {case}")
        a = _to_bits(K.random_array(gen, (m, k)))
        b = _to_bits(K.random_array(gen, (k, n)))
        av, bv = _fr.from_bf16_bits(a).astype(_f64), _fr.from_bf16_bits(b).astype(_f64)
        c = K.output((m, n), "c")
        ctx = {"a": f"{m} x {k}", "b": f"{k} x {n}", "grid": f"({n // 16}, {m // 16})",
               "block": 64}
        # plain device arrays: the guard zones' integer sentinels do not fit uint16, and
        # cp.async needs the rows 16-byte aligned, as cuda.to_device gives them
        ga, gb = _cuda.to_device(a), _cuda.to_device(b)
        try:
            K.launch(kernel, (n // 16, m // 16), 64, ga, gb, c.view,
                     name="mma_matmul", context=ctx)
        except K.CheckFailure as exc:
            _async_failure(exc, "mma_matmul")
            raise
        c.check_guards()
        got = c.result().astype(_f64)
        want = _tiled(av, bv)
        if _close(got, want):
            if not (K.array_equal(ga.copy_to_host(), a) and
                    K.array_equal(gb.copy_to_host(), b)):
                K.fail("inputs_changed", T("mma_matmul wrote into a or b: copy the tiles to "
                                           "shared memory, never back."), context=ctx)
            continue
        src = _source(kernel)
        if src and _wait_without_barrier(src):
            row, col = _first_wrong(got, want, 1e-3)
            K.fail("missing_barrier", T(
                "mma_matmul: c[{row}, {col}] is {got:.6g}, not {want:.6g}, and ldmatrix follows "
                "cp_async_wait with no cuda.syncthreads() between them: the wait covers only "
                "the calling thread's own copies, so other threads read the tile before their "
                "bytes arrived. Call cuda.syncthreads() after cp_async_wait, before ldmatrix.",
                row=row, col=col, got=float(got[row, col]), want=float(want[row, col])),
                context=ctx)
        named = _named(got, want, _matmul_mistakes(av, bv), 1e-3)
        if named:
            _, cause, message = named
            K.fail(cause, T("mma_matmul: {mistake}.", mistake=message), context=ctx)
        K.compare(got.astype(_f32), want.astype(_f32), name="c", formula="a @ b",
                  rtol=1e-3, atol=1e-3 * float(abs(want).max()), tile=(16, 16), context=ctx)
    src = _source(kernel)
    if src and not (_uses(src, "mma_bf16") and _uses(src, "ldmatrix")):
        K.fail("wrong_technique", T(
            "mma_matmul: the numbers are right, but the exercise asks for the tiles in shared "
            "memory, read with ldmatrix and multiplied with mma_bf16."))
    if src and _wait_without_barrier(src):
        K.fail("missing_barrier", T(
            "mma_matmul: ldmatrix follows cp_async_wait with no cuda.syncthreads() between "
            "them. The wait covers only the calling thread's own copies; the tile holds other "
            "threads' copies too. This run happened to be scheduled safely; a GPU gives no "
            "such luck."))
    return K.passes("mma_matmul", T("{n} sizes", n=len(cases)),
                    T("k tiles of 16, two warps a block"), hidden=hidden)


# --- exercise 3: the fused attention loop on tensor cores -----------------------------------

def _attention(q: Any, k: Any, v: Any, scale: float, *, tiles: int | None = None,
               rescale: bool = True, scale_scores: bool = True) -> Any:
    """The online softmax of the exercise in float64, with bfloat16 Q, K, V and P as the
    tensor cores see them (``q`` ... already rounded): one 16-key tile at a time."""
    s_len, t_len = q.shape[0], k.shape[0]
    o = _zeros(q.shape, _f64)
    l = _zeros(s_len, _f64)
    m = _np.full(s_len, -math.inf)
    sc = scale if scale_scores else 1.0
    with _errstate(over="ignore", invalid="ignore"):
        for t in range(t_len // 16 if tiles is None else tiles):
            s = (q @ k[16 * t:16 * t + 16].T) * sc
            m_new = _maximum(m, s.max(axis=1))
            alpha = _exp(m - m_new) if rescale else 1.0
            p = _exp(s - m_new[:, None])
            pb = _round_bf16(p.astype(_f32)).astype(_f64)
            l = l * alpha + p.sum(axis=1)
            o = o * (alpha[:, None] if rescale else 1.0) + pb @ v[16 * t:16 * t + 16]
            m = m_new
        return o / l[:, None]


# exercise 3 as the lesson writes it, for every lane of every block at once
_ATT_PRELUDE = _variants.program("""g = lane // 4
t = lane % 4
r0 = block * 16
qa = (tc.pack_bf16x2(q[r0 + g, 2 * t], q[r0 + g, 2 * t + 1]), \
tc.pack_bf16x2(q[r0 + g + 8, 2 * t], q[r0 + g + 8, 2 * t + 1]), \
tc.pack_bf16x2(q[r0 + g, 2 * t + 8], q[r0 + g, 2 * t + 9]), \
tc.pack_bf16x2(q[r0 + g + 8, 2 * t + 8], q[r0 + g + 8, 2 * t + 9]))
z = float32(0.0)
m_lo = float32(-math.inf)
m_hi = float32(-math.inf)
l_lo = float32(0.0)
l_hi = float32(0.0)
o0 = (z, z, z, z)
o1 = (z, z, z, z)
""")
_ATT_BODY = _variants.program("""kb0 = (tc.pack_bf16x2(k[j0 + g, 2 * t], k[j0 + g, 2 * t + 1]), \
tc.pack_bf16x2(k[j0 + g, 2 * t + 8], k[j0 + g, 2 * t + 9]))
kb1 = (tc.pack_bf16x2(k[j0 + 8 + g, 2 * t], k[j0 + 8 + g, 2 * t + 1]), \
tc.pack_bf16x2(k[j0 + 8 + g, 2 * t + 8], k[j0 + 8 + g, 2 * t + 9]))
s0 = tc.mma_bf16(qa, kb0, (z, z, z, z))
s1 = tc.mma_bf16(qa, kb1, (z, z, z, z))
x_lo = max(max(s0[0], s0[1]), max(s1[0], s1[1])) * scale
x_hi = max(max(s0[2], s0[3]), max(s1[2], s1[3])) * scale
x_lo = max(x_lo, cuda.shfl_xor_sync(4294967295, x_lo, 1))
x_lo = max(x_lo, cuda.shfl_xor_sync(4294967295, x_lo, 2))
x_hi = max(x_hi, cuda.shfl_xor_sync(4294967295, x_hi, 1))
x_hi = max(x_hi, cuda.shfl_xor_sync(4294967295, x_hi, 2))
n_lo = max(m_lo, x_lo)
n_hi = max(m_hi, x_hi)
a_lo = math.exp(m_lo - n_lo)
a_hi = math.exp(m_hi - n_hi)
p00 = math.exp(s0[0] * scale - n_lo)
p01 = math.exp(s0[1] * scale - n_lo)
p02 = math.exp(s0[2] * scale - n_hi)
p03 = math.exp(s0[3] * scale - n_hi)
p10 = math.exp(s1[0] * scale - n_lo)
p11 = math.exp(s1[1] * scale - n_lo)
p12 = math.exp(s1[2] * scale - n_hi)
p13 = math.exp(s1[3] * scale - n_hi)
l_lo = l_lo * a_lo + p00 + p01 + p10 + p11
l_hi = l_hi * a_hi + p02 + p03 + p12 + p13
pa = (tc.pack_bf16x2(p00, p01), tc.pack_bf16x2(p02, p03), tc.pack_bf16x2(p10, p11), \
tc.pack_bf16x2(p12, p13))
vb0 = (tc.pack_bf16x2(v[j0 + 2 * t, g], v[j0 + 2 * t + 1, g]), \
tc.pack_bf16x2(v[j0 + 2 * t + 8, g], v[j0 + 2 * t + 9, g]))
vb1 = (tc.pack_bf16x2(v[j0 + 2 * t, g + 8], v[j0 + 2 * t + 1, g + 8]), \
tc.pack_bf16x2(v[j0 + 2 * t + 8, g + 8], v[j0 + 2 * t + 9, g + 8]))
o0 = tc.mma_bf16(pa, vb0, (o0[0] * a_lo, o0[1] * a_lo, o0[2] * a_hi, o0[3] * a_hi))
o1 = tc.mma_bf16(pa, vb1, (o1[0] * a_lo, o1[1] * a_lo, o1[2] * a_hi, o1[3] * a_hi))
m_lo = n_lo
m_hi = n_hi
""")
_ATT_FINAL = _variants.program("""l_lo += cuda.shfl_xor_sync(4294967295, l_lo, 1)
l_lo += cuda.shfl_xor_sync(4294967295, l_lo, 2)
l_hi += cuda.shfl_xor_sync(4294967295, l_hi, 1)
l_hi += cuda.shfl_xor_sync(4294967295, l_hi, 2)
o = put(o, r0 + g, 2 * t, o0[0] / l_lo)
o = put(o, r0 + g, 2 * t + 1, o0[1] / l_lo)
o = put(o, r0 + g + 8, 2 * t, o0[2] / l_hi)
o = put(o, r0 + g + 8, 2 * t + 1, o0[3] / l_hi)
o = put(o, r0 + g, 2 * t + 8, o1[0] / l_lo)
o = put(o, r0 + g, 2 * t + 9, o1[1] / l_lo)
o = put(o, r0 + g + 8, 2 * t + 8, o1[2] / l_hi)
o = put(o, r0 + g + 8, 2 * t + 9, o1[3] / l_hi)
return (o,)
""")


class _Namespace:
    """``tc``, ``cuda`` and ``math`` of the lane model: the operations it calls by those
    names, on arrays of every lane of every warp."""

    def __init__(self, **ops: Any) -> None:
        self.__dict__.update(ops)


def _lane_functions(n: int) -> dict:
    """The model's operations for ``n`` lanes (whole warps of 32, one after another)."""
    lanes = _np.arange(n)
    warps = n // 32

    def full(x: Any) -> Any:
        return _np.broadcast_to(_np.asarray(x, _f32), (n,))

    def mma(fa: tuple, fb: tuple, acc: tuple) -> tuple:
        # every warp's A, B and C gathered from its lanes' registers, as mma.sync does
        ra = _np.stack([_np.broadcast_to(_np.asarray(x), (n,)) for x in fa], 1)
        rb = _np.stack([_np.broadcast_to(_np.asarray(x), (n,)) for x in fb], 1)
        rc = _np.stack([_np.broadcast_to(_np.asarray(x, _f64), (n,)) for x in acc], 1)
        if ra.shape[1] != 4 or rb.shape[1] != 2 or rc.shape[1] != 4 or \
                ra.dtype.kind not in "iu" or rb.dtype.kind not in "iu":
            raise TypeError("not mma_bf16's registers")
        ra, rb = ra.astype(_np.uint32).reshape(warps, 32, 4), rb.astype(_np.uint32).reshape(
            warps, 32, 2)
        a = _zeros((warps, 16, 16), _np.uint16)
        b = _zeros((warps, 16, 8), _np.uint16)
        for h in (0, 1):
            a[:, _LA[..., h, 0], _LA[..., h, 1]] = (ra >> (16 * h)) & 0xFFFF
            b[:, _LB[..., h, 0], _LB[..., h, 1]] = (rb >> (16 * h)) & 0xFFFF
        c = _zeros((warps, 16, 8), _f64)
        c[:, _LC[..., 0], _LC[..., 1]] = rc.reshape(warps, 32, 4)
        d = (_fr.from_bf16_bits(a).astype(_f64) @ _fr.from_bf16_bits(b).astype(_f64) + c)
        return tuple(d.astype(_f32)[:, _LC[..., 0], _LC[..., 1]].reshape(n, 4).T)

    def shfl(mask: Any, x: Any, d: Any) -> Any:
        return _np.asarray(x)[lanes ^ int(d)] if 0 <= int(d) < 32 else x

    def put(o: Any, rows: Any, cols: Any, value: Any) -> Any:
        o = o.copy()
        o[rows, cols] = value
        return o

    return {"tc": _Namespace(pack_bf16x2=_pack, mma_bf16=mma),
            "cuda": _Namespace(shfl_xor_sync=shfl),
            "math": _Namespace(exp=_np.exp, inf=math.inf),
            "float32": _f32, "max": _maximum, "put": put}


def _as_written(statement: str) -> str:
    """A model statement as the lesson's kernel writes it: the model's store ``o = put(o,
    R, C, V)`` is ``o[R, C] = V``; the full mask in hexadecimal."""
    tree = ast.parse(statement)
    stmt = tree.body[0]
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and \
            isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "put":
        arr, row, col, value = stmt.value.args
        stmt = ast.Assign([ast.Subscript(arr, ast.Tuple([row, col], ast.Load()), ast.Store())],
                          value)
    return ast.unparse(ast.fix_missing_locations(ast.Module([stmt], []))).replace(
        "4294967295", "0xFFFFFFFF")


def _one_change_attention(got: Any, want: Any, q: Any, k: Any, v: Any, scale: float,
                          ctx: dict) -> None:
    """Name the one change of the lesson's lane program (every lane of every block, the
    loop over key tiles) that gives every element of o."""
    n = 32 * (q.shape[0] // 16)
    inputs = {"q": q, "k": k, "v": v, "scale": _f32(scale), "lane": _np.arange(n) % 32,
              "block": _np.arange(n) // 32, "o": _np.full(q.shape, _np.nan)}
    steps = [{"j0": j0} for j0 in range(0, k.shape[0], 16)]
    found = _variants.match_staged(_ATT_PRELUDE, _ATT_BODY, _ATT_FINAL, inputs, steps, (got,),
                                   _lane_functions(n), rtol=5e-3,
                                   atol=5e-3 * float(abs(want).max()))
    changes = _variants.described(found, _as_written)
    if changes is None:
        return
    index = all(f.in_index for f in found)
    K.fail("wrong_index" if index else "wrong_formula", T(
        "mma_attention: o holds what the lesson's kernel gives with {changes}: every lane "
        "computes with that {what}. Lane l's g = l // 4 and t = l % 4 pick rows r0 + g and "
        "r0 + g + 8 of q and o, columns 2t, 2t + 1 (+ 8); keys j0 + g (+ 8) of k and j0 + 2t, "
        "2t + 1 (+ 8) of v.", changes=changes,
        what=T("index") if index else T("expression")), context=ctx)


def check_mma_attention(kernel: Any, *, hidden: Any = False, seed: int | None = None) -> str:
    """``o = softmax(q k^T * scale) v`` by one warp per 16 query rows on tensor cores.

    Cases: ``(seq, keys)``, multiples of 16 (head dimension 16); the last visible case has
    scores far beyond exp's range, where only a running maximum keeps exp finite."""
    K.require_kernel(kernel, "mma_attention", 5)
    cases, seed = resolve(hidden, [(32, 48), (16, 32)], 7003 if seed is None else seed,
                          name="check_mma_attention")
    gen = K.rng(seed)
    runs = [(s, t, 1.0) for s, t in cases] + [(16, 32, 60.0)]  # + the overflow case
    for s_len, t_len, spread in runs:
        s_len, t_len = int(s_len), int(t_len)
        if s_len % 16 or t_len % 16 or min(s_len, t_len) <= 0:
            raise ValueError(f"check_mma_attention: sizes must be multiples of 16, got "
                             f"{(s_len, t_len)}")
        q = K.random_array(gen, (s_len, 16), low=-2.0 * spread, high=2.0 * spread)
        k = K.random_array(gen, (t_len, 16), low=-2.0, high=2.0)
        v = K.random_array(gen, (t_len, 16))
        scale = 0.25  # 1 / sqrt(16)
        o = K.output((s_len, 16), "o")
        ctx = {"q": f"{s_len} x 16", "k, v": f"{t_len} x 16", "grid": s_len // 16,
               "block": 32, "scale": scale}
        if spread > 1:
            ctx["scores"] = "up to about 250"
        K.launch(kernel, s_len // 16, 32, K.to_device_guarded(q, "q").view,
                 K.to_device_guarded(k, "k").view, K.to_device_guarded(v, "v").view, o.view,
                 _f32(scale), name="mma_attention", context=ctx)
        o.check_guards()
        got = o.result().astype(_f64)
        qb, kb, vb = (_round_bf16(x).astype(_f64) for x in (q, k, v))
        want = _attention(qb, kb, vb, scale)
        if _close(got, want, 1e-2):
            continue
        if not _isfinite(got).all() and not _isnan(got).all() and spread > 1:
            K.fail("overflow", T(
                "mma_attention: inf or NaN with large scores: exp(s) overflows float32 above "
                "88. Subtract the row's running maximum before exp, exp(s * scale - m_new), "
                "and rescale the accumulators by exp(m - m_new)."), context=ctx)
        mistakes = {
            "last_tile": (_attention(qb, kb, vb, scale, tiles=t_len // 16 - 1),
                          "k_tile_skipped", T(
                              "the loop over key tiles skips the last one (keys {first} to "
                              "{last}): loop over range(0, keys, 16)",
                              first=t_len - 16, last=t_len - 1)),
            "no_rescale": (_attention(qb, kb, vb, scale, rescale=False), "no_rescale", T(
                "the accumulators are not rescaled when a row's maximum grows: multiply the O "
                "fragments and the running sums by exp(m - m_new) before adding the new "
                "tile")),
            "no_scale": (_attention(qb, kb, vb, scale, scale_scores=False), "wrong_formula", T(
                "the scores are not multiplied by scale (1 / sqrt(d))")),
        }
        named = _named(got, want, mistakes, 1e-2)
        if named:
            _, cause, message = named
            K.fail(cause, T("mma_attention: {mistake}.", mistake=message), context=ctx)
        _one_change_attention(got, want, q, k, v, scale, ctx)
        K.compare(got.astype(_f32), want.astype(_f32), name="o",
                  formula="softmax(q k^T * scale) v", rtol=1e-2,
                  atol=1e-2 * float(abs(want).max()), tile=(16, 16), context=ctx)
    src = _source(kernel)
    if src and not _uses(src, "mma_bf16"):
        K.fail("wrong_technique", T(
            "mma_attention: the numbers are right, but the exercise asks for Q K^T and P V "
            "on the tensor cores (tc.mma_bf16)."))
    return K.passes("mma_attention", T("{n} sizes", n=len(cases)),
                    T("scores up to about 250 (a running maximum needed)"), hidden=hidden)
