"""Lesson 6: the lattice Boltzmann method (D2Q9, BGK) for 2D flow past an obstacle.

The fluid is described by 9 populations per node, ``f[i, y, x]`` = the density moving with
lattice velocity ``c_i = (CX[i], CY[i])`` (rest, 4 axes, 4 diagonals). One time step:

1. **stream (pull)**: node x gathers ``f_i`` from its upstream neighbour ``x - c_i``;
2. **bounce-back**: if that neighbour is solid, the population that left x towards it comes
   back reversed: ``f_i(x) = f_opp(i)(x)`` (a no-slip wall half-way between the nodes);
3. **collide (BGK)**: relax towards the local equilibrium,
   ``f_i += omega (feq_i(rho, u) - f_i) + 3 w_i c_i . F`` (``F``: a body force, which drives a
   channel flow like a pressure gradient).

Stored populations are post-collision. Pull + collide in one kernel reads 9 floats and writes
9 floats per node and step, nothing else reaches global memory (plus one byte of mask): it
is memory-bound, and its ceiling is a copy of 72 bytes per node.

Layout: **structure of arrays** ``f[9, ny, nx]``, x fastest. Thread (x, y) reads
``f[i, y', x - cx]`` for each i: the 32 threads of a warp read 32 consecutive floats of one
plane (coalesced). The array-of-structures layout ``f[ny, nx, 9]`` would make a warp's 32
reads of one population 36 bytes apart: 9 times the memory transactions.

x is periodic (channels) or open (``inflow``: populations entering at x = 0 are the
equilibrium at the inflow velocity; at x = nx - 1, those that would enter from x = nx are
copied from x = nx - 1, a zero-gradient outlet); y is periodic (walls are rows of the mask).
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import math
from typing import Any, Callable

import numpy as np
from numba import cuda, float32

from ..runtime.arrays import check_array, is_device_array, to_device
from ..runtime.launch import DevicePlans, chosen

# D2Q9: rest, +x, +y, -x, -y, then the diagonals (+x+y, -x+y, -x-y, +x-y).
CX = np.array([0, 1, 0, -1, 0, 1, -1, -1, 1])
CY = np.array([0, 0, 1, 0, -1, 1, 1, -1, -1])
W = np.array([4 / 9] + [1 / 9] * 4 + [1 / 36] * 4)
OPP = np.array([0, 3, 4, 1, 2, 7, 8, 5, 6])  # c[OPP[i]] = -c[i]
Q = 9
BYTES_PER_NODE = 2 * Q * 4  # 9 float32 read + 9 written per node per step


# Flow past a circular cylinder (Williamson, Annu. Rev. Fluid Mech. 1996): the wake starts
# shedding vortices above Re of about 47; the shedding frequency f then gives a Strouhal number
# f D / u of about 0.2 over a wide range of Re.
SHEDDING_REYNOLDS = 47
CYLINDER_STROUHAL = 0.2


def viscosity(tau: float) -> float:
    """Kinematic viscosity (lattice units) of BGK with relaxation time tau."""
    return (tau - 0.5) / 3.0


def tau_for(reynolds: float, u: float, length: float) -> float:
    """The relaxation time giving Reynolds number ``u * length / nu``."""
    return 3.0 * u * length / reynolds + 0.5


def reynolds(u: float, length: float, tau: float) -> float:
    return u * length / viscosity(tau)


def equilibrium(rho: Any, ux: Any, uy: Any, xp: Any = np) -> Any:
    """feq[i] = w_i rho (1 + 3 c.u + 4.5 (c.u)^2 - 1.5 u.u), shape (9, *rho.shape)."""
    cx = xp.asarray(CX, dtype=rho.dtype).reshape(Q, 1, 1)
    cy = xp.asarray(CY, dtype=rho.dtype).reshape(Q, 1, 1)
    w = xp.asarray(W, dtype=rho.dtype).reshape(Q, 1, 1)
    cu = cx * ux + cy * uy
    return w * rho * (1 + 3 * cu + 4.5 * cu * cu - 1.5 * (ux * ux + uy * uy))


def macroscopic(f: Any, force: tuple[float, float] = (0.0, 0.0), xp: Any = np
                ) -> tuple[Any, Any, Any]:
    """(rho, ux, uy) of stored (post-collision) populations. Collision added the force F to
    their momentum; the fluid moves at the velocity half-way through that kick, so half of
    F is taken back off."""
    rho = f.sum(axis=0)
    ux = (f[1] + f[5] + f[8] - f[3] - f[6] - f[7] - 0.5 * force[0]) / rho
    uy = (f[2] + f[5] + f[6] - f[4] - f[7] - f[8] - 0.5 * force[1]) / rho
    return rho, ux, uy


def init_f(solid: Any, u: tuple[float, float] = (0.0, 0.0), dtype: Any = np.float32,
           kick: tuple[float, float, float] | None = None) -> np.ndarray:
    """Equilibrium at density 1 and velocity u (at rest in solid nodes). ``kick`` = (x, y,
    radius): a small transverse push there, which breaks the symmetry of a wake so that
    vortices start shedding after a few hundred steps instead of thousands."""
    ny, nx = solid.shape
    ux = np.full((ny, nx), u[0], dtype=np.float64)
    uy = np.full((ny, nx), u[1], dtype=np.float64)
    if kick is not None:
        yy, xx = np.mgrid[0:ny, 0:nx]
        x0, y0, r = kick
        uy += 0.2 * max(abs(u[0]), 0.01) * np.exp(-((xx - x0) ** 2 + (yy - y0) ** 2)
                                                  / (2 * r * r))
    ux[solid] = 0.0
    uy[solid] = 0.0
    return equilibrium(np.ones((ny, nx)), ux, uy).astype(dtype)


# --- obstacle masks (True = solid) -------------------------------------------------------

def channel(ny: int, nx: int) -> np.ndarray:
    """Walls on the first and last rows; the fluid is rows 1 .. ny - 2."""
    solid = np.zeros((ny, nx), dtype=bool)
    solid[0] = solid[-1] = True
    return solid


def cylinder(ny: int, nx: int, cx: float, cy: float, r: float) -> np.ndarray:
    y, x = np.mgrid[0:ny, 0:nx]
    return (x - cx) ** 2 + (y - cy) ** 2 <= r * r


def naca00xx(ny: int, nx: int, chord: float, aoa_deg: float, x_le: float, y_c: float,
             thickness: float = 0.12) -> np.ndarray:
    """A symmetric NACA 4-digit airfoil (0012 by default), leading edge at (x_le, y_c), at
    angle of attack ``aoa_deg`` (positive: nose up against a flow in +x; it rotates about
    the quarter chord)."""
    y, x = np.mgrid[0:ny, 0:nx].astype(np.float64)
    a = math.radians(aoa_deg)
    px, py = x_le + 0.25 * chord, y_c  # rotate about the quarter-chord point
    # Node in airfoil coordinates: undo the clockwise rotation by alpha (nose up).
    dx, dy = x - px, y - py
    xa = dx * math.cos(a) - dy * math.sin(a) + 0.25 * chord
    ya = dx * math.sin(a) + dy * math.cos(a)
    t = np.clip(xa / chord, 0.0, 1.0)
    half = 5 * thickness * chord * (0.2969 * np.sqrt(t) - 0.1260 * t - 0.3516 * t ** 2
                                    + 0.2843 * t ** 3 - 0.1015 * t ** 4)
    return (xa >= 0) & (xa <= chord) & (np.abs(ya) <= half)


def naca0012(ny: int, nx: int, chord: float, aoa_deg: float, x_le: float, y_c: float
             ) -> np.ndarray:
    return naca00xx(ny, nx, chord, aoa_deg, x_le, y_c, 0.12)


# --- the reference step ---------------------------------------------------------------------

class ReferenceStepper:
    """The vectorised NumPy (or CuPy) step for one geometry; bounce-back links precomputed.

    ``step(f)`` returns the next post-collision populations; f is (9, ny, nx). Written for
    speed on a CPU (pictures in simulator mode): bounce-back and solid nodes touch only
    the few nodes concerned, the collision works one population at a time in place.
    """

    def __init__(self, solid: Any, omega: float, force: tuple[float, float] = (0.0, 0.0),
                 inflow: float | None = None, xp: Any = np):
        self.xp = xp
        self.solid = xp.asarray(solid).astype(bool)
        self.omega = float(omega)
        self.force = (float(force[0]), float(force[1]))
        self.inflow = inflow
        # For each i: is the upstream node x - c_i solid? (Where it lies outside an open x
        # boundary it is not.) Kept as the flat indices of the fluid nodes concerned.
        self.bounce = [self._pull(self.solid, i) if i else None for i in range(Q)]
        if inflow is not None:
            for i in range(Q):
                if CX[i] == 1:
                    self.bounce[i][:, 0] = False
        fluid = ~self.solid
        self._links = [None] + [xp.flatnonzero((self.bounce[i] & fluid).ravel())
                                for i in range(1, Q)]
        self._solid_idx = xp.flatnonzero(self.solid.ravel())

    def _pull(self, a: Any, i: int) -> Any:
        """a[y - cy, x - cx] (periodic in y; in x periodic, or open)."""
        xp = self.xp
        out = xp.roll(a, int(CY[i]), axis=-2) if CY[i] else a
        if CX[i] == 0:
            return out.copy() if out is a else out
        if self.inflow is None:
            return xp.roll(out, int(CX[i]), axis=-1)
        res = xp.empty_like(out)
        if CX[i] == 1:  # from the left: x = 0 is filled by the inlet afterwards
            res[..., 1:] = out[..., :-1]
            res[..., 0] = out[..., 0]
        else:  # from the right: x = nx - 1 copies itself (zero-gradient outlet)
            res[..., :-1] = out[..., 1:]
            res[..., -1] = out[..., -1]
        return res

    def stream(self, f: Any) -> Any:
        """Pull streaming with bounce-back (no collision)."""
        g = self.xp.empty_like(f)
        g[0] = f[0]
        for i in range(1, Q):
            g[i] = self._pull(f[i], i)
            if self.inflow is not None and CX[i] == 1:
                u = self.inflow
                g[i][:, 0] = float(W[i]) * (1 + 3 * u + 3 * u * u)  # equilibrium, rho 1, u_in
            links = self._links[i]
            if links.size:  # the upstream node is solid: the reversed population comes back
                g[i].ravel()[links] = f[OPP[i]].ravel()[links]
        return g

    def collide(self, g: Any) -> Any:
        """BGK with the forcing term, in place (g is overwritten); returns g. Constants are
        Python numbers, so float32 populations are computed in float32 (a NumPy float64
        scalar would promote every array to float64)."""
        rho = g.sum(axis=0)
        ux = (g[1] + g[5] + g[8] - g[3] - g[6] - g[7]) / rho
        uy = (g[2] + g[5] + g[6] - g[4] - g[7] - g[8]) / rho
        usq = 1.5 * (ux * ux + uy * uy)
        om = self.omega
        fx, fy = self.force
        for i in range(Q):
            cx, cy, w = int(CX[i]), int(CY[i]), float(W[i])
            if cx and cy:
                cu = cx * ux + cy * uy
            elif cx:
                cu = ux if cx > 0 else -ux
            elif cy:
                cu = uy if cy > 0 else -uy
            else:
                cu = None
            wr = w * rho
            feq = wr * (1 - usq) if cu is None else wr * (1 + 3 * cu + 4.5 * cu * cu - usq)
            gi = g[i]
            gi += om * (feq - gi)
            s = 3 * w * (cx * fx + cy * fy)
            if s:
                gi += s
        return g

    def step(self, f: Any) -> Any:
        new = self.collide(self.stream(f))
        if new.dtype != f.dtype:
            new = new.astype(f.dtype)
        if self._solid_idx.size:  # solid nodes keep what they hold
            n = f.shape[1] * f.shape[2]
            flat_new = new.reshape(Q, n)
            flat_new[:, self._solid_idx] = f.reshape(Q, n)[:, self._solid_idx]
        return new


def lbm_step_ref(f: Any, solid: Any, omega: float, force: tuple[float, float] = (0.0, 0.0),
                 inflow: float | None = None, xp: Any = np) -> Any:
    """The reference of one fused step (pull, bounce-back, BGK); solid nodes keep f."""
    return ReferenceStepper(solid, omega, force, inflow, xp).step(f)


def poiseuille_ref(ny: int, force: float, tau: float) -> np.ndarray:
    """The analytic channel profile u(y) between walls in rows 0 and ny - 1 (half-way
    bounce-back puts the walls at y = 0.5 and ny - 1.5): F / (2 nu) (y - 0.5)(ny - 1.5 - y)."""
    y = np.arange(ny, dtype=np.float64)
    u = force / (2 * viscosity(tau)) * (y - 0.5) * (ny - 1.5 - y)
    u[0] = u[-1] = 0.0
    return u


def obstacle_force(f: Any, obstacle: Any, xp: Any = np) -> tuple[float, float]:
    """Force (Fx = drag, Fy = lift, for a flow in +x) of the fluid on ``obstacle`` by momentum
    exchange: every population heading into the body is reversed, handing over 2 f_i c_i."""
    obstacle = xp.asarray(obstacle).astype(bool)
    fluid = ~obstacle
    fx = fy = 0.0
    for i in range(1, Q):
        # Nodes whose downstream neighbour x + c_i is part of the obstacle.
        hits = fluid & xp.roll(obstacle, (-int(CY[i]), -int(CX[i])), axis=(0, 1))
        s = 2.0 * float(f[i][hits].sum())
        fx += s * CX[i]
        fy += s * CY[i]
    return fx, fy


def force_coefficients(fx: float, fy: float, u: float, chord: float, rho: float = 1.0
                       ) -> tuple[float, float]:
    """(C_D, C_L) = force / (rho u^2 chord / 2): sizes and speeds become comparable (a force
    in lattice units grows with the chord)."""
    q = 0.5 * rho * u * u * chord
    return fx / q, fy / q


def wing_forces(solid: np.ndarray, reynolds_number: float, chord: float, inflow: float,
                flow_throughs: float = 2.0, window: float = 0.25, samples: int = 20,
                use_gpu: bool | None = None) -> tuple[float, float]:
    """Mean (C_D, C_L) of an open-channel flow past ``solid`` at a given Reynolds number.

    The flow starts impulsively: the starting vortex, and pressure waves bouncing between
    inlet and outlet, make the instantaneous force swing by as much as its mean for about
    one flow-through time (``nx / inflow`` steps). So the run lasts ``flow_throughs`` of
    those, and the force is averaged over the last ``window`` of the run (``samples``
    snapshots): a single final snapshot can have either sign at small angles."""
    if not 0.0 < window <= 1.0 or samples < 1 or flow_throughs <= 0:
        raise ValueError("need 0 < window <= 1, samples >= 1, flow_throughs > 0")
    ny, nx = solid.shape
    steps = int(round(flow_throughs * nx / inflow))
    tau = tau_for(reynolds_number, inflow, chord)
    averaged = max(samples, int(steps * window))
    every = max(1, averaged // samples)
    # Develop the flow without looking (no host copies), then sample the window.
    f, _ = simulate(solid, tau, steps - averaged, inflow=inflow, use_gpu=use_gpu)
    _, got = simulate(solid, tau, averaged, f0=f, inflow=inflow, every=every,
                      use_gpu=use_gpu, frame=lambda g: obstacle_force(g, solid))
    fx, fy = np.mean(np.array(got), axis=0)
    return force_coefficients(float(fx), float(fy), inflow, chord)


def vorticity(ux: Any, uy: Any, xp: Any = np) -> Any:
    """dv/dx - du/dy by central differences."""
    return ((xp.roll(uy, -1, axis=1) - xp.roll(uy, 1, axis=1))
            - (xp.roll(ux, -1, axis=0) - xp.roll(ux, 1, axis=0))) / 2.0


# --- the fused kernel -------------------------------------------------------------------------

@cuda.jit(device=True, inline="always")
def _pull(f_in, solid, x, y, nx, ny, u_in, open_x):
    """The 9 populations arriving at node (x, y) (uint64 indices), bounced back off solid
    neighbours, the inflow's equilibrium at an open inlet."""
    one_u = np.uint64(1)
    # Upstream neighbours, periodic (a select, not a modulo: no integer division).
    xm = x - one_u if x > np.uint64(0) else nx - one_u
    xp = x + one_u if x < nx - one_u else np.uint64(0)
    ym = y - one_u if y > np.uint64(0) else ny - one_u
    yp = y + one_u if y < ny - one_u else np.uint64(0)
    inlet = open_x != 0 and x == np.uint64(0)  # entering from x = -1: the inflow
    if open_x != 0 and x == nx - one_u:
        xp = x  # zero-gradient outlet: what would come from x = nx is this column's own
    # Pull: f_i(x) = f_i(x - c_i). The 9 loads do not wait for the mask: all are issued at
    # once (coalesced, one plane each). Where x - c_i is solid (rare: next to walls), the
    # reversed population f_opp(i)(x) replaces the value pulled (a solid node's populations
    # are valid memory, only unused).
    f0 = f_in[0, y, x]
    f1 = f_in[1, y, xm]
    f2 = f_in[2, ym, x]
    f3 = f_in[3, y, xp]
    f4 = f_in[4, yp, x]
    f5 = f_in[5, ym, xm]
    f6 = f_in[6, ym, xp]
    f7 = f_in[7, yp, xp]
    f8 = f_in[8, yp, xm]
    if solid[y, xm]:
        f1 = f_in[3, y, x]
    if solid[ym, x]:
        f2 = f_in[4, y, x]
    if solid[y, xp]:
        f3 = f_in[1, y, x]
    if solid[yp, x]:
        f4 = f_in[2, y, x]
    if solid[ym, xm]:
        f5 = f_in[7, y, x]
    if solid[ym, xp]:
        f6 = f_in[8, y, x]
    if solid[yp, xp]:
        f7 = f_in[5, y, x]
    if solid[yp, xm]:
        f8 = f_in[6, y, x]
    if inlet:  # populations entering from outside: equilibrium at the inflow velocity
        e_in = float32(1.0) + float32(3.0) * u_in + float32(3.0) * u_in * u_in  # feq / w
        f1 = e_in * float32(1.0 / 9.0)
        f5 = e_in * float32(1.0 / 36.0)
        f8 = e_in * float32(1.0 / 36.0)
    return f0, f1, f2, f3, f4, f5, f6, f7, f8


@cuda.jit(device=True, inline="always")
def _collide_store(f_out, x, y, f0, f1, f2, f3, f4, f5, f6, f7, f8, omega, fx, fy):
    """BGK with the forcing term at node (x, y); the 9 results stored."""
    one = float32(1.0)
    # Moments.
    rho = f0 + f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8
    inv = one / rho
    ux = (f1 + f5 + f8 - f3 - f6 - f7) * inv
    uy = (f2 + f5 + f6 - f4 - f7 - f8) * inv
    # BGK: f += omega (feq - f) + 3 w c.F, with feq = w rho (1 + 3cu + 4.5cu^2 - 1.5u^2).
    usq = float32(1.5) * (ux * ux + uy * uy)
    w0 = float32(4.0 / 9.0) * rho
    w1 = float32(1.0 / 9.0) * rho
    w2 = float32(1.0 / 36.0) * rho
    g1 = float32(1.0 / 3.0) * fx  # 3 w_i c.F with w = 1/9
    h1 = float32(1.0 / 3.0) * fy
    g2 = float32(1.0 / 12.0) * fx  # with w = 1/36
    h2 = float32(1.0 / 12.0) * fy
    t3 = float32(3.0)
    t45 = float32(4.5)
    f_out[0, y, x] = f0 + omega * (w0 * (one - usq) - f0)
    cu = ux
    f_out[1, y, x] = f1 + omega * (w1 * (one + t3 * cu + t45 * cu * cu - usq) - f1) + g1
    cu = uy
    f_out[2, y, x] = f2 + omega * (w1 * (one + t3 * cu + t45 * cu * cu - usq) - f2) + h1
    cu = -ux
    f_out[3, y, x] = f3 + omega * (w1 * (one + t3 * cu + t45 * cu * cu - usq) - f3) - g1
    cu = -uy
    f_out[4, y, x] = f4 + omega * (w1 * (one + t3 * cu + t45 * cu * cu - usq) - f4) - h1
    cu = ux + uy
    f_out[5, y, x] = f5 + omega * (w2 * (one + t3 * cu + t45 * cu * cu - usq) - f5) + g2 + h2
    cu = uy - ux
    f_out[6, y, x] = f6 + omega * (w2 * (one + t3 * cu + t45 * cu * cu - usq) - f6) - g2 + h2
    cu = -ux - uy
    f_out[7, y, x] = f7 + omega * (w2 * (one + t3 * cu + t45 * cu * cu - usq) - f7) - g2 - h2
    cu = ux - uy
    f_out[8, y, x] = f8 + omega * (w2 * (one + t3 * cu + t45 * cu * cu - usq) - f8) + g2 - h2


def _lbm_fused(f_in, f_out, solid, omega, fx, fy, u_in, open_x):
    """One lattice node per thread: pull 9 populations (bouncing back off solid neighbours),
    collide, write 9. No shared memory: neighbours' values come straight from global
    memory, and each is read by exactly one thread."""
    # Indices are unsigned (uint64 throughout: a signed one would promote to float64):
    # Numba then skips the negative-index wraparound (3 64-bit instructions per index, per
    # array), and the periodic neighbours below are selects, not a modulo.
    gx, gy = cuda.grid(2)  # x fastest: a warp covers 32 consecutive nodes of a row
    x = np.uint64(gx)
    y = np.uint64(gy)
    ny = np.uint64(solid.shape[0])
    nx = np.uint64(solid.shape[1])
    if x >= nx or y >= ny:
        return
    if solid[y, x]:
        for i in range(9):
            f_out[i, y, x] = f_in[i, y, x]  # keeps the buffers defined; never pulled from
        return
    f0, f1, f2, f3, f4, f5, f6, f7, f8 = _pull(f_in, solid, x, y, nx, ny, u_in, open_x)
    _collide_store(f_out, x, y, f0, f1, f2, f3, f4, f5, f6, f7, f8, omega, fx, fy)


def _make_multi(npt: int):
    """The same step with ``npt`` nodes per thread (consecutive rows of one column): every
    node's 9 pulls (and its solid flag) are issued before the first store, so a thread has
    9 * npt loads in flight instead of 9 (``f_in`` and ``f_out`` might alias as far as the
    compiler knows: a load written after a store could not be moved above it)."""

    def kernel(f_in, f_out, solid, omega, fx, fy, u_in, open_x):
        gx, gy = cuda.grid(2)
        x = np.uint64(gx)
        y0 = np.uint64(gy) * np.uint64(npt)
        ny = np.uint64(solid.shape[0])
        nx = np.uint64(solid.shape[1])
        if x >= nx or y0 >= ny:
            return
        fl = cuda.local.array((npt, 9), float32)
        wall = cuda.local.array(npt, np.uint8)
        for n in range(npt):
            y = y0 + np.uint64(n)
            if y < ny:
                wall[n] = solid[y, x]
                (fl[n, 0], fl[n, 1], fl[n, 2], fl[n, 3], fl[n, 4], fl[n, 5], fl[n, 6],
                 fl[n, 7], fl[n, 8]) = _pull(f_in, solid, x, y, nx, ny, u_in, open_x)
        for n in range(npt):
            y = y0 + np.uint64(n)
            if y < ny:
                if wall[n]:
                    for i in range(9):
                        f_out[i, y, x] = f_in[i, y, x]  # rare: solid nodes copy themselves
                else:
                    _collide_store(f_out, x, y, fl[n, 0], fl[n, 1], fl[n, 2], fl[n, 3],
                                   fl[n, 4], fl[n, 5], fl[n, 6], fl[n, 7], fl[n, 8],
                                   omega, fx, fy)

    kernel.__name__ = kernel.__qualname__ = f"_lbm_fused_x{npt}"
    return kernel


# name -> (nodes per thread, cap on registers per thread; 0: the compiler's choice, 44 on the
# H200). The step is latency-bound (ncu, 2026-12-01: 11 of the 15.4 cycles between a warp's
# instructions wait on global loads) and its 44 registers x 256 threads let 5 blocks share an
# SM: a cap of 40 fits 6, 32 fits 8 (every warp slot), so more loads are in flight per SM;
# 2 nodes per thread put 18 loads in flight per thread instead. None was faster on the H200
# (docs/benchmarks.json of 2026-12-02, block 128 x 2: plain 0.405 ms, maxreg40 0.394,
# maxreg32 0.408, x2 0.409, x2r64 0.440, x4 0.456; in the probe of the same call, docs/sweeps/
# probe_issue35_h200_2026-12-02.json, maxreg40 was 0.5% faster than plain, within noise).
KERNELS = {"plain": (1, 0), "maxreg40": (1, 40), "maxreg32": (1, 32), "x2": (2, 0),
           "x2r64": (2, 64), "x4": (4, 0)}
BEST_KERNEL = "plain"
BEST_KERNEL = chosen("lbm_kernel", BEST_KERNEL)  # a GPU sweep's winner (launch.chosen)
_COMPILED: dict[tuple, Any] = {}


def fused_kernel(name: str = "best") -> Any:
    """The fused step kernel named in ``KERNELS`` ("best": ``BEST_KERNEL``), compiled once;
    its ``nodes`` attribute is the nodes per thread."""
    if name == "best":
        name = BEST_KERNEL
    if name not in KERNELS:
        raise ValueError(f"kernel must be 'best' or one of {tuple(KERNELS)}, got {name!r}")
    npt, cap = KERNELS[name]
    if (npt, cap) not in _COMPILED:
        from ..runtime.device import is_simulator

        opts = {"max_registers": cap} if cap and not is_simulator() else {}
        body = _lbm_fused_py if npt == 1 else _make_multi(npt)
        kern = cuda.jit(**opts)(body)
        kern.nodes = npt
        _COMPILED[(npt, cap)] = kern
    return _COMPILED[(npt, cap)]


_lbm_fused_py = _lbm_fused  # the Python function; compiled once per (nodes, register cap)
_lbm_fused = fused_kernel(BEST_KERNEL)


# DEFAULT_BLOCK is what the committed sweep measured fastest (docs/sweeps/
# stencil_lbm_h200_2026-12-01.json, `python3 -m cudacourse.bench --only stencil,lbm`, public
# calls, 2048 x 8192 nodes): 128 x 2 0.383 ms, 256 x 1 0.385, 64 x 4 0.387, 32 x 8 0.408,
# 128 x 4 0.434 -- the shape matters little. tests/test_lbm.py ties the two.
DEFAULT_BLOCK = (128, 2)
DEFAULT_BLOCK = chosen("lbm_block", DEFAULT_BLOCK)
BLOCKS = ((128, 2), (256, 1), (64, 4), (128, 4), (32, 8))


def launch_config(ny: int, nx: int, block: tuple[int, int] | None = None,
                  kernel: str = "best") -> tuple[tuple, tuple]:
    bx, by = block or DEFAULT_BLOCK
    if bx * by > 1024 or bx < 1 or by < 1:
        raise ValueError(f"block {bx} x {by}: a GPU allows 1 to 1024 threads per block")
    rows = by * fused_kernel(kernel).nodes  # rows of nodes one block covers
    return (math.ceil(nx / bx), math.ceil(ny / rows)), (bx, by)


def _solid_device(solid: Any) -> Any:
    if isinstance(solid, np.ndarray):
        if solid.ndim != 2:
            raise ValueError(f"solid must be 2-dimensional, got shape {solid.shape}")
        return cuda.to_device(solid.astype(np.uint8))
    check_array(solid, "solid", dtype=(np.uint8, np.bool_), ndim=2)
    return to_device(solid)


def lbm_step(f_in: Any, f_out: Any, solid: Any, omega: float,
             force: tuple[float, float] = (0.0, 0.0), inflow: float | None = None,
             block: tuple[int, int] | None = None, kernel: str = "best") -> Any:
    """One fused step on the GPU: f_out = collide(stream(f_in)); device arrays in
    (f_in, f_out of shape (9, ny, nx) float32, solid (ny, nx) uint8), f_out returned.
    ``kernel``: a name of ``KERNELS`` (nodes per thread and register cap it is compiled with)."""
    key = (omega, tuple(force), inflow, block, kernel)
    if _PLANS.run(key, f_in, f_out, solid):  # device arrays seen before
        return f_out
    check_array(f_in, "f_in", ndim=3)
    check_array(f_out, "f_out", ndim=3)
    if is_device_array(f_in) is False or is_device_array(f_out) is False:
        raise TypeError("lbm_step works on device arrays: move f once with cuda.to_device "
                        "and keep it there (lbm.simulate does that for you)")
    if f_in.shape[0] != Q or tuple(f_out.shape) != tuple(f_in.shape):
        raise ValueError(f"f_in and f_out must both have shape (9, ny, nx), got "
                         f"{tuple(f_in.shape)} and {tuple(f_out.shape)}")
    if not 0.0 < omega < 2.0:
        raise ValueError(f"omega = {omega} must be in (0, 2) (tau = 1 / omega > 0.5)")
    ds = _solid_device(solid)
    if tuple(ds.shape) != tuple(f_in.shape[1:]):
        raise ValueError(f"solid has shape {tuple(ds.shape)}, f has {tuple(f_in.shape)}")
    grid, blk = launch_config(f_in.shape[1], f_in.shape[2], block, kernel)
    args = (to_device(f_in), to_device(f_out), ds, np.float32(omega), np.float32(force[0]),
            np.float32(force[1]), np.float32(inflow or 0.0), np.int32(inflow is not None))
    kern = fused_kernel(kernel)
    kern[grid, blk](*args)
    if is_device_array(solid):  # a host mask is copied on every call: nothing to remember
        _PLANS.remember(key, (f_in, f_out, solid), [(kern, grid, blk, args, (0, 1, 2))])
    return f_out


_PLANS = DevicePlans()  # launches worked out for device arrays, reused while they look alike


def simulate(solid: np.ndarray, tau: float, steps: int, *, f0: np.ndarray | None = None,
             force: tuple[float, float] = (0.0, 0.0), inflow: float | None = None,
             every: int = 0, use_gpu: bool | None = None,
             block: tuple[int, int] | None = None,
             frame: Callable[[np.ndarray], Any] | None = None) -> tuple[np.ndarray, list]:
    """Run ``steps`` steps from ``f0`` (default: equilibrium at the inflow velocity); return
    the final populations (host) and, every ``every`` steps, ``frame(f)`` (default: the
    velocity (ux, uy)). On a GPU the fused kernel runs with two device buffers swapped
    after each step; in the simulator (or ``use_gpu=False``) the vectorised NumPy reference
    runs instead: the same physics, fast enough for pictures."""
    from ..runtime import device

    if use_gpu is None:
        use_gpu = not device.is_simulator()
    solid = np.asarray(solid, dtype=bool)
    f = init_f(solid, (inflow or 0.0, 0.0)) if f0 is None else np.asarray(f0, np.float32)
    frame = frame or (lambda g: macroscopic(g, force)[1:])
    frames: list = []
    omega = 1.0 / tau
    if steps <= 0:
        return f, frames
    if use_gpu:
        a, b = cuda.to_device(f), cuda.device_array_like(f)
        ds = cuda.to_device(solid.astype(np.uint8))
        lbm_step(a, b, ds, omega, force, inflow, block)  # validates everything once
        grid, blk = launch_config(*solid.shape, block)
        launch = fused_kernel()[grid, blk]  # configured once: less Python per step
        args = (ds, np.float32(omega), np.float32(force[0]), np.float32(force[1]),
                np.float32(inflow or 0.0), np.int32(inflow is not None))
        a, b = b, a
        if every == 1:
            frames.append(frame(a.copy_to_host()))
        for t in range(2, steps + 1):
            launch(a, b, *args)
            a, b = b, a  # the buffer just written is the next step's input
            if every and t % every == 0:
                frames.append(frame(a.copy_to_host()))
        return a.copy_to_host(), frames
    stepper = ReferenceStepper(solid, omega, force, inflow)
    for t in range(1, steps + 1):
        f = stepper.step(f)
        if every and t % every == 0:
            frames.append(frame(f))
    return f, frames
