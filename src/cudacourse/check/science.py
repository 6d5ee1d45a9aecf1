"""Checkers for lesson 6: the heat-diffusion stencil with its halo, the double-buffered time
loop, and the fused lattice Boltzmann step.

The stencil check looks at *where* a kernel is wrong, because each mistake has its own
footprint: cells on the tiles' edges (the halo was not loaded), at the tiles' corners only
(the corner cells of the halo were not loaded), on the grid's boundary (the walls were
overwritten), anywhere and differently from run to run (a missing barrier). In the
simulator, shared memory starts poisoned (``tiling.poisoned_shared``) so unloaded cells
stand out. The LBM check compares with the NumPy reference of the same step on small
periodic channels with walls and an obstacle, then uses physics to name the mistake: mass
must be conserved exactly, and errors confined to the nodes next to a solid node point at
bounce-back.
"""

from __future__ import annotations
from ..i18n import T

# Causes each checker here raises only after a case's values matched the reference (the
# technique, not the values, was wrong): partial credit keeps the value thirds for them
# (cudacourse.grader.partial, through cudacourse.course.lessons.technique).
TECHNIQUE = {
    "check_heat_step": ("wrong_technique",),
}

import ast
import math
from typing import Any

from . import _raised
from . import _variants
from . import kit as K
from .kit import memory_range, resolve, same_memory, sim_part, tracing
from ..i18n import N_, T
from ..kernels import lbm as _lbm
from ..kernels import stencil as _stencil
from ..i18n import T

TX, TY = 16, 8  # the stencil exercise's block (= tile) shape
LBM_BLOCK = (16, 4)  # the LBM exercise's block shape
_BIG = 1.0e20
_np = K.np  # the module; the functions this file calls most are captured below at import
_heat_ref = _stencil.heat_step_ref
_Stepper = _lbm.ReferenceStepper
_equilibrium = _lbm.equilibrium
_roll = _np.roll
_zeros = _np.zeros
_where = _np.where
_uint8 = _np.uint8


# --- the stencil step ----------------------------------------------------------------------

def _heat_case(kernel: Any, u: Any, alpha: float, spare: int, ctx: str) -> Any:
    ny, nx = u.shape
    gu = K.to_device_guarded(u, "u")
    out = K.Guarded.make((ny, nx), K.float32, "out")
    grid = (math.ceil(nx / TX) + spare, math.ceil(ny / TY))
    K.launch(kernel, grid, (TX, TY), gu.view, out.view, K.float32(alpha), name="heat_step")
    out.check_guards(T("a write outside out: guard the store with `if y < ny and x < nx`"))
    if not K.array_equal(gu.result(), u):
        K.fail("inputs_changed", T("heat_step wrote into its input u: an in-place update races its neighbours "
                 "(another block may still be loading the old value as its halo). Read only u, "
                 "write the new values to out; the time loop swaps the two [{ctx}].", ctx=ctx))
    return out.result()


def _tile_masks(ny: int, nx: int) -> tuple[Any, Any, Any]:
    """(boundary cells, cells on a tile's edge, cells at a tile's corner)."""
    y, x = _np.mgrid[0:ny, 0:nx]
    px, py = x % TX, y % TY
    ex = (px == 0) | (px == TX - 1)
    ey = (py == 0) | (py == TY - 1)
    boundary = (y == 0) | (x == 0) | (y == ny - 1) | (x == nx - 1)
    return boundary, (ex | ey) & ~boundary, ex & ey & ~boundary


def _heat_centre_alternatives(u: Any, alpha: float) -> dict:
    """The step with the centre value c taken from a neighbour (the thread's own cell one
    off in the tile), neighbours right: label -> result."""
    u = u.astype(K.float64)
    out = {}
    n, s_, w, e = u[:-2, 1:-1], u[2:, 1:-1], u[1:-1, :-2], u[1:-1, 2:]
    diag = u[:-2, :-2] + u[:-2, 2:] + u[2:, :-2] + u[2:, 2:]
    for words, c in ((T("the cell above"), n), (T("the cell below"), s_),
                     (T("the cell to the left"), w), (T("the cell to the right"), e)):
        alt = u.copy()
        alt[1:-1, 1:-1] = c + alpha * (4 * (n + s_ + w + e) + diag - 20 * c) / 6
        out[words] = alt
    return out


_COMPASS = {(-1, 0): "N", (1, 0): "S", (0, -1): "W", (0, 1): "E", (-1, -1): "NW",
            (-1, 1): "NE", (1, -1): "SW", (1, 1): "SE", (0, 0): "u"}


def _heat_neighbour_alternatives(u: Any, alpha: float) -> dict:
    """The step with one neighbour term read from another cell of the 3 x 3 window (a tile
    index one off in one term): (term, cell read) -> result, boundary kept."""
    u = u.astype(K.float64)
    ny, nx = u.shape

    def at(dy: int, dx: int) -> Any:
        return u[1 + dy:ny - 1 + dy, 1 + dx:nx - 1 + dx]

    c = at(0, 0)
    out = {}
    for term in _COMPASS:
        if term == (0, 0):
            continue
        for other in _COMPASS:
            if other == term:
                continue
            edges = sum(at(*d) for d in ((-1, 0), (1, 0), (0, -1), (0, 1)) if d != term)
            corners = sum(at(*d) for d in ((-1, -1), (-1, 1), (1, -1), (1, 1)) if d != term)
            if abs(term[0]) + abs(term[1]) == 1:
                edges = edges + at(*other)
            else:
                corners = corners + at(*other)
            alt = u.copy()
            alt[1:-1, 1:-1] = c + alpha * (4 * edges + corners - 20 * c) / 6
            out[(_COMPASS[term], _COMPASS[other])] = alt
    return out


def _heat_formula_alternatives(u: Any, alpha: float) -> dict:
    """The step with one sign, operator or factor of its formula wrong (neighbours read
    right): words -> result, boundary kept."""
    u = u.astype(K.float64)
    ny, nx = u.shape
    c = u[1:-1, 1:-1]
    edges = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
    corners = u[:-2, :-2] + u[:-2, 2:] + u[2:, :-2] + u[2:, 2:]
    lap = 4.0 * edges + corners - 20.0 * c
    s = (_np.arange(1, nx - 1) % TX + 1)[None, :]  # the tile column of each cell
    inner = {
        T("+ 20 u where - 20 u belongs: the centre's weight is subtracted"):
            c + alpha * (4.0 * edges + corners + 20.0 * c) / 6.0,
        T("the corners subtracted: the diagonal neighbours are added, + (NE + NW + SE + SW)"):
            c + alpha * (4.0 * edges - corners - 20.0 * c) / 6.0,
        T("the update subtracted, u - alpha * (...): add it to u"): c - alpha * lap / 6.0,
        T("the update rounded down by floor division (// 6): divide with /"):
            c + _np.floor(alpha * lap / 6.0),
        T("the tile column s where alpha belongs"): c + s * lap / 6.0,
    }
    out = {}
    for words, alt in inner.items():
        full = u.copy()
        full[1:-1, 1:-1] = alt
        out[words] = full
    return out


# the step as the lesson writes it, over the interior cells: a one-change variant of it that
# gives every cell is the learner's mistake, named by its statement (see _variants)
_HEAT = _variants.program("""edges = N + S + W + E
corners = NW + NE + SW + SE
out = c + alpha * (4.0 * edges + corners - 20.0 * c) / 6.0
return (out,)
""")


def _one_change_heat(got: Any, u: Any, alpha: float, tol: dict, ctx: str) -> None:
    """Name the one change of the step's formula that gives every cell (the boundary
    copied right)."""
    u = u.astype(K.float64)
    ny, nx = u.shape
    if min(ny, nx) < 3:
        return
    inner = _np.zeros(u.shape, dtype=bool)
    inner[1:-1, 1:-1] = True
    if not K.isclose(got[~inner], u[~inner], **tol).all():
        return  # the boundary is wrong too: not a change of the formula alone

    def at(dy: int, dx: int) -> Any:
        return u[1 + dy:ny - 1 + dy, 1 + dx:nx - 1 + dx]

    inputs = {_COMPASS[d]: at(*d) for d in _COMPASS if d != (0, 0)}
    inputs["c"] = at(0, 0)
    inputs["alpha"] = _np.float64(alpha)
    found = _variants.match(_HEAT, inputs, (got[1:-1, 1:-1],), {}, rtol=tol["rtol"],
                            atol=tol["atol"])
    if found is None:
        return
    wrong, right = found.wrong, found.right
    K.fail("wrong_formula", T(
        "out holds, in every inner cell, the heat step with `{wrong}` in place of `{right}` "
        "(the step: `edges = N + S + W + E`, `corners = NW + NE + SW + SE`, `out = c + alpha "
        "* (4.0 * edges + corners - 20.0 * c) / 6.0`, with `c = tile[r, s]`, `N = tile[r - 1, "
        "s]`, `NE = tile[r - 1, s + 1]`, ...): look for that change in your code, a name, a "
        "constant or an operator.", wrong=wrong, right=right), context={"case": ctx})


# heat_step as the lesson writes it, for every thread of every block at once (by, bx: the
# block; k: the tile's cells the load loop visits; ty, tx: the thread): a one-change variant
# of it that gives every cell of out is the learner's mistake, named by its statement
_HEAT_LOAD = _variants.program("""ny, nx = u.shape
x0 = bx * TX - 1
y0 = by * TY - 1
r = k // (TX + 2)
s = k % (TX + 2)
gy = y0 + r
gx = x0 + s
inside = (0 <= gy) & (gy < ny) & (0 <= gx) & (gx < nx)
store(tile, r, s, at(u, gy, gx), inside)
store(tile, r, s, 0.0, ~inside)
""")
_HEAT_STEP = _variants.program("""y = y0 + ty + 1
x = x0 + tx + 1
live = (y < ny) & (x < nx)
r = ty + 1
s = tx + 1
c = at(tile, r, s)
wall = (y == 0) | (x == 0) | (y == ny - 1) | (x == nx - 1)
store(out, y, x, c, live & wall)
edges = at(tile, r - 1, s) + at(tile, r + 1, s) + at(tile, r, s - 1) + at(tile, r, s + 1)
corners = at(tile, r - 1, s - 1) + at(tile, r - 1, s + 1) + at(tile, r + 1, s - 1) + \
at(tile, r + 1, s + 1)
store(out, y, x, c + alpha * (4.0 * edges + corners - 20.0 * c) / 6.0, live & ~wall)
return (out,)
""")


def _wrapped(i: Any, n: int) -> Any:
    """An index as Numba takes it, on a GPU and in the simulator: a negative one counts from
    the end (-1 is the last)."""
    i = _np.asarray(i)
    return _np.where((i < 0) & (i >= -n), i + n, i)


def _block_functions(by: Any, bx: Any) -> dict:
    """``at`` and ``store`` of the heat model: a shared tile (4-d, one per block) indexed
    by the block's own (by, bx) first; a store outside an array raises."""

    def place(a: Any, i: Any, j: Any) -> tuple:
        return (by, bx, i, j) if a.ndim == 4 else (i, j)

    def at(a: Any, i: Any, j: Any) -> Any:
        # clipped: a read outside is either discarded (a masked store) or what the kernel
        # read outside, which the checks before this one name from the record
        i = _np.clip(_wrapped(i, a.shape[-2]), 0, a.shape[-2] - 1)
        j = _np.clip(_wrapped(j, a.shape[-1]), 0, a.shape[-1] - 1)
        return a[place(a, i, j)]

    def store(a: Any, i: Any, j: Any, value: Any, where: Any) -> None:
        idx = place(a, _wrapped(i, a.shape[-2]), _wrapped(j, a.shape[-1]))
        full = _np.broadcast_arrays(*idx, _np.asarray(value, float), _np.asarray(where))
        mask = full[-1].astype(bool)
        sel = tuple(x[mask] for x in full[:-2])
        for axis, n in zip(sel[-2:], a.shape[-2:]):
            if (axis < 0).any() or (axis >= n).any():
                raise IndexError("outside")
        a[sel] = full[-2][mask]

    return {"at": at, "store": store}


def _heat_as_written(statement: str) -> str:
    """A heat-model statement as a kernel writes it: ``at(a, i, j)`` is ``a[i, j]``,
    ``store(a, i, j, v, m)`` is ``a[i, j] = v`` (under the condition m)."""
    tree = ast.parse(statement)

    class _Back(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> Any:
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == "at" and len(node.args) == 3:
                return ast.Subscript(node.args[0], ast.Tuple(node.args[1:], ast.Load()),
                                     ast.Load())
            return node

    stmt = _Back().visit(tree).body[0]
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
            isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "store":
        a, i, j, v, _ = stmt.value.args
        stmt = ast.Assign([ast.Subscript(a, ast.Tuple([i, j], ast.Load()), ast.Store())], v)
    return ast.unparse(ast.fix_missing_locations(ast.Module([stmt], [])))


def _one_change_tiled_heat(got: Any, u: Any, alpha: float, grid: tuple | None, ctx: str) -> None:
    """Name the one change of the lesson's heat_step (the tile's load, the step from it)
    that gives every cell of out."""
    if grid is None:
        return
    gx, gy = int(grid[0]), int(grid[1])
    by = _np.arange(gy).reshape(gy, 1, 1, 1)
    bx = _np.arange(gx).reshape(1, gx, 1, 1)
    u64 = u.astype(K.float64)
    inputs = {"u": u64, "alpha": _np.float64(alpha), "TX": TX, "TY": TY,
              "by": by, "bx": bx, "k": _np.arange((TY + 2) * (TX + 2)).reshape(1, 1, -1, 1),
              "tile": _np.full((gy, gx, TY + 2, TX + 2), _np.nan),
              "out": _np.full(u.shape, _np.nan),
              "ty": _np.arange(TY).reshape(1, 1, TY, 1), "tx": _np.arange(TX).reshape(1, 1, 1, TX)}
    scale = float(abs(u64).max())
    found = _variants.match_staged(_HEAT_LOAD, "", _HEAT_STEP, inputs, [], (got,),
                                   _block_functions(by, bx), rtol=1e-5, atol=1e-5 * scale,
                                   compare=True, arrays=("u", "tile", "out"))
    changes = _variants.described(found, _heat_as_written)
    if changes is None:
        return
    index = all(f.in_index for f in found)
    K.fail("wrong_index" if index else "wrong_formula", T(
        "heat_step: out holds what the lesson's kernel gives with {changes}: every thread "
        "computes with that {what}. The tile's slot [r, s] holds u[y0 + r, x0 + s] (y0 = "
        "blockIdx.y * TY - 1, x0 = blockIdx.x * TX - 1), 0 outside u; thread (tx, ty) updates "
        "u[y0 + ty + 1, x0 + tx + 1] from slot [ty + 1, tx + 1] and its eight neighbours "
        "[{ctx}].", changes=changes, what=T("index") if index else T("expression"), ctx=ctx))


def _boundary_updated(got: Any, u: Any, bad: Any, alpha: float | None) -> bool:
    """Whether the wrong wall cells hold what a step computed there gives: values beyond any
    temperature (a halo never loaded) or the 9-point step with the cells outside taken as 0,
    as the nearest wall cell, or wrapped around."""
    g = got[bad]
    if alpha is None or not _np.isfinite(g).all() or (abs(g) > _BIG).any():
        return True
    u64 = u.astype(K.float64)
    ny, nx = u.shape
    for mode in ("constant", "edge", "wrap"):
        p = _np.pad(u64, 1, mode=mode)
        at = (lambda dy, dx, p=p: p[1 + dy:1 + dy + ny, 1 + dx:1 + dx + nx])
        edges = at(-1, 0) + at(1, 0) + at(0, -1) + at(0, 1)
        corners = at(-1, -1) + at(-1, 1) + at(1, -1) + at(1, 1)
        step = u64 + alpha * (4.0 * edges + corners - 20.0 * u64) / 6.0
        if K.isclose(g, step[bad], rtol=1e-4, atol=1e-4).all():
            return True
    return False


def _walls_wrong(bad: Any) -> list[str]:
    """The walls (``y == 0``, ``x == 0``, ``y == ny - 1``, ``x == nx - 1``) with wrong cells
    off their corners, as code."""
    named = (("y == 0", bad[0, 1:-1]), ("x == 0", bad[1:-1, 0]),
             ("y == ny - 1", bad[-1, 1:-1]), ("x == nx - 1", bad[1:-1, -1]))
    return [f"`{w}`" for w, cells in named if cells.any()]


def _diagnose_heat(got: Any, want: Any, u: Any, ctx: str, rerun: Any = None,
                   alpha: float | None = None, grid: tuple | None = None) -> None:
    scale = float(K.abs(u).max())
    ok = K.isclose(got, want, rtol=1e-5, atol=1e-5 * scale)
    if ok.all():
        return
    if grid is not None and K.isnan(got).any():
        K.diagnose.swapped_coverage(K.isnan(got), grid, (TX, TY), "out",
                           T(" [{context}]", context=ctx))
    if K.isnan(got).any():
        K.compare(got, want, name="out", formula=T("the 9-point heat step"), rtol=1e-5,
                  atol=1e-5 * scale, context=ctx)
    bad = ~ok
    boundary, edge, corner = _tile_masks(*u.shape)
    # The wrong cells' place names the mistake; the first mask that holds them all wins.
    if not (bad & ~boundary).any() and not _boundary_updated(got, u, bad, alpha):
        boundary = boundary & False  # the walls hold neither u nor a step: show the evidence
    walls = _walls_wrong(bad)
    if not (bad & ~boundary).any() and boundary.any() and 0 < len(walls) < 4:
        # a step on some walls only: the wall test misses those (a size or a comparison in
        # it), which the cells alone cannot tell apart; the evidence, not a cause, unless
        # one change of the whole kernel gives every cell
        _one_change_tiled_heat(got, u, alpha, grid, ctx)
        K.fail("wrong_values", T(
            "only cells of the walls {walls} are wrong, and the other walls are right: your "
            "test for a wall cell misses those. A wall cell has y == 0, x == 0, y == ny - 1 "
            "or x == nx - 1 (y with the number of rows ny, x with the number of columns nx) "
            "[{ctx}].", walls=", ".join(walls), ctx=ctx))
    for where, cause, why in (
            (boundary, "boundary_overwritten",
             T("only boundary cells are wrong: the boundary rows and columns are walls at a "
               "fixed temperature, so out must equal u there (copy it; update only cells with "
               "0 < y < ny - 1 and 0 < x < nx - 1)")),
            (corner, "halo_corners_missing",
             T("only the cells at the corners of each tile are wrong: they need the corner "
               "cells of the halo (the diagonal neighbours in the diagonal tiles), which were "
               "not loaded. Load the whole (TY + 2) x (TX + 2) tile, corners included, for "
               "example with one loop over its cells strided by the block's threads")),
            (edge, "halo_missing",
             T("only the cells on the edges of each tile are wrong: their neighbours in the "
               "next tile, the halo, were not loaded into shared memory (or not at the right "
               "place). Load the tile with a one-cell halo on all four sides, (TY + 2) x (TX + "
               "2) cells, before the barrier"))):
        if not (bad & ~where).any():
            K.fail(cause, T("{why} [{ctx}].", why=why, ctx=ctx))
    if alpha is not None:
        tol = dict(rtol=1e-5, atol=1e-5 * scale)
        for words, alt in _heat_centre_alternatives(u, alpha).items():
            if K.isclose(got, alt, **tol).all():
                K.fail("off_by_one", T("out holds the heat step with the centre value u[y, x] taken from "
                         "{where}: the thread's own cell in the tile is one off. With a "
                         "one-cell halo the tile is shifted by one on both axes, so the "
                         "thread's cell is tile[ty + 1, tx + 1] (the tile centre), and its "
                         "neighbours are tile[ty + 1 +- 1, tx + 1 +- 1]", where=words), context={"case": ctx, "region": T("tile centre")})
        for words, alt in _heat_formula_alternatives(u, alpha).items():
            if K.isclose(got, alt, **tol).all():
                K.fail("wrong_formula", T("out holds the heat step with {what}", what=words), context={"case": ctx})
        for (term, other), alt in _heat_neighbour_alternatives(u, alpha).items():
            if K.isclose(got, alt, **tol).all():
                K.fail("wrong_index", T("out holds the heat step with the neighbour {term} read from the cell "
                         "{other} instead: one tile index of that term is off (N is tile[r - 1, "
                         "s], E is tile[r, s + 1], NE is tile[r - 1, s + 1], u is tile[r, s])",
                         term=term, other=other), context={"case": ctx})
        _one_change_heat(got, u, alpha, tol, ctx)
        _one_change_tiled_heat(got, u, alpha, grid, ctx)
        # the update term out - u a constant multiple of the right one: a factor twice or
        # missing (alpha, the 1/6 of the 9-point weights)
        K.diagnose.factor(got - u, want - u, T("the update out - u"), 1e-5, 1e-5 * scale,
                 {"alpha": alpha, "1/6": 1.0 / 6.0}, T(" [{context}]", context=ctx))
    finite = got[~K.isnan(got)]
    if finite.size and K.abs(finite).max() > _BIG:
        if rerun is not None:
            rerun()  # the simulator watches the tile: which of the two it is, in words
        K.fail("missing_barrier", T("heat_step used shared memory that no thread had written yet, in the middle "
                 "of tiles too: either cells of the (TY + 2) x (TX + 2) tile are never loaded "
                 "(does the load cover all of them, halo included?), or a cuda.syncthreads() "
                 "is missing between loading the tile and computing from it [{ctx}].", ctx=ctx))
    K.compare(got, want, name="out", formula=T("u + alpha * (4 (N + S + E + W) + (NE + NW + SE "
                                               "+ SW) - 20 u) / 6 inside, u on the boundary"), rtol=1e-5,
              atol=1e-5 * scale, context=ctx, tile=(TY, TX))


def check_heat_step(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> Any:
    """Check ``kernel(u, out, alpha)``: one 9-point heat step from shared-memory tiles with
    a halo, blocks of (TX, TY) threads, grid (ceil(nx / TX), ceil(ny / TY)), x along
    columns; shapes are not tile multiples; boundary cells keep their values."""
    K.require_kernel(kernel, "heat_step", 3)
    # (ny, nx, spare blocks); the hidden ones come from the master's hidden test cell
    # wide and tall (19 x 9: an axis mistake shows), neither axis a tile multiple but one
    cases, seed = resolve(hidden, [(21, 37, 0), (16, 32, 1), (19, 9, 0)], seed,
                          name="check_heat_step")
    gen = K.rng(seed)
    with K.poisoned_shared():  # in the simulator; on a GPU the technique part below does it
        for ny, nx, spare in cases:
            _heat_run(kernel, gen, ny, nx, spare)
    _heat_technique(kernel, seed=int(gen.integers(2**31)), hidden=hidden)
    return K.passes("heat_step", T("{n_cases} grids that are not tile multiples",
                                   n_cases=len(cases)),
                    T("tile edges, corners and walls right"), T("each run twice"), hidden=hidden)


def _heat_run(kernel: Any, gen: Any, ny: int, nx: int, spare: int) -> None:
    u = K.random_array(gen, (ny, nx), low=0.0, high=4.0)
    alpha = float(gen.uniform(0.1, 0.3))
    ctx = T("u {ny}x{nx}, alpha {alpha:.3f}, blocks of {tx}x{ty}", ny=ny, nx=nx, alpha=alpha,
            tx=TX, ty=TY)
    want = _heat_ref(u.astype(K.float64), alpha)
    runs = [_heat_case(kernel, u, alpha, spare, ctx) for _ in range(2)]
    grid = (math.ceil(nx / TX) + spare, math.ceil(ny / TY))
    for got in runs:
        _diagnose_heat(got, want, u, ctx,
                       rerun=lambda: _unloaded_or_race(kernel, u, alpha, spare, ctx),
                       alpha=alpha, grid=grid)
    if not K.array_equal(runs[0], runs[1]):
        K.fail("missing_barrier", T("heat_step gave different results for the same input: a race. Is there a "
                 "cuda.syncthreads() between loading the tile and computing from it? [{ctx}]",
                 ctx=ctx))


def _unloaded_or_race(kernel: Any, u: Any, alpha: float, spare: int, ctx: str) -> None:
    """Simulator: the case again with shared memory observed, to tell a tile never fully
    loaded (slots read that no thread of the block ever stored) from a missing barrier
    (slots read before the barrier that orders their store). Returns on a GPU."""
    with K.observing() as obs:
        if not obs.live:
            return
        ny, nx = u.shape
        gu = K.to_device_guarded(u, "u")
        out = K.Guarded.make((ny, nx), K.float32, "out")
        grid = (math.ceil(nx / TX) + spare, math.ceil(ny / TY))
        K.launch(kernel, grid, (TX, TY), gu.view, out.view, K.float32(alpha),
                 name="heat_step", obs=obs)  # (on a GPU the instrumented build observes)
    if obs.races:
        K.fail("missing_barrier", T("heat_step races on its shared tile: {race_words}. Put a cuda.syncthreads() "
                 "between loading the tile and computing from it [{ctx}].",
                 race_words=obs.race_words(), ctx=ctx))
    if obs.fill:  # per block, the tile's cells never stored (both observers count them)
        f = max(obs.fill, key=lambda f: f.total - f.stored)
        arr, idx, who, line = obs.unfilled[0] if obs.unfilled else ("", (), None, 0)
        first = (T(" (the first: {thread_name} read slot [{map}], line {line})",
                   thread_name=K.thread_name(who), map=', '.join(map(str, idx)),
                   line=line) if who is not None else "")
        K.fail("halo_missing", T("heat_step reads cells of its shared tile that no thread ever loaded: "
                 "{words}{first}. The tile with its halo has (TY + 2) x (TX + 2) = "
                 "{ty_plus_2_times_tx_plus_2} cells for {tx_times_ty} threads, so some threads "
                 "must load more than one: loop over the tile's cells strided by the block's "
                 "threads (k = ty * TX + tx, then k += TX * TY) [{ctx}].", words=f.words(),
                 first=first, ty_plus_2_times_tx_plus_2=(TY + 2) * (TX + 2),
                 tx_times_ty=TX * TY, ctx=ctx))
    # no race and every slot read was stored: the stores themselves carried the poison
    # shared memory starts with, as `tile[...] += ...` makes them (issue 45, mutants). Said
    # only from the simulator's record, which sees every interleaving it ran; an instrumented
    # build's (a GPU's) may miss a race that the values show, and then claims nothing
    if getattr(obs, "native", False):
        return
    K.fail("accumulated_into_output", T(
        "heat_step's results hold garbage, yet the record shows no race and every cell of "
        "the shared tile it read was stored first: the stored values themselves were "
        "computed from the tile's uninitialised contents, such as `tile[...] += u[...]` "
        "(shared memory starts with whatever was there). Store the loaded value with `=` "
        "[{ctx}].", ctx=ctx))


@sim_part
def _heat_technique(kernel: Any, *, seed: int | None = None, hidden: bool = False) -> None:
    """Simulator-only (re-run in a simulator on a GPU): one grid with poisoned shared memory
    (a missing barrier or an unloaded halo cell shows), and the count of reads of u."""
    # hidden: the first of the master's hidden grids, and their seed (visible: the fixed one)
    firsts, seed = resolve(hidden, [(13, 21, 0)], seed, name="check_heat_step")
    first = firsts[0]
    gen = K.rng(seed)
    with K.poisoned_shared():
        _heat_run(kernel, gen, *first)
    ny, nx = 2 * TY, 2 * TX
    u = K.random_array(gen, (ny, nx))
    cu, count = K.counting_array(u)
    out = K.Guarded.make((ny, nx), K.float32, "out")
    K.launch(kernel, (2, 2), (TX, TY), cu, out.view, K.float32(0.2), name="heat_step")
    per_cell = count.n / (ny * nx)
    if per_cell > 3.0:
        K.fail("wrong_technique", T("heat_step read u {n} times for {ny_times_nx} cells ({per_cell:.1f} reads per "
                 "cell), like a kernel without shared memory (9 per cell); a tiled one reads "
                 "each value about {tx_plus_2_times_ty_plus_2_over_t:.2f} times. Load tile + "
                 "halo into cuda.shared.array once, then compute from shared memory.",
                 n=count.n, ny_times_nx=ny * nx, per_cell=per_cell,
                 tx_plus_2_times_ty_plus_2_over_t=(TX + 2) * (TY + 2) / (TX * TY)))


# --- the time loop --------------------------------------------------------------------------

def check_diffuse(diffuse: Any, *, hidden: bool = False, seed: int | None = None) -> Any:
    """Check ``diffuse(d_u, d_tmp, steps, alpha)``: runs ``steps`` heat steps with the two
    device buffers d_u and d_tmp alternating as input and output, and returns the one that
    holds the result (one of the two, still on the device)."""
    from numba import cuda

    K.require_function(diffuse, "diffuse", 4)
    # (ny, nx, steps); the hidden ones come from the master's hidden test cell
    # wide and tall, neither axis a multiple of the block's (16 x 8): a grid with its axes
    # swapped misses cells in both (a near-square case needs the same grid either way)
    cases, seed = resolve(hidden, [(9, 37, 1), (29, 11, 2), (12, 19, 5)], seed,
                          name="check_diffuse")
    gen = K.rng(seed)
    for ny, nx, steps in cases:
        u = K.random_array(gen, (ny, nx), low=0.0, high=4.0)
        alpha = float(gen.uniform(0.1, 0.3))
        ctx = T("u {ny}x{nx}, {steps} steps, alpha {alpha:.3f}", ny=ny, nx=nx, steps=steps,
                alpha=alpha)
        du = cuda.to_device(u)
        dt = cuda.to_device(K.full((ny, nx), K.np.nan, K.float32))
        with tracing() as trace:  # every host step diffuse takes, at one seam
            try:
                res = diffuse(du, dt, steps, alpha)
            except K.CheckFailure:
                raise
            except Exception as exc:  # noqa: BLE001 - report what the learner's code raised
                singled = _raised.named(exc, diffuse, "diffuse")
                if singled:  # what was raised says what the learner wrote wrong
                    K.fail(singled[0], T("{diagnosis} [{ctx}].", diagnosis=singled[1],
                                         ctx=ctx))
                K.fail("host_function_raised", T("diffuse raised {type_exc_name}: {exc} [{ctx}].",
                         type_exc_name=type(exc).__name__, exc=_raised.words(exc), ctx=ctx))
        if res is None:
            K.fail("not_device_array", T("diffuse returned None: return the device array that holds the last "
                     "step's result [{ctx}].", ctx=ctx))
        if isinstance(res, K.ndarray):
            K.fail("not_device_array", T("diffuse returned a NumPy array: keep the data on the device and return "
                     "the device buffer written last (copying back is the caller's job) "
                     "[{ctx}].", ctx=ctx))
        if res is not du and res is not dt:
            K.fail("buffers_reallocated", T("diffuse returned a new array: swap the two buffers it was given (d_u, "
                     "d_tmp) after each step instead of allocating or copying, so the data "
                     "stays where it is [{ctx}].", ctx=ctx))
        _diffuse_steps(trace, steps, ctx)
        _diffuse_buffers(trace, res, ctx)
        got = res.copy_to_host()
        refs = [u.astype(K.float64)]
        for _ in range(steps + 1):
            refs.append(_heat_ref(refs[-1], alpha))
        tol = 1e-5 * float(K.abs(u).max())

        def same(k: int) -> bool:
            return bool(K.isclose(got, refs[k], rtol=1e-5, atol=tol).all())

        if same(steps):
            continue
        _diffuse_first_input(trace, dt, ctx)
        if steps > 1 and same(1):
            K.fail("buffers_not_swapped", T("diffuse's result is one step from u, whatever the number of steps: the "
                     "buffers are not swapped, so every step reads the same input. After each "
                     "launch swap them: d_u, d_tmp = d_tmp, d_u [{ctx}].", ctx=ctx))
        if same(steps - 1) or same(steps + 1):
            n_got = steps - 1 if same(steps - 1) else steps + 1
            K.fail("wrong_buffer", T("diffuse returned the state after {n_got} steps, not {steps}: after the "
                     "last swap the newest values are in the buffer now called d_u (the one "
                     "the next step would read); return that, and launch exactly `steps` times "
                     "[{ctx}].", n_got=n_got, steps=steps, ctx=ctx))
        _diffuse_alpha(got, u, alpha, steps, ctx)
        _diffuse_grid(trace, ny, nx, ctx)
        K.compare(got, refs[steps], name=T("the result"), formula=T("{steps} heat steps from u",
                                                                 steps=steps),
                  rtol=1e-5, atol=tol, context=ctx)
    return K.passes("diffuse", T("buffers swapped on the device"), T("the right buffer returned"),
                    hidden=hidden)


def _diffuse_alpha(got: Any, u: Any, alpha: float, steps: int, ctx: str) -> None:
    """One step whose every cell is the heat step with another alpha (the launch passed
    another number where alpha belongs): name the alpha it used."""
    if steps != 1 or min(u.shape) < 3 or not _np.isfinite(got).all():
        return
    u64 = u.astype(K.float64)
    lap = _heat_ref(u64, 1.0) - u64  # the step's update per unit alpha (0 on the walls)
    use = abs(lap) > 1e-3 * float(abs(u64).max())
    if use.sum() < 2:
        return
    other = float(_np.median(((got - u64) / _np.where(use, lap, 1.0))[use]))
    if abs(other - alpha) <= 1e-4 * max(1.0, abs(alpha)):
        return
    tol = 1e-4 * max(float(abs(got).max()), 1.0)
    if K.isclose(got, _heat_ref(u64, other), rtol=1e-4, atol=tol).all():
        K.fail("wrong_formula", T(
            "the result is the heat step with alpha = {other:.4g}, not alpha = {alpha:.4g}: "
            "the launch passes another number where alpha belongs; pass "
            "np.float32(alpha) [{ctx}].", other=other, alpha=alpha, ctx=ctx))


def _diffuse_steps(trace: Any, steps: int, ctx: str) -> None:
    """What diffuse asked of the GPU: launches only, one per step, on the two buffers."""
    for op in trace.of("launch"):  # from the record of buffers, never from the values
        if op.aliased():  # a race leaves them right or wrong depending on the device
            K.fail("same_buffer_in_out", T("diffuse: operation #{index} ({what}) passes the same buffer as the "
                     "step's input and output (aliasing): threads then read neighbours that "
                     "other threads have already overwritten, in an order nobody controls, "
                     "so the result depends on the device. Pass d_u as the input and d_tmp "
                     "as the output, and swap the two after each step",
                     index=op.index + 1, what=op.what), context={"case": ctx})
    copies = trace.device_copies()
    if copies:
        K.fail("copy_instead_of_swap", T("diffuse copied one device buffer into the other {k} time(s) for {steps} "
                 "steps (the first: operation #{index}, {what}) instead of swapping them. "
                 "A device-to-device copy moves every byte of the field again, as much "
                 "memory traffic as the heat step itself; swapping the two names costs "
                 "nothing: d_u, d_tmp = d_tmp, d_u", k=len(copies), steps=steps,
                 index=copies[0].index + 1, what=copies[0].what), context={"case": ctx})
    moved = [op for op in trace.ops if op.kind in ("H2D", "D2H") or
             (op.kind == "fill" and any(r[0] == "host" for r in op.reads))]
    implicit = [op for op in trace.of("launch") if op.host_args]
    if moved or implicit:
        op = (moved or implicit)[0]
        what = (T("{n_moved} copies between the host and the device",
                  n_moved=len(moved)) if moved else
                T("{n_implicit} launches with a NumPy array, which Numba copies to the device "
                  "and back each time", n_implicit=len(implicit)))
        K.fail("copies_in_loop", T("diffuse made {what} for {steps} steps (the first: operation #{index_plus_1}, "
                 "{what_2}): the field crossed the PCIe bus instead of staying on the device. "
                 "Launch heat_step on the two device arrays and swap them; no copy_to_host, no "
                 "cuda.to_device inside diffuse [{ctx}].", what=what, steps=steps,
                 index_plus_1=op.index + 1, what_2=op.what, ctx=ctx))
    allocs = [a for a in trace.allocs if a.space == "dev"]
    if allocs:
        K.fail("buffers_reallocated", T("diffuse allocated {n_allocs} device array(s) ({kind}) for {steps} steps: the "
                 "two buffers it was given are all it needs; swap them after each step instead "
                 "of allocating [{ctx}].", n_allocs=len(allocs), kind=allocs[0].kind,
                 steps=steps, ctx=ctx))
    launches = trace.of("launch")
    if len(launches) != steps:
        K.fail("launch_count", T("diffuse launched {n_launches} kernel(s) for steps={steps}: one launch of "
                 "heat_step per step [{ctx}].", n_launches=len(launches), steps=steps,
                 ctx=ctx))


def _diffuse_first_input(trace: Any, dt: Any, ctx: str) -> None:
    """A wrong result whose first launch read d_tmp (the scratch buffer, whose contents mean
    nothing) from the record of buffers: the two were swapped before the first step."""
    launches = trace.of("launch")
    io = launches[0].io() if launches else None
    if io and same_memory(memory_range(dt), io[0]):
        K.fail("swapped_before_first_step", T("diffuse's first step (operation #{index}, {what}) read d_tmp, the scratch "
                 "buffer whose contents mean nothing, instead of d_u, the field: the buffers "
                 "are swapped before the first launch. Launch heat_step on (d_u, d_tmp) "
                 "first, then swap: d_u, d_tmp = d_tmp, d_u", index=launches[0].index + 1,
                 what=launches[0].what), context={"case": ctx})


def _diffuse_buffers(trace: Any, res: Any, ctx: str) -> None:
    """The returned buffer is the one the last launch wrote, from the record: returning
    the one it read (the state one step older) is a stale buffer."""
    launches = trace.of("launch")
    io = launches[-1].io() if launches else None
    rng = memory_range(res)
    if io and same_memory(rng, io[0]) and not same_memory(rng, io[1]):
        K.fail("wrong_buffer", T("diffuse returned the buffer the last step read (a stale buffer: operation "
                 "#{index} wrote the other one): after the last swap the newest values are "
                 "in the buffer now called d_u (the one the next step would read): return "
                 "that", index=launches[-1].index + 1), context={"case": ctx})


def _diffuse_grid(trace: Any, ny: int, nx: int, ctx: str) -> None:
    """A wrong result from launches whose grid does not cover the field: name the axes
    (from the record of each launch's grid and block)."""
    for op in trace.of("launch"):
        g = tuple(op.grid_dims) + (1, 1)
        b = tuple(op.block_dims) + (1, 1)
        cx, cy = g[0] * b[0], g[1] * b[1]
        if cx >= nx and cy >= ny:
            continue
        swapped = g[0] * b[1] >= ny and g[1] * b[0] >= nx
        K.fail("grid_axes_swapped" if swapped else "grid_too_small", T("diffuse's operation #{index} ({what}): its threads cover {cx} "
                 "columns and {cy} rows of a {ny} x {nx} field, so cells are never updated. "
                 "{why}", what=op.what, index=op.index + 1, cx=cx, cy=cy, ny=ny, nx=nx,
                 why=T("The grid's axes are swapped: x (columns) comes first, grid = "
                       "(ceil(nx / TX), ceil(ny / TY))") if swapped else
                 T("Round up on each axis: grid = (ceil(nx / TX), ceil(ny / TY))")), context={"case": ctx})


# --- the fused LBM step -------------------------------------------------------------------

def _lbm_geometry(ny: int, nx: int, gen: Any, walls: bool = True) -> Any:
    """A periodic channel (walls in rows 0 and ny - 1) with a small obstacle inside; without
    ``walls``, a lattice periodic in x and in y (only the obstacle is solid), where a pull
    that does not wrap in y is wrong too (in a channel the walls hide it)."""
    solid = _lbm.channel(ny, nx) if walls else _zeros((ny, nx), dtype=bool)
    cy = float(gen.uniform(3.0, ny - 4.0))
    cx = float(gen.uniform(2.0, nx - 3.0))
    solid |= _lbm.cylinder(ny, nx, cx, cy, 1.6)
    return solid


def _lbm_inputs(ny: int, nx: int, gen: Any, walls: bool = True
                ) -> tuple[Any, Any, float, float]:
    solid = _lbm_geometry(ny, nx, gen, walls)
    f = _lbm.init_f(solid, (float(gen.uniform(0.02, 0.08)), float(gen.uniform(-0.02, 0.02))),
                    dtype=K.float64)
    f = f * (1.0 + 0.15 * gen.uniform(-1.0, 1.0, f.shape))  # every population different
    omega = float(gen.uniform(1.1, 1.7))
    fx = float(gen.uniform(2e-3, 5e-3))
    return f.astype(K.float32), solid, omega, fx


def _near_solid(solid: Any) -> Any:
    """Fluid nodes with at least one solid neighbour (of the 8)."""
    near = _zeros(solid.shape, dtype=bool)
    for i in range(1, 9):
        near |= _roll(solid, (int(_lbm.CY[i]), int(_lbm.CX[i])), axis=(0, 1))
    return near & ~solid


def _lbm_case(kernel: Any, f: Any, solid: Any, omega: float, fx: float, spare: int,
              ctx: str) -> Any:
    q, ny, nx = f.shape
    gf = K.to_device_guarded(f, "f_in")
    out = K.Guarded.make(f.shape, K.float32, "f_out")
    from numba import cuda

    gs = cuda.to_device(solid.astype(_uint8))
    bx, by = LBM_BLOCK
    grid = (math.ceil(nx / bx) + spare, math.ceil(ny / by))
    try:
        K.launch(kernel, grid, LBM_BLOCK, gf.view, out.view, gs, K.float32(omega),
                 K.float32(fx), name="lbm_step")
    except K.CheckFailure as exc:
        edge = K.off_by_one_index(exc) if exc.cause == "out_of_bounds_read" else None
        if edge is None:
            raise
        # index n on an axis of size n: a neighbour one step past the lattice's last
        # row or column, which on a periodic lattice is the first one
        if ny != nx and edge[1] in (ny, nx):  # the axis, from the size it overran
            y_axis = edge[1] == ny
            K.fail("periodic_wrap", T("lbm_step read a neighbour outside the lattice (index {index} on an axis "
                     "of size {size}): the lattice is periodic in {axis} too, so the upstream "
                     "neighbour of the last {line} is {line} 0. Wrap that coordinate: {fix}",
                     index=edge[0], size=edge[1], axis="y" if y_axis else "x",
                     line=T("row") if y_axis else T("column"),
                     fix="ys = (y - CY[i]) % ny" if y_axis else "xs = (x - CX[i]) % nx"), context={"case": ctx})
        K.fail("periodic_wrap", T("lbm_step read a neighbour outside the lattice (index {edge} on an axis of "
                 "size {edge_2}): the lattice is periodic, so the upstream neighbour of the "
                 "last column is column 0 (and of the last row, row 0). Wrap the neighbour's "
                 "coordinates: xs = (x - CX[i]) % nx, ys = (y - CY[i]) % ny [{ctx}].",
                 edge=edge[0], edge_2=edge[1], ctx=ctx))
    out.check_guards(T("a write outside f_out: guard with `if x < nx and y < ny`"))
    if not K.array_equal(gf.result(), f):
        K.fail("push_race", T("lbm_step wrote into f_in: pushing populations into the neighbours' slots of "
                 "the array others are still reading is a race (push instead of pull). Pull: "
                 "read f_in[i, y - CY[i], x - CX[i]], write only f_out[i, y, x] of your own "
                 "node [{ctx}].", ctx=ctx))
    return out.result()


def _lbm_reads_output(kernel: Any, f: Any, solid: Any, omega: float, fx: float, spare: int,
                      ctx: str) -> None:
    """Simulator: the case again with f_in and f_out watched; a kernel that reads f_out
    (pulls from the output, not yet written) is named. Returns on a GPU, or if it does not."""
    from numba import cuda

    with K.observing() as obs:
        if not obs.live:
            return
        gf = K.to_device_guarded(f, "f_in")
        out = K.Guarded.make(f.shape, K.float32, "f_out")
        gs = cuda.to_device(solid.astype(_uint8))
        bx, by = LBM_BLOCK
        grid = (math.ceil(f.shape[2] / bx) + spare, math.ceil(f.shape[1] / by))
        K.launch(kernel, grid, LBM_BLOCK, obs.watch(gf.view, "f_in"),
                 obs.watch(out.view, "f_out"), gs, K.float32(omega), K.float32(fx),
                 name="lbm_step", obs=obs)
    log = obs.arrays["f_out"]
    if log.total_reads:
        who, n = log.busiest_reader()
        K.fail("pulled_from_output", T("lbm_step reads f_out ({total_reads} reads; {thread_name} made {n}), the "
                 "array it is writing: f_out holds nothing yet (here NaN), so the populations "
                 "pulled from it are garbage. Pull from f_in: g_i = f_in[i, y - CY[i], x - "
                 "CX[i]], and only write f_out [{ctx}].", total_reads=log.total_reads,
                 thread_name=K.thread_name(who), n=n, ctx=ctx))


def _alternatives(f: Any, solid: Any, omega: float, fx: float) -> dict[str, Any]:
    st = _Stepper(solid, omega, (fx, 0.0))
    f64 = f.astype(K.float64)
    streamed = st.stream(f64)  # collide() works in place: hand it copies below
    local_rho = f64.sum(axis=0)
    lux = (f64[1] + f64[5] + f64[8] - f64[3] - f64[6] - f64[7]) / local_rho
    luy = (f64[2] + f64[5] + f64[6] - f64[4] - f64[7] - f64[8]) / local_rho
    w = _np.asarray(_lbm.W).reshape(9, 1, 1)
    cx = _np.asarray(_lbm.CX).reshape(9, 1, 1)
    mixed = streamed + omega * (_equilibrium(local_rho, lux, luy) - streamed) + 3 * w * cx * fx
    # Pulling from x + c_i instead of x - c_i (and bouncing back off x + c_i).
    wrong = _np.empty_like(f64)
    for i in range(9):
        shift = (-int(_lbm.CY[i]), -int(_lbm.CX[i]))
        wrong[i] = _where(_roll(solid, shift, axis=(0, 1)) if i else False,
                          f64[_lbm.OPP[i]], _roll(f64[i], shift, axis=(0, 1)))
    pulled_wrong = st.collide(wrong)
    return {
        # whole sentences (a translation orders its words freely), the case filled in later
        (N_("f_out holds the populations collided before streaming [{ctx}]: each node's own "
            "populations were collided, then streamed (push order), so the stored populations "
            "are not the post-collision ones of this step. Pull first (gather f_in[i] from "
            "x - c_i, or bounce back), then compute rho and u from those 9 and collide."),
         "collide_before_stream"): st.stream(st.collide(f64.copy())),
        (N_("f_out holds the equilibrium from rho and u of f_in at the node before streaming "
            "[{ctx}]: compute rho and u from the 9 populations just pulled, then collide them."),
         "moments_before_stream"): mixed,
        (N_("f_out holds the streamed populations without collision [{ctx}]: add "
            "omega * (feq - f) to each."), "no_collision"): streamed,
        (N_("f_out holds the collision of the node's own populations without streaming "
            "[{ctx}]: pull f_in[i, y - CY[i], x - CX[i]] first."), "no_streaming"):
            st.collide(f64.copy()),
        (N_("f_out holds populations pulled from x + c_i [{ctx}]: the population moving with "
            "velocity c_i comes from the upstream node x - c_i."), "pull_wrong_direction"):
            pulled_wrong,
        (N_("f_out holds the step without the force term [{ctx}]: add 3 * W[i] * CX[i] * fx "
            "to each population."), "force_missing"): _Stepper(solid, omega, (0.0, 0.0)).step(f64),
    }


def _diagnose_lbm(got: Any, f: Any, solid: Any, omega: float, fx: float, ctx: str,
                  rerun: Any = None, grid: tuple | None = None) -> None:
    want = _Stepper(solid, omega, (fx, 0.0)).step(f.astype(K.float64))
    tol = dict(rtol=2e-5, atol=2e-6)
    ok = K.isclose(got, want, **tol)
    if ok.all():
        return
    fluid = ~solid
    node_bad = ~ok.all(axis=0)
    if not (node_bad & fluid).any():
        K.fail("solid_not_copied", T("only the solid nodes are wrong: a solid node must copy its 9 populations "
                 "from f_in to f_out unchanged (and do nothing else) [{ctx}].", ctx=ctx))
    if K.isnan(got[:, fluid]).any():
        if grid is not None:
            K.diagnose.swapped_coverage(K.isnan(got).any(axis=0), grid, LBM_BLOCK, "f_out",
                               T(" [{context}]", context=ctx))
        if rerun is not None:
            rerun()  # the simulator watches f_in and f_out: did it read the output?
        K.compare(got[:, fluid], want[:, fluid], name=T("f_out at fluid nodes"),
                  formula=T("one pull-stream-collide step"), context=ctx, **tol)
    for (label, cause), alt in _alternatives(f, solid, omega, fx).items():
        if K.isclose(got[:, fluid], alt[:, fluid], **tol).all():
            K.fail(cause, T(label, ctx=ctx))
    for label, cause, alt in _table_alternatives(f, solid, omega, fx):
        if K.isclose(got[:, fluid], alt[:, fluid], **tol).all():
            K.fail(cause, label, context={"case": ctx})
    _periodic_footprint(node_bad & fluid, solid, ctx)
    mass_in = float(f.astype(K.float64)[:, fluid].sum())
    mass_out = float(got.astype(K.float64)[:, fluid].sum())
    lost = abs(mass_out - mass_in) > 1e-5 * mass_in
    near = _near_solid(solid)
    if not (node_bad & fluid & ~near).any():
        _diagnose_bounce(got, f, solid, omega, fx, tol, ctx)
        if lost:
            K.fail("lost_population", T("mass is not conserved (the fluid's populations summed to {mass_in:.6f} "
                     "before the step and {mass_out:.6f} after), and only nodes next to a wall "
                     "or the obstacle are wrong: a population is lost (or counted twice) at "
                     "bounce-back. When the upstream node x - c_i is solid, f_i must become "
                     "f_in[OPP[i], y, x], the population that left towards the wall, reversed "
                     "[{ctx}].", mass_in=mass_in, mass_out=mass_out,
                     ctx=ctx))
        K.fail("wrong_opposite", T("only nodes next to a wall or the obstacle are wrong, and mass is conserved: "
                 "bounce-back takes the wrong opposite direction. When x - c_i is solid, f_i = "
                 "f_in[OPP[i], y, x] with c[OPP[i]] = -c[i] (both components reversed, not a "
                 "mirror image) [{ctx}].", ctx=ctx))
    if lost:
        K.fail("mass_not_conserved", T("mass is not conserved (the fluid's populations summed to {mass_in:.6f} "
                 "before the step and {mass_out:.6f} after): a population is lost, or counted "
                 "twice. Each of the 9 must be pulled (from x - c_i, wrapping around the "
                 "periodic edges) or bounced back, and collision must keep rho [{ctx}].",
                 mass_in=mass_in, mass_out=mass_out, ctx=ctx))
    _momentum_by_axis(got, want, fluid, ctx)
    K.compare(got[:, fluid], want[:, fluid], name=T("f_out at fluid nodes"),
              formula=T("f_i + omega (feq_i - f_i) + 3 w_i c_i,x fx of the pulled populations"),
              context=ctx, **tol)


def _periodic_footprint(bad: Any, solid: Any, ctx: str) -> None:
    """Wrong fluid nodes only in the first and last columns (rows): the pull does not wrap
    in x (y). Checked per axis, before mass: a clamped neighbour changes the mass too."""
    ny, nx = solid.shape
    for axis, edges in (("x", (0, nx - 1)), ("y", (0, ny - 1))):
        band = _zeros(solid.shape, dtype=bool)
        if axis == "x":
            band[:, list(edges)] = True
        else:
            band[list(edges), :] = True
        if bad.any() and not (bad & ~band).any():
            last = T("columns") if axis == "x" else T("rows")
            n = nx if axis == "x" else ny
            K.fail("periodic_wrap", T("only the first and last {lines} are wrong: the lattice is periodic in "
                     "{axis}, so the upstream neighbour of {axis} = 0 is {axis} = {last} and "
                     "that of {axis} = {last} is 0 (use ({axis} - C{AXIS}[i]) % n{axis})",
                     lines=last, axis=axis, AXIS=axis.upper(), last=n - 1), context={"case": ctx})


def _momentum_by_axis(got: Any, want: Any, fluid: Any, ctx: str) -> None:
    """Mass is right: compare the fluid's momentum along each axis with the reference's,
    so that a term on the wrong axis is named by its axis."""
    g, w = got.astype(K.float64), want.astype(K.float64)
    cx = _np.asarray(_lbm.CX, dtype=K.float64).reshape(9, 1, 1)
    cy = _np.asarray(_lbm.CY, dtype=K.float64).reshape(9, 1, 1)
    mass = float(w[:, fluid].sum())
    tol = 1e-5 * mass
    off = {a: (float((c * g)[:, fluid].sum()), float((c * w)[:, fluid].sum()))
           for a, c in (("x", cx), ("y", cy))}
    wrong = [a for a, (p, q) in off.items() if abs(p - q) > tol]
    if len(wrong) == 1:
        a = wrong[0]
        other = "y" if a == "x" else "x"
        K.fail("wrong_axis", T("mass and the momentum along {other} are right, but the momentum along {a} "
                 "is not (the fluid's total {got}, the reference's {want}): a term acts on "
                 "the wrong axis or with the wrong sign. Check the terms with C{A}[i]: the "
                 "pull from {a} - C{A}[i], u{a} = sum(C{A}[i] g_i) / rho, c.u and the force "
                 "(3 W[i] CX[i] fx acts along x only)", other=other, a=a, A=a.upper(),
                 got=K.fmt(off[a][0]), want=K.fmt(off[a][1])), context={"case": ctx})


def _table_alternatives(f: Any, solid: Any, omega: float, fx: float) -> list:
    """Steps with a table taken by the wrong direction set: the weights of the axis
    directions (1/9) and of the diagonals (1/36) exchanged, or the force along y."""
    f64 = f.astype(K.float64)
    streamed = _Stepper(solid, omega, (fx, 0.0)).stream(f64)
    rho = streamed.sum(axis=0)
    cx = _np.asarray(_lbm.CX, dtype=K.float64).reshape(9, 1, 1)
    cy = _np.asarray(_lbm.CY, dtype=K.float64).reshape(9, 1, 1)
    ux = (cx * streamed).sum(axis=0) / rho
    uy = (cy * streamed).sum(axis=0) / rho
    w = _np.asarray(_lbm.W, dtype=K.float64).reshape(9, 1, 1)
    w_bad = _np.concatenate([w[:1], w[5:], w[1:5]])
    cu = cx * ux + cy * uy
    shape = 1 + 3 * cu + 4.5 * cu * cu - 1.5 * (ux * ux + uy * uy)
    out = []
    for label, cause, weights, force in (
            (T("f_out holds the step with the weights of the wrong direction set: W[1..4] "
               "(the axis directions, |c| = 1) must be 1/9 and W[5..8] (the diagonals) "
               "1/36. Mass can look lost, but the mistake is the table: take W in the order "
               "of CX and CY"), "weights_wrong_direction", w_bad, cx * fx),
            (T("f_out holds the step with the force along y: the body force fx pushes along "
               "x, so its term is 3 * W[i] * CX[i] * fx (CX, not CY)"), "force_wrong_axis",
             w, cy * fx)):
        alt = streamed + omega * (weights * rho * shape - streamed) + 3 * weights * force
        alt[:, solid] = f64[:, solid]
        out.append((label, cause, alt))
    return out


def _bounced(f64: Any, solid: Any, omega: float, fx: float, opp: Any) -> Any:
    """The step with bounce-back taking f_in[opp[i]] (None: a lost population, 0.0)."""
    st = _Stepper(solid, omega, (fx, 0.0))
    g = _np.empty_like(f64)
    g[0] = f64[0]
    for i in range(1, 9):
        back = 0.0 if opp is None else f64[opp[i]]
        g[i] = _where(st.bounce[i], back, st._pull(f64[i], i))
    return st.collide(g)


def _diagnose_bounce(got: Any, f: Any, solid: Any, omega: float, fx: float, tol: dict,
                     ctx: str) -> None:
    """Errors only next to solid nodes: find the bounce-back the kernel actually does."""
    import itertools

    fluid = ~solid
    f64 = f.astype(K.float64)
    if K.isclose(got[:, fluid], _bounced(f64, solid, omega, fx, None)[:, fluid], **tol).all():
        K.fail("lost_population", T("a population is lost at the walls: where the upstream node x - c_i is solid, "
                 "f_i came out as 0 (the population was dropped), and mass leaks away. Bounce "
                 "it back: f_i = f_in[OPP[i], y, x], the population that left towards the wall "
                 "[{ctx}].", ctx=ctx))
    right = list(_lbm.OPP)
    for group in ((1, 2, 3, 4), (5, 6, 7, 8)):
        targets = [right[i] for i in group]
        for perm in itertools.permutations(targets):
            if list(perm) == targets:
                continue
            opp = list(right)
            for i, j in zip(group, perm):
                opp[i] = j
            alt = _bounced(f64, solid, omega, fx, opp)
            if K.isclose(got[:, fluid], alt[:, fluid], **tol).all():
                wrong = [i for i in group if opp[i] != right[i]]
                i = wrong[0]
                c = (int(_lbm.CX[i]), int(_lbm.CY[i]))
                K.fail("wrong_opposite", T("bounce-back takes the wrong opposite direction for i = {map}: for "
                         "c_{i} = {c} your kernel bounces back population {opp}, but the "
                         "reversed direction -c_{i} is population {right}. Check OPP: "
                         "c[OPP[i]] = -c[i], both components reversed [{ctx}].",
                         map=', '.join(map(str, wrong)), i=i, c=c, opp=opp[i], right=right[i],
                         ctx=ctx))


def check_lbm_step(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> Any:
    """Check ``kernel(f_in, f_out, solid, omega, fx)``: one fused D2Q9 step per node (pull
    with bounce-back, BGK collision with a body force fx), periodic in x and y, solid nodes
    copied; blocks of LBM_BLOCK threads, x along columns; against the NumPy reference."""
    K.require_kernel(kernel, "lbm_step", 5)
    cases, seed = resolve(hidden, [(10, 19, 0), (9, 16, 1), (12, 7, 0)], seed,
                          name="check_lbm_step")
    gen = K.rng(seed)
    for k, (ny, nx, spare) in enumerate(cases):
        walls = k % 2 == 0  # every second lattice is periodic in y as well (no walls)
        f, solid, omega, fx = _lbm_inputs(ny, nx, gen, walls)
        ctx = (T("{ny}x{nx} lattice, {channel}, omega {omega:.3f}, fx {fx:.4f}, blocks of "
                 "{lbm_block}", ny=ny, nx=nx,
                 channel='channel' if walls else T('periodic in x and y'), omega=omega, fx=fx,
                 lbm_block=LBM_BLOCK))
        runs = [_lbm_case(kernel, f, solid, omega, fx, spare, ctx) for _ in range(2)]
        for got in runs:
            _diagnose_lbm(got, f, solid, omega, fx, ctx, rerun=lambda: _lbm_reads_output(
                kernel, f, solid, omega, fx, spare, ctx),
                grid=(math.ceil(nx / LBM_BLOCK[0]) + spare, math.ceil(ny / LBM_BLOCK[1])))
        if not K.array_equal(runs[0], runs[1]):
            K.fail("nondeterministic", T("lbm_step gave different results for the same input: a race [{ctx}].",
                     ctx=ctx))
    return K.passes("lbm_step", T("{k} lattices with an obstacle, walls in some",
                                  k=len(cases)), T("periodic in x and in y"), T("mass conserved"), T("each run twice"),
                    hidden=hidden)
