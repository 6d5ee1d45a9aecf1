"""tools/gpu/verify.sh's own paths, in simulator mode on a tiny subset (the GPU run is the
lead's; this proves the bash and the record it assembles): the commit, a suite stage whose
counts reach the record, a lesson asked for but never run recorded as not passed, and the
files that come back under $OUT."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from cudacourse.course import gpu_run

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "gpu" / "verify.sh"


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                          timeout=60).stdout.strip()


@pytest.mark.skipif(not _git("rev-parse", "HEAD"), reason="needs the git checkout (the "
                    "commit the record names); a copy without .git passes VERIFY_COMMIT")
def test_verify_in_simulator_mode_writes_a_record_of_what_ran(tmp_path):
    out, record = tmp_path / "out", tmp_path / "gpu_run.json"
    env = {**os.environ, "VERIFY_SIM": "1", "VERIFY_STAGES": "suite",
           "VERIFY_SUITE_ARGS": "tests/test_gpu_run.py::test_render_names_what_the_record_says",
           "VERIFY_XDIST": "0", "VERIFY_ALLOW_DIRTY": "1", "VERIFY_RECORD": str(record),
           "VERIFY_RESERVE": "1",  # one core for the timed stages, the suite on the others
           "OUT": str(out), "PYTHON": os.environ.get("PYTHON", "python3")}
    env["PATH"] = str(Path(os.sys.executable).parent) + os.pathsep + env["PATH"]
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    # 1: the record was written and misses goals (a simulator run is no GPU run)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    rec = json.loads(record.read_text())
    head = _git("rev-parse", "HEAD")
    assert rec["commit"] in (head, f"{head}-dirty")
    assert rec["mode"] == "sim" and rec["stages"] == ["suite"]
    # the reserved core: taken where another core is left to the rest (taskset, else Python)
    pinned = len(os.sched_getaffinity(0)) > 1
    assert rec["reserved_cores"] == (1 if pinned else 0) and rec["masters_alone"] is pinned
    s = rec["suite"]
    assert (s["passed"], s["failed"], s["errors"], s["complete"]) == (1, 0, 0, True), s
    assert rec["grading"]["ran"] is False  # not asked for: said so, never invented
    assert "not a GPU run (mode 'sim')" in rec["goals_missed"] or rec["problems"]
    assert json.loads((out / "gpu_run.json").read_text()) == rec
    with tarfile.open(out / "logs.tgz") as tar:
        names = tar.getnames()
    assert any(n.endswith("pytest.log") for n in names) and \
        any(n.endswith("pytest.xml") for n in names), names
    assert "verify done" in (out / "summary.txt").read_text()
    assert gpu_run.validate({**rec, "commit": head, "lessons": {"01_x": {
        "seconds": 1, "passed": True, "slowest_check_s": None}}}) == []
