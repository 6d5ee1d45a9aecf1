"""Checkers for lesson 5's exercises: the online-softmax update and the fused attention loop.

``check_online_update(update)``: ``update(m, l, acc, s, v) -> (m_new, l_new, acc_new)`` is a
``@cuda.jit(device=True)`` function folding one more score ``s`` (with value ``v``) into the
running maximum ``m``, running sum ``l`` and un-normalised accumulator ``acc``.

``check_flash_rows(kernel)``: ``kernel(q, k, v, out, scale, causal)`` is the one-thread-per-
query-row fused attention kernel of the lesson (TILE = 16 rows per block and keys per tile),
launched with grid (ceil(seq / 16), batch_heads) and 16 threads per block.
"""

from __future__ import annotations
from ..i18n import T

# Causes each checker here raises only after a case's values matched the reference (the
# technique, not the values, was wrong): partial credit keeps the value thirds for them
# (cudacourse.grader.partial, through cudacourse.course.lessons.technique).
TECHNIQUE: dict[str, tuple[str, ...]] = {}  # every cause here is raised before the comparison

import math
from typing import Any

from numba import cuda  # safe: importing cudacourse.check ran cudacourse's device choice

from . import _variants
from . import kit as K
from . import tiling as _tiling
from .kit import resolve
from ..i18n import T

_np = K.np
_exp = _np.exp
_maximum = _np.maximum
_matmul = _np.matmul
_where = _np.where
_arange = _np.arange
_isfinite = _np.isfinite
_full = _np.full
_zeros = _np.zeros
_errstate = _np.errstate
_minimum = _np.minimum
_f32 = _np.float32
_swapaxes = _np.swapaxes
_sqrt = math.sqrt
_inf = math.inf

ROWS_TILE = 16

_OVERFLOW = (T("exp overflowed (or underflowed to 0) for large scores, giving inf or NaN: "
               "subtract the running maximum before exponentiating, exp(s - m_new), and "
               "rescale with exp(m - m_new); never compute exp(s) or exp(m) on their own."))


def _launch_caught(kernel: Any, grid: Any, block: Any, *args: Any, name: str,
                   extreme: bool = False, obs: Any = None) -> None:
    """E.launch, with float overflow (the simulator computes in Python) named as such.

    ``extreme``: the scores are far beyond exp's range, so a division by zero there means an
    exponential underflowed to 0 (exp(m) / exp(m_new) with very negative scores).
    """
    try:
        if obs is not None:
            K.launch(kernel, grid, block, *args, name=name, obs=obs)
        else:
            K.launch(kernel, grid, block, *args, name=name)
    except K.CheckFailure as exc:
        text = str(exc)
        if "OverflowError" in text or "math range error" in text or (
                extreme and "ZeroDivisionError" in text):
            K.fail("overflow", T("{name}: {overflow}", name=name, overflow=_OVERFLOW))
        raise


# --- exercise 1: the online-softmax update ---------------------------------------------------

def _step_kernel(update: Any) -> Any:
    @cuda.jit
    def step(m, l, acc, s, v, m_out, l_out, acc_out):
        """One update per thread: fold s[i], v[i] into the state (m[i], l[i], acc[i])."""
        i = cuda.grid(1)
        if i < m.shape[0]:
            a, b, c = update(m[i], l[i], acc[i], s[i], v[i])
            m_out[i] = a
            l_out[i] = b
            acc_out[i] = c

    return step


def _stream_kernel(update: Any) -> Any:
    @cuda.jit
    def stream(x, vals, out):
        """One row per thread: fold every score of the row in order, then out = acc / l."""
        r = cuda.grid(1)
        if r < x.shape[0]:
            m = -math.inf
            l = 0.0
            acc = 0.0
            for j in range(x.shape[1]):
                m, l, acc = update(m, l, acc, x[r, j], vals[r, j])
            out[r] = acc / l

    return stream


def _step_cases(gen: Any, n: int) -> dict[str, Any]:
    m = K.random_array(gen, n)
    l = K.random_array(gen, n, low=0.5, high=20.0)
    acc = K.random_array(gen, n)
    s = K.random_array(gen, n)
    v = K.random_array(gen, n)
    m[:4] = -_inf  # a fresh row: nothing seen yet
    l[:4] = 0.0
    acc[:4] = 0.0
    return dict(m=m, l=l, acc=acc, s=s, v=v)


# the reference update as the lesson writes it: a one-change variant of it that gives every
# returned value is the learner's mistake, named by its statement (see _variants)
_UPDATE = _variants.program("""m_new = maximum(m, s)
alpha = exp(m - m_new)
p = exp(s - m_new)
l_new = l * alpha + p
acc_new = acc * alpha + p * v
return (m_new, l_new, acc_new)
""")


def _one_change(got: dict, c: dict, exc: Any) -> None:
    """Name the one change of the reference update that gives all three returned values."""
    inputs = {k: c[k].astype(K.float64) for k in ("m", "l", "acc", "s", "v")}
    found = _variants.match(_UPDATE, inputs, (got["m"], got["l"], got["acc"]),
                            {"maximum": _maximum, "exp": _exp})
    if found is None or found.also:  # two statements give these values: neither is named
        return
    wrong, right = (x.replace("maximum", "max") for x in (found.wrong, found.right))
    K.fail("wrong_formula", T(
        "online_update returns, for all {n} states, what the reference update gives with "
        "`{wrong}` in place of `{right}` (the update: m_new = max(m, s), alpha = exp(m - "
        "m_new), p = exp(s - m_new), return m_new, l * alpha + p, acc * alpha + p * v): "
        "look for that change in your code, a name or an operator.",
        n=int(got["m"].size), wrong=wrong, right=right), context=exc.context)


def check_online_update(update: Any, *, hidden: bool = False, seed: int | None = None) -> str:
    """Check one step of the online softmax: new max, rescaled sum, rescaled accumulator.

    Expected: m' = max(m, s); alpha = exp(m - m'); p = exp(s - m');
    l' = l * alpha + p; acc' = acc * alpha + p * v. The state (-inf, 0, 0) starts a row.
    """
    K.require_device_function(update, "online_update", 5)
    # one case: (n single steps, rows, cols of the whole-row run); hidden: the master's cell
    cases, seed = resolve(hidden, [(203, 5, 40)], seed, name="check_online_update")
    (n, rows, cols), = cases[:1]
    gen = K.rng(seed)
    c = _step_cases(gen, n)
    f32 = K.float32
    dev = {k: K.to_device_guarded(v, k) for k, v in c.items()}
    outs = {k: K.Guarded.make(n, f32, k + "_new") for k in ("m", "l", "acc")}
    tpb = 64
    _launch_caught(_step_kernel(update), (n + tpb - 1) // tpb, tpb,
                   *(dev[k].view for k in ("m", "l", "acc", "s", "v")),
                   *(outs[k].view for k in ("m", "l", "acc")), name="online_update")
    got = {k: o.result() for k, o in outs.items()}
    m, l, acc, s, v = (c[k].astype(K.float64) for k in ("m", "l", "acc", "s", "v"))
    with _errstate(invalid="ignore", over="ignore"):
        m_new = _maximum(m, s)
        alpha = _exp(m - m_new)
        p = _exp(s - m_new)
        l_new = l * alpha + p
        acc_new = acc * alpha + p * v
        ctx = T("{n} random states; the first 4 start a row (m=-inf, l=0, acc=0)", n=n)
        try:
            K.compare(got["m"], m_new, name="m_new", formula="max(m, s)", context=ctx,
                      computed=True, inputs=c,
                      alternatives={"min(m, s)": _minimum(m, s), T("s (the old max is lost)"): s,
                                    T("m (never updated)"): m})
            K.compare(got["l"], l_new, name="l_new", formula="l * exp(m - m_new) + exp(s - m_new)",
                      context=ctx, computed=True, inputs=c, alternatives={
                          T("l + exp(s - m_new): the running sum is not rescaled when the maximum "
                            "grows; multiply it by exp(m - m_new)"): l + p,
                          T("l * exp(m - m_new) + exp(s): the maximum is not subtracted, which "
                            "overflows for large scores"): l * alpha + _exp(s),
                          T("l + exp(s): no maximum at all, which overflows for large scores"):
                              l + _exp(s),
                          T("l * exp(m - m_new) + exp(s - m): the new score is weighted with the "
                            "old maximum m (infinite when a row starts, m = -inf); subtract the "
                            "new one, exp(s - m_new)"): l * alpha + _exp(s - m),
                          # one operator of the update wrong: written as the formula it computes
                          "l * exp(m + m_new) + exp(s - m_new)": l * _exp(m + m_new) + p,
                          "l * exp(m - m_new) + exp(s + m_new)": l * alpha + _exp(s + m_new),
                          "l * exp(m - m_new) - exp(s - m_new)": l * alpha - p,
                          "l + exp(m - m_new) + exp(s - m_new)": l + alpha + p})
            K.compare(got["acc"], acc_new, name="acc_new",
                      formula="acc * exp(m - m_new) + exp(s - m_new) * v", context=ctx,
                      computed=True, inputs=c,
                      alternatives={
                          T("acc + exp(s - m_new) * v: the accumulator is not rescaled when the "
                            "maximum grows; multiply it by exp(m - m_new)"): acc + p * v,
                          T("acc * exp(m - m_new) + v: the new value is not weighted by exp(s - "
                            "m_new)"): acc * alpha + v,
                          T("acc * exp(m - m_new) + exp(s) * v: the maximum is not subtracted"):
                              acc * alpha + _exp(s) * v,
                          T("acc * exp(m - m_new) + exp(s - m) * v: the new value is weighted with "
                            "the old maximum m; use exp(s - m_new)"): acc * alpha + _exp(s - m) * v,
                          T("the normalised average (acc * alpha * l + p * v) / l_new: keep acc "
                            "un-normalised here and divide by l once, at the end"):
                              (acc * alpha * l + p * v) / l_new,
                          "acc * exp(m - m_new) - exp(s - m_new) * v": acc * alpha - p * v,
                          "acc + exp(m - m_new) + exp(s - m_new) * v": acc + alpha + p * v,
                          "acc * exp(m - m_new) + (exp(s - m_new) + v)": acc * alpha + (p + v),
                          "acc * exp(m - m_new) + exp(s - m_new) / v": acc * alpha + p / v})
        except K.CheckFailure as exc:
            if exc.cause in ("wrong_values", "nonfinite"):
                _one_change(got, c, exc)
            raise
    # a whole row at a time, with scores far beyond exp's range: only a stable update survives
    x = K.random_array(gen, (rows, cols), low=-3000.0, high=3000.0)
    vals = K.random_array(gen, (rows, cols))
    out = K.Guarded.make(rows, f32, "out")
    _launch_caught(_stream_kernel(update), 1, 32, K.to_device_guarded(x, "x").view,
                   K.to_device_guarded(vals, "v").view, out.view, name="online_update",
                   extreme=True)
    res = out.result()
    if not _isfinite(res).all():
        K.fail("overflow", T("online_update: {overflow}",
                             overflow=_OVERFLOW), context={"scores": "up to +-3000"})
    xs = x.astype(K.float64)
    w = _exp(xs - xs.max(axis=1, keepdims=True))
    want = (w * vals).sum(axis=1) / w.sum(axis=1)
    K.compare(res, want, name=T("acc / l after a row"), rtol=1e-4, atol=1e-4,
              formula=T("the softmax-weighted average of v"),
              context=T("scores up to +-3000, streamed one at a time"))
    return K.passes("online_update", T("{n} single steps (4 of them starting a row)", n=n),
             T("{rows} rows of {cols} scores up to +-3000 streamed one at a time", rows=rows,
               cols=cols),
             hidden=hidden)


# --- exercise 2: the fused attention kernel's inner loop ------------------------------------

def _scores(q: Any, k: Any, scale: float) -> Any:
    return _matmul(q, _swapaxes(k, -1, -2)) * scale


def _masked(s: Any, causal: bool, shift: int = 0) -> Any:
    if not causal:
        return s
    n = s.shape[-1]
    mask = _arange(n)[None, :] > _arange(n)[:, None] + shift
    return _where(mask, -_inf, s)


def _softmax_av(s: Any, v: Any) -> Any:
    with _errstate(invalid="ignore", divide="ignore"):
        w = _exp(s - s.max(axis=-1, keepdims=True))
        return _matmul(w, v) / w.sum(axis=-1, keepdims=True)


def _emulate(q: Any, k: Any, v: Any, scale: float, causal: bool, bug: str,
             chunk: int) -> Any:
    """The output of an online-softmax loop with a known bug, in float64 NumPy."""
    s = _masked(_scores(q, k, scale), causal)
    bh, n, d = q.shape
    out = _empty_like(q)
    for h in range(bh):
        m = _full(n, -_inf)
        l = _zeros(n)
        acc = _zeros((n, d))
        for j0 in range(0, n, chunk):
            blk = s[h, :, j0:j0 + chunk]
            m_new = _maximum(m, blk.max(axis=1))
            with _errstate(invalid="ignore"):
                alpha = _where(_isfinite(m), _exp(m - m_new), 0.0)
                p = _where(_isfinite(blk), _exp(blk - (0.0 if bug == "max" else m_new[:, None])),
                           0.0)
            if bug == "new_rescaled":  # the new term multiplied by alpha as well
                p = p * alpha[:, None]
            if bug == "l_plus_alpha":  # l + alpha + p: `*` written `+`
                l = l + alpha * p.shape[1] + p.sum(axis=1)
            else:
                l = (l if bug == "l" else l * alpha) + p.sum(axis=1)
            acc = (acc if bug == "acc" else acc * alpha[:, None]) + p @ v[h, j0:j0 + chunk]
            if bug != "m":  # bug "m": the running maximum is never updated
                m = m_new
        out[h] = acc / l[:, None]
    return out


def _empty_like(a: Any) -> Any:
    return K.empty(a.shape, dtype=K.float64)


def _run_rows(kernel: Any, q: Any, k: Any, v: Any, causal: bool, scale: float,
              extreme: bool = False, obs: Any = None) -> Any:
    bh, n, d = q.shape
    out = K.output((bh, n, d), "out")
    ins = [K.to_device_guarded(a, nm) for a, nm in ((q, "q"), (k, "k"), (v, "v"))]
    grid = ((n + ROWS_TILE - 1) // ROWS_TILE, bh)
    w = obs if obs is not None else K.Observation(False)
    views = [w.watch(g.view, nm) for g, nm in zip(ins, ("q", "k", "v"))]
    _launch_caught(kernel, grid, ROWS_TILE, *views, w.watch(out.view, "out"),
                   K.float32(scale), bool(causal), name="flash_rows", extreme=extreme, obs=w)
    K.check_guards(out, T("missing `if row < seq` guard before writing out?"))
    return out.result()


# the loop of the exercise per key, as the lesson writes it: slot jj of the tiles holds the
# key j = start + t loaded by thread t = jj (k_row, v_row: the tiles' rows jj); q_row is the
# thread's own query row. A one-change variant of it that gives every row of out is the
# learner's mistake, named by its statement (see _variants): a name read for another (the
# key loaded from q or v, the tile's first key `start` for every slot), an operator changed.
_ROWS_BODY = _variants.program("""j = start + t
k_row = k[bh, j]
v_row = v[bh, j]
s = dot(q[bh, row], k_row) * scale
m_new = maximum(m, s)
alpha = exp(m - m_new)
p = exp(s - m_new)
l = l * alpha + p
acc = acc * alpha + p * v_row
m = m_new
""")
_ROWS_FINAL = _variants.program("""out = acc / l
return (out,)
""")


class _Rows:
    """q, k or v indexed by the threads' columns of numbers: a[bh, j] is one row of the
    array per thread, (threads, head_dim), as the kernel's a[bh, j, c] over c."""

    def __init__(self, a: Any) -> None:
        self.a = a

    def __getitem__(self, idx: Any) -> Any:
        got = self.a[idx]
        if got.ndim == 3 and got.shape[1] == 1:
            got = got[:, 0, :]
        if got.ndim != 2:
            raise IndexError("a row per thread")
        return got


def _dot(a: Any, b: Any) -> Any:
    """Row by row dot products (the thread's loop over c), kept as a column."""
    return (a * b).sum(axis=1, keepdims=True)


def _one_change_rows(got: Any, q: Any, k: Any, v: Any, scale: float, causal: bool,
                     ctx: str) -> None:
    """Name the one change of the lesson's per-key loop that gives every row of out."""
    if K.poisoned(got).any():
        return  # elements never written: no formula gives them
    bh, n, d = q.shape
    rows = bh * n
    tiles = -(-n // ROWS_TILE)
    # columns (one row of out each), so that `s * bh` or `acc / row` broadcast as the
    # thread's own numbers; the arrays take them as indices through _Rows
    row = _np.tile(_arange(n), bh).reshape(rows, 1)
    head = _np.repeat(_arange(bh), n).reshape(rows, 1)
    # the tiles' slots past seq: loaded by no thread (the loop skips them), zeros here
    pad = _zeros((bh, tiles * ROWS_TILE - n, d))
    kp, vp, qp = (_np.concatenate([a, pad], axis=1) for a in (k, v, q))
    steps = []
    for j in range(tiles * ROWS_TILE):
        start, t = j - j % ROWS_TILE, j % ROWS_TILE
        active = _full((rows, 1), j < n) & ((row >= j) if causal else True)
        steps.append(({"start": start, "t": t}, active))
    state = {"m": _full((rows, 1), -_inf), "l": _zeros((rows, 1)), "acc": _zeros((rows, d))}
    found = _variants.match_loop(_ROWS_BODY, _ROWS_FINAL, state, steps,
                                 {"scale": K.float64(scale), "row": row, "bh": head,
                                  "q": _Rows(qp), "k": _Rows(kp), "v": _Rows(vp)},
                                 (got.reshape(rows, d).astype(K.float64),),
                                 {"maximum": _maximum, "exp": _exp, "dot": _dot},
                                 rtol=1e-4, atol=1e-5)
    if found is None:
        return
    if found.also:  # two statements give these values (k_row = v[...], or v_row in the dot)
        K.fail("wrong_formula", T(
            "flash_rows: out holds, in every row, what the lesson's loop gives with `{wrong}` "
            "in place of `{right}`, and just as well with `{wrong_2}` in place of `{right_2}` "
            "(the values cannot tell which). The loop, per key: `j = start + t` (the key "
            "thread t loaded into slot jj = t of the tiles), `k_row = k[bh, j]`, `v_row = "
            "v[bh, j]`, `s = dot(q[bh, row], k_row) * scale`, `m_new = max(m, s)`, `alpha = "
            "exp(m - m_new)`, `p = exp(s - m_new)`, `l = l * alpha + p`, `acc = acc * alpha + "
            "p * v_row`, `m = m_new`; at the end `out = acc / l`. Look for one of those "
            "changes in your code.", wrong=found.wrong.replace("maximum", "max"),
            right=found.right.replace("maximum", "max"),
            wrong_2=found.also[0].replace("maximum", "max"),
            right_2=found.also[1].replace("maximum", "max")), context=ctx)
    K.fail("wrong_formula", T(
        "flash_rows: out holds, in every row, what the lesson's loop gives with `{wrong}` in "
        "place of `{right}`. The loop, per key: `j = start + t` (the key thread t loaded into "
        "slot jj = t of the tiles), `k_row = k[bh, j]`, `v_row = v[bh, j]`, `s = dot(q[bh, "
        "row], k_row) * scale`, `m_new = max(m, s)`, `alpha = exp(m - m_new)`, `p = exp(s - "
        "m_new)`, `l = l * alpha + p`, `acc = acc * alpha + p * v_row`, `m = m_new`; at the "
        "end `out = acc / l`. Look for that change in your code: a name or an operator.",
        wrong=found.wrong.replace("maximum", "max"),
        right=found.right.replace("maximum", "max")), context=ctx)


def _unfilled_slot(obs: Any, ctx: str) -> None:
    """out is wrong and the record shows a tile slot read that no thread of the block had
    stored: the load left it out (a store into another array or another slot), whatever
    value the slot happened to hold (the record of stores decides, on both devices)."""
    if not (obs.live and obs.unfilled):
        return
    arr, idx, who, line = obs.unfilled[0]
    K.fail("unfilled_tile", T(
        "out is wrong, and {thread_name} read slot [{slot}] of {arr} (line "
        "{line}), which no thread of its block had stored: the tile's loads leave it out. "
        "Every thread t loads key `j = start + t` into slot t of both tiles, for every c < d: "
        "`k_tile[t, c] = k[bh, j, c]` and `v_tile[t, c] = v[bh, j, c]`.",
        thread_name=K.thread_name(who), slot=", ".join(map(str, idx)), arr=arr, line=line),
        context=ctx)


def _first_column_idle(got: Any, want: Any, ctx: str) -> None:
    """out[..., 0] is exactly 0 in every row while the reference's is not and the other
    columns were computed: acc[0] kept the 0.0 it started with, so the loop over the keys
    never updated it (the values say so, whatever the kernel wrote it with)."""
    first, rest = got[..., 0], got[..., 1:]
    if got.shape[-1] < 2 or not (first == 0).all() or (want[..., 0] == 0).any() or \
            not _isfinite(rest).all() or (rest == 0).all():
        return
    K.fail("wrong_index", T(
        "column 0 of out is 0 in every row, while the other columns are not: acc[0] kept the "
        "0.0 it started with, so the loop over the keys never updated it. Check the index "
        "of the accumulator's store, `acc[c] = acc[c] * alpha + p * v_tile[jj, c]`, and the "
        "range of its loop over c (every c from 0 to d - 1)."), context=ctx)


def _check_tiles(obs: Any, bh: int, n: int, d: int, ctx: dict, kernel: Any = None) -> None:
    """k and v come from shared-memory tiles: each block of ROWS_TILE query rows reads each
    key's row of k and v once (into the tile), not once per query row."""
    if not obs.live:
        return
    K.no_return_value(obs, "flash_rows", "out", ctx)
    K.no_divergent_barrier(obs, "flash_rows", ctx)
    if obs.races:
        # two threads storing into one slot at one line: the index is the mistake, not a
        # barrier (tiling's diagnosis of the same record)
        _tiling._slot_collision(obs, kernel, "flash_rows", ctx)
        K.fail("missing_barrier", T("flash_rows races on shared memory: {race_words}. Wait "
                                    "with cuda.syncthreads() after loading a tile (before "
                                    "reading it) and after using it (before the next loads "
                                    "overwrite it).", race_words=obs.race_words()), context=ctx)
    tiled = -(-n // ROWS_TILE) * bh * n * d  # element reads of k (or v) by a tiled kernel
    for name in ("k", "v"):
        reads = obs.log(name).total_reads
        if reads > 3 * tiled:
            K.fail("no_tiles", T("flash_rows read elements of {name} {reads} times for seq={n}, "
                     "head_dim={d}, {bh} head(s): each query row reads every key from global "
                     "memory. A tiled kernel reads each element once per block of {rows_tile} "
                     "rows ({tiled} reads): load the tile into the shared arrays with all "
                     "threads of the block, cuda.syncthreads(), then read {name}_tile[jj, c] "
                     "in the loop instead of {name}[bh, j, c].", name=name, reads=reads, n=n,
                     d=d, bh=bh, rows_tile=ROWS_TILE, tiled=tiled), context=ctx)


def _qkv(gen: Any, bh: int, n: int, d: int, mag: float = 1.0) -> list:
    return [(K.random_array(gen, (bh, n, d), low=-1.0, high=1.0) * mag).astype(K.float32)
            for _ in range(3)]


def _flash_rows_cases(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> list:
    """check_flash_rows's cases, observed here in the simulator (see O.kernel_cases)."""
    # (batch x heads, seq, head dim, causal); the large-score run below takes the first
    # hidden case's shape. Hidden cases: the master's hidden test cell.
    cases, seed = resolve(hidden, [(1, 37, 16, False), (2, 37, 16, True), (1, 16, 16, True)],
                          seed, name="check_flash_rows")
    gen = K.rng(seed)
    for case, (bh, n, d, causal) in enumerate(cases):
        q, k, v = _qkv(gen, bh, n, d)
        # The scale is an argument: from the second case on it is not 1/sqrt(d), so a
        # kernel that computes its own 1/sqrt(d) (or ignores scale) is seen.
        scale = 1.0 / _sqrt(d) if case == 0 else float(_f32(gen.uniform(0.6, 1.6) / _sqrt(d)))
        with K.observing() as obs:
            got = _run_rows(kernel, q, k, v, causal, scale, obs=obs)
        q64, k64, v64 = (a.astype(K.float64) for a in (q, k, v))
        s = _scores(q64, k64, scale)
        want = _softmax_av(_masked(s, causal), v64)
        ctx = f"batch_heads={bh}, seq={n}, head_dim={d}, causal={causal}, scale={scale:.4g}"
        _check_tiles(obs, bh, n, d, {"batch_heads": bh, "seq": n, "head_dim": d,
                                     "causal": causal}, kernel)
        if K.isclose(got, want, rtol=1e-4, atol=1e-5).all():
            continue
        _unfilled_slot(obs, ctx)  # the record first: a slot read that no load stored
        alts = {
            T("the attention without the 1/sqrt(d) scale: multiply each score by scale"):
                _softmax_av(_masked(_scores(q64, k64, 1.0), causal), v64),
        }
        if abs(scale * _sqrt(d) - 1.0) > 1e-3:
            alts[T("the attention scaled by 1/sqrt(d) = {v_1_over_sqrt:.4g}, not by the scale "
                   "argument ({scale:.4g}): multiply each score by the kernel's scale "
                   "parameter", v_1_over_sqrt=1 / _sqrt(d),
                   scale=scale)] = _softmax_av(_masked(_scores(q64, k64, 1.0 / _sqrt(d)), causal),
                                            v64)
        for chunk in (1, ROWS_TILE):
            alts[T("a result whose accumulator is not rescaled (chunk {chunk}): when the "
                   "maximum grows, multiply acc by exp(m - m_new)", chunk=chunk)] = \
                _emulate(q64, k64, v64, scale, causal, "acc", chunk)
            alts[T("a result whose running sum is not rescaled (chunk {chunk}): when the "
                   "maximum grows, multiply l by exp(m - m_new)", chunk=chunk)] = \
                _emulate(q64, k64, v64, scale, causal, "l", chunk)
            alts[T("a result computed with exp(s) instead of exp(s - m_new) (chunk {chunk}): "
                   "the maximum is not subtracted, which overflows for large scores",
                   chunk=chunk)] = \
                _emulate(q64, k64, v64, scale, causal, "max", chunk)
        alts[T("a result whose running sum is l + exp(m - m_new) + p (chunk 1): the old sum "
               "is rescaled by multiplying, l * exp(m - m_new) + p")] = \
            _emulate(q64, k64, v64, scale, causal, "l_plus_alpha", 1)
        alts[T("a result whose new term is rescaled too (chunk 1): p = exp(s - m_new) is "
               "already relative to the new maximum; multiply only l and acc by "
               "exp(m - m_new)")] = _emulate(q64, k64, v64, scale, causal, "new_rescaled", 1)
        alts[T("a result whose running maximum is never updated (chunk 1): `m = m_new` "
               "is missing after the update, so every key is weighed against the old "
               "maximum -inf and the earlier keys are forgotten")] = \
            _emulate(q64, k64, v64, scale, causal, "m", 1)
        # every key of a row scored alike (s = 0, s = scale, a score times 0): the weights
        # are equal, whatever the statement that made the score forget its key
        alts[T("the plain average of v over the keys each row sees: every key got the same "
               "score, so the weights are all equal. The score must depend on the key: s = "
               "(the row of q dotted with k_tile[jj, :]) * scale")] = \
            _softmax_av(_masked(_zeros(s.shape), causal), v64)
        # the score's loop over c stores each product instead of adding it: s is the last
        alts[T("the attention whose score is only the last product, q[bh, row, d - 1] * "
               "k_tile[jj, d - 1]: the loop over c must add every product into s (s += ...), "
               "starting from s = 0.0")] = \
            _softmax_av(_masked(_scores(q64[..., -1:], k64[..., -1:], scale), causal), v64)
        alts[T("the attention with the scale applied twice (scores * scale * scale): "
               "multiply each score by scale once")] = \
            _softmax_av(_masked(_scores(q64, k64, scale * scale), causal), v64)
        if causal:
            alts[T("the non-causal attention: keys j > row must be skipped")] = \
                _softmax_av(s, v64)
            alts[T("keys j <= row + 1: the causal mask is off by one (keep j <= row)")] = \
                _softmax_av(_masked(s, True, 1), v64)
        for label, alt in alts.items():
            if K.isclose(got, alt, rtol=1e-4, atol=1e-5).all():
                K.fail("wrong_formula", T("out holds {label}.", label=label), context=ctx)
        if causal and n > 1:  # row 0 then sees no key at all: 0 / 0
            excl = _softmax_av(_masked(s, True, -1), v64)
            if K.isclose(got[:, 1:], excl[:, 1:], rtol=1e-4, atol=1e-5).all():
                K.fail("causal_mask_off_by_one", T("out holds keys j < row only: the causal mask is off by one and drops "
                         "the diagonal (keep j <= row); row 0 then has no key at all."), context=ctx)
        if not causal and n % ROWS_TILE:
            # right when seq is a multiple of the tile? then keys past the end leak in
            n2 = n - n % ROWS_TILE
            got2 = _run_rows(kernel, q[:, :n2].copy(), k[:, :n2].copy(), v[:, :n2].copy(),
                             False, scale)
            want2 = _softmax_av(s[:, :n2, :n2], v64[:, :n2])
            if K.isclose(got2, want2, rtol=1e-4, atol=1e-5).all():
                K.fail("stale_tile_keys", T("out is right when seq is a multiple of {rows_tile} but wrong for "
                         "seq={n}: in the last tile, skip keys j >= seq (their tile slots hold "
                         "stale data).", rows_tile=ROWS_TILE, n=n), context=ctx)
        _one_change_rows(got, q64, k64, v64, scale, causal, ctx)
        _first_column_idle(got, want, ctx)
        K.no_computed_nan(got, "out", ctx)
        K.compare(got, want, name="out", rtol=1e-4, atol=1e-5,
                  formula="softmax(q k^T * scale) v", context=ctx)
    # scores far beyond exp's range: the running maximum keeps every exponent <= 0
    bh, n, d = (1, 20, 16) if not hidden else tuple(cases[0][:3])
    q, k, v = _qkv(gen, bh, n, d)
    q, k = q * _f32(60.0), k * _f32(60.0)
    scale = 1.0 / _sqrt(d)
    got = _run_rows(kernel, q, k, v, True, scale, extreme=True)
    if not _isfinite(got).all():
        K.fail("overflow", T("flash_rows: {overflow}",
                             overflow=_OVERFLOW), context={"scores": "magnitude ~1000"})
    q64, k64, v64 = (a.astype(K.float64) for a in (q, k, v))
    s64 = _scores(q64, k64, scale)
    want = _softmax_av(_masked(s64, True), v64)
    # float32 scores this large carry an absolute error of about |s| * 2^-23 per rounding, and
    # exp turns it into that relative error of every weight: a right kernel is off by ~1e-3
    # here, while the mistakes this case exists for (no running maximum) give inf or NaN.
    tol = max(1e-4, 16 * 1.1920929e-07 * float(K.abs(s64).max()))
    K.compare(got, want, name="out", rtol=tol, atol=tol, formula="softmax(q k^T * scale) v",
              context=T("scores of magnitude ~1000, seq={n}, causal", n=n))
    return cases


def check_flash_rows(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> str:
    """Check the fused attention kernel (one thread per query row, tiles of 16 keys).

    Sequence lengths are not multiples of the tile, causal and not, several heads, scales
    other than 1/sqrt(d), and a case whose scores are far beyond exp's range (only the online
    softmax with the maximum subtracted survives it). In the simulator (on a GPU: in a
    simulator replay) the kernel must also read k and v through its shared-memory tiles,
    with barriers every thread reaches and no race. ``hidden=Cases(seed, sizes)`` uses the
    master's shapes.
    """
    cases = K.kernel_cases(_flash_rows_cases, kernel, "flash_rows", 6, hidden=hidden, seed=seed)
    return K.passes("flash_rows", T("{n_cases} shapes (causal and not, partial last tiles)",
                                    n_cases=len(cases)),
             T("scales other than 1/sqrt(d)"), T("scores of magnitude ~1000"),
             T("k and v read through the shared tiles"), hidden=hidden)
