"""Checkers for lesson 2: a 2D mirror kernel, a grid-stride SAXPY and a warp-shuffle sum.

Besides the numbers, each checks the technique its exercise teaches, from what every
simulated thread did (``_observe``; on a GPU through the simulator replay): each element
written once and each thread doing its share (not one thread, not every block, redoing
the whole array), and a warp sum made of shuffles by all 32 lanes, with masks that name
every lane taking part and no lane leaving before the shuffles (undefined behaviour that a
GPU may happen to sum right).
"""

from __future__ import annotations

# Causes each checker here raises only after a case's values matched the reference (the
# technique, not the values, was wrong): partial credit keeps the value thirds for them
# (cudacourse.grader.partial, through cudacourse.course.lessons.technique).
TECHNIQUE = {
    "check_mirror": ("serial_work", "redundant_work"),
    "check_saxpy": ("serial_work", "redundant_work"),
    "check_warp_sum": ("no_shuffle",),
}

from typing import Any

from . import kit as K
from .kit import resolve
from ..i18n import T

_FULL = 0xFFFFFFFF


def _warp_error(exc: BaseException) -> bool:
    """Whether a launch failure came from the simulator's warp model (simwarp)."""
    from ..runtime.simwarp import WarpError

    seen = exc
    for _ in range(4):
        seen = seen.__cause__ or seen.__context__
        if seen is None:
            return False
        if isinstance(seen, WarpError):
            return True
    return "WarpError" in str(exc)


# --- exercise 1: mirror an image left-right with a 2D grid --------------------------------

def _mirror_ref(img: Any) -> Any:
    return img[:, ::-1]


def _mirror_written_mask(shape: tuple, grid: tuple, block: tuple, swapped: bool) -> Any:
    """Which elements a kernel writes when it maps threads to (row, col) as given."""
    rows, cols = shape
    span_x, span_y = grid[0] * block[0], grid[1] * block[1]
    r_max, c_max = (span_x, span_y) if swapped else (span_y, span_x)
    mask = K.full(shape, False)
    mask[:min(rows, r_max), :min(cols, c_max)] = True
    return mask


def _mirror_exact_oob(recs: list, block: tuple, rows: int, cols: int) -> tuple[str, Any]:
    """(cause, message) for indices outside the image in a launch with no spare threads
    (every thread's (c, r) is inside), from how every such index relates to its thread's
    c and r: one off from the index it belongs at (off by one), the other axis' coordinate
    (x and y swapped), or neither (the arithmetic, shown, not named)."""
    def rel(x: Any) -> set:
        c, r = x.grid_index(block, 0), x.grid_index(block, 1)
        right = [r] if x.axis == 0 else [c, cols - 1 - c]
        other = [c, cols - 1 - c] if x.axis == 0 else [r, rows - 1 - r]
        return ({"off_by_one"} if any(abs(x.index - want) == 1 for want in right) else set()) \
            | ({"swapped_axes"} if x.index in other else set())

    r = recs[0]
    same = [x for x in recs if (x.array, x.axis) == (r.array, r.axis)]
    kinds = set.intersection(*(rel(x) for x in same))  # what every such index agrees with
    axis = T("rows (y)") if r.axis == 0 else T("columns (x)")
    c0, r0 = r.grid_index(block, 0), r.grid_index(block, 1)
    where = T("thread (c, r) = ({c}, {r}) {verb} {array} with index {index} on the {axis}, of "
              "size {size} (line {line}), although this launch has no spare threads",
              c=c0, r=r0, verb=T("wrote") if r.write else T("read"), array=r.array,
              index=r.index, axis=axis, size=r.size, line=r.line)
    if kinds == {"off_by_one"}:
        return ("off_by_one", T("{where}: that index is one away from the one this thread "
                                "owns: off by one? Thread (c, r) writes out[r, c] and reads "
                                "img[r, W - 1 - c].", where=where))
    if kinds == {"swapped_axes"}:
        return ("swapped_axes", T("{where}: that index is the thread's coordinate on the other "
                                  "axis: are x and y swapped? cuda.grid(2) returns (x, y) = "
                                  "(column, row): c, r = cuda.grid(2).", where=where))
    return ("out_of_bounds_write" if r.write else "out_of_bounds_read",
            T("{where}: check how that index is computed (thread (c, r) writes out[r, c] and "
              "reads img[r, W - 1 - c]).", where=where))


def _mirror_cases(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> list:
    """check_mirror's cases, observed here in the simulator (see O.kernel_cases)."""
    # ((rows, cols), (bx, by), spare blocks); hidden ones: the master's hidden test cell
    cases, seed = resolve(hidden, [((24, 40), (8, 8), 0), ((19, 45), (16, 8), 1),
                                   ((45, 19), (8, 16), 1)], seed, name="check_mirror")
    gen = K.rng(seed)
    for (rows, cols), (bx, by), spare in cases:
        img = K.random_array(gen, (rows, cols))
        gimg = K.to_device_guarded(img, "img")
        out = K.output((rows, cols), "out")
        grid = (-(-cols // bx) + spare, -(-rows // by) + spare)
        ctx = {T("image (rows, columns)"): (rows, cols), T("grid (x, y)"): grid,
               T("block (x, y)"): (bx, by)}
        exact = spare == 0 and rows % by == 0 and cols % bx == 0

        def oob(recs: list, block: tuple) -> tuple[str, str]:
            r = recs[0]
            axis = T("rows (y)") if r.axis == 0 else T("columns (x)")
            if exact:
                return _mirror_exact_oob(recs, block, rows, cols)
            check = "r < img.shape[0]" if r.axis == 0 else "c < img.shape[1]"
            return ("out_of_bounds_write" if r.write else "out_of_bounds_read",
                    T("a thread outside the image indexed {index} on the {axis}, of size "
                      "{size}: missing bounds guard on the {axis}? Guard both: if r < "
                      "img.shape[0] and c < img.shape[1] (here {check} failed).", index=r.index,
                      axis=axis, size=r.size, check=check))

        with K.observing() as obs:
            K.launch(kernel, grid, (bx, by), obs.watch(gimg.view, "img"), obs.watch(out.view, "out"), name="mirror", context=ctx, oob=oob, obs=obs)
        K.no_return_value(obs, "mirror", "out[r, c]", ctx)
        hint = (T("this launch has no spare threads, so an index is computed wrongly: are x "
                  "and y swapped? x is the column and y the row (c, r = cuda.grid(2))") if exact else
                T("missing bounds guard on the rows or columns (if r < H and c < W)?"))
        K.check_guards(out, hint, ctx)
        got = out.result()
        K.no_computed_nan(got, "out", ctx)
        want = _mirror_ref(img)
        written = ~K.isnan(got)
        if not written.all():
            if (written == _mirror_written_mask((rows, cols), grid, (bx, by), True)).all():
                K.fail("swapped_axes", T(
                       "the elements written form the region a kernel with rows and columns "
                       "swapped would reach, in its indices or in its bounds guard: "
                       "cuda.grid(2) returns (x, y) = (column, row), so write "
                       "c, r = cuda.grid(2), guard with `if r < img.shape[0] and "
                       "c < img.shape[1]` and write out[r, c]."), context=ctx)
            first = K.full((rows, cols), False)
            first[:by, :bx] = True
            if (written == first).all():
                K.fail("only_first_block", T("only out[:{by}, :{bx}] was written, the part of block (0, 0): the "
                         "index must include cuda.blockIdx (cuda.grid(2) does it for you).",
                         by=by, bx=bx), context=ctx)
        K.compare(got, want, name="out", formula="img[r, W - 1 - c]", context=ctx,
                  reads=lambda at, cols=cols: {"img": [(at[0], cols - 1 - at[1])]},
                  alternatives={T("img itself (nothing mirrored)"): img,
                                T("img flipped upside down (rows mirrored, not columns)"):
                                    img[::-1, :],
                                T("img flipped both ways"): img[::-1, ::-1]})
        if not K.array_equal(gimg.result(), img):
            K.fail("inputs_changed", T("mirror changed img; only out should be written."), context=ctx)
        K.spread(obs, "out", rows * cols, grid[0] * grid[1] * bx * by, "mirror", ctx,
                 per_thread=T("one pixel: c, r = cuda.grid(2)"))
    return cases


def check_mirror(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> str:
    """Check ``kernel(img, out)`` writes ``out[r, c] = img[r, W - 1 - c]`` for a 2D launch
    with ``block = (bx, by)`` over (x = columns, y = rows).

    The first case has no spare threads (its shape is a multiple of the block), so any index
    outside the image there is wrong arithmetic (off by one, x and y swapped). The others
    are not multiples of the block in either direction and add a spare block row and column,
    which only a 2D bounds guard survives. Every element must be written once, by a thread
    of its own (or a grid-stride loop): one thread mirroring the whole image fails.
    """
    cases = K.kernel_cases(_mirror_cases, kernel, "mirror", 2, hidden=hidden, seed=seed)
    return K.passes("mirror", T("{n_cases} image shapes",
                                n_cases=len(cases)), T("exact and ragged edges"),
             T("a spare block row and column"), T("each pixel written once, by its own thread"),
             hidden=hidden)


# --- exercise 2: a grid-stride SAXPY ---------------------------------------------------------

def _saxpy_cases(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> list:
    """check_saxpy's cases, observed here in the simulator (see O.kernel_cases)."""
    cases, seed = resolve(hidden, [(1000, 2, 64), (50, 2, 64), (777, 3, 32)], seed,
                          name="check_saxpy")
    gen = K.rng(seed)
    for n, blocks, tpb in cases:
        a = K.float32(gen.uniform(1.5, 3.0))
        x = K.random_array(gen, n)
        y = K.random_array(gen, n)
        gx, gy = K.to_device_guarded(x, "x"), K.to_device_guarded(y, "y")
        out = K.output(n, "out")
        threads = blocks * tpb
        ctx = {"n": n, "blocks": blocks, "threads_per_block": tpb, "threads": threads}
        small = threads < n

        def oob(recs: list, block: tuple) -> tuple[str, str] | None:
            r = recs[0]
            if r.index < 0:
                return None
            if small:
                return ("off_by_one" if r.index == r.size else "out_of_bounds_read",
                        T("indexed {array}[{index}] (size {size}, line {line}) although this "
                          "launch has fewer threads than elements: off by one in the index or "
                          "the loop bounds? Loop i in range(cuda.grid(1), n, "
                          "cuda.gridsize(1)).", array=r.array, index=r.index, size=r.size,
                          line=r.line))
            words = K.out_of_bounds_words(recs, block, "saxpy")
            if words[0] in ("off_by_one_guard", "off_by_one"):
                return words
            return ("out_of_bounds_write" if r.write else "out_of_bounds_read",
                    T("a thread past the end used {array}[{index}] (size {size}, line {line}): "
                      "missing bounds guard? range(cuda.grid(1), n, cuda.gridsize(1)) is empty "
                      "for such a thread.", array=r.array, index=r.index, size=r.size,
                      line=r.line))

        with K.observing() as obs:
            K.launch(kernel, blocks, tpb, a, obs.watch(gx.view, "x"), obs.watch(gy.view, "y"), obs.watch(out.view, "out"), name="saxpy", context=ctx, oob=oob, obs=obs)
        K.no_return_value(obs, "saxpy", "out[i]", ctx)
        K.check_guards(out, T("missing bounds guard (loop while i < n)?"), ctx)
        got = out.result()
        K.no_computed_nan(got, "out", ctx)
        want = a.astype(K.float64) * x + y
        written = ~K.isnan(got)
        if small and not written.all():
            nw = K.flatnonzero(~written)
            if written[:threads].all() and not written[threads:].any():
                K.fail("no_grid_stride", T("out[{threads}:] was never written: this launch has {threads} threads "
                         "for {n} elements on purpose, and each thread did one element. Did "
                         "you loop with cuda.gridsize(1)? for i in range(cuda.grid(1), n, "
                         "cuda.gridsize(1))", threads=threads, n=n), context=ctx)
            K.fail("unwritten", T("{size} of {n} elements of out were never written, the first at index "
                     "{nw}: did you loop with cuda.gridsize(1), starting at cuda.grid(1)?",
                     size=nw.size, n=n, nw=int(nw[0])), context=ctx)
        K.compare(got, want, name="out", formula="a * x[i] + y[i]", block=tpb, context=ctx,
                  reads=lambda at: {"x": [at], "y": [at]},
                  alternatives={T("a * x[i] (y ignored)"): a * x, T("x[i] + y[i] (a ignored)"): x + y,
                                T("a * y[i] + x[i] (x and y swapped)"): a * y + x,
                                T("a * x[i] - y[i] (y subtracted, not added)"): a * x - y,
                                T("a + x[i] + y[i] (a added, not multiplied)"): a + x + y,
                                "a * (x[i] + y[i])": a * (x + y)})
        if not K.array_equal(gx.result(), x) or not K.array_equal(gy.result(), y):
            K.fail("inputs_changed", T("saxpy changed x or y; only out should be written."), context=ctx)
        K.spread(obs, "out", n, threads, "saxpy", ctx,
                 per_thread=T("the elements cuda.grid(1), + cuda.gridsize(1), + 2 * "
                              "cuda.gridsize(1)... (for i in range(cuda.grid(1), n, "
                              "cuda.gridsize(1)))"))
    return cases


def check_saxpy(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> str:
    """Check ``kernel(a, x, y, out)`` writes ``out[i] = a * x[i] + y[i]`` for every i with
    a grid-stride loop: the launch has fewer threads than elements on purpose, and also more
    (a kernel must handle both). Each element must be written once, and each thread must
    do its share only: one thread looping over everything, or every block redoing the whole
    array, fails although the numbers are right."""
    cases = K.kernel_cases(_saxpy_cases, kernel, "saxpy", 4, hidden=hidden, seed=seed)
    return K.passes("saxpy", T("{n_cases} cases with fewer and more threads than elements",
                               n_cases=len(cases)),
             T("each element written once"), T("each thread doing its share of the grid-stride "
                                            "loop"),
             hidden=hidden)


# --- exercise 3: sum each warp's 32 values with shuffles -------------------------------------

def _warp_sums(x: Any) -> Any:
    n = x.shape[0]
    groups = -(-n // 32)
    padded = K.full(groups * 32, 0.0, dtype=K.float64)
    padded[:n] = x
    return padded.reshape(groups, 32).sum(axis=1), padded.reshape(groups, 32)


SHUFFLE_STEPS = 5  # log2(32): a warp's 32 values need 5 shuffle rounds


def _warp_sum_cases(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> list:
    """check_warp_sum's cases, observed here in the simulator (see O.kernel_cases)."""
    cases, seed = resolve(hidden, [(200, 64), (333, 96), (64, 32)], seed, name="check_warp_sum")
    gen = K.rng(seed)
    for n, tpb in cases:
        x = K.random_array(gen, n)
        gx = K.to_device_guarded(x, "x")
        groups = -(-n // 32)
        out = K.output(groups, "out")
        blocks = -(-n // tpb) + 1
        ctx = {"n": n, "warps_of_data": groups, "blocks": blocks, "threads_per_block": tpb}

        def oob(recs: list, block: tuple) -> tuple[str, str] | None:
            r = recs[0]
            if r.array == "x" and r.index >= n:
                return ("out_of_bounds_read",
                        T("read x[{index}] past its end (size {n}, line {line}): lanes past "
                          "the end must take part in the shuffles with the value 0 instead of "
                          "reading x (v = 0.0; if i < n: v = x[i]).", index=r.index, n=n,
                          line=r.line))
            if r.array == "out" and r.index >= groups:
                return ("out_of_bounds_write",
                        T("wrote out[{index}] past its end (size {groups}, line {line}): the "
                          "spare warps must not write: guard with i // 32 < out.shape[0].",
                          index=r.index, groups=groups, line=r.line))
            return None

        with K.observing() as obs:
            try:
                K.launch(kernel, blocks, tpb, obs.watch(gx.view, "x"), obs.watch(out.view, "out"), name="warp_sum", context=ctx, oob=oob, obs=obs)
            except K.CheckFailure as exc:
                if _warp_error(exc):
                    K.fail("warp_ub", T("{message} Every lane that runs the shuffle must be "
                                        "named in its mask: use 0xFFFFFFFF when all 32 lanes "
                                        "take part.",
                                        message=getattr(exc, 'message', exc)), context=ctx)
                raise
        K.no_return_value(obs, "warp_sum", "out[i // 32]", ctx)
        K.check_guards(out, T("the spare warps must not write: guard with i // 32 < "
                              "out.shape[0]"), ctx)
        got = out.result()
        K.no_computed_nan(got, "out", ctx)
        want, table = _warp_sums(x)
        ok = K.isclose(got, want, rtol=1e-4, atol=1e-4)
        if n % 32 and ok[:-1].all() and not ok[-1]:
            K.fail("early_return", T("every warp's sum is right except the last, partial warp's "
                     "(out[{groups_minus_1}] = {got}, expected {want}): lanes past the end of "
                     "x must still take part in every shuffle, with the value 0. Do not return "
                     "before the shuffles.", groups_minus_1=groups - 1,
                     got=K.fmt(got[-1]) if hasattr(K, 'fmt') else got[-1],
                     want=K.fmt(want[-1]) if hasattr(K, 'fmt') else want[-1]), context=ctx)
        K.compare(got, want, name="out", formula=T("the sum of x[32 w : 32 w + 32]"),
                  rtol=1e-4, atol=1e-4, context=ctx,
                  alternatives={
                      T("x[32 w], lane 0's own value (nothing reached lane 0: shfl_up_sync "
                        "moves values to higher lanes; use shfl_down_sync or shfl_xor_sync)"):
                          table[:, 0],
                      T("32 * x[32 w], lane 0's own value doubled on each of 5 steps (lane 0 "
                        "got its own value back every time: shfl_up_sync moves values to "
                        "higher lanes; use shfl_down_sync or shfl_xor_sync)"): 32 * table[:, 0],
                      T("the sum of only 16 lanes (start the offsets at 16, not 8)"): table[:, :16].sum(1),
                      T("the sum of only 8 lanes (start the offsets at 16, not 4)"): table[:, :8].sum(1),
                      T("the sum of only 2 lanes (halve the offset on every step, from 16 to "
                        "1)"):
                          table[:, :2].sum(1),
                      T("twice the sum (an offset of 32 reads the lane itself)"): 2 * want,
                      T("the maximum of the 32 values"): table.max(axis=1)})
        if not K.array_equal(gx.result(), x):
            K.fail("inputs_changed", T("warp_sum changed x; only out should be written."), context=ctx)
        _check_shuffles(obs, n, tpb, ctx)
    return cases


def check_warp_sum(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> str:
    """Check ``kernel(x, out)`` writes ``out[w] = x[32 w] + ... + x[32 w + 31]`` (missing
    elements past the end count as 0), one warp per group, summed with warp shuffles.

    Lengths are not multiples of 32 (the last warp is partial), blocks hold several warps, and
    a spare block follows, whose warps must not write. The technique is checked too: each
    lane reads its own element of x, and every lane of a warp with data takes part in at
    least 5 shuffle rounds (shfl_down_sync, shfl_xor_sync...): lane 0 looping over 32 values
    or through shared memory fails, however right its sums.
    """
    cases = K.kernel_cases(_warp_sum_cases, kernel, "warp_sum", 2, hidden=hidden, seed=seed)
    return K.passes("warp_sum", T("{n_cases} lengths with a partial last warp",
                                  n_cases=len(cases)),
             T("several warps per block and a spare block"),
             T("every lane reading its own element and taking part in {shuffle_steps} or more "
               "shuffle rounds", shuffle_steps=SHUFFLE_STEPS), hidden=hidden)


def _check_shuffles(obs: K.Observation, n: int, tpb: int, ctx: dict) -> None:
    """The sum is made by shuffles: no lane reads another lane's element of x, and every
    lane of a warp that holds data calls a shuffle at least SHUFFLE_STEPS times."""
    if not obs.live:
        return
    who, most = obs.log("x").busiest_reader()
    if most > 1:
        lane = who[1][0] % 32
        K.fail("no_shuffle", T("lane {lane} of a warp ({thread_name}) read {most} elements of x by itself: "
                 "the sum is not made with shuffles. Each lane reads its own element (v = "
                 "x[i]) and the warp adds them with v += cuda.shfl_down_sync(0xFFFFFFFF, v, "
                 "offset) for offset = 16, 8, 4, 2, 1.", lane=lane,
                 thread_name=K.thread_name(who), most=most), context=ctx)
    warps_with_data = -(-n // 32)
    short = []
    for w in range(warps_with_data):
        block, first = divmod(w * 32, tpb)
        for lane in range(32):
            t = first + lane
            if w * 32 + lane >= warps_with_data * 32 or t >= tpb:
                break
            key = ((block, 0, 0), (t, 0, 0))
            if obs.shuffles.get(key, 0) < SHUFFLE_STEPS:
                short.append((key, obs.shuffles.get(key, 0)))
                break
        if short:
            break
    if short:
        key, calls = short[0]
        K.fail("no_shuffle", T("{thread_name} took part in {calls} warp shuffle(s), but adding a warp's 32 "
                 "values takes {shuffle_steps} rounds in which every lane shuffles (offsets "
                 "16, 8, 4, 2, 1): the sum must be made with cuda.shfl_down_sync (or "
                 "shfl_xor_sync), by all 32 lanes, not by one lane or through shared memory.",
                 thread_name=K.thread_name(key), calls=calls, shuffle_steps=SHUFFLE_STEPS), context=ctx)
