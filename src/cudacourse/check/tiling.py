"""Checkers for lesson 4's exercises: the shared-memory tiled matmul and the block sum.

Both kernels use shared memory and barriers, so besides the numbers these checks look at
how they were made (``_observe``, in the simulator; on a GPU through the simulator
replay, so the verdict is the same): every ``cuda.syncthreads()`` must be reached by every
thread of the block (one inside ``if t < s`` is undefined behaviour); no shared slot may be
written by one thread and used by another between the same two barriers (a race, even
when the interleaving happened to give the right numbers); shared memory starts poisoned
in every block, so a slot no thread stored (a partial tile left unfilled) is named; the
matmul must read a and b about n / TILE times (tiles reused), the block sum must be a tree
(no thread adding the block serially). On a GPU the numbers are also checked twice, since
a race shows there as results that change from run to run.
"""

from __future__ import annotations
from ..i18n import T

# Causes each checker here raises only after a case's values matched the reference (the
# technique, not the values, was wrong): partial credit keeps the value thirds for them
# (cudacourse.grader.partial, through cudacourse.course.lessons.technique).
TECHNIQUE = {
    "check_tiled_matmul": ("no_tiles",),
    "check_block_sum": ("no_tree",),
}

import ast
import contextlib
import math
import sys
import traceback
from typing import Any, Iterator

from . import _variants
from . import kit as K
from .kit import resolve
from ..i18n import T

TILE = 16  # the exercise's tile size (the notebook's setup cell defines the same TILE)
TPB = 128  # threads per block of the block-sum exercise (a power of two)
POISON = K.SHARED_POISON  # what unwritten shared memory holds during a check (simulator)
_BIG = 1.0e20


def _poison_hint(what: str) -> str:
    return (T("{what} used shared memory that no thread had written yet: a missing "
              "cuda.syncthreads() after loading (a thread read its neighbours' slots before "
              "they were stored), or slots left unwritten at the edges (load 0.0 there)",
              what=what))


def _barrier_every_iteration(kernel: Any, line: int) -> bool:
    """Whether ``line`` of the kernel's file lies in a loop whose body reaches a
    cuda.syncthreads() on every iteration (a barrier statement directly in the loop's body,
    not under an ``if``): the learner's source, read as written."""
    import ast
    import inspect
    import textwrap

    from . import _origin

    try:
        lines, first = inspect.getsourcelines(_origin.unwrap(kernel))
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return False
    here = line - first + 1
    for loop in ast.walk(tree):
        if not isinstance(loop, (ast.For, ast.While)) or \
                not loop.lineno <= here <= (loop.end_lineno or loop.lineno):
            continue
        if any(isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and
               isinstance(st.value.func, ast.Attribute) and st.value.func.attr == "syncthreads"
               for st in loop.body):
            return True
    return False


def _slot_collision(obs: K.Observation, kernel: Any, name: str, ctx: dict) -> None:
    """A race that no barrier explains, named as what it is: two threads at one line (one
    statement) meeting at one slot, either both storing there, or inside a loop whose every
    iteration reaches a barrier (so the barrier is there): the index is the mistake."""
    r = obs.races[0]
    (_t1, what1, l1), (_t2, what2, l2) = r.first, r.second
    if l1 != l2 or kernel is None:
        return
    if not ((what1 == what2 == "wrote") or _barrier_every_iteration(kernel, l1)):
        return
    K.fail("slot_collision", T("{name} races on shared memory: {race_words}. Both accesses are "
                               "line {line}, and a barrier cannot go between two threads "
                               "running one statement: two threads computed the same slot. "
                               "Check that line's index: between two barriers each thread "
                               "stores into a slot of its own.", name=name,
                               race_words=obs.race_words(), line=l1), context=ctx)


def _race_or_divergence(obs: K.Observation, name: str, ctx: dict, race_fix: str,
                        kernel: Any = None) -> None:
    """Barrier mistakes, seen directly (simulator): whatever numbers the run produced."""
    K.no_return_value(obs, name, T("the output array"), ctx)
    K.no_divergent_barrier(obs, name, ctx)
    if obs.live and obs.races:
        _slot_collision(obs, kernel, name, ctx)
        K.fail("missing_barrier", T("{name} races on shared memory: {race_words}. {race_fix}",
                                    name=name, race_words=obs.race_words(),
                                    race_fix=race_fix), context=ctx)


def _read_before_store(what: str) -> str:
    return T("{what} computed from a shared-memory value no thread had stored yet (its "
             "result holds the poison shared memory starts with), although every access was "
             "recorded and no two threads raced, so no barrier is missing: a slot was read "
             "before its first store (a `+=` into a slot that `=` should set first?)",
             what=what)


def _unfilled_words(obs: K.Observation, what: str) -> str:
    arr, idx, who, line = obs.unfilled[0]
    slot = ", ".join(map(str, idx))
    return (T("{thread_name} read slot [{slot}] of {arr} (line {line}), which no thread of its "
              "block ever stored: {what}", thread_name=K.thread_name(who), slot=slot, arr=arr,
              line=line, what=what))


# --- the tiled matmul --------------------------------------------------------------------

def _matmul_case(kernel: Any, a: Any, b: Any, spare: int, ctx: dict,
                 obs: K.Observation | None = None) -> Any:
    m, k = a.shape
    n = b.shape[1]
    ga, gb = K.to_device_guarded(a, "a"), K.to_device_guarded(b, "b")
    out = K.output((m, n), "c")
    grid = (math.ceil(n / TILE) + spare, math.ceil(m / TILE))
    w = obs if obs is not None else K.Observation(False)
    K.launch(kernel, grid, (TILE, TILE), w.watch(ga.view, "a"), w.watch(gb.view, "b"), w.watch(out.view, "c"), name="tiled_matmul", context=ctx, oob=lambda recs, block: _matmul_oob(recs, m, k, n), obs=w)
    K.check_guards(out, T("a write outside c: missing `if row < m and col < n` before the "
                          "store?"),
                   ctx)
    if not K.array_equal(ga.result(), a) or not K.array_equal(gb.result(), b):
        K.fail("inputs_changed", T("tiled_matmul changed its inputs a or b; only c should be "
                                   "written."), context=ctx)
    return out.result()


def _matmul_oob(recs: list, m: int, k: int, n: int) -> tuple[str, str]:
    r = recs[0]
    axis_name = {("a", 0): T("row (m)"), ("a", 1): T("column (k)"), ("b", 0): T("row (k)"),
                 ("b", 1): T("column (n)"), ("c", 0): T("row (m)"), ("c", 1): T("column (n)")}
    where = axis_name.get((r.array, r.axis), f"axis {r.axis}")
    verb = K.verb(r.write)
    if r.array == "c":
        return ("out_of_bounds_write",
                T("{thread_name} {verb} c[..] with {where} index {index} (size {size}, line "
                  "{line}): missing bounds guard on the store, `if row < m and col < n`?",
                  thread_name=K.thread_name(r.thread), verb=verb, where=where, index=r.index,
                  size=r.size, line=r.line))
    return ("out_of_bounds_read",
            T("{thread_name} {verb} {array} with {where} index {index} (size {size}, line "
              "{line}): missing bounds guard on the tile loads. Past an edge of a or b (row >= "
              "m, column >= k, ...), store 0.0 in the tile instead of reading.",
              thread_name=K.thread_name(r.thread), verb=verb, array=r.array, where=where,
              index=r.index, size=r.size, line=r.line))


def _tiled_matmul_cases(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> list:
    """check_tiled_matmul's cases, observed here in the simulator (see O.kernel_cases)."""
    # (m, k, n, spare blocks): edges that are not tile multiples, k over several tiles.
    cases, seed = resolve(hidden, [(19, 37, 21, 0), (9, 35, 16, 1), (16, 18, 5, 0)], seed,
                          name="check_tiled_matmul")
    gen = K.rng(seed)
    for m, k, n, spare in cases:
        a = K.random_array(gen, (m, k))
        b = K.random_array(gen, (k, n))
        ctx = {"a": f"{m}x{k}", "b": f"{k}x{n}", "blocks": f"{TILE}x{TILE}"}
        want = a.astype(K.float64) @ b.astype(K.float64)
        runs = []
        # On a GPU a race shows, if at all, as results that differ from run to run; the
        # simulator sees it directly, so one observed run is enough there.
        for _ in range(1 if K.simulator() else 2):
            with K.observing() as obs:
                runs.append(_matmul_case(kernel, a, b, spare, ctx, obs))
            if obs.live and obs.races and k > TILE and not _single_tile_races(kernel, gen, m, n):
                K.no_divergent_barrier(obs, "tiled_matmul", ctx)
                K.fail("missing_barrier", T("tiled_matmul races on shared memory when k spans several tiles: "
                         "{race_words}. Threads overwrite a tile while others still compute "
                         "from it: add the second cuda.syncthreads(), after the loop over the "
                         "tile and before the next loads.", race_words=obs.race_words()), context=ctx)
            _race_or_divergence(obs, "tiled_matmul", ctx,
                                T("Add cuda.syncthreads() after loading the tiles (before any "
                                  "thread computes from them), and a second one after using "
                                  "them (before the next loads overwrite them)."), kernel)
        for got in runs:
            finite = got[~K.isnan(got)]
            if finite.size and K.abs(finite).max() > _BIG:
                if obs.live and obs.unfilled:
                    K.fail("unfilled_tile", _unfilled_words(
                        obs, T("a slot past the edge of a or b must still be filled: load 0.0 "
                               "there (sa[ty, tx] = a[row, col] if row < m and col < k else "
                               "0.0).")), context=ctx)
                if obs.live and not obs.races:  # every access seen: no barrier is missing
                    K.fail("unfilled_tile", _read_before_store('tiled_matmul'), context=ctx)
                K.fail("missing_barrier", T("{poison_hint}.",
                                            poison_hint=_poison_hint('tiled_matmul')), context=ctx)
        kt = k - k % TILE
        alternatives = {}
        if kt != k:
            alternatives[T("the sum over the first whole tiles of k only (the last, partial "
                           "tile is skipped: loop over math.ceil(k / TILE) tiles, with 0.0 "
                           "loaded past the edge)")] = a[:, :kt] @ b[:kt, :]
            if kt >= TILE:  # the partial tile's empty slots kept the previous tile's values
                lo = kt - TILE + k % TILE
                alternatives[T("a sum in which the last, partial tile's empty slots still hold "
                               "the previous tile's values: past the edge of a and b, load 0.0 "
                               "there")] = want + a[:, lo:kt] @ b[lo:kt, :]
        tol = 1e-4 * k
        for got in runs:
            K.no_computed_nan(got, "c", ctx)
            try:
                K.compare(got, want, name="c", formula=T("sum over k of a[row, k] * b[k, col]"),
                          rtol=1e-4, atol=tol, context=ctx, alternatives=alternatives)
            except K.CheckFailure as exc:
                if exc.cause == "wrong_values" and not (obs.live and obs.stale and kt != k):
                    _matmul_one_change(got, a, b, spare, ctx)
                if obs.live and obs.stale and kt != k:
                    K.fail("unfilled_tile", T("c is wrong and a slot of the last, partial tile kept a value "
                             "from the previous tile (read at line {stale}): past the edge of "
                             "a and b, load 0.0 there instead of leaving the slot as it was.",
                             stale=obs.stale[0][3]), context=ctx)
                raise
        if len(runs) > 1 and not K.array_equal(runs[0], runs[1]):
            K.fail("missing_barrier", T("tiled_matmul gave different results for the same input: a race. Are both "
                     "cuda.syncthreads() there (after loading a tile, and after using it, "
                     "before the next loads overwrite it)?"), context=ctx)
    _check_reuse(kernel, gen)
    return cases


# The tiled matmul as the lesson writes it, for every thread of the grid at once (arrays of
# shape blocks-y x blocks-x x TILE x TILE): per tile t, the two loads, then the product of the
# tiles (dot(sa, sb)[ty, tx] is the sum over i of sa[ty, i] * sb[i, tx]); at the end the
# store. A one-change variant of it that gives every element of c is the learner's mistake,
# named by its statement (see _variants): a name read for another (n for k in a guard, sa
# for sb, k for acc), an operator changed, `+=` written `=`.
_MATMUL_BODY = _variants.program("""sa = where((row < m) & (t + tx < k), take2(a, row, t + tx), 0.0)
sb = where((t + ty < k) & (col < n), take2(b, t + ty, col), 0.0)
acc = acc + dot(sa, sb)
""")
_MATMUL_FINAL = _variants.program("""c = acc
return (crop(c),)
""")


def _take2(a: Any, r: Any, c: Any) -> Any:
    """a[r, c] element by element; NaN where (r, c) is outside a (a thread reading there
    must be one the guard turns away: NaN in a stored tile matches no output)."""
    r, c = K.np.asarray(r), K.np.asarray(c)
    if r.dtype.kind not in "iu" or c.dtype.kind not in "iu":
        raise TypeError("index")
    inside = (r >= 0) & (r < a.shape[0]) & (c >= 0) & (c < a.shape[1])
    return K.np.where(inside, a[K.np.where(inside, r, 0), K.np.where(inside, c, 0)], K.np.nan)


def _matmul_grid(m: int, k: int, n: int, spare: int) -> dict:
    gy, gx = math.ceil(m / TILE), math.ceil(n / TILE) + spare
    shape = (gy, gx, TILE, TILE)
    by, bx, ty, tx = (K.np.broadcast_to(v, shape) for v in K.np.ix_(
        K.np.arange(gy), K.np.arange(gx), K.np.arange(TILE), K.np.arange(TILE)))
    # i: the inner loop's variable, TILE - 1 once the loop is done (read after it by mistake)
    return {"ty": ty, "tx": tx, "row": by * TILE + ty, "col": bx * TILE + tx, "m": m, "k": k,
            "n": n, "i": TILE - 1}


def _matmul_program(a: Any, b: Any, spare: int) -> tuple:
    """(fixed names, functions, first state) of the tiled program for a @ b."""
    m, k = a.shape
    n = b.shape[1]
    fixed = {**_matmul_grid(m, k, n, spare), "a": a.astype(K.float64),
             "b": b.astype(K.float64)}
    shape = fixed["row"].shape

    def crop(c: Any) -> Any:
        full = K.np.broadcast_to(K.np.asarray(c, dtype=K.float64), shape)
        return full.transpose(0, 2, 1, 3).reshape(shape[0] * TILE, shape[1] * TILE)[:m, :n]

    def dot(x: Any, y: Any) -> Any:
        x, y = K.np.asarray(x), K.np.asarray(y)
        if x.shape != shape or y.shape != shape:
            raise ValueError("tile")
        return K.np.matmul(x, y)

    functions = {"where": K.np.where, "take2": _take2, "dot": dot, "crop": crop}
    return fixed, functions, {"acc": K.np.zeros(shape)}


def _matmul_one_change(got: Any, a: Any, b: Any, spare: int, ctx: dict) -> None:
    """Name the one change of the lesson's tiled loop that gives every element of c, or the
    loop over tiles with other bounds (a stride of 2 * TILE, an end one off)."""
    if K.isnan(got).any():
        return
    m, k = a.shape
    fixed, functions, state = _matmul_program(a, b, spare)
    want = (got.astype(K.float64),)
    tol = 1e-4 * k
    steps = [({"t": t}, None) for t in range(0, k, TILE)]
    found = _variants.match_loop(_MATMUL_BODY, _MATMUL_FINAL, state, steps, fixed, want,
                                 functions, rtol=1e-4, atol=tol)
    if found is not None and found.also:
        # two statements give these values (a's and b's guards both cut the k range): say
        # both, the mistake is one of them
        K.fail("wrong_formula", T(
            "c holds, in every element, what the lesson's tiled loop gives with `{wrong}` in "
            "place of `{right}`, and just as well with `{wrong_2}` in place of `{right_2}` "
            "(the values cannot tell which). The loop, for t = 0, TILE, ... below k: `sa[ty, "
            "tx] = a[row, t + tx] if row < m and t + tx < k else 0.0`, `sb[ty, tx] = b[t + ty, "
            "col] if t + ty < k and col < n else 0.0`, then `acc += sa[ty, i] * sb[i, tx]` for "
            "i in range(TILE); at the end `c[row, col] = acc`. Look for one of those changes "
            "in your code.", wrong=_matmul_words(found.wrong),
            right=_matmul_words(found.right), wrong_2=_matmul_words(found.also[0]),
            right_2=_matmul_words(found.also[1])), context=ctx)
    if found is not None:
        K.fail("wrong_formula", T(
            "c holds, in every element, what the lesson's tiled loop gives with `{wrong}` in "
            "place of `{right}`. The loop, for t = 0, TILE, ... below k: `sa[ty, tx] = a[row, t "
            "+ tx] if row < m and t + tx < k else 0.0`, `sb[ty, tx] = b[t + ty, col] if t + ty "
            "< k and col < n else 0.0`, then `acc += sa[ty, i] * sb[i, tx]` for i in "
            "range(TILE); at the end `c[row, col] = acc`. Look for that change in your code: a "
            "name, an index or an operator.", wrong=_matmul_words(found.wrong),
            right=_matmul_words(found.right)), context=ctx)
    hits = []
    for start, stop, stride in [(0, k, 2 * TILE), (0, k, TILE + 1), (0, k, TILE - 1),
                                (0, k - 1, TILE), (0, k + 1, TILE), (1, k, TILE),
                                (0, k - TILE, TILE), (TILE, k, TILE)]:
        tiles = list(range(start, stop, stride))
        if tiles == list(range(0, k, TILE)) or not tiles:
            continue
        values = _variants.run_loop(_MATMUL_BODY, _MATMUL_FINAL, state,
                                    [({"t": t}, None) for t in tiles], fixed, functions)
        if _variants.same(want, values, 1e-4, tol) and tiles not in hits:
            hits.append(tiles)
    if len(hits) == 1:
        K.fail("wrong_formula", T(
            "c holds, in every element, what the lesson's tiled loop gives over the tiles t = "
            "{tiles}, where k = {k} takes t = {right}: check the loop over the tiles, `for t "
            "in range(0, k, TILE)` (its start, end and step).",
            tiles=", ".join(map(str, hits[0])), k=k,
            right=", ".join(map(str, range(0, k, TILE)))), context=ctx)


class _MatmulWords(ast.NodeTransformer):
    """The program's helpers in the kernel's words: take2(a, r, c) -> a[r, c], where(c, x,
    y) -> x if c else y, & -> and, dot(x, y) -> sum of x[ty, i] * y[i, tx]."""

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.BitAnd):
            return ast.BoolOp(ast.And(), [node.left, node.right])
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        if name == "take2" and len(node.args) == 3:
            return ast.Subscript(node.args[0], ast.Tuple(node.args[1:], ast.Load()),
                                 ast.Load())
        if name == "where" and len(node.args) == 3:
            return ast.IfExp(node.args[0], node.args[1], node.args[2])
        if name == "dot" and len(node.args) == 2:
            x, y = (ast.unparse(v) for v in node.args)
            return ast.parse(_variants.program(f"sum({x}[ty, i] * {y}[i, tx] "
                                               f"for i in range(TILE))"),
                             mode="eval").body
        return node


def _matmul_words(code: str) -> str:
    """A statement of the tiled program as the kernel writes it."""
    stmt = ast.parse(code).body[0]
    if not isinstance(stmt, ast.Assign) or not isinstance(stmt.targets[0], ast.Name):
        return code
    target = stmt.targets[0].id
    value = stmt.value
    if target == "acc" and isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add) and \
            isinstance(value.left, ast.Name) and value.left.id == "acc" and \
            isinstance(value.right, ast.Call) and ast.unparse(value.right.func) == "dot":
        x, y = (ast.unparse(v) for v in value.right.args)
        return f"acc += {x}[ty, i] * {y}[i, tx]"
    where = {"sa": "sa[ty, tx]", "sb": "sb[ty, tx]", "c": "c[row, col]"}.get(target, target)
    return f"{where} = {ast.unparse(_MatmulWords().visit(value))}"


def check_tiled_matmul(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> str:
    """Check ``kernel(a, b, c)``: c = a @ b, launched with TILE x TILE blocks, grid
    (ceil(n / TILE), ceil(m / TILE)), x along columns; shapes need not be tile multiples.

    Besides the numbers (twice, as a race may change them): barriers every thread reaches,
    no shared-memory race between two barriers, partial tiles filled with 0.0, and (in the
    simulator) about n / TILE reads of each element of a and b, not n.
    """
    cases = K.kernel_cases(_tiled_matmul_cases, kernel, "tiled_matmul", 3,
                           hidden=hidden, seed=seed)
    return K.passes("tiled_matmul", T("{n_cases} shapes with partial tiles",
                                      n_cases=len(cases)),
             T("barriers reached by every thread, no shared-memory race"),
             T("tiles reused from shared memory"), hidden=hidden)


def _single_tile_races(kernel: Any, gen: Any, m: int, n: int) -> bool:
    """Whether the kernel races even when k fits in one tile (no tile is reloaded)."""
    k = TILE - 3
    a = K.random_array(gen, (m, k))
    b = K.random_array(gen, (k, n))
    with K.observing() as obs:
        try:
            _matmul_case(kernel, a, b, 0, {"k": k})
        except K.CheckFailure:
            return True
    return bool(obs.races)


def _check_reuse(kernel: Any, gen: Any) -> None:
    """A tiled kernel reads each element of a and b about n / TILE times, not n times."""
    from . import _instrument

    if not K.simulator() and not _instrument.active():
        # On a GPU without native evidence: the compiled kernel says how much shared memory
        # it declares (with it, the reads are counted below, as in the simulator).
        try:
            smem = kernel.get_shared_mem_per_block()
            if isinstance(smem, dict):
                smem = max(smem.values()) if smem else 0
        except Exception:  # noqa: BLE001 - an unknown dispatcher: nothing to conclude
            return
        if smem == 0:
            K.fail("no_tiles", T("tiled_matmul declares no shared memory: stage TILE x TILE "
                                 "tiles of a and b in cuda.shared.array and compute from "
                                 "those."))
        return
    m, k, n = 16, 48, 16
    a = K.random_array(gen, (m, k))
    b = K.random_array(gen, (k, n))
    out = K.output((m, n), "c")
    with K.observing() as obs:
        # c watched too, as in the cases: on a GPU the same instrumented build serves (one
        # compile less, seconds of the check cell)
        K.launch(kernel, (n // TILE, m // TILE), (TILE, TILE), obs.watch(K.to_device_guarded(a, "a").view, "a"), obs.watch(K.to_device_guarded(b, "b").view, "b"), obs.watch(out.view, "c"), name="tiled_matmul", oob=lambda recs, block: _matmul_oob(recs, m, k, n), obs=obs)
    if not obs.live:
        return
    naive = m * n * k  # reads of a (and of b) by one thread per output, no reuse
    reads = max(obs.log("a").total_reads, obs.log("b").total_reads)
    if reads > naive / 4:
        K.fail("no_tiles", T("tiled_matmul read elements of a or b {reads} times for a {m}x{k} @ {k}x{n} "
                 "product, as often as a kernel without shared memory ({naive}); a tiled one "
                 "reads each element about n / TILE times ({naive_over_tile} reads). Load each "
                 "tile into cuda.shared.array once, then compute from shared memory.",
                 reads=reads, m=m, k=k, n=n, naive=naive, naive_over_tile=naive // TILE))


# --- the block sum -------------------------------------------------------------------------

TREE_READS = 3 * int(math.log2(TPB))  # shared-memory reads one thread makes in a tree, at most


def _block_sum_cases(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> list:
    """check_block_sum's cases, observed here in the simulator (see O.kernel_cases)."""
    cases, seed = resolve(hidden, [300, TPB, 77], seed, name="check_block_sum")
    gen = K.rng(seed)
    for n in cases:
        x = K.random_array(gen, n)
        blocks = math.ceil(n / TPB)
        ctx = {"n": n, "blocks": blocks, "threads_per_block": TPB}
        pad = K.full(blocks * TPB, 0.0, dtype=K.float64)
        pad[:n] = x
        want = pad.reshape(blocks, TPB).sum(axis=1)
        runs = []
        for _ in range(2):
            gx = K.to_device_guarded(x, "x")
            out = K.output(blocks, "partial")
            with K.observing() as obs:
                K.launch(kernel, blocks, TPB, obs.watch(gx.view, "x"), obs.watch(out.view, "partial"), name="block_sum", context=ctx, oob=_partial_index, obs=obs)
            _race_or_divergence(obs, "block_sum", ctx,
                                T("Put a cuda.syncthreads() after the loads and after every "
                                  "level of the tree, where every thread of the block reaches "
                                  "it (outside the `if t < s`)."), kernel)
            K.check_guards(out, T("a write past partial: only thread 0 of each block writes "
                                  "partial[cuda.blockIdx.x]"), ctx)
            runs.append(out.result())
        for got in runs:
            _diagnose_sum(got, want, x, n, blocks, ctx, obs)
        _check_tree(obs, ctx)  # before comparing runs: atomics also change the float order
        if not K.array_equal(runs[0], runs[1]):
            K.fail("missing_barrier", T("block_sum gave different results for the same input: a race. Is there a "
                     "cuda.syncthreads() after the loads and after every level of the tree?"), context=ctx)
    return cases


def _partial_index(recs: list, block: tuple) -> tuple[str, Any] | None:
    """Writes past partial made at the writer's global thread index (partial[i], i =
    blockIdx.x * blockDim.x + threadIdx.x) instead of its block's: no guard would fix it,
    the index is the mistake (the record of the writers says which)."""
    r = recs[0]
    if r.shared is not None:
        s = r.index - r.thread[1][0]  # the tree reads slot t + s
        if len(r.shared[1]) == 1 and s == r.size and not r.write:  # s = TPB: one level up
            return ("wrong_formula",
                    T("{thread_name} read {array}[{index}] = {array}[t + s] with s = {s} (line "
                      "{line}), past the {size} slots of {array}: the tree starts one level too "
                      "high. Its first level adds the upper half into the lower one: s = TPB "
                      "// 2, then s //= 2 down to 1", thread_name=K.thread_name(r.thread),
                      array=r.array, index=r.index, s=s, line=r.line, size=r.size))
        return None
    writes = [r for r in recs if r.write and r.array == "partial"]
    if not writes or not all(r.index == r.grid_index(block) for r in writes):
        return None
    r = writes[0]
    return ("wrong_index",
            T("{thread_name} wrote partial[{index}] (line {line}), outside partial (size "
              "{size}, one slot per block): it stored at its own global index i = blockIdx.x * "
              "blockDim.x + threadIdx.x. A guard would only hide this: each block's sum goes "
              "to partial[cuda.blockIdx.x], written by thread 0", thread_name=K.thread_name(
                  r.thread), index=r.index, line=r.line, size=r.size))


_partial_index.sees_shared = True  # type: ignore[attr-defined]


def check_block_sum(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> str:
    """Check ``kernel(x, partial)``: partial[b] = the sum of x[b*TPB : (b+1)*TPB] (elements
    past the end count as 0), launched with ceil(n / TPB) blocks of TPB threads.

    The technique is checked as well as the sums: a tree in shared memory (no thread reads
    more than a few slots per level: thread 0 adding the block serially fails), barriers
    that every thread of the block reaches (``syncthreads()`` inside ``if t < s`` fails: it
    is undefined behaviour), and no race between two barriers. A tree finished with warp
    shuffles passes.
    """
    cases = K.kernel_cases(_block_sum_cases, kernel, "block_sum", 2, hidden=hidden, seed=seed)
    return K.passes("block_sum", T("{n_cases} lengths with a partial last block",
                                   n_cases=len(cases)), T("each run twice"),
             T("a tree in shared memory"), T("barriers reached by every thread, no race"),
             hidden=hidden)


def _check_tree(obs: K.Observation, ctx: dict) -> None:
    """The block is summed by a tree: no thread reads x more than once or more than
    TREE_READS shared slots (a serial sum by thread 0 reads TPB of them)."""
    if not obs.live:
        return
    if obs.atomics and max(obs.atomics.values()) > TPB // 32:
        block = max(obs.atomics, key=obs.atomics.get)
        K.fail("no_tree", T("block {block} made {atomics} atomic additions: its threads add into one "
                 "place one after another (the hardware serializes atomics on one address), "
                 "which is not a tree. Store each element in shared memory and halve the "
                 "number of active threads at each level (threads t < s add slot t + s into "
                 "slot t), with cuda.syncthreads() between the levels.", block=K.dims(block),
                 atomics=obs.atomics[block]), context=ctx)
    who, most = obs.log("x").busiest_reader()
    if most > 2:
        K.fail("no_tree", T("{thread_name} read {most} elements of x by itself: the block's sum is made "
                 "serially, not by a tree. Each thread loads its own element into shared "
                 "memory; then, for s = TPB // 2, TPB // 4, ..., 1, threads t < s add slot t + "
                 "s into slot t, with cuda.syncthreads() between the levels.",
                 thread_name=K.thread_name(who), most=most), context=ctx)
    if not obs.shared_reads and not obs.shuffles:
        K.fail("no_tree", T("block_sum used neither shared memory nor warp shuffles: the exercise is a "
                 "tree in a cuda.shared.array of TPB slots, one per thread."), context=ctx)
    if obs.shared_reads:
        who = max(obs.shared_reads, key=obs.shared_reads.get)
        most = obs.shared_reads[who]
        if most > TREE_READS:
            K.fail("no_tree", T("{thread_name} read {most} shared-memory slots by itself, while a tree "
                     "over {tpb} threads needs about {v_2_times_log2} per thread: one thread "
                     "adds the block serially. Halve the number of active threads at each "
                     "level instead: threads t < s add slot t + s into slot t, for s = TPB // "
                     "2 down to 1, with cuda.syncthreads() between the levels.",
                     thread_name=K.thread_name(who), most=most, tpb=TPB,
                     v_2_times_log2=2 * int(math.log2(TPB))), context=ctx)


# The block sum as the lesson writes it, for all blocks at once (rows: blocks, columns:
# threads t): the load, then one tree level per step (s = TPB // 2, ..., 1), then thread 0's
# store. take(a, idx) is a[idx] per block; put(a, idx, value, cond) stores value at idx
# where cond holds (the level's reads all happen before its stores: the barrier between
# levels). A one-change variant of it that gives every block's sum is the learner's
# mistake, named by its statement (see _variants): a name read for another (i for t), an
# index or an operator changed, `+=` written `=`.
_TREE_LOAD = _variants.program("""sh = where(i < n, take(x, i), 0.0)
""")
_TREE_LEVEL = _variants.program("""sh = put(sh, t, take(sh, t) + take(sh, t + s), t < s)
""")
_TREE_FINAL = _variants.program("""partial = take(sh, 0)
return (partial,)
""")


def _take(a: Any, idx: Any) -> Any:
    """a[idx] row by row (a block's slots; x when a is one-dimensional); NaN where idx is
    outside a (a thread that reads there must not be active: _put refuses such a store)."""
    idx = K.np.asarray(idx)
    if idx.dtype.kind not in "iu":
        raise TypeError("index")
    width = a.shape[-1]
    inside = (idx >= 0) & (idx < width)
    safe = K.np.where(inside, idx, 0)
    if a.ndim == 1:
        return K.np.where(inside, a[safe], K.np.nan)
    rows = a.shape[0]
    if idx.ndim == 0:
        return a[:, int(idx)] if inside else K.np.full(rows, K.np.nan)
    safe = K.np.broadcast_to(safe, (rows, idx.shape[-1]))
    return K.np.where(inside, K.np.take_along_axis(a, safe, axis=1), K.np.nan)


def _put(a: Any, idx: Any, value: Any, cond: Any) -> Any:
    """a copy of a with value stored at idx where cond holds, row by row."""
    rows, width = a.shape
    idx = K.np.broadcast_to(K.np.asarray(idx), (rows, width))
    cond = K.np.broadcast_to(K.np.asarray(cond, dtype=bool), (rows, width))
    value = K.np.broadcast_to(K.np.asarray(value, dtype=K.float64), (rows, width))
    if idx.dtype.kind not in "iu" or (cond & ((idx < 0) | (idx >= width))).any() or \
            (cond & K.np.isnan(value)).any():  # a store or a read outside the block's slots
        raise IndexError("index")
    out = a.copy()
    for b in range(rows):
        where = idx[b][cond[b]]
        if K.np.unique(where).size != where.size:  # two threads storing one slot: a race,
            raise IndexError("index")  # which the record names when the kernel does it
        out[b, where] = value[b][cond[b]]
    return out


def _tree_one_change(got: Any, x: Any, n: int, blocks: int, ctx: dict) -> None:
    """Name the one change of the lesson's block sum that gives every block's sum."""
    t = K.np.arange(TPB)[None, :]
    i = K.np.arange(blocks)[:, None] * TPB + t
    xp = K.np.concatenate([x.astype(K.float64), K.np.zeros(blocks * TPB - n)])
    levels = []
    s = TPB // 2
    while s > 0:
        levels.append(({"s": s}, None))
        s //= 2
    found = _variants.match_loop(
        _TREE_LEVEL, _TREE_FINAL, {"sh": K.np.zeros((blocks, TPB))}, levels,
        {"x": xp, "n": n, "t": t, "i": i, "blocks": blocks, "TPB": TPB},
        (got.astype(K.float64),),
        {"where": K.np.where, "take": _take, "put": _put}, rtol=1e-4, atol=1e-4 * TPB,
        before=_TREE_LOAD)
    if found is not None and found.also:  # two statements give these sums: neither named
        return
    if found is None:
        _tree_levels(got, xp, n, t, i, blocks, ctx)
        return
    K.fail("wrong_formula", T(
        "partial holds, for every block, what the lesson's block sum gives with `{wrong}` in "
        "place of `{right}`. The block sum: `sh[t] = x[i] if i < n else 0.0`; then, for s = "
        "TPB // 2 down to 1, threads t < s do `sh[t] += sh[t + s]`; thread 0 stores "
        "`partial[blockIdx.x] = sh[0]`. Look for that change in your code: a name, an index "
        "or an operator.", wrong=_tree_words(found.wrong), right=_tree_words(found.right)),
        context=ctx)


def _tree_levels(got: Any, xp: Any, n: int, t: Any, i: Any, blocks: int, ctx: dict) -> None:
    """The lesson's tree run with other levels (s starting elsewhere than TPB // 2, divided
    by another factor, the loop stopping at s > 1): the one that gives every block's sum."""
    fixed = {"x": xp, "n": n, "t": t, "i": i}
    functions = {"where": K.np.where, "take": _take, "put": _put}
    hits = []
    for stop in (0, 1):
        for factor in (2, 3, 4):
            for first in range(1, TPB + 1):
                levels, s = [], first
                while s > stop:
                    levels.append(({"s": s}, None))
                    s //= factor
                if (first, factor, stop) == (TPB // 2, 2, 0) or not levels:
                    continue
                got_here = _variants.run_loop(_TREE_LEVEL, _TREE_FINAL,
                                              {"sh": K.np.zeros((blocks, TPB))}, levels, fixed,
                                              functions, before=_TREE_LOAD)
                if _variants.same((got.astype(K.float64),), got_here, 1e-4, 1e-4 * TPB):
                    seq = tuple(v["s"] for v, _a in levels)
                    if seq not in hits:
                        hits.append(seq)
    if len(hits) != 1:  # none, or several level sequences give these sums: nothing singled out
        return
    K.fail("wrong_formula", T(
        "partial holds, for every block, what the lesson's tree gives with the levels s = "
        "{levels}: the tree's levels are s = {right}, starting at TPB // 2 and halving "
        "(s //= 2) while s > 0. Check the loop's start, its step and its condition.",
        levels=", ".join(map(str, hits[0])),
        right=", ".join(str(TPB >> k) for k in range(1, int(math.log2(TPB)) + 1))),
        context=ctx)


class _KernelWords(ast.NodeTransformer):
    """take(a, i) -> a[i]; where(c, a, b) -> a if c else b (put is said by _tree_words)."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = node.func.id if isinstance(node.func, ast.Name) else ""
        if name == "take" and len(node.args) == 2:
            return ast.Subscript(node.args[0], node.args[1], ast.Load())
        if name == "where" and len(node.args) == 3:
            return ast.IfExp(node.args[0], node.args[1], node.args[2])
        return node


def _tree_words(code: str) -> str:
    """A statement of the tree program in the kernel's words: ``sh = put(sh, t, v, t < s)``
    is ``if t < s: sh[t] = v`` (``sh[t] += w`` when v is ``sh[t] + w``), the load
    ``sh[t] = ...``, the store ``partial[blockIdx.x] = sh[0]``."""
    stmt = ast.parse(code).body[0]
    if not isinstance(stmt, ast.Assign) or not isinstance(stmt.targets[0], ast.Name):
        return code
    value = _KernelWords().visit(stmt.value)
    target = stmt.targets[0].id
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
            value.func.id == "put" and len(value.args) == 4:
        arr, idx, val, cond = value.args
        slot = ast.unparse(ast.Subscript(arr, idx, ast.Store()))
        if isinstance(val, ast.BinOp) and isinstance(val.op, ast.Add) and \
                ast.unparse(val.left) == slot:
            return f"if {ast.unparse(cond)}: {slot} += {ast.unparse(val.right)}"
        return f"if {ast.unparse(cond)}: {slot} = {ast.unparse(val)}"
    where = {"sh": "sh[t]", "partial": "partial[blockIdx.x]"}.get(target, target)
    return f"{where} = {ast.unparse(value)}"


def _diagnose_sum(got: Any, want: Any, x: Any, n: int, blocks: int, ctx: dict,
                  obs: K.Observation) -> None:
    # A slot read that no thread stored is the mistake whatever it held: on a GPU it holds
    # whatever the last kernel left (often 0.0, so the sums can come out right by luck), in
    # the simulator a poison value. The record of stores decides, never the values.
    if obs.live and obs.unfilled:
        K.fail("unfilled_tile", _unfilled_words(
            obs, T("threads past the end of x must store 0.0 in their slot (sh[t] = x[i] "
                   "if i < n else 0.0).")), context=ctx)
    finite = got[~K.isnan(got)]
    if finite.size and K.abs(finite).max() > _BIG:
        if obs.live and not obs.races:  # every access seen: no barrier is missing
            K.fail("unfilled_tile", _read_before_store('block_sum'), context=ctx)
        K.fail("missing_barrier", T("{poison_hint}; threads past the end of x must store 0.0 "
                                    "in their slot.",
                                    poison_hint=_poison_hint('block_sum')), context=ctx)
    K.no_computed_nan(got, "partial", ctx)
    tol = 1e-4 * TPB
    ok = K.isclose(got, want, rtol=1e-4, atol=tol)
    if ok.all():
        return
    if K.isnan(got).any():
        K.compare(got, want, name="partial", formula=T("the sum of each block's elements"),
                  rtol=1e-4, atol=tol, context=ctx)
    if blocks > 1 and K.isclose(got, want[0], rtol=1e-4, atol=tol).all():
        K.fail("only_first_block", T("every block returned the sum of the first block's elements: index x with "
                 "cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x (or cuda.grid(1)), not "
                 "cuda.threadIdx.x alone."), context=ctx)
    if blocks > 1 and K.isclose(got, got[0], rtol=1e-5, atol=tol / 10).all():
        # blocks summing different data cannot agree on random input: i ignores the block
        K.fail("wrong_index", T("every block returned the same sum, {value:.6g}: the element index i does not "
                 "depend on the block. Index x with cuda.blockIdx.x * cuda.blockDim.x + "
                 "cuda.threadIdx.x (or cuda.grid(1))", value=float(got[0])), context=ctx)
    starts = K.full(n + TPB, 0.0, dtype=K.float64)
    starts[:n] = x
    by_block = K.np.array([starts[b:b + TPB].sum() for b in range(blocks)])
    if K.isclose(got, by_block, rtol=1e-4, atol=tol).all():
        K.fail("wrong_index", T("block b summed x[b : b + {tpb}], {tpb} elements starting at b: its first "
                 "element is blockIdx.x * blockDim.x, so i = cuda.blockIdx.x * "
                 "cuda.blockDim.x + cuda.threadIdx.x", tpb=TPB), context=ctx)
    if ok[:-1].all() and n % TPB:
        pads = blocks * TPB - n
        c = float(got[-1] - want[-1]) / pads
        if round(c) != 0 and abs(c - round(c)) < 1e-4:  # off by pads x a whole number
            K.fail("wrong_formula", T("only the last block is wrong, by exactly {pads} x {value:g}: its {pads} "
                     "threads past the end of x stored {value:g} in their slot, where 0.0 "
                     "belongs (sh[t] = x[i] if i < n else 0.0)", pads=pads,
                     value=float(round(c))), context=ctx)
        _tree_one_change(got, x, n, blocks, ctx)
        K.fail("wrong_values", T("only the last block, which holds the tail "
                 "(x[{blocks_minus_1_times_tpb}:{n}]), is wrong: threads past the end of x "
                 "must add 0.0, and the elements before the end must all be counted.",
                 blocks_minus_1_times_tpb=(blocks - 1) * TPB, n=n), context=ctx)
    halves = {
        T("the sum of each block's first half only"): 0.5,
        T("the sum of each block's first quarter only"): 0.25,
    }
    pad = K.full(blocks * TPB, 0.0, dtype=K.float64)
    pad[:n] = x
    per = pad.reshape(blocks, TPB)
    for label, frac in halves.items():
        if K.isclose(got, per[:, :int(TPB * frac)].sum(axis=1), rtol=1e-4, atol=tol).all():
            K.fail("wrong_formula", T("partial holds {label}: check the tree's stride. It starts at half the "
                     "block (s = TPB // 2), halves each step (s //= 2) and stops after s = 1, "
                     "with threads t < s adding slot t + s.", label=label), context=ctx)
    if K.isclose(got, per[:, 0], rtol=1e-4, atol=tol).all():
        K.fail("wrong_formula", T("partial holds just each block's first element: the tree never ran. Check its "
                 "loop (while s > 0: ...)."), context=ctx)
    try:  # every block's sum the same multiple of the right one: a factor twice or missing
        K.diagnose.factor(got, want, "partial", 1e-4, tol, None, "")
    except K.CheckFailure as exc:
        K.fail(exc.cause, exc.text_message or exc.message, context=ctx)
    _tree_one_change(got, x, n, blocks, ctx)
    bad = int(K.flatnonzero(~ok)[0])
    fmt = getattr(K, "fmt", repr)
    K.fail("wrong_values", T("partial[{bad}] = {got}, expected {want} (the sum of block {bad}'s elements): "
             "check the tree's stride (threads t < s add slot t + s, s halving from TPB // 2 "
             "to 1) and that every thread loads its own element.", bad=bad, got=fmt(got[bad]),
             want=fmt(want[bad])), context=ctx)
