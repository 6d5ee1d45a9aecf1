"""Child process of ``runner.run``: one mutant (JSON on stdin) -> its Outcome (JSON line)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict


def main() -> None:
    job = json.loads(sys.stdin.read())
    import cudacourse

    cudacourse.setup()  # the device (CUDACOURSE_DEVICE, or auto) before numba.cuda loads
    from .masters import Exercise
    from .runner import evaluate

    out = evaluate(Exercise(**job["exercise"]), job["source"], job["operator"], job["line"])
    sys.stdout.write("\n" + json.dumps(asdict(out)) + "\n")


if __name__ == "__main__":
    main()
