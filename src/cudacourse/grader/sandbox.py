"""Run one command on learner work, isolated by bubblewrap, or in a fallback that says it is not.

bubblewrap (``bwrap``, Debian/Ubuntu package ``bubblewrap``) is the tool: unprivileged, no
daemon, used by Flatpak. Per command it builds a fresh mount namespace that shows an
ALLOW-LIST, never the host's tree (:func:`bwrap_argv`):

* read-only: the system's programs and libraries (``/usr`` and its ``/bin``, ``/lib``
  links), the few files of ``/etc`` a program needs to start (:data:`ETC_FILES`), the
  Python environment (``sys.prefix``, ``sys.base_prefix``, its site-packages, ``PYTHONPATH``)
  and the course package; the course's own files a lesson reads (:data:`COURSE_RESOURCES`).
  Nothing else: no course root (masters, hidden tests, quiz keys, the gradebook, other
  submissions), no home folder, no exchange. A path to expose that holds one of those, or
  is named like one (``solutions``, ``tests``, ``lessons``, ...), is refused;
* writable, and sized (``--size``): ``/tmp`` (HOME, caches), ``/dev/shm`` and the scratch
  ``/tmp/work``, the command's working folder, into which the inputs (``workdir``, bound
  read-only at ``/tmp/in``) are copied. Nothing the command writes reaches the host: results
  come back on stdout. The mounts' sizes and the memory of the command's processes add up
  to ``memory_mb`` (:func:`tmpfs_sizes`);
* new pid, ipc, uts, network (loopback only) and cgroup namespaces, ``--new-session`` (no
  terminal injection), ``--die-with-parent``: every process the submission started dies with
  the command;
* an unprivileged uid, always: as root, bwrap runs without a user namespace and the
  launcher becomes a fresh uid of the command's own (no capabilities, ``no_new_privs``,
  RLIMIT_NPROC counts exactly its processes) after copying the inputs in; as another user,
  a user namespace maps it to ``nobody`` (65534);
* ``/dev/nvidia*`` (and ``/sys``, read-only) are bound in when present, so the GPU works.

Limits (memory, processes, file size, CPU time, open files, no core dumps) are set by a
small launcher inside the sandbox just before the command starts, and a watchdog over the
command's whole process tree (:class:`watchdog.Watchdog`) sums its memory (PSS) and counts its
threads: past ``memory_mb`` less the tmpfs mounts, or past ``nproc``, it kills the tree, and
the result says "used more than N MiB" (or "started more than N processes"). A command that
outlives its wall-clock timeout is killed with its whole tree.

Fallback, where ``bwrap`` is missing or cannot create namespaces (some containers, gVisor):
a private temporary directory, fresh HOME/IPYTHONDIR, the same limits, watchdog and uid, its
own session, and at the end every process of that session, uid or marker killed. Learner
code can then READ whatever that uid can read (other submissions, if their permissions
allow), so the run is reported as "NOT isolated: <reason>", and ``require`` refuses to run.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .watchdog import Watchdog

# Runs inside the sandbox, as the command's first process: copy the inputs into the scratch,
# give the scratch and HOME to the command's uid, set the limits, drop to that uid (as root),
# forbid new privileges, then become the command. Given as `python -S -c` text so that it
# needs no file of ours to be visible there.
_LAUNCHER = r"""
import ctypes, json, os, resource, shutil, sys
cfg = json.loads(sys.argv[1])
src, dst, uid = cfg.get("inputs"), cfg.get("scratch"), cfg.get("uid")
if src and dst:
    for name in os.listdir(src):
        s, d = os.path.join(src, name), os.path.join(dst, name)
        if os.path.isdir(s) and not os.path.islink(s):
            shutil.copytree(s, d, symlinks=True)
        else:
            shutil.copy(s, d, follow_symlinks=False)
if uid is not None:
    for top in cfg.get("own", []):
        for root, dirs, files in os.walk(top):
            os.lchown(root, uid, uid)
            for f in files:
                os.lchown(os.path.join(root, f), uid, uid)
    for top in cfg.get("sticky", []):
        os.chmod(top, 0o1777)
for name, value in cfg["limits"].items():
    if value is None:
        continue
    key = getattr(resource, name)
    hard = resource.getrlimit(key)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    try:
        resource.setrlimit(key, (value, value))
    except (ValueError, OSError) as exc:
        print(f"sandbox: could not set {name}={value}: {exc}", file=sys.stderr)
if uid is not None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        sys.exit("sandbox: could not drop to the command's uid")
ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
if dst:
    os.chdir(dst)
os.execv(sys.argv[2], sys.argv[2:])
"""

PASS_ENV_PREFIXES = ("NUMBA_", "CUDACOURSE_", "CUDA_", "NVIDIA_")
PASS_ENV = ("PYTHONPATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL", "TZ")


@dataclass
class Limits:
    """Per-command resource limits. ``None`` leaves one as it is."""

    memory_mb: int | None = 4096  # address space (data segment when a GPU is bound in) and
    # the sandbox's tmpfs mounts together: the process gets memory_mb - tmpfs_mb
    tmpfs_mb: int | None = None  # default: a quarter of memory_mb, at most 256
    # processes and threads of the sandbox's uid: Numba's simulator runs every GPU thread of a
    # block as an OS thread (up to 1,024 per block), beside the interpreter's own; a fork or
    # thread bomb still stops here, and the watchdog bounds the memory of all of them
    nproc: int | None = 2048
    fsize_mb: int | None = 256  # largest file the command may write
    cpu_s: int | None = None  # default: 2 x the wall-clock timeout
    nofile: int | None = 1024


@dataclass
class Sandbox:
    """How commands on learner work are run. JSON-able (it travels to remote workers)."""

    mode: str = "auto"  # "auto" (bwrap if it works, else the fallback), "bwrap", "fallback"
    require: bool = False  # refuse to run unless bwrap works
    bwrap: str | None = None  # path of bwrap; default: $CUDACOURSE_BWRAP, the course's
    # .whl/bwrap (carried to an offline machine), then PATH
    hide: list[str] = field(default_factory=list)  # more paths to hide (exchange, ...)
    expose: list[str] = field(default_factory=list)  # more paths to bind back read-only
    limits: Limits = field(default_factory=Limits)
    gpu: bool | None = None  # bind /dev/nvidia*: default when they exist

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "Sandbox":
        d = dict(d or {})
        d["limits"] = Limits(**d.get("limits", {}))
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SandboxRefused(RuntimeError):
    """``require`` was set and bubblewrap cannot isolate commands here."""


class OverBudget(RuntimeError):
    """A command went past its submission's budget (memory of all its processes, or their
    number) and was killed: the submission is "not graded: <this message>"."""


@dataclass
class Result:
    rc: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    seconds: float
    isolation: str  # "bwrap" or "NOT isolated: <reason>"
    truncated: bool = False
    exceeded: str | None = None  # "used more than N MiB" when the watchdog killed it


_probe_lock = threading.Lock()
_probed: dict[str, tuple[bool, str]] = {}


def find_bwrap(sb: Sandbox, course_root: str | None = None) -> str | None:
    for cand in [sb.bwrap, os.environ.get("CUDACOURSE_BWRAP"),
                 course_root and os.path.join(course_root, ".whl", "bwrap"),
                 shutil.which("bwrap")]:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def as_root() -> bool:
    """Whether the grader runs as root (then bwrap runs without a user namespace and the
    launcher drops to a fresh uid); a function, so tests can take the other path."""
    return os.geteuid() == 0


def isolation(sb: Sandbox, course_root: str | None = None) -> tuple[bool, str]:
    """(True, "bwrap <path>") when bwrap can isolate a command here, else (False, reason).
    The probe runs this Python, under the very profile commands get (allow-list, uid)."""
    ok, why, _ = _isolation(sb, course_root)
    return ok, why


def profile(sb: Sandbox, course_root: str | None = None) -> str | None:
    """How bwrap isolates here (:data:`PROFILES`), or None (the fallback)."""
    return _isolation(sb, course_root)[2]


# How a command is made unprivileged. "drop": bwrap as root without a user namespace, the
# launcher drops to a fresh uid (real, kernel-wide); "userns": a user namespace maps the
# grader to nobody (as root, where the first cannot run: a container without CAP_SYS_ADMIN;
# then the processes keep root's kernel uid outside the namespace, without capabilities,
# seeing only the allow-list, and the summary says so).
PROFILES = ("drop", "userns")


def _isolation(sb: Sandbox, course_root: str | None) -> tuple[bool, str, str | None]:
    if sb.mode == "fallback":
        return False, "the fallback was chosen (--sandbox fallback)", None
    path = find_bwrap(sb, course_root)
    if path is None:
        return False, "bubblewrap (bwrap) is not installed (apt-get install bubblewrap)", None
    with _probe_lock:
        key = f"{path}:{os.geteuid()}:{as_root()}:{json.dumps(sb.to_dict(), sort_keys=True)}"
        if key not in _probed:
            tried = []
            for prof in (PROFILES if as_root() else ("userns",)):
                ok, why = _probe(sb, path, prof)
                tried.append(why)
                if ok:
                    _probed[key] = (True, why, prof)
                    break
            else:
                _probed[key] = (False, tried[-1], None)
        return _probed[key]


def _probe(sb: Sandbox, path: str, prof: str) -> tuple[bool, str]:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="cudacourse-probe-") as tmp:
        os.chmod(tmp, 0o755)
        probe = Sandbox(**{**sb.to_dict(), "bwrap": path, "limits": sb.limits, "gpu": False})
        uid = _pick_uid() if prof == "drop" else None
        cmd = bwrap_argv(probe, tmp, None, tmp, gpu=False, prof=prof)
        cfg = {"inputs": "/tmp/in", "scratch": "/tmp/work", "uid": uid,
               "own": ["/tmp/home", "/tmp/work"], "sticky": ["/tmp", "/dev/shm"], "limits": {}}
        full = cmd + [sys.executable, "-S", "-c", _LAUNCHER, json.dumps(cfg),
                      sys.executable, "-S", "-c", "import os; print(os.getuid())"]
        try:
            p = subprocess.run(full, capture_output=True, text=True, timeout=60, cwd="/",
                               env=_env("/tmp/home", None))
        except (OSError, subprocess.SubprocessError) as exc:
            return False, f"bwrap cannot run here: {exc}"
    if p.returncode != 0:
        return False, f"bwrap cannot create its namespaces here: {p.stderr.strip()[:200]}"
    return True, f"bwrap {path}"


def _probed_profile() -> str | None:
    profs = {v[2] for k, v in _probed.items() if v[0] and f":{as_root()}:" in k}
    return "userns" if "userns" in profs else ("drop" if profs else None)


def _pick_uid() -> int | None:
    """As root: a fresh uid for one command (its own process count, no access to root's
    files, no capabilities); otherwise None (a user namespace maps the grader to nobody)."""
    if not as_root():
        return None
    return 200_000 + secrets.randbelow(60_000)


def privilege_note(isolated: bool = True) -> str:
    """What running as root means for this machine's sandbox, or "" when not root."""
    if not as_root():
        return ""
    if isolated and _probed_profile() == "userns":
        return ("running as root where bubblewrap cannot drop to another uid: commands run "
                "as nobody in a user namespace, root's uid outside it, seeing only the "
                "allow-list; run grading as an unprivileged user")
    if isolated or _others_can_run_python():
        return "running as root: each command runs as an unused uid of its own"
    return ("running as root without bubblewrap, and this Python is not readable by other "
            "users, so commands keep root's uid: run grading as an unprivileged user or "
            "install bubblewrap")


def _drop_kwargs(uid: int | None) -> dict[str, Any]:
    if uid is None:
        return {}
    return {"user": uid, "group": uid, "extra_groups": []}


# A folder to expose is refused when it is named like an instructor-side folder, lies inside
# one of the course's own, or holds the marks of a course root (site-packages may well hold a
# package named "tests": only the names that mark a course are looked for inside)
_SECRET_NAMES = frozenset({"solutions", "tests", "lessons", "submitted", "autograded",
                           "feedback", "release", "source", "quizkeys", "exchange",
                           "inbound", "outbound", ".cudacourse-grading"})
_SECRET_PARTS = frozenset({"solutions", "submitted", "autograded", "quizkeys",
                           ".cudacourse-grading"})
_COURSE_MARKS = frozenset({"solutions", "submitted", "autograded", "gradebook.db",
                           "nbgrader_config.py", "quizkeys"})


def _secret_paths(course_root: str, db_url: str | None, sb: Sandbox) -> list[str]:
    """Paths no exposed folder may hold: the course root, home folders, the exchange, the
    gradebook's folder and anything in ``sb.hide``."""
    hide = [course_root, os.path.expanduser("~"), "/root", "/home", "/srv/nbgrader", *sb.hide]
    if db_url and db_url.startswith("sqlite:///"):
        hide.append(os.path.dirname(os.path.abspath(db_url[len("sqlite:///"):])))
    out = []
    for p in hide:
        if p:
            rp = os.path.realpath(p)
            if rp != "/" and rp not in out:
                out.append(rp)
    return out


def _holds_secrets(path: str, secret: list[str]) -> bool:
    """Whether binding ``path`` would show a secret path or an instructor-side folder."""
    if any(h == path or h.startswith(path.rstrip("/") + "/") for h in secret):
        return True
    parts = Path(path).parts
    if parts[-1] in _SECRET_NAMES or any(part in _SECRET_PARTS for part in parts):
        return True
    try:
        with os.scandir(path) as it:
            return any(e.name in _COURSE_MARKS for e in it)
    except OSError:
        return False


def _exposed(sb: Sandbox) -> list[str]:
    """What the sandboxed Python needs: its installation (prefixes, site-packages,
    ``PYTHONPATH``), the course package, the libraries ``LD_LIBRARY_PATH`` names."""
    paths = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
             os.path.dirname(sys.executable)}
    # site-packages and the like (an editable install's source folder comes with the package
    # below); never the test runner's or the script's own folder that sys.path may hold
    paths |= {p for p in sys.path if p and os.path.basename(p.rstrip("/")) in
              ("site-packages", "dist-packages", "lib-dynload")}
    for var in ("PYTHONPATH", "LD_LIBRARY_PATH"):
        paths |= set(os.environ.get(var, "").split(os.pathsep))
    here = Path(__file__).resolve().parents[2]  # .../src (or site-packages)
    paths.add(str(here))
    paths |= set(sb.expose)
    return sorted({os.path.realpath(p) for p in paths if p and os.path.isabs(p) and
                   os.path.exists(p)})


# Course files a lesson reads while it runs (lesson 4's figures come from the committed
# benchmark): bound read-only at their place; nothing else of the course is visible.
COURSE_RESOURCES = ("docs/benchmarks.json", "docs/figures")


def course_resources(course_root: str) -> list[str]:
    """The :data:`COURSE_RESOURCES` that exist in ``course_root`` (real paths inside it)."""
    root = os.path.realpath(course_root)
    out = []
    for rel in COURSE_RESOURCES:
        p = os.path.realpath(os.path.join(root, rel))
        if p.startswith(root + "/") and os.path.exists(p):  # no symlink out of the course
            out.append(p)
    return out


def gpu_devices() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*")) + sorted(glob.glob("/dev/dri/*"))


def process_mb(lim: Limits) -> int | None:
    """MiB the command's processes may hold together: ``memory_mb`` less the tmpfs mounts
    (their files are memory too, and belong to no process)."""
    return None if lim.memory_mb is None else max(64, lim.memory_mb - tmpfs_mb(lim))


def _limits(lim: Limits, timeout: float, gpu: bool, own_uid: bool = False
            ) -> dict[str, int | None]:
    mb = 1 << 20
    memory = process_mb(lim)
    nproc = lim.nproc
    if nproc is not None and not own_uid and os.geteuid() != 0:
        # RLIMIT_NPROC counts every process of the uid: leave the instructor's own alone
        # (the watchdog counts the command's own tree exactly)
        nproc += _count_processes(os.getuid())
    return {
        # one process's address space; all of them together: the watchdog
        "RLIMIT_AS": None if gpu or memory is None else memory * mb,
        # CUDA reserves a huge virtual address space: with a GPU, limit the data segment
        "RLIMIT_DATA": memory * mb if gpu and memory else None,
        "RLIMIT_NPROC": nproc,
        "RLIMIT_FSIZE": lim.fsize_mb * mb if lim.fsize_mb else None,
        "RLIMIT_CPU": lim.cpu_s or int(2 * timeout) + 10,
        "RLIMIT_NOFILE": lim.nofile,
        "RLIMIT_CORE": 0,
    }


def _count_processes(uid: int) -> int:
    n = 0
    for status in glob.glob("/proc/[0-9]*/status"):
        try:
            with open(status) as fh:
                for line in fh:
                    if line.startswith("Uid:"):
                        n += int(line.split()[1]) == uid
                        break
        except OSError:
            continue
    return n


def _env(home: str, extra: dict[str, str] | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k.startswith(PASS_ENV_PREFIXES) or k in PASS_ENV}
    for var in ("PYTHONPATH", "LD_LIBRARY_PATH"):  # relative entries would point into the
        if var in env:                            # sandbox's cwd
            env[var] = os.pathsep.join(os.path.abspath(p) for p in env[var].split(os.pathsep)
                                       if p)
    bindir = os.path.dirname(sys.executable)
    env.update({
        "PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home, "IPYTHONDIR": f"{home}/.ipython", "JUPYTER_RUNTIME_DIR": f"{home}/rt",
        "JUPYTER_CONFIG_DIR": f"{home}/.jupyter", "MPLCONFIGDIR": f"{home}/.mpl",
        "XDG_CACHE_HOME": f"{home}/.cache", "MPLBACKEND": "Agg", "CUDACOURSE_QUIET": "1",
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "TMPDIR": "/tmp",
        "NUMBA_CACHE_DIR": f"{home}/.numba",
    })
    env.setdefault("LANG", "C.UTF-8")
    env.update(extra or {})
    return env


def _reader(pipe, cap: int, sink: list, flag: list) -> None:
    """Keep the first ``cap`` bytes of a pipe, drain (and count as cut) the rest."""
    kept = 0
    while True:
        chunk = pipe.read(65536)
        if not chunk:
            break
        take = max(0, min(len(chunk), cap - kept))
        if take:
            sink.append(chunk[:take])
            kept += take
        if take < len(chunk):
            flag.append(True)
    pipe.close()


MIB = 1 << 20


def tmpfs_mb(lim: Limits) -> int:
    """Memory the sandbox's tmpfs mounts may hold together, in MiB (part of ``memory_mb``)."""
    if lim.tmpfs_mb is not None:
        return max(8, lim.tmpfs_mb)
    return 256 if lim.memory_mb is None else max(8, min(256, lim.memory_mb // 4))


def tmpfs_sizes(lim: Limits, n_hidden: int = 0) -> dict[str, int]:
    """Bytes per tmpfs mount: the scratch (the command's working folder) takes what /tmp and
    /dev/shm leave of :func:`tmpfs_mb`. Files in a tmpfs are memory that no process limit
    counts, so each mount gets ``--size`` and the processes get what their sum leaves of
    ``memory_mb`` (:func:`process_mb`). (``n_hidden``: no longer used; nothing is hidden, the
    sandbox shows an allow-list.)"""
    total = tmpfs_mb(lim) * MIB
    # /tmp holds HOME and the caches a GPU fills (CUDA's JIT cache, Numba's): half of it
    sizes = {"/dev/shm": total // 16, "/tmp": max(2 * MIB, total // 2)}
    sizes[SCRATCH] = max(2 * MIB, total - sizes["/dev/shm"] - sizes["/tmp"])
    return sizes


SCRATCH = "/tmp/work"  # the command's working folder in the sandbox
INPUTS = "/tmp/in"  # workdir, read-only: copied into SCRATCH by the launcher
HOME = "/tmp/home"
# /etc: only what a program needs to start (the loader's cache, time zone, names of users
# and hosts, certificates, fonts for plots)
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
             "nsswitch.conf", "passwd", "group", "hosts", "host.conf", "ssl",
             "ca-certificates", "fonts", "alternatives", "mime.types", "matplotlibrc",
             "os-release")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def _system_binds() -> list[str]:
    # /etc first, 0755: bwrap would make it as a bound file's missing parent, 0700 and
    # root's, and the command's uid could then read none of it (no ld.so.cache: a CUDA
    # runtime found by the system's search, as /usr/local/cuda's is, would not be found)
    out: list[str] = ["--perms", "0755", "--dir", "/etc"]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            out += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            out += ["--ro-bind", d, d]
    for name in ETC_FILES:
        p = os.path.join("/etc", name)
        if os.path.lexists(p):
            if os.path.islink(p):
                out += ["--symlink", os.readlink(p), p]
            else:
                out += ["--ro-bind", p, p]
    return out


def allowed_paths(sb: Sandbox, course_root: str, db_url: str | None) -> list[str]:
    """The host folders of the Python environment and the package bound read-only: those of
    :func:`_exposed` that hold no secret path (:func:`_holds_secrets`) and are not already
    under /usr."""
    secret = _secret_paths(course_root, db_url, sb)
    out = [p for p in _exposed(sb) if not (p == "/usr" or p.startswith("/usr/") or
                                           _holds_secrets(p, secret))]
    # a folder inside another one bound already comes with it
    return [p for p in out if not any(p.startswith(q + "/") for q in out if q != p)]


def bwrap_argv(sb: Sandbox, course_root: str, db_url: str | None, workdir: str,
               gpu: bool, prof: str | None = None) -> list[str]:
    """bubblewrap's arguments for one command, up to the command itself: an allow-list of
    read-only binds, sized tmpfs mounts (:func:`tmpfs_sizes`), the inputs read-only at
    :data:`INPUTS`; as root no user namespace (the launcher drops to a fresh uid), otherwise
    one that maps the grader to nobody."""
    sizes = tmpfs_sizes(sb.limits)

    def tmpfs(path: str, size: int) -> list[str]:
        return ["--size", str(size), "--tmpfs", path]

    if (prof or ("drop" if as_root() else "userns")) == "drop":
        unshare = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                   "--unshare-cgroup-try"]
    else:
        unshare = ["--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net",
                   "--unshare-uts", "--unshare-cgroup-try", "--uid", "65534", "--gid", "65534"]
    cmd = [find_bwrap(sb, course_root), *unshare, "--die-with-parent", "--new-session",
           *_system_binds(), "--proc", "/proc", "--dev", "/dev",
           *tmpfs("/dev/shm", sizes["/dev/shm"]), *tmpfs("/tmp", sizes["/tmp"])]
    if gpu:
        for dev in gpu_devices():
            cmd += ["--dev-bind", dev, dev]
        cmd += ["--ro-bind", "/sys", "/sys"]  # the driver reads the device's topology
    binds = allowed_paths(sb, course_root, db_url) + course_resources(course_root)
    # bwrap makes a bind's missing parents 0700 (root's, as root): they are made 0755 first,
    # so that the command's uid can reach what is bound (and only that: the parents are
    # empty folders of the sandbox's own root)
    parents = sorted({str(a) for p in binds for a in Path(p).parents
                      if str(a) not in ("/", "/tmp", "/usr", "/etc")
                      and not str(a).startswith(("/usr/", "/etc/"))})
    for d in parents:
        cmd += ["--perms", "0755", "--dir", d]
    for p in binds:  # the environment, the package and what lessons read, nothing else
        cmd += ["--ro-bind", p, p]
    cmd += ["--dir", HOME, *tmpfs(SCRATCH, sizes[SCRATCH]),
            "--ro-bind", workdir, INPUTS, "--chdir", SCRATCH]
    cmd += ["--remount-ro", "/dev"]  # nothing more is mounted: bwrap's /dev takes no size
    return cmd


def run(argv: list[str], *, workdir: str, sb: Sandbox, course_root: str, timeout: float,
        stdin: bytes | None = None, db_url: str | None = None,
        env: dict[str, str] | None = None, cap: int = 4 << 20) -> Result:
    """Run ``argv`` (``argv[0]`` an absolute path) on the files of ``workdir``, isolated as
    well as this machine allows. In bubblewrap they are copied into the sized scratch that is
    the command's cwd, and nothing it writes reaches the host (results come on stdout); in the
    fallback ``workdir`` itself is the cwd."""
    ok, why = isolation(sb, course_root)
    if not ok and (sb.require or sb.mode == "bwrap"):
        raise SandboxRefused(f"sandbox required but not available: {why}")
    gpu = sb.gpu if sb.gpu is not None else bool(glob.glob("/dev/nvidia*"))
    prof = profile(sb, course_root)
    uid = _pick_uid() if prof in ("drop", None) else None
    token = secrets.token_hex(8)
    workdir = os.path.realpath(workdir)
    if ok:
        home = HOME
        cmd = bwrap_argv(sb, course_root, db_url, workdir, gpu, prof=prof)
        isolation_txt = "bwrap"
        cfg: dict[str, Any] = {"inputs": INPUTS, "scratch": SCRATCH, "uid": uid,
                               "own": [HOME, SCRATCH], "sticky": ["/tmp", "/dev/shm"]}
        popen_uid = None  # bwrap as root; the launcher drops to uid inside
        os.chmod(workdir, 0o755)  # read by the launcher (copied in), never written
    else:
        home = os.path.join(workdir, ".home")
        cmd = []
        isolation_txt = f"NOT isolated: {why}"
        if uid is not None and not _others_can_run_python():
            uid = None  # this Python is unreadable to other users: the fallback keeps root's
        cfg = {"inputs": None, "scratch": None, "uid": None}
        popen_uid = uid
    cfg["limits"] = _limits(sb.limits, timeout, gpu, own_uid=uid is not None)
    if uid is None and as_root():  # root's kernel uid: its count is every root process's;
        cfg["limits"]["RLIMIT_NPROC"] = None  # the watchdog counts the command's own
    full = cmd + [sys.executable, "-S", "-c", _LAUNCHER, json.dumps(cfg), *argv]
    child_env = _env(home, {**(env or {}), "CUDACOURSE_SANDBOX_TOKEN": token,
                            # where lessons find the course's figures (bench.committed_report)
                            "CUDACOURSE_COURSE_ROOT": os.path.realpath(course_root)})
    if not ok:
        os.makedirs(home, exist_ok=True)
        if popen_uid is not None:
            _chown_tree(workdir, popen_uid)
    start = time.monotonic()
    proc = subprocess.Popen(full, cwd=workdir, env=child_env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            **_drop_kwargs(popen_uid))
    # in bubblewrap the scratch is a sized tmpfs; the fallback's is a host folder: watched
    dog = Watchdog(proc.pid, process_mb(sb.limits), sb.limits.nproc,
                   kill=lambda: _end_tree(proc, popen_uid if not ok else uid, token),
                   disk=None if ok else (workdir, tmpfs_mb(sb.limits)))
    dog.start()
    out: list[bytes] = []
    err: list[bytes] = []
    trunc: list[bool] = []
    threads = [threading.Thread(target=_reader, args=(proc.stdout, cap, out, trunc), daemon=True),
               threading.Thread(target=_reader, args=(proc.stderr, 65536, err, []), daemon=True)]
    for t in threads:
        t.start()
    try:
        if stdin:
            proc.stdin.write(stdin)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    timed_out = False
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out, rc = True, None
    dog.done.set()
    _end_tree(proc, uid, token)
    dog.join(timeout=10)
    for t in threads:
        t.join(timeout=10)
    if rc is None:
        rc = proc.poll()
    return Result(rc, b"".join(out), b"".join(err), timed_out and not dog.exceeded,
                  time.monotonic() - start, isolation_txt, bool(trunc), dog.exceeded)


_python_ok: list[bool] = []


def _others_can_run_python() -> bool:
    """Whether another uid can start this Python (the fallback's uid drop needs it)."""
    if not _python_ok:
        try:
            p = subprocess.run([sys.executable, "-c", "import nbclient, numpy"],
                               capture_output=True, timeout=60, cwd="/", user=65534,
                               group=65534, extra_groups=[], env={"PATH": "/usr/bin:/bin"})
            _python_ok.append(p.returncode == 0)
        except (OSError, subprocess.SubprocessError):
            _python_ok.append(False)
    return _python_ok[0]


def _chown_tree(path: str, uid: int) -> None:
    for root, dirs, files in os.walk(path):
        os.chown(root, uid, uid)
        for f in files:
            try:
                os.chown(os.path.join(root, f), uid, uid, follow_symlinks=False)
            except OSError:
                pass
def _end_tree(proc: subprocess.Popen, uid: int | None, token: str) -> None:
    """Kill the command and everything it started (bwrap's pid namespace does this itself;
    the fallback needs the session, the uid and the marker in the environment)."""
    for attempt in range(3):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.kill()
        except ProcessLookupError:
            pass
        for pid in _stragglers(uid, token):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            continue
        if not _stragglers(uid, token):
            return


def _stragglers(uid: int | None, token: str) -> list[int]:
    """Processes left by a command: those of its own uid, or carrying its marker."""
    found = []
    me = os.getpid()
    needle = f"CUDACOURSE_SANDBOX_TOKEN={token}".encode()
    for d in glob.glob("/proc/[0-9]*"):
        pid = int(d.rsplit("/", 1)[1])
        if pid == me:
            continue
        try:
            if uid is not None:
                with open(f"{d}/status") as fh:
                    for line in fh:
                        if line.startswith("Uid:"):
                            if int(line.split()[1]) == uid:
                                found.append(pid)
                            break
                continue
            with open(f"{d}/environ", "rb") as fh:
                if needle in fh.read():
                    found.append(pid)
        except (OSError, ValueError):
            continue
    return found


__all__ = ["Sandbox", "Limits", "Result", "SandboxRefused", "OverBudget", "Watchdog", "run",
           "isolation", "find_bwrap", "bwrap_argv", "allowed_paths", "tmpfs_sizes", "tmpfs_mb",
           "process_mb", "as_root"]
