"""Grade a class: one job per student, over any ``concurrent.futures.Executor``.

``grade_submission`` is the job: a top-level function of plain arguments returning a
JSON-able dict, so a ``ThreadPoolExecutor``, a ``ProcessPoolExecutor`` or a Dask
``Client.get_executor()`` can run it. Per student it walks :data:`STAGES` once, in order,
each stage handing the :class:`Submission` on to the next:

1. **intake** checks and stages the submission (:mod:`intake`): a broken one is "not
   graded: <reason>" and the walk ends there, for that student only;
2. **feedback run and verdicts**: every notebook's, at once, in sandboxes (:mod:`prepare`),
   in parallel with the other jobs: no gradebook access. In a class (``grade_class``) the
   walk pauses here, and the batch is recorded and reported in one nbgrader run;
3. **record** runs ``nbgrader autograde --student S`` on the staged copy, with the prepared
   results, so nbgrader writes the gradebook, the autograded notebook and what feedback and
   export use. This step never runs learner code and takes a few seconds;
4. **report** reads the scores back (with lateness and the first cell that lost points) and
   removes the staged copy.

Gradebook writes under concurrency: nbgrader opens its own database session per process.
With SQLite, step 3 holds an exclusive ``flock`` on ``<gradebook>.cudacourse-lock`` (one
writer at a time; SQLite would otherwise answer "database is locked"), and is retried on
that error. That lock works for workers on one host; workers on several hosts need a
server database (PostgreSQL), for which no lock is taken.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import Executor, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterator

import nbformat

from . import course, intake, prepare
from . import sandbox as sbx
from .safefs import T

DEFAULT_OPTIONS: dict[str, Any] = {
    **prepare.DEFAULTS,
    "db_url": None,  # default: the config's CourseDirectory.db_url, else <course>/gradebook.db
    "work_dir": None,  # default: <course>/.cudacourse-grading/<assignment>
    "submitted_dir": "submitted",
    "source_dir": "solutions",
    "nbgrader_timeout": 600,  # seconds one student's record may take (its own nbgrader run)
    "record_each": 20,  # seconds per student a batch record run may add to that
    "keep_work": False,
    "batch_nbgrader": True,  # grade_class: one nbgrader run for all prepared students
    "deadlines": {},  # stage name -> seconds; the rest from stage_deadlines()
}


def stage_deadlines(o: dict[str, Any]) -> dict[str, float]:
    """Seconds each stage of one submission may take (``o["deadlines"]`` overrides): past
    it, the submission is "not graded: <stage> took longer than N s" and the class goes on.
    The sandbox's own timeouts end a run first; these are the backstop for everything else
    (a notebook that takes minutes to parse, an nbgrader that hangs)."""
    cell, whole = float(o.get("timeout") or 120), float(o.get("notebook_timeout") or 900)
    out = {"intake": 120.0,
           # the feedback run (whole) and the verdicts (a cell's timeout each) run at once
           "feedback run and verdicts": whole + 20 * cell + 120,
           "record": float(o.get("nbgrader_timeout") or 600),
           "report": 120.0}
    out.update({k: float(v) for k, v in (o.get("deadlines") or {}).items()})
    return out


def _opts(course_root: str, assignment: str, options: dict[str, Any] | None) -> dict[str, Any]:
    o = {**DEFAULT_OPTIONS, **(options or {})}
    root = Path(course_root).resolve()
    # --db, else the course's CourseDirectory.db_url (a PostgreSQL server), else gradebook.db
    o["db_url"] = o["db_url"] or course.default_db(root)
    o["work_dir"] = str(Path(o["work_dir"] or root / ".cudacourse-grading" / assignment))
    exchange = exchange_root(root)
    if exchange:  # other students' inbound copies: never visible in a sandbox
        sb = dict(o.get("sandbox") or {})
        sb["hide"] = sorted({*sb.get("hide", []), exchange})
        o["sandbox"] = sb
    return o


def exchange_root(course_root: str | os.PathLike) -> str | None:
    """``c.Exchange.root`` from the course's nbgrader_config.py, when it sets one (nbgrader's
    default, /srv/nbgrader/exchange, is hidden by the sandbox anyway)."""
    root = Path(course_root)
    if not (root / "nbgrader_config.py").exists():
        return None
    from .policy import load_config

    try:
        found = load_config(root).get("Exchange", {}).get("root")
    except Exception:  # noqa: BLE001 - a broken config: nbgrader itself will say why
        return None
    return str(Path(root, found).resolve()) if isinstance(found, str) and found else None


@contextlib.contextmanager
def gradebook_lock(db_url: str) -> Iterator[None]:
    """One gradebook writer at a time for SQLite (threads and processes of one host)."""
    if not db_url.startswith("sqlite:///"):
        yield
        return
    path = db_url[len("sqlite:///"):] + ".cudacourse-lock"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def nbgrader(course_root: str, *args: str, db: str | None = None,
             timeout: int = 600) -> subprocess.CompletedProcess:
    # The gradebook URL in the environment, never in argv (`ps` shows argv to every user).
    env = {**os.environ, **course.db_env(course_root, db)}
    # nbgrader runs `alembic` as a subprocess: this environment's bin/ must be on PATH.
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["CUDACOURSE_REQUIRE_GRADER"] = "1"  # nbgrader_config.py: no stock Execute fallback
    if env.get("PYTHONPATH"):  # it runs in the course root: relative entries would move
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) for p in
                                            env["PYTHONPATH"].split(os.pathsep) if p)
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course_root, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _last_error(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "[ERROR]" in ln or "Error" in ln or "error" in ln:
            return ln[-300:]
    return lines[-1][-300:] if lines else "no message"


def _scores(db_url: str, assignment: str, student: str) -> tuple[dict, dict]:
    from nbgrader.api import Gradebook, MissingEntry

    scores, max_scores = {}, {}
    with Gradebook(db_url) as gb:
        try:
            sub = gb.find_submission(assignment, student)
        except MissingEntry:
            return scores, max_scores
        for nb in sub.notebooks:
            for g in nb.grades:
                key = g.name if len(sub.notebooks) == 1 else f"{nb.name}:{g.name}"
                scores[key] = g.score
                max_scores[key] = g.max_score
    return scores, max_scores


def mark_not_graded(course_root: str, assignment: str, student: str, reason: str,
                    db_url: str) -> None:
    """No stale result may pass for this run's: remove earlier autograded files and the
    gradebook submission (formgrader then shows "No Submission"; the status CSV and a
    NOT_GRADED note in the feedback folder give the reason)."""
    root = Path(course_root)
    for name in (student, assignment):  # a path that climbs is written nowhere
        if not name or name in (".", "..") or "/" in name or "\0" in name:
            raise ValueError(f"not a student or assignment name: {name!r}")
    for step in ("autograded", "feedback"):
        d = root / step / student / assignment
        if d.exists():
            shutil.rmtree(d, ignore_errors=True)
    fb = root / "feedback" / student / assignment
    fb.mkdir(parents=True, exist_ok=True)
    from html import escape

    from . import untrusted

    # the reason may quote the submission (any Unicode) or an error naming the gradebook
    reason = untrusted.line(untrusted.redact(reason, untrusted.secrets_of(db_url)))
    (fb / "NOT_GRADED.txt").write_text(f"{assignment}: not graded: {reason}\n",
                                       encoding="utf-8")
    (fb / "NOT_GRADED.html").write_text(
        f"<!doctype html><meta charset='utf-8'><title>{escape(assignment)}: not graded"
        f"</title><h1>{escape(assignment)}: not graded</h1><p>{escape(reason)}</p>"
        "<p>Ask your instructor; nothing was scored, this is not a zero.</p>\n",
        encoding="utf-8")
    from nbgrader.api import Gradebook, MissingEntry

    with gradebook_lock(db_url), Gradebook(db_url) as gb:
        gb.update_or_create_student(student)
        try:
            gb.remove_submission(assignment, student)
        except MissingEntry:
            pass


class Submission:
    """One student's submission on its walk through the stages: what each stage hands to
    the next (the options, the staged copy intake made, the result so far)."""

    def __init__(self, course_root: str, assignment: str, student: str,
                 options: dict[str, Any]) -> None:
        self.start = time.monotonic()
        self.o = _opts(course_root, assignment, options)
        self.root = str(Path(course_root).resolve())
        self.assignment, self.student = assignment, student
        self.work = Path(self.o["work_dir"])
        self.staged: intake.Staged | None = None  # intake's result
        self.cancelled = threading.Event()  # set when a stage ran out of time
        self.out: dict[str, Any] = {
            "student": student, "assignment": assignment, "status": "graded", "reason": None,
            "scores": {}, "max_scores": {}, "incidents": [], "isolation": [], "seconds": 0.0}

    def not_graded(self, reason: str) -> dict[str, Any]:
        """End the walk here: "not graded: <reason>", said in the gradebook too; nothing of
        it stays staged (a batch record run would otherwise take it up again)."""
        self.out.update(status="not_graded", reason=reason, scores={}, max_scores={})
        for part in ("staged", "results"):
            shutil.rmtree(self.work / part / self.student, ignore_errors=True)
        try:
            mark_not_graded(self.root, self.assignment, self.student, reason, self.o["db_url"])
        except Exception as exc:  # noqa: BLE001 - the reason still reaches the summary
            self.out["incidents"].append(
                f"could not record 'not graded' in the gradebook: {exc}")
        return self.stop()

    def stop(self) -> dict[str, Any]:
        self.out["seconds"] = round(time.monotonic() - self.start, 2)
        return self.out


# Each stage takes the submission from the one before it and returns None to hand it on, or
# the job's result where the walk ends (a "not graded", a batch that records later, or the
# report, which always ends it).

def _intake(sub: Submission) -> dict[str, Any] | None:
    """Check and stage the submission: a broken one is "not graded: <reason>"."""
    try:
        sub.staged = intake.stage(Path(sub.root), sub.assignment, sub.student,
                                  sub.work / "staged", submitted_dir=sub.o["submitted_dir"],
                                  source_dir=sub.o["source_dir"],
                                  cancelled=sub.cancelled.is_set)
    except intake.NotGraded as exc:
        return sub.not_graded(str(exc))
    except (RecursionError, MemoryError) as exc:  # whatever it holds, it cannot be read
        return sub.not_graded(T("intake could not read it ({error})",
                                error=type(exc).__name__))
    sub.out["incidents"] += sub.staged.problems
    return None


def _feedback_run_and_verdicts(sub: Submission) -> dict[str, Any] | None:
    """Per notebook, the feedback run and the verdicts at once, in sandboxes
    (:func:`prepare.prepare`); their results saved for the record stage."""
    o, results = sub.o, sub.work / "results"
    try:
        for name, path in sub.staged.notebooks.items():
            master = nbformat.read(Path(sub.root) / o["source_dir"] / sub.assignment
                                   / f"{name}.ipynb", as_version=4)
            prepared = prepare.prepare(
                nbformat.read(path, as_version=4), master, course_root=sub.root, options=o,
                db_url=o["db_url"],
                who={"student": sub.student, "assignment": sub.assignment, "notebook": name})
            dest = results / sub.student / sub.assignment / f"{name}.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            # intake's incidents (a restored answer cell's metadata...) reach the notebook's
            # Grading note too, where a grader reads them (autograde.ResilientExecute)
            dest.write_text(json.dumps({**prepared, "intake": list(sub.staged.problems)}))
            sub.out["incidents"] += [f"{name}: {i}" for i in prepared["incidents"]]
            sub.out["isolation"] = sorted(set(sub.out["isolation"]) | set(prepared["isolation"]))
    except sbx.OverBudget as exc:  # all its processes together went past the budget
        return sub.not_graded(str(exc))
    except Exception as exc:  # noqa: BLE001 - e.g. the sandbox refused (--require-sandbox)
        return sub.not_graded(f"the grader could not run it: {type(exc).__name__}: {exc}")
    if o.get("defer_nbgrader"):
        sub.out["status"] = "prepared"  # grade_class records and reports for the batch
        return sub.stop()
    return None


def _record(sub: Submission) -> dict[str, Any] | None:
    """``nbgrader autograde`` writes the gradebook from the saved results."""
    failed = autograde(sub.root, sub.assignment, [sub.student], sub.o).get(sub.student)
    return sub.not_graded(failed) if failed else None


def _report(sub: Submission) -> dict[str, Any]:
    """The scores, lateness and first lost cell read back; the staged copy removed."""
    return finish(sub.out, sub.o, sub.start, sub.root)


# The walk of one submission, in order; grade_submission visits each stage once.
STAGES: tuple[tuple[str, Callable[[Submission], dict[str, Any] | None]], ...] = (
    ("intake", _intake),
    ("feedback run and verdicts", _feedback_run_and_verdicts),
    ("record", _record),
    ("report", _report),
)


def grade_submission(course_root: str, assignment: str, student: str,
                     options: dict[str, Any]) -> dict[str, Any]:
    """Grade one student's submission (the :data:`STAGES`, each once, in order, each within
    its deadline, :func:`stage_deadlines`); never raises for anything the student did, and
    every way it ends is recorded (a "not graded" with its note, or the scores)."""
    sub = Submission(course_root, assignment, student, options)
    deadlines = stage_deadlines(sub.o)
    for name, stage in STAGES:
        result = _within(name, stage, sub, deadlines.get(name))
        if result is not None:  # the walk ends here (report, the last, always ends it)
            break
    return result


def took_longer(stage: str, seconds: float) -> str:
    """The reason of a stage past its deadline: "record took longer than 600 s"."""
    n = "{:g}".format(seconds)
    return T("{stage} took longer than {n} s", stage=stage, n=n)


def _within(name: str, stage: Callable[[Submission], dict[str, Any] | None],
            sub: Submission, seconds: float | None) -> dict[str, Any] | None:
    """``stage(sub)`` in a thread of its own, waited for ``seconds`` at most. Past that, or
    when it raises, the submission is "not graded" now; the late thread finds ``cancelled``
    set and writes nothing more (intake checks it), and what it staged is removed."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = stage(sub)
        except BaseException as exc:  # noqa: BLE001 - reported below, for this student only
            box["error"] = exc

    worker = threading.Thread(target=run, name=f"{name}: {sub.student}", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        sub.cancelled.set()
        for part in ("staged", "results"):
            shutil.rmtree(sub.work / part / sub.student, ignore_errors=True)
        return sub.not_graded(took_longer(name, seconds))
    if "error" in box:
        exc = box["error"]
        # the type only: an error's text may hold what a file of the submission holds
        return sub.not_graded(T("{stage} failed: {error}", stage=name,
                                error=type(exc).__name__))
    return box.get("result")


def finish(out: dict[str, Any], o: dict[str, Any], start: float | None = None,
           root: str | None = None) -> dict[str, Any]:
    """Scores from the gradebook (with lateness, and the first cell that lost points, when
    ``root`` is given); the staged copy and prepared results removed."""
    out["status"] = "graded"
    out["scores"], out["max_scores"] = _scores(o["db_url"], out["assignment"], out["student"])
    if root is not None:
        out.update(_late_and_lost(root, out["assignment"], out["student"], o["db_url"]))
    work = Path(o["work_dir"])
    if not o["keep_work"]:
        shutil.rmtree(work / "staged" / out["student"], ignore_errors=True)
        shutil.rmtree(work / "results" / out["student"], ignore_errors=True)
    if start is not None:
        out["seconds"] = round(time.monotonic() - start, 2)
    return out


def _late_and_lost(root: str, assignment: str, student: str, db_url: str) -> dict[str, Any]:
    from . import feedbackview, policy

    try:
        late = policy.lateness(db_url, assignment, student, policy.policy_of(root)[1])
    except Exception as exc:  # noqa: BLE001 - a table without the late column, not a crash
        late = {"error": f"{type(exc).__name__}: {exc}"}
    return {"late": late, "lost": feedbackview.first_lost(
        Path(root) / "autograded" / student / assignment)}


def autograde(root: str, assignment: str, students: list[str],
              o: dict[str, Any]) -> dict[str, str]:
    """``nbgrader autograde`` on the staged copies of ``students`` with their prepared
    results (no learner code runs here). Returns {student: reason} for those it failed."""
    work = Path(o["work_dir"])
    args = ["autograde", assignment, "--force",
            f"--CourseDirectory.submitted_directory={work / 'staged'}",
            f"--ResilientExecute.results_dir={work / 'results'}",
            f"--ResilientExecute.output_cap={o['output_cap']}"]
    if len(students) == 1:
        args.append(f"--student={students[0]}")
    for s in students:  # a stale result must not pass for this run's
        shutil.rmtree(Path(root) / "autograded" / s / assignment, ignore_errors=True)
    proc = None
    # one student: its own deadline; a batch: that plus a little per student, so that one
    # slow submission costs the batch minutes, not hours, before each is recorded alone
    limit = o["nbgrader_timeout"] + (o.get("record_each", 20) * len(students)
                                     if len(students) > 1 else 0)
    for attempt in range(4):
        try:
            with gradebook_lock(o["db_url"]):
                proc = nbgrader(root, *args, db=o["db_url"], timeout=limit)
        except subprocess.TimeoutExpired:
            why = took_longer("record", limit)
            # those the run finished before it was stopped are recorded (nbgrader writes the
            # gradebook before the autograded notebook); the others are retried alone
            return {s: why for s in students
                    if len(students) == 1 or not _recorded(root, assignment, s, o)}
        if "database is locked" not in proc.stderr:
            break
        time.sleep(1 + attempt)
    failed = {}
    for s in students:
        if not _recorded(root, assignment, s, o) or (len(students) == 1 and
                                                     proc.returncode != 0):
            failed[s] = f"nbgrader autograde failed: {_last_error(proc.stderr)}"
    return failed


def _recorded(root: str, assignment: str, student: str, o: dict[str, Any]) -> bool:
    """Whether every notebook of ``student`` was autograded whole (a readable notebook)."""
    try:
        masters = intake.master_notebooks(Path(root), o["source_dir"], assignment)
    except OSError:
        return False
    for m in masters:
        path = Path(root) / "autograded" / student / assignment / f"{m}.ipynb"
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
    return True


def _finish_batch(root: str, assignment: str, prepared: list[dict[str, Any]],
                  o: dict[str, Any], say: Any) -> None:
    """One nbgrader run for every prepared student; any it failed gets a run of its own,
    and is "not graded" only if that fails too."""
    say(f"cudacourse grade: recording {len(prepared)} submission(s) with nbgrader")
    failed = autograde(root, assignment, [r["student"] for r in prepared], o)
    for r in prepared:
        reason = failed.get(r["student"])
        if reason and len(prepared) > 1:
            reason = autograde(root, assignment, [r["student"]], o).get(r["student"])
        if not reason:
            try:
                finish(r, o, root=root)
            except Exception as exc:  # noqa: BLE001 - this student only; the class goes on
                reason = T("{stage} failed: {error}", stage="report", error=type(exc).__name__)
        if reason:
            r.update(status="not_graded", reason=reason, scores={}, max_scores={})
            try:
                mark_not_graded(root, assignment, r["student"], reason, o["db_url"])
            except Exception as exc:  # noqa: BLE001 - the summary still gives the reason
                r.setdefault("incidents", []).append(
                    f"could not record 'not graded' in the gradebook: {type(exc).__name__}")
            say(f"cudacourse-grading: {r['student']}/{assignment}: not graded: {reason}")
        for inc in r.get("incidents", []):
            say(f"cudacourse-grading: {r['student']}/{assignment}: {inc}")


def students_of(course_root: str, assignment: str, submitted_dir: str = "submitted") -> list[str]:
    """Every entry of ``submitted/`` that holds ``assignment``, by ``lstat`` alone: a student
    entry that is a link (or anything but a real folder) is listed too, so that intake says
    why it is not graded; nothing is followed."""
    from . import safefs

    d = Path(course_root) / submitted_dir
    if not d.is_dir():
        return []
    out = []
    with safefs.Folder.at(d) as top:
        for e in top.entries():
            if e.name.startswith("."):
                continue
            if e.kind != "folder" or safefs.name_problem(e.name):
                out.append(e.name)  # intake refuses it, with the reason
                continue
            try:
                with top.folder(e.name) as student:
                    if student.entry(assignment) is not None:
                        out.append(e.name)
            except (safefs.Refused, OSError):
                out.append(e.name)
    return sorted(out)


def grade_class(course_root: str, assignment: str, *, students: list[str] | None = None,
                executor: Executor | None = None, workers: int | None = None,
                options: dict[str, Any] | None = None, progress: bool = True,
                log: Any = None, executor_name: str | None = None) -> dict[str, Any]:
    """Grade every student (or ``students``); returns the run (see :mod:`runrecord`).
    ``workers``: default one per CPU core; jobs take the GPUs in turn where there are
    several. ``executor_name`` describes ``executor`` in the run record."""
    from . import provenance, runrecord, sandbox, untrusted

    workers = workers or course.default_workers()
    gpus = course.gpu_count()
    o = _opts(course_root, assignment, options)
    root = str(Path(course_root).resolve())
    students = students or students_of(root, assignment, o["submitted_dir"])
    if not students:
        raise FileNotFoundError(f"no submissions of {assignment} under "
                                f"{Path(root) / o['submitted_dir']}")
    sb = sandbox.Sandbox.from_dict(o.get("sandbox"))
    ok, why = sandbox.isolation(sb, root)
    if not ok and (sb.require or sb.mode == "bwrap"):
        raise sandbox.SandboxRefused(f"sandbox required but not available: {why}")
    run: dict[str, Any] = {"assignment": assignment, "course_root": root,
                           "isolation": "bwrap" if ok else f"NOT isolated: {why}",
                           "privileges": sandbox.privilege_note(ok),
                           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "options": {k: v for k, v in o.items() if k != "sandbox"},
                           "workers": getattr(executor, "_max_workers", None) or workers,
                           "gpus": gpus,
                           "executor": executor_name or (
                               f"{workers} thread(s) in this process" if executor is None
                               else getattr(executor, "description", None) or
                               f"{type(executor).__module__}.{type(executor).__qualname__}"),
                           "results": []}
    shown = log or (lambda line: print(line, file=sys.stderr, flush=True))
    secrets = untrusted.secrets_of(o.get("db_url"))

    def say(line: str) -> None:  # lines quote submissions: one clean line, no password
        shown(untrusted.line(untrusted.redact(line, secrets)))

    on_gpus = f" and {gpus} GPUs" if gpus > 1 else ""
    say(f"cudacourse grade: {assignment}, {len(students)} submission(s) on {run['executor']}"
        f"{on_gpus}, {run['isolation']}"
        f"{'; ' + run['privileges'] if run['privileges'] else ''}")
    start = time.monotonic()
    own = executor is None
    pool = executor or ThreadPoolExecutor(max_workers=max(1, workers))
    bar = None
    if progress:
        try:
            from tqdm import tqdm

            bar = tqdm(total=len(students), desc=f"grading {assignment}", unit="student",
                       file=sys.stderr)
        except ImportError:
            bar = None
    work = Path(o["work_dir"])
    for sub in ("staged", "results"):  # only this run's students are staged
        shutil.rmtree(work / sub, ignore_errors=True)
    jo = {**o, "defer_nbgrader": o.get("batch_nbgrader", True)}
    try:
        futures = {pool.submit(grade_submission, root, assignment, s,
                               {**jo, "gpu_index": i % gpus} if gpus > 1 else jo): s
                   for i, s in enumerate(students)}
        for fut in as_completed(futures):
            student = futures[fut]
            try:
                res = fut.result()
            except Exception as exc:  # noqa: BLE001 - a worker died: this student only
                res = {"student": student, "assignment": assignment, "status": "not_graded",
                       "reason": T("the grading job failed: {error}",
                                   error=type(exc).__name__),
                       "scores": {}, "max_scores": {}, "incidents": [], "seconds": 0.0}
                try:  # no earlier score may stand for it
                    mark_not_graded(root, assignment, student, res["reason"], o["db_url"])
                except Exception as mark_exc:  # noqa: BLE001 - the summary still says it
                    res["incidents"].append(f"could not record 'not graded': {mark_exc}")
            run["results"].append(res)
            if res["status"] == "prepared":
                if bar is not None:
                    bar.update(1)
                continue
            if res["status"] != "graded":
                say(f"cudacourse-grading: {student}/{assignment}: not graded: {res['reason']}")
            for inc in res.get("incidents", []):
                say(f"cudacourse-grading: {student}/{assignment}: {inc}")
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if own:
            pool.shutdown(wait=True)
    prepared = [r for r in run["results"] if r["status"] == "prepared"]
    if prepared:
        _finish_batch(root, assignment, prepared, o, say)
    run["results"].sort(key=lambda r: r["student"])
    run["seconds"] = round(time.monotonic() - start, 2)
    run["provenance"] = provenance.stamp(root, assignment)  # what graded: versions, hashes
    runrecord.write(run, Path(root) / "grading" / assignment)
    return run


__all__ = ["grade_submission", "grade_class", "students_of", "gradebook_lock",
           "mark_not_graded", "stage_deadlines", "DEFAULT_OPTIONS"]
