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

Each student's files are written into a fresh folder (``O_EXCL | O_NOFOLLOW``) and renamed
into place; an existing submission stays unless ``update`` (then it is replaced whole).
Sub-folders are not collected: grading reads the notebooks, timestamp.txt and the files
beside them only.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from . import safefs
from .intake import MAX_NOTEBOOK_BYTES
from .safefs import T

MAX_FILE_BYTES = MAX_NOTEBOOK_BYTES  # one file of a submission
MAX_STUDENT_BYTES = 200 << 20  # one student's files together
MAX_ZIP_ENTRIES = 20_000


class CollectError(Exception):
    """The archive or the exchange cannot be read at all (the message says why)."""


@dataclass
class Collected:
    """What one collection did, per student."""

    collected: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # student -> reason
    skipped: dict[str, str] = field(default_factory=dict)  # student -> why (already there)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"collected: {s}" for s in self.collected]
        out += [f"not collected: {s}: {why}" for s, why in sorted(self.refused.items())]
        out += [f"skipped: {s}: {why}" for s, why in sorted(self.skipped.items())]
        return out + self.notes


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


def collect_zip(archive: str | os.PathLike, course_root: str | os.PathLike, assignment: str,
                *, submitted_dir: str = "submitted", update: bool = False) -> Collected:
    """Every student folder of an LMS download into ``submitted/<student>/<assignment>/``."""
    _check_id(assignment)
    try:
        zf = zipfile.ZipFile(archive)
    except (OSError, zipfile.BadZipFile) as exc:
        raise CollectError(T("{file} is not a zip archive that can be read ({error})",
                             file=str(archive), error=type(exc).__name__)) from None
    done = Collected()
    with zf:
        infos = zf.infolist()
        if len(infos) > MAX_ZIP_ENTRIES:
            raise CollectError(T("the archive holds more than {n} entries", n=MAX_ZIP_ENTRIES))
        per_student: dict[str, list[tuple[str, zipfile.ZipInfo]]] = {}
        for info in infos:
            raw = info.filename
            student = raw.split("/", 1)[0]
            try:
                parts = _parts(raw)
            except safefs.Refused as exc:
                if safefs.name_problem(student) or not student:
                    done.notes.append(f"entry refused: {exc}")
                else:
                    done.refused.setdefault(student, str(exc))
                continue
            if not parts:
                continue
            student, rest = parts[0], parts[1:]
            if rest and rest[0] == assignment:
                rest = rest[1:]
            kind = _zip_kind(info)
            if kind:
                done.refused.setdefault(student, T("{name} is not a regular file (a {kind})",
                                                   name=safefs.shown("/".join(parts)),
                                                   kind=kind))
                continue
            if info.is_dir() or not rest:
                if not rest and not info.is_dir():
                    done.notes.append(f"entry outside a student folder ignored: "
                                      f"{safefs.shown(raw)}")
                continue
            if len(rest) > 1:  # a sub-folder: not collected (grading never reads it)
                continue
            if info.flag_bits & 0x1:
                done.refused.setdefault(student, T("{name} is encrypted",
                                                   name=safefs.shown(raw)))
                continue
            per_student.setdefault(student, []).append((rest[0], info))
        for student, entries in sorted(per_student.items()):
            if student in done.refused:
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
            except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError) as exc:
                done.refused[student] = T("the archive's entry cannot be read ({error})",
                                          error=type(exc).__name__)
                continue
            _place(done, course_root, submitted_dir, student, assignment, files, update)
    return done


def collect_exchange(course_root: str | os.PathLike, assignment: str, *,
                     inbound: str | os.PathLike | None = None,
                     submitted_dir: str = "submitted", update: bool = False) -> Collected:
    """The latest inbound submission of each student (nbgrader's
    ``<student>+<assignment>+<timestamp>[+<random>]`` folders) into ``submitted/``."""
    from nbgrader.utils import parse_utc

    _check_id(assignment)
    inbound = Path(inbound) if inbound else exchange_inbound(course_root)
    done = Collected()
    latest: dict[str, tuple[object, str]] = {}
    try:
        top = safefs.Folder.at(inbound)
    except OSError as exc:
        raise CollectError(T("no exchange inbound at {path} ({error})", path=str(inbound),
                             error=type(exc).__name__)) from None
    with top:
        for e in top.entries():
            fields = e.name.rsplit("+", 3)
            if len(fields) < 3 or fields[1] != assignment:
                continue
            try:
                when = parse_utc(fields[2])
            except Exception:  # noqa: BLE001 - not one of nbgrader's names
                done.notes.append(f"inbound entry ignored (no time in its name): "
                                  f"{safefs.shown(e.name)}")
                continue
            student = fields[0]
            if student not in latest or (when, e.name) > latest[student]:
                latest[student] = (when, e.name)
        for student, (_when, name) in sorted(latest.items()):
            try:
                _check_id(student)
                with top.folder(name) as sub:
                    files = _regular_files(sub)
            except (safefs.Refused, CollectError) as exc:
                done.refused[student] = str(exc)
                continue
            _place(done, course_root, submitted_dir, student, assignment, files, update)
    return done


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


def _regular_files(sub: safefs.Folder) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    for e in sub.entries():
        safefs.check_name(e.name)
        if e.kind == "folder":
            continue  # never entered
        why = safefs.not_regular(e)
        if why:
            raise safefs.Refused(why)
        files[e.name] = sub.read(e, min(MAX_FILE_BYTES, MAX_STUDENT_BYTES - total))
        total += len(files[e.name])
    return files


def _check_id(name: str) -> None:
    why = safefs.name_problem(name)
    if why:
        raise CollectError(T("{name} is not a regular file (its name holds {why})",
                             name=safefs.shown(name), why=why))


def _place(done: Collected, course_root: str | os.PathLike, submitted_dir: str, student: str,
           assignment: str, files: dict[str, bytes], update: bool) -> None:
    """Write ``files`` as ``submitted/<student>/<assignment>/`` (a fresh folder, renamed in)."""
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
    if dest.exists() and not update:
        done.skipped[student] = T("already collected (update replaces it)")
        return
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


__all__ = ["collect_zip", "collect_exchange", "exchange_inbound", "Collected", "CollectError"]
