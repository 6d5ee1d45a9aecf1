"""The GPU run record, ``docs/gpu_run.json``: what ``tools/gpu/verify.sh`` measured on a GPU,
for which commit. The project's claims about a GPU hold for that commit only.

Schema (issue 21; extra keys are allowed, these are required)::

    {"date": "2026-12-01T18:00:00Z", "gpu": "NVIDIA H200", "driver": "580.1", "commit": "<sha>",
     "lessons": {"01_gpu_vs_cpu": {"seconds": 21.3, "passed": true, "slowest_check_s": 1.2}},
     "suite": {"passed": 1100, "failed": 0, "errors": 0, "skipped": 12, "seconds": 300.0},
     "grading": {"assignment": "01_gpu_vs_cpu", "submissions": 40, "as_expected": true,
                 "seconds": 180.0, "workers": 16}}

Optional keys it is judged by when present: ``lessons_ja`` (the Japanese masters, each
executed whole, entries as in ``lessons``), ``bench`` (the quick bench's exit status),
``seconds`` (the whole verify.sh run), ``stages`` (what it was asked to run) and
``masters_alone`` (whether the English masters, whose check cells are held to 5 s, ran alone
or on cores reserved for them: false misses the goal). ``suite.slowest`` lists the slowest
tests (from the junit XML, else from the log's ``--durations``), to see what to make cheaper.

The pieces are made by the subcommands below, one per stage of verify.sh, each from what the
stage left (an executed notebook, a junit XML, a grading run record), so the numbers are
never typed by hand::

    python -m cudacourse.course.gpu_run master NB.ipynb --out lesson.json [--timeout S]
    python -m cudacourse.course.gpu_run suite JUNIT.xml --out suite.json [--log pytest.log]
    python -m cudacourse.course.gpu_run grading COURSE ASSIGNMENT --out grading.json
    python -m cudacourse.course.gpu_run assemble PARTS_DIR --out docs/gpu_run.json [--meta k=v ...]
    python -m cudacourse.course.gpu_run check docs/gpu_run.json     # schema, then the issue's goals
    python -m cudacourse.course.gpu_run render [--write README.md]  # the README's block, from the file

The README's "On a GPU" block is :func:`render` of the committed file (a test compares them).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = next(p for p in Path(__file__).resolve().parents if p.name == "cudacourse").parents[1]
RECORD = ROOT / "docs" / "gpu_run.json"

# The issues' goals (21, 34, 42), on native checks (a GPU): per lesson (every English master
# within a minute), per check cell (measured alone, as a learner runs it), suite, grading,
# and the whole run in one device call.
LESSON_GOAL_S = 60.0
LESSON_GOAL_S_LONG: dict[str, float] = {}  # (lessons 4 and 5 had 90 s before issue 42)
CHECK_GOAL_S = 5.0
SUITE_GOAL_S = 480.0
GRADING_GOAL_S = 8.0  # a lesson-1 submission on its worker (the median), default options
# verify.sh in one call of at most 10 minutes, a minute to spare: its own seconds, less the
# device copy's set-up (on-device.sh, about 40 s)
VERIFY_GOAL_S = 500.0

_TOP = {"date": str, "gpu": str, "driver": str, "commit": str, "lessons": dict,
        "suite": dict, "grading": dict}
_LESSON = {"seconds": (int, float), "passed": bool, "slowest_check_s": (int, float, type(None))}
_SUITE = {"passed": int, "failed": int, "errors": int, "skipped": int, "seconds": (int, float)}
_GRADING = {"assignment": str, "submissions": int, "as_expected": bool,
            "seconds": (int, float), "workers": int}
_STEM = re.compile(r"^\d\d_[a-z0-9_]+$")
_SHA = re.compile(r"^[0-9a-f]{7,40}$")


def _fields(where: str, obj: Any, spec: dict[str, Any]) -> list[str]:
    if not isinstance(obj, dict):
        return [f"{where}: expected an object, got {type(obj).__name__}"]
    problems = []
    for key, kind in spec.items():
        if key not in obj:
            problems.append(f"{where}: missing {key!r}")
        elif isinstance(obj[key], bool) and kind in (int, (int, float)):
            problems.append(f"{where}.{key}: expected a number, got a boolean")
        elif not isinstance(obj[key], kind):
            problems.append(f"{where}.{key}: expected {getattr(kind, '__name__', kind)}, "
                            f"got {type(obj[key]).__name__} {obj[key]!r}")
        elif isinstance(obj[key], (int, float)) and not isinstance(obj[key], bool) \
                and obj[key] < 0:
            problems.append(f"{where}.{key}: negative ({obj[key]!r})")
    return problems


def validate(rec: Any) -> list[str]:
    """Problems with the record's shape (empty: it has exactly the issue's schema)."""
    problems = _fields("record", rec, _TOP)
    if problems and not isinstance(rec, dict):
        return problems
    if isinstance(rec.get("commit"), str) and not _SHA.match(rec["commit"]):
        problems.append(f"record.commit: not a git commit hash: {rec['commit']!r}")
    if isinstance(rec.get("date"), str):
        try:
            datetime.fromisoformat(rec["date"].replace("Z", "+00:00"))
        except ValueError:
            problems.append(f"record.date: not an ISO date: {rec['date']!r}")
    for key in ("lessons", "lessons_ja"):
        lessons = rec.get(key)
        if key == "lessons_ja" and lessons is None:
            continue  # optional (a record of one edition)
        if not isinstance(lessons, dict):
            if key == "lessons_ja":
                problems.append(f"record.{key}: expected dict, got {type(lessons).__name__}")
            continue
        if not lessons:
            problems.append(f"record.{key}: empty")
        for stem, entry in lessons.items():
            if not _STEM.match(str(stem)):
                problems.append(f"record.{key}: {stem!r} is not a lesson stem (NN_topic)")
            problems += _fields(f"{key}.{stem}", entry, _LESSON)
    if isinstance(rec.get("suite"), dict):
        problems += _fields("suite", rec["suite"], _SUITE)
    if isinstance(rec.get("grading"), dict):
        problems += _fields("grading", rec["grading"], _GRADING)
    return problems


def japanese_editions(stems: list[str], root: Path = ROOT) -> list[str]:
    """The lessons that have a Japanese master (solutions/ja/<stem>/<stem>.ipynb)."""
    return [s for s in stems if (root / "solutions" / "ja" / s / f"{s}.ipynb").is_file()]


def submission_seconds(g: dict[str, Any]) -> tuple[float, str]:
    """Seconds a submission takes on its worker, and how that was measured: the median of
    those graded one at a time alone (``latency``, verify.sh's probe), else the median of
    the class graded beside the rest, else the class's seconds per submission."""
    lat = g.get("latency") if isinstance(g.get("latency"), dict) else {}
    if isinstance(lat.get("median_s"), (int, float)):
        return float(lat["median_s"]), "median, one at a time, alone"
    if isinstance(g.get("per_submission_median_s"), (int, float)):
        return float(g["per_submission_median_s"]), "median, beside the suite"
    return (g["seconds"] / g["submissions"] if g["submissions"] else 0.0), "class average"


def lesson_goal(stem: str) -> float:
    return LESSON_GOAL_S_LONG.get(stem[:2], LESSON_GOAL_S)


def goals(rec: dict[str, Any], lessons: list[str] | None = None,
          lessons_ja: list[str] | None = None) -> list[str]:
    """The issue's goals this (valid) record misses; empty when it proves the course.
    ``lessons``, ``lessons_ja``: the stems that must all be there, English and Japanese
    (default: whatever the record has). The Japanese masters must pass; their times are
    not judged (they run beside the English ones, whose code cells they share)."""
    missed = []
    if rec.get("mode", "gpu") != "gpu":
        missed.append(f"not a GPU run (mode {rec.get('mode')!r})")
    for stem in lessons or []:
        if stem not in rec["lessons"]:
            missed.append(f"lesson {stem}: not in the record")
    ja = rec.get("lessons_ja") or {}
    for stem in lessons_ja or []:
        if stem not in ja:
            missed.append(f"Japanese lesson {stem}: not in the record")
    for stem, e in sorted(ja.items()):
        if not e["passed"]:
            missed.append(f"Japanese lesson {stem}: did not pass "
                          f"({e.get('error') or 'no reason recorded'})")
    if rec.get("masters_alone") is False and rec["lessons"]:
        missed.append("check cells: the English masters ran beside the rest of the run, so "
                      "their check cells were not measured alone")
    for stem, e in sorted(rec["lessons"].items()):
        if not e["passed"]:
            missed.append(f"lesson {stem}: did not pass ({e.get('error') or 'no reason recorded'})")
        if e["seconds"] > lesson_goal(stem):
            missed.append(f"lesson {stem}: {e['seconds']:.1f} s > {lesson_goal(stem):g} s")
        if (e["slowest_check_s"] or 0) > CHECK_GOAL_S:
            missed.append(f"lesson {stem}: a check cell took {e['slowest_check_s']:.1f} s "
                          f"> {CHECK_GOAL_S:g} s")
    s = rec["suite"]
    if s["failed"] or s["errors"] or not s["passed"] or s.get("complete") is False:
        missed.append(f"suite: {s['passed']} passed, {s['failed']} failed, {s['errors']} errors"
                      f"{'' if s.get('complete', True) else ', stopped at its deadline'}")
    if s["seconds"] > SUITE_GOAL_S:
        missed.append(f"suite: {s['seconds']:.0f} s > {SUITE_GOAL_S:g} s")
    g = rec["grading"]
    if g.get("isolation") is not None and not str(g["isolation"]).startswith("bwrap"):
        missed.append(f"grading: not in bubblewrap ({g['isolation']})")
    if not g["as_expected"] or not g["submissions"]:
        missed.append(f"grading: {g['submissions']} submission(s), not all as expected"
                      f"{'' if g.get('complete', True) else ' (stopped at its deadline)'}")
    elif not isinstance((g.get("latency") or {}).get("median_s"), (int, float)):
        missed.append("grading: no lesson-1 submission was graded alone (verify.sh's latency "
                      "probe), so its seconds on its worker are not known")
    else:
        per, how = submission_seconds(g)
        if per > GRADING_GOAL_S:
            missed.append(f"grading: {per:.1f} s per submission on its worker ({how}) "
                          f"> {GRADING_GOAL_S:g} s")
    stages = rec.get("stages") or []
    bench = rec.get("bench")
    if "bench" in stages and (not isinstance(bench, dict) or bench.get("exit_status") != 0):
        missed.append("bench: the quick bench did not run to a clean end "
                      f"(exit {bench.get('exit_status') if isinstance(bench, dict) else None})")
    seconds = rec.get("seconds")
    if isinstance(seconds, (int, float)) and seconds > VERIFY_GOAL_S:
        missed.append(f"one call: verify.sh took {seconds:.0f} s > {VERIFY_GOAL_S:g} s")
    return missed


MEASURED = ("src", "lessons", "solutions", "tests", "nbgrader_config.py")


def changed_since(commit: str, root: Path = ROOT) -> list[str] | None:
    """Files of what the record measured (:data:`MEASURED`) that differ between ``commit``
    and the working tree; None when git cannot tell (no .git, unknown commit)."""
    import subprocess

    try:
        r = subprocess.run(["git", "-C", str(root), "diff", "--name-only", commit, "--",
                            *MEASURED], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.split() if r.returncode == 0 else None


# --- the pieces, from what each stage left ----------------------------------------------

def _stamp(text: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def cell_seconds(cell: dict[str, Any]) -> float | None:
    """How long a cell ran, from nbclient's timing metadata (execute_input to reply)."""
    ex = cell.get("metadata", {}).get("execution", {})
    start = _stamp(ex.get("iopub.execute_input") or ex.get("shell.execute_request"))
    end = _stamp(ex.get("shell.execute_reply") or ex.get("iopub.status.idle"))
    return None if start is None or end is None else max(0.0, end - start)


def is_check_cell(cell: dict[str, Any]) -> bool:
    """An autograded test cell of a master (the checks a learner's answer meets)."""
    m = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(m.get("grade")) and not m.get("solution")


def lesson_entry(nb: dict[str, Any], seconds: float, error: str | None = None) -> dict[str, Any]:
    """The record of one executed master: wall seconds, passed, slowest check cell, and the
    per-cell times (``cells``: index, grade_id or None, seconds; slowest first)."""
    cells = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        t = cell_seconds(cell)
        if t is not None:
            cells.append({"index": i, "grade_id": cell.get("metadata", {}).get("nbgrader", {})
                          .get("grade_id"), "check": is_check_cell(cell), "seconds": round(t, 3)})
    checks = [c["seconds"] for c in cells if c["check"]]
    errors = [c for c in nb.get("cells", []) for o in c.get("outputs", [])
              if o.get("output_type") == "error"  # a cell meant to raise is no failure
              and "raises-exception" not in c.get("metadata", {}).get("tags", [])]
    if error is None and errors:
        error = "an output holds an error"
    return {"seconds": round(seconds, 2), "passed": error is None,
            "slowest_check_s": round(max(checks), 3) if checks else None,
            "error": error, "cells": sorted(cells, key=lambda c: -c["seconds"])}


def execute_master(path: Path, timeout: int = 300, cwd: Path | None = None) -> dict[str, Any]:
    """Execute one master alone in a fresh kernel; its :func:`lesson_entry`."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=True,
                            resources={"metadata": {"path": str(cwd or ROOT)}})
    start, error = time.monotonic(), None
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        lines = str(exc).strip().splitlines()
        error = f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"
    return lesson_entry(nb, time.monotonic() - start, error)


def suite_entry(junit: Path | None, log: Path | None = None,
                seconds: float | None = None) -> dict[str, Any]:
    """Counts from pytest's junit XML; from the log's last summary line when the XML is
    missing (pytest stopped at the deadline); ``complete`` says whether it finished."""
    out = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "seconds": seconds or 0.0,
           "complete": False, "failures": []}
    if junit is not None and junit.is_file():
        root = ET.parse(junit).getroot()
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        total = fail = err = skip = 0
        secs = 0.0
        for s in suites:
            total += int(s.get("tests", 0))
            fail += int(s.get("failures", 0))
            err += int(s.get("errors", 0))
            skip += int(s.get("skipped", 0))
            secs += float(s.get("time", 0.0))
        for case in root.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                out["failures"].append(f"{case.get('classname')}::{case.get('name')}")
        out.update(passed=total - fail - err - skip, failed=fail, errors=err, skipped=skip,
                   seconds=round(seconds if seconds is not None else secs, 1))
        times = [(float(c.get("time") or 0.0), f"{c.get('classname')}::{c.get('name')}")
                 for c in root.iter("testcase")]
        out["slowest"] = [{"test": t, "seconds": round(x, 1)}
                          for x, t in sorted(times, reverse=True)[:SLOWEST]]
        text = log.read_text(errors="replace") if log is not None and log.is_file() else ""
        out["complete"] = _finished(text)
    elif log is not None and log.is_file():
        text = log.read_text(errors="replace")
        counts = [ln for ln in text.splitlines()
                  if re.search(r"\d+ (passed|failed|errors?|skipped)\b", ln)]
        last = counts[-1] if counts else ""
        for key, word in (("passed", "passed"), ("failed", "failed"), ("errors", "error"),
                          ("skipped", "skipped")):
            found = re.findall(rf"(\d+) {word}s?\b", last)
            out[key] = int(found[-1]) if found else 0
        out["failures"] = re.findall(r"^(?:FAILED|ERROR) (\S+)", text, re.M)[:100]
        out["slowest"] = durations(text)
    out["failures"] = out["failures"][:100]
    return out


SLOWEST = 20  # tests listed in suite.slowest


def durations(log_text: str) -> list[dict[str, Any]]:
    """The slowest tests of pytest's ``--durations`` section in a log (setup, call and
    teardown of one test summed), slowest first."""
    per: dict[str, float] = {}
    for secs, test in re.findall(r"^\s*(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(\S+)",
                                 log_text, re.M):
        per[test] = per.get(test, 0.0) + float(secs)
    return [{"test": t, "seconds": round(x, 1)}
            for t, x in sorted(per.items(), key=lambda kv: -kv[1])[:SLOWEST]]


def _finished(log_text: str) -> bool:
    """Whether pytest ran to its end: not interrupted, not stopped by ``timeout`` (verify.sh
    appends "pytest exit N"; 124 and 137 are timeout's)."""
    if "KeyboardInterrupt" in log_text or "!!!!!!! Interrupted" in log_text:
        return False
    return not re.search(r"^pytest exit (124|137)\b", log_text, re.M)


def grading_entry(course: Path, assignment: str) -> dict[str, Any]:
    """The sample class's result: the grader's run record against ``expected.json``
    (written by tests/submissions/samples.py)."""
    try:
        want = json.loads((course / "expected.json").read_text())
    except (OSError, ValueError) as exc:  # the class was never made: nothing was graded
        return {"assignment": assignment, "submissions": 0, "as_expected": False,
                "seconds": 0.0, "workers": 0, "error": f"no expected.json ({exc})"[:300],
                "mismatches": []}
    latest = course / "grading" / assignment / "latest.json"
    run = json.loads(latest.read_text()) if latest.is_file() else {"results": []}
    got = {r["student"]: r for r in run.get("results", [])}
    bad = []
    for name, w in want.items():
        r = got.get(name, {})
        if w.get("not_graded"):
            ok = r.get("status") == "not_graded" and w["not_graded"] in (r.get("reason") or "")
        else:
            ok = r.get("status") == "graded" and r.get("scores") == w["cells"]
        if not ok:
            bad.append({"name": name, "want": w.get("total"), "got": r.get("status"),
                        "scores": r.get("scores"), "reason": (r.get("reason") or "")[:200]})
    per = sorted(float(r.get("seconds") or 0) for r in run.get("results", []))
    opts = run.get("options", {})
    return {"assignment": assignment, "submissions": len(want),
            "as_expected": bool(want) and not bad and len(got) == len(want),
            "seconds": float(run.get("seconds") or 0.0),
            "workers": int(run.get("workers") or opts.get("workers") or 0),
            "executor": run.get("executor"), "isolation": run.get("isolation"),
            "per_submission_median_s": per[len(per) // 2] if per else None,
            "per_submission_max_s": per[-1] if per else None,
            "mismatches": bad[:20]}


def assemble(parts: Path, meta: dict[str, Any]) -> dict[str, Any]:
    """The record from a stage directory: ``lesson-<stem>.json``, ``suite.json``,
    ``grading.json``, ``bench.json`` (any may be missing: a stage that did not run)."""
    def load(name: str) -> Any:
        p = parts / name
        try:
            return json.loads(p.read_text()) if p.is_file() else None
        except ValueError as exc:
            return {"unreadable": f"{name}: {exc}"}

    lessons = {p.stem[len("lesson-"):]: load(p.name) for p in sorted(parts.glob("lesson-*.json"))
               if not p.name.startswith("lesson-ja-")}
    lessons_ja = {p.stem[len("lesson-ja-"):]: load(p.name)
                  for p in sorted(parts.glob("lesson-ja-*.json"))}
    rec: dict[str, Any] = {
        "date": meta.pop("date", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
        "gpu": meta.pop("gpu", "unknown"), "driver": meta.pop("driver", "unknown"),
        "commit": meta.pop("commit", "unknown"), "lessons": lessons,
        "suite": load("suite.json") or {"passed": 0, "failed": 0, "errors": 0, "skipped": 0,
                                        "seconds": 0.0, "complete": False, "ran": False},
        "grading": load("grading.json") or {"assignment": "", "submissions": 0,
                                            "as_expected": False, "seconds": 0.0,
                                            "workers": 0, "ran": False},
    }
    if lessons_ja:
        rec["lessons_ja"] = lessons_ja
    latency = load("latency.json")
    if latency is not None:  # submissions graded one at a time, on the reserved cores
        rec["grading"]["latency"] = latency
    bench = load("bench.json")
    if bench is not None:
        rec["bench"] = bench
    rec.update(meta)
    rec["problems"] = validate(rec)
    rec["goals_missed"] = goals(rec) if not rec["problems"] else []
    return rec


# --- the README block --------------------------------------------------------------------

BEGIN = "<!-- gpu_run: rendered from docs/gpu_run.json by `python -m cudacourse.course.gpu_run render` -->"
END = "<!-- /gpu_run -->"


def render(rec: dict[str, Any] | None) -> str:
    """The README's "last GPU run" paragraph, from the record (or its absence)."""
    if rec is None:
        body = ("No GPU run is recorded yet: `tools/gpu/verify.sh` on a GPU machine writes "
                "`docs/gpu_run.json`.")
    else:
        lessons = rec["lessons"]
        ok = [s for s, e in lessons.items() if e["passed"]]
        slow = max(lessons.items(), key=lambda kv: kv[1]["seconds"]) if lessons else None
        checks = [e["slowest_check_s"] for e in lessons.values() if e["slowest_check_s"]]
        s, g = rec["suite"], rec["grading"]
        ja = rec.get("lessons_ja") or {}
        ja_ok = [k for k, e in ja.items() if e["passed"]]
        per, how = submission_seconds(g)
        body = (f"Last GPU run ({rec['date'][:10]}, {rec['gpu']}, driver {rec['driver']}, "
                f"commit `{rec['commit'][:12]}`; `tools/gpu/verify.sh`, "
                f"[docs/gpu_run.json](docs/gpu_run.json)): {len(ok)} of {len(lessons)} "
                f"lessons executed without errors"
                + (f", the slowest ({slow[0]}) in {slow[1]['seconds']:.0f} s" if slow else "")
                + (f", no check cell over {max(checks):.1f} s" if checks else "")
                + (f"; {len(ja_ok)} of {len(ja)} Japanese masters too" if ja else "")
                + f"; the test suite in GPU mode: {s['passed']} passed, {s['failed']} failed, "
                f"{s['errors']} errors, {s['skipped']} skipped in {s['seconds']:.0f} s; "
                f"the sample class of {g['assignment']} ({g['submissions']} submissions) graded "
                f"{'as expected' if g['as_expected'] else 'NOT as expected'} in "
                f"{g['seconds']:.0f} s on {g['workers']} workers ({per:.1f} s a submission on its "
                f"worker, {how})"
                + (f"; all of it in one run of {rec['seconds']:.0f} s"
                   if isinstance(rec.get("seconds"), (int, float)) else "") + ".")
    return f"{BEGIN}\n{body}\n{END}"


def load(path: Path = RECORD) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.is_file() else None


def rendered_block(text: str) -> str | None:
    """The block as it stands in a document (None: the document has none)."""
    i, j = text.find(BEGIN), text.find(END)
    return None if i < 0 or j < i else text[i:j + len(END)]


# --- command line ------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cudacourse.course.gpu_run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("master", help="execute one master alone, with per-cell times")
    s.add_argument("notebook", type=Path)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    s = sub.add_parser("suite", help="suite counts from pytest's junit XML (or its log)")
    s.add_argument("junit", type=Path)
    s.add_argument("--log", type=Path)
    s.add_argument("--seconds", type=float)
    s.add_argument("--deselected", action="append", default=[],
                   help="a test id left out of the run (said in the record)")
    s.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("grading", help="the sample class's run against expected.json")
    s.add_argument("course", type=Path)
    s.add_argument("assignment")
    s.add_argument("--wall", type=float, help="seconds of the whole command, start-up included")
    s.add_argument("--exit-status", type=int, help="cudacourse grade's (124, 137: timeout's)")
    s.add_argument("--out", type=Path, required=True)
    s = sub.add_parser("assemble", help="the record from the stages' pieces")
    s.add_argument("parts", type=Path)
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE")
    s.add_argument("--meta-json", type=Path, help="a JSON object of further keys")
    s = sub.add_parser("check", help="schema, then the issue's goals (exit 1 if missed)")
    s.add_argument("record", type=Path, nargs="?", default=RECORD)
    s = sub.add_parser("render", help="print the README block from the record")
    s.add_argument("record", type=Path, nargs="?", default=RECORD)
    s.add_argument("--write", type=Path, metavar="DOC",
                   help="replace the block in DOC (e.g. README.md) instead of printing it")
    args = p.parse_args(argv)

    if args.cmd == "master":
        stem = args.notebook.stem
        try:
            entry = execute_master(args.notebook, args.timeout)
        except Exception as exc:  # noqa: BLE001 - the kernel would not even start: say so
            entry = {"seconds": 0.0, "passed": False, "slowest_check_s": None,
                     "error": f"{type(exc).__name__}: {exc}"[:400], "cells": []}
        args.out.write_text(json.dumps(entry, indent=1))
        print(f"{stem}: {'passed' if entry['passed'] else 'FAILED'} in {entry['seconds']:.1f} s"
              f"; slowest check {entry['slowest_check_s']} s"
              + (f"; {entry['error']}" if entry["error"] else ""))
        return 0 if entry["passed"] else 1
    if args.cmd == "suite":
        entry = suite_entry(args.junit, args.log, args.seconds)
        entry["deselected"] = args.deselected
        args.out.write_text(json.dumps(entry, indent=1))
        print(f"suite: {entry['passed']} passed, {entry['failed']} failed, {entry['errors']} "
              f"errors, {entry['skipped']} skipped in {entry['seconds']} s"
              f"{'' if entry['complete'] else ' (incomplete)'}")
        return 0
    if args.cmd == "grading":
        entry = grading_entry(args.course, args.assignment)
        entry["wall_seconds"] = args.wall
        if args.exit_status is not None:
            entry["exit_status"] = args.exit_status
            entry["complete"] = args.exit_status not in (124, 137)
        args.out.write_text(json.dumps(entry, indent=1))
        print(f"grading: {entry['submissions']} submissions, as expected: "
              f"{entry['as_expected']}, {entry['seconds']} s on {entry['workers']} workers")
        for m in entry["mismatches"]:
            print(f"  BAD {m}")
        return 0
    if args.cmd == "assemble":
        meta: dict[str, Any] = {}
        if args.meta_json and args.meta_json.is_file():
            meta.update(json.loads(args.meta_json.read_text()))
        for kv in args.meta:
            k, _, v = kv.partition("=")
            try:  # numbers and booleans as such
                meta[k] = json.loads(v) if k not in ("commit", "gpu", "driver", "date") else v
            except ValueError:
                meta[k] = v
        rec = assemble(args.parts, meta)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rec, indent=1) + "\n")
        print(f"record: {args.out}; schema problems: {rec['problems'] or 'none'}; "
              f"goals missed: {rec['goals_missed'] or 'none'}")
        return 0
    if args.cmd == "check":
        rec = load(args.record)
        if rec is None:
            print(f"{args.record}: no such record", file=sys.stderr)
            return 2
        problems = validate(rec)
        from .lessons import LESSONS

        stems = [lesson.stem for lesson in LESSONS]
        missed = [] if problems else goals(rec, stems, japanese_editions(stems))
        changed = changed_since(rec["commit"]) if not problems else None
        if changed:
            missed.append(f"the record is of {rec['commit'][:12]}, and since then "
                          f"{len(changed)} measured file(s) changed: {', '.join(changed[:8])}")
        for line in problems + missed:
            print(line)
        print(f"{args.record}: {len(problems)} schema problem(s), {len(missed)} goal(s) missed")
        return 1 if problems or missed else 0
    if args.cmd == "render":
        block = render(load(args.record))
        if not args.write:
            print(block)
            return 0
        text = args.write.read_text()
        old = rendered_block(text)
        if old is None:
            print(f"{args.write}: no gpu_run block to replace (add {BEGIN!r} ... {END!r})",
                  file=sys.stderr)
            return 2
        args.write.write_text(text.replace(old, block))
        print(f"{args.write}: GPU block {'unchanged' if old == block else 'updated'}")
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
