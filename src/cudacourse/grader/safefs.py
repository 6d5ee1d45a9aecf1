"""Opening a submission folder as data: only regular files, never through a link.

The grader's own user reads submission folders before any sandbox exists, so nothing a
learner placed there may make it open something else. A folder is opened with
``O_DIRECTORY | O_NOFOLLOW`` relative to its parent's descriptor (a link swapped in between
two steps is refused by the kernel, not by a check that came earlier); its entries are
listed with ``os.scandir`` and ``lstat`` (no link is followed); a file is opened with
``O_NOFOLLOW | O_NONBLOCK`` (a link fails with ELOOP, a named pipe opens without waiting for
a writer), checked with ``fstat`` to be the same regular file with one name (a hard link to a
file elsewhere has ``st_nlink > 1``), and read up to a bound, never beyond.

A refusal (:class:`Refused`) names the entry, escaped for display, and what kind of thing it
is; never where a link points and never what a file holds.
"""

from __future__ import annotations

import os
import stat
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..i18n import T

MAX_ENTRIES = 1000  # entries of one submission folder that are looked at, at most
MAX_NAME = 255

_FILE_FLAGS = (os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0))
_DIR_FLAGS = _FILE_FLAGS | os.O_DIRECTORY

# nbgrader's CourseDirectory.ignore: folders a copy of a home folder carries and nobody grades
IGNORED = (".ipynb_checkpoints", "__pycache__")


class Refused(Exception):
    """An entry of a submission folder that intake does not open; the message says which."""


def shown(name: str) -> str:
    """``name`` as it can be shown in any record: control, format and undecodable characters
    as escapes (``\\x1b``, ``\\u202e``, ``\\udcff``), at most 80 characters."""
    out = []
    for ch in name:
        cat = unicodedata.category(ch)
        if ch == "\\" or cat in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(ascii(ch)[1:-1] if ch != "\\" else "\\\\")
        else:
            out.append(ch)
    text = "".join(out)
    return text if len(text) <= 80 else text[:77] + "..."


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a file of a submission, or None. Refused: ``..`` anywhere (a
    path that climbs once joined), ``/`` and ``\\``, control, format and undecodable
    characters, an empty or over-long name."""
    if not name or name == ".":
        return T("an empty or dot name")
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME:
        return T("more than {n} bytes", n=MAX_NAME)
    if ".." in name:
        return T("'..'")
    if "/" in name or "\\" in name:
        return T("a slash")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
           for ch in name):
        return T("control or undecodable characters")
    return None


def check_name(name: str) -> None:
    """Refused unless ``name`` may name a file or folder of a submission."""
    why = name_problem(name)
    if why:
        raise Refused(T("{name} is not a regular file (its name holds {why})",
                        name=shown(name), why=why))


@dataclass(frozen=True)
class Entry:
    """One entry of a folder, as ``lstat`` sees it (nothing followed)."""

    name: str
    kind: str  # file, folder, link, named pipe, socket, device, other
    size: int
    nlink: int
    ino: int
    dev: int
    uid: int = -1  # the owner (st_uid): who made it, as the kernel says
    ctime: float = 0.0  # the last change of the entry (st_ctime): set by the kernel only


def entry_of(name: str, st: os.stat_result) -> Entry:
    """The :class:`Entry` of ``name`` from its ``lstat``."""
    return Entry(name, _kind(st.st_mode), st.st_size, st.st_nlink, st.st_ino, st.st_dev,
                 st.st_uid, st.st_ctime)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    if stat.S_ISLNK(mode):
        return "link"
    if stat.S_ISFIFO(mode):
        return "named pipe"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "other"


def not_regular(entry: Entry) -> str | None:
    """The refusal for ``entry`` as a file of a submission, or None for a plain file."""
    if entry.kind == "file" and entry.nlink == 1:
        return None
    kind = T("a hard link: one of {n} names of a file", n=entry.nlink) \
        if entry.kind == "file" else T("a {kind}", kind=entry.kind)
    return T("{name} is not a regular file ({kind})", name=shown(entry.name), kind=kind)


class Folder:
    """A folder opened without following links; entries listed and read through its
    descriptor only. Use as a context manager."""

    def __init__(self, fd: int, label: str) -> None:
        self.fd, self.label = fd, label

    @classmethod
    def at(cls, path: str | os.PathLike) -> "Folder":
        """The folder at ``path`` (an instructor's path: links in it are the instructor's)."""
        return cls(os.open(path, _DIR_FLAGS & ~os.O_NOFOLLOW), str(path))

    def __enter__(self) -> "Folder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def entries(self) -> list[Entry]:
        """Every entry, sorted by name, ``lstat`` only; Refused past :data:`MAX_ENTRIES`."""
        out = []
        with os.scandir(self.fd) as it:
            for e in it:
                if len(out) >= MAX_ENTRIES:
                    raise Refused(T("the folder holds more than {n} entries", n=MAX_ENTRIES))
                st = e.stat(follow_symlinks=False)
                out.append(entry_of(e.name, st))
        return sorted(out, key=lambda e: e.name)

    def entry(self, name: str) -> Entry | None:
        """``name``'s entry (``lstat``), or None when there is none."""
        check_name(name)
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        return entry_of(name, st)

    def scan(self, limit: int) -> Iterator[Entry]:
        """Every entry, unsorted, ``lstat`` only, one at a time (a folder of any size is
        walked in constant memory); Refused once more than ``limit`` were seen."""
        n = 0
        with os.scandir(self.fd) as it:
            for e in it:
                n += 1
                if n > limit:
                    raise Refused(T("the folder holds more than {n} entries", n=limit))
                try:
                    st = e.stat(follow_symlinks=False)
                except FileNotFoundError:  # gone since listed
                    continue
                yield entry_of(e.name, st)

    def folder(self, name: str) -> "Folder":
        """The sub-folder ``name``, which must be a real folder (Refused otherwise;
        FileNotFoundError when there is none)."""
        check_name(name)
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=self.fd)
        except OSError:
            e = self.entry(name)
            if e is None:
                raise FileNotFoundError(f"{self.label}/{shown(name)}") from None
            raise Refused(T("{name} is not a regular folder (a {kind})", name=shown(name),
                            kind=e.kind)) from None
        return Folder(fd, f"{self.label}/{name}")

    def read(self, entry: Entry, limit: int) -> bytes:
        """The bytes of the regular file ``entry`` (from :meth:`entries`), at most ``limit``;
        Refused for anything else, or for a file that grew past ``limit``."""
        why = not_regular(entry)
        if why:
            raise Refused(why)
        if entry.size > limit:
            raise Refused(too_large(entry.name, entry.size, limit))
        try:
            fd = os.open(entry.name, _FILE_FLAGS, dir_fd=self.fd)
        except OSError:  # ELOOP: it became a link; ENXIO: a socket; ...: not ours to open
            raise Refused(T("{name} is not a regular file (it changed while read)",
                            name=shown(entry.name))) from None
        try:
            st = os.fstat(fd)
            if (not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_ino != entry.ino
                    or st.st_dev != entry.dev):
                raise Refused(T("{name} is not a regular file (it changed while read)",
                                name=shown(entry.name)))
            chunks, got = [], 0
            while got <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
            if got > limit:
                raise Refused(too_large(entry.name, got, limit))
            return b"".join(chunks)
        finally:
            os.close(fd)


def too_large(name: str, size: int, limit: int) -> str:
    if limit >= 1 << 20:
        return T("{name} is {size} MiB, more than the {limit} MiB allowed", name=shown(name),
                 size=max(size >> 20, (limit >> 20) + 1) if size > limit else size >> 20,
                 limit=limit >> 20)
    return T("{name} is more than the {limit} bytes allowed", name=shown(name), limit=limit)


def real_folder_inside(root: str | os.PathLike, *parts: str) -> Folder:
    """``root/parts[0]/...`` opened one level at a time, no level a link (Refused)."""
    top = Folder.at(Path(root))
    try:
        for part in parts:
            nxt = top.folder(part)
            top.close()
            top = nxt
    except BaseException:
        top.close()
        raise
    return top


__all__ = ["Folder", "Entry", "entry_of", "Refused", "check_name", "name_problem", "not_regular",
           "shown", "real_folder_inside", "too_large", "MAX_ENTRIES", "IGNORED"]
