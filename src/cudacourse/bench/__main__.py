"""``python -m cudacourse.bench``: the same as ``cudacourse bench``, plus ``--merge``.

``python -m cudacourse.bench --only stencil,lbm --json docs/benchmarks.json --merge
[--markdown docs/benchmarks.md]`` runs those entries (and the ceilings they divide by) into a
temporary JSON, then replaces only those entries' measurements and ratios inside the
existing ``--json`` file (``report.merge_reports``) and regenerates ``--markdown`` from the
merged report: one lesson re-measured without re-running every case.
"""

import argparse
import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

from . import main
from .cases import ENTRIES
from .report import merge_reports, to_markdown

os.environ.setdefault("CUDACOURSE_BENCH_PROG", "python -m cudacourse.bench")


def merge_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--merge", action="store_true")
    p.add_argument("--json")
    p.add_argument("--markdown")
    p.add_argument("--only")
    p.add_argument("--plot")
    known, rest = p.parse_known_args(argv)
    if not known.json or not known.only:
        print("cudacourse bench: --merge needs --only NAME[,NAME] and --json PATH (the "
              "report to merge into)", file=sys.stderr)
        return 2
    if known.plot:
        print("cudacourse bench: --plot is not supported with --merge", file=sys.stderr)
        return 2
    target = Path(known.json)
    try:
        old = json.loads(target.read_text())
    except (OSError, ValueError) as exc:
        print(f"cudacourse bench: --merge: cannot read {target}: {exc}", file=sys.stderr)
        return 2
    only = [n.strip() for n in known.only.split(",") if n.strip()]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / "run.json"
        rc = main([*rest, "--only", known.only, "--json", str(tmp)])
        if rc != 0 or not tmp.exists():
            print(f"cudacourse bench: --merge: the run failed (exit {rc}); {target} is "
                  "unchanged", file=sys.stderr)
            return rc or 1
        new = json.loads(tmp.read_text())
    command = " ".join([os.environ["CUDACOURSE_BENCH_PROG"], *map(shlex.quote, argv)])
    try:
        merged = merge_reports(old, new, only, command=command, entries=list(ENTRIES))
    except ValueError as exc:
        print(f"cudacourse bench: {exc}; {target} is unchanged", file=sys.stderr)
        return 2
    target.write_text(json.dumps(merged, indent=1) + "\n")
    print(f"merged {len(merged['merges'][-1]['measurements'])} measurements into {target}")
    if known.markdown:
        Path(known.markdown).write_text(to_markdown(merged))
        print(f"wrote {known.markdown} (from the merged report)")
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(merge_main(args) if "--merge" in args else main())
