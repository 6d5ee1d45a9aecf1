"""Write issue 35's goals and the profiler's evidence into docs/benchmarks.json (``limits``,
``cudacourse.bench.limits``), carry the two figures the lessons cite that the bench no longer
measures from the run before (``CARRIED``, marked as such), then re-render
docs/benchmarks.md from the JSON:

    python3 tools/bench_limits.py                 # after committing a GPU run's bench and ncu CSVs

Every number comes from the committed JSON (the bench's ratios) and the committed ncu CSVs of
the same GPU run (docs/sweeps/, named in ``limits.ncu_files``); nothing is measured here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cudacourse.bench.limits import limits  # noqa: E402
from cudacourse.bench.report import carry_measurements, to_markdown  # noqa: E402

# Lessons 4 and 5 cite these (their step tables); the package no longer carries those kernels
# (the graded exercises' answers, issue 19), so the bench of 2026-12-02 did not time them.
CARRIED = ["matmul_tiled", "attention_rows"]
EARLIER = ROOT / "docs" / "sweeps" / "bench_h200_2026-12-01_carried.json"


def main() -> None:
    path = ROOT / "docs" / "benchmarks.json"
    report = json.loads(path.read_text())
    old = json.loads(EARLIER.read_text())
    report = carry_measurements(report, old, CARRIED, "the package no longer has this kernel "
                                "(a lesson's graded exercise)")
    report["limits"] = limits(report)
    path.write_text(json.dumps(report, indent=1) + "\n")
    (ROOT / "docs" / "benchmarks.md").write_text(to_markdown(report))
    missed = [k for k, g in report["limits"]["goals"].items() if not g["met"]]
    print(f"wrote limits into {path} ({len(missed)} goal(s) missed) and docs/benchmarks.md")


if __name__ == "__main__":
    main()
