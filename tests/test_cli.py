"""The `cudacourse` command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cudacourse import cli, device

pytestmark = pytest.mark.lesson1


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


def test_console_script_runs_doctor_even_if_import_would_refuse():
    p = subprocess.run([sys.executable, "-c", "import sys, cudacourse_cli; sys.argv=['cudacourse',"
                        "'doctor']; sys.exit(cudacourse_cli.main())"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "all good" in p.stdout


def test_quiz_hash_matches_the_bank(capsys):
    from cudacourse.quiz import answer_hash

    assert cli.main(["quiz-hash", "01_gpu_vs_cpu.grid", "c"]) == 0
    assert capsys.readouterr().out.strip() == answer_hash("01_gpu_vs_cpu.grid", "c")


def test_build_check_reports_fresh_masters(capsys):
    assert cli.main(["build", "--check", "01"]) == 0
    assert "up to date" in capsys.readouterr().out


def test_lab_copies_the_lessons_and_serves_jupyterlab(tmp_path):
    """`cudacourse lab` (what `./course lab` runs) starts a JupyterLab on the workspace."""
    pytest.importorskip("jupyterlab", reason="JupyterLab is not installed here (the GPU "
                        "machine's image carries only what executes and grades notebooks)")
    import socket
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ws = tmp_path / "ws"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, cudacourse_cli; sys.exit(cudacourse_cli.main())",
         "lab", "--workspace", str(ws), "--no-browser", f"--ServerApp.port={port}",
         "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.open_browser=False"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        body = ""
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab", timeout=2) as r:
                    body = r.read().decode()
                    break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.5)
        assert "JupyterLab" in body, proc.stdout.read() if proc.poll() is not None else body
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/01_gpu_vs_cpu",
                                    timeout=5) as r:
            assert "01_gpu_vs_cpu.ipynb" in r.read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert (ws / "01_gpu_vs_cpu" / "01_gpu_vs_cpu.ipynb").exists()
