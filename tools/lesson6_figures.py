"""Lesson 6's figures for docs/figures/: the vortex street behind a cylinder, the flow
around a NACA 0012 wing at 8 degrees, lift and drag against the angle of attack.

    python tools/lesson6_figures.py [--out docs/figures] [--large]

Runs the fused kernel on a GPU, the vectorised NumPy reference otherwise (the same step);
``--large`` uses the lattices of the lesson's GPU mode.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("CUDACOURSE_QUIET", "1")

import matplotlib  # noqa: E402

matplotlib.use("Agg")

import cudacourse  # noqa: E402,F401 - chooses the device first
from cudacourse.kernels import lbm  # noqa: E402
from cudacourse.viz import flow  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="docs/figures")
    p.add_argument("--large", action="store_true")
    args = p.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    u = 0.1
    t = time.perf_counter()
    ny, nx, r, steps = (512, 2048, 24, 24000) if args.large else (100, 400, 10, 7000)
    tau = lbm.tau_for(100.0, u, 2 * r)
    solid = lbm.cylinder(ny, nx, nx / 5, ny / 2, r)
    f0 = lbm.init_f(solid, (u, 0.0), kick=(nx / 5 + 2 * r, ny / 2, r))
    f, _ = lbm.simulate(solid, tau, steps, f0=f0, inflow=u)
    _, ux, uy = lbm.macroscopic(f)
    flow.plot_vorticity(ux, uy, solid, f"vorticity behind a cylinder, Re = 100, {ny} x {nx} "
                        f"lattice, {steps} steps").savefig(out / "cylinder_vorticity.png",
                                                           dpi=110)
    print(f"cylinder: {time.perf_counter() - t:.1f} s")
    ny, nx, chord, steps, tau = ((512, 1536, 300, 16000, 0.65) if args.large else
                                 (140, 420, 84, 4000, 0.6))
    solid = lbm.naca0012(ny, nx, chord, 8.0, nx / 5, ny / 2)
    f, _ = lbm.simulate(solid, tau, steps, inflow=u)
    _, ux, uy = lbm.macroscopic(f)
    flow.plot_speed_streamlines(ux, uy, solid, f"NACA 0012 at 8 degrees, Re = "
                                f"{lbm.reynolds(u, chord, tau):.0f}: speed and streamlines"
                                ).savefig(out / "airfoil_velocity.png", dpi=110)
    print(f"airfoil: {time.perf_counter() - t:.1f} s")
    # The same geometry at two resolutions, one Reynolds number, forces averaged over the
    # last quarter of two flow-throughs (lbm.wing_forces): the lift coefficients agree.
    ny, nx, chord = (280, 840, 176) if args.large else (70, 210, 44)
    angles, lift, drag = [-6.0, 0.0, 3.0, 6.0, 9.0], [], []
    for aoa in angles:
        s = lbm.naca0012(ny, nx, chord, aoa, nx / 5, ny / 2)
        cd, cl = lbm.wing_forces(s, 100.0, chord, u)
        drag.append(cd)
        lift.append(cl)
        print(f"angle {aoa:+.0f}: C_D {cd:.4f} C_L {cl:+.4f}")
    flow.plot_forces(angles, lift, drag).savefig(out / "airfoil_forces.png", dpi=110)
    print(f"done: {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
