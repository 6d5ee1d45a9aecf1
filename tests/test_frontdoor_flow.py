"""The instructor's round trip as one path, from the front door, with the package as installed.

A scratch venv gets cudacourse from a wheel built from this checkout (non-editable; the
dependencies are this environment's, seen through a path file, so nothing is downloaded but
the build's own setuptools, from pip's cache). From a folder outside the checkout, the command
blocks of docs/instructors.md's "The round trip, command by command", read from the page and
run as written (the test's paths and test-only options added): ``cudacourse new-course``
(lesson 1 only, the exchange's root), its master trimmed to the graded cells
(tests/lightcourse.py: the demos decide no score and cost most of the time), ``nbgrader
generate_assignment`` and ``release_assignment``; three students fetch and submit through the
exchange, each from their own home: ``early`` (right answers, in the Japanese edition: a mixed
class in one course), ``glitch`` (right answers, the kernel's answer cell without its nbgrader
metadata: an incident) and, after the due date, ``tardy`` (right answers, late); ``absent`` is
on the roster and hands in nothing. Then ``cudacourse collect``, ``cudacourse grade``,
``cudacourse feedback --release``, ``cudacourse report``, ``nbgrader export``, and each student
``nbgrader fetch_feedback``; and ``cudacourse lab --instructor`` serves formgrader, opened in
Chromium at ``/``.

The students run under the test's one user id: distinct ids need an interpreter every id can
run, and here Python lives under /root (mode 0700), so a process that dropped to another uid
could not start it. Each student has a home, a cache and a ``--student`` name of their own, as
nbgrader's exchange sees them; the exchange's per-user permissions (another student's inbound
folder unreadable) are what this test does not show.

Shown: every student's feedback comes back into their own folder; every formgrader list opened
twice in one browser context fills both times (a nonce page is never revalidated) and every
page loads under the Content-Security-Policy (no CSP error in the console, no "Loading, please
wait" left, MathJax running); nothing is requested from any origin but the server's; the late
submission is marked in every list; the incident is a Grading note in formgrader and in the
feedback; the Japanese learner's pages are in Japanese; no correct feedback holds a
traceback; formgrader's "Generate feedback" and "Release feedback" succeed; nbgrader says
nothing about a relative root; the report has a section per student and an export that tells
"did not submit" from 0.
"""

from __future__ import annotations

import csv
import os
import shlex
import subprocess
import sys
import sysconfig
import time
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest

from cudacourse.course import authoring
from cudacourse.grader import policy

import lightcourse
from test_grader_distributed import build

pytestmark = [pytest.mark.browser, pytest.mark.grading]

pytest.importorskip("jupyterlab", reason="JupyterLab is not installed here")

ROOT = authoring.ROOT
A = "01_gpu_vs_cpu"
NB = f"{A}.ipynb"
VENV = Path(sys.prefix)  # this environment: the dependencies the scratch venv sees
STUDENTS = ("early", "glitch", "tardy")
JA_MASTER = ROOT / "solutions" / "ja" / A / NB
JA_LEARNER = ROOT / "notebooks" / "ja" / A / NB


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """cudacourse as a wheel, built once per session (pip caches the build's setuptools)."""
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                           str(out), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (found,) = out.glob("cudacourse-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> dict:
    """A venv with the wheel installed and this environment's packages behind it."""
    venv = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                "get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True).stdout.strip())
    # the environment's packages as a plain path line (first: "_0" sorts before the rest),
    # then its .pth hooks (numba-cuda's redirector) but the editable checkout's, so
    # `cudacourse` can only come from the wheel
    theirs = Path(sysconfig.get_paths()["purelib"])
    (site / "_0_environment.pth").write_text(f"{theirs}\n")
    for pth in theirs.glob("*.pth"):
        if not pth.name.startswith("__editable__"):
            (site / pth.name).write_text(pth.read_text())
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                           "--no-deps", "--no-index", "-q", str(wheel)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "PYTHON"))}
    env.update({
        "PATH": f"{venv / 'bin'}{os.pathsep}{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        # nbgrader's server extension, JupyterLab's and nbconvert's files: this environment's
        "JUPYTER_PATH": str(VENV / "share" / "jupyter"),
        "JUPYTER_CONFIG_PATH": str(VENV / "etc" / "jupyter"),
        "CUDACOURSE_QUIET": "1"})
    return {"venv": venv, "python": python, "site": site, "env": env,
            "bin": venv / "bin"}


def _run(inst: dict, *args: str, cwd: Path, env: dict | None = None,
         timeout: int = 900) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env or inst["env"],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


DOCS = ROOT / "docs" / "instructors.md"


def doc_commands(block: str) -> list[list[str]]:
    """The commands of docs/instructors.md's block ``<!-- round trip: BLOCK -->``: its
    indented lines, each split as a shell would (comments dropped)."""
    text = DOCS.read_text()
    marker = f"<!-- round trip: {block} -->"
    assert marker in text, f"docs/instructors.md lost its {marker!r} block"
    lines = text.split(marker, 1)[1].lstrip("\n").splitlines()
    out = []
    for line in lines:
        if not line.startswith("    "):
            break
        out.append(shlex.split(line, comments=True))
    assert out, marker
    return out


def _as_documented(command: list[str], paths: dict[str, str], extra: dict[str, list[str]]
                   ) -> list[str]:
    """A documented command with the test's paths and its test-only options (by the
    command's name: ``"grade"`` for ``cudacourse grade``)."""
    args = [paths.get(a, a) for a in command]
    key = args[1] if args[0] in ("cudacourse", "nbgrader") and len(args) > 1 else args[0]
    return args + extra.get(key, [])


def _run_doc(inst: dict, block: str, cwd: Path, paths: dict[str, str],
             extra: dict[str, list[str]], env: dict | None = None,
             before: dict | None = None) -> tuple[Path, dict[str, subprocess.CompletedProcess]]:
    """Run a documented block as written; ``cd`` moves on; ``before[name]()`` runs before
    the command of that name. Returns the folder it ended in and each command's result."""
    done = {}
    for command in doc_commands(block):
        args = _as_documented(command, paths, extra)
        if args[0] == "cd":
            cwd = Path(args[1])
            continue
        name = args[1] if args[0] in ("cudacourse", "nbgrader") else args[0]
        if before and name in before:
            before[name]()
        tool = inst["bin"] / args[0] if args[0] == "cudacourse" else None
        argv = ([tool, *args[1:]] if tool else
                [inst["python"], "-m", "nbgrader", *args[1:]] if args[0] == "nbgrader" else args)
        done[name] = _run(inst, *argv, cwd=cwd, env=env)
    return cwd, done


@pytest.fixture(scope="module")
def term(installed, tmp_path_factory) -> dict:
    """One term of a lesson-1 class, run as docs/instructors.md's round trip says (its
    command blocks, read from the page), outside the checkout."""
    base = tmp_path_factory.mktemp("term")
    course, exchange = base / "gpu-2027", base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)  # as on a hub: every user writes to inbound/
    paths = {"~/courses/gpu-2027s": str(course), "/path/to/checkout": str(ROOT),
             "/srv/nbgrader/exchange": str(exchange)}
    master_path = course / "solutions" / A / NB

    def light() -> None:  # the graded cells only (the demos decide nothing, cost minutes)
        nbformat.write(lightcourse.trim(nbformat.read(master_path, 4)), master_path)

    _run_doc(installed, "instructor", base, paths, {"new-course": ["--assignment", "01"]},
             before={"generate_assignment": light})
    learner = nbformat.read(course / "notebooks" / A / NB, 4)
    master = nbformat.read(master_path, 4)
    due = None
    homes = {}
    for student in STUDENTS:
        if student == "tardy":  # the deadline falls before the last one hands in
            time.sleep(0.5)
            due = datetime.now(timezone.utc)
            time.sleep(1.5)
        home = homes[student] = base / "home" / student
        home.mkdir(parents=True)
        env = {**installed["env"], "HOME": str(home)}
        who = [f"--Exchange.root={exchange}", "--CourseDirectory.course_id=cudacourse"]

        def work(student=student, home=home) -> None:  # between fetch and submit
            if student == "early":  # the Japanese edition, in the English course
                nb, _ = build("correct", nbformat.read(JA_LEARNER, 4),
                              nbformat.read(JA_MASTER, 4))
            else:
                nb, _ = build("correct", learner, master)
            if student == "glitch":  # the kernel's answer cell lost its nbgrader metadata
                cell = next(c for c in nb.cells
                            if c.metadata.get("nbgrader", {}).get("grade_id") == "vector_add")
                cell.metadata.pop("nbgrader")
            nbformat.write(nb, home / A / NB)

        _run_doc(installed, "student", home, paths,
                 {"fetch_assignment": who, "submit": [*who, f"--student={student}"]},
                 env=env, before={"submit": work})
    # who owns which inbound entry: here every student ran `nbgrader submit` as this test's
    # own account (one uid: no second account to run as), so the roster names it for each
    # (docs/instructors.md, "Who handed in"); on a hub each has their own
    (course / "roster.csv").write_text("student_id,uid\n" + "".join(
        f"{s},{os.getuid()}\n" for s in (*STUDENTS, "absent")))
    with open(course / "nbgrader_config.py", "a") as fh:
        fh.write(f"\nc.CoursePolicy.due = {{{A!r}: {policy.utc_timestamp(due)!r}}}\n"
                 "c.LatePenalty.penalty_method = 'percent_per_day'\n")
    _, done = _run_doc(installed, "grade", course, paths, {
        "grade": ["--workers", "2", "--timeout", "60", "--no-progress"],
        "report": ["--no-plot"]})
    fetched = {}
    for student in STUDENTS:
        env = {**installed["env"], "HOME": str(homes[student])}
        _, got = _run_doc(installed, "feedback", homes[student], paths, {"fetch_feedback": [
            f"--Exchange.root={exchange}", "--CourseDirectory.course_id=cudacourse"]},
            env=env)
        fetched[student] = got["fetch_feedback"]
    return {"course": course, "graded": done["grade"].stdout, "base": base, "homes": homes,
            "released": done["feedback"], "fetched": fetched,
            "all_output": "".join(p.stdout + p.stderr for p in done.values())}


def test_the_package_comes_from_the_wheel_and_the_course_from_its_own_folder(installed,
                                                                             term):
    where = subprocess.run([str(installed["python"]), "-c",
                            "import cudacourse.grader.latelist as m; print(m.__file__)"],
                           env=installed["env"], cwd=term["base"], capture_output=True,
                           text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(installed["site"]), where  # not the checkout's src/
    course = term["course"]
    assert not course.is_relative_to(ROOT)
    assert sorted(p.name for p in (course / "solutions").iterdir()) == [A]  # no "ja"
    assert (course / "docs" / "benchmarks.json").is_file()
    for student in STUDENTS:  # every one collected from the exchange, with its time
        assert (course / "submitted" / student / A / "timestamp.txt").is_file()
    assert "LATE" in term["graded"]  # the grading table says it too


@pytest.fixture(scope="module")
def front_door(installed, term, jupyter_server):
    """``cudacourse lab --instructor`` as installed, on a free port; its URL."""
    def command(port: int) -> list[str]:
        return [str(installed["bin"] / "cudacourse"), "lab", "--instructor", "--course",
                str(term["course"]), "--no-browser", f"--ServerApp.port={port}",
                "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token="]

    with jupyter_server(command, "/formgrader", cwd=term["course"],
                        env=installed["env"]) as url:
        yield url


class Watch:
    """A page's console errors about the policy and its requests to other origins."""

    def __init__(self, page, origin: str) -> None:
        self.csp: list[str] = []
        self.foreign: list[str] = []
        page.on("console", lambda m: self.csp.append(m.text) if m.type == "error" and (
            "Content Security Policy" in m.text or "Refused" in m.text) else None)
        page.on("pageerror", lambda e: self.csp.append(f"uncaught: {e}"))

        def request(r) -> None:
            parts = urlsplit(r.url)
            if parts.scheme in ("http", "https", "ws", "wss") and \
                    f"{parts.scheme}://{parts.netloc}".replace("ws", "http", 1) != origin:
                self.foreign.append(r.url)
        page.on("request", request)


def _loaded(page) -> str:
    """The page's list once nbgrader's scripts have filled it (never 'Loading...')."""
    page.wait_for_function("() => { const t = document.getElementById('main-table');"
                           " return t && !t.innerText.includes('Loading, please wait'); }",
                           timeout=30_000)
    page.wait_for_timeout(500)  # the late labels come from one more request
    return page.inner_text("#main-table")


def _late_rows(page) -> list[str]:
    return page.eval_on_selector_all(
        "#main-table tr", "rows => rows.filter(r => r.querySelector('.cudacourse-late'))"
                          ".map(r => r.innerText)")


def _ids(course: Path) -> dict[str, str]:
    env_path = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env_path}"  # nbgrader runs alembic
    try:
        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{course}/gradebook.db") as gb:
            return {s: gb.find_submission_notebook(A, A, s).id for s in STUDENTS}
    finally:
        os.environ["PATH"] = env_path


def _summary(student: str) -> str:
    return "text=概要:" if student == "early" else "text=Summary:"


def _formgrader_api(page, path: str) -> dict:
    """POST to formgrader's API as its buttons do (the _xsrf cookie as X-CSRFToken)."""
    return page.evaluate("""async (path) => {
        const xsrf = (document.cookie.match(/(?:^|; )_xsrf=([^;]*)/) || [])[1] || "";
        const r = await fetch(path, {method: "POST", headers: {"X-CSRFToken":
            decodeURIComponent(xsrf)}});
        return {status: r.status, body: await r.json()};
    }""", path)


def test_every_page_from_the_front_door(front_door, term, browser):
    course = term["course"]
    page = browser.new_context().new_page()  # one context: a revisit meets its cache
    watch = Watch(page, front_door)
    page.goto(front_door + "/")  # the front door: where an instructor lands
    assert page.url.endswith("/formgrader/manage_assignments"), page.url
    assert A in _loaded(page)
    # the lists a grader reads: the late submission marked in each, and only it
    lists = {"/formgrader/manage_assignments": None,
             f"/formgrader/manage_submissions/{A}": ["tardy"],
             "/formgrader/manage_students": ["tardy"],
             "/formgrader/manage_students/tardy": [A],
             f"/formgrader/manage_students/tardy/{A}": [A],
             "/formgrader/gradebook": ["1 late"],
             f"/formgrader/gradebook/{A}": ["1 late"],
             f"/formgrader/gradebook/{A}/{A}": ["late"]}
    for visit in (1, 2):  # issue 39: the second visit went blank (a 304 with a new nonce)
        for path, marked in lists.items():
            page.goto(front_door + path)
            _loaded(page)
            if marked is None:
                continue
            rows = _late_rows(page)
            assert len(rows) == 1, (visit, path, rows)
            assert all(m in rows[0] for m in marked), (visit, path, rows)
            assert "early" not in rows[0] and "glitch" not in rows[0], (visit, path, rows)
        assert watch.csp == [], (visit, watch.csp)
    page.goto(front_door + f"/formgrader/manage_students/early/{A}")
    _loaded(page)
    assert _late_rows(page) == []
    ids = _ids(course)
    for student in STUDENTS:  # each submission as formgrader shows it
        page.goto(front_door + f"/formgrader/submissions/{ids[student]}")
        page.wait_for_selector(_summary(student), timeout=60_000)
        page.wait_for_function("() => window.MathJax && window.MathJax.Hub", timeout=30_000)
        text = page.inner_text("body")
        assert ("Grading note" in text) == (student == "glitch"), student
        if student == "glitch":
            assert "lost its nbgrader" in text
    for student in STUDENTS:  # the feedback, as the server shows it
        page.goto(front_door + f"/files/feedback/{student}/{A}/{A}.html",
                  referer=front_door + "/lab")
        page.wait_for_selector(_summary(student), timeout=60_000)
        text = page.inner_text("body")
        assert "Traceback" not in text and "Error:" not in text, student  # all correct
        assert ("Grading note" in text) == (student == "glitch"), student
        if student == "tardy":  # one score on the page: after the late penalty
            assert "before the late penalty" in text
        if student == "early":  # the Japanese edition's learner reads Japanese
            assert "Summary" not in text and "採点対象のセルはすべて正解" in text
    # formgrader's own feedback buttons, through the API they call
    page.goto(front_door + "/formgrader/manage_assignments")
    _loaded(page)
    for step in ("generate_feedback", "release_feedback"):
        got = _formgrader_api(page, f"/formgrader/api/assignment/{A}/{step}")
        assert got["status"] == 200 and got["body"].get("success"), (step, got)
    assert watch.csp == [], watch.csp
    assert watch.foreign == [], watch.foreign


def test_every_student_fetches_their_own_feedback(term):
    """Issue 39: release_feedback failed for every student (the secret had moved under
    learner-files/); now each student's fetch_feedback brings their own page home."""
    course = term["course"]
    for student in STUDENTS:
        (got,) = (term["homes"][student] / A / "feedback").glob(f"*/{A}.html")
        assert got.read_bytes() == (course / "feedback" / student / A / f"{A}.html"
                                    ).read_bytes(), student
        assert "Fetched feedback" in term["fetched"][student].stderr + \
            term["fetched"][student].stdout
    pages = {term["homes"][s] / A / "feedback" for s in STUDENTS}
    assert len(pages) == len(STUDENTS)
    assert "is not absolute" not in term["all_output"]  # nbgrader's root is absolute


def test_the_export_lists_the_class(term):
    with open(term["course"] / "grades.csv") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {*STUDENTS, "absent"}
    assert float(rows["early"]["score"]) == float(rows["early"]["max_score"]) > 0
    assert float(rows["tardy"]["late_submission_penalty"]) > 0


def test_the_report_has_a_section_per_student_and_the_export_says_who_did_not_submit(term):
    report = term["course"] / "grading" / A / "report"
    text = (report / "summary.md").read_text()
    for student in STUDENTS:
        section = text.split(f"### {student}\n")[1].split("###")[0]
        link = f"(../../../feedback/{student}/{A}/{A}.html)"
        assert link in section, section
        assert (report / link[1:-1]).resolve().is_file()
    assert "late" in text.split("### tardy\n")[1].split("###")[0]
    assert "Did not submit (1): absent." in text
    with open(report / "lms.csv") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert (rows["absent"]["submitted"], rows["absent"]["score"]) == ("no", "")
    assert rows["early"]["submitted"] == "yes" and float(rows["early"]["score"]) > 0
    assert float(rows["tardy"]["score"]) < float(rows["early"]["score"])  # the penalty
