"""Bringing submissions into ``submitted/<student>/<assignment>/`` without trusting them.

Two ways in that the instructor runs with their own rights, so nothing a learner put there
may make them read or write anything else:

* :func:`collect_zip`: an LMS download, a zip of per-student folders (``<student>/<file>``
  or ``<student>/<assignment>/<file>``). ``zipfile.extractall`` would follow what a crafted
  archive says; here every entry is checked first: no absolute path, drive letter, ``..``,
  backslash or control character in a name, no link, pipe or device (the Unix mode an
  archive carries), no encrypted entry, no name twice, sizes bounded while they are read
  (a small archive can unpack to gigabytes). One bad entry refuses that student's folder,
  with the reason; the others are collected.
* :func:`collect_exchange`: nbgrader's exchange inbound, the latest submission of each
  student. ``nbgrader collect`` copies it with ``shutil.copytree``, which follows links: a
  link a learner planted in the inbound becomes, in ``submitted/``, a copy of whatever it
  named, read with the instructor's rights; a named pipe makes the copy fail for the class.
  This reads the inbound through :mod:`safefs` instead (no link followed, pipes never
  opened) and refuses such a submission with the reason.

Who and when come from the platform, never from the learner: an exchange entry counts for
a student only when the student's account owns it (:mod:`roster`), an LMS download's names
are mapped through the roster (:mod:`lmsnames`), and the hand-in time is the collector's
record (:mod:`handins`), written as the collected ``timestamp.txt``; the learner's own is
kept as ``timestamp.learner.txt`` for display. A bad entry refuses that entry or that
student; only the totals that protect the machine refuse the run, naming the limit.

Each student's files are written into a fresh folder (``O_EXCL | O_NOFOLLOW``) and renamed
into place; an existing submission stays unless ``update`` (then it is replaced whole).
Sub-folders are not collected: grading reads the notebooks, timestamp.txt and the files
beside them only.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
import zipfile
import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from . import handins, lmsnames, safefs
from .intake import MAX_NOTEBOOK_BYTES
from .policy import utc_timestamp
from .roster import Roster, account_of
from .safefs import T

LEARNER_TIMESTAMP = "timestamp.learner.txt"  # the learner's timestamp.txt, shown, never used

MAX_FILE_BYTES = MAX_NOTEBOOK_BYTES  # one file of a submission
MAX_STUDENT_BYTES = 200 << 20  # one student's files together
MAX_STUDENT_FILES = safefs.MAX_ENTRIES  # one student's files in an archive (refuses that student)
# Totals that protect the machine: past them the whole archive or inbound is refused.
MAX_ZIP_ENTRIES = 200_000  # entries of one archive
MAX_ARCHIVE_BYTES = 4 << 30  # the archive file itself
MAX_UNPACKED_BYTES = 16 << 30  # what its entries say they unpack to, together
MAX_INBOUND_ENTRIES = 100_000  # entries of the exchange's inbound folder
SHOWN_NOTES = 20  # ignored entries named one by one; the rest counted


class CollectError(Exception):
    """The archive or the exchange cannot be read at all (the message says why)."""


@dataclass
class Collected:
    """What one collection did, per student (and per exchange entry not collected)."""

    collected: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # student -> reason
    skipped: dict[str, str] = field(default_factory=dict)  # student -> why (already there)
    entries: dict[str, str] = field(default_factory=dict)  # entry name -> why not collected
    handed_in: dict[str, str | None] = field(default_factory=dict)  # student -> trusted time
    notes: list[str] = field(default_factory=list)
    late_per_lms: set[str] = field(default_factory=set)  # Canvas's late mark, shown
    ignored: int = 0  # entries of other assignments or of no known shape

    def lines(self) -> list[str]:
        out = [f"collected: {s}" + (f" (handed in {self.handed_in[s]})"
                                    if self.handed_in.get(s) else "")
               + (" (late per the LMS)" if s in self.late_per_lms else "")
               for s in self.collected]
        out += [f"not collected: {s}: {why}" for s, why in sorted(self.refused.items())]
        out += [f"not collected: {safefs.shown(e)}: {why}"
                for e, why in sorted(self.entries.items())]
        out += [f"skipped: {s}: {why}" for s, why in sorted(self.skipped.items())]
        if self.ignored > SHOWN_NOTES:
            out.append(T("{n} more entries ignored", n=self.ignored - SHOWN_NOTES))
        return out + self.notes

    def _ignore(self, line: str) -> None:
        self.ignored += 1
        if self.ignored <= SHOWN_NOTES:
            self.notes.append(line)


def _parts(name: str) -> list[str]:
    """The components of an archive path, or Refused naming what is wrong with it."""
    if "\\" in name:
        raise safefs.Refused(T("{name}: a backslash in an archive path", name=safefs.shown(name)))
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise safefs.Refused(T("{name}: an absolute path", name=safefs.shown(name)))
    parts = [p for p in name.split("/") if p != ""]
    for p in parts:
        why = safefs.name_problem(p)
        if why:
            raise safefs.Refused(T("{name} is not a regular file (its name holds {why})",
                                   name=safefs.shown(name), why=why))
    return parts


def _zip_kind(info: zipfile.ZipInfo) -> str | None:
    """What a Unix-made entry is, when it is not a plain file or folder."""
    mode = info.external_attr >> 16
    if info.create_system != 3 or not stat.S_IFMT(mode):
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return "link" if stat.S_ISLNK(mode) else "named pipe" if stat.S_ISFIFO(mode) else \
        "socket" if stat.S_ISSOCK(mode) else "device"


def _read_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """The entry's bytes, at most ``limit`` whatever its header claims."""
    out, got = [], 0
    with zf.open(info) as fh:
        while True:
            chunk = fh.read(min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            out.append(chunk)
            got += len(chunk)
            if got > limit:
                raise safefs.Refused(safefs.too_large(info.filename, got, limit))
    return b"".join(out)


def _zip_time(info: zipfile.ZipInfo, zone: Any) -> datetime | None:
    try:
        return datetime(*info.date_time, tzinfo=zone)
    except ValueError:
        return None


def collect_zip(archive: str | os.PathLike, course_root: str | os.PathLike, assignment: str,
                *, submitted_dir: str = "submitted", update: bool = False,
                roster: Roster | None = None, archive_zone: Any = None,
                now: datetime | None = None) -> Collected:
    """Every student folder of an LMS download into ``submitted/<student>/<assignment>/``.

    Top-level names are mapped to students by :func:`lmsnames.owner` (a student id, or
    Moodle's and Canvas's names through ``roster``); a name that maps to no one is "not
    collected" by name. ``archive_zone``: a ``tzinfo``; when given, the latest entry time of
    a student's files (the LMS's, in that zone) is their hand-in time, else the record has
    none. Limits of one student refuse that student; the archive's totals
    (:data:`MAX_ARCHIVE_BYTES`, :data:`MAX_ZIP_ENTRIES`, :data:`MAX_UNPACKED_BYTES`) refuse
    the archive, naming the limit."""
    _check_id(assignment)
    now = now or datetime.now(timezone.utc)
    try:
        size = os.stat(archive).st_size
    except OSError as exc:
        raise CollectError(T("{file} is not a zip archive that can be read ({error})",
                             file=str(archive), error=type(exc).__name__)) from None
    if size > MAX_ARCHIVE_BYTES:
        raise CollectError(T("{file} is larger than {n} GiB (MAX_ARCHIVE_BYTES): split the "
                             "download", file=str(archive), n=MAX_ARCHIVE_BYTES >> 30))
    try:
        zf = zipfile.ZipFile(archive)
    except (OSError, zipfile.BadZipFile, ValueError, RuntimeError) as exc:
        raise CollectError(T("{file} is not a zip archive that can be read ({error})",
                             file=str(archive), error=type(exc).__name__)) from None
    done = Collected()
    record = _record(course_root, assignment)
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ZIP_ENTRIES:
            raise CollectError(T("the archive holds more than {n} entries (MAX_ZIP_ENTRIES)",
                                 n=MAX_ZIP_ENTRIES))
        if sum(i.file_size for i in infos) > MAX_UNPACKED_BYTES:
            raise CollectError(T("the archive's entries unpack to more than {n} GiB "
                                 "(MAX_UNPACKED_BYTES)", n=MAX_UNPACKED_BYTES >> 30))
        per_student: dict[str, list[tuple[str, zipfile.ZipInfo]]] = {}
        late: set[str] = set()
        source: dict[str, str] = {}
        for info in infos:
            raw = info.filename
            top = raw.split("/", 1)[0]
            try:
                parts = _parts(raw)
            except safefs.Refused as exc:
                if safefs.name_problem(top) or not top:
                    done._ignore(f"entry refused: {exc}")
                    continue
                try:
                    who = lmsnames.owner(top, roster, folder="/" in raw).student
                except lmsnames.Unmatched:
                    done._ignore(f"entry refused: {exc}")
                    continue
                done.refused.setdefault(who, str(exc))
                continue
            if not parts:
                continue
            flat = len(parts) == 1 and not info.is_dir()
            try:
                who = lmsnames.owner(parts[0], roster, folder=not flat)
            except lmsnames.Unmatched as exc:
                done.entries.setdefault(parts[0], str(exc))
                continue
            student = who.student
            rest = [who.file] if flat else parts[1:]
            if who.skip:
                continue
            if rest and rest[0] == assignment:
                rest = rest[1:]
            kind = _zip_kind(info)
            if kind:
                done.refused.setdefault(student, T("{name} is not a regular file (a {kind})",
                                                   name=safefs.shown("/".join(parts)),
                                                   kind=kind))
                continue
            if info.is_dir() or not rest or rest == [None]:
                if not rest and not info.is_dir():
                    done._ignore(f"entry outside a student folder ignored: "
                                 f"{safefs.shown(raw)}")
                continue
            if len(rest) > 1:  # a sub-folder: not collected (grading never reads it)
                continue
            if who.lms:
                source[student] = who.lms
            if who.late:
                late.add(student)
            if info.flag_bits & 0x1:
                done.refused.setdefault(student, T("{name} is encrypted",
                                                   name=safefs.shown(raw)))
                continue
            per_student.setdefault(student, []).append((rest[0], info))
        for student, entries in sorted(per_student.items()):
            if student in done.refused:
                continue
            if len(entries) > MAX_STUDENT_FILES:
                done.refused[student] = T("more than {n} files in the submission",
                                          n=MAX_STUDENT_FILES)
                continue
            files: dict[str, bytes] = {}
            total = 0
            try:
                for name, info in entries:
                    if name in files:
                        raise safefs.Refused(T("{name} is in the archive twice",
                                               name=safefs.shown(name)))
                    files[name] = _read_entry(zf, info, min(MAX_FILE_BYTES,
                                                            MAX_STUDENT_BYTES - total))
                    total += len(files[name])
            except safefs.Refused as exc:
                done.refused[student] = str(exc)
                continue
            except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError,
                    EOFError, ValueError, zlib.error) as exc:
                done.refused[student] = T("the archive's entry cannot be read ({error})",
                                          error=type(exc).__name__)
                continue
            exported = None
            if archive_zone is not None:
                times = [t for t in (_zip_time(i, archive_zone) for _, i in entries) if t]
                exported = max(times) if times else None
            learner = files.pop("timestamp.txt", None)
            src = source.get(student, "zip")
            _place(done, course_root, submitted_dir, student, assignment, files, update,
                   record=record, source=src, entry=src, now=now, exported=exported,
                   learner_time=learner, flags={"late_per_lms": True}
                   if student in late else None)
    handins.save(course_root, assignment, record)
    return done


def _digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode("utf-8", "surrogateescape") + b"\0")
        h.update(hashlib.sha256(files[name]).digest())
    return h.hexdigest()


def owner_uid(entry: safefs.Entry) -> int:
    """The owner of an exchange entry, as ``lstat`` saw it."""
    return entry.uid


def collect_exchange(course_root: str | os.PathLike, assignment: str, *,
                     inbound: str | os.PathLike | None = None,
                     submitted_dir: str = "submitted", update: bool = False,
                     roster: Roster | None = None,
                     account: Callable[[str], int | None] | None = None,
                     owner: Callable[[safefs.Entry], int] = owner_uid,
                     now: datetime | None = None) -> Collected:
    """The latest inbound submission of each student (nbgrader's
    ``<student>+<assignment>+<timestamp>[+<random>]`` folders) into ``submitted/``.

    An entry counts for ``<student>`` only when its owner (``owner(entry)``: ``st_uid`` from
    ``lstat``) is the student's account (``account(student)``: :func:`roster.account_of`);
    any other is "not collected: owned by uid N", and the student's own latest entry (by the
    kernel's change time) is taken. The hand-in time is the collector's (:mod:`handins`),
    never the folder name's or ``timestamp.txt``'s. A bad entry refuses that entry or that
    student; only the inbound's total (:data:`MAX_INBOUND_ENTRIES`) refuses the run."""
    _check_id(assignment)
    now = now or datetime.now(timezone.utc)
    account = account or account_of(roster)
    inbound = Path(inbound) if inbound else exchange_inbound(course_root)
    done = Collected()
    latest: dict[str, tuple[float, str, safefs.Entry]] = {}
    try:
        top = safefs.Folder.at(inbound)
    except OSError as exc:
        raise CollectError(T("no exchange inbound at {path} ({error})", path=str(inbound),
                             error=type(exc).__name__)) from None
    record = _record(course_root, assignment)
    accounts: dict[str, int | None] = {}
    with top:
        try:
            for e in top.scan(MAX_INBOUND_ENTRIES):
                fields = e.name.rsplit("+", 3)
                if len(fields) < 3 or fields[1] != assignment:
                    if len(fields) < 3 or safefs.name_problem(e.name):
                        done._ignore(f"inbound entry ignored (not nbgrader's name): "
                                     f"{safefs.shown(e.name)}")
                    continue
                student = fields[0]
                if safefs.name_problem(student) or safefs.name_problem(e.name):
                    done._ignore(f"inbound entry ignored (its name cannot be a student's): "
                                 f"{safefs.shown(e.name)}")
                    continue
                if student not in accounts:
                    accounts[student] = account(student)
                want, uid = accounts[student], owner(e)
                if want is None:
                    done.entries[e.name] = T("no account for {name} (give its login or uid "
                                             "in the roster)", name=safefs.shown(student))
                    continue
                if uid != want:
                    done.entries[e.name] = T("owned by uid {uid}, not by {name}'s account",
                                             uid=uid, name=safefs.shown(student))
                    continue
                if e.kind != "folder":
                    done.entries[e.name] = safefs.not_regular(e) or T(
                        "{name} is not a regular folder (a {kind})",
                        name=safefs.shown(e.name), kind=e.kind)
                    continue
                key = (e.ctime, e.name)
                if student not in latest or key > latest[student][:2]:
                    latest[student] = (e.ctime, e.name, e)
        except safefs.Refused:
            raise CollectError(T("the exchange inbound {path} holds more than {n} entries "
                                 "(MAX_INBOUND_ENTRIES): clear out old submissions",
                                 path=str(inbound), n=MAX_INBOUND_ENTRIES)) from None
        shared = {u: v for u, v in _shared(accounts).items()}
        for uid, who in sorted(shared.items()):
            done.notes.append(T("students {names} share the account uid {uid}: the exchange "
                                "cannot tell them apart", names=", ".join(who), uid=uid))
        for student, (_ctime, name, entry) in sorted(latest.items()):
            try:
                with top.folder(name) as sub:
                    # the folder opened is the one whose owner was checked: nbgrader's inbound
                    # has no sticky bit, so anyone may rename entries between two looks
                    st = os.fstat(sub.fd)
                    if (st.st_ino, st.st_dev) != (entry.ino, entry.dev):
                        raise safefs.Refused(T("{name} is not a regular folder (it changed "
                                               "while read)", name=safefs.shown(name)))
                    files, changed = _regular_files(sub)
            except (safefs.Refused, CollectError, FileNotFoundError) as exc:
                done.refused[student] = str(exc) if not isinstance(
                    exc, FileNotFoundError) else T("its inbound folder went away")
                continue
            changed = max(changed, entry.ctime)
            learner = files.pop("timestamp.txt", None)
            _place(done, course_root, submitted_dir, student, assignment, files, update,
                   record=record, source="exchange", entry=name, now=now,
                   changed=datetime.fromtimestamp(changed, timezone.utc),
                   learner_time=learner)
    handins.save(course_root, assignment, record)
    return done


def _record(course_root: str | os.PathLike, assignment: str) -> dict[str, Any]:
    try:
        return handins.load(course_root, assignment)
    except handins.HandinError as exc:
        raise CollectError(str(exc)) from None


def _shared(accounts: dict[str, int | None]) -> dict[int, list[str]]:
    by_uid: dict[int, list[str]] = {}
    for s, uid in accounts.items():
        if uid is not None:
            by_uid.setdefault(uid, []).append(s)
    return {u: sorted(v) for u, v in by_uid.items() if len(v) > 1}


def exchange_inbound(course_root: str | os.PathLike) -> Path:
    """``<Exchange.root>/<CourseDirectory.course_id>/inbound`` from the course's config."""
    from .policy import PolicyError, load_config

    try:
        cfg = load_config(Path(course_root))
    except PolicyError as exc:
        raise CollectError(str(exc)) from None
    root = cfg.get("Exchange", {}).get("root") or "/srv/nbgrader/exchange"
    course_id = cfg.get("CourseDirectory", {}).get("course_id")
    if not course_id:
        raise CollectError(T("nbgrader_config.py sets no c.CourseDirectory.course_id"))
    return Path(course_root, root) / str(course_id) / "inbound"


def _regular_files(sub: safefs.Folder) -> tuple[dict[str, bytes], float]:
    """The folder's regular files (sub-folders never entered) and the latest change time
    (``st_ctime``) among them."""
    files: dict[str, bytes] = {}
    total, changed = 0, 0.0
    for e in sub.entries():
        changed = max(changed, e.ctime)
        safefs.check_name(e.name)
        if e.kind == "folder":
            continue  # never entered
        why = safefs.not_regular(e)
        if why:
            raise safefs.Refused(why)
        files[e.name] = sub.read(e, min(MAX_FILE_BYTES, MAX_STUDENT_BYTES - total))
        total += len(files[e.name])
    return files, changed


def _check_id(name: str) -> None:
    why = safefs.name_problem(name)
    if why:
        raise CollectError(T("{name} is not a regular file (its name holds {why})",
                             name=safefs.shown(name), why=why))


def _place(done: Collected, course_root: str | os.PathLike, submitted_dir: str, student: str,
           assignment: str, files: dict[str, bytes], update: bool, *, record: dict[str, Any],
           source: str, entry: str, now: datetime, changed: datetime | None = None,
           exported: datetime | None = None, learner_time: bytes | None = None,
           flags: dict[str, Any] | None = None) -> None:
    """Write ``files`` as ``submitted/<student>/<assignment>/`` (a fresh folder, renamed in)
    with the collector's ``timestamp.txt`` (the trusted time, when there is one) and the
    learner's as ``timestamp.learner.txt`` (display only), and note it in the record."""
    _check_id(student)
    top = Path(course_root) / submitted_dir
    top.mkdir(parents=True, exist_ok=True)
    home = top / student
    dest = home / assignment
    for path in (home, dest):
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            done.refused[student] = T("{name} is not a regular folder (a {kind})",
                                      name=safefs.shown(path.name), kind="link"
                                      if path.is_symlink() else "file")
            return
    digest = _digest(files)
    if dest.exists() and not update:
        # seen now, though not placed: a later --update keeps this first sighting
        rec = record["students"].setdefault(student, {})
        rec.setdefault("first_seen", {}).setdefault(digest, handins.iso(now))
        done.skipped[student] = T("already collected (update replaces it)")
        return
    shown_time = None
    if learner_time is not None:
        shown_time = learner_time[:256].decode("utf-8", "replace").strip()[:64]
    when = handins.note(record, student, source=source, entry=entry, digest=digest,
                        now=now, changed=changed, exported=exported, learner_time=shown_time,
                        flags=flags)
    files = dict(files)
    if learner_time is not None:
        files[LEARNER_TIMESTAMP] = learner_time
    if when is not None:
        files["timestamp.txt"] = utc_timestamp(when).encode()
    done.handed_in[student] = utc_timestamp(when) if when else None
    if (flags or {}).get("late_per_lms"):
        done.late_per_lms.add(student)
    work = top / f".cudacourse-collect-{secrets.token_hex(6)}"
    work.mkdir()
    try:
        for name, data in files.items():
            fd = os.open(work / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                         0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        home.mkdir(exist_ok=True)
        if dest.exists():
            shutil.rmtree(dest)
        os.rename(work, dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done.collected.append(student)


__all__ = ["collect_zip", "collect_exchange", "exchange_inbound", "owner_uid", "Collected",
           "CollectError", "LEARNER_TIMESTAMP"]
