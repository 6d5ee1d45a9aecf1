"""Lesson 6's benchmark cases: the heat stencil and the fused LBM step against a
device-to-device copy, the LBM step against the same step in CuPy array operations.

Traffic is counted as the compulsory bytes: one float32 read and one write per grid point
and step for the stencil (8 bytes), 9 reads and 9 writes per lattice node for the LBM
(72 bytes; the one-byte solid mask is not counted). Block shapes are swept: every
configuration is its own case (and ratio), the headline case uses the module's choice.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .core import Case, Ctx, Entry, Prepared, _need, assert_close, event_times

# (ny, nx) per mode. "full": 1 GiB per stencil buffer; 604 MB per LBM buffer (16.8M nodes),
# both far beyond the H200's L2 cache.
SIZES6: dict[str, dict[str, tuple[int, int]]] = {
    "full": {"stencil": (16384, 16384), "lbm": (2048, 8192)},
    "small": {"stencil": (1000, 1027), "lbm": (100, 203)},
    "sim": {"stencil": (20, 35), "lbm": (9, 21)},
}
STENCIL_SWEEP = (("naive", (32, 8, 1)), ("naive", (64, 4, 1)), ("naive", (128, 2, 1)),
                 ("tiled", (32, 8, 1)), ("tiled", (32, 8, 4)), ("tiled", (64, 4, 4)),
                 ("tiled", (32, 16, 2)), ("tiled", (128, 2, 8)),
                 ("rows", (128, 1, 8)), ("rows", (64, 4, 8)), ("rows", (256, 1, 8)),
                 ("rows", (128, 1, 16)), ("rows", (128, 2, 4)),
                 ("rowsblock", (256, 1, 16)), ("rowsblock", (512, 1, 16)),
                 ("rowsblock", (256, 1, 32)))
ALPHA = 0.2
OMEGA = 1 / 0.6
FORCE = (1e-5, 0.0)


def _size(ctx: Ctx, key: str) -> tuple[int, int]:
    return SIZES6[ctx.size][key]


# --- the stencil ------------------------------------------------------------------------------

def _stencil_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.kernels.stencil", "launch_config", "heat_step_ref", "BEST")
    ny, nx = _size(ctx, "stencil")

    def case(variant: str, block: tuple[int, int, int], headline: bool) -> Case:
        def prepare(ctx: Ctx) -> Prepared:
            u = ctx.memo("stencil", lambda: ctx.uniform((ny, nx)))
            du, out = ctx.dev(u), ctx.output((ny, nx))
            # the public call, as users make it: the headline with the module's choice
            how = ("best", None) if headline else (variant, block)

            def check() -> None:
                want = ctx.memo("stencil_ref", lambda: mod.heat_step_ref(u, ALPHA, ctx.xp))
                assert_close(ctx, ctx.read(out), want, f"heat step {variant} {block}",
                             rtol=1e-5, atol=1e-5)

            return Prepared(lambda: mod.heat_step(du, out, ALPHA, *how), check,
                            bytes=mod.bytes_per_step(ny, nx),
                            shape=f"{ny}x{nx} float32, block {block[0]}x{block[1]}, "
                                  f"{block[2]} row(s) per thread")

        bx, by, rows = block
        name = "stencil" if headline else f"stencil_{variant}_{bx}x{by}x{rows}"
        label = f"heat step (9-point), {variant}, {bx}x{by} threads x {rows} rows"
        if headline:
            label += " (stencil.BEST)"
        return Case(name, label, prepare, ratio=f"{name}_vs_copy", vs="copy",
                    overhead="stencil" if headline else None)

    best_variant, best_block = mod.BEST
    cases = [case(best_variant, best_block, True)]
    cases += [case(v, b, False) for v, b in STENCIL_SWEEP if (v, b) != mod.BEST]
    return cases


# --- the lattice Boltzmann step -------------------------------------------------------------

def _lbm_inputs(ctx: Ctx, lbm: Any) -> tuple[Any, Any, Any]:
    """(f, solid mask as xp bool, solid as uint8 device array): a channel with a cylinder,
    populations at equilibrium around a perturbed velocity (no two nodes alike)."""
    ny, nx = _size(ctx, "lbm")

    def make() -> tuple[Any, Any, Any]:
        xp = ctx.xp
        solid_h = lbm.channel(ny, nx) | lbm.cylinder(ny, nx, nx / 4, ny / 2, max(ny / 8, 1.5))
        solid = xp.asarray(solid_h)
        ux = (ctx.uniform((ny, nx), 0.0, 0.1)).astype(xp.float64)
        uy = (ctx.uniform((ny, nx), -0.02, 0.02)).astype(xp.float64)
        rho = ctx.uniform((ny, nx), 0.95, 1.05).astype(xp.float64)
        f = lbm.equilibrium(rho, ux, uy, xp).astype(xp.float32)
        return f, solid, ctx.dev(xp.asarray(solid_h.astype(np.uint8)))

    return ctx.memo("lbm", make)


def _lbm_check(ctx: Ctx, lbm: Any, f: Any, solid: Any, got: Any, what: str) -> None:
    want = ctx.memo("lbm_ref", lambda: lbm.ReferenceStepper(solid, OMEGA, FORCE,
                                                            xp=ctx.xp).step(f))
    assert_close(ctx, got, want, what, rtol=1e-5, atol=1e-6)


def _lbm_kernel(ctx: Ctx, lbm: Any, block: tuple[int, int], kernel: str = "best"
                ) -> tuple[Callable[[], Any], Any]:
    f, solid, ds = _lbm_inputs(ctx, lbm)
    ny, nx = solid.shape
    df, out = ctx.dev(f), ctx.output(f.shape)
    # the public call, as users make it (its first call checks, later ones replay)
    how = {} if kernel == "best" else {"kernel": kernel}
    return (lambda: lbm.lbm_step(df, out, ds, OMEGA, FORCE, None, block, **how)), out


def _lbm_cases(ctx: Ctx) -> list[Case]:
    lbm = _need("cudacourse.kernels.lbm", "lbm_step", "ReferenceStepper", "DEFAULT_BLOCK", "BLOCKS")
    ny, nx = _size(ctx, "lbm")
    nodes = ny * nx

    def prepared(block: tuple[int, int], value: bool = False, kernel: str = "best"
                 ) -> Callable[[Ctx], Prepared]:
        def prepare(ctx: Ctx) -> Prepared:
            f, solid, _ = _lbm_inputs(ctx, lbm)
            run, out = _lbm_kernel(ctx, lbm, block, kernel)
            mlups = (lambda: nodes / (float(np.median(event_times(run))) / 1e3) / 1e6)
            return Prepared(run, lambda: _lbm_check(ctx, lbm, f, solid, ctx.read(out),
                                                    f"fused LBM step, block {block}"),
                            bytes=float(lbm.BYTES_PER_NODE * nodes),
                            shape=f"{ny}x{nx} nodes D2Q9 float32, block {block[0]}x{block[1]}",
                            value=mlups if value else None)

        return prepare

    d = tuple(lbm.DEFAULT_BLOCK)
    cases = [Case("lbm", f"fused LBM step (pull + BGK), block {d[0]}x{d[1]}", prepared(d),
                  ratio="lbm_vs_copy", vs="copy", overhead="lbm"),
             Case("lbm_mlups", f"fused LBM step: million lattice updates per second",
                  prepared(d, value=True), ratio="lbm_mlups", kind="value")]
    for b in lbm.BLOCKS:
        if tuple(b) != d:
            name = f"lbm_{b[0]}x{b[1]}"
            cases.append(Case(name, f"fused LBM step, block {b[0]}x{b[1]}", prepared(tuple(b)),
                              ratio=f"{name}_vs_copy", vs="copy"))
    for k in getattr(lbm, "KERNELS", {}):  # the kernels of lbm.KERNELS at DEFAULT_BLOCK
        if k != lbm.BEST_KERNEL:
            name = f"lbm_kernel_{k}"
            cases.append(Case(name, f"fused LBM step, kernel {k}, block {d[0]}x{d[1]}",
                              prepared(d, kernel=k), ratio=f"{name}_vs_copy", vs="copy"))
    return cases


def _lbm_cupy_cases(ctx: Ctx) -> list[Case]:
    lbm = _need("cudacourse.kernels.lbm", "lbm_step", "ReferenceStepper", "DEFAULT_BLOCK")
    ny, nx = _size(ctx, "lbm")
    nodes = ny * nx

    def cupy_step(ctx: Ctx) -> Prepared:
        f, solid, _ = _lbm_inputs(ctx, lbm)
        stepper = lbm.ReferenceStepper(solid, OMEGA, FORCE, xp=ctx.xp)
        result: list[Any] = []

        def run() -> None:
            result[:] = [stepper.step(f)]

        return Prepared(run, lambda: _lbm_check(ctx, lbm, f, solid, result[0],
                                                "CuPy LBM step"),
                        bytes=float(lbm.BYTES_PER_NODE * nodes),
                        shape=f"{ny}x{nx} nodes D2Q9 float32")

    def kernel(ctx: Ctx) -> Prepared:
        f, solid, _ = _lbm_inputs(ctx, lbm)
        run, out = _lbm_kernel(ctx, lbm, tuple(lbm.DEFAULT_BLOCK))
        return Prepared(run, lambda: _lbm_check(ctx, lbm, f, solid, ctx.read(out),
                                                "fused LBM step"),
                        bytes=float(lbm.BYTES_PER_NODE * nodes),
                        shape=f"{ny}x{nx} nodes D2Q9 float32")

    return [Case("lbm_cupy", "LBM step in CuPy array operations (rolls, where, BGK)",
                 cupy_step, needs="cupy"),
            Case("lbm_fused_vs_cupy", "fused LBM step (Numba), against the CuPy step", kernel,
                 ratio="lbm_vs_cupy", vs="lbm_cupy")]


ENTRIES = [
    Entry("stencil", "heat step (9-point stencil), every variant and block shape",
          "stencil", _stencil_cases, "copy"),
    Entry("lbm", "fused D2Q9 LBM step, several block shapes; also MLUPS", "lbm",
          _lbm_cases, "copy"),
    Entry("lbm_cupy", "the LBM step in CuPy array operations vs the fused kernel", "lbm",
          _lbm_cupy_cases),
]
