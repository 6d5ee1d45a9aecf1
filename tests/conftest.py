"""Shared test setup: choose the device first, then mark GPU-only tests.

``import cudacourse`` must run before anything imports numba.cuda, so it happens here, at
collection time. Tests run on a real GPU when one is usable (or CUDACOURSE_DEVICE=gpu), and
in Numba's CUDA simulator otherwise.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from typing import Callable, Iterator

os.environ.setdefault("CUDACOURSE_QUIET", "1")

import pytest  # noqa: E402

import cudacourse  # noqa: E402,F401 - chooses the device before numba.cuda is imported
from cudacourse import device  # noqa: E402
from japanese_edition import pytest_runtest_call  # noqa: E402,F401 - diagnoses in Japanese too


def pytest_report_header(config):
    return f"cudacourse: {device.current().mode} mode ({device.current().reason})"


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Headless Chromium in a container: no sandbox of its own (it runs as root), no GPU, nothing
# fetched from the network behind the test's back.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def _no_browser() -> str:
    """Why the browser tests cannot run here ('' when they can)."""
    if CHROMIUM is None:
        return "Chromium is not installed (`apt-get install chromium`; .ci/run installs it)"
    if importlib.util.find_spec("playwright") is None:
        return "Playwright is not installed here (pip install playwright)"
    return ""


@pytest.fixture()
def browser():
    """Headless Chromium (Debian's package) driven by Playwright, for one test; closed after
    it. Tests marked ``browser`` are skipped, with the reason, where it cannot run."""
    why = _no_browser()
    if why:
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@contextlib.contextmanager
def _jupyter_server(command: Callable[[int], list[str]], ready: str, *, cwd=None,
                    env=None) -> Iterator[str]:
    with socket.socket() as s:  # a free port, on loopback only
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(command(port), cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(url + ready, timeout=5)
                break
            except OSError:
                assert proc.poll() is None, f"the server exited: {command(port)[:4]}"
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def jupyter_server():
    """For the browser tests' server fixtures: ``with jupyter_server(command, "/lab") as
    url:`` runs ``command(port)`` on a free loopback port, waits until ``url + ready``
    answers, and stops the server after the block."""
    return _jupyter_server


def pytest_collection_modifyitems(config, items):
    why = _no_browser()
    if why:  # at collection: their course and server fixtures are never built
        for item in items:
            if "browser" in item.keywords:
                item.add_marker(pytest.mark.skip(reason=why))
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
