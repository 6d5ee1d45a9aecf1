"""Name the mistake behind a wrong output: the families ``_engine.compare`` tries before it
falls back to "check the arithmetic".

Each family has a footprint in the output alone (got against the reference), so it can be
told the same way on every device:

* **non-finite** values where the reference is finite (NaN or inf computed by the kernel,
  ``inf * 0`` or an overflow), with the first element where one appears and, when the
  checker gives them, the inputs there;
* **off by one on an axis**: the whole output (most of it) shifted by one row or one column,
  as an index, a halo origin or a tile origin one off makes it;
* **swapped axes**: the transpose, or the elements laid out with rows and columns exchanged;
* **a constant factor**: every element the same multiple of the expected one (a scale
  applied twice or missing, a sign flipped, a factor the checker names);
* **where the wrong cells are** (2-D): the first or last rows or columns, the outer
  boundary, or by tile region (edges, corners, centres) when the checker gives its tile.

``diagnose`` raises the first family that matches; ``ruled_out`` lists the ones it tried, for
the fallback's message (so "check the arithmetic" says what it is not).
"""

from __future__ import annotations

from typing import Any

import numpy as _np

from ..i18n import T
from ._failure import at, fail, fmt

_isclose = _np.isclose
_isfinite = _np.isfinite
_isnan = _np.isnan
_flatnonzero = _np.flatnonzero
_abs = _np.abs
_median = _np.median
_unravel_index = _np.unravel_index
_zeros = _np.zeros
_mgrid = _np.mgrid

AXES = {0: (T("rows"), T("row"), "y"), 1: (T("columns"), T("column"), "x")}


def nonfinite(got: Any, want: Any, name: str, inputs: dict | None, computed: bool,
              ctx: str) -> None:
    """NaN (when ``computed``: no element can be unwritten, e.g. a device function's return
    values) or inf anywhere the reference is finite: name the first element and its
    inputs."""
    g, w = got.ravel(), want.ravel()
    finite_w = _isfinite(w)
    bad = finite_w & (_isinf_or(g, computed))
    if not bad.any():
        return
    first = int(_flatnonzero(bad)[0])
    idx = _unravel_index(first, want.shape) if want.ndim > 1 else first
    where = ""
    if inputs:
        parts = []
        for k, v in inputs.items():
            a = _np.asarray(v)
            if a.shape == want.shape:
                parts.append(f"{k} = {fmt(a.ravel()[first])}")
        if parts:
            where = T(", where {inputs}", inputs=", ".join(parts))
    what = "NaN" if _isnan(g[first]) else ("inf" if g[first] > 0 else "-inf")
    fail("nonfinite", T("{name} holds {what} where the reference is finite, first at {at}{where} ({k} of "
           "{n} elements): an operation there produced it, such as inf * 0, inf - inf, 0 / 0 "
           "or an exp that overflowed. Look at what your code computes for those inputs{ctx}",
           name=name, what=what, at=at(name, idx), where=where, k=int(bad.sum()), n=g.size,
           ctx=ctx), index=_jsonable(idx), expected=fmt(w[first]))


def _isinf_or(g: Any, nan_too: bool) -> Any:
    out = _np.isinf(g)
    return out | _isnan(g) if nan_too else out


def _jsonable(idx: Any) -> Any:
    return [int(i) for i in idx] if isinstance(idx, tuple) else int(idx)


def shifted(got: Any, want: Any, name: str, rtol: float, atol: float, ctx: str) -> None:
    """2-D: most of the output equals the reference one row or one column away."""
    if got.ndim != 2 or min(got.shape) < 3:
        return
    head, tail = slice(None, -1), slice(1, None)
    for axis in (1, 0):
        for d in (1, -1):
            gs, ws = (head, tail) if d == 1 else (tail, head)  # got[k] against want[k + d]
            pick = (lambda sl: (slice(None), sl)) if axis == 1 else (lambda sl: (sl,))
            g, w, same = got[pick(gs)], want[pick(ws)], want[pick(gs)]
            if _isclose(g, w, rtol=rtol, atol=atol).mean() > 0.75 and \
                    _isclose(g, same, rtol=rtol, atol=atol).mean() < 0.5:
                lines, line, letter = AXES[axis]
                sign = "+" if d == 1 else "-"
                fail("off_by_one", T("{name}[y, x] holds the value expected at {letter} {sign} 1: off by one "
                       "along {letter} ({lines}). An index, a halo origin or a tile origin "
                       "is one {lines_one} away: check how {letter} is computed (for a "
                       "tile with a one-cell halo, the thread's own cell is tile[ty + 1, "
                       "tx + 1] and the tile starts at blockIdx * blockDim - 1){ctx}",
                       name=name, letter=letter, sign=sign, lines=lines, lines_one=line,
                       ctx=ctx), axis=letter)


def shifted_diagonally(got: Any, want: Any, name: str, rtol: float, atol: float,
                       ctx: str) -> None:
    """2-D: most of the output equals the reference one row AND one column away (a halo or
    tile origin off by one on both axes at once)."""
    if got.ndim != 2 or min(got.shape) < 3:
        return
    head, tail = slice(None, -1), slice(1, None)
    for dy in (1, -1):
        for dx in (1, -1):
            gy, wy = (head, tail) if dy == 1 else (tail, head)
            gx, wx = (head, tail) if dx == 1 else (tail, head)
            g, w, same = got[gy, gx], want[wy, wx], want[gy, gx]
            if _isclose(g, w, rtol=rtol, atol=atol).mean() > 0.75 and \
                    _isclose(g, same, rtol=rtol, atol=atol).mean() < 0.5:
                fail("off_by_one", T("{name}[y, x] holds the value expected at (y {sy} 1, x {sx} 1): off by "
                       "one along both axes at once. An origin is one cell away diagonally: "
                       "for a tile with a one-cell halo the tile starts at blockIdx * blockDim "
                       "- 1 on each axis and the thread's own cell is tile[ty + 1, tx + 1]"
                       "{ctx}", name=name, sy="+" if dy == 1 else "-",
                       sx="+" if dx == 1 else "-", ctx=ctx), axis="xy")


def swapped_coverage(unwritten: Any, grid: tuple, block: tuple, name: str, ctx: str) -> None:
    """2-D: the cells never written are exactly those a launch of ``grid`` x ``block``
    (x first) misses when x and y are exchanged in the kernel's indices or its guard."""
    ny, nx = unwritten.shape
    reach_x = grid[1] * block[1]  # with x and y exchanged, the y extent walks the columns
    reach_y = grid[0] * block[0]
    y, x = _mgrid[0:ny, 0:nx]
    missed = (x >= reach_x) | (y >= reach_y)
    if unwritten.any() and missed.any() and (unwritten == missed).all():
        fail("swapped_axes", T("the cells of {name} never written are exactly those a launch misses when x "
               "and y are exchanged (its threads reach {rx} columns and {ry} rows that way, "
               "of {nx} x {ny}): x and y are swapped in the indices or in the bounds guard. "
               "x, y = cuda.grid(2) gives x the column and y the row: write {name}[y, x] "
               "and guard with `if y < ny and x < nx`{ctx}", name=name, rx=min(reach_x, nx),
               ry=min(reach_y, ny), nx=nx, ny=ny, ctx=ctx))


def swapped(got: Any, want: Any, name: str, rtol: float, atol: float, ctx: str) -> None:
    """2-D: the transpose of the reference, or its elements with rows and columns
    exchanged in the layout (out[x, y] of a ny x nx result read back as ny x nx)."""
    if want.ndim != 2 or min(want.shape) < 2:
        return
    t = want.T
    same = t.shape == want.shape and _isclose(got, t, rtol=rtol, atol=atol).all()
    layout = _isclose(got.ravel(), t.ravel(), rtol=rtol, atol=atol).all()
    k = min(want.shape)  # non-square: out[x, y] stored where both fit, the leading square
    off = ~_np.eye(k, dtype=bool)
    square = k >= 3 and _isclose(got[:k, :k], want[:k, :k].T, rtol=rtol,
                                 atol=atol)[off].mean() > 0.9 and \
        _isclose(got[:k, :k], want[:k, :k], rtol=rtol, atol=atol)[off].mean() < 0.5
    if same or layout or square:
        fail("swapped_axes", T("{name} holds the reference with rows and columns swapped: y indexes the rows "
               "(the first index) and x the columns, so write {name}[y, x] with "
               "x, y = cuda.grid(2); check the indices, the guard and the grid for the same "
               "swap{ctx}", name=name, ctx=ctx))


def factor(got: Any, want: Any, name: str, rtol: float, atol: float,
           factors: dict | None, ctx: str) -> None:
    """Every element is the same multiple r of the expected one (r != 1)."""
    g, w = got.ravel().astype(_np.float64), want.ravel().astype(_np.float64)
    use = _isfinite(g) & _isfinite(w) & (_abs(w) > 10 * atol)
    if use.sum() < 2:
        return
    r = g[use] / w[use]
    k = float(_median(r))
    if abs(k - 1.0) < 1e-3 or not _isclose(r, k, rtol=max(rtol, 1e-4), atol=0).all():
        return
    if not _isclose(g, k * w, rtol=rtol, atol=atol).all():
        return
    for label, value in (factors or {}).items():
        value = float(value)
        for p, how in ((value, T("{f} is applied once more than it should be", f=label)),
                       (1.0 / value if value else 0.0, T("{f} is missing", f=label))):
            if p and abs(k - p) <= 1e-4 * abs(p) and abs(p - 1.0) > 1e-3:
                fail("wrong_scale", T("every element of {name} is {k} times the expected value: {how}"
                       "{ctx}", name=name, k=fmt(k), how=how, ctx=ctx), factor=fmt(k))
    why = (T("a factor applied twice") if abs(k - 2.0) < 1e-4 else
           T("half of it: a factor of 2 missing") if abs(k - 0.5) < 1e-4 else
           T("the sign is flipped") if abs(k + 1.0) < 1e-4 else
           T("a scale factor applied twice, or missing"))
    fail("wrong_scale", T("every element of {name} is {k} times the expected value ({why}){ctx}",
           name=name, k=fmt(k), why=why, ctx=ctx), factor=fmt(k))


def offset(got: Any, want: Any, name: str, rtol: float, atol: float, ctx: str) -> None:
    """Every element is the expected one plus the same amount d (d != 0): a sum that starts
    at d instead of 0, or a constant added once too often."""
    g, w = got.ravel().astype(_np.float64), want.ravel().astype(_np.float64)
    use = _isfinite(g) & _isfinite(w)
    if use.sum() < 2 or use.sum() < g.size:
        return
    d = g - w
    k = float(_median(d))
    scale = float(_np.max(_abs(w))) or 1.0
    if abs(k) <= max(atol, 1e-3 * scale) or not _isclose(d, k, rtol=0,
                                                         atol=max(atol, 1e-5 * scale)).all():
        return
    fail("constant_offset", T("every element of {name} is the expected value plus {d}: the "
                              "same amount added to each, such as a sum that starts at {d} "
                              "instead of 0{ctx}", name=name, d=fmt(k), ctx=ctx), offset=fmt(k))


def region(bad: Any, shape: tuple, tile: tuple | None) -> Any:
    """Where the wrong cells of a 2-D output are, in words (a ``T``), or None when they
    are spread out. ``tile``: (rows, columns) of the checker's tile, for tile regions."""
    if len(shape) != 2 or not bad.any():
        return None
    ny, nx = shape
    y, x = _mgrid[0:ny, 0:nx]
    named = [
        (T("in the first row"), y == 0), (T("in the last row"), y == ny - 1),
        (T("in the first column"), x == 0), (T("in the last column"), x == nx - 1),
        (T("in the first and last rows"), (y == 0) | (y == ny - 1)),
        (T("in the first and last columns"), (x == 0) | (x == nx - 1)),
        (T("on the outer boundary (the first and last rows and columns)"),
         (y == 0) | (x == 0) | (y == ny - 1) | (x == nx - 1)),
    ]
    if tile:
        ty, tx = tile
        py, px = y % ty, x % tx
        ex, ey = (px == 0) | (px == tx - 1), (py == 0) | (py == ty - 1)
        named += [
            (T("at the corners of the {ty} x {tx} tiles", ty=ty, tx=tx), ex & ey),
            (T("in the first row of each tile"), py == 0),
            (T("in the last row of each tile"), py == ty - 1),
            (T("in the first column of each tile"), px == 0),
            (T("in the last column of each tile"), px == tx - 1),
            (T("on the edges of the {ty} x {tx} tiles (next to the halo)", ty=ty, tx=tx),
             ex | ey),
            (T("inside the tiles (the centre), never on a tile's edge"), ~(ex | ey)),
        ]
    for words, mask in named:
        if mask.sum() < bad.size and not (bad & ~mask).any():
            return words
    return None


FAMILIES = (T("elements never written"), T("NaN or inf"), T("off by one (on each axis)"),
            T("swapped axes"), T("a constant factor (doubled, missing, sign)"),
            T("a formula the checker knows"))


def ruled_out(ndim: int, alternatives: bool) -> Any:
    """The families tried before the fallback, in words (a ``T`` whose parts are shown in
    the learner's language), for its message."""
    names = [f for f in FAMILIES if (ndim == 2 or f.template != "swapped axes")
             and (alternatives or f.template != "a formula the checker knows")]
    out = names[0]
    for f in names[1:]:
        out = T("{a}, {b}", a=out, b=f)
    return out
