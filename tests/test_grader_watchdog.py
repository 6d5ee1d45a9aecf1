"""grader/watchdog.py: the tree it watches is every descendant, its totals are the tree's.

The sandbox's own tests (test_grader_sandbox) show it ending forked memory hogs, thread storms
and a full working folder; these check its parts on plain processes of this test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from cudacourse.grader import watchdog

# a child that starts a grandchild in a new session (a daemon): both are the tree's
SPAWN = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(64 << 20); time.sleep(30)"],
                 start_new_session=True)
print("started", flush=True)
time.sleep(30)
"""


def test_the_tree_holds_every_descendant_and_their_memory_adds_up():
    proc = subprocess.Popen([sys.executable, "-c", SPAWN], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"started"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            tree = watchdog.tree_of(proc.pid)
            used = sum(watchdog.memory_of(p) for p in tree)
            if len(tree) == 2 and used > 64 << 20:
                break
            time.sleep(0.2)
        assert tree[0] == proc.pid and len(tree) == 2, tree
        assert used > 64 << 20  # the grandchild's 64 MiB counted
        assert sum(watchdog.threads_of(p) for p in tree) >= 2
    finally:
        for p in watchdog.tree_of(proc.pid):
            os.kill(p, 9)
        proc.wait()
    assert watchdog.tree_of(proc.pid) == []  # gone: nothing to watch


def test_a_watchdog_kills_at_the_budget_and_says_why():
    proc = subprocess.Popen([sys.executable, "-c", SPAWN], stdout=subprocess.PIPE)
    killed = []

    def kill():
        killed.append(True)
        for p in watchdog.tree_of(proc.pid):
            os.kill(p, 9)

    dog = watchdog.Watchdog(proc.pid, memory_mb=32, nproc=None, kill=kill, every=0.1)
    dog.start()
    dog.join(30)
    proc.wait(10)
    assert killed and dog.exceeded == "used more than 32 MiB"


def test_disk_use_is_counted_and_bounded_in_entries(tmp_path):
    for i in range(5):
        (tmp_path / f"f{i}").write_bytes(b"1" * (1 << 20))
    assert 4.9 < watchdog.disk_mb(str(tmp_path)) < 6
    assert watchdog.disk_mb(str(tmp_path), most=3) == float("inf")
