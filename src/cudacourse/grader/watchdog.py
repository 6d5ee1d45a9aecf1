"""The watchdog over one sandboxed command's process tree: all its processes together.

Per-process limits (RLIMIT_AS, RLIMIT_DATA) bound one process; four children each under the
limit held 3.1 GiB together (issue 38, class 6). Where no cgroup is delegated to the grader,
this thread is the total: every ``every`` seconds it walks the tree of the command's first
process (every descendant, by /proc's parent links, so daemonised children count too), sums
their memory (PSS: shared pages split between the processes sharing them, RSS where the
kernel gives no PSS) and their threads, and, in the fallback, what the working folder holds
on disk; past a budget it kills the tree and says why, a catalogue entry that becomes the
submission's "not graded: <reason>".
"""

from __future__ import annotations

import glob
import os
import threading
from typing import Any

from ..i18n import T

MIB = 1 << 20


class Watchdog(threading.Thread):
    """Watches a command's whole process tree (every descendant of ``pid``): the memory of
    all its processes together (PSS where the kernel gives it, else RSS) and its number of
    threads. Past either budget it kills the tree and says why (:attr:`exceeded`)."""

    def __init__(self, pid: int, memory_mb: int | None, nproc: int | None,
                 kill: Any, every: float = 0.2, disk: tuple[str, int] | None = None) -> None:
        super().__init__(daemon=True, name=f"watchdog {pid}")
        self.pid, self.memory_mb, self.nproc, self.kill = pid, memory_mb, nproc, kill
        self.disk = disk  # (folder, MiB): the fallback's working folder, a host folder
        self.every = every
        self.done = threading.Event()
        self.exceeded: str | None = None
        self.peak_mb = 0.0

    def run(self) -> None:
        while not self.done.wait(self.every):
            tree = tree_of(self.pid)
            if not tree:
                continue
            used = sum(memory_of(p) for p in tree) / MIB
            self.peak_mb = max(self.peak_mb, used)
            threads = sum(threads_of(p) for p in tree)
            if self.memory_mb is not None and used > self.memory_mb:
                self.exceeded = T("used more than {n} MiB", n=self.memory_mb)
            elif self.nproc is not None and threads > self.nproc:
                self.exceeded = T("started more than {n} processes", n=self.nproc)
            elif self.disk is not None and disk_mb(self.disk[0]) > self.disk[1]:
                self.exceeded = T("wrote more than {n} MiB", n=self.disk[1])
            if self.exceeded:
                self.kill()
                return


def disk_mb(folder: str, most: int = 100_000) -> float:
    """MiB the files under ``folder`` take on disk (links not followed; at most ``most``
    entries are looked at, so that a folder of a million empty files costs no more)."""
    used, seen = 0, 0
    for root, dirs, files in os.walk(folder):
        for name in files + dirs:
            seen += 1
            if seen > most:
                return float("inf")
            try:
                used += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return used / MIB


def tree_of(pid: int) -> list[int]:
    """``pid`` and every process descending from it (by /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        # the name (field 2) may hold spaces and parentheses: the rest follows the last ")"
        rest = data[data.rfind(b")") + 2:].split()
        try:
            children.setdefault(int(rest[1]), []).append(int(stat.split("/")[2]))
        except (IndexError, ValueError):
            continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out if os.path.exists(f"/proc/{pid}") else []


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def memory_of(pid: int) -> int:
    """Bytes a process holds: its proportional set size (shared pages split between the
    processes sharing them), else its resident set size."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def threads_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


__all__ = ["Watchdog", "tree_of", "memory_of", "threads_of", "disk_mb"]
