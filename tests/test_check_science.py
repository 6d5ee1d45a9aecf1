"""Catalogue of right and wrong answers to lesson 6's exercises, and what the checkers say.

Every wrong kernel must be rejected with a diagnosis naming its mistake and the fix; every
right one, however it is written, must pass. Race-dependent cases need the simulator, where
threads interleave and shared memory starts poisoned during a check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda, float32

import cudacourse.check
from cudacourse.kernels import lbm, stencil
from cudacourse.check import Cases
from cudacourse.check import science as S

pytestmark = pytest.mark.lesson6

TX, TY = S.TX, S.TY
HALO = (TY + 2, TX + 2)  # a constant shape for cuda.shared.array
CX, CY, OPP = lbm.CX, lbm.CY, lbm.OPP
W = lbm.W.astype(np.float32)
BAD_OPP = np.array([0, 3, 4, 1, 2, 8, 7, 6, 5])  # diagonals mirrored, not reversed


# Other cases for each checker, as a master's hidden test cell passes them (the package holds
# none): (ny, nx, spare) for the steps, (ny, nx, steps) for diffuse.
OTHER = {"heat_step": [(11, 19, 1), (24, 17, 1), (19, 35, 0)],
         "diffuse": [(14, 17, 3), (14, 17, 4)], "lbm_step": [(11, 21, 0), (10, 9, 1)]}


def _check(fn, kernel):
    fn(kernel, seed=7)
    fn(kernel, hidden=Cases(8, OTHER[fn.__name__.removeprefix("check_")]))


# --- the heat step: right answers ----------------------------------------------------------

@cuda.jit
def heat_right(u, out, alpha):
    """Cooperative strided load of tile + halo."""
    tile = cuda.shared.array(HALO, float32)
    ny, nx = u.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x0 = cuda.blockIdx.x * TX - 1
    y0 = cuda.blockIdx.y * TY - 1
    for k in range(ty * TX + tx, (TY + 2) * (TX + 2), TX * TY):
        r, s = k // (TX + 2), k % (TX + 2)
        gy, gx = y0 + r, x0 + s
        tile[r, s] = u[gy, gx] if 0 <= gy < ny and 0 <= gx < nx else 0.0
    cuda.syncthreads()
    y, x = y0 + ty + 1, x0 + tx + 1
    if y < ny and x < nx:
        r, s = ty + 1, tx + 1
        c = tile[r, s]
        if y == 0 or x == 0 or y == ny - 1 or x == nx - 1:
            out[y, x] = c
        else:
            e = tile[r - 1, s] + tile[r + 1, s] + tile[r, s - 1] + tile[r, s + 1]
            d = tile[r - 1, s - 1] + tile[r - 1, s + 1] + tile[r + 1, s - 1] + tile[r + 1, s + 1]
            out[y, x] = c + alpha * (4 * e + d - 20 * c) / 6


@cuda.jit
def heat_loads_once(u, out, alpha):
    """Each thread loads one cell of the tile + halo, no loop: 128 threads for 180 cells,
    so the last 52 cells (the bottom rows of the tile) are never loaded."""
    tile = cuda.shared.array(HALO, float32)
    ny, nx = u.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x0 = cuda.blockIdx.x * TX - 1
    y0 = cuda.blockIdx.y * TY - 1
    k = ty * TX + tx
    r, s = k // (TX + 2), k % (TX + 2)
    gy, gx = y0 + r, x0 + s
    tile[r, s] = u[gy, gx] if 0 <= gy < ny and 0 <= gx < nx else 0.0
    cuda.syncthreads()
    y, x = y0 + ty + 1, x0 + tx + 1
    if y < ny and x < nx:
        r, s = ty + 1, tx + 1
        c = tile[r, s]
        if y == 0 or x == 0 or y == ny - 1 or x == nx - 1:
            out[y, x] = c
        else:
            e = tile[r - 1, s] + tile[r + 1, s] + tile[r, s - 1] + tile[r, s + 1]
            d = tile[r - 1, s - 1] + tile[r - 1, s + 1] + tile[r + 1, s - 1] + tile[r + 1, s + 1]
            out[y, x] = c + alpha * (4 * e + d - 20 * c) / 6


def _make_heat_edges(halo: bool = True, corners: bool = True, barrier: bool = True,
                     boundary: bool = True, in_place: bool = False, guards: bool = True,
                     nine_point: bool = True):
    """Each thread loads its cell; edge threads load the halo's edges, corner threads its
    corners. The flags switch off one part each (the catalogue's wrong kernels)."""

    @cuda.jit
    def kernel(u, out, alpha):
        tile = cuda.shared.array(HALO, float32)
        ny, nx = u.shape
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        x, y = cuda.grid(2)
        r, s = ty + 1, tx + 1

        def get(yy, xx):
            if guards:
                return u[yy, xx] if 0 <= yy < ny and 0 <= xx < nx else float32(0.0)
            return u[yy, xx]

        tile[r, s] = get(y, x)
        if halo:
            if tx == 0:
                tile[r, 0] = get(y, x - 1)
            if tx == TX - 1:
                tile[r, TX + 1] = get(y, x + 1)
            if ty == 0:
                tile[0, s] = get(y - 1, x)
            if ty == TY - 1:
                tile[TY + 1, s] = get(y + 1, x)
            if corners:
                if tx == 0 and ty == 0:
                    tile[0, 0] = get(y - 1, x - 1)
                if tx == TX - 1 and ty == 0:
                    tile[0, TX + 1] = get(y - 1, x + 1)
                if tx == 0 and ty == TY - 1:
                    tile[TY + 1, 0] = get(y + 1, x - 1)
                if tx == TX - 1 and ty == TY - 1:
                    tile[TY + 1, TX + 1] = get(y + 1, x + 1)
        if barrier:
            cuda.syncthreads()
        if guards and (y >= ny or x >= nx):
            return
        c = tile[r, s]
        if boundary and (y == 0 or x == 0 or y == ny - 1 or x == nx - 1):
            new = c
        else:
            e = tile[r - 1, s] + tile[r + 1, s] + tile[r, s - 1] + tile[r, s + 1]
            d = tile[r - 1, s - 1] + tile[r - 1, s + 1] + tile[r + 1, s - 1] + tile[r + 1, s + 1]
            if nine_point:
                new = c + alpha * (4 * e + d - 20 * c) / 6
            else:  # the 5-point Laplacian
                new = c + alpha * (e - 4 * c)
        if in_place:
            u[y, x] = new
        else:
            out[y, x] = new

    return kernel


heat_right_edges = _make_heat_edges()


@cuda.jit
def heat_naive(u, out, alpha):
    x, y = cuda.grid(2)
    ny, nx = u.shape
    if y < ny and x < nx:
        if y == 0 or x == 0 or y == ny - 1 or x == nx - 1:
            out[y, x] = u[y, x]
        else:
            e = u[y - 1, x] + u[y + 1, x] + u[y, x - 1] + u[y, x + 1]
            d = u[y - 1, x - 1] + u[y - 1, x + 1] + u[y + 1, x - 1] + u[y + 1, x + 1]
            out[y, x] = u[y, x] + alpha * (4 * e + d - 20 * u[y, x]) / 6


def heat_plain_python(u, out, alpha):
    out[:] = stencil.heat_step_ref(u, alpha)


HALO = (TY + 2, TX + 2)
_HEAT_MASTER = """
def heat_step(u, out, alpha):
    tile = cuda.shared.array(HALO, float32)
    ny, nx = u.shape
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    x0 = cuda.blockIdx.x * TX - 1
    y0 = cuda.blockIdx.y * TY - 1
    for k in range(ty * TX + tx, HALO[0] * HALO[1], TX * TY):
        r = k // (TX + 2)
        s = k % (TX + 2)
        gy = y0 + r
        gx = x0 + s
        if 0 <= gy < ny and 0 <= gx < nx:
            tile[r, s] = u[gy, gx]
        else:
            tile[r, s] = 0.0
    cuda.syncthreads()
    y = y0 + ty + 1
    x = x0 + tx + 1
    if y < ny and x < nx:
        r = ty + 1
        s = tx + 1
        c = tile[r, s]
        if y == 0 or x == 0 or y == ny - 1 or x == nx - 1:
            out[y, x] = c
        else:
            edges = tile[r - 1, s] + tile[r + 1, s] + tile[r, s - 1] + tile[r, s + 1]
            corners = tile[r - 1, s - 1] + tile[r - 1, s + 1] + tile[r + 1, s - 1] + tile[r + 1, s + 1]
            out[y, x] = c + alpha * (4.0 * edges + corners - 20.0 * c) / 6.0
"""


def _heat_variant(*edits):
    """The lesson's master heat_step with one learner mistake (issue 45's held-out set),
    from a file so that the checker can read its lines."""
    import importlib.util
    import tempfile

    src = _HEAT_MASTER
    for old, new in edits:
        assert old in src, old
        src = src.replace(old, new)
    path = tempfile.NamedTemporaryFile("w", suffix="_heat.py", delete=False)
    path.write("from numba import cuda, float32\n" + f"TX, TY, HALO = {TX}, {TY}, {HALO}\n"
               + f"HALO_T = {HALO[::-1]}\n" + src)
    path.close()
    spec = importlib.util.spec_from_file_location("_heat_variant_" + str(abs(hash(edits))), path.name)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return cuda.jit(mod.heat_step)


heat_diagonal_halo = _heat_variant(("gy = y0 + r", "gy = y0 + r + 1"),
                                   ("gx = x0 + s", "gx = x0 + s + 1"))
heat_row_length_tx = _heat_variant(("r = k // (TX + 2)", "r = k // TX"),
                                   ("s = k % (TX + 2)", "s = k % TX"))
heat_tile_axes_swapped = _heat_variant(("cuda.shared.array(HALO, float32)",
                                        "cuda.shared.array(HALO_T, float32)"))
heat_sw_read_nw = _heat_variant(("tile[r + 1, s - 1] + tile[r + 1, s + 1]",
                                  "tile[r - 1, s - 1] + tile[r + 1, s + 1]"))
heat_e_read_centre = _heat_variant(("tile[r, s - 1] + tile[r, s + 1]", "tile[r, s - 1] + tile[r, s]"))
heat_centre_sign = _heat_variant(("corners - 20.0 * c", "corners + 20.0 * c"))
heat_alpha_sign = _heat_variant(("out[y, x] = c + alpha *", "out[y, x] = c - alpha *"))
heat_floor_division = _heat_variant(("- 20.0 * c) / 6.0", "- 20.0 * c) // 6.0"))
heat_s_for_alpha = _heat_variant(("out[y, x] = c + alpha *", "out[y, x] = c + s *"))

heat_edges_doubled = _heat_variant(("(4.0 * edges", "(8.0 * edges"))
heat_tile_accumulated = _heat_variant(("tile[r, s] = u[gy, gx]", "tile[r, s] += u[gy, gx]"))

heat_wall_test_other_axis = _heat_variant(("y == ny - 1 or", "y == nx - 1 or"))

HEAT_WRONG = {
    # issue 45 (mutants): the wall test compares y with nx - 1: the last row is stepped;
    # the cells cannot tell that from `y == ny`, so the evidence, never "boundary overwritten"
    "wall test of the other axis": (heat_wall_test_other_axis, "walls `y == ny - 1` are "
                                    "wrong", False, "wrong_values"),
    # issue 45 (mutants): one change of the step's formula, named by its statement
    "edges weighted 8": (heat_edges_doubled, "`out = c + alpha * (8.0 * edges + corners - "
                         "20.0 * c) / 6.0` in place of", False, "wrong_formula"),
    # issue 45 (mutants): `+=` into the uninitialised tile, not a missing barrier
    "tile accumulated": (heat_tile_accumulated, "uninitialised contents", True,
                         "accumulated_into_output"),
    "+ 20 u": (heat_centre_sign, "+ 20 u where - 20 u belongs", False, "wrong_formula"),
    "alpha subtracted": (heat_alpha_sign, "the update subtracted", False, "wrong_formula"),
    "floor division": (heat_floor_division, "floor division", False, "wrong_formula"),
    "s for alpha": (heat_s_for_alpha, "the tile column s where alpha belongs", False,
                    "wrong_formula"),
    # issue 45: one neighbour term read from another cell of the window (a mutant's tile index)
    "SW read from NW": (heat_sw_read_nw, "neighbour SW read from the cell NW", False,
                        "wrong_index"),
    "E read from the centre": (heat_e_read_centre, "neighbour E read from the cell u", False,
                               "wrong_index"),
    # issue 45: the evidence, never "missing bounds guard" or "ruled out: off by one"
    "halo origin shifted diagonally": (heat_diagonal_halo, "along both axes at once", False,
                                       "off_by_one"),
    "tile row length TX, not TX + 2": (heat_row_length_tx, "shared array tile outside the shape it declares",
                                       True, None),
    "shared tile declared with its axes swapped": (heat_tile_axes_swapped,
                                                   "with shape (18, 10)", True, None),
    "halo not loaded": (_make_heat_edges(halo=False), "edges of each tile", False, "halo_missing"),
    "tile loaded once per thread": (heat_loads_once, "52 never were", True, "halo_missing"),
    "halo corners not loaded": (
        _make_heat_edges(corners=False), "corners of each tile", False, "halo_corners_missing"),
    "missing barrier": (_make_heat_edges(barrier=False), "syncthreads", True, "missing_barrier"),
    "boundary overwritten": (
        _make_heat_edges(boundary=False), "boundary", False, "boundary_overwritten"),
    "in-place update": (
        _make_heat_edges(in_place=True), "in-place update races", False, "inputs_changed"),
    "edges not tile multiples": (_make_heat_edges(guards=False), "guard", True, None),
    "no shared memory": (heat_naive, "cuda.shared.array", False, "wrong_technique"),
    "wrong arithmetic": (
        _make_heat_edges(nine_point=False), "check the arithmetic", False, "wrong_values"),
    "not a kernel": (heat_plain_python, "@cuda.jit", False, "not_a_kernel"),
}


@pytest.mark.parametrize("kernel", [heat_right, heat_right_edges], ids=["strided", "edges"])
def test_right_heat_kernels_pass(kernel):
    _check(cudacourse.check.check_heat_step, kernel)


@pytest.mark.parametrize("name", list(HEAT_WRONG))
def test_wrong_heat_kernels_are_diagnosed(name):
    kernel, phrase, sim_only, cause = HEAT_WRONG[name]
    with pytest.raises(cudacourse.check.CheckFailure) as exc:
        cudacourse.check.check_heat_step(kernel, seed=3)
    if sim_only and not cudacourse.runtime.device.is_simulator():
        return  # a race or an out-of-bounds access: rejected; which symptom shows first varies
    assert phrase in str(exc.value), str(exc.value)
    assert cause is None or exc.value.cause == cause, (exc.value.cause, str(exc.value))


# issue 45: one change of the lesson's kernel, named by its statement from the kernel's model
# (every thread of every block: the tile's load, the step from it)
def _make_heat_one_change(narrow_guard: bool = False, load_row_k: bool = False,
                          wall_holds_y: bool = False):
    @cuda.jit
    def kernel(u, out, alpha):
        tile = cuda.shared.array(HALO, float32)
        ny, nx = u.shape
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        x0 = cuda.blockIdx.x * TX - 1
        y0 = cuda.blockIdx.y * TY - 1
        for k in range(ty * TX + tx, HALO[0] * HALO[1], TX * TY):
            r = k // (TX + 2)
            s = k % (TX + 2)
            gy = y0 + (k if load_row_k else r)
            gx = x0 + s
            inside_x = 0 < gx < nx if narrow_guard else 0 <= gx < nx
            if 0 <= gy < ny and inside_x:
                tile[r, s] = u[gy, gx]
            else:
                tile[r, s] = 0.0
        cuda.syncthreads()
        y = y0 + ty + 1
        x = x0 + tx + 1
        if y < ny and x < nx:
            r = ty + 1
            s = tx + 1
            c = tile[r, s]
            if y == 0 or x == 0 or y == ny - 1 or x == nx - 1:
                out[y, x] = y if wall_holds_y else c
            else:
                edges = tile[r - 1, s] + tile[r + 1, s] + tile[r, s - 1] + tile[r, s + 1]
                corners = (tile[r - 1, s - 1] + tile[r - 1, s + 1] + tile[r + 1, s - 1] +
                           tile[r + 1, s + 1])
                out[y, x] = c + alpha * (4.0 * edges + corners - 20.0 * c) / 6.0
    return kernel


@pytest.mark.parametrize("kwargs, phrase", [
    ({"narrow_guard": True}, "`0 < gx` in place of `0 <= gx`"),
    ({"load_row_k": True}, "`k` in place of `r` (in the statement `gy = y0 + r`)"),
    # a whole number read where a real belongs: the wall cell's row for its value
    ({"wall_holds_y": True}, "`y` in place of `c` (in the statement `out[y, x] = c`)"),
])
def test_heat_one_change_of_the_kernel_is_named(kwargs, phrase):
    with pytest.raises(cudacourse.check.CheckFailure) as exc:
        cudacourse.check.check_heat_step(_make_heat_one_change(**kwargs), seed=3)
    assert exc.value.cause == "wrong_formula", (exc.value.cause, str(exc.value))
    assert phrase in str(exc.value), str(exc.value)


def test_heat_model_reproduces_right_kernels_and_names_nothing_for_them():
    # the model of the lesson's kernel, run unchanged, gives the reference: a right answer
    # (heat_right, written otherwise, passes above) is never "one change away"
    u = np.random.default_rng(5).uniform(0, 4, (21, 37)).astype(np.float32)
    want = S._heat_ref(u.astype(np.float64), 0.2)
    S._one_change_tiled_heat(want, u, 0.2, (3, 3), "ctx")  # returns: nothing to name


# --- the time loop ---------------------------------------------------------------------------

def _launch(a, b, alpha):
    ny, nx = a.shape
    stencil._heat_naive[(math.ceil(nx / 16), math.ceil(ny / 8)), (16, 8)](a, b, alpha)


def diffuse_right(d_u, d_tmp, steps, alpha):
    for _ in range(steps):
        _launch(d_u, d_tmp, alpha)
        d_u, d_tmp = d_tmp, d_u
    return d_u


def diffuse_right_parity(d_u, d_tmp, steps, alpha):
    bufs = (d_u, d_tmp)
    for t in range(steps):
        _launch(bufs[t % 2], bufs[1 - t % 2], alpha)
    return bufs[steps % 2]


def diffuse_no_swap(d_u, d_tmp, steps, alpha):
    for _ in range(steps):
        _launch(d_u, d_tmp, alpha)
    return d_tmp


def diffuse_swaps_first(d_u, d_tmp, steps, alpha):  # issue 45: swapped before the first launch
    for _ in range(steps):
        d_u, d_tmp = d_tmp, d_u
        _launch(d_u, d_tmp, alpha)
    return d_tmp


def diffuse_returns_older(d_u, d_tmp, steps, alpha):
    for _ in range(steps):
        _launch(d_u, d_tmp, alpha)
        d_u, d_tmp = d_tmp, d_u
    return d_tmp


def diffuse_to_host(d_u, d_tmp, steps, alpha):
    return diffuse_right(d_u, d_tmp, steps, alpha).copy_to_host()


def diffuse_allocates(d_u, d_tmp, steps, alpha):
    for _ in range(steps):
        d_new = cuda.device_array_like(d_u)
        _launch(d_u, d_new, alpha)
        d_u = d_new
    return d_u


def diffuse_round_trips(d_u, d_tmp, steps, alpha):
    # right numbers, but the field goes to the host and back every step
    for _ in range(steps):
        _launch(d_u, d_tmp, alpha)
        d_u.copy_to_device(d_tmp.copy_to_host())
    return d_u


def diffuse_launch_on_host_array(d_u, d_tmp, steps, alpha):
    # right numbers, but every launch takes a NumPy array: implicit copies both ways
    h = d_u.copy_to_host()
    for _ in range(steps):
        _launch(d_u, d_tmp, alpha)
        d_u, d_tmp = d_tmp, d_u
    return d_u if h is None else d_u


def diffuse_via_asarray(d_u, d_tmp, steps, alpha):
    # right numbers; np.asarray copies the device array to the host, and the assignment
    # copies it back, every step
    for _ in range(steps):
        _launch(d_u, d_tmp, alpha)
        d_u[:] = np.asarray(d_tmp)
    return d_u


def diffuse_huge_block(d_u, d_tmp, steps, alpha):
    # a block of 32 x 64 = 2048 threads: a GPU refuses the launch
    ny, nx = d_u.shape
    for _ in range(steps):
        stencil._heat_naive[(1, 1), (32, 64)](d_u, d_tmp, alpha)
        d_u, d_tmp = d_tmp, d_u
    return d_u


def diffuse_in_place(d_u, d_tmp, steps, alpha):
    # one buffer as input and output: a race, whose values depend on the device
    for _ in range(steps):
        _launch(d_u, d_u, alpha)
    return d_u


def diffuse_copies_back(d_u, d_tmp, steps, alpha):
    # right numbers, but a device-to-device copy every step instead of a swap
    for _ in range(steps):
        _launch(d_u, d_tmp, alpha)
        d_u.copy_to_device(d_tmp)
    return d_u


def diffuse_assigns_back(d_u, d_tmp, steps, alpha):
    for _ in range(steps):
        _launch(d_u, d_tmp, alpha)
        d_u[:] = d_tmp
    return d_u


def diffuse_swapped_grid(d_u, d_tmp, steps, alpha):
    ny, nx = d_u.shape
    grid = (math.ceil(ny / 8), math.ceil(nx / 16))  # rows first: the axes swapped
    for _ in range(steps):
        stencil._heat_naive[grid, (16, 8)](d_u, d_tmp, alpha)
        d_u, d_tmp = d_tmp, d_u
    return d_u


def diffuse_right_spare_grid(d_u, d_tmp, steps, alpha):
    # right, written differently: one spare block on each axis, the kernel guards them
    ny, nx = d_u.shape
    grid = (nx // 16 + 2, ny // 8 + 2)
    for _ in range(steps):
        stencil._heat_naive[grid, (16, 8)](d_u, d_tmp, alpha)
        d_u, d_tmp = d_tmp, d_u
    return d_u


def diffuse_grid_before_assigned(d_u, d_tmp, steps, alpha):
    # issue 45 (mutants): a name read in place of another, before it has a value
    ny, nx = d_u.shape
    grid = (math.ceil(nx / 16), math.ceil(grid / 8))  # noqa: F821 - the mistake itself
    for _ in range(steps):
        stencil.heat_step[grid, (16, 8)](d_u, d_tmp, np.float32(alpha))
        d_u, d_tmp = d_tmp, d_u
    return d_u


def diffuse_steps_is_array(d_u, d_tmp, steps, alpha):
    # issue 45 (mutants): an array's name read where the count of steps belongs
    ny, nx = d_u.shape
    grid = (math.ceil(nx / 16), math.ceil(ny / 8))
    for _ in range(d_tmp):
        stencil.heat_step[grid, (16, 8)](d_u, d_tmp, np.float32(alpha))
        d_u, d_tmp = d_tmp, d_u
    return d_u


def diffuse_alpha_is_steps(d_u, d_tmp, steps, alpha):
    # issue 45 (mutants): another number of the host code passed where alpha belongs
    for _ in range(steps):
        _launch(d_u, d_tmp, np.float32(steps))
        d_u, d_tmp = d_tmp, d_u
    return d_u


DIFFUSE_WRONG = {
    "another number passed as alpha": (diffuse_alpha_is_steps, "the heat step with alpha = 1,",
                                       "wrong_formula"),
    "a name read before it is assigned": (diffuse_grid_before_assigned,
                                          "read the variable grid before giving it a value",
                                          "used_before_assigned"),
    # issue 45: a device array where the number of steps belongs (range(d_u))
    "an array where the count belongs": (diffuse_steps_is_array,
                                         "gave a device array where a whole number belongs",
                                         "array_for_number"),
    "in place (aliasing)": (diffuse_in_place, "same buffer as the step's input and output",
                            "same_buffer_in_out"),
    "a device-to-device copy every step": (diffuse_copies_back, "instead of swapping them",
                                           "copy_instead_of_swap"),
    "a slice assignment every step": (diffuse_assigns_back, "instead of swapping them",
                                      "copy_instead_of_swap"),
    "grid axes swapped": (diffuse_swapped_grid, "axes are swapped", "grid_axes_swapped"),
    "copies to the host and back every step": (diffuse_round_trips, "crossed the PCIe bus",
                                               "copies_in_loop"),
    "copies to the host once": (diffuse_launch_on_host_array, "crossed the PCIe bus",
                                "copies_in_loop"),
    "copies through np.asarray every step": (diffuse_via_asarray, "crossed the PCIe bus",
                                             "copies_in_loop"),
    "more than 1024 threads per block": (diffuse_huge_block, "at most 1024", "bad_launch"),
    "buffers not swapped": (diffuse_no_swap, "not swapped", "buffers_not_swapped"),
    "buffers swapped before the first launch": (diffuse_swaps_first, "read d_tmp",
                                                "swapped_before_first_step"),
    "returns the older buffer": (diffuse_returns_older, "stale buffer", "wrong_buffer"),
    "copies to the host": (diffuse_to_host, "NumPy array", "not_device_array"),
    "allocates every step": (diffuse_allocates, "new array", "buffers_reallocated"),
}


@pytest.mark.parametrize("fn", [diffuse_right, diffuse_right_parity, diffuse_right_spare_grid],
                         ids=["swap", "parity", "spare-grid"])
def test_right_time_loops_pass(fn):
    _check(cudacourse.check.check_diffuse, fn)


@pytest.mark.parametrize("name", list(DIFFUSE_WRONG))
def test_wrong_time_loops_are_diagnosed(name):
    fn, phrase, cause = DIFFUSE_WRONG[name]
    with pytest.raises(cudacourse.check.CheckFailure) as exc:
        cudacourse.check.check_diffuse(fn, seed=4)
    assert phrase in str(exc.value), str(exc.value)
    assert exc.value.cause == cause, (exc.value.cause, str(exc.value))


# --- the LBM step: right answers --------------------------------------------------------------

@cuda.jit
def lbm_right(f_in, f_out, solid, omega, fx):
    """Loops over the 9 directions, pulled populations in a local array, % for the wrap."""
    x, y = cuda.grid(2)
    ny, nx = solid.shape
    if x >= nx or y >= ny:
        return
    if solid[y, x]:
        for i in range(9):
            f_out[i, y, x] = f_in[i, y, x]
        return
    g = cuda.local.array(9, float32)
    rho = float32(0.0)
    jx = float32(0.0)
    jy = float32(0.0)
    for i in range(9):
        xs = (x - CX[i]) % nx
        ys = (y - CY[i]) % ny
        g[i] = f_in[OPP[i], y, x] if solid[ys, xs] else f_in[i, ys, xs]
        rho += g[i]
        jx += CX[i] * g[i]
        jy += CY[i] * g[i]
    ux = jx / rho
    uy = jy / rho
    usq = 1.5 * (ux * ux + uy * uy)
    for i in range(9):
        cu = CX[i] * ux + CY[i] * uy
        feq = W[i] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - usq)
        f_out[i, y, x] = g[i] + omega * (feq - g[i]) + 3.0 * W[i] * CX[i] * fx


@cuda.jit
def lbm_right_two_pass(f_in, f_out, solid, omega, fx):
    """Pulls twice (moments, then collision) instead of keeping a local array; wraps with
    selects; a grid-stride loop over rows."""
    x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    ny, nx = solid.shape
    for y in range(cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y, ny,
                   cuda.gridDim.y * cuda.blockDim.y):
        if x < nx:
            if solid[y, x] != 0:
                for i in range(9):
                    f_out[i, y, x] = f_in[i, y, x]
            else:
                rho = 0.0
                jx = 0.0
                jy = 0.0
                for i in range(9):
                    xs = x - CX[i]
                    xs = nx - 1 if xs < 0 else (0 if xs >= nx else xs)
                    ys = y - CY[i]
                    ys = ny - 1 if ys < 0 else (0 if ys >= ny else ys)
                    v = f_in[OPP[i], y, x] if solid[ys, xs] != 0 else f_in[i, ys, xs]
                    rho += v
                    jx += CX[i] * v
                    jy += CY[i] * v
                ux, uy = jx / rho, jy / rho
                for i in range(9):
                    xs = x - CX[i]
                    xs = nx - 1 if xs < 0 else (0 if xs >= nx else xs)
                    ys = y - CY[i]
                    ys = ny - 1 if ys < 0 else (0 if ys >= ny else ys)
                    v = f_in[OPP[i], y, x] if solid[ys, xs] != 0 else f_in[i, ys, xs]
                    cu = CX[i] * ux + CY[i] * uy
                    feq = W[i] * rho * (1 + 3 * cu + 4.5 * cu * cu - 1.5 * (ux * ux + uy * uy))
                    f_out[i, y, x] = (1 - omega) * v + omega * feq + 3 * W[i] * CX[i] * fx


W_BAD = np.concatenate([W[:1], W[5:], W[1:5]])  # 1/36 on the axes, 1/9 on the diagonals


def _make_lbm(opp=OPP, bounce=True, force=True, copy_solid=True, wrap=True,
              local_moments=False, wrap_x="mod", wrap_y="mod", w=W, force_c=CX, jy_c=CY):
    """The loop form with one part switched off or changed. ``wrap_x``/``wrap_y``: "mod"
    (right), "clamp" (the edge node repeats) or "none" (no wrap on that axis)."""
    if not wrap:
        wrap_x = wrap_y = "none"
    mx = {"mod": 0, "clamp": 1, "none": 2}[wrap_x]
    my = {"mod": 0, "clamp": 1, "none": 2}[wrap_y]

    @cuda.jit
    def kernel(f_in, f_out, solid, omega, fx):
        x, y = cuda.grid(2)
        ny, nx = solid.shape
        if x >= nx or y >= ny:
            return
        if solid[y, x]:
            if copy_solid:
                for i in range(9):
                    f_out[i, y, x] = f_in[i, y, x]
            return
        g = cuda.local.array(9, float32)
        rho = float32(0.0)
        jx = float32(0.0)
        jy = float32(0.0)
        for i in range(9):
            xs = x - CX[i]
            if mx == 0:
                xs = xs % nx
            elif mx == 1:
                xs = min(max(xs, 0), nx - 1)
            ys = y - CY[i]
            if my == 0:
                ys = ys % ny
            elif my == 1:
                ys = min(max(ys, 0), ny - 1)
            if solid[ys, xs]:
                g[i] = f_in[opp[i], y, x] if bounce else float32(0.0)
            else:
                g[i] = f_in[i, ys, xs]
            v = f_in[i, y, x] if local_moments else g[i]
            rho += v
            jx += CX[i] * v
            jy += jy_c[i] * v
        ux = jx / rho
        uy = jy / rho
        usq = 1.5 * (ux * ux + uy * uy)
        for i in range(9):
            cu = CX[i] * ux + CY[i] * uy
            feq = w[i] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - usq)
            f_out[i, y, x] = g[i] + omega * (feq - g[i]) + (3.0 * w[i] * force_c[i] * fx
                                                            if force else 0.0)

    return kernel


@cuda.jit
def lbm_pulls_from_out(f_in, f_out, solid, omega, fx):
    """Pulls the neighbours' populations from f_out, the array being written."""
    x, y = cuda.grid(2)
    ny, nx = solid.shape
    if x >= nx or y >= ny:
        return
    if solid[y, x]:
        for i in range(9):
            f_out[i, y, x] = f_in[i, y, x]
        return
    g = cuda.local.array(9, float32)
    rho = float32(0.0)
    jx = float32(0.0)
    jy = float32(0.0)
    for i in range(9):
        xs = (x - CX[i]) % nx
        ys = (y - CY[i]) % ny
        if solid[ys, xs]:
            g[i] = f_in[OPP[i], y, x]
        else:
            g[i] = f_out[i, ys, xs]
        rho += g[i]
        jx += CX[i] * g[i]
        jy += CY[i] * g[i]
    ux = jx / rho
    uy = jy / rho
    usq = 1.5 * (ux * ux + uy * uy)
    for i in range(9):
        cu = CX[i] * ux + CY[i] * uy
        feq = W[i] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - usq)
        f_out[i, y, x] = g[i] + omega * (feq - g[i]) + 3.0 * W[i] * CX[i] * fx


def _make_push(in_place: bool):
    """Collide the node's own populations, then push them to the neighbours."""

    @cuda.jit
    def kernel(f_in, f_out, solid, omega, fx):
        x, y = cuda.grid(2)
        ny, nx = solid.shape
        if x >= nx or y >= ny:
            return
        dst = f_in if in_place else f_out
        if solid[y, x]:
            if not in_place:
                for i in range(9):
                    f_out[i, y, x] = f_in[i, y, x]
            return
        rho = float32(0.0)
        jx = float32(0.0)
        jy = float32(0.0)
        for i in range(9):
            rho += f_in[i, y, x]
            jx += CX[i] * f_in[i, y, x]
            jy += CY[i] * f_in[i, y, x]
        ux = jx / rho
        uy = jy / rho
        usq = 1.5 * (ux * ux + uy * uy)
        for i in range(9):
            cu = CX[i] * ux + CY[i] * uy
            feq = W[i] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - usq)
            post = f_in[i, y, x] + omega * (feq - f_in[i, y, x]) + 3.0 * W[i] * CX[i] * fx
            xd = (x + CX[i]) % nx
            yd = (y + CY[i]) % ny
            if solid[yd, xd]:
                dst[OPP[i], y, x] = post
            else:
                dst[i, yd, xd] = post

    return kernel


LBM_WRONG = {
    "push in place (racing)": (_make_push(True), "push instead of pull", False, "push_race"),
    "collision before streaming": (
        _make_push(False), "collided before streaming", False, "collide_before_stream"),
    "moments before streaming": (
        _make_lbm(local_moments=True), "before streaming", False, "moments_before_stream"),
    "wrong opposite direction": (
        _make_lbm(opp=BAD_OPP), "wrong opposite direction", False, "wrong_opposite"),
    "a lost population at the boundary": (_make_lbm(bounce=False), "a population is lost",
                                          False, "lost_population"),
    "solid nodes not copied": (
        _make_lbm(copy_solid=False), "solid node", False, "solid_not_copied"),
    "force forgotten": (_make_lbm(force=False), "without the force term", False, "force_missing"),
    "no periodic wrap": (_make_lbm(wrap=False), "the lattice is periodic", True,
                         "periodic_wrap"),
    "periodic in x, clamped in y": (_make_lbm(wrap_y="clamp"), "periodic in y", False,
                                    "periodic_wrap"),
    "periodic in y, clamped in x": (_make_lbm(wrap_x="clamp"), "periodic in x", False,
                                    "periodic_wrap"),
    "no wrap in y": (_make_lbm(wrap_y="none"), "periodic in y", True, "periodic_wrap"),
    "weights of the wrong direction set": (
        _make_lbm(w=W_BAD), "weights of the wrong direction set", False,
        "weights_wrong_direction"),
    "force along y": (_make_lbm(force_c=CY), "force along y", False, "force_wrong_axis"),
    "y momentum summed with CX": (_make_lbm(jy_c=CX), "momentum along y", False,
                                  "wrong_axis"),
    "pulls from the output": (lbm_pulls_from_out, "reads f_out",
                              "the reads of f_out are watched in the simulator; a GPU sees "
                              "only NaN results (rejected as never written)",
                              "pulled_from_output"),
}


@pytest.mark.parametrize("kernel", [lbm_right, lbm_right_two_pass], ids=["loop", "two-pass"])
def test_right_lbm_kernels_pass(kernel):
    _check(cudacourse.check.check_lbm_step, kernel)


@pytest.mark.parametrize("name", list(LBM_WRONG))
def test_wrong_lbm_kernels_are_diagnosed(name):
    kernel, phrase, sim_only, cause = LBM_WRONG[name]
    if sim_only and not cudacourse.runtime.device.is_simulator():
        pytest.skip(sim_only if isinstance(sim_only, str) else
                    "an out-of-bounds read: the simulator refuses it, a GPU reads a "
                    "neighbouring row")
    with pytest.raises(cudacourse.check.CheckFailure) as exc:
        cudacourse.check.check_lbm_step(kernel, seed=5)
    assert phrase in str(exc.value), str(exc.value)
    assert cause is None or exc.value.cause == cause, (exc.value.cause, str(exc.value))


def test_aliasing_and_stale_verdicts_read_only_the_record():
    """The verdicts on diffuse's buffers come from the trace (which memory each launch
    got), never from values: a record as a GPU's launches fill it (device pointers from
    __cuda_array_interface__, no kernel run here) gets the same diagnosis."""
    from cudacourse.check._trace import Op, Trace

    u, tmp = ("dev", 1000, 1400), ("dev", 5000, 5400)

    def record(*launches):
        tr = Trace()
        for args in launches:
            tr.issue(Op(0, "launch", 0, "launch heat_step[[2, 2], [16, 8]]", reads=list(args),
                        writes=list(args), args=list(args), block=16, grid_dims=(2, 2),
                        block_dims=(16, 8)), synchronous=False)
        return tr

    with pytest.raises(cudacourse.check.CheckFailure) as exc:
        S._diffuse_steps(record((u, u), (u, u)), 2, "case")
    assert exc.value.cause == "same_buffer_in_out" and "aliasing" in str(exc.value)
    S._diffuse_steps(record((u, tmp), (tmp, u)), 2, "case")  # swapped: nothing to say

    class Res:  # what diffuse returned: the buffer the last launch read
        __cuda_array_interface__ = {"data": (1000, False), "shape": (10, 10),
                                    "typestr": "<f4", "strides": None, "version": 3}

    with pytest.raises(cudacourse.check.CheckFailure) as exc:
        S._diffuse_buffers(record((tmp, u), (u, tmp)), Res(), "case")
    assert exc.value.cause == "wrong_buffer" and "stale buffer" in str(exc.value)
    S._diffuse_buffers(record((tmp, u)), Res(), "case")  # u is the one the last launch wrote


def test_periodic_footprint_names_each_axis():
    solid = np.zeros((9, 13), dtype=bool)
    bad = np.zeros_like(solid)
    bad[[0, -1], 3:7] = True
    with pytest.raises(cudacourse.check.CheckFailure, match="periodic in y"):
        S._periodic_footprint(bad, solid, "case")
    bad = np.zeros_like(solid)
    bad[2:5, [0, -1]] = True
    with pytest.raises(cudacourse.check.CheckFailure, match="periodic in x"):
        S._periodic_footprint(bad, solid, "case")
    bad[4, 6] = True  # a node inside as well: no footprint of one axis
    S._periodic_footprint(bad, solid, "case")
