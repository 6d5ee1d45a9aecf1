"""Grading a class on many workers: a process pool on one machine, or Dask across machines.

A grading job is one submission: ``job(course_root, assignment, student, options) -> dict``,
a module-level function (so it pickles by reference) that grades one learner's submission in
its own processes and writes the result to the gradebook. Whatever runs it only has to be a
``concurrent.futures.Executor``:

* ``--workers N`` (the grader's option): a ``ProcessPoolExecutor`` on this machine;
* ``--local-cluster N``: a real Dask ``distributed.LocalCluster`` of N worker processes (one
  thread each: a grading job is a whole notebook run, not a small task);
* ``--scheduler tcp://host:8786``: an existing Dask scheduler, whose workers may be on other
  machines (a Slurm job array of ``dask worker`` processes, say; see docs/class-scale.md).

Dask's ``Client.get_executor()`` is a ``concurrent.futures.Executor`` whose futures are
ordinary ``concurrent.futures.Future`` objects, so :func:`grade_all` drives every case the
same way (submit everything, collect with ``as_completed``) and measures throughput.

Across machines, every worker needs this environment installed, and the course directory and
the gradebook reachable at the same paths: a shared filesystem for the course, and a
database server (PostgreSQL, the ``postgres`` extra) for the gradebook, because SQLite locks
the whole file for every write.

The job used when none is given is :func:`default_job`: the isolated grader's
``runner.grade_submission`` (this package) when it is installed, else
:func:`autograde_one`, which runs ``nbgrader autograde --student S`` in a child process.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import contextlib
import json
import os
import socket
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .course import (default_db, default_workers, gpu_count, nbgrader,  # noqa: F401 - kept
                     nbgrader_env)  # importable from here, as before

Job = Callable[[str, str, str, dict], dict]

# How many output lines of a failed job to keep for the instructor.
LOG_TAIL_LINES = 40


class GradingSetupError(RuntimeError):
    """The course, the gradebook or the executor is not ready for grading."""


# --- the jobs ------------------------------------------------------------------------------

def autograde_one(course_root: str, assignment: str, student: str,
                  options: dict | None = None) -> dict:
    """Grade one submission with ``nbgrader autograde --student`` (a child process).

    ``options``: ``db`` (SQLAlchemy URL; default the course's gradebook.db), ``timeout``
    (per-cell seconds, ``ResilientExecute.timeout``), ``max_restarts``, ``extra`` (more
    nbgrader arguments), ``job_timeout`` (seconds for the whole child; default 30 min).
    Never raises for a bad submission: the result says what happened.
    """
    options = dict(options or {})
    db = options.get("db") or options.get("db_url") or default_db(course_root)
    args = ["autograde", assignment, "--student", student, "--force"]
    if options.get("timeout"):
        args.append(f"--ResilientExecute.timeout={int(options['timeout'])}")
    if options.get("max_restarts") is not None:
        args.append(f"--ResilientExecute.max_restarts={int(options['max_restarts'])}")
    args += [str(a) for a in options.get("extra", ())]
    start = time.monotonic()
    try:
        proc = nbgrader(course_root, *args, db=db, timeout=options.get("job_timeout", 1800))
        rc, log = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = -1
        log = (_text(exc.stdout) + _text(exc.stderr) +
               f"\ngrading job killed after {exc.timeout} s")
    seconds = time.monotonic() - start
    ok = rc == 0 and "Removing failed assignment" not in log
    result: dict[str, Any] = {
        "student": student, "assignment": assignment, "ok": ok, "returncode": rc,
        "seconds": seconds, "host": socket.gethostname(), "pid": os.getpid(),
        "incidents": _incidents(Path(course_root), assignment, student),
        "errors": [line for line in log.splitlines()
                   if "| ERROR]" in line or "Traceback" in line][:LOG_TAIL_LINES],
    }
    if not ok:
        result["log_tail"] = "\n".join(log.splitlines()[-LOG_TAIL_LINES:])
    return result


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _incidents(course_root: Path, assignment: str, student: str) -> list[dict]:
    """What cudacourse.grader.autograde recorded in <notebook>.grading.json files (hangs, crashes)."""
    out: list[dict] = []
    for path in sorted((course_root / "autograded" / student / assignment).glob(
            "*.grading.json")):
        try:
            out += json.loads(path.read_text()).get("incidents", [])
        except (OSError, ValueError):
            out.append({"cell": "-", "kind": "unreadable", "what": str(path)})
    return out


def default_job() -> Job:
    """The isolated grader's per-submission job when installed, else :func:`autograde_one`."""
    try:
        from .runner import grade_submission  # type: ignore[attr-defined]
    except ImportError:
        return autograde_one
    return grade_submission


def timed_call(job: Job, course_root: str, assignment: str, student: str,
               options: dict) -> dict:
    """Run ``job`` and add where and how long it ran (measured on the worker)."""
    start = time.monotonic()
    try:
        result = dict(job(course_root, assignment, student, options) or {})
    except Exception as exc:  # noqa: BLE001 - one broken job must not stop the class
        result = {"student": student, "assignment": assignment, "ok": False,
                  "error": f"{type(exc).__name__}: {exc}"}
    result.setdefault("student", student)
    # the isolated grader's job says "status": "graded" / "not_graded"
    result.setdefault("ok", result.get("status", "graded") == "graded")
    result["worker_seconds"] = time.monotonic() - start
    result.setdefault("host", socket.gethostname())
    result.setdefault("pid", os.getpid())
    return result


# --- what to grade -------------------------------------------------------------------------

def submitted_students(course_root: str | os.PathLike, assignment: str) -> list[str]:
    """Students with a submission of ``assignment`` in submitted/, sorted."""
    base = Path(course_root) / "submitted"
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / assignment).is_dir())


def shard(students: Sequence[str], index: int, count: int) -> list[str]:
    """The ``index``-th of ``count`` interleaved slices (a Slurm array task's share)."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard {index} of {count}: need 0 <= index < count")
    return list(students[index::count])


# --- executors -----------------------------------------------------------------------------

@dataclass
class ExecutorChoice:
    """How to run the jobs: ``kind`` is 'serial', 'processes', 'local-cluster' or 'dask'."""

    kind: str = "serial"
    workers: int = 1
    scheduler: str | None = None
    connect_timeout: float = 30.0  # seconds to reach a scheduler

    def describe(self) -> str:
        if self.kind == "dask":
            return f"Dask scheduler {self.scheduler}"
        if self.kind == "local-cluster":
            return f"Dask LocalCluster of {self.workers} worker process(es)"
        if self.kind == "processes":
            return f"{self.workers} worker process(es) on this machine"
        return "one job at a time in this process"


class _SerialExecutor(cf.Executor):
    """Runs each job at once, in this process (``--workers 1``)."""

    def submit(self, fn, /, *args, **kwargs):
        future: cf.Future = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller via the future
            future.set_exception(exc)
        return future


@contextlib.contextmanager
def open_executor(choice: ExecutorChoice) -> Iterator[tuple[cf.Executor, str]]:
    """An executor for ``choice`` and a line describing it (workers and their addresses)."""
    if choice.kind == "serial":
        yield _SerialExecutor(), choice.describe()
        return
    if choice.kind == "processes":
        with cf.ProcessPoolExecutor(max_workers=choice.workers) as pool:
            yield pool, choice.describe()
        return
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - distributed is a pinned dependency
        raise GradingSetupError(f"Dask distributed is not installed ({exc}); "
                                "pip install the course's pinned environment") from exc
    if choice.kind == "local-cluster":
        # One thread per worker process: a job is a whole notebook run in child processes.
        cluster = LocalCluster(n_workers=choice.workers, threads_per_worker=1,
                               processes=True, dashboard_address=None)
        with cluster, Client(cluster) as client:
            yield client.get_executor(pure=False), (
                f"{choice.describe()} (scheduler {cluster.scheduler_address})")
        return
    if choice.kind == "dask":
        try:
            client = Client(choice.scheduler, timeout=f"{choice.connect_timeout}s")
        except (OSError, TimeoutError) as exc:
            raise GradingSetupError(f"cannot reach the Dask scheduler at {choice.scheduler}: "
                                    f"{exc}") from exc
        with client:
            workers = client.scheduler_info().get("workers", {})
            if not workers:
                raise GradingSetupError(f"the Dask scheduler at {choice.scheduler} has no "
                                        "workers; start some with `dask worker "
                                        f"{choice.scheduler}`")
            # pure=False: a regrade of the same student must run again, not reuse a result.
            yield client.get_executor(pure=False), (
                f"{choice.describe()} with {len(workers)} worker(s)")
        return
    raise ValueError(f"unknown executor kind {choice.kind!r}")


class DaskExecutor(cf.Executor):
    """A Dask executor that owns its client (and cluster): ``shutdown`` closes them.

    For callers that take a bare ``concurrent.futures.Executor`` and shut it down when done,
    such as ``cudacourse grade --executor MODULE:FACTORY --workers N`` (see
    :func:`local_cluster` and :func:`scheduler`).
    """

    def __init__(self, choice: ExecutorChoice) -> None:
        self.choice = choice
        self._context = open_executor(choice)
        self._inner, self.description = self._context.__enter__()

    def submit(self, fn, /, *args, **kwargs):
        return self._inner.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if self._context is not None:
            context, self._context = self._context, None
            self._inner.shutdown(wait=wait)
            context.__exit__(None, None, None)


def local_cluster(workers: int) -> DaskExecutor:
    """``--executor cudacourse.grader.distributed:local_cluster``: a LocalCluster of N."""
    return DaskExecutor(ExecutorChoice("local-cluster", workers=max(1, int(workers))))


def scheduler(workers: int = 0) -> DaskExecutor:
    """``--executor cudacourse.grader.distributed:scheduler``: the Dask scheduler named by
    ``CUDACOURSE_DASK_SCHEDULER`` (tcp://host:8786); its own workers, whatever N is."""
    address = os.environ.get("CUDACOURSE_DASK_SCHEDULER", "")
    if "://" not in address:
        raise GradingSetupError("set CUDACOURSE_DASK_SCHEDULER=tcp://host:8786 (the Dask "
                                f"scheduler to grade on); got {address!r}")
    return DaskExecutor(ExecutorChoice("dask", scheduler=address))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--local-cluster N`` and ``--scheduler ADDRESS`` (``--workers N`` is the grader's)."""
    group = parser.add_argument_group("grading across machines (Dask distributed)")
    group.add_argument("--local-cluster", type=int, metavar="N", default=None,
                       help="grade on a Dask LocalCluster of N worker processes")
    group.add_argument("--scheduler", metavar="tcp://HOST:PORT", default=None,
                       help="grade on the workers of this running Dask scheduler")


def choice_from_args(args: argparse.Namespace) -> ExecutorChoice:
    """The executor asked for by ``--workers``, ``--local-cluster`` or ``--scheduler``."""
    workers = getattr(args, "workers", None)
    local = getattr(args, "local_cluster", None)
    scheduler = getattr(args, "scheduler", None)
    asked = [name for name, value in (("--workers", workers and workers > 1),
                                      ("--local-cluster", local), ("--scheduler", scheduler))
             if value]
    if len(asked) > 1:
        raise GradingSetupError(f"choose one of {', '.join(asked)}")
    if scheduler:
        if "://" not in scheduler:
            raise GradingSetupError(f"--scheduler {scheduler!r}: give an address such as "
                                    "tcp://host:8786")
        return ExecutorChoice("dask", scheduler=scheduler)
    if local is not None:
        if local < 1:
            raise GradingSetupError(f"--local-cluster {local}: need at least one worker")
        return ExecutorChoice("local-cluster", workers=local)
    if workers and workers > 1:
        return ExecutorChoice("processes", workers=workers)
    return ExecutorChoice("serial")


# --- running a class -----------------------------------------------------------------------

@dataclass
class Throughput:
    """How fast a class was graded. ``seconds``: per submission, measured on the worker."""

    submissions: int
    wall_seconds: float
    seconds: dict[str, float] = field(default_factory=dict)
    executor: str = ""

    @property
    def per_minute(self) -> float:
        return 60.0 * self.submissions / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def slowest(self, n: int = 5) -> list[tuple[str, float]]:
        return sorted(self.seconds.items(), key=lambda kv: -kv[1])[:n]

    def summary(self) -> str:
        if not self.submissions:
            return "no submissions graded"
        per = list(self.seconds.values())
        slow = ", ".join(f"{s} {t:.1f} s" for s, t in self.slowest(3))
        return (f"{self.submissions} submission(s) in {self.wall_seconds:.1f} s on "
                f"{self.executor}: {self.per_minute:.1f} per minute; per submission "
                f"median {statistics.median(per):.1f} s, mean {statistics.fmean(per):.1f} s, "
                f"slowest {slow}")

    def as_dict(self) -> dict:
        return {"submissions": self.submissions, "wall_seconds": self.wall_seconds,
                "per_minute": self.per_minute, "executor": self.executor,
                "seconds": self.seconds, "slowest": self.slowest(5)}


def grade_all(course_root: str | os.PathLike, assignment: str, students: Iterable[str],
              executor: cf.Executor, options: dict | None = None, job: Job | None = None,
              describe: str = "", on_result: Callable[[dict], None] | None = None,
              ) -> tuple[list[dict], Throughput]:
    """Grade every student's submission on ``executor``; results in completion order.

    Every job is submitted at once (the executor queues them on its workers); a job that
    raises becomes a result with ``ok: False`` and an ``error``, and the others go on.
    """
    root = str(Path(course_root).resolve())
    job = job or default_job()
    options = dict(options or {})
    # The same gradebook under either job's name for it.
    db = options.get("db") or options.get("db_url")
    if db:
        options["db"] = options["db_url"] = db
    students = list(students)
    start = time.monotonic()
    futures = {executor.submit(timed_call, job, root, assignment, s, options): s
               for s in students}
    results: list[dict] = []
    for future in cf.as_completed(futures):
        student = futures[future]
        try:
            result = future.result()
        except Exception as exc:  # noqa: BLE001 - a worker lost, a pickling error...
            result = {"student": student, "assignment": assignment, "ok": False,
                      "error": f"{type(exc).__name__}: {exc}", "worker_seconds": 0.0}
        results.append(result)
        if on_result is not None:
            on_result(result)
    wall = time.monotonic() - start
    seconds = {r["student"]: float(r.get("worker_seconds", 0.0)) for r in results}
    return results, Throughput(len(results), wall, seconds, describe)


__all__ = ["DaskExecutor", "ExecutorChoice", "GradingSetupError", "Throughput",
           "add_arguments", "autograde_one", "choice_from_args", "default_db", "default_job",
           "grade_all", "local_cluster", "nbgrader", "nbgrader_env", "open_executor",
           "scheduler", "shard", "submitted_students", "timed_call"]
