"""Execute lesson masters alone (nbclient) and record how long each check cell took.

    python tools/time_cells.py OUT.json solutions/05_fused_attention/05_fused_attention.ipynb ...

Writes, per notebook: the total, and for every cell that calls ``cudacourse.check`` its
seconds (from nbclient's execute_input / execute_reply timestamps), whether it is the hidden
part, and its first error line, if any. The device (sim or gpu) is whatever
``CUDACOURSE_DEVICE`` says. Used for issue 20's figures on the H200.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError


def _seconds(cell: dict) -> float | None:
    ex = cell.get("metadata", {}).get("execution", {})
    a, b = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
    if not (a and b):
        return None
    f = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return round((f(b) - f(a)).total_seconds(), 2)


def run(path: Path, root: Path, timeout: int) -> dict:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            record_timing=True, resources={"metadata": {"path": str(root)}})
    t0 = time.perf_counter()
    error = ""
    try:
        client.execute()
    except CellExecutionError as exc:  # noqa: PERF203 - reported, not raised
        error = str(exc)[-500:]
    except Exception as exc:  # noqa: BLE001 - a timeout or a dead kernel: report it
        error = f"{type(exc).__name__}: {exc}"[-500:]
    cells = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "check" not in cell.source:
            continue
        err = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"),
                   None)
        cells.append({"index": i, "id": cell.get("id", ""), "seconds": _seconds(cell),
                      "hidden": "HIDDEN" in cell.source,
                      "first_line": cell.source.strip().splitlines()[0][:100],
                      "error": (err["ename"] + ": " + err["evalue"])[:400] if err else ""})
    return {"notebook": str(path), "seconds": round(time.perf_counter() - t0, 1),
            "device": os.environ.get("CUDACOURSE_DEVICE", ""), "error": error,
            "cells": cells}


def main() -> None:
    out, paths = Path(sys.argv[1]), [Path(p) for p in sys.argv[2:]]
    root = Path(__file__).resolve().parent.parent
    results = [run(p, root, int(os.environ.get("CELL_TIMEOUT", "300"))) for p in paths]
    out.write_text(json.dumps({"date": datetime.utcnow().isoformat(timespec="seconds") + "Z",
                               "results": results}, indent=1))
    for r in results:
        print(r["notebook"], r["seconds"], "s", r["error"][:200])
        for c in r["cells"]:
            print(f"  {c['seconds']!s:>7} s  {'hidden ' if c['hidden'] else ''}"
                  f"{c['first_line']}  {c['error'][:160]}")


if __name__ == "__main__":
    main()
