"""Launch overhead: microseconds per call from Python on one-element arrays.

The work is one element, so what is measured is what Python pays per launch: argument checks
and conversion, the launch plan, the driver call. Routes, each on the same arrays:

* ``launch_overhead_us``: the course launcher, ``vector.vector_add(a, b, out)`` on CuPy arrays
  (the goal: at most 20 us); ``launch_overhead_numba_arrays_us``: the same on Numba arrays;
* ``launch_overhead_bare_numba_us``: ``kernel[1, 32](a, b, out)`` through Numba's dispatcher,
  Numba arrays; ``launch_overhead_bare_numba_cupy_us``: the same with CuPy arrays;
* ``launch_overhead_cupy_add_us`` and ``launch_overhead_torch_add_us``: the libraries' own add.

Each figure is the median of ``batches`` batches of ``calls`` back-to-back calls on the host
clock, synchronised once per batch: the GPU finishes a one-element kernel in a few
microseconds, so the host is what is timed.

Registering it with ``cudacourse bench`` (bench/cases.py owns ``ENTRIES``): add
``cases_launch.ENTRY`` to the registry (family "launch", no ceiling). On its own:

    python -m cudacourse.bench.cases_launch [--json PATH]   # GPU; a smoke pass in the simulator
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable

import numpy as np

from ..runtime.timing import host_per_call
from .core import Case, Ctx, Entry, Prepared, _torch, assert_close

GOAL_US = 20.0


def per_call_us(fn: Callable[[], Any], calls: int = 2000, batches: int = 5,
                warmup: int = 50) -> float:
    """Median over ``batches`` of the microseconds per call of ``calls`` back-to-back calls."""
    return host_per_call(fn, calls, batches, warmup) * 1e6


def _arrays(ctx: Ctx, kind: str) -> tuple[Any, Any, Any]:
    """a, b (values 1.5 and 2.25) and out (NaN) as one-element arrays of ``kind``: "numba" or
    "cupy" (CuPy needs a GPU: in the simulator both kinds are Numba arrays)."""
    from numba import cuda

    if kind == "cupy" and not ctx.sim:
        import cupy as cp

        return (cp.full(1, 1.5, cp.float32), cp.full(1, 2.25, cp.float32),
                cp.full(1, np.nan, cp.float32))
    return (cuda.to_device(np.full(1, 1.5, np.float32)),
            cuda.to_device(np.full(1, 2.25, np.float32)),
            cuda.to_device(np.full(1, np.nan, np.float32)))


def _read(out: Any) -> np.ndarray:
    return out.get() if hasattr(out, "get") else out.copy_to_host()


def _case(name: str, label: str, make: Callable[[Ctx], tuple[Callable[[], Any], Any]],
          needs: str = "course") -> Case:
    """A value case: run once, check that out == 1.5 + 2.25, then measure per-call us."""
    def prepare(ctx: Ctx) -> Prepared:
        run, out = make(ctx)

        def check() -> None:
            assert_close(ctx, np.asarray(_read(out)).reshape(1), np.array([3.75]), label,
                         rtol=0.0)

        return Prepared(run, check, shape="1 float32", value=lambda: per_call_us(run))

    return Case(name, label, prepare, ratio=f"{name}_us", kind="value", needs=needs)


def _course(kind: str) -> Callable[[Ctx], tuple[Callable[[], Any], Any]]:
    def make(ctx: Ctx):
        from ..kernels import vector

        a, b, out = _arrays(ctx, kind)
        return (lambda: vector.vector_add(a, b, out)), out
    return make


def _bare(kind: str) -> Callable[[Ctx], tuple[Callable[[], Any], Any]]:
    def make(ctx: Ctx):
        from ..kernels import vector

        a, b, out = _arrays(ctx, kind)
        return (lambda: vector._vector_add[1, 32](a, b, out)), out
    return make


def _library(lib: str) -> Callable[[Ctx], tuple[Callable[[], Any], Any]]:
    def make(ctx: Ctx):
        a, b, out = _arrays(ctx, "cupy")
        if lib == "cupy":
            return (lambda: ctx.xp.add(a, b, out=out)), out
        torch = _torch()
        ta, tb, tout = (torch.as_tensor(x, device="cuda") for x in (a, b, out))
        return (lambda: torch.add(ta, tb, out=tout)), out
    return make


def launch_overhead_cases(ctx: Ctx) -> list[Case]:
    return [
        _case("launch_overhead", "course launcher vector_add(a, b, out), CuPy arrays",
              _course("cupy")),
        _case("launch_overhead_numba_arrays", "course launcher vector_add(a, b, out), Numba "
              "arrays", _course("numba")),
        _case("launch_overhead_bare_numba", "bare Numba kernel[1, 32](a, b, out), Numba arrays",
              _bare("numba")),
        _case("launch_overhead_bare_numba_cupy", "bare Numba kernel[1, 32](a, b, out), CuPy "
              "arrays", _bare("cupy"), needs="cupy"),
        _case("launch_overhead_cupy_add", "CuPy add(a, b, out=out)", _library("cupy"),
              needs="cupy"),
        _case("launch_overhead_torch_add", "PyTorch add(a, b, out=out)", _library("torch"),
              needs="torch"),
    ]


ENTRY = Entry("launch_overhead", "microseconds per launch from Python, one element: the "
              "course launcher against bare Numba, CuPy and PyTorch", "launch",
              launch_overhead_cases)


def main(argv: list[str] | None = None) -> int:
    from ..runtime import device
    from .core import run_case

    p = argparse.ArgumentParser(prog="python -m cudacourse.bench.cases_launch",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write {ratio name: microseconds} here")
    args = p.parse_args(argv)
    ctx = Ctx("full", seed=0)
    results: dict[str, Any] = {"gpu": device.current().gpu.describe() if not ctx.sim else None}
    failed = False
    for case in launch_overhead_cases(ctx):
        m = run_case(case, ctx, timer=None)
        shown = f"{m.value:8.1f} us" if m.value is not None else f"{m.status:>11}"
        print(f"{shown}  {case.label}" + (f"  ({m.detail})" if m.detail else ""), flush=True)
        results[case.ratio] = m.value if m.status == "ok" else f"{m.status}: {m.detail}"
        failed |= m.status == "FAILED"
    course = results.get("launch_overhead_us")
    if isinstance(course, float):
        verdict = "met" if course <= GOAL_US else "NOT met"
        print(f"goal: the course launcher at most {GOAL_US:g} us per call on CuPy arrays: "
              f"{verdict} ({course:.1f} us)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":  # importing the package (cudacourse) chose the device already
    sys.exit(main())
