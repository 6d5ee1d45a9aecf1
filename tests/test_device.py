"""Device choice at setup (or first use): policies, notices, and the errors a learner can hit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from cudacourse.runtime import device



def run_py(code: str, **env: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter: the mode is fixed once per process."""
    full_env = {k: v for k, v in os.environ.items()
                if k not in ("CUDACOURSE_DEVICE", "NUMBA_ENABLE_CUDASIM", "CUDACOURSE_QUIET",
                             "CUDACOURSE_SIM_REASON")}
    full_env.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, timeout=120)


def test_sim_policy_forces_the_simulator_with_a_one_line_notice():
    p = run_py("import cudacourse; cudacourse.setup(); import numba.cuda as c; "
               "print('MODE', cudacourse.MODE, "
               "c.simulator is not None if hasattr(c, 'simulator') else None)",
               CUDACOURSE_DEVICE="sim")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("cudacourse: simulator mode (CUDACOURSE_DEVICE=sim)")
    assert "MODE sim" in lines[1]


def test_quiet_silences_the_notice():
    p = run_py("import cudacourse; print(cudacourse.MODE)", CUDACOURSE_DEVICE="sim",
               CUDACOURSE_QUIET="1")
    assert p.stdout.strip() == "sim", p.stderr


def test_unknown_policy_is_named():
    p = run_py("import cudacourse; cudacourse.setup()", CUDACOURSE_DEVICE="tpu")
    assert p.returncode != 0
    assert "CUDACOURSE_DEVICE='tpu' is not one of auto, sim, gpu" in p.stderr


def test_gpu_policy_without_gpu_fails_clearly():
    if not device.is_simulator():
        pytest.skip("a GPU is present: the 'no GPU' error cannot happen here")
    p = run_py("import cudacourse; cudacourse.setup()", CUDACOURSE_DEVICE="gpu")
    assert p.returncode != 0
    assert "CUDACOURSE_DEVICE=gpu demands a GPU, but" in p.stderr
    assert "nvidia-smi" in p.stderr


def test_auto_without_gpu_falls_back_to_the_simulator_and_says_why():
    if not device.is_simulator():
        pytest.skip("a GPU is present: auto picks it")
    p = run_py("import cudacourse; print(cudacourse.MODE)")
    assert p.returncode == 0, p.stderr
    assert "simulator mode (no NVIDIA driver found" in p.stdout
    assert p.stdout.strip().endswith("sim")


def test_numba_cuda_imported_first_in_real_mode_without_gpu_is_explained():
    if not device.is_simulator():
        pytest.skip("a GPU is present: importing numba.cuda first is harmless there")
    p = run_py("import numba.cuda\nimport cudacourse\ncudacourse.setup()")
    assert p.returncode != 0
    assert "numba.cuda was imported before cudacourse" in p.stderr
    assert "restart the Python kernel" in p.stderr


def test_numba_cuda_imported_first_in_sim_mode_is_adopted():
    p = run_py("import numba.cuda\nimport cudacourse\nprint(cudacourse.MODE)",
               NUMBA_ENABLE_CUDASIM="1")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().endswith("sim")
    assert "NUMBA_ENABLE_CUDASIM=1 is set" in p.stdout


def test_gpu_demanded_after_numba_imported_in_sim_mode_fails():
    p = run_py("import numba.cuda\nimport cudacourse\ncudacourse.setup()", NUMBA_ENABLE_CUDASIM="1",
               CUDACOURSE_DEVICE="gpu")
    assert p.returncode != 0
    assert "demands a GPU" in p.stderr


def test_importing_the_package_does_nothing():
    """No device chosen, no NUMBA_* variable, no simulator patch, no notice: the grader and
    the command import the package like any other."""
    p = run_py("""
        import os, sys
        before = dict(os.environ)
        import cudacourse, cudacourse.grader.autograde, cudacourse.course.lessons, cudacourse.course.quiz
        from cudacourse import device
        print(sorted(k for k in os.environ if os.environ[k] != before.get(k)),
              "numba.cuda" in sys.modules, device.chosen(),
              any(m in sys.modules for m in ("cudacourse.runtime.simwarp", "cudacourse.runtime.simblock")))
    """)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[] False False False"


def test_setup_sets_the_language_first_then_prints_the_device_line_in_it():
    p = run_py("import cudacourse; c = cudacourse.setup(lang='ja'); "
               "print(c is cudacourse.setup(), cudacourse.MODE)", CUDACOURSE_DEVICE="sim")
    assert p.returncode == 0, p.stderr
    first, second = p.stdout.splitlines()
    assert first.startswith("cudacourse: シミュレータモード (CUDACOURSE_DEVICE=sim)")
    assert second == "True sim"


def test_a_module_that_needs_numba_chooses_the_device_itself():
    p = run_py("import cudacourse.kernels.vector, sys; from cudacourse import device; "
               "print(device.chosen(), 'cudacourse.runtime.simwarp' in sys.modules)",
               CUDACOURSE_DEVICE="sim")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [p.stdout.splitlines()[0], "True True"]
    assert p.stdout.startswith("cudacourse: simulator mode (CUDACOURSE_DEVICE=sim)")


def test_asking_for_another_mode_after_the_choice_is_an_error():
    p = run_py("import cudacourse; cudacourse.setup(); cudacourse.setup(device='gpu')",
               CUDACOURSE_DEVICE="sim", CUDACOURSE_QUIET="1")
    assert p.returncode != 0 and "already runs in sim mode" in p.stderr


def test_numpy_25_with_numba_cuda_030_is_refused_with_advice(monkeypatch):
    monkeypatch.setattr(np, "__version__", "2.5.1")
    msg = device.numpy_problem()
    assert "numpy 2.5.1 breaks numba-cuda 0.30" in msg and "numpy<2.5" in msg
    monkeypatch.setattr(np, "__version__", "2.4.6")
    assert device.numpy_problem() == ""


def test_pick_follows_the_mode():
    assert device.pick(sim=1, gpu=2) == (1 if device.is_simulator() else 2)


def test_require_gpu_names_what_needs_it():
    if not device.is_simulator():
        device.require_gpu("anything")  # no error on a GPU
        return
    with pytest.raises(device.DeviceError, match="measuring bandwidth needs a real NVIDIA GPU"):
        device.require_gpu("measuring bandwidth")


def test_cupy_usability_is_reported_not_raised():
    ok, why = device.cupy_usable()
    if device.is_simulator():
        assert not ok and "simulator" in why
    else:
        assert ok or why


@pytest.mark.gpu
def test_gpu_is_described():
    info = device.current().gpu
    assert info is not None and info.sm_count > 0 and info.total_memory > 2**30
    assert "compute capability" in info.describe()


def test_a_probe_handed_down_is_used_without_asking_the_driver(monkeypatch):
    """The grader's verdict server must not initialise CUDA (it forks a child per cell): it
    takes a parent's probe from CUDACOURSE_GPU_PROBED, and here, with no driver at all, that
    probe is what comes back."""
    info = {"name": "Handed-down GPU", "compute_capability": [9, 0], "sm_count": 132,
            "total_memory": 1 << 30, "driver_version": [13, 0], "device_count": 1}
    monkeypatch.setenv(device.PROBED_ENV, json.dumps({"info": info, "why": ""}))
    got, why = device.probe_gpu()
    assert why == "" and got is not None and got.name == "Handed-down GPU"
    assert got.compute_capability == (9, 0) and got.driver_version == (13, 0)
    monkeypatch.setenv(device.PROBED_ENV, json.dumps({"info": None, "why": "no GPU there"}))
    assert device.probe_gpu() == (None, "no GPU there")
    monkeypatch.setenv(device.PROBED_ENV, "not json")  # unreadable: this process probes
    assert device._handed_down() is None
    monkeypatch.delenv(device.PROBED_ENV)
    assert json.loads(device.probe_json()).keys() == {"info", "why"}
