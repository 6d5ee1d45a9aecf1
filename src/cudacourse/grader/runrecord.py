"""The record of a grading run: summary table, status CSV beside nbgrader's export, JSON.

Files, under ``<course>/grading/<assignment>/``:

* ``run-<time>.json`` and ``latest.json``: the whole run (options, isolation, provenance --
  versions, commits and hashes of the scoring code and masters --, per student: status,
  reason, scores per cell, incidents, seconds);
* ``status.csv``: one row per student -- ``status`` is ``graded`` or ``not_graded`` and
  ``reason`` says why; ``score`` is empty (never 0) when not graded. Join it with
  ``nbgrader export`` on ``student_id``: the export alone shows a not-graded student as 0;
* ``summary.txt``: the table printed at the end of the run.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any


def total(res: dict[str, Any]) -> tuple[float | None, float | None]:
    if res.get("status") != "graded":
        return None, None
    score = sum(v or 0.0 for v in res.get("scores", {}).values())
    most = sum(v or 0.0 for v in res.get("max_scores", {}).values())
    return score, most


def late_of(res: dict[str, Any]) -> dict[str, Any] | None:
    """A graded submission's lateness (due, submitted, penalty, rule) when it was late."""
    late = res.get("late")
    if res.get("status") != "graded" or not isinstance(late, dict) or not late.get("late"):
        return None
    from .policy import duration

    return {**late, "penalty": float(late.get("penalty") or 0.0),
            "days": duration(float(late.get("seconds_late") or 0.0))}


def table(run: dict[str, Any]) -> str:
    rows = [("student", "status", "score", "incidents", "reason / first incident")]
    for r in run["results"]:
        score, most = total(r)
        shown = f"{score:g} / {most:g}" if score is not None else "NOT GRADED"
        late = late_of(r)
        if late:
            shown += f" LATE -{late['penalty']:g}"
        first = r.get("reason") or (r.get("incidents") or [""])[0] or r.get("lost") or ""
        if late:
            first = f"late {late['days']}, {late['rule']}" + (f"; {first}" if first else "")
        rows.append((r["student"], r["status"], shown, str(len(r.get("incidents", []))),
                     first[:90]))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4]
             for row in rows]
    lines.insert(1, "-" * min(150, len(lines[0]) + 20))
    graded = sum(r["status"] == "graded" for r in run["results"])
    n = len(run["results"])
    lines.append("")
    lines.append(f"{graded} graded, {n - graded} not graded, "
                 f"{sum(len(r.get('incidents', [])) for r in run['results'])} incident(s); "
                 f"{run.get('seconds', 0):.0f} s; sandbox: {run.get('isolation')}")
    if run.get("privileges"):
        lines.append(f"note: {run['privileges']}")
    return "\n".join(lines)


def write(run: dict[str, Any], directory: Path) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    stamp = run["started"].replace(":", "").replace("-", "")
    paths = {"json": directory / f"run-{stamp}.json", "latest": directory / "latest.json",
             "csv": directory / "status.csv", "summary": directory / "summary.txt"}
    text = json.dumps(run, indent=1, default=str)
    paths["json"].write_text(text)
    paths["latest"].write_text(text)
    with open(paths["csv"], "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["student_id", "assignment", "status", "reason", "score", "max_score",
                    "incidents", "late", "late_penalty", "due", "submitted", "late_rule",
                    "first_lost"])
        for r in run["results"]:
            score, most = total(r)
            late = late_of(r) or {}
            w.writerow([r["student"], r["assignment"], r["status"], r.get("reason") or "",
                        "" if score is None else f"{score:g}",
                        "" if most is None else f"{most:g}",
                        " | ".join(r.get("incidents", []))[:2000],
                        late.get("days", ""), f"{late['penalty']:g}" if late else "",
                        late.get("due", ""), late.get("submitted", ""), late.get("rule", ""),
                        (r.get("lost") or "")[:300]])
    paths["summary"].write_text(table(run) + "\n")
    return paths


__all__ = ["late_of", "table", "write", "total"]
