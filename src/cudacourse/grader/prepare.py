"""Per notebook: the feedback run and one verdict per test cell, all in the sandbox.

:func:`prepare` is the whole of what touches learner code. Its result (JSON-able) is what
nbgrader's execute step puts into the autograded notebook: outputs of ordinary cells from
the feedback run (sanitised and capped: the learner controlled that process), and the
outputs of each graded test cell from its verdict, which decide the points.
"""

from __future__ import annotations

import ast
import copy
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nbformat

from ..runtime import device  # the ctypes probe only: importing it chooses nothing
from . import budget, partial, untrusted, verdict
from . import sandbox as sbx
from .intake import nb_meta
from ..i18n import T  # a catalogue entry; shown in the notebook's language (lang.shown_in)
from .lang import of_notebook, shown_in

# The sandboxed processes run the grader's modules by their one name (``-m``); ``-P``: the
# working folder (the submission's) is not put on sys.path, so no file of it shadows a module.
MODULE_CMD = (sys.executable, "-P", "-m")

CONTEXT_TAG = "grading-context"  # a master cell with this tag is context, whole
BLANK_TEST = "# (graded by the course's grader in a separate process)\n"

DEFAULTS: dict[str, Any] = {
    "timeout": 120,  # seconds per cell, for the feedback run and for each verdict
    "feedback_timeout": None,  # seconds per cell in the feedback run only (None: timeout)
    "notebook_timeout": 900,  # seconds for the whole feedback run of one notebook
    "max_restarts": 3,
    "output_cap": 20_000,  # characters of output per cell
    "audit": True,  # the in-kernel tamper audit in the feedback run (a hint only)
    "feedback_run": True,  # False: verdicts only (faster; feedback shows only test cells)
    "sandbox": {},
}


def is_test_cell(cell: Any) -> bool:
    m = nb_meta(cell)
    return cell.get("cell_type") == "code" and bool(m.get("grade")) and not m.get("solution")


# --- the master's context ------------------------------------------------------------------

def _definitions_only(source: str) -> str:
    """Imports, function and class definitions and ALL_CAPS constants of a master cell."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    keep = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
            keep.append(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            if names and all(n.isupper() for n in names):
                keep.append(stmt)
    return ast.unparse(ast.Module(body=keep, type_ignores=[])) if keep else ""


def context_for(master: nbformat.NotebookNode) -> dict[str, list[str]]:
    """For each test cell (grade_id) of the master, the context sources it runs after.

    Context = every code cell before it that is locked and not graded (the setup cell),
    or tagged ``grading-context``, whole; and from the other ordinary code cells before it
    (not answers, not tests) only their definitions: imports, ``def``/``class`` and
    ALL_CAPS constants. So lesson 3's ``scale_kernel`` is there, its demos are not."""
    out, ctx = {}, []
    for cell in master.cells:
        if cell.cell_type != "code":
            continue
        m = nb_meta(cell)
        tags = cell.get("metadata", {}).get("tags", [])
        if is_test_cell(cell):
            out[m["grade_id"]] = list(ctx)
            continue
        if m.get("solution"):
            continue
        if CONTEXT_TAG in tags or (m.get("locked") and not m.get("grade")):
            ctx.append(cell.source)
        else:
            defs = _definitions_only(cell.source)
            if defs:
                ctx.append(defs)
    return out


def in_edition(source: str, lang: str) -> str:
    """A context cell with its ``cudacourse.setup(...)`` speaking ``lang``: a course grades
    both editions, and the verdicts (their diagnoses, a question's explanation) speak the
    notebook's language, not the master's (an English master's ``setup()`` for a Japanese
    notebook, a Japanese master's ``setup(lang="ja")`` for an English one)."""
    if "setup" not in source:
        return source
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    changed = False
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if isinstance(node, ast.Call) and (
                isinstance(func, ast.Attribute) and func.attr == "setup"
                and isinstance(func.value, ast.Name) and func.value.id == "cudacourse"):
            node.keywords = [k for k in node.keywords if k.arg != "lang"]
            node.keywords.append(ast.keyword(arg="lang", value=ast.Constant(lang)))
            changed = True
    return ast.unparse(tree) if changed else source


# --- sanitising what came back from the sandbox --------------------------------------------

def _cap(text: Any, n: int) -> str:
    text = text if isinstance(text, str) else "".join(
        t if isinstance(t, str) else str(t) for t in text) if isinstance(text, list) else str(text)
    return text if len(text) <= n else text[:n] + f"\n[... {len(text) - n} characters cut by the grader]\n"


def sanitise(outputs: Any, cap: int) -> list[dict[str, Any]]:
    """Plain-text, image and error outputs only (no HTML or JavaScript reaches the feedback
    or formgrader), each capped; at most 50 per cell."""
    clean: list[dict[str, Any]] = []
    budget = cap
    outputs = outputs if isinstance(outputs, list) else []
    for n, out in enumerate(outputs):
        if not isinstance(out, dict) or len(clean) >= 50 or budget <= 0:
            clean.append({"output_type": "stream", "name": "stdout", "text": (
                f"\n[... {len(outputs) - n} more output(s) cut by the grader: at most "
                f"{cap} characters per cell]\n")})
            break
        kind = out.get("output_type")
        if kind == "stream":
            text = _cap(out.get("text", ""), budget)
            budget -= len(text)
            clean.append({"output_type": "stream",
                          "name": "stderr" if out.get("name") == "stderr" else "stdout",
                          "text": text})
        elif kind == "error":
            tb = out.get("traceback", [])
            tb = [_cap(t, 2000) for t in tb[-30:]] if isinstance(tb, list) else []
            clean.append({"output_type": "error", "ename": _cap(out.get("ename", "Error"), 200),
                          "evalue": _cap(out.get("evalue", ""), 4000), "traceback": tb})
            budget -= 2000
        elif kind in ("display_data", "execute_result"):
            data = out.get("data", {}) if isinstance(out.get("data"), dict) else {}
            keep = {}
            if "text/plain" in data:
                keep["text/plain"] = _cap(data["text/plain"], min(budget, 4000))
            png = data.get("image/png")
            if isinstance(png, str) and len(png) <= 2_000_000:
                keep["image/png"] = png
            if keep:
                clean.append({"output_type": "display_data", "data": keep, "metadata": {}})
                budget -= len(keep.get("text/plain", "")) + 500
    return clean


def verdict_outputs(v: dict[str, Any], cap: int) -> list[dict[str, Any]]:
    """The outputs nbgrader scores: an error output unless the verdict passed."""
    outs: list[dict[str, Any]] = []
    if v.get("output"):
        outs.append({"output_type": "stream", "name": "stdout", "text": _cap(v["output"], cap)})
    if v.get("status") == "pass":
        if v.get("partial") is not None:
            outs.append({"output_type": "execute_result", "execution_count": None,
                         "metadata": {}, "data": {"text/plain": repr(float(v["partial"]))}})
        return outs
    ename = v.get("ename") or {"not_gradable": "NotGradable", "timeout": "CellTimeoutError",
                               "error": "GraderError"}.get(v.get("status"), "CheckFailed")
    evalue = _cap(v.get("message", ""), 4000)
    outs.append({"output_type": "error", "ename": ename, "evalue": evalue,
                 "traceback": [f"\x1b[0;31m{ename}\x1b[0m: {evalue}"]})
    return outs


# --- running ------------------------------------------------------------------------------

# Said explicitly to every verdict and feedback process: this is grading, after submission
# (cudacourse.course.quiz.after_submission: a graded question's explanation may be shown).
GRADING_ENV = {"CUDACOURSE_GRADING": "1"}


def _gpu_env(opts: dict[str, Any]) -> dict[str, str]:
    """The GPU a job's processes use, where the machine has several (``gpu_index``, set per
    job by grade_class): one entry of CUDA_VISIBLE_DEVICES, or that device number."""
    index = opts.get("gpu_index")
    if index is None:
        return {}
    visible = [d for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return {"CUDA_VISIBLE_DEVICES": visible[index % len(visible)] if visible else str(index)}


_PROBED: list[str] = []  # the grader's device probe, as JSON (once per grading process)


def _verdict_env(opts: dict[str, Any]) -> dict[str, str]:
    """The verdict server's environment: the grader's device probe handed down, so that the
    server never initialises CUDA itself and can fork one clean child per test cell; the
    notebook's language (``lang``), in which its verdicts speak."""
    env = {**GRADING_ENV, **_gpu_env(opts)}
    if opts.get("lang"):
        env["CUDACOURSE_LANG"] = str(opts["lang"])
    if not _PROBED:
        try:
            _PROBED.append(device.probe_json())
        except Exception:  # noqa: BLE001 - the server then probes in a child of its own
            _PROBED.append("")
    if _PROBED[0] and "CUDA_VISIBLE_DEVICES" not in env:  # another GPU: let it probe
        env[device.PROBED_ENV] = _PROBED[0]
    return env


def _workdir(prefix: str) -> str:
    return tempfile.mkdtemp(prefix=f"cudacourse-{prefix}-")


def _sandboxed_verdicts(request: dict[str, Any], n: int, opts: dict[str, Any],
                        course_root: str, db_url: str | None) -> tuple[list[dict], Any]:
    sb = sbx.Sandbox.from_dict(opts.get("sandbox"))
    work = _workdir("verdict")
    try:
        res = sbx.run([*MODULE_CMD, "cudacourse.grader.verdict"], workdir=work, sb=sb,
                      course_root=course_root, timeout=opts["timeout"] * n + 60,
                      stdin=json.dumps(request).encode(), db_url=db_url, env=_verdict_env(opts),
                      cap=n * 4 * opts["output_cap"] + 65536)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if res.exceeded:  # the watchdog killed it: this submission is not graded
        raise sbx.OverBudget(res.exceeded)
    found = []
    for line in res.stdout.decode("utf-8", "replace").splitlines():
        try:
            v = json.loads(line)
        except ValueError:
            continue
        if isinstance(v, dict):
            found.append(v)
    return found, res


_FORKS: dict[str, bool] = {}  # per course root: may verdicts fork from one process?


def run_verdicts(jobs: list[dict[str, Any]], opts: dict[str, Any], course_root: str,
                 db_url: str | None) -> dict[str, dict[str, Any]]:
    """One verdict per job (test cell), each in a clean process forked per cell from one
    sandboxed server (one process start per submission; on a GPU the server never
    initialises CUDA, so each child makes its own context). Where the server cannot fork
    safely it says so, and each cell gets a sandboxed process of its own."""
    if not jobs:
        return {}
    found: list[dict] = [{"fork": False}]
    if _FORKS.get(course_root, True):  # once refused (a GPU), not asked again here
        found, res = _sandboxed_verdicts({"jobs": jobs, "timeout": opts["timeout"]},
                                         len(jobs), opts, course_root, db_url)
    if found and found[0].get("fork") is False:
        _FORKS[course_root] = False
        found, each = [], {}
        for job in jobs:
            got, each[job["grade_id"]] = _sandboxed_verdicts(job, 1, opts, course_root, db_url)
            found += got[:1]
    else:
        each = {job["grade_id"]: res for job in jobs}
    by_id = {v.get("grade_id"): v for v in found if v.get("grade_id")}
    out = {}
    for job in jobs:
        gid = job["grade_id"]
        res = each[gid]
        v = by_id.get(gid)
        if v is None:
            if res.timed_out:
                v = {"status": "timeout", "ename": "CellTimeoutError",
                     "message": "the checks did not finish within their time"}
            else:
                err = res.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
                v = {"status": "error", "ename": "GraderError",
                     "message": f"the check's process ended without a verdict (exit status "
                                f"{res.rc}){': ' + ' | '.join(err) if err else ''}"}
        v = verdict.normalise(v, gid)  # total: a malformed line is a failing verdict
        v.update(grade_id=gid, isolation=res.isolation)
        out[gid] = v
    return out


def incident_kind(kind: Any) -> str:
    """The kind of an incident the learner's kernel reported (kernelrun), in the current
    language; an unknown one as it came (it is untrusted text, cleaned by the caller)."""
    known = {"tampering": T("tampering"), "timeout": T("timeout"), "replay": T("replay"),
             "crash": T("crash")}
    return known.get(str(kind), str(kind))  # type: ignore[return-value] - a Text is a str


def feedback_run(nb: nbformat.NotebookNode, opts: dict[str, Any], course_root: str,
                 db_url: str | None, who: dict[str, str]) -> tuple[list | None, list, str]:
    """Execute the notebook (test cells blanked) in the sandbox; (outputs per cell or None,
    incidents, isolation)."""
    sb = sbx.Sandbox.from_dict(opts.get("sandbox"))
    work = _workdir("run")
    try:
        sent = copy.deepcopy(nb)
        for cell in sent.cells:
            if cell.cell_type == "code":
                cell.outputs = []
                if is_test_cell(cell):
                    cell.source = BLANK_TEST
                elif nb_meta(cell).get("locked") and opts.get("lang"):
                    # the setup cell intake restored from the course's master: the run
                    # speaks the notebook's edition, as its verdicts do
                    cell.source = in_edition(cell.source, opts["lang"])
        nbformat.write(sent, os.path.join(work, "in.ipynb"))
        run_opts = {k: opts[k] for k in ("timeout", "max_restarts", "output_cap", "audit")}
        # the feedback run decides no points: its cells may have a shorter leash than a check
        run_opts["timeout"] = opts.get("feedback_timeout") or opts["timeout"]
        run_opts.update(who)
        limit = 8 * opts["output_cap"] * max(1, len(nb.cells)) + (20 << 20)
        # the result comes on stdout: nothing written in the sandbox reaches the host
        res = sbx.run([*MODULE_CMD, "cudacourse.grader.nbrun", "in.ipynb", "-",
                       json.dumps(run_opts)], workdir=work, sb=sb, course_root=course_root,
                      timeout=opts["notebook_timeout"], db_url=db_url,
                      env={**GRADING_ENV, **_gpu_env(opts)},
                      cap=limit + 1)
        if res.exceeded:  # the watchdog killed it: this submission is not graded
            raise sbx.OverBudget(res.exceeded)
        incidents = []
        if res.timed_out:
            incidents.append(T("the feedback run did not finish within {n} s",
                               n=opts["notebook_timeout"]))
        if res.rc != 0 or not res.stdout or res.truncated:
            err = res.stderr.decode("utf-8", "replace").strip().splitlines()[-2:]
            incidents.append(T("the feedback run left {what} (exit status {rc}{error}); "
                               "feedback shows only the test cells' results",
                               what=T("no result") if not res.stdout else
                               T("an oversized or odd result"), rc=res.rc,
                               error=": " + " | ".join(err) if err else ""))
            return None, incidents, res.isolation
        try:
            ran = json.loads(res.stdout.decode("utf-8"))
            cells = ran["cells"]
            if len(cells) != len(sent.cells):
                raise ValueError("cell count changed")
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            incidents.append(T("the feedback run's result was unusable ({error})",
                               error=str(exc)))
            return None, incidents, res.isolation
        outputs = []
        for mine, theirs in zip(sent.cells, cells):
            ok = isinstance(theirs, dict) and mine.cell_type == "code" and not is_test_cell(mine)
            outputs.append(sanitise(theirs.get("outputs"), opts["output_cap"]) if ok else None)
        # the notebook's total, before anything is saved for the record stage
        outputs, cut = budget.cap_cells(outputs, budget.OutputBudget.from_options(opts))
        incidents += cut
        # Written in the sandbox, so forged at will: read only what has the expected shape
        meta = ran.get("metadata") if isinstance(ran.get("metadata"), dict) else {}
        meta = meta.get("cudacourse_feedback_run")
        meta = meta if isinstance(meta, dict) else {}
        found = meta.get("incidents") if isinstance(meta.get("incidents"), list) else []
        for i in found[:20]:
            if isinstance(i, dict):
                incidents.append(T(
                    "feedback run (reported from the learner's kernel): cell {cell} "
                    "{kind}: {what}", cell=untrusted.line(_cap(i.get("cell"), 80)),
                    kind=incident_kind(i.get("kind")),
                    what=untrusted.line(_cap(i.get("what"), 400))))
        return outputs, incidents, res.isolation
    finally:
        shutil.rmtree(work, ignore_errors=True)


def prepare(staged: nbformat.NotebookNode, master: nbformat.NotebookNode, *,
            course_root: str, options: dict[str, Any] | None = None,
            db_url: str | None = None, who: dict[str, str] | None = None) -> dict[str, Any]:
    """Everything learner-derived for one notebook, computed in sandboxes. JSON-able.

    In the notebook's edition (``metadata.cudacourse.lang``), whatever the master's: the
    verdicts speak it (:func:`in_edition`), and so do the incidents."""
    lang = of_notebook(staged)
    result = _prepare(staged, master, course_root, {**(options or {}), "lang": lang},
                      db_url, who)
    result["incidents"] = [shown_in(i, lang) for i in result["incidents"]]
    return result


def _prepare(staged: nbformat.NotebookNode, master: nbformat.NotebookNode, course_root: str,
             options: dict[str, Any], db_url: str | None,
             who: dict[str, str] | None) -> dict[str, Any]:
    opts = {**DEFAULTS, **options}
    who = who or {}
    start = time.monotonic()
    contexts = {gid: [in_edition(src, opts["lang"]) for src in ctx]
                for gid, ctx in context_for(master).items()}
    solution_ids = {nb_meta(c)["grade_id"] for c in master.cells
                    if nb_meta(c).get("solution") and nb_meta(c).get("grade_id")}
    tests = {nb_meta(c)["grade_id"]: c.source for c in master.cells if is_test_cell(c)}
    result: dict[str, Any] = {"cells": {}, "outputs": None, "incidents": [],
                              "sources": [c.source for c in staged.cells]}
    isolation = set()
    # The feedback run and the verdicts are independent sandboxes: run them at once (a
    # thread waits on the feedback run's process while this one runs the verdicts).
    feedback = None
    if opts["feedback_run"]:
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="feedback-run")
        feedback = pool.submit(feedback_run, staged, opts, course_root, db_url, who)
        pool.shutdown(wait=False)
    jobs = []
    for gid, test_source in tests.items():
        pos = next((i for i, c in enumerate(staged.cells) if nb_meta(c).get("grade_id") == gid),
                   len(staged.cells))
        answers = [[nb_meta(c)["grade_id"], c.source] for c in staged.cells[:pos]
                   if c.cell_type == "code" and nb_meta(c).get("solution")
                   and nb_meta(c).get("grade_id") in solution_ids]
        jobs.append({"grade_id": gid, "context": contexts.get(gid, []), "answers": answers,
                     "test": test_source, "cap": opts["output_cap"]})
    try:
        verdicts = run_verdicts(jobs, opts, course_root, db_url)
    finally:
        if feedback is not None:  # its outputs and incidents first, as before
            outs, incidents, iso = feedback.result()
            result["outputs"], result["incidents"] = outs, incidents
            isolation.add(iso)
    for gid, v in verdicts.items():
        isolation.add(v.pop("isolation", "?"))
        result["cells"][gid] = v
        if v["status"] in ("not_gradable", "timeout", "error"):
            result["incidents"].append(T("test cell {cell}: {status}: {message}", cell=gid,
                                         status=v["status"], message=v.get("message")))
    result["isolation"] = sorted(isolation)
    result["seconds"] = round(time.monotonic() - start, 2)
    return result


def apply(nb: nbformat.NotebookNode, prepared: dict[str, Any], cap: int) -> list[str]:
    """Put the prepared outputs into nbgrader's notebook (test cells by grade_id, the others
    by matching sources in order). Returns problems found on the way."""
    problems = []
    sources = prepared.get("sources", [])
    outputs = prepared.get("outputs")
    j = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        cell.execution_count = None
        if is_test_cell(cell):
            gid = nb_meta(cell)["grade_id"]
            v = prepared["cells"].get(gid) or {
                "status": "error", "ename": "GraderError",
                "message": f"no verdict for test cell '{gid}' (not in the master?)"}
            # A failing cell whose checks still established part of the answer: its points
            # as an execute_result (nbgrader's partial credit), the diagnosis as text.
            outs = partial.outputs(v, verdict_outputs(v, cap), nb_meta(cell).get("points"))
            cell.outputs = [nbformat.from_dict(o) for o in outs]
            # Error outputs cannot carry extra keys (nbformat's schema); cell metadata can.
            # cudacourse report counts diagnoses by this cause.
            cell.metadata["cudacourse"] = {"status": v.get("status"), "cause": v.get("cause")}
            continue
        if outputs is None:
            continue
        k = next((k for k in range(j, len(sources)) if sources[k] == cell.source), None)
        if k is None:
            problems.append(f"a cell of nbgrader's notebook has no feedback output: "
                            f"{cell.source[:40]!r}")
            continue
        cell.outputs = [nbformat.from_dict(o) for o in (outputs[k] or [])]
        j = k + 1
    return problems


__all__ = ["prepare", "apply", "context_for", "sanitise", "verdict_outputs", "DEFAULTS",
           "is_test_cell"]
