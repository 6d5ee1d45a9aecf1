"""Checkers for lesson 2: a 2D mirror kernel, a grid-stride SAXPY and a warp-shuffle sum."""

from __future__ import annotations

import re
from typing import Any

from . import _engine as E

_OOB = re.compile(r"index (-?\d+) on an axis of size (\d+)")
_FULL = 0xFFFFFFFF


def _launch(kernel: Any, grid: Any, block: Any, *args: Any, name: str, ctx: str,
            oob: Any = None, extra: Any = None) -> None:
    """``E.launch``, with the out-of-bounds and warp diagnoses made specific to the exercise:
    ``oob(index, size)`` returns a better message (or "") for an index outside an array."""
    try:
        E.launch(kernel, grid, block, *args, name=name)
    except E.CheckFailure as exc:
        text = str(exc)
        m = _OOB.search(text)
        if m and oob is not None:
            better = oob(int(m.group(1)), int(m.group(2)))
            if better:
                E.fail(f"{better} [{ctx}]")
        if "WarpError" in text and extra:
            E.fail(f"{text}\n{extra} [{ctx}]")
        E.fail(f"{text} [{ctx}]")


# --- exercise 1: mirror an image left-right with a 2D grid --------------------------------

def _mirror_ref(img: Any) -> Any:
    return img[:, ::-1]


def _mirror_written_mask(shape: tuple, grid: tuple, block: tuple, swapped: bool) -> Any:
    """Which elements a kernel writes when it maps threads to (row, col) as given."""
    rows, cols = shape
    span_x, span_y = grid[0] * block[0], grid[1] * block[1]
    r_max, c_max = (span_x, span_y) if swapped else (span_y, span_x)
    mask = E._full(shape, False)
    mask[:min(rows, r_max), :min(cols, c_max)] = True
    return mask


def check_mirror(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> None:
    """Check ``kernel(img, out)`` writes ``out[r, c] = img[r, W - 1 - c]`` for a 2D launch
    with ``block = (bx, by)`` over (x = columns, y = rows).

    The first case has no spare threads (its shape is a multiple of the block), so any index
    outside the image there is wrong arithmetic (off by one, x and y swapped). The others
    are not multiples of the block in either direction and add a spare block row and column,
    which only a 2D bounds guard survives.
    """
    E.require_kernel(kernel, "mirror", 2)
    gen = E.rng(seed)
    if not hidden:
        cases = [((24, 40), (8, 8), 0), ((19, 45), (16, 8), 1), ((45, 19), (8, 16), 1)]
    else:
        cases = [((16, 48), (16, 4), 0), ((27, 35), (8, 8), 1), ((33, 7), (4, 32), 1)]
    for (rows, cols), (bx, by), spare in cases:
        img = E.random_array(gen, (rows, cols))
        gimg = E.to_device_guarded(img, "img")
        out = E.Guarded.make((rows, cols), E._float32, "out")
        grid = (-(-cols // bx) + spare, -(-rows // by) + spare)
        ctx = (f"image {rows}x{cols} (rows x columns), grid {grid} of blocks {(bx, by)} "
               "as (x, y)")
        exact = spare == 0 and rows % by == 0 and cols % bx == 0

        def oob(index: int, size: int) -> str:
            axis = "rows (y)" if size == rows else "columns (x)" if size == cols else ""
            if exact:
                if size == cols and index == cols:
                    return ("read or wrote column W (one past the last): off by one? The "
                            "mirror of column c is W - 1 - c.")
                return (f"indexed {index} on the {axis or 'array'} of size {size} although "
                        "this launch has no spare threads: are x and y swapped? "
                        "cuda.grid(2) returns (x, y) = (column, row): c, r = cuda.grid(2).")
            if axis:
                check = "r < img.shape[0]" if size == rows else "c < img.shape[1]"
                return (f"a thread outside the image indexed {index} on the {axis}, of size "
                        f"{size}: missing bounds guard on the {axis}? Guard both: "
                        f"if r < img.shape[0] and c < img.shape[1] (here {check} failed).")
            return ""

        _launch(kernel, grid, (bx, by), gimg.view, out.view, name="mirror", ctx=ctx, oob=oob)
        hint = ("this launch has no spare threads, so an index is computed wrongly: are x and "
                "y swapped? x is the column and y the row (c, r = cuda.grid(2))" if exact else
                "missing bounds guard on the rows or columns (if r < H and c < W)?")
        out.check_guards(hint)
        got = out.result()
        want = _mirror_ref(img)
        written = ~E._isnan(got)
        if not written.all():
            if (written == _mirror_written_mask((rows, cols), grid, (bx, by), True)).all():
                E.fail("the elements written form the region a kernel with rows and columns "
                       "swapped would reach: cuda.grid(2) returns (x, y) = (column, row), so "
                       f"write c, r = cuda.grid(2) and out[r, c] [{ctx}]")
            first = E._full((rows, cols), False)
            first[:by, :bx] = True
            if (written == first).all():
                E.fail(f"only out[:{by}, :{bx}] was written, the part of block (0, 0): the "
                       "index must include cuda.blockIdx (cuda.grid(2) does it for you) "
                       f"[{ctx}]")
        E.compare(got, want, name="out", formula="img[r, W - 1 - c]", context=ctx,
                  alternatives={"img itself (nothing mirrored)": img,
                                "img flipped upside down (rows mirrored, not columns)":
                                    img[::-1, :],
                                "img flipped both ways": img[::-1, ::-1]})
        if not E._array_equal(gimg.result(), img):
            E.fail(f"mirror changed img; only out should be written [{ctx}].")


# --- exercise 2: a grid-stride SAXPY ---------------------------------------------------------

def check_saxpy(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> None:
    """Check ``kernel(a, x, y, out)`` writes ``out[i] = a * x[i] + y[i]`` for every i with
    a grid-stride loop: the launch has fewer threads than elements on purpose, and also more
    (a kernel must handle both). In the simulator, reads of ``x`` are counted, so a loop that
    makes several threads redo the same element is found."""
    E.require_kernel(kernel, "saxpy", 4)
    gen = E.rng(seed)
    if not hidden:
        cases = [(1000, 2, 64), (50, 2, 64), (777, 3, 32)]
    else:
        cases = [(1531, 3, 64), (97, 4, 32), (640, 1, 128)]
    for n, blocks, tpb in cases:
        a = E._float32(gen.uniform(1.5, 3.0))
        x = E.random_array(gen, n)
        y = E.random_array(gen, n)
        gx, gy = E.to_device_guarded(x, "x"), E.to_device_guarded(y, "y")
        out = E.Guarded.make(n, E._float32, "out")
        threads = blocks * tpb
        ctx = f"n={n}, {blocks} blocks of {tpb} threads = {threads} threads"
        small = threads < n

        def oob(index: int, size: int) -> str:
            if small:
                return (f"indexed {index} in an array of size {size} although this launch has "
                        "fewer threads than elements: off by one in the index or the loop "
                        "bounds? Loop i in range(cuda.grid(1), n, cuda.gridsize(1)).")
            return (f"a thread past the end indexed {index} (size {size}): missing bounds "
                    "guard? range(cuda.grid(1), n, cuda.gridsize(1)) is empty for such a "
                    "thread.")

        _launch(kernel, blocks, tpb, a, gx.view, gy.view, out.view, name="saxpy", ctx=ctx,
                oob=oob)
        out.check_guards()
        got = out.result()
        want = a.astype(E._float64) * x + y
        written = ~E._isnan(got)
        if small and not written.all():
            nw = E._flatnonzero(~written)
            if written[:threads].all() and not written[threads:].any():
                E.fail(f"out[{threads}:] was never written: this launch has {threads} threads "
                       f"for {n} elements on purpose, and each thread did one element. Did you "
                       "loop with cuda.gridsize(1)? for i in range(cuda.grid(1), n, "
                       f"cuda.gridsize(1)) [{ctx}]")
            E.fail(f"{nw.size} of {n} elements of out were never written, the first at index "
                   f"{int(nw[0])}: did you loop with cuda.gridsize(1), starting at "
                   f"cuda.grid(1)? [{ctx}]")
        E.compare(got, want, name="out", formula="a * x[i] + y[i]", block=tpb, context=ctx,
                  alternatives={"a * x[i] (y ignored)": a * x, "x[i] + y[i] (a ignored)": x + y,
                                "a * y[i] + x[i] (x and y swapped)": a * y + x,
                                "a * (x[i] + y[i])": a * (x + y)})
        if not E._array_equal(gx.result(), x) or not E._array_equal(gy.result(), y):
            E.fail(f"saxpy changed x or y; only out should be written [{ctx}].")
        if E.simulator() and small:
            _check_each_element_once(kernel, blocks, tpb, a, x, y, ctx)


def _check_each_element_once(kernel: Any, blocks: int, tpb: int, a: Any, x: Any, y: Any,
                             ctx: str) -> None:
    """Simulator only: every element of x should be read once, not once per block."""
    from numba import cuda

    cx, counter = E.counting_array(x)
    out = cuda.device_array(x.shape[0], dtype=E._float32)
    _launch(kernel, blocks, tpb, a, cx, cuda.to_device(y), out, name="saxpy", ctx=ctx)
    n = x.shape[0]
    if counter.n > n:
        E.fail(f"x was read {counter.n} times for {n} elements: several threads handle the "
               "same element. Start at cuda.grid(1) (not threadIdx.x) and step by "
               f"cuda.gridsize(1) (not blockDim.x) [{ctx}]")


# --- exercise 3: sum each warp's 32 values with shuffles -------------------------------------

def _warp_sums(x: Any) -> Any:
    n = x.shape[0]
    groups = -(-n // 32)
    padded = E._full(groups * 32, 0.0, dtype=E._float64)
    padded[:n] = x
    return padded.reshape(groups, 32).sum(axis=1), padded.reshape(groups, 32)


def check_warp_sum(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> None:
    """Check ``kernel(x, out)`` writes ``out[w] = x[32 w] + ... + x[32 w + 31]`` (missing
    elements past the end count as 0), one warp per group, summed with warp shuffles.

    Lengths are not multiples of 32 (the last warp is partial), blocks hold several warps, and
    a spare block follows, whose warps must not write.
    """
    E.require_kernel(kernel, "warp_sum", 2)
    gen = E.rng(seed)
    cases = [(200, 64), (333, 96), (64, 32)] if not hidden else [(513, 128), (95, 32), (250, 64)]
    for n, tpb in cases:
        x = E.random_array(gen, n)
        gx = E.to_device_guarded(x, "x")
        groups = -(-n // 32)
        out = E.Guarded.make(groups, E._float32, "out")
        blocks = -(-n // tpb) + 1
        ctx = f"n={n} ({groups} warps of data), {blocks} blocks of {tpb} threads"

        def oob(index: int, size: int) -> str:
            if size == n:
                return (f"read x[{index}] past its end (size {n}): lanes past the end must "
                        "take part in the shuffles with the value 0 instead of reading x (v = 0.0; "
                        "if i < n: v = x[i]).")
            if size == groups:
                return (f"wrote out[{index}] past its end (size {groups}): the spare warps "
                        "must not write: guard with i // 32 < out.shape[0].")
            return ""

        _launch(kernel, blocks, tpb, gx.view, out.view, name="warp_sum", ctx=ctx, oob=oob,
                extra="Every lane that runs the shuffle must be named in its mask: use "
                      "0xFFFFFFFF when all 32 lanes take part.")
        out.check_guards("the spare warps must not write: guard with i // 32 < out.shape[0]")
        got = out.result()
        want, table = _warp_sums(x)
        ok = E._isclose(got, want, rtol=1e-4, atol=1e-4)
        if n % 32 and ok[:-1].all() and not ok[-1]:
            E.fail(f"every warp's sum is right except the last, partial warp's (out[{groups - 1}]"
                   f" = {got[-1]!r}, expected {want[-1]!r}): lanes past the end of x must still "
                   "take part in every shuffle, with the value 0. Do not return before the "
                   f"shuffles [{ctx}]")
        E.compare(got, want, name="out", formula="the sum of x[32 w : 32 w + 32]",
                  rtol=1e-4, atol=1e-4, context=ctx,
                  alternatives={
                      "x[32 w], lane 0's own value (nothing reached lane 0: shfl_up_sync "
                      "moves values to higher lanes; use shfl_down_sync or shfl_xor_sync)":
                          table[:, 0],
                      "32 * x[32 w], lane 0's own value doubled on each of 5 steps (lane 0 "
                      "got its own value back every time: shfl_up_sync moves values to "
                      "higher lanes; use shfl_down_sync or shfl_xor_sync)": 32 * table[:, 0],
                      "the sum of only 16 lanes (start the offsets at 16, not 8)": table[:, :16].sum(1),
                      "the sum of only 8 lanes (start the offsets at 16, not 4)": table[:, :8].sum(1),
                      "the sum of only 2 lanes (halve the offset on every step, from 16 to 1)":
                          table[:, :2].sum(1),
                      "twice the sum (an offset of 32 reads the lane itself)": 2 * want,
                      "the maximum of the 32 values": table.max(axis=1)})
        if not E._array_equal(gx.result(), x):
            E.fail(f"warp_sum changed x; only out should be written [{ctx}].")
