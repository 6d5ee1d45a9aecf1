"""The course being graded and the machine grading it, for every stage that needs them.

The course's gradebook (:func:`default_db`), nbgrader run in the course's directory with
this environment (:func:`nbgrader`, :func:`nbgrader_env`), and how many submissions and GPUs
this machine grades at once (:func:`default_workers`, :func:`gpu_count`). Below the runner,
the workers' layer (``distributed``) and the class report, which all use them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def default_workers() -> int:
    """Submissions graded at once by default: one per CPU core this process may use (a job
    is a handful of processes, the feedback run beside the verdicts, much of it waiting)."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, n)


def gpu_count() -> int:
    """GPUs the grading jobs can spread over (0 in the simulator). Each job's processes are
    given one of them (CUDA_VISIBLE_DEVICES) in turn when there are several."""
    from ..runtime import device

    # asked of the driver, not chosen: the grading process stays device-neutral
    policy = os.environ.get("CUDACOURSE_DEVICE", "auto").strip().lower()
    if policy == "sim" or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return 0
    info, _why = device.probe_gpu()
    return info.device_count if info else 0


def nbgrader_env() -> dict[str, str]:
    """The environment for an nbgrader child: this interpreter's bin/ first on PATH.

    nbgrader runs ``alembic`` by name when it opens a gradebook; without the environment's
    bin/ on PATH it fails with ``FileNotFoundError: 'alembic'``.
    """
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


# The gradebook URL reaches an nbgrader child in its environment, which the course's
# nbgrader_config.py reads into CourseDirectory.db_url: on a command line (``--db=URL``) its
# password would be in the process list for every user of the machine (/proc/PID/cmdline is
# world-readable; /proc/PID/environ only the owner's). Not a CUDACOURSE_ name: the sandbox
# passes those to learner code (sandbox.PASS_ENV_PREFIXES).
DB_ENV = "NBGRADER_DB_URL"


def db_env(course_root: str | os.PathLike, db: str | None) -> dict[str, str]:
    """``{DB_ENV: db}`` for an nbgrader child in ``course_root`` (empty without ``db``).

    A config that does not read the variable would silently grade into its own gradebook,
    so it is an error that says what to add.
    """
    if not db:
        return {}
    config = Path(course_root) / "nbgrader_config.py"
    if DB_ENV not in (config.read_text() if config.is_file() else ""):
        raise RuntimeError(
            f"{config} does not read the gradebook URL from ${DB_ENV} (cudacourse passes it "
            "there, never on a command line, where the process list would show its "
            "password): add at its end the lines that read it, as in the course's own "
            "nbgrader_config.py (docs/instructors.md)")
    return {DB_ENV: db}


def nbgrader(course_root: str | os.PathLike, *args: str, db: str | None = None,
             timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run ``nbgrader ARGS`` in the course directory with the gradebook ``db`` (passed in
    the environment, :data:`DB_ENV`); output captured."""
    cmd = [sys.executable, "-m", "nbgrader", *args]
    env = {**nbgrader_env(), **db_env(course_root, db)}
    return subprocess.run(cmd, cwd=str(course_root), env=env, capture_output=True,
                          text=True, timeout=timeout)


def default_db(course_root: str | os.PathLike) -> str:
    """The course's gradebook: ``c.CourseDirectory.db_url`` from its nbgrader_config.py when
    set (a PostgreSQL server, say), else nbgrader's default, gradebook.db in the root."""
    root = Path(course_root).resolve()
    url = None
    if (root / "nbgrader_config.py").exists():
        from .policy import load_config  # relative: this package also loads by path

        try:
            url = load_config(root).get("CourseDirectory", {}).get("db_url")
        except Exception:  # noqa: BLE001 - a broken config: nbgrader itself will say why
            url = None
    return str(url) if isinstance(url, str) and url else f"sqlite:///{root / 'gradebook.db'}"
