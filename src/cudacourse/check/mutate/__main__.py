"""``python -m cudacourse.check.mutate``: the mutation report (docs/mutation-report.md, .json).

Options: ``--sample N`` mutants per exercise (seeded by ``--seed``; 0: all of them, the
nightly run), ``--exercise NAME`` (repeatable), ``--timeout S`` per mutant, ``--jobs J``
child processes at once, ``--out DIR``.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import report
from .masters import exercises
from .operators import mutants
from .runner import Workers


def sample(root: Path, per_exercise: int, seed: int, names: list[str] | None = None) -> list:
    """(exercise, mutant) pairs: every mutant, or ``per_exercise`` of each exercise's drawn
    with ``seed`` (the same draw on every machine)."""
    import random

    pairs = []
    for ex in exercises(root):
        if names and ex.name not in names:
            continue
        ms = mutants(ex.source)
        if per_exercise and len(ms) > per_exercise:
            ms = random.Random(f"{seed}:{ex.name}").sample(ms, per_exercise)
        pairs += [(ex, m) for m in ms]
    return pairs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cudacourse.check.mutate")
    p.add_argument("--root", type=Path, default=Path.cwd())
    p.add_argument("--sample", type=int, default=0)
    p.add_argument("--seed", type=int, default=45)
    p.add_argument("--exercise", action="append")
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--only", default="", metavar="I,J,...",
                   help="run only these positions of the draw (a report's outcomes are in "
                        "draw order: re-run the mutants two devices disagreed on)")
    p.add_argument("--compare", type=Path, default=None,
                   help="a report's .json from another device: exit 1 unless every mutant "
                        "got the same verdict and cause here (same --sample and --seed)")
    p.add_argument("--gate", type=float, default=None, metavar="PERCENT",
                   help="exit 1 unless misleading, survived, crashed and English left in "
                        "Japanese diagnoses are all 0 and every lesson names at least PERCENT "
                        "of its rejected mutants (the nightly run's bar: 90)")
    args = p.parse_args(argv)
    pairs = sample(args.root, args.sample, args.seed, args.exercise)
    if args.only:
        try:
            keep = sorted({int(i) for i in args.only.split(",") if i.strip()})
        except ValueError:
            p.error(f"--only takes positions of the draw, such as 3,17,40; got {args.only!r}")
        if keep and not 0 <= keep[0] <= keep[-1] < len(pairs):
            p.error(f"--only: the draw has {len(pairs)} mutants (positions 0 to "
                    f"{len(pairs) - 1})")
        pairs = [pairs[i] for i in keep]
    print(f"{len(pairs)} mutants", file=sys.stderr)

    workers = Workers(args.timeout)

    def one(pair):
        ex, m = pair
        out = workers.run(ex, m.source, m.operator, m.line)
        print(f"{out.exercise:32} {out.operator:20} {out.verdict:10} {out.cause}",
              file=sys.stderr, flush=True)
        return out

    try:
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            outcomes = list(pool.map(one, pairs))
    finally:
        workers.close()
    out_dir = args.out or args.root / "docs"
    population = sum(len(mutants(ex.source)) for ex in exercises(args.root)
                     if not args.exercise or ex.name in args.exercise)
    report.write(outcomes, out_dir, args.root, sampled=args.sample, seed=args.seed,
                 population=population)
    print(report.summary(outcomes), file=sys.stderr)
    status = 0
    if args.gate is not None:
        status = gate(outcomes, args.gate)
    if args.compare is not None:
        status = _compare(outcomes, args.compare) or status
    return status


def gate(outcomes: list, percent: float) -> int:
    """1 (and the reasons on stderr) when the report falls short of the bar, else 0."""
    from collections import Counter, defaultdict

    short = []
    bad = Counter(o.verdict for o in outcomes if o.verdict in ("misleading", "survived",
                                                               "crashed"))
    short += [f"{n} {v}" for v, n in sorted(bad.items())]
    english = sum(1 for o in outcomes if o.english_in_ja)
    if english:
        short.append(f"{english} Japanese diagnoses with English left")
    per: dict = defaultdict(Counter)
    for o in outcomes:
        per[o.exercise.split("/")[0]][o.verdict] += 1
    for lesson, c in sorted(per.items()):
        rejected = c["named"] + c["rejected"] + c["misleading"]
        if rejected and 100 * c["named"] / rejected < percent:
            short.append(f"{lesson} names {100 * c['named'] / rejected:.0f}% of {rejected} "
                         f"rejected mutants (bar {percent:.0f}%)")
    for line in short:
        print(f"GATE: {line}", file=sys.stderr)
    return 1 if short else 0


def _compare(outcomes: list, other: Path) -> int:
    """Same mutants (same draw) in the same order: their verdicts and causes must agree."""
    import json

    theirs = json.loads(other.read_text(encoding="utf-8"))["outcomes"]
    if len(theirs) != len(outcomes):
        print(f"{other}: {len(theirs)} mutants, here {len(outcomes)}", file=sys.stderr)
        return 1
    differ = [(o, t) for o, t in zip(outcomes, theirs)
              if (o.exercise, o.operator, o.line) == (t["exercise"], t["operator"], t["line"])
              and (o.verdict, o.cause) != (t["verdict"], t["cause"])]
    for o, t in differ:
        print(f"DIFFERS {o.exercise} {o.operator} line {o.line}: here {o.verdict} {o.cause}, "
              f"{other.name} {t['verdict']} {t['cause']}", file=sys.stderr)
    print(f"{len(outcomes) - len(differ)} of {len(outcomes)} verdicts identical to {other}",
          file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
