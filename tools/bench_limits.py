"""Write issue 35's goals and the profiler's evidence into docs/benchmarks.json (``limits``,
``cudacourse.bench.limits``), then re-render docs/benchmarks.md from the JSON:

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
from cudacourse.bench.report import to_markdown  # noqa: E402


def main() -> None:
    path = ROOT / "docs" / "benchmarks.json"
    report = json.loads(path.read_text())
    report["limits"] = limits(report)
    path.write_text(json.dumps(report, indent=1) + "\n")
    (ROOT / "docs" / "benchmarks.md").write_text(to_markdown(report))
    missed = [k for k, g in report["limits"]["goals"].items() if not g["met"]]
    print(f"wrote limits into {path} ({len(missed)} goal(s) missed) and docs/benchmarks.md")


if __name__ == "__main__":
    main()
