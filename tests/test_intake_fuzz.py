"""Fuzzing intake (issue #38, "Fuzzing, not examples"): generated exchange inbound trees, LMS
zips and copied home folders, and the invariants every one of them must keep.

* the right student or "not collected / not graded" with a reason, never a classmate's
  work under someone's name: every collected copy comes from an entry its student owns;
* reasons leak nothing: no line of a report holds a file's contents or a link's target;
* no one else is affected: an honest control student is collected (or staged) every time;
* the run ends (each call in a thread, waited for) and every record is written (the hand-in
  record names every collected student, with a time that is never the learner's).

Owners: as root (CI runs as root) each generated folder is given to its owner with
``os.chown`` and the collector reads the real ``st_uid``; otherwise ownership is modelled
through ``collect_exchange``'s ``owner`` parameter (the lookup it uses is injectable for
exactly this), and the invariant is the same.

Cheap by default (about 25 examples each, seconds in all); ``CUDACOURSE_NIGHTLY=1`` runs
the nightly profile (400 examples each).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
import zipfile
from unittest import mock
from zoneinfo import ZoneInfo
from datetime import datetime, timezone
from pathlib import Path

import nbformat
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudacourse.course import authoring
from cudacourse.grader import collect, handins, intake, roster, safefs

ROOT = authoring.ROOT
A = "01_gpu_vs_cpu"
NB = f"{A}.ipynb"
SECRET = "SECRET-instructor-7f3a"  # in files a learner may point at or read
NIGHTLY = os.environ.get("CUDACOURSE_NIGHTLY") == "1"
AS_ROOT = os.geteuid() == 0

settings.register_profile("intake-ci", max_examples=25, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.data_too_large])
settings.register_profile("intake-nightly", max_examples=400, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow,
                                                 HealthCheck.data_too_large])
PROFILE = settings.get_profile("intake-nightly" if NIGHTLY else "intake-ci")

STUDENTS = ["ada", "bob", "cy"]
UIDS = {"ada": 3001, "bob": 3002, "cy": 3003, "ctl": 3009}
INTRUDER = 3666  # an account that is no student's
SMALL_LIMIT = 1 << 20  # the per-file limit while fuzzing zips (the real one is 50 MiB)
ENTRY_LIMIT = 40  # entries of one submission folder while fuzzing (the real one is 1,000)
_MASTER = nbformat.read(ROOT / "solutions" / A / NB, 4)


def _notebook(marker: str) -> bytes:
    nb = nbformat.from_dict(dict(_MASTER))
    nb.metadata = dict(nb.metadata, marker=marker)
    return nbformat.writes(nb).encode()


def _marker_of(path: Path) -> str | None:
    try:
        return nbformat.read(path, 4).metadata.get("marker")
    except Exception:  # noqa: BLE001 - a copy that is not a notebook carries no marker
        return None


def _ends(fn, seconds: float = 60):
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported below
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True)
    with mock.patch.object(safefs, "MAX_ENTRIES", ENTRY_LIMIT):
        t.start()
        t.join(seconds)
    assert not t.is_alive(), "intake did not end"
    if "error" in box:
        raise box["error"]
    return box["value"]


def _course(base: Path) -> Path:
    course = base / "course"
    (course / "solutions").mkdir(parents=True)
    shutil.copytree(ROOT / "solutions" / A, course / "solutions" / A)
    secret = base / "secret.txt"
    secret.write_text(SECRET)
    return course


# --- generated files of one submission -------------------------------------------------------

NAMES = st.sampled_from([NB, "timestamp.txt", "data.csv", "notes.md", "a b.txt", "..",
                         "x\x1by", "é.txt", "\u202etxt.exe", ".ipynb_checkpoints", "sub",
                         "x" * 300])
KINDS = st.sampled_from(["notebook", "file", "big", "link", "fifo", "hardlink", "folder",
                         "garbage", "flood"])
FILES = st.lists(st.tuples(NAMES, KINDS), max_size=6, unique_by=lambda t: t[0])
STAMPS = st.sampled_from(["2001-01-01 00:00:00 UTC", "", "not a time", SECRET,
                          "2026-01-10 10:00:00.000000 UTC"])


def _make(folder: Path, files, marker: str, secret: Path, stamp: str | None) -> None:
    """A submission folder of the generated entries (a name the kernel refuses is skipped:
    what cannot exist cannot arrive)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, kind in files:
        p = folder / name
        try:
            if kind == "notebook":
                p.write_bytes(_notebook(marker))
            elif kind == "file":
                p.write_text(f"{SECRET} in a learner file")
            elif kind == "big":
                with open(p, "wb") as fh:
                    fh.truncate((50 << 20) + 1)  # sparse: past the per-file limit, no disk
            elif kind == "link":
                p.symlink_to(secret)
            elif kind == "fifo":
                os.mkfifo(p)
            elif kind == "hardlink":
                os.link(secret, p)
            elif kind == "flood":  # many files beside the notebook: past the entry limit
                p.mkdir()
                for k in range(ENTRY_LIMIT + 1):
                    (folder / f"{name}.{k}").write_bytes(b"")
            elif kind == "folder":
                p.mkdir()
                (p / "inner.txt").write_text(SECRET)
            else:
                p.write_bytes(b"\xff\xfe" + SECRET.encode())
        except OSError:
            continue
    if stamp is not None and not (folder / "timestamp.txt").exists():
        (folder / "timestamp.txt").write_text(stamp)


def _no_leak(lines) -> None:
    text = "\n".join(map(str, lines))
    assert SECRET not in text
    assert "secret.txt" not in text  # a link's target is never named


# --- exchange inbound trees -------------------------------------------------------------------

ENTRY = st.tuples(
    st.sampled_from(STUDENTS + ["zed", "=evil", "a+b", "..", ""]),  # whose name it carries
    st.sampled_from([A, "02_other"]),
    st.sampled_from(["2001-01-01 00:00:00.000000 UTC", "2026-01-10 10:00:00.000000 UTC",
                     "garbage"]),
    st.sampled_from(STUDENTS + ["intruder"]),  # who really made it
    st.sampled_from(["folder", "file", "link"]),
    FILES, STAMPS)


@PROFILE
@given(entries=st.lists(ENTRY, max_size=8), junk=st.integers(0, 30))
def test_generated_inbound_trees_collect_only_what_each_student_owns(entries, junk):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        course = _course(base)
        inbound = base / "inbound"
        inbound.mkdir()
        owners: dict[str, int] = {}
        made: dict[str, tuple[int, str]] = {}  # entry -> (owner uid, marker)
        for i, (name, asg, when, maker, kind, files, stamp) in enumerate(entries):
            entry = f"{name}+{asg}+{when}+r{i}"
            uid = UIDS.get(maker, INTRUDER)
            p = inbound / entry
            if "/" in entry or entry in (".", ".."):
                continue
            if kind == "folder":
                _make(p, [(NB, "notebook")] + files, f"m{i}", base / "secret.txt", stamp)
            elif kind == "file":
                p.write_text(SECRET)
            else:
                p.symlink_to(base / "secret.txt")
            owners[entry] = uid
            made[entry] = (uid, f"m{i}")
            if AS_ROOT:
                for q in [p, *(p.rglob("*") if kind == "folder" else [])]:
                    os.chown(q, uid, uid, follow_symlinks=False)
        # the honest control student, and junk of no known shape
        ctl = f"ctl+{A}+2026-01-10 10:00:00.000000 UTC+c"
        _make(inbound / ctl, [(NB, "notebook")], "control", base / "secret.txt", None)
        owners[ctl] = UIDS["ctl"]
        made[ctl] = (UIDS["ctl"], "control")
        if AS_ROOT:
            for q in [inbound / ctl, *(inbound / ctl).iterdir()]:
                os.chown(q, UIDS["ctl"], UIDS["ctl"])
        for j in range(junk):
            (inbound / f"junk{j}").write_bytes(b"")
        owner = collect.owner_uid if AS_ROOT else (lambda e: owners.get(e.name, 0))
        now = datetime.now(timezone.utc)
        done = _ends(lambda: collect.collect_exchange(
            course, A, inbound=inbound, account=UIDS.get, owner=owner, now=now))
        assert "ctl" in done.collected  # no one else is affected
        _no_leak(done.lines())
        record = handins.load(course, A)["students"]
        for student in done.collected:
            marker = _marker_of(course / "submitted" / student / A / NB)
            sources = [e for e, (uid, m) in made.items() if m == marker]
            assert sources, (student, marker)
            entry = sources[0]
            # the copy came from an entry of this assignment that the student owns
            assert entry.split("+")[0] == student and entry.split("+")[1] == A
            assert made[entry][0] == UIDS[student]
            when = handins.parse(record[student]["handed_in"])
            assert when.year >= 2026 and when <= now  # never the name's or the file's 2001
        for student in set(UIDS) - set(done.collected):
            assert not (course / "submitted" / student).exists() or student in done.skipped


# --- LMS zips --------------------------------------------------------------------------------

ROSTER_CSV = ("student_id,moodle_id,canvas_id\n" +
              "".join(f"{s},{1000 + i},{5000 + i}\n" for i, s in enumerate(STUDENTS + ["ctl"])))
TOPS = st.sampled_from(
    STUDENTS + ["stranger", "=HYPERLINK(1)", "Ada A_1000_assignsubmission_file_",
                "Bob B_1001_assignsubmission_file_", "Nobody_1999_assignsubmission_file_",
                "Cy C_1002_assignsubmission_onlinetext_",
                "Z_1001_assignsubmission_file_W_1000_assignsubmission_file_"])
ZIP_ENTRY = st.tuples(
    TOPS, st.sampled_from(["", f"{A}/", "sub/deeper/", "../", "/abs/", "a\\b/"]),
    st.sampled_from([NB, "timestamp.txt", "data.csv", "..", "x\x00y", NB]),
    st.sampled_from(["file", "link", "fifo", "device", "encrypted", "big"]))
CANVAS = st.tuples(st.sampled_from(["adaa", "bobb", "eve"]), st.booleans(),
                   st.sampled_from([5000, 5001, 5999]), st.sampled_from([NB, f"{A}-2.ipynb",
                                                                         "x.txt"]))


@PROFILE
@given(entries=st.lists(ZIP_ENTRY, max_size=10), flat=st.lists(CANVAS, max_size=4),
       use_roster=st.booleans(), zone=st.sampled_from([None, "UTC", "Asia/Tokyo"]),
       stamp=st.tuples(st.integers(1980, 2100), st.integers(1, 12), st.integers(1, 28),
                       st.integers(0, 23), st.integers(0, 59)))
def test_generated_lms_zips_map_each_folder_to_one_student_or_name_it(entries, flat,
                                                                       use_roster, zone,
                                                                       stamp):
    import warnings

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        course = _course(base)
        archive = base / "download.zip"
        markers: dict[str, str] = {}  # marker -> top-level name it was put under
        with zipfile.ZipFile(archive, "w") as zf, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # duplicate names are generated on purpose
            zf.writestr(f"ctl/{NB}", _notebook("control"))
            for i, (top, middle, name, kind) in enumerate(entries):
                info = zipfile.ZipInfo(f"{top}/{middle}{name}", date_time=(*stamp, 0))
                data = _notebook(f"z{i}") if name == NB else SECRET.encode()
                markers[f"z{i}"] = top
                if kind in ("link", "fifo", "device"):
                    info.create_system = 3
                    info.external_attr = {"link": stat.S_IFLNK, "fifo": stat.S_IFIFO,
                                          "device": stat.S_IFCHR}[kind] << 16
                    data = str(base / "secret.txt").encode()
                elif kind == "encrypted":
                    info.flag_bits |= 0x1
                elif kind == "big":
                    info.compress_type = zipfile.ZIP_DEFLATED
                    data = b"\0" * (SMALL_LIMIT + 1)
                zf.writestr(info, data)
            for i, (who, late, uid, name) in enumerate(flat):
                marker = f"c{i}"
                markers[marker] = f"canvas:{uid}"
                zf.writestr(f"{who}_{'late_' if late else ''}{uid}_{700 + i}_{name}",
                            _notebook(marker) if name.endswith(".ipynb") else b"x")
        people = None
        if use_roster:
            (base / "roster.csv").write_text(ROSTER_CSV)
            people = roster.load(base / "roster.csv")
        before = {p for p in base.rglob("*") if "course" not in p.parts}
        with mock.patch.object(collect, "MAX_FILE_BYTES", SMALL_LIMIT):
            done = _ends(lambda: collect.collect_zip(
                archive, course, A, roster=people, archive_zone=ZoneInfo(zone) if zone else None))
        assert "ctl" in done.collected
        _no_leak(done.lines())
        assert {p for p in base.rglob("*") if "course" not in p.parts} == before
        record = handins.load(course, A)["students"]
        for student in done.collected:  # every record written, the time only from a zone
            assert student in record
            when = record[student]["handed_in"]
            assert (when is None) == (zone is None), (zone, when)
        ids = {str(1000 + i): s for i, s in enumerate(STUDENTS + ["ctl"])}
        canvas_ids = {str(5000 + i): s for i, s in enumerate(STUDENTS + ["ctl"])}
        for student in done.collected:
            if people is not None:
                assert student in people.people  # with a roster, only its students
            marker = _marker_of(course / "submitted" / student / A / NB)
            if marker in (None, "control"):
                continue
            top = markers[marker]
            if top.startswith("canvas:"):
                assert canvas_ids[top.split(":")[1]] == student
            elif "_assignsubmission_" in top:
                assert ids[top.split("_assignsubmission_")[0].rsplit("_", 1)[1]] == student
            else:
                assert top == student
        for path in (course / "submitted").rglob("*"):
            assert stat.S_IFMT(path.lstat().st_mode) in (stat.S_IFREG, stat.S_IFDIR)


# --- copies of home folders -------------------------------------------------------------------

@PROFILE
@given(files=FILES, stamp=st.one_of(st.none(), STAMPS), wrap=st.sampled_from(
    ["folder", "student-link", "assignment-link", "assignment-file"]))
def test_generated_home_folder_copies_are_staged_or_named_and_leak_nothing(files, stamp,
                                                                           wrap):
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        course = _course(base)
        sub = course / "submitted"
        _make(sub / "ctl" / A, [(NB, "notebook")], "control", base / "secret.txt",
              "2026-01-10 10:00:00 UTC")
        elsewhere = base / "elsewhere" / A
        _make(elsewhere, files, "ada", base / "secret.txt", stamp)
        if wrap == "folder":
            shutil.move(str(base / "elsewhere"), sub / "ada")
        elif wrap == "student-link":
            (sub / "ada").symlink_to(base / "elsewhere")
        elif wrap == "assignment-link":
            (sub / "ada").mkdir()
            (sub / "ada" / A).symlink_to(elsewhere)
        else:
            (sub / "ada").mkdir()
            (sub / "ada" / A).write_text(SECRET)

        def stage(student):
            try:
                return _ends(lambda: intake.stage(course, A, student, base / "staging"))
            except intake.NotGraded as exc:
                return exc

        got = stage("ada")
        control = stage("ctl")
        assert isinstance(control, intake.Staged), control  # no one else is affected
        if isinstance(got, intake.NotGraded):
            reason = str(got)
            assert reason and "\n" not in reason[:200]
            _no_leak([reason])
        else:
            assert wrap == "folder"  # nothing reached through a link is ever staged
            assert (got.directory / NB).is_file()
            for p in got.directory.rglob("*"):
                assert not p.is_symlink()
                if p.is_file() and p.suffix != ".ipynb":
                    assert SECRET.encode() not in p.read_bytes() or p.parent.name == \
                        intake.LEARNER_FILES  # the learner's own file, copied as data
