"""``cudacourse bench``: the course's kernels against ceilings measured in the same run.

Every kernel is compared with a ceiling measured minutes apart on the same GPU, never with a
datasheet figure: memory-bound kernels with a device-to-device copy (bytes read + written
per second), matmul with cuBLAS SGEMM through CuPy, and each kernel with its CuPy (and
PyTorch, when installed) equivalent. For every measurement:

1. fresh inputs (random, never zeros), sized to fill the GPU and to exceed its L2 cache;
2. one run, then a correctness check against a reference (the CuPy result, or a float64
   reference on a sample of rows). A wrong kernel is reported as FAILED and never timed;
3. warm-up, then the median of repeats each timed alone, the way a user times one call
   (an event, the call, an event, a synchronisation): the host's work before the launch
   counts, and the course's public functions are called exactly as users call them (CuPy
   arrays in, ``out`` given). Each public function's headline case also reports
   ``<kernel>_call_overhead_us``, the host microseconds of one call with the GPU idle.

In the simulator, timings mean nothing: the command runs a tiny correctness smoke pass and
reports no times and no ratios.

    cudacourse bench [--only NAME[,NAME]] [--list] [--size full|small]
                     [--json PATH] [--markdown PATH] [--plot PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path

from ..runtime import device
from .cases import ENTRIES, Entry, extra_memory_gib, select
from .core import (GPU_MARKER, SCHEMA, SIM_NOTE, SIZES, Case, Ctx, Measurement, Missing,
                   Prepared, Skipped, _need, assert_close, event_times, run_case)
from .report import (_is_gpu_result, build_report, committed_report, environment, figure,
                     format_table, plot_view, ratios, table_rows, to_markdown)

__all__ = ["ENTRIES", "Entry", "extra_memory_gib", "select", "GPU_MARKER", "SCHEMA", "SIM_NOTE",
           "SIZES", "Case", "Ctx", "Measurement", "Missing", "Prepared", "Skipped", "_need",
           "assert_close", "event_times", "run_case", "_is_gpu_result", "build_report",
           "environment", "format_table", "ratios", "table_rows", "to_markdown", "plan", "run",
           "main", "committed_report", "figure", "plot_view"]

def plan(names: list[str], ctx: Ctx) -> list[tuple[Entry, Case | Measurement]]:
    """The cases of the chosen entries; an entry that cannot start gives one Measurement."""
    steps: list[tuple[Entry, Case | Measurement]] = []
    for name in names:
        entry = ENTRIES[name]
        try:
            steps.extend((entry, c) for c in entry.cases(ctx))
        except (Missing, Skipped) as exc:
            status = "missing" if isinstance(exc, Missing) else "skipped"
            steps.append((entry, Measurement(name, entry.help, "memory", status, str(exc))))
        except Exception as exc:  # noqa: BLE001 - e.g. a module that fails to import
            steps.append((entry, Measurement(name, entry.help, "memory", "FAILED",
                                             f"{type(exc).__name__}: {exc}")))
    return steps


def run(names: list[str], ctx: Ctx, repeats: int = 20, progress: bool = True
        ) -> dict[str, Measurement]:
    from tqdm.auto import tqdm

    steps = plan(names, ctx)
    timer = None if ctx.sim else (lambda fn: event_times(fn, repeats=repeats))
    results: dict[str, Measurement] = {}
    with tqdm(total=len(steps), desc="bench", unit="kernel", file=sys.stderr,
              disable=not progress) as bar:
        for entry, step in steps:
            bar.set_postfix_str(step.name)
            if isinstance(step, Measurement):
                results[step.name] = step
            else:
                ctx.enter(entry.family)
                results[step.name] = run_case(step, ctx, timer)
            results[step.name].entry = entry.name
            bar.update()
    ctx.enter("")
    return results


def _command(argv: list[str]) -> str:
    prog = os.environ.get("CUDACOURSE_BENCH_PROG", "cudacourse bench")
    return " ".join([prog, *(shlex.quote(a) for a in argv)])


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cudacourse bench",
        description="Time the course's kernels against ceilings measured in the same run "
                    "(GPU); in the simulator, a correctness smoke pass only.")
    p.add_argument("--only", metavar="NAME[,NAME]", help="run only these benchmarks "
                   "(and the ceilings they need); see --list")
    p.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    p.add_argument("--size", choices=("full", "small"), default="full",
                   help="full: GPU-filling sizes (default); small: quick sizes for tests")
    p.add_argument("--repeats", type=int, default=20, help="timed repeats (default 20)")
    p.add_argument("--seed", type=int, help="input seed (default: fresh each run)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON")
    p.add_argument("--markdown", metavar="PATH", help="write the results as a markdown table")
    p.add_argument("--plot", metavar="PATH", help="write a roofline plot (PNG, SVG or PDF)")
    p.add_argument("--force", action="store_true",
                   help="in the simulator, overwrite files that hold GPU results")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if args.list:
        for e in ENTRIES.values():
            print(f"{e.name:<18} {e.help}")
        return 0
    try:
        names = select(args.only)
    except ValueError as exc:
        print(f"cudacourse bench: {exc}", file=sys.stderr)
        return 2
    sim = device.is_simulator()
    if sim:
        print(f"cudacourse bench: {SIM_NOTE}")
        for path in (args.json, args.markdown):
            if path and not args.force and _is_gpu_result(Path(path)):
                print(f"cudacourse bench: {path} holds GPU results; not replacing them with a "
                      "simulator smoke pass (use --force to overwrite)", file=sys.stderr)
                return 2
    else:
        ok, why = device.cupy_usable()
        if not ok:
            print(f"cudacourse bench: the ceilings and references need CuPy: {why}",
                  file=sys.stderr)
            return 2
    ctx = Ctx(args.size, args.seed)
    results = run(names, ctx, repeats=args.repeats, progress=not args.no_progress)
    report = build_report(results, command=_command(argv), size=ctx.size, seed=ctx.seed,
                          repeats=args.repeats)
    print(format_table(report))
    if not sim:  # the table truncates; the reasons matter
        for m in results.values():
            if m.status in ("FAILED", "missing"):
                print(f"{m.status} {m.name}: {m.detail}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(to_markdown(report))
        print(f"wrote {args.markdown}")
    if args.plot:
        if sim:
            print(f"no plot written to {args.plot}: the simulator has no timings to plot")
        else:
            from ..viz.bench import plot_report

            plot_report(plot_view(report), args.plot)
            print(f"wrote {args.plot}")
    failed = [m.name for m in results.values() if m.status == "FAILED"]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


