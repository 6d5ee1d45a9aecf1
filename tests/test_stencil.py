"""The heat-diffusion stencil: reference properties, every kernel variant against it."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.kernels import stencil

pytestmark = pytest.mark.lesson6


def _grid(ny, nx, seed=0):
    return np.random.default_rng(seed).uniform(0.0, 4.0, (ny, nx)).astype(np.float32)


def test_reference_keeps_walls_and_constant_fields():
    u = _grid(9, 12)
    v = stencil.heat_step_ref(u, 0.25)
    assert np.array_equal(v[0], u[0]) and np.array_equal(v[:, -1], u[:, -1])
    flat = np.full((6, 7), 2.5, np.float32)
    assert np.allclose(stencil.heat_step_ref(flat, 0.3), flat)


def test_reference_diffuses_a_hot_spot_symmetrically():
    u = np.zeros((11, 11), np.float32)
    u[5, 5] = 1.0
    v = stencil.heat_step_ref(u, 0.3)
    assert v[5, 5] < 1.0 and v[4, 5] > v[4, 4] > 0  # edges weigh 4x the corners
    assert np.allclose(v, v.T) and np.allclose(v, v[::-1])
    assert np.isclose(v.sum(), 1.0)  # away from the walls, heat is conserved


def test_reference_is_stable_at_the_limit_and_not_beyond():
    u = np.zeros((16, 16), np.float32)
    u[1:-1, 1:-1] = np.indices((14, 14)).sum(axis=0) % 2  # checkerboard: the fastest mode
    ok = stencil.diffuse_ref(u, 30, stencil.MAX_ALPHA)
    bad = stencil.diffuse_ref(u, 30, 0.45)
    assert np.abs(ok).max() <= 1.0 + 1e-6 and np.abs(bad).max() > 10


@pytest.mark.parametrize("variant,block", [("naive", None), ("naive", (16, 4, 1)),
                                           ("tiled", (16, 8, 1)), ("tiled", (8, 4, 3)),
                                           ("rows", (8, 2, 3)), ("rows", (16, 1, 5)),
                                           ("rows", (32, 1, 4)), ("rows", (64, 2, 3)),
                                           ("rows", None), ("rowsblock", (8, 1, 3)),
                                           ("rowsblock", (16, 1, 5)), ("rowsblock", (64, 1, 4)),
                                           ("best", None)])
def test_kernels_match_the_reference(variant, block):
    u = _grid(21, 37, 1)
    got = stencil.heat_step(u, alpha=0.2, variant=variant, block=block)
    np.testing.assert_allclose(got, stencil.heat_step_ref(u.astype(np.float64), 0.2),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("variant,block", [("rows", (4, 1, 6)), ("rows", (32, 1, 6)),
                                           ("rowsblock", (4, 1, 6)), ("rowsblock", (32, 1, 6))],
                         ids=["loads", "shuffles", "block", "block32"])
@pytest.mark.parametrize("shape", [(4, 5), (3, 9), (10, 3), (9, 33)])
def test_rows_kernel_on_grids_smaller_than_its_strip(shape, variant, block):
    """A strip of 6 rows on grids of 3 to 10 rows: the window crosses the top and the bottom
    edge at once (clamped rows), or the last strip is partial; with 32-wide blocks (warp
    shuffles) the grid is narrower than a warp, or one column wider."""
    u = _grid(*shape, 3)
    got = stencil.heat_step(u, alpha=0.3, variant=variant, block=block)
    np.testing.assert_allclose(got, stencil.heat_step_ref(u.astype(np.float64), 0.3),
                               rtol=1e-6, atol=1e-6)


def test_diffuse_swaps_buffers_on_the_device():
    u = _grid(13, 18, 2)
    want = stencil.diffuse_ref(u.astype(np.float64), 3, 0.2)
    np.testing.assert_allclose(stencil.diffuse(u, 3, 0.2, "tiled", (8, 4, 2)), want,
                               rtol=1e-5, atol=1e-5)
    du = cuda.to_device(u)
    res = stencil.diffuse(du, 3, 0.2, "naive", (8, 8, 1))
    assert res is not du  # an odd number of steps ends in the scratch buffer
    np.testing.assert_allclose(res.copy_to_host(), want, rtol=1e-5, atol=1e-5)
    assert stencil.diffuse(du, 0, 0.2) is du


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="blow up"):
        stencil.heat_step(_grid(5, 5), alpha=0.5)
    with pytest.raises(TypeError, match="float32"):
        stencil.heat_step(np.zeros((5, 5)), alpha=0.1)
    with pytest.raises(ValueError, match="variant"):
        stencil.heat_step(_grid(5, 5), variant="fast")
    with pytest.raises(ValueError, match="rows must be 1"):
        stencil.heat_step(_grid(5, 5), variant="naive", block=(8, 8, 2))
    with pytest.raises(ValueError, match="1024"):
        stencil.tiled_kernel(64, 32, 1)
    with pytest.raises(ValueError, match="bx >= 2"):
        stencil.tiled_kernel(1, 8, 1)
    with pytest.raises(ValueError, match="at most 32"):
        stencil.rows_kernel(32, 1, 40)
    with pytest.raises(ValueError, match="by = 1"):
        stencil.rows_block_kernel(32, 2, 4)
    with pytest.raises(ValueError, match="48 KiB"):
        stencil.rows_block_kernel(1024, 1, 16)
    assert stencil.bytes_per_step(1024, 4096) == 8 * 1024 * 4096


def test_best_is_the_fastest_of_the_committed_sweep():
    """BEST is what the committed H200 sweep of issue 35 measured fastest (every kernel
    checked against the naive one before it was timed), not a reasoned guess."""
    import json
    from pathlib import Path

    from cudacourse.kernels import stencil

    sweep = Path(__file__).resolve().parents[1] / "docs/sweeps/probe_issue35_h200_2026-12-02.json"
    report = json.loads(sweep.read_text())
    timed = {(r["variant"], tuple(r["block"])): r["ms"] for r in report["rows"]
             if r["what"] == "stencil" and "ms" in r and r["err"] <= 1e-5}
    assert len(timed) >= 6, "the sweep lost its cases"
    assert ("rows", (128, 1, 16)) in timed  # the choice it replaced was timed beside it
    assert min(timed, key=timed.get) == stencil.BEST
