"""Child process of ``runner``: mutants as JSON lines on stdin -> one Outcome JSON line each
on stdout. One child serves many mutants (the imports and the simulator's start-up are paid
once); ``runner.Workers`` kills and replaces a child that overruns its time box or dies."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict


def main() -> None:
    import cudacourse

    cudacourse.setup()  # the device (CUDACOURSE_DEVICE, or auto) before numba.cuda loads
    from .masters import Exercise
    from .runner import MARK, evaluate

    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        out = evaluate(Exercise(**job["exercise"]), job["source"], job["operator"],
                       job["line"])
        # the mark keeps the answer apart from whatever the mutant itself printed
        sys.stdout.write("\n" + MARK + json.dumps(asdict(out)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
