"""The collection paths instructors use (docs/instructors.md, "2. Collect"), hostile included.

An LMS download (``cudacourse collect-zip``), nbgrader's exchange (``nbgrader collect`` for
honest inbound folders, ``cudacourse collect`` for any), and copies of home folders
(``cp -a``, ``tar``, ``rsync -a``), which keep links and special files: whatever arrives,
nothing outside the course is written or read, and intake names what it refuses.
"""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import nbformat
import pytest

from cudacourse.course import authoring
from cudacourse import cli
from cudacourse.grader import collect, intake

ROOT = authoring.ROOT
A = "01_gpu_vs_cpu"
NB = f"{A}.ipynb"
SECRET = "instructor-only: password=swordfish-41"


@pytest.fixture
def course(tmp_path):
    root = tmp_path / "course"
    shutil.copytree(ROOT / "solutions" / A, root / "solutions" / A)
    secret = tmp_path / "instructor.txt"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    return root


def _notebook() -> bytes:
    return nbformat.writes(nbformat.read(ROOT / "solutions" / A / NB, 4)).encode()


def _entry(zf: zipfile.ZipFile, name: str, data: bytes = b"x", mode: int | None = None):
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    if mode is not None:
        info.create_system = 3
        info.external_attr = mode << 16
    zf.writestr(info, data)


def _outside(tmp_path: Path) -> set[str]:
    """Everything under tmp_path but the course (what a climbing entry would write)."""
    return {str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
            if "course" not in p.relative_to(tmp_path).parts}


def _stage(course: Path, student: str):
    box = {}

    def run():
        try:
            box["staged"] = intake.stage(course, A, student, course / "staging")
        except intake.NotGraded as exc:
            box["not_graded"] = str(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), f"intake of {student} still reading after 30 s"
    return box


# --- an LMS download ------------------------------------------------------------------------

def test_a_zip_of_student_folders_is_collected_flat_or_nested(course, tmp_path):
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        _entry(zf, f"alice/{NB}", _notebook())
        _entry(zf, f"bob/{A}/{NB}", _notebook())
        _entry(zf, f"bob/{A}/timestamp.txt", b"2026-01-10 10:00:00.000000 UTC")
        _entry(zf, f"bob/{A}/.ipynb_checkpoints/{NB}", b"{}")  # a sub-folder: not collected
    done = collect.collect_zip(archive, course, A)
    assert sorted(done.collected) == ["alice", "bob"] and not done.refused
    for student in ("alice", "bob"):
        assert _stage(course, student)["staged"].notebooks
    # the learner's timestamp.txt is kept for display only; a zip carries no time of its
    # own unless the instructor names the LMS's zone (--archive-times)
    assert (course / "submitted" / "bob" / A / collect.LEARNER_TIMESTAMP).is_file()
    assert not (course / "submitted" / "bob" / A / "timestamp.txt").exists()
    again = collect.collect_zip(archive, course, A)  # already there: kept, unless --update
    assert sorted(again.skipped) == ["alice", "bob"]
    assert sorted(collect.collect_zip(archive, course, A, update=True).collected) == \
        ["alice", "bob"]


HOSTILE_ZIP = {  # student -> (entries, phrase of the refusal)
    "linker": ([(f"linker/{A}/{NB}", b"/etc/passwd", stat.S_IFLNK | 0o777)], "(a link)"),
    "climber": ([(f"climber/../../outside.txt", b"x", None)], "'..'"),
    "slasher": ([("slasher/..\\..\\outside.txt", b"x", None)], "backslash"),
    "piper": ([(f"piper/{A}/pipe", b"", stat.S_IFIFO | 0o644)], "(a named pipe)"),
    "devicer": ([(f"devicer/{A}/disk", b"", stat.S_IFBLK | 0o644)], "(a device)"),
    "bomber": ([(f"bomber/{A}/{NB}", b"\0" * (60 << 20), None)], "more than the 50 MiB"),
    "twice": ([(f"twice/{NB}", b"1", None), (f"twice/{NB}", b"2", None)], "twice"),
    "escaper": ([("escaper/a\x1b[2Jb.txt", b"x", None)], "control"),
}


def test_hostile_zip_entries_refuse_their_student_only_and_write_nothing_outside(
        course, tmp_path, capsys):
    archive = tmp_path / "download.zip"
    import warnings

    with zipfile.ZipFile(archive, "w") as zf, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Duplicate name": the point of one sample
        _entry(zf, f"alice/{NB}", _notebook())
        _entry(zf, "/tmp/absolute.txt", b"x")  # an absolute path: no student folder at all
        for entries, _phrase in HOSTILE_ZIP.values():
            for name, data, mode in entries:
                _entry(zf, name, data, mode)
    before = _outside(tmp_path)
    rc = cli.main(["collect-zip", str(archive), A, "--course", str(course)])
    out = capsys.readouterr().out
    assert rc == 1 and "collected: alice" in out
    done = collect.collect_zip(archive, course, A, update=True)
    assert done.collected == ["alice"]
    for student, (_entries, phrase) in HOSTILE_ZIP.items():
        assert phrase in done.refused[student], (student, done.refused)
        assert f"not collected: {student}: " in out
        assert not (course / "submitted" / student).exists()
    assert any("absolute path" in n for n in done.notes)
    assert "\x1b" not in out and "/etc/passwd" not in out
    assert _outside(tmp_path) == before and not Path("/tmp/absolute.txt").exists()
    kinds = {p.lstat().st_mode & 0o170000 for p in (course / "submitted").rglob("*")}
    assert kinds <= {stat.S_IFREG, stat.S_IFDIR}  # no link, pipe or device was made


def test_a_file_that_is_not_a_zip_is_named(course, tmp_path):
    bad = tmp_path / "download.zip"
    bad.write_bytes(b"PK not really")
    with pytest.raises(collect.CollectError, match="is not a zip archive"):
        collect.collect_zip(bad, course, A)


# --- copies of home folders ------------------------------------------------------------------

def _home(tmp_path: Path) -> Path:
    """A learner's home folder as it is: the notebook, a link to the instructor's file, a
    named pipe."""
    home = tmp_path / "home" / "ada" / A
    home.mkdir(parents=True)
    (home / NB).write_bytes(_notebook())
    (home / "data.csv").symlink_to(tmp_path / "instructor.txt")
    os.mkfifo(home / "pipe")
    return home.parent


COPIES = {
    "cp -a": lambda src, dest: ["cp", "-a", str(src), str(dest)],
    "tar": None,  # below: tar -cf, then tar -xf into submitted/
    "rsync -a": lambda src, dest: ["rsync", "-a", f"{src}/", f"{dest}/"],
}


@pytest.mark.parametrize("how", sorted(COPIES))
def test_a_copied_home_folder_keeps_its_link_and_pipe_and_intake_refuses_them(
        course, tmp_path, how):
    if shutil.which(how.split()[0]) is None:
        pytest.skip(f"{how.split()[0]} is not installed here")
    src = _home(tmp_path)
    dest = course / "submitted" / "ada"
    dest.parent.mkdir(parents=True, exist_ok=True)
    if how == "tar":
        subprocess.run(["tar", "-C", str(src.parent), "-cf", str(tmp_path / "h.tar"), "ada"],
                       check=True)
        subprocess.run(["tar", "-C", str(dest.parent), "-xf", str(tmp_path / "h.tar")],
                       check=True)
    else:
        subprocess.run(COPIES[how](src, dest), check=True, timeout=60)
    assert (dest / A / "data.csv").is_symlink()  # the copy kept the link, as documented
    assert stat.S_ISFIFO((dest / A / "pipe").lstat().st_mode)
    box = _stage(course, "ada")
    assert box["not_graded"] == "data.csv is not a regular file (a link)"
    assert SECRET not in box["not_graded"]


# --- nbgrader's exchange ---------------------------------------------------------------------

STAMP = "2026-01-10 10:00:00.000000 UTC"


def _exchange(course: Path, tmp_path: Path, hostile: bool) -> Path:
    inbound = tmp_path / "exchange" / "gpu101" / "inbound"
    inbound.mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.course_id = 'gpu101'\n"
        f"c.Exchange.root = {str(tmp_path / 'exchange')!r}\n")

    def submit(student: str, stamp: str, extra=None) -> Path:
        d = inbound / f"{student}+{A}+{stamp}+r4nd0m"
        d.mkdir()
        (d / NB).write_bytes(_notebook())
        (d / "timestamp.txt").write_text(stamp)
        if extra:
            extra(d)
        return d

    submit("ada", "2026-01-09 09:00:00.000000 UTC", lambda d: (d / NB).write_text("older"))
    submit("ada", STAMP)
    if hostile:  # a learner writes into the inbound directly
        submit("eve", STAMP, lambda d: (d / "data.csv").symlink_to(tmp_path / "instructor.txt"))
        submit("mal", STAMP, lambda d: os.mkfifo(d / "notes"))
    return inbound


def test_cudacourse_collect_takes_the_latest_and_refuses_links_and_pipes(course, tmp_path):
    _exchange(course, tmp_path, hostile=True)
    me = os.geteuid()  # every folder here is this user's: the roster says it is theirs
    done = collect.collect_exchange(course, A, account=lambda student: me)
    assert done.collected == ["ada"]
    assert done.refused == {"eve": "data.csv is not a regular file (a link)",
                            "mal": "notes is not a regular file (a named pipe)"}
    # the learner's (backdated) time is kept for display; timestamp.txt is the collector's
    assert (course / "submitted" / "ada" / A / collect.LEARNER_TIMESTAMP).read_text() == STAMP
    assert (course / "submitted" / "ada" / A / "timestamp.txt").read_text() != STAMP
    assert _stage(course, "ada")["staged"].notebooks  # the latest, not "older"
    assert not (course / "submitted" / "eve").exists()


def test_nbgrader_collect_of_an_honest_inbound_is_graded_by_intake(course, tmp_path):
    """Stock ``nbgrader collect`` (shutil.copytree, which follows links: hence the advice to
    use ``cudacourse collect`` when learners can write the inbound) on honest folders."""
    _exchange(course, tmp_path, hostile=False)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "collect", A], cwd=course,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (course / "submitted" / "ada" / A / "timestamp.txt").read_text() == STAMP
    assert _stage(course, "ada")["staged"].notebooks


# --- a class of them, graded ----------------------------------------------------------------

@pytest.mark.grading
def test_a_class_of_hostile_folders_ends_records_everyone_and_leaks_nothing(tmp_path):
    """The FILES samples with their classmate ``correct``, a forger of every grader record and
    a notebook nested 100,000 levels deep, through ``cudacourse grade`` (verdicts only, a
    short timeout: the point is what arrives, not what runs): the class ends, everyone is
    recorded, the forger gets its real 0 and its real first lost cell, and neither the
    instructor's secret nor a forged record's text is in any record, note or line."""
    import csv
    import importlib.util
    import json

    import lightcourse

    spec = importlib.util.spec_from_file_location(
        "grading_samples", ROOT / "tests" / "submissions" / "samples.py")
    samples = sys.modules.get("grading_samples") or importlib.util.module_from_spec(spec)
    if "grading_samples" not in sys.modules:
        sys.modules["grading_samples"] = samples
        spec.loader.exec_module(samples)
    course = tmp_path / "course"
    course.mkdir()
    lightcourse.write(course)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    db = f"--db=sqlite:///{course}/gradebook.db"
    release = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", A,
                              "--force", db], cwd=course, env=env, capture_output=True,
                             text=True, timeout=600)
    assert release.returncode == 0, release.stderr[-2000:]
    names = {"correct", "files_forged_records", "deep_nested", *samples.FILES}
    want = samples.write(course, course / "notebooks" / A / NB, course / "solutions" / A / NB,
                         only=names)
    assert set(want) == names
    proc = subprocess.run([sys.executable, "-m", "cudacourse.cli", "grade", A, "--course",
                           str(course), "--timeout", "20", "--no-feedback-run",
                           "--no-progress"], cwd=course, env=env, capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 1, proc.stderr[-3000:]  # 1: some were not graded
    run = json.loads((course / "grading" / A / "latest.json").read_text())
    got = {r["student"]: r for r in run["results"]}
    assert set(got) == names  # everyone recorded, the folder that is a link included
    with open(course / "grading" / A / "status.csv", newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert set(rows) >= names
    for name, w in want.items():
        if w["not_graded"]:
            assert got[name]["status"] == "not_graded", (name, got[name])
            assert w["not_graded"] in got[name]["reason"], (name, got[name]["reason"])
            assert rows[name]["status"] == "not_graded"
        else:
            assert got[name]["status"] == "graded", (name, got[name])
            assert sum(got[name]["scores"].values()) == w["total"], (name, got[name])
    assert want["correct"]["total"] > 0
    assert samples.FORGED not in got["files_forged_records"]["lost"]
    assert got["files_forged_records"]["lost"].startswith("test_")  # the real first lost
    assert samples.leaks(course, proc.stdout, proc.stderr) == []
    assert samples.refused_reached_nothing(course) == []


def test_the_docs_name_every_collection_path_and_every_hostile_class():
    """docs/instructors.md (section 2 and the threat model) held to the code."""
    import importlib.util

    from cudacourse.grader import runner, sandbox

    spec = importlib.util.spec_from_file_location(
        "grading_samples", ROOT / "tests" / "submissions" / "samples.py")
    samples = sys.modules.get("grading_samples") or importlib.util.module_from_spec(spec)
    if "grading_samples" not in sys.modules:
        sys.modules["grading_samples"] = samples
        spec.loader.exec_module(samples)
    doc = (ROOT / "docs" / "instructors.md").read_text()
    for name in [*samples.FILES, "files_forged_records", "deep_nested", "tmpfs_fill"]:
        assert f"`{name}`" in doc, name
    for command in ("cudacourse collect-zip", "cudacourse collect 01", "nbgrader collect",
                    "rsync -a", "cp -a", "tar"):
        assert command in doc, command
    for sub in ("collect-zip", "collect"):
        with pytest.raises(SystemExit) as e:
            cli.main([sub, "--help"])
        assert e.value.code == 0
    assert sandbox.tmpfs_mb(sandbox.Limits()) == 256 == sandbox.tmpfs_mb(
        sandbox.Limits(memory_mb=4096))  # "a quarter of the limit, at most 256 MiB"
    assert sandbox.tmpfs_mb(sandbox.Limits(memory_mb=512)) == 128
    d = runner.stage_deadlines(runner.DEFAULT_OPTIONS)
    assert "intake 120 s" in doc and d["intake"] == 120 and d["report"] == 120


# --- who handed in, and when (issue #38 items 1, 2, 4; #39 item 5) ----------------------------

def _inbound(course: Path, tmp_path: Path) -> Path:
    inbound = tmp_path / "exchange" / "gpu101" / "inbound"
    inbound.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\nc.CourseDirectory.course_id = 'gpu101'\n"
        f"c.Exchange.root = {str(tmp_path / 'exchange')!r}\n")
    return inbound


def _hand_in(inbound: Path, name: str, marker: str, stamp: str = STAMP) -> Path:
    d = inbound / name
    d.mkdir()
    nb = nbformat.read(ROOT / "solutions" / A / NB, 4)
    nb.metadata["marker"] = marker  # whose folder this copy came from
    (d / NB).write_text(nbformat.writes(nb))
    (d / "timestamp.txt").write_text(stamp)
    return d


def _marker(course: Path, student: str) -> str:
    return nbformat.read(course / "submitted" / student / A / NB, 4).metadata["marker"]


# The accounts of the class, and the owner of each entry, modelled: this process cannot give
# a folder to another user unless it runs as root (test_a_folder_given_to_the_victim... does
# that for real when it can). collect_exchange takes both lookups as parameters.
UIDS = {"ada": 2001, "bob": 2002, "mal": 2003}


def test_an_entry_named_for_a_classmate_but_owned_by_another_is_not_theirs(course, tmp_path):
    inbound = _inbound(course, tmp_path)
    owners = {}
    owners[_hand_in(inbound, f"ada+{A}+2026-01-10 09:00:00.000000 UTC+aaa", "genuine").name] = 2001
    # mal's later folder named for ada: the impersonation of issue #38 item 1
    owners[_hand_in(inbound, f"ada+{A}+2026-01-11 09:00:00.000000 UTC+mmm", "forged").name] = 2003
    owners[_hand_in(inbound, f"bob+{A}+2026-01-11 09:00:00.000000 UTC+mmm", "forged2").name] = 2003
    done = collect.collect_exchange(course, A, account=UIDS.get,
                                    owner=lambda e: owners[e.name])
    assert done.collected == ["ada"] and _marker(course, "ada") == "genuine"
    assert not (course / "submitted" / "bob").exists()  # bob never handed in
    assert done.entries == {
        f"ada+{A}+2026-01-11 09:00:00.000000 UTC+mmm": "owned by uid 2003, not by ada's account",
        f"bob+{A}+2026-01-11 09:00:00.000000 UTC+mmm": "owned by uid 2003, not by bob's account"}
    assert "not collected: bob+" in "\n".join(done.lines())


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root "
                    "(the test above models ownership instead)")
def test_a_folder_given_to_the_victim_by_chown_is_judged_by_its_real_owner(course, tmp_path):
    inbound = _inbound(course, tmp_path)
    genuine = _hand_in(inbound, f"ada+{A}+2026-01-10 09:00:00.000000 UTC+aaa", "genuine")
    forged = _hand_in(inbound, f"ada+{A}+2026-01-11 09:00:00.000000 UTC+mmm", "forged")
    for d, uid in ((genuine, 2001), (forged, 2003)):
        for p in (d, *d.iterdir()):
            os.chown(p, uid, uid, follow_symlinks=False)
    done = collect.collect_exchange(course, A, account=UIDS.get)  # the real st_uid
    assert done.collected == ["ada"] and _marker(course, "ada") == "genuine"
    assert done.entries[forged.name].startswith("owned by uid 2003")


def test_a_student_without_an_account_is_named_not_guessed(course, tmp_path):
    inbound = _inbound(course, tmp_path)
    _hand_in(inbound, f"zed+{A}+2026-01-10 09:00:00.000000 UTC+a", "z")
    done = collect.collect_exchange(course, A, account=UIDS.get, owner=lambda e: 2001)
    assert not done.collected and "no account for zed" in "\n".join(done.lines())


def test_a_backdated_folder_name_and_timestamp_do_not_move_the_hand_in_time(course, tmp_path):
    from datetime import datetime, timedelta, timezone

    from cudacourse.grader import handins
    from nbgrader.utils import parse_utc

    inbound = _inbound(course, tmp_path)
    early = "2001-01-01 00:00:00.000000 UTC"  # what the learner claims
    _hand_in(inbound, f"ada+{A}+{early}+r", "late", stamp=early)
    me = os.geteuid()
    first = datetime.now(timezone.utc) - timedelta(hours=1)  # the collector's first sighting
    done = collect.collect_exchange(course, A, account=lambda s: me, now=first)
    assert done.collected == ["ada"]
    ok, when = handins.lookup(course, A, "ada")
    assert ok and when == first  # earlier than the folder's ctime (now): the sighting
    staged = intake.stage(course, A, "ada", course / "staging")
    stamp = parse_utc((staged.directory / "timestamp.txt").read_text())
    assert stamp == first.replace(tzinfo=None)  # what nbgrader reads: not 2001
    assert (course / "submitted" / "ada" / A / collect.LEARNER_TIMESTAMP).read_text() == early
    # collected again later, the same content keeps its first sighting
    again = collect.collect_exchange(course, A, account=lambda s: me, update=True,
                                     now=first + timedelta(days=3))
    assert again.collected == ["ada"] and handins.lookup(course, A, "ada")[1] == first
    # new content is new: its time is the later of the two (here the folder's own ctime)
    (next(inbound.iterdir()) / NB).write_bytes(_notebook())
    later = first + timedelta(days=3)
    collect.collect_exchange(course, A, account=lambda s: me, update=True, now=later)
    changed = handins.lookup(course, A, "ada")[1]
    assert first < changed <= later
    record = (course / "grading" / A / handins.RECORD)
    assert record.stat().st_mode & 0o777 == 0o600


def test_a_learner_timestamp_in_a_zip_is_display_only_and_zip_times_need_a_zone(course,
                                                                                  tmp_path):
    from datetime import datetime, timezone

    from cudacourse.grader import handins

    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        info = zipfile.ZipInfo(f"ada/{NB}", date_time=(2026, 1, 12, 8, 30, 0))
        zf.writestr(info, _notebook())
        info = zipfile.ZipInfo("ada/timestamp.txt", date_time=(2026, 1, 12, 8, 29, 0))
        zf.writestr(info, b"2001-01-01 00:00:00 UTC")
    collect.collect_zip(archive, course, A)
    assert handins.lookup(course, A, "ada") == (True, None)  # the LMS keeps its deadline
    staged = intake.stage(course, A, "ada", course / "staging")
    assert not (staged.directory / "timestamp.txt").exists()
    collect.collect_zip(archive, course, A, update=True, archive_zone=timezone.utc)
    assert handins.lookup(course, A, "ada")[1] == datetime(2026, 1, 12, 8, 30,
                                                          tzinfo=timezone.utc)


def test_a_thousand_junk_inbound_entries_do_not_stop_the_collection(course, tmp_path,
                                                                   monkeypatch):
    inbound = _inbound(course, tmp_path)
    for i in range(1001):
        (inbound / f"junk{i}").write_bytes(b"x")
    _hand_in(inbound, f"ada+{A}+2026-01-10 09:00:00.000000 UTC+a", "genuine")
    me = os.geteuid()
    done = collect.collect_exchange(course, A, account=lambda s: me)
    assert done.collected == ["ada"] and done.ignored == 1001
    lines = done.lines()
    assert len(lines) < 40 and any("more entries ignored" in ln for ln in lines)
    # the total that protects the machine still refuses the run, naming the limit
    monkeypatch.setattr(collect, "MAX_INBOUND_ENTRIES", 500)
    with pytest.raises(collect.CollectError, match="MAX_INBOUND_ENTRIES"):
        collect.collect_exchange(course, A, account=lambda s: me)


def test_one_students_twenty_thousand_files_refuse_that_student_only(course, tmp_path,
                                                                    monkeypatch):
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(f"alice/{NB}", _notebook())
        for i in range(20_001):
            zf.writestr(f"flood/f{i}", b"")
    done = collect.collect_zip(archive, course, A)
    assert done.collected == ["alice"]
    assert done.refused == {"flood": f"more than {collect.MAX_STUDENT_FILES} files in the "
                                     "submission"}
    monkeypatch.setattr(collect, "MAX_ZIP_ENTRIES", 10_000)
    with pytest.raises(collect.CollectError, match="MAX_ZIP_ENTRIES"):
        collect.collect_zip(archive, course, A)


ROSTER = ("student_id,first_name,last_name,email,moodle_id,canvas_id\n"
          "ada,Ada,Anders,ada@example.edu,1001,12345\n"
          "bob,Bob,Brown,bob@example.edu,1002,12346\n")


def test_moodle_and_canvas_downloads_map_through_the_roster_and_name_the_unmatched(
        course, tmp_path, capsys):
    (course / "roster.csv").write_text(ROSTER)
    moodle = tmp_path / "moodle.zip"
    with zipfile.ZipFile(moodle, "w") as zf:
        zf.writestr(f"Ada Anders_1001_assignsubmission_file_/{NB}", _notebook())
        zf.writestr("Ada Anders_1001_assignsubmission_onlinetext_/onlinetext.html", b"<p>")
        zf.writestr(f"Bob Brown_1002_assignsubmission_file_{NB}", _notebook())  # no folders
        zf.writestr(f"Eve Stranger_1999_assignsubmission_file_/{NB}", _notebook())
        zf.writestr(f"X_1002_assignsubmission_file_Y_1001_assignsubmission_file_/{NB}", b"{}")
    rc = cli.main(["collect-zip", str(moodle), A, "--course", str(course)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "collected: ada" in out and "collected: bob" in out
    assert ("not collected: Eve Stranger_1999_assignsubmission_file_: Eve Stranger_1999_"
            "assignsubmission_file_: no student of the roster has moodle_id 1999") in out
    assert "two participant ids" in out
    assert not (course / "submitted" / "Eve Stranger_1999_assignsubmission_file_").exists()
    canvas = tmp_path / "canvas.zip"
    with zipfile.ZipFile(canvas, "w") as zf:
        zf.writestr(f"andersada_late_12345_777_{A}-1.ipynb", _notebook())
        zf.writestr(f"brownbob_12346_778_{NB}", _notebook())
        zf.writestr(f"strangereve_55555_779_{NB}", _notebook())
    done = collect.collect_zip(canvas, course, A, update=True,
                               roster=__import__("cudacourse.grader.roster",
                                                 fromlist=["load"]).load(course / "roster.csv"))
    assert sorted(done.collected) == ["ada", "bob"]
    assert (course / "submitted" / "ada" / A / NB).is_file()  # "-1" of a resubmission off
    assert list(done.entries) == [f"strangereve_55555_779_{NB}"]
    from cudacourse.grader import handins

    rec = handins.load(course, A)["students"]
    assert rec["ada"]["flags"] == {"late_per_lms": True} and rec["ada"]["source"] == "canvas"
    assert "collected: ada (late per the LMS)" in done.lines()


def test_a_moodle_download_without_a_roster_is_refused_by_name(course, tmp_path):
    archive = tmp_path / "moodle.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(f"Alice Anders_1001_assignsubmission_file_/{NB}", _notebook())
    done = collect.collect_zip(archive, course, A)
    assert not done.collected
    assert "no student of the roster has moodle_id 1001" in \
        done.entries["Alice Anders_1001_assignsubmission_file_"]


def test_a_roster_with_an_unknown_column_or_a_duplicate_is_named(tmp_path):
    from cudacourse.grader import roster

    bad = tmp_path / "r.csv"
    bad.write_text("student_id,moodle\nada,1\n")
    with pytest.raises(roster.RosterError, match="unknown columns: moodle"):
        roster.load(bad)
    bad.write_text("student_id,canvas_id\nada,1\nbob,1\n")
    with pytest.raises(roster.RosterError, match="canvas_id 1 is given to both ada and bob"):
        roster.load(bad)
    bad.write_text("student_id,uid\nada,x\n")
    with pytest.raises(roster.RosterError, match="line 2: uid x is not a number"):
        roster.load(bad)


def test_a_folder_swapped_in_after_its_owner_was_checked_is_refused(course, tmp_path):
    """nbgrader's inbound has no sticky bit: anyone may rename entries. A swap between the
    owner check and the copy (done here from inside the owner lookup) is seen by the folder's
    inode, and the impostor's files are not collected under ada's name."""
    inbound = _inbound(course, tmp_path)
    genuine = _hand_in(inbound, f"ada+{A}+2026-01-10 09:00:00.000000 UTC+a", "genuine")
    forged = _hand_in(tmp_path, "forged", "forged")

    def owner(entry):
        if entry.name == genuine.name and forged.exists():
            genuine.rename(tmp_path / "moved-away")
            forged.rename(genuine)
        return 2001

    done = collect.collect_exchange(course, A, account=UIDS.get, owner=owner)
    assert not done.collected
    assert done.refused["ada"].endswith("is not a regular folder (it changed while read)")


def test_the_docs_describe_identity_time_lms_names_and_limits_as_the_code_has_them():
    """docs/instructors.md's sections on who and when, the LMS downloads and the grade files,
    held to the code's roster columns, limits and file names."""
    from cudacourse.grader import lmsgrades, roster

    doc = (ROOT / "docs" / "instructors.md").read_text()
    header = next(ln.strip() for ln in doc.splitlines() if ln.strip().startswith("student_id,"))
    assert tuple(header.split(",")) == roster.COLUMNS
    for phrase in ("owned by uid N, not by ada's account", "handins.json",
                   "timestamp.learner.txt", "--archive-times", "--lms-assignment",
                   "canvas.csv", "moodle.csv", "Points Possible", "Map from"):
        assert phrase in doc, phrase
    for column in lmsgrades.CANVAS_FIXED + lmsgrades.MOODLE_FIXED:
        assert f"`{column}`" in doc, column
    assert "100,000 inbound entries" in doc and collect.MAX_INBOUND_ENTRIES == 100_000
    assert "200,000 entries" in doc and collect.MAX_ZIP_ENTRIES == 200_000
    assert "over 4 GiB" in doc and collect.MAX_ARCHIVE_BYTES == 4 << 30
    assert "16 GiB" in doc and collect.MAX_UNPACKED_BYTES == 16 << 30
    assert "more than 1,000 files" in doc and collect.MAX_STUDENT_FILES == 1000
    for row in ("| impersonation |", "| a forged hand-in time |", "| LMS names |",
                "| formulas in spreadsheets |", "| one entry for everyone |"):
        assert row in doc, row
