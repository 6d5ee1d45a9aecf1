"""The `cudacourse` command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cudacourse import cli
from cudacourse.runtime import device

def test_doctor_reports_versions_and_mode(capsys):
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    for word in ("numpy", "numba-cuda", "nbgrader", "mode", "cupy usable", "all good"):
        assert word in out
    assert f"mode          {device.mode()}" in out


def test_doctor_fails_with_advice_on_numpy_25(monkeypatch, capsys):
    monkeypatch.setattr(device, "numpy_problem",
                        lambda: "numpy 2.5.0 breaks numba-cuda 0.30.4 (np.row_stack ...)")
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "PROBLEMS" in out and "numpy 2.5.0 breaks" in out and "./course test" in out


def test_console_script_runs_doctor_through_the_package():
    """`import cudacourse` does nothing, so the command lives in the package and its doctor
    runs (and explains) where choosing the device would fail."""
    p = subprocess.run([sys.executable, "-m", "cudacourse.cli", "doctor"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "all good" in p.stdout


def test_quiz_hash_matches_the_bank(capsys):
    from cudacourse.course.quiz import answer_hash

    assert cli.main(["quiz-hash", "01_gpu_vs_cpu.global_index", "677"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == answer_hash("01_gpu_vs_cpu.global_index", "677")
    from cudacourse.course import quiz

    from cudacourse.course.authoring import ROOT

    key = quiz.keyed("01_gpu_vs_cpu", ROOT)["01_gpu_vs_cpu.global_index"]
    assert out == key.answer_hash  # a number question


def test_build_check_reports_fresh_masters(capsys):
    assert cli.main(["build", "--check", "01"]) == 0
    assert "up to date" in capsys.readouterr().out


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Lab:
    """A `cudacourse lab` (what `./course lab` runs) on a free port, for one test."""

    def __init__(self, *args: str):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cudacourse.cli",
             "lab", *args, "--no-browser", f"--ServerApp.port={self.port}",
             "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=",
             "--ServerApp.disable_check_xsrf=True", "--ServerApp.open_browser=False"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def get(self, path: str, timeout: float = 5) -> tuple[int, str]:
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, ""

    def post(self, path: str, body: dict) -> dict:
        import json
        import urllib.request

        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read().decode())

    def wait(self) -> str:
        import time

        for _ in range(120):
            try:
                status, body = self.get("/lab", timeout=2)
                if status == 200:
                    return body
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        raise AssertionError(self.proc.stdout.read() if self.proc.poll() is not None
                             else "JupyterLab did not answer")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _needs_jupyterlab():
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed here (the GPU "
                        "machine's image carries only what executes and grades notebooks)")


def test_lab_copies_the_lessons_and_serves_jupyterlab(tmp_path):
    """The learner's lab: their copies of the lessons, no instructor tools, no news."""
    _needs_jupyterlab()
    ws = tmp_path / "ws"
    lab = _Lab("--workspace", str(ws))
    try:
        body = lab.wait()
        assert "JupyterLab" in body
        assert lab.get("/api/contents/01_gpu_vs_cpu")[1].count("01_gpu_vs_cpu.ipynb") >= 1
        # the page config the browser gets disables nbgrader's instructor tools
        assert "@jupyter/nbgrader:create-assignment" in body
        assert "@jupyterlab/apputils-extension:announcements" in body
        assert lab.get("/formgrader")[0] == 404  # server side too
    finally:
        lab.close()
    assert (ws / "01_gpu_vs_cpu" / "01_gpu_vs_cpu.ipynb").exists()


@pytest.mark.skipif(not Path("/proc/self/environ").exists(),
                    reason="reads a kernel's environment from /proc (Linux)")
def test_kernels_started_by_lab_do_not_inherit_the_cli_variables(tmp_path):
    """`cudacourse` sets CUDACOURSE_QUIET for itself; a learner's kernel must not see it
    (else the setup cell prints no device line)."""
    _needs_jupyterlab()
    import time

    lab = _Lab("--workspace", str(tmp_path / "ws"))
    try:
        lab.wait()
        kernel = lab.post("/api/kernels", {"name": "python3"})
        env = None
        for _ in range(60):  # the kernel is a child process of the server
            kids = Path(f"/proc/{lab.proc.pid}/task/{lab.proc.pid}/children").read_text().split()
            if kids:
                env = Path(f"/proc/{kids[0]}/environ").read_bytes().split(b"\0")
                break
            time.sleep(0.5)
        assert env is not None, "no kernel process"
        names = {e.split(b"=", 1)[0].decode() for e in env if e}
        assert "CUDACOURSE_QUIET" not in names
        assert "JUPYTER_CONFIG_PATH" in names
        assert kernel["id"]
    finally:
        lab.close()


def test_instructor_lab_shows_formgrader():
    _needs_jupyterlab()
    lab = _Lab("--instructor")
    try:
        body = lab.wait()
        assert "@jupyter/nbgrader:create-assignment" not in body
        status, page = lab.get("/formgrader", timeout=30)
        assert status == 200 and "formgrader" in page.lower()
        import urllib.request

        with urllib.request.urlopen(lab.url + "/", timeout=30) as r:  # what a browser opens
            assert "/formgrader" in r.geturl(), r.geturl()
    finally:
        lab.close()
