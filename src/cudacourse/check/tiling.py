"""Checkers for lesson 4's exercises: the shared-memory tiled matmul and the block sum.

Both kernels use shared memory and barriers, so besides the numbers these checks look for
races: every case runs more than once (a race gives different answers), and in the
simulator shared memory starts out poisoned with a huge value, so a thread that reads a
slot no thread has written yet (a missing ``cuda.syncthreads()``, or a tile slot left
unloaded at the edge) produces an unmistakable result. The matmul check also counts the
kernel's global-memory reads in the simulator (or asks the compiled kernel for its shared
memory on a GPU): right numbers from a kernel that does not reuse tiles are not enough.
"""

from __future__ import annotations

import contextlib
import math
import sys
import traceback
from typing import Any, Iterator

from . import _engine as E

TILE = 16  # the exercise's tile size (the notebook's setup cell defines the same TILE)
TPB = 128  # threads per block of the block-sum exercise (a power of two)
POISON = 1.0e30  # what unwritten shared memory holds during a check (simulator)
_BIG = 1.0e20


@contextlib.contextmanager
def poisoned_shared() -> Iterator[None]:
    """In the simulator, make new shared arrays start full of POISON instead of whatever
    ``np.empty`` returns (often zeros, which would hide a missing barrier or zero-fill)."""
    if not E.simulator():
        yield
        return
    from numba.cuda.simulator import kernelapi

    cls = kernelapi.FakeCUDAShared
    original = cls.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:
            return original(self, shape, dtype, alignment)
        from numba.np import numpy_support
        from numba.core import types

        if isinstance(dtype, types.Type):
            dtype = numpy_support.as_dtype(dtype)
        # Allocations are identified by the kernel's source line, as the simulator does.
        caller = traceback.extract_stack(sys._getframe())[-2][0:2]
        res = self._allocations.get(caller)
        if res is None:
            res = E._full(shape, POISON if E._np.dtype(dtype).kind == "f" else -999999,
                          dtype=dtype)
            self._allocations[caller] = res
        return res

    cls.array = array
    try:
        yield
    finally:
        cls.array = original


def _poison_hint(what: str) -> str:
    return (f"{what} used shared memory that no thread had written yet: a missing "
            "cuda.syncthreads() after loading (a thread read its neighbours' slots before "
            "they were stored), or slots left unwritten at the edges (load 0.0 there)")


# --- the tiled matmul --------------------------------------------------------------------

def _matmul_case(kernel: Any, a: Any, b: Any, spare: int, ctx: str) -> Any:
    m, k = a.shape
    n = b.shape[1]
    ga, gb = E.to_device_guarded(a, "a"), E.to_device_guarded(b, "b")
    out = E.Guarded.make((m, n), E._float32, "c")
    grid = (math.ceil(n / TILE) + spare, math.ceil(m / TILE))
    E.launch(kernel, grid, (TILE, TILE), ga.view, gb.view, out.view, name="tiled_matmul")
    out.check_guards("a write outside c: missing `if row < m and col < n` before the store?")
    if not E._array_equal(ga.result(), a) or not E._array_equal(gb.result(), b):
        E.fail(f"tiled_matmul changed its inputs a or b; only c should be written [{ctx}].")
    return out.result()


def check_tiled_matmul(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> None:
    """Check ``kernel(a, b, c)``: c = a @ b, launched with TILE x TILE blocks, grid
    (ceil(n / TILE), ceil(m / TILE)), x along columns; shapes need not be tile multiples."""
    E.require_kernel(kernel, "tiled_matmul", 3)
    gen = E.rng(seed)
    # (m, k, n, spare blocks): edges that are not tile multiples, k over several tiles.
    cases = ([(19, 37, 21, 0), (9, 35, 16, 1), (16, 18, 5, 0)] if not hidden else
             [(21, 40, 7, 1), (17, 20, 18, 0), (5, 50, 9, 0)])
    with poisoned_shared():
        for m, k, n, spare in cases:
            a = E.random_array(gen, (m, k))
            b = E.random_array(gen, (k, n))
            ctx = f"a {m}x{k}, b {k}x{n}, blocks of {TILE}x{TILE}"
            want = a.astype(E._float64) @ b.astype(E._float64)
            runs = [_matmul_case(kernel, a, b, spare, ctx) for _ in range(2)]
            for got in runs:
                finite = got[~E._isnan(got)]
                if finite.size and E._abs(finite).max() > _BIG:
                    E.fail(_poison_hint("tiled_matmul") + f" [{ctx}].")
            kt = k - k % TILE
            alternatives = {}
            if kt != k:
                alternatives["the sum over the first whole tiles of k only (the last, partial "
                             "tile is skipped: loop over math.ceil(k / TILE) tiles, with 0.0 "
                             "loaded past the edge)"] = a[:, :kt] @ b[:kt, :]
            tol = 1e-4 * k
            for got in runs:
                try:
                    E.compare(got, want, name="c", formula="sum over k of a[row, k] * b[k, col]",
                              rtol=1e-4, atol=tol, context=ctx, alternatives=alternatives)
                except E.CheckFailure as exc:
                    if k > TILE and _single_tile_right(kernel, gen, m, n):
                        E.fail("tiled_matmul is right when k fits in one tile but wrong with "
                               "several tiles: threads overwrite a tile while others still "
                               "compute from it. Add the second cuda.syncthreads(), after the "
                               f"loop over the tile and before the next loads [{ctx}].")
                    if str(exc).endswith(f"check the arithmetic. [{ctx}]"):
                        E.fail(f"{exc} (Or a race: are both cuda.syncthreads() there?)")
                    raise
            if not E._array_equal(runs[0], runs[1]):
                E.fail("tiled_matmul gave different results for the same input: a race. Are "
                       "both cuda.syncthreads() there (after loading a tile, and after using "
                       f"it, before the next loads overwrite it)? [{ctx}]")
        _check_reuse(kernel, gen)


def _single_tile_right(kernel: Any, gen: Any, m: int, n: int) -> bool:
    """Whether the kernel is right for a k that fits in one tile (no tile is reused)."""
    k = TILE - 3
    a = E.random_array(gen, (m, k))
    b = E.random_array(gen, (k, n))
    try:
        got = _matmul_case(kernel, a, b, 0, "one tile")
    except E.CheckFailure:
        return False
    want = a.astype(E._float64) @ b.astype(E._float64)
    return bool(E._isclose(got, want, rtol=1e-4, atol=1e-4 * k).all())


def _check_reuse(kernel: Any, gen: Any) -> None:
    """A tiled kernel reads each element of a and b about n / TILE times, not n times."""
    if not E.simulator():
        # On a GPU: the compiled kernel says how much shared memory it declares.
        try:
            smem = kernel.get_shared_mem_per_block()
            if isinstance(smem, dict):
                smem = max(smem.values()) if smem else 0
        except Exception:  # noqa: BLE001 - an unknown dispatcher: nothing to conclude
            return
        if smem == 0:
            E.fail("tiled_matmul declares no shared memory: stage TILE x TILE tiles of a and "
                   "b in cuda.shared.array and compute from those.")
        return
    m, k, n = 16, 48, 16
    a = E.random_array(gen, (m, k))
    b = E.random_array(gen, (k, n))
    ca, na = E.counting_array(a)
    cb, nb = E.counting_array(b)
    out = E.Guarded.make((m, n), E._float32, "c")
    E.launch(kernel, (n // TILE, m // TILE), (TILE, TILE), ca, cb, out.view,
             name="tiled_matmul")
    naive = m * n * k  # reads of a (and of b) by one thread per output, no reuse
    reads = max(na.n, nb.n)
    if reads > naive / 4:
        E.fail(f"tiled_matmul read elements of a or b {reads} times for a {m}x{k} @ {k}x{n} "
               f"product, as often as a kernel without shared memory ({naive}); a tiled one "
               f"reads each element about n / TILE times ({naive // TILE} reads). Load each "
               "tile into cuda.shared.array once, then compute from shared memory.")


# --- the block sum -------------------------------------------------------------------------

def check_block_sum(kernel: Any, *, hidden: bool = False, seed: int | None = None) -> None:
    """Check ``kernel(x, partial)``: partial[b] = the sum of x[b*TPB : (b+1)*TPB] (elements
    past the end count as 0), launched with ceil(n / TPB) blocks of TPB threads."""
    E.require_kernel(kernel, "block_sum", 2)
    gen = E.rng(seed)
    cases = [300, TPB, 77] if not hidden else [260, 1, 200]
    with poisoned_shared():
        for n in cases:
            x = E.random_array(gen, n)
            blocks = math.ceil(n / TPB)
            ctx = f"n={n}, {blocks} blocks of {TPB} threads"
            pad = E._full(blocks * TPB, 0.0, dtype=E._float64)
            pad[:n] = x
            want = pad.reshape(blocks, TPB).sum(axis=1)
            runs = []
            for _ in range(2):
                gx = E.to_device_guarded(x, "x")
                out = E.Guarded.make(blocks, E._float32, "partial")
                E.launch(kernel, blocks, TPB, gx.view, out.view, name="block_sum")
                out.check_guards("a write past partial: only thread 0 of each block writes "
                                 "partial[cuda.blockIdx.x]")
                runs.append(out.result())
            for got in runs:
                _diagnose_sum(got, want, x, n, blocks, ctx)
            if not E._array_equal(runs[0], runs[1]):
                E.fail("block_sum gave different results for the same input: a race. Is "
                       "there a cuda.syncthreads() after the loads and after every level of "
                       f"the tree? [{ctx}]")


def _diagnose_sum(got: Any, want: Any, x: Any, n: int, blocks: int, ctx: str) -> None:
    finite = got[~E._isnan(got)]
    if finite.size and E._abs(finite).max() > _BIG:
        E.fail(_poison_hint("block_sum") + "; threads past the end of x must store 0.0 in "
               f"their slot [{ctx}].")
    tol = 1e-4 * TPB
    ok = E._isclose(got, want, rtol=1e-4, atol=tol)
    if ok.all():
        return
    if E._isnan(got).any():
        E.compare(got, want, name="partial", formula="the sum of each block's elements",
                  rtol=1e-4, atol=tol, context=ctx)
    if blocks > 1 and E._isclose(got, want[0], rtol=1e-4, atol=tol).all():
        E.fail("every block returned the sum of the first block's elements: index x with "
               "cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x (or cuda.grid(1)), "
               f"not cuda.threadIdx.x alone [{ctx}].")
    if ok[:-1].all() and n % TPB:
        E.fail(f"only the last block, which holds the tail (x[{(blocks - 1) * TPB}:{n}]), is "
               "wrong: threads past the end of x must add 0.0, and the elements before the "
               f"end must all be counted [{ctx}].")
    halves = {
        "the sum of each block's first half only": 0.5,
        "the sum of each block's first quarter only": 0.25,
    }
    pad = E._full(blocks * TPB, 0.0, dtype=E._float64)
    pad[:n] = x
    per = pad.reshape(blocks, TPB)
    for label, frac in halves.items():
        if E._isclose(got, per[:, :int(TPB * frac)].sum(axis=1), rtol=1e-4, atol=tol).all():
            E.fail(f"partial holds {label}: check the tree's stride. It starts at half the "
                   "block (s = TPB // 2), halves each step (s //= 2) and stops after s = 1, "
                   f"with threads t < s adding slot t + s [{ctx}].")
    if E._isclose(got, per[:, 0], rtol=1e-4, atol=tol).all():
        E.fail("partial holds just each block's first element: the tree never ran. Check its "
               f"loop (while s > 0: ...) [{ctx}].")
    bad = int(E._flatnonzero(~ok)[0])
    E.fail(f"partial[{bad}] = {got[bad]!r}, expected {want[bad]!r} (the sum of block {bad}'s "
           "elements); a missing cuda.syncthreads() between the tree's levels, or a wrong "
           f"stride, gives this [{ctx}].")
