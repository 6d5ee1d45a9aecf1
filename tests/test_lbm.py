"""The lattice Boltzmann module: the reference's physics, the fused kernel against it."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import device
from cudacourse.kernels import lbm

pytestmark = pytest.mark.lesson6


def test_lattice_constants_are_consistent():
    assert np.isclose(lbm.W.sum(), 1.0)
    for i in range(lbm.Q):
        assert (lbm.CX[lbm.OPP[i]], lbm.CY[lbm.OPP[i]]) == (-lbm.CX[i], -lbm.CY[i])
    # second moment of the weights: the lattice speed of sound squared is 1/3
    assert np.isclose((lbm.W * lbm.CX ** 2).sum(), 1 / 3)


def test_equilibrium_has_the_right_moments():
    rho = np.array([[1.1, 0.9]])
    ux, uy = np.array([[0.05, -0.02]]), np.array([[0.01, 0.03]])
    feq = lbm.equilibrium(rho, ux, uy)
    r, vx, vy = lbm.macroscopic(feq)
    assert np.allclose(r, rho) and np.allclose(vx, ux) and np.allclose(vy, uy)


def test_poiseuille_profile_matches_the_parabola():
    """Body-force driven channel: the steady profile is the analytic parabola (the
    half-way bounce-back walls sit between rows 0/1 and ny-2/ny-1)."""
    ny, tau, force = 18, 0.8, 1e-5
    f, _ = lbm.simulate(lbm.channel(ny, 1), tau, 6000, force=(force, 0.0), use_gpu=False)
    _, ux, uy = lbm.macroscopic(f, (force, 0.0))
    want = lbm.poiseuille_ref(ny, force, tau)
    err = np.abs(ux[1:-1, 0] - want[1:-1]).max() / want.max()
    assert err < 0.01, f"profile off the parabola by {err:.3%}"
    assert np.abs(uy).max() < 1e-3 * want.max()  # float32 rounding only


def test_the_wall_is_exactly_half_way_at_the_magic_tau():
    """With tau = 1/2 + sqrt(3/16), BGK bounce-back reproduces the parabola exactly (to
    float64 rounding and convergence) even on a narrow channel; elsewhere it is off."""
    ny, force = 10, 1e-6
    errs = {}
    for tau in (0.5 + np.sqrt(3 / 16), 1.2):
        st = lbm.ReferenceStepper(lbm.channel(ny, 1), 1 / tau, (force, 0.0))
        f = lbm.init_f(lbm.channel(ny, 1), dtype=np.float64)
        for _ in range(int(20 * ny * ny / lbm.viscosity(tau) / np.pi ** 2)):
            f = st.step(f)
        _, ux, _ = lbm.macroscopic(f, (force, 0.0))
        want = lbm.poiseuille_ref(ny, force, tau)
        errs[tau] = np.abs(ux[1:-1, 0] - want[1:-1]).max() / want.max()
    exact, off = errs.values()
    assert exact < 1e-6 and off > 0.01, errs


def test_mass_is_conserved_to_rounding_with_walls_obstacle_and_force():
    ny, nx = 20, 30
    solid = lbm.channel(ny, nx) | lbm.cylinder(ny, nx, 12, 9.5, 3)
    rng = np.random.default_rng(0)
    f = lbm.init_f(solid, (0.05, 0.0), dtype=np.float64)
    f *= 1 + 0.05 * rng.uniform(-1, 1, f.shape)
    st = lbm.ReferenceStepper(solid, 1 / 0.7, (1e-4, 0.0))
    m0 = f[:, ~solid].sum()
    for _ in range(200):
        f = st.step(f)
    assert abs(f[:, ~solid].sum() - m0) / m0 < 1e-12


def test_naca_mask_and_drag_sign():
    s0 = lbm.naca0012(60, 120, 40, 0.0, 30, 30)
    # symmetric about its chord at zero angle; 12% thick
    assert (s0[1:] == s0[1:][::-1]).mean() > 0.95
    thick = s0.sum(axis=0).max()
    assert 3 <= thick <= 6
    for aoa in (-8.0, 8.0):  # one snapshot after the start: drag already points downstream
        solid = lbm.naca0012(60, 160, 40, aoa, 40, 30)
        f, _ = lbm.simulate(solid, 0.6, 300, inflow=0.1, use_gpu=False)
        assert lbm.obstacle_force(f, solid)[0] > 0, aoa


def test_lift_grows_with_the_angle_of_attack():
    """Averaged over a window of a developed flow (lbm.wing_forces), at one Reynolds number,
    the lift coefficient rises with the angle: zero at 0, odd in the angle, roughly linear.
    (A final snapshot alone was not monotonic: the starting transient swings the lift.)"""
    coef = {}
    for aoa in (-6.0, 0.0, 3.0, 6.0):
        solid = lbm.naca0012(70, 210, 44, aoa, 42, 35)
        coef[aoa] = lbm.wing_forces(solid, 100.0, 44, 0.1)  # the kernel on a GPU
    cl = {a: c[1] for a, c in coef.items()}
    assert cl[-6.0] < cl[0.0] < cl[3.0] < cl[6.0], cl
    assert abs(cl[0.0]) < 0.02 * cl[6.0], cl
    assert cl[-6.0] == pytest.approx(-cl[6.0], rel=0.05), cl  # mirror images
    slope = cl[6.0] / np.radians(6.0)  # per radian; 2 pi for thin airfoils at high Re
    assert 0.5 < slope < 2 * np.pi, slope
    assert all(c[0] > 0 for c in coef.values()), coef  # drag points downstream


def test_positive_angle_raises_the_leading_edge():
    solid = lbm.naca0012(80, 120, 60, 10.0, 20, 40)
    ys, xs = np.nonzero(solid)
    le = ys[xs == xs.min()].mean()
    te = ys[xs == xs.max()].mean()
    assert le > te


@pytest.mark.parametrize("kernel", list(lbm.KERNELS))
@pytest.mark.parametrize("inflow", [None, 0.08], ids=["periodic", "open"])
def test_fused_kernel_matches_the_reference(inflow, kernel):
    """Every kernel of lbm.KERNELS; with several nodes per thread, 9 rows are not a multiple
    of the block's rows (the last block's last rows lie outside the grid)."""
    rng = np.random.default_rng(1)
    ny, nx = 9, 13
    solid = lbm.channel(ny, nx) | lbm.cylinder(ny, nx, 6, 4, 1.5)
    f = lbm.init_f(solid, (0.05, 0.01)) * (1 + 0.1 * rng.uniform(-1, 1, (9, ny, nx)))
    f = f.astype(np.float32)
    force = (1e-4, 2e-5)
    want = lbm.lbm_step_ref(f.astype(np.float64), solid, 1 / 0.7, force, inflow)
    a, b = cuda.to_device(f), cuda.device_array_like(f)
    lbm.lbm_step(a, b, solid, 1 / 0.7, force, inflow, block=(8, 2), kernel=kernel)
    np.testing.assert_allclose(b.copy_to_host(), want, rtol=2e-6, atol=2e-7)


def test_launch_config_counts_the_nodes_per_thread():
    assert lbm.launch_config(9, 13, (8, 2), "plain") == ((2, 5), (8, 2))
    assert lbm.launch_config(9, 13, (8, 2), "x4") == ((2, 2), (8, 2))
    with pytest.raises(ValueError, match="kernel must be"):
        lbm.fused_kernel("fastest")


def test_simulate_on_the_gpu_path_equals_the_reference():
    """simulate(use_gpu=True) runs the fused kernel with swapped buffers (in the simulator
    too, on a tiny grid)."""
    solid = lbm.channel(6, 5)
    f_gpu, frames = lbm.simulate(solid, 0.8, 4, force=(1e-3, 0.0), use_gpu=True, every=2,
                                 block=(8, 2))
    f_ref, _ = lbm.simulate(solid, 0.8, 4, force=(1e-3, 0.0), use_gpu=False)
    np.testing.assert_allclose(f_gpu, f_ref, rtol=1e-5, atol=1e-7)
    assert len(frames) == 2


def test_bad_input_is_refused_clearly():
    f = cuda.to_device(np.ones((9, 4, 5), np.float32))
    with pytest.raises(ValueError, match="omega"):
        lbm.lbm_step(f, f, np.zeros((4, 5), bool), 2.5)
    with pytest.raises(ValueError, match="shape"):
        lbm.lbm_step(f, cuda.to_device(np.ones((9, 4, 6), np.float32)),
                     np.zeros((4, 5), bool), 1.0)
    with pytest.raises(TypeError, match="device arrays"):
        lbm.lbm_step(np.ones((9, 4, 5), np.float32), f, np.zeros((4, 5), bool), 1.0)
    with pytest.raises(ValueError, match="1024"):
        lbm.launch_config(10, 10, (64, 32))


@pytest.mark.gpu
def test_gpu_poiseuille_with_the_fused_kernel():
    """On a GPU the fused kernel itself reproduces the parabola on a wide channel."""
    ny, tau, force = 34, 0.9, 2e-6
    f, _ = lbm.simulate(lbm.channel(ny, 256), tau, 20000, force=(force, 0.0), use_gpu=True)
    _, ux, _ = lbm.macroscopic(f, (force, 0.0))
    want = lbm.poiseuille_ref(ny, force, tau)
    assert np.abs(ux[1:-1].mean(axis=1) - want[1:-1]).max() / want.max() < 0.01


def test_default_block_is_the_fastest_of_the_committed_sweep():
    """DEFAULT_BLOCK is what the committed H200 sweep measured fastest."""
    import json
    import re
    from pathlib import Path

    from cudacourse.kernels import lbm

    sweep = Path(__file__).resolve().parents[1] / "docs/sweeps/stencil_lbm_h200_2026-12-01.json"
    report = json.loads(sweep.read_text())
    timed = {}
    for name, m in report["measurements"].items():
        hit = re.search(r"LBM step.*block (\d+)x(\d+)$", m["label"])
        if hit and m["status"] == "ok" and m["median_ms"] and m["kind"] != "value":
            timed[(int(hit[1]), int(hit[2]))] = m["median_ms"]
    assert set(timed) == {tuple(b) for b in lbm.BLOCKS}
    assert min(timed, key=timed.get) == tuple(lbm.DEFAULT_BLOCK)
