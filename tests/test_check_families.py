"""The named mistake families (issue 32), one mutant per family for every exercise where it
can occur, each asserting the phrase its diagnosis must contain and its stable cause; and
right answers written differently, which must still pass.

The families, and where else their mutants live: aliasing and stale buffers (lesson 3 and
lesson 6's host functions: test_check_memory, test_check_science), periodic axes and tables
by direction for the LBM step (test_check_science), the footprints themselves on plain
arrays (test_check_diagnose). Here: off by one on an axis or in a tile region, swapped axes
in indices, guards and grids, NaN/inf with the first element, a scale doubled or missing, a
missing `m = m_new`, two elements per thread with odd n. Simulator-sized cases only (one
seed, the visible cases): every test here is a few seconds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda, float32

import cudacourse.check as check
import cudacourse.runtime.device
from cudacourse.check import CheckFailure
from cudacourse.check import science as S

TX, TY = S.TX, S.TY
HALO = (TY + 2, TX + 2)
TILE_MM = 16


def verdict(checker, fn, seed=3):
    with pytest.raises(CheckFailure) as info:
        checker(fn, seed=seed)
    return info.value


# --- vector_add (lesson 1) ------------------------------------------------------------------

@cuda.jit
def add_two_per_thread(a, b, out):
    j = 2 * cuda.grid(1)
    if j < out.shape[0]:
        out[j] = a[j] + b[j]
        out[j + 1] = a[j + 1] + b[j + 1]  # past the end for odd n


@cuda.jit
def add_doubled(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = (a[i] + b[i]) * 2.0


# --- gpu_scale / pipelined_scale (lesson 3) ---------------------------------------------------

@cuda.jit
def scale_kernel_twice(x, out, alpha):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = alpha * alpha * x[i]


def pipelined_scale_twice(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, lo in enumerate(range(0, x.size, size)):
        hi, s = min(lo + size, x.size), k % n_streams
        d_in[s][:hi - lo].copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel_twice[(hi - lo + 127) // 128, 128, streams[s]](
            d_in[s][:hi - lo], d_out[s][:hi - lo], np.float32(alpha))
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
    for st in streams:
        st.synchronize()
    return h_out


def gpu_scale_twice(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    scale_kernel_twice[(x.size + 127) // 128, 128](d_x, d_out, np.float32(alpha))
    return d_out.copy_to_host()


# --- mirror (lesson 2): 2-D axes ----------------------------------------------------------

@cuda.jit
def mirror_guard_wrong_axis(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[1] and c < img.shape[0]:  # each index guarded with the other's size
        out[r, c] = img[r, img.shape[1] - 1 - c]


@cuda.jit
def mirror_right_rows_loop(img, out):
    """Right, written differently: one thread per row, looping over the columns."""
    c0, r = cuda.grid(2)
    if r < img.shape[0]:
        w = img.shape[1]
        for c in range(c0, w, cuda.gridsize(2)[0]):
            out[r, w - 1 - c] = img[r, c]


# --- heat_step (lesson 6): tile regions and axes -------------------------------------------

def _make_heat(origin_off=False, centre_off=False, swap=False, alpha_twice=False,
               alpha_one=False, guard_swapped=False):
    @cuda.jit
    def kernel(u, out, alpha):
        tile = cuda.shared.array(HALO, float32)
        ny, nx = u.shape
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        bx, by = cuda.blockIdx.x, cuda.blockIdx.y
        x0 = bx * TX - (0 if origin_off else 1)  # the halo's origin
        y0 = by * TY - 1
        for k in range(ty * TX + tx, (TY + 2) * (TX + 2), TX * TY):
            r, s = k // (TX + 2), k % (TX + 2)
            gy, gx = y0 + r, x0 + s
            tile[r, s] = u[gy, gx] if 0 <= gy < ny and 0 <= gx < nx else 0.0
        cuda.syncthreads()
        y, x = by * TY + ty, bx * TX + tx
        if swap:
            x, y = y, x
        if (y < nx and x < ny) if guard_swapped else (y < ny and x < nx):
            r, s = ty + 1, tx + 1
            c = tile[r - 1, s] if centre_off else tile[r, s]
            if y == 0 or x == 0 or y == ny - 1 or x == nx - 1:
                out[y, x] = u[y, x]
            else:
                e = tile[r - 1, s] + tile[r + 1, s] + tile[r, s - 1] + tile[r, s + 1]
                d = (tile[r - 1, s - 1] + tile[r - 1, s + 1] + tile[r + 1, s - 1]
                     + tile[r + 1, s + 1])
                a = alpha * alpha if alpha_twice else (1.0 if alpha_one else alpha)
                out[y, x] = c + a * (4 * e + d - 20 * c) / 6
    return kernel


@cuda.jit
def heat_right_two_loads(u, out, alpha):
    """Right, written differently: the tile loaded in two strided passes (rows 0..TY-1 of
    the halo block, then the rest), the boundary copied from the tile."""
    tile = cuda.shared.array(HALO, float32)
    ny, nx = u.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x0, y0 = cuda.blockIdx.x * TX - 1, cuda.blockIdx.y * TY - 1
    for r in range(ty, TY + 2, TY):
        for s in range(tx, TX + 2, TX):
            gy, gx = y0 + r, x0 + s
            tile[r, s] = u[gy, gx] if 0 <= gy < ny and 0 <= gx < nx else 0.0
    cuda.syncthreads()
    x, y = cuda.grid(2)
    if x < nx and y < ny:
        r, s = ty + 1, tx + 1
        c = tile[r, s]
        inner = 0 < y < ny - 1 and 0 < x < nx - 1
        lap = (4 * (tile[r - 1, s] + tile[r + 1, s] + tile[r, s - 1] + tile[r, s + 1])
               + tile[r - 1, s - 1] + tile[r - 1, s + 1] + tile[r + 1, s - 1]
               + tile[r + 1, s + 1] - 20 * c)
        out[y, x] = c + alpha * lap / 6 if inner else c


# --- online_update / flash_rows (lesson 5) ---------------------------------------------------

@cuda.jit(device=True)
def update_inverted_rescale(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m_new - m)  # inverted: inf when a row starts (m = -inf), and l = 0
    p = math.exp(s - m_new)
    return m_new, l * alpha + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_right_fused(m, l, acc, s, v):
    """Right, written differently: one exponential, the branch on which maximum wins."""
    if s <= m:
        p = math.exp(s - m)
        return m, l + p, acc + p * v
    r = math.exp(m - s)
    return s, l * r + 1.0, acc * r + v


# --- lbm_step (lesson 6): axes ----------------------------------------------------------------

CX, CY, OPP, W = S._lbm.CX, S._lbm.CY, S._lbm.OPP, S._lbm.W.astype(np.float32)


@cuda.jit
def lbm_swapped_grid(f_in, f_out, solid, omega, fx):
    y, x = cuda.grid(2)  # x and y swapped
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


# --- tiled_matmul / block_sum (lesson 4) -----------------------------------------------------

def _make_mm(doubled=False, transposed=False):
    @cuda.jit
    def kernel(a, b, c):
        sa = cuda.shared.array((TILE_MM, TILE_MM), float32)
        sb = cuda.shared.array((TILE_MM, TILE_MM), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE_MM + ty
        col = cuda.blockIdx.x * TILE_MM + tx
        acc = float32(0.0)
        for t in range(0, a.shape[1], TILE_MM):
            sa[ty, tx] = a[row, t + tx] if row < a.shape[0] and t + tx < a.shape[1] else 0.0
            sb[ty, tx] = b[t + ty, col] if t + ty < b.shape[0] and col < b.shape[1] else 0.0
            cuda.syncthreads()
            for i in range(TILE_MM):
                acc += sa[ty, i] * sb[i, tx]
            cuda.syncthreads()
        if doubled:
            acc *= 2.0
        if transposed:
            if col < c.shape[0] and row < c.shape[1]:
                c[col, row] = acc
        elif row < c.shape[0] and col < c.shape[1]:
            c[row, col] = acc
    return kernel


TPB_SUM = check.tiling.TPB


@cuda.jit
def sum_doubled(x, partial):
    sh = cuda.shared.array(TPB_SUM, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    sh[t] = 2.0 * x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    s = TPB_SUM // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]


# --- the catalogue ------------------------------------------------------------------------

def _rows_kernel(bug):
    from test_check_attention import make_rows_kernel

    return make_rows_kernel(bug)


WRONG = {
    # family: two elements per thread, odd n
    "vector_add: two per thread, odd n": (
        check.check_vector_add, add_two_per_thread, "handles 2 elements", None),
    # family: a scale doubled or missing
    "vector_add: doubled": (check.check_vector_add, add_doubled,
                            "2 times the expected value (a factor applied twice)",
                            "wrong_scale"),
    "gpu_scale: alpha applied twice": (
        check.check_gpu_scale, gpu_scale_twice, "alpha is applied once more", "wrong_scale"),
    "heat_step: alpha applied twice": (
        check.check_heat_step, _make_heat(alpha_twice=True), "alpha is applied once more",
        "wrong_scale"),
    # named by the one changed statement now (check/_variants), which singles it out better
    # than the family's factor
    "heat_step: alpha missing": (
        check.check_heat_step, _make_heat(alpha_one=True),
        "in place of `out = c + alpha * (4.0 * edges + corners - 20.0 * c) / 6.0`",
        "wrong_formula"),
    "tiled_matmul: doubled": (check.check_tiled_matmul, _make_mm(doubled=True),
                              "a factor applied twice", "wrong_scale"),
    "block_sum: doubled": (check.check_block_sum, sum_doubled, "a factor applied twice",
                           "wrong_scale"),
    "pipelined_scale: alpha applied twice": (
        check.check_pipelined_scale, pipelined_scale_twice, "alpha is applied once more",
        "wrong_scale"),
    # family: swapped axes in guards, indices, grids
    "tiled_matmul: c stored transposed": (
        check.check_tiled_matmul, _make_mm(transposed=True), "rows and columns swapped",
        "swapped_axes"),
    "mirror: guard on the wrong axis": (
        check.check_mirror, mirror_guard_wrong_axis, "or in its bounds guard", "swapped_axes"),
    "heat_step: x and y swapped": (
        check.check_heat_step, _make_heat(swap=True), "x and y are swapped", "swapped_axes"),
    "heat_step: guard on the wrong axis": (
        check.check_heat_step, _make_heat(guard_swapped=True), "other axis' size", None),
    "lbm_step: x and y swapped": (check.check_lbm_step, lbm_swapped_grid, "x and y are swapped",
                                  "swapped_axes"),
    # family: off by one in a tile region
    "heat_step: halo origin one off": (
        check.check_heat_step, _make_heat(origin_off=True), "off by one along x", "off_by_one"),
    "heat_step: tile centre one off": (
        check.check_heat_step, _make_heat(centre_off=True), "taken from the cell above",
        "off_by_one"),
    # family: NaN/inf with the first element
    # the NaN it makes when a row starts comes from one changed statement, which is named
    "online_update: inf * 0 when a row starts": (
        check.check_online_update, update_inverted_rescale,
        "`alpha = exp(m_new - m)` in place of `alpha = exp(m - m_new)`", "wrong_formula"),
}


# Out-of-bounds stores: the simulator refuses the index (and names its axis); a GPU writes
# into the guard zone, which is rejected as a write past the end of out.
SIM_PHRASE = {"heat_step: guard on the wrong axis"}


@pytest.mark.parametrize("name", list(WRONG))
def test_each_family_is_named(name):
    checker, fn, phrase, cause = WRONG[name]
    exc = verdict(checker, fn)
    if name in SIM_PHRASE and not cudacourse.runtime.device.is_simulator():
        return  # rejected; the symptom a GPU shows first is the guard zone (see SIM_PHRASE)
    assert phrase in str(exc), str(exc)
    assert cause is None or exc.cause == cause, (exc.cause, str(exc))


RIGHT = {
    "mirror: a row per thread, looping over columns": (check.check_mirror,
                                                        mirror_right_rows_loop),
    "heat_step: the tile loaded in 2-D strides": (check.check_heat_step, heat_right_two_loads),
    "online_update: one exponential, branch on the maximum": (check.check_online_update,
                                                              update_right_fused),
}


@pytest.mark.parametrize("name", list(RIGHT))
def test_right_answers_written_differently_pass(name):
    checker, fn = RIGHT[name]
    assert "passes" in checker(fn, seed=5)
