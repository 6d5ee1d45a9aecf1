"""Shared test setup: choose the device first, then mark GPU-only tests.

``import cudacourse`` must run before anything imports numba.cuda, so it happens here, at
collection time. Tests run on a real GPU when one is usable (or CUDACOURSE_DEVICE=gpu), and
in Numba's CUDA simulator otherwise.
"""

from __future__ import annotations

import os

os.environ.setdefault("CUDACOURSE_QUIET", "1")

import pytest  # noqa: E402

import cudacourse  # noqa: E402,F401 - chooses the device before numba.cuda is imported
from cudacourse import device  # noqa: E402


def pytest_report_header(config):
    return f"cudacourse: {device.current().mode} mode ({device.current().reason})"


def pytest_collection_modifyitems(config, items):
    if device.is_simulator():
        skip_gpu = pytest.mark.skip(
            reason=f"needs a real NVIDIA GPU; this run uses the simulator "
                   f"({device.current().reason})")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip_gpu)
    else:
        default = ("simulator-only: relies on the simulator's internals (its array wrappers "
                   "count element reads; its warp model diagnoses undefined behaviour), which "
                   "a GPU does not have")
        for item in items:
            marker = item.get_closest_marker("sim_only")
            if marker is not None:
                item.add_marker(pytest.mark.skip(reason=marker.kwargs.get("reason", default)))
