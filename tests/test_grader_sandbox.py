"""The sandbox: what a command on learner work can see, write, start and keep.

Each test runs a few lines of Python through ``sandbox.run`` against a scratch "course" and
checks the host afterwards. bubblewrap is installed by .ci/run; where it is missing (or
cannot make namespaces) the bwrap tests are skipped with that reason and the fallback
tests still run.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

from cudacourse.grader import sandbox as sbx

BWRAP, WHY = sbx.isolation(sbx.Sandbox())
needs_bwrap = pytest.mark.skipif(not BWRAP, reason=f"no isolation here: {WHY}")
MARK = "cudacourse-sandbox-test-mark"


def _run(code: str, tmp_path: Path, *, mode: str = "auto", timeout: float = 60,
         limits: sbx.Limits | None = None, **kw):
    course = tmp_path / "course"
    (course / "submitted" / "bob").mkdir(parents=True, exist_ok=True)
    (course / "submitted" / "bob" / "secret.txt").write_text("bob's answers")
    (course / "gradebook.db").write_text("not really a database")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "mine.txt").write_text("my own file")
    sb = sbx.Sandbox(mode=mode, limits=limits or sbx.Limits())
    res = sbx.run([sys.executable, "-c", code], workdir=str(work), sb=sb,
                  course_root=str(course), timeout=timeout, **kw)
    return res, course, work


def _alive(mark: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if mark.encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found


@needs_bwrap
def test_the_course_and_other_submissions_are_invisible(tmp_path):
    code = f"""
import os
for p in [{str(tmp_path / 'course' / 'submitted' / 'bob' / 'secret.txt')!r},
          {str(tmp_path / 'course' / 'gradebook.db')!r}]:
    try:
        open(p).read()
        print("READ", p)
    except OSError as exc:
        print("hidden", type(exc).__name__)
print("home", os.environ["HOME"], os.listdir(os.environ["HOME"]))
print("cwd", sorted(os.listdir(".")))
"""
    res, _, _ = _run(code, tmp_path)
    out = res.stdout.decode()
    assert res.rc == 0, res.stderr.decode()
    assert "READ" not in out and out.count("hidden FileNotFoundError") == 2, out
    assert "home /tmp/home []" in out and "cwd ['mine.txt']" in out, out
    assert res.isolation == "bwrap"


@needs_bwrap
def test_the_lessons_course_files_are_readable_and_nothing_else_of_the_course(tmp_path):
    """Lesson 4 draws from docs/benchmarks.json: its feedback run must find it (read-only),
    while the rest of the course root stays hidden."""
    course = tmp_path / "course"
    (course / "docs" / "figures").mkdir(parents=True)
    (course / "docs" / "benchmarks.json").write_text('{"cases": []}')
    (course / "docs" / "figures" / "a.png").write_bytes(b"png")
    (course / "docs" / "notes.md").write_text("instructor notes")
    bench, fig, notes = (course / "docs" / n for n in ("benchmarks.json", "figures/a.png",
                                                       "notes.md"))
    code = f"""
for p in [{str(bench)!r}, {str(fig)!r}, {str(notes)!r}]:
    try:
        print("READ", open(p, "rb").read())
    except OSError as exc:
        print("hidden", type(exc).__name__)
try:
    open({str(bench)!r}, "a").write("x")
    print("WROTE")
except OSError as exc:
    print("read-only", type(exc).__name__)
"""
    res, _, _ = _run(code, tmp_path)
    out = res.stdout.decode()
    assert res.rc == 0, res.stderr.decode()
    assert "READ b'{\"cases\": []}'" in out and "READ b'png'" in out, out
    assert out.count("hidden FileNotFoundError") == 1 and "instructor" not in out, out
    assert "WROTE" not in out and "read-only" in out, out
    assert bench.read_text() == '{"cases": []}'


def test_course_resources_never_leave_the_course(tmp_path):
    course = tmp_path / "course"
    (course / "docs").mkdir(parents=True)
    (tmp_path / "secret.json").write_text("{}")
    (course / "docs" / "benchmarks.json").symlink_to(tmp_path / "secret.json")
    assert sbx.course_resources(str(course)) == []
    (course / "docs" / "benchmarks.json").unlink()
    (course / "docs" / "benchmarks.json").write_text("{}")
    assert sbx.course_resources(str(course)) == [str((course / "docs" / "benchmarks.json")
                                                     .resolve())]


@needs_bwrap
def test_only_the_private_copy_is_writable_and_writes_elsewhere_never_reach_the_host(tmp_path):
    pkg = Path(sbx.__file__)
    code = f"""
for p in [{str(pkg)!r}, {str(tmp_path / 'course' / 'planted.txt')!r}, "/usr/planted.txt",
          "mine.txt"]:
    try:
        open(p, "a").write("x")
        print("wrote", p)
    except OSError as exc:
        print("refused", p, type(exc).__name__)
"""
    code += "\nprint(open('mine.txt').read())"
    before = pkg.read_bytes()
    res, course, work = _run(code, tmp_path)
    out = res.stdout.decode()
    assert f"refused {pkg}" in out and "refused /usr/planted.txt" in out, out
    assert pkg.read_bytes() == before
    assert not (course / "planted.txt").exists()  # the course is not even there
    # the inputs were copied into the sized scratch; what was written there stays there
    assert "wrote mine.txt" in out and "my own filex" in out, out
    assert (work / "mine.txt").read_text() == "my own file"


@needs_bwrap
def test_no_network(tmp_path):
    code = """
import socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3)
    print("connected")
except OSError as exc:
    print("no network:", type(exc).__name__)
"""
    res, _, _ = _run(code, tmp_path)
    assert "no network" in res.stdout.decode(), res.stdout


@pytest.mark.parametrize("mode", [pytest.param("auto", marks=needs_bwrap), "fallback"])
def test_detached_processes_die_with_the_command(tmp_path, mode):
    mark = f"{MARK}-{mode}"
    code = f"""
import subprocess
for _ in range(5):
    subprocess.Popen(["sleep", "300", {mark!r}], start_new_session=True)
print("started")
"""
    res, _, _ = _run(code, tmp_path, mode=mode)
    assert b"started" in res.stdout, res.stderr
    deadline = time.monotonic() + 10
    while _alive(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _alive(mark) == []


@pytest.mark.parametrize("mode", [pytest.param("auto", marks=needs_bwrap), "fallback"])
def test_timeout_ends_the_command(tmp_path, mode):
    start = time.monotonic()
    res, _, _ = _run("import time\nwhile True: time.sleep(1)", tmp_path, mode=mode, timeout=2)
    assert res.timed_out and time.monotonic() - start < 20


@pytest.mark.parametrize("mode", [pytest.param("auto", marks=needs_bwrap), "fallback"])
def test_memory_and_file_size_limits(tmp_path, mode):
    # The file limit (64 MiB here) is well under the disk budget (a quarter of memory_mb, 256
    # MiB), so the kernel's EFBIG, not the fallback's disk watch, stops the write: with the
    # default, one file of 256 MiB is the whole budget, and the watchdog's next look (every
    # 0.2 s) could kill the process before it printed (a race CI lost under load).
    code = """
try:
    x = bytearray(16 << 30)
    print("allocated", flush=True)
except MemoryError:
    print("MemoryError", flush=True)
import signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
try:
    with open("big.bin", "wb") as fh:
        for _ in range(400):
            fh.write(b"0" * (1 << 20))
    print("wrote 400 MiB", flush=True)
except OSError as exc:
    print("file too large:", exc.errno, flush=True)
"""
    limits = sbx.Limits(fsize_mb=64)
    assert limits.fsize_mb < sbx.tmpfs_mb(limits)
    res, _, work = _run(code, tmp_path, mode=mode, limits=limits)
    out = res.stdout.decode()
    assert not res.exceeded, (res.exceeded, out)
    assert "MemoryError" in out and "file too large" in out, (out, res.stderr)
    if mode == "fallback":  # its cwd is the host folder; bubblewrap's is the scratch
        assert (work / "big.bin").stat().st_size <= limits.fsize_mb << 20
    else:
        assert not (work / "big.bin").exists()


@needs_bwrap
def test_output_is_capped(tmp_path):
    res, _, _ = _run("import sys\nsys.stdout.write('x' * 50_000_000)", tmp_path, cap=1000)
    assert len(res.stdout) == 1000 and res.truncated


def test_fallback_says_it_is_not_isolated_and_require_refuses(tmp_path):
    res, _, _ = _run("print('hi')", tmp_path, mode="fallback")
    assert res.isolation.startswith("NOT isolated:") and b"hi" in res.stdout
    with pytest.raises(sbx.SandboxRefused, match="sandbox required"):
        sbx.run([sys.executable, "-c", "pass"], workdir=str(tmp_path),
                sb=sbx.Sandbox(mode="fallback", require=True), course_root=str(tmp_path),
                timeout=10)


def test_a_missing_bwrap_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(sbx.shutil, "which", lambda name: None)
    ok, why = sbx.isolation(sbx.Sandbox(bwrap=str(tmp_path / "nope")), str(tmp_path))
    assert not ok and "bubblewrap (bwrap) is not installed" in why


def test_environment_is_fresh(tmp_path):
    os.environ["AWS_SECRET"] = "hunter2"  # the grader's environment stays outside
    try:
        res, _, _ = _run("import os; print(sorted(os.environ))", tmp_path, mode="fallback")
    finally:
        del os.environ["AWS_SECRET"]
    out = res.stdout.decode()
    assert "AWS_SECRET" not in out and "'HOME'" in out and "'IPYTHONDIR'" in out


def test_every_tmpfs_is_sized_and_memory_plus_tmpfs_stay_within_the_limit(tmp_path):
    """No process limit counts the files left in a tmpfs: each tmpfs gets a --size, and the
    processes (all of them together, the watchdog's budget) get what their sum leaves of
    memory_mb."""
    course = tmp_path / "course"
    course.mkdir()
    for memory in (2048, 4096, 512):
        sb = sbx.Sandbox(limits=sbx.Limits(memory_mb=memory))
        argv = sbx.bwrap_argv(sb, str(course), None, str(tmp_path), gpu=False)
        sizes = {}
        for i, arg in enumerate(argv):
            if arg == "--tmpfs":
                assert argv[i - 2] == "--size", argv[i - 3:i + 2]
                sizes[argv[i + 1]] = int(argv[i - 1])
        assert set(sizes) == {"/tmp", "/dev/shm", sbx.SCRATCH}, sizes
        process = sbx._limits(sb.limits, 60, gpu=False)["RLIMIT_AS"]
        assert process == sbx.process_mb(sb.limits) << 20
        assert sum(sizes.values()) + process <= memory << 20, (memory, sizes, process)
        assert argv.index("--remount-ro") > argv.index("--chdir")  # after every mount
        assert argv[argv.index("--remount-ro") + 1] == "/dev"  # bwrap's /dev takes no size
        assert "/" not in [argv[i + 1] for i, a in enumerate(argv) if a.endswith("bind")]


@needs_bwrap
def test_filling_the_tmpfs_mounts_ends_at_their_size(tmp_path):
    """/tmp, /dev/shm and the scratch (the working folder) fill up (ENOSPC) within the
    budget; /dev cannot be written, and the course is not there at all."""
    code = """
import errno, os
for d in ("/tmp", "/dev/shm", os.getcwd(), "/dev", "__COURSE__"):
    wrote = 0
    try:
        for i in range(400):  # many files: a per-file limit alone would not stop this
            with open(d + f"/fill{i}.bin", "wb") as fh:
                fh.write(b"0" * (1 << 20))
            wrote += 1
        print(d, "wrote", wrote)
    except OSError as exc:
        print(d, "stopped", wrote, errno.errorcode.get(exc.errno))
"""
    course = tmp_path / "course"
    course.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    sb = sbx.Sandbox(limits=sbx.Limits(memory_mb=512))  # tmpfs budget 128 MiB
    res = sbx.run([sys.executable, "-c", code.replace("__COURSE__", str(course.resolve()))],
                  workdir=str(work), sb=sb, course_root=str(course), timeout=60)
    out = dict((ln.split(" ", 1)[0], ln.split(" ", 1)[1])
               for ln in res.stdout.decode().splitlines())
    sizes = sbx.tmpfs_sizes(sb.limits)
    assert sum(sizes.values()) <= sbx.tmpfs_mb(sb.limits) << 20
    for d in ("/tmp", "/dev/shm", sbx.SCRATCH):
        assert out[d].startswith("stopped") and out[d].endswith("ENOSPC"), (d, out, res.stderr)
        assert int(out[d].split()[1]) <= sizes[d] >> 20
    assert out["/dev"] == "stopped 0 EROFS", out
    assert out[str(course.resolve())].startswith("stopped 0"), out
    assert list(work.iterdir()) == []  # nothing reached the host


ROOT = Path(__file__).resolve().parents[1]  # the checkout: masters, keys, tests


@needs_bwrap
def test_the_sandbox_shows_an_allow_list_never_the_course(tmp_path):
    """Issue 38, class 8: a command in the sandbox sees the environment and the package,
    nothing of the checkout's masters, hidden tests, quiz keys or tests, the gradebook or
    another student's folder, even with the checkout as the course root."""
    master = next((ROOT / "solutions").glob("01_*/*.ipynb"))
    keys = ROOT / "lessons" / "quizkeys"
    course = tmp_path / "course"
    secrets_ = [master, master.parent, ROOT / "solutions", keys, ROOT / "tests",
                ROOT / "lessons", course / "submitted" / "bob" / "secret.txt",
                course / "gradebook.db", Path.home() / ".bash_history", ROOT / ".git"]
    code = f"""
import os
for p in {[str(p) for p in secrets_]!r}:
    print("SEEN" if os.path.exists(p) else "absent", p)
print("ROOT", sorted(os.listdir("/")))
print("CHECKOUT", sorted(os.listdir({str(ROOT)!r})) if os.path.isdir({str(ROOT)!r}) else [])
import numpy, nbclient, cudacourse  # what a verdict needs is there
print("IMPORTS ok")
"""
    for root in (str(course), str(ROOT)):
        (course / "submitted" / "bob").mkdir(parents=True, exist_ok=True)
        (course / "submitted" / "bob" / "secret.txt").write_text("bob's answers")
        (course / "gradebook.db").write_text("not really a database")
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        res = sbx.run([sys.executable, "-c", code], workdir=str(work), sb=sbx.Sandbox(),
                      course_root=root, timeout=60)
        out = res.stdout.decode()
        assert "IMPORTS ok" in out, res.stderr.decode()
        assert "SEEN" not in out, out
        top = eval(out.split("ROOT ", 1)[1].splitlines()[0])
        assert set(top) <= {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc",
                            "proc", "dev", "tmp", "sys", *Path(sys.prefix).parts[1:2],
                            *Path(sys.base_prefix).parts[1:2],
                            *Path(sbx.__file__).parts[1:2]}, top
        seen = set(eval(out.split("CHECKOUT ", 1)[1].splitlines()[0]))
        assert not seen & {"solutions", "tests", "lessons", "notebooks", ".git",
                           "nbgrader_config.py"}, seen


@needs_bwrap
def test_learner_code_runs_unprivileged_as_root_too(tmp_path):
    """As root, the command runs as a fresh uid with no capabilities and no_new_privs; its
    files in the scratch are its own."""
    code = """
import os
st = dict(ln.split(":", 1) for ln in open("/proc/self/status").read().splitlines())
print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups(), st["CapEff"].strip(),
      st["NoNewPrivs"].strip(), os.stat(".").st_uid == os.getuid())
"""
    res, _, _ = _run(code, tmp_path)
    uid, euid, gid, groups, cap, nnp, owns = res.stdout.decode().split(maxsplit=6)
    assert int(uid) != 0 and int(euid) != 0 and int(gid) != 0, res.stdout
    assert groups == "[]" and int(cap, 16) == 0 and nnp == "1", res.stdout
    assert owns.strip() == "True"


@pytest.mark.skipif(os.geteuid() != 0, reason="this test takes the non-root path from root")
def test_the_non_root_path_maps_the_grader_to_nobody(tmp_path, monkeypatch):
    """The grader as another user: a user namespace maps it to nobody (65534), with the
    same allow-list; injected by as_root (the profile is chosen by it)."""
    monkeypatch.setattr(sbx, "as_root", lambda: False)
    ok, why = sbx.isolation(sbx.Sandbox())
    if not ok:
        pytest.skip(f"bwrap cannot make a user namespace here: {why}")
    argv = sbx.bwrap_argv(sbx.Sandbox(), str(tmp_path), None, str(tmp_path), gpu=False)
    assert "--unshare-user" in argv and argv[argv.index("--uid") + 1] == "65534"
    res, _, _ = _run(f"import os; print(os.getuid(), os.path.exists({str(ROOT / 'solutions')!r}))",
                     tmp_path)
    assert res.stdout.decode().split() == ["65534", "False"], res.stderr


FORK_HOG = """
import os, sys, time
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(int(sys.argv[1]) << 20)  # each under the per-process limit
        for i in range(0, len(block), 4096):
            block[i] = 1
        print("child holds", len(block) >> 20, "MiB", flush=True)
        time.sleep(60)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
print("all done")
"""


@pytest.mark.parametrize("mode", [pytest.param("auto", marks=needs_bwrap), "fallback"])
def test_the_memory_of_all_processes_together_is_bounded(tmp_path, mode):
    """Issue 38, class 6: four children of 150 MiB each (each within its own limit) hold
    600 MiB together; the watchdog kills the tree at the submission's budget."""
    sb = sbx.Sandbox(mode=mode, limits=sbx.Limits(memory_mb=512))
    budget = sbx.process_mb(sb.limits)
    assert 150 < budget < 600
    work = tmp_path / "work"
    work.mkdir()
    start = time.monotonic()
    res = sbx.run([sys.executable, "-c", FORK_HOG, "150"], workdir=str(work), sb=sb,
                  course_root=str(tmp_path), timeout=60)
    assert res.exceeded == f"used more than {budget} MiB", (res, res.stderr)
    assert b"all done" not in res.stdout and not res.timed_out
    assert time.monotonic() - start < 50


@pytest.mark.parametrize("mode", [pytest.param("auto", marks=needs_bwrap), "fallback"])
def test_the_number_of_processes_is_bounded(tmp_path, mode):
    code = """
import threading, time
n = 0
try:
    for _ in range(200):
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        n += 1
except RuntimeError as exc:
    print("refused at", n, flush=True)
time.sleep(3)
print("started", n)
"""
    sb = sbx.Sandbox(mode=mode, limits=sbx.Limits(nproc=40))
    work = tmp_path / "work"
    work.mkdir()
    res = sbx.run([sys.executable, "-c", code], workdir=str(work), sb=sb,
                  course_root=str(tmp_path), timeout=60)
    out = res.stdout.decode()
    # refused by RLIMIT_NPROC (its own uid) or killed by the watchdog: never 200 threads
    assert "started 200" not in out, (out, res.stderr)
    assert "refused at" in out or res.exceeded == "started more than 40 processes", out


def test_a_folder_to_expose_that_would_show_the_course_is_refused(tmp_path):
    """allowed_paths: a site-packages holding a package named tests is bound; the course, a
    folder holding it, one named like an instructor-side folder, or one that looks like a
    course root, is not."""
    site = tmp_path / "env" / "site-packages"
    (site / "tests").mkdir(parents=True)  # a sloppy wheel's top-level package
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    other = tmp_path / "other"
    (other / "submitted").mkdir(parents=True)
    named = tmp_path / "x" / "lessons"
    named.mkdir(parents=True)
    inside = course / "solutions" / "01"
    inside.mkdir()
    sb = sbx.Sandbox(expose=[str(p) for p in (site, course, tmp_path, other, named, inside)])
    got = set(sbx.allowed_paths(sb, str(course), None))
    assert str(site.resolve()) in got
    for p in (course, tmp_path, other, named, inside):
        assert str(p.resolve()) not in got, p


@pytest.mark.skipif(os.geteuid() != 0, reason="the second profile is root's")
def test_as_root_where_bwrap_cannot_drop_the_user_namespace_profile_is_used(tmp_path,
                                                                           monkeypatch):
    """A container where root's bwrap cannot mount without a user namespace: the probe
    falls back to the user-namespace profile (nobody inside, the same allow-list), and the
    summary says what that means."""
    real = sbx._probe
    monkeypatch.setattr(sbx, "_probe", lambda sb, path, prof: (
        (False, "bwrap cannot create its namespaces here: (test)") if prof == "drop"
        else real(sb, path, prof)))
    monkeypatch.setattr(sbx, "_probed", {})
    sb = sbx.Sandbox(limits=sbx.Limits(nproc=64))
    ok, _ = sbx.isolation(sb)
    if not ok:
        pytest.skip("bwrap cannot make a user namespace here either")
    assert sbx.profile(sb) == "userns" and "user namespace" in sbx.privilege_note(True)
    work = tmp_path / "work"
    work.mkdir()
    res = sbx.run([sys.executable, "-c", "import os, subprocess; subprocess.run(['true']); "
                   f"print(os.getuid(), os.path.exists({str(ROOT / 'solutions')!r}))"],
                  workdir=str(work), sb=sb, course_root=str(tmp_path), timeout=60)
    assert res.stdout.decode().split() == ["65534", "False"], res.stderr  # and it can fork


def test_the_fallbacks_working_folder_is_watched_too(tmp_path):
    """Without bubblewrap the working folder is a host folder, with no size of its own: the
    watchdog ends a command that writes more than the scratch's budget there."""
    code = """
import time
for i in range(120):
    with open(f"fill{i}.bin", "wb") as fh:
        fh.write(b"1" * (1 << 20))
time.sleep(20)
print("survived")
"""
    sb = sbx.Sandbox(mode="fallback", limits=sbx.Limits(memory_mb=256))  # scratch: 64 MiB
    work = tmp_path / "work"
    work.mkdir()
    res = sbx.run([sys.executable, "-c", code], workdir=str(work), sb=sb,
                  course_root=str(tmp_path), timeout=60)
    assert res.exceeded == f"wrote more than {sbx.tmpfs_mb(sb.limits)} MiB", (res, res.stderr)
    assert b"survived" not in res.stdout


@needs_bwrap
def test_the_feedback_runs_working_folder_cannot_grow_past_its_budget(tmp_path, monkeypatch):
    """Issue 38, class 6, end to end: a cell that writes 600 MiB into its working folder
    under a 1024 MiB budget stops at the scratch's size (ENOSPC in that cell), the run goes
    on to the next cell, and nothing of it reaches the host."""
    import nbformat

    from cudacourse.grader import prepare

    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(
            "import os\nn = 0\ntry:\n    for i in range(600):\n"
            "        with open(f'fill{i}.bin', 'wb') as fh:\n"
            "            fh.write(b'1' * (1 << 20))\n        n += 1\n"
            "except OSError as exc:\n    print('stopped after', n, 'MiB:', exc.strerror)\n"),
        nbformat.v4.new_code_cell("print('next cell ran in', os.getcwd())")])
    opts = {**prepare.DEFAULTS, "timeout": 120, "audit": False,
            "sandbox": {"limits": {"memory_mb": 1024}}}
    # a temporary folder of this test's own: another worker's grading makes its own
    # cudacourse-run-* folders in the shared /tmp meanwhile
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(own_tmp))
    before = set(Path(tempfile.gettempdir()).iterdir())
    outputs, incidents, isolation = prepare.feedback_run(nb, opts, str(tmp_path), None, {})
    assert isolation == "bwrap" and outputs is not None, incidents
    first = "".join(o.get("text", "") for o in outputs[0])
    scratch = sbx.tmpfs_sizes(sbx.Limits(memory_mb=1024))[sbx.SCRATCH] >> 20
    n = int(first.split("stopped after ")[1].split()[0])
    assert n <= scratch and "No space left" in first, first
    assert "next cell ran in " + sbx.SCRATCH in "".join(o.get("text", "") for o in outputs[1])
    after = set(Path(tempfile.gettempdir()).iterdir())
    assert not any(p.name.startswith("cudacourse-run-") for p in after - before)


@needs_bwrap
def test_the_systems_library_search_works_for_the_sandboxs_uid(tmp_path):
    """/etc is reachable by the unprivileged uid (bwrap made it 0700 and root's as the
    parent of the bound /etc files): the dynamic loader's cache is readable, so a CUDA
    runtime found by the system's search (/usr/local/cuda's, through ld.so.conf.d) loads
    inside the sandbox as outside; without it every verdict of a class graded from a venv
    that holds no NVIDIA wheels ended "grader error: Failure finding libcudart"."""
    code = """
import os
print(os.access("/etc", os.X_OK), os.access("/etc/ld.so.cache", os.R_OK) or
      not os.path.exists("/etc/ld.so.cache"), os.access("/etc/passwd", os.R_OK))
"""
    res, _, _ = _run(code, tmp_path)
    assert res.stdout.decode().split() == ["True", "True", "True"], (res.stdout, res.stderr)
