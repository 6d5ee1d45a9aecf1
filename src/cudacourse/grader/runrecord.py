"""The record of a grading run: summary table, status CSV beside nbgrader's export, JSON.

Files, under ``<course>/grading/<assignment>/``:

* ``run-<time>.json`` and ``latest.json``: the whole run (options, isolation, provenance --
  versions, commits and hashes of the scoring code and masters --, per student: status,
  reason, scores per cell, incidents, seconds);
* ``status.csv``: one row per student -- ``status`` is ``graded`` or ``not_graded`` and
  ``reason`` says why; ``score`` is empty (never 0) when not graded. Join it with
  ``nbgrader export`` on ``student_id``: the export alone shows a not-graded student as 0;
* ``summary.txt``: the table printed at the end of the run.

Every string of a run may quote a submission (reasons, incidents, student names), so each
writer is safe for any Unicode (a lone surrogate is written as ``\\udcXX``), CSV cells and
the table carry no control characters (:mod:`untrusted`), no database password appears
anywhere (``redacted``), and the files are readable by their owner only (0600): a run
record names every student with their scores.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # pragma: no cover - loaded by path
    import csvout  # type: ignore[no-redef]
    import untrusted  # type: ignore[no-redef]
else:
    from . import csvout, untrusted


def total(res: dict[str, Any]) -> tuple[float | None, float | None]:
    if res.get("status") != "graded":
        return None, None
    score = sum(v or 0.0 for v in res.get("scores", {}).values())
    most = sum(v or 0.0 for v in res.get("max_scores", {}).values())
    return score, most


def redacted(run: dict[str, Any]) -> dict[str, Any]:
    """``run`` with every string safe to write and no database password in it."""
    urls = [run.get("options", {}).get("db_url"), run.get("db_url")]
    urls += [r.get("db_url") for r in run.get("results", []) if isinstance(r, dict)]
    secrets = untrusted.secrets_of(*[u for u in urls if isinstance(u, str)])
    return untrusted.deep(untrusted.redact(run, secrets), untrusted.text)


def late_of(res: dict[str, Any]) -> dict[str, Any] | None:
    """A graded submission's lateness (due, submitted, penalty, rule) when it was late."""
    late = res.get("late")
    if res.get("status") != "graded" or not isinstance(late, dict) or not late.get("late"):
        return None
    from .policy import duration

    return {**late, "penalty": float(late.get("penalty") or 0.0),
            "days": duration(float(late.get("seconds_late") or 0.0))}


def shortened(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut between words ("check the arithmet"
    said nothing), marked with an ellipsis; text without spaces (Japanese) is cut at the
    width."""
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    space = cut.rfind(" ")
    if space > width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def table(run: dict[str, Any]) -> str:
    """The summary table; every cell a single line with no control character."""
    run = redacted(run)
    rows = [("student", "status", "score", "incidents", "reason / first incident")]
    for r in run["results"]:
        score, most = total(r)
        shown = f"{score:g} / {most:g}" if score is not None else "NOT GRADED"
        late = late_of(r)
        if late:  # "LATE -0" said a penalty that was not taken
            shown += " LATE" + (f" -{late['penalty']:g}" if late["penalty"] >= 0.005 else "")
        first = r.get("reason") or (r.get("incidents") or [""])[0] or r.get("lost") or ""
        if late:
            first = f"late {late['days']}, {late['rule']}" + (f"; {first}" if first else "")
        rows.append((untrusted.line(r["student"]), untrusted.line(r["status"]), shown,
                     str(len(r.get("incidents", []))), shortened(untrusted.line(first), 90)))
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


def _private(path: Path, data: str) -> None:
    """Write ``data`` (UTF-8) to ``path``, readable and writable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # an older record (0644) becomes private too
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
        fh.write(data)


def write(run: dict[str, Any], directory: Path) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    safe = redacted(run)
    stamp = untrusted.line(safe["started"]).replace(":", "").replace("-", "")
    paths = {"json": directory / f"run-{stamp}.json", "latest": directory / "latest.json",
             "csv": directory / "status.csv", "summary": directory / "summary.txt"}
    text = json.dumps(safe, indent=1, default=lambda v: untrusted.text(v))
    _private(paths["json"], text)
    _private(paths["latest"], text)
    buf = io.StringIO(newline="")
    w = csvout.writer(buf)  # every cell neutralised, the grader's own words too
    w.writerow(["student_id", "assignment", "status", "reason", "score", "max_score",
                "incidents", "late", "late_penalty", "due", "submitted", "late_rule",
                "first_lost"])
    for r in safe["results"]:
        score, most = total(r)
        late = late_of(r) or {}
        w.writerow([untrusted.line(r["student"]), untrusted.line(r["assignment"]),
                    r["status"], untrusted.line(r.get("reason") or ""),
                    "" if score is None else f"{score:g}",
                    "" if most is None else f"{most:g}",
                    untrusted.line(" | ".join(r.get("incidents", [])))[:2000],
                    # lateness is the grader's own words (parsed times, the configured
                    # rule, which may start with '-'), not text from the submission
                    late.get("days", ""), f"{late['penalty']:g}" if late else "",
                    late.get("due", ""), late.get("submitted", ""), late.get("rule", ""),
                    untrusted.line(r.get("lost") or "")[:300]])
    _private(paths["csv"], buf.getvalue())
    _private(paths["summary"], table(safe) + "\n")
    return paths


__all__ = ["late_of", "table", "write", "total", "redacted"]
