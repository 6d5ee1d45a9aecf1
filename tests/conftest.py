"""Shared test setup: choose the device first, mark GPU-only tests, share what is built.

``cudacourse.setup()`` must run before anything imports numba.cuda, so it happens here, at
collection time. Tests run on a real GPU when one is usable (or CUDACOURSE_DEVICE=gpu), and
in Numba's CUDA simulator otherwise.

Sharing what the integration tests build (a graded class, a gradebook server, an exchange)
----------------------------------------------------------------------------------------
Such a thing is built once per test session and read by every test that needs it:

* it is a session-scoped fixture (``graded_class`` below: the sample class of lesson 1,
  tests/gradingclass.py) or a module-scoped one in its test file (``exchanged``,
  ``reported``...);
* its name is in ``SHARED`` below. Every test that asks for it (directly or through another
  fixture) gets the pytest-xdist mark ``xdist_group``, and ``./course test`` runs
  ``--dist loadgroup``: one worker runs all of them, so the fixture is built once, while the
  other workers run the rest. The group is the fixture's name for a session fixture, and the
  defining file for a module fixture (two files' ``graded`` are two builds; a file's server
  and the class graded into it are one). xdist sends the work in collection order
  (``--no-loadscope-reorder``), which ``_heavy_modules_first`` makes longest first: the
  class is started at once, then the other builds and slow tests, the quick ones last.

To join the shared class, a new test (a hostile sample's own assertion, a browser test of
the graded class, a catalogue mutant graded end to end) just asks for ``graded_class``; a new
sample in tests/submissions/samples.py is graded in it automatically. To share something
new, build it in a fixture of session (or module) scope and add its name to ``SHARED``.
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
from pathlib import Path
from typing import Callable, Iterator

os.environ.setdefault("CUDACOURSE_QUIET", "1")

import pytest  # noqa: E402

import cudacourse  # noqa: E402
from cudacourse.runtime import device  # noqa: E402
from japanese_edition import pytest_runtest_call  # noqa: E402,F401 - diagnoses in Japanese too

cudacourse.setup()  # the device, before any test module imports numba.cuda


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


@pytest.fixture(scope="session")
def graded_class(request):
    """The sample class of lesson 1, graded by ``cudacourse grade`` once per test session
    (tests/gradingclass.py: what is in it and what was run; the dict it returns)."""
    import gradingclass

    # under --dist loadgroup every reader is in this worker: it may remove the class after
    sole = getattr(request.config.option, "loadgroup", False)
    yield from gradingclass.shared(sole_reader=sole)


# Fixtures that build something slow, shared per test session (see the module docstring).
SHARED = (
    "graded_class",   # here: the sample class of lesson 1, graded by `cudacourse grade`
    "exchanged",      # test_exchange: release, fetch, submit, collect, grade
    "reported",       # test_grader_classreport: a small class graded, then reported on
    "graded",         # test_grader_distributed (Dask), test_grader_postgres (a server)
    "postgres",       # test_grader_postgres: the throwaway PostgreSQL server
    "course",         # test_browser_grader, test_browser_formgrader: a graded course
    "formgrader",     # test_browser_formgrader: the instructor's server on that course
    "smoke",          # test_bench: one simulator smoke pass, every output option
    "installed",      # test_frontdoor_flow: the wheel built and installed in a scratch venv
)


def shared_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a ``SHARED`` fixture (the first one, in the
    order of ``SHARED``), or None. (``Path`` of a module fixture's file: its base id.)"""
    defs = item._fixtureinfo.name2fixturedefs  # noqa: SLF001 - pytest has no public accessor
    for name in SHARED:
        if name not in item.fixturenames or not defs.get(name):
            continue
        fixture = defs[name][-1]  # the definition this test sees (the innermost)
        if fixture.scope == "session":
            return name
        # a module's shared fixtures are one group (a server and the class graded into it)
        return Path(fixture.baseid).name if fixture.baseid else item.path.name
    return None


def _in_group(item: pytest.Item) -> None:
    """What pytest-xdist's worker does for ``--dist loadgroup`` (the group after an '@' in the
    node id, which its scheduler reads), done here for pytest >= 9, whose nodes keep their
    id in ``_id`` (a NodeId): xdist 3.8 still writes ``_nodeid``, which no longer exists,
    so its groups would silently be spread over the workers."""
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    if not names or "@" in item.nodeid.rpartition("]")[2] or not hasattr(item, "_id") \
            or hasattr(item, "_nodeid"):
        return
    from _pytest.nodeid import NodeId

    item._id = NodeId.parse(f"{item.nodeid}@{'_'.join(names)}")  # noqa: SLF001


# Marks of the tests that take tens of seconds each (grading a class, executing a notebook,
# driving a browser): their modules are collected first (``_heavy_modules_first``).
SLOW_MARKS = ("grading", "notebooks", "browser")


def _heavy_modules_first(items: list[pytest.Item]) -> None:
    """Longest first, so that the longest build starts at once and no worker is left alone
    at the end of ``./course test`` with a slow test it started last. ``./course test``
    runs ``--dist loadgroup --no-loadscope-reorder``: xdist hands out the groups and single
    tests in collection order, and this order is: the modules that read ``SHARED[0]`` (the
    graded class, the session's longest build), then every module holding a test marked in
    ``SLOW_MARKS``, then the rest. Stable: modules keep their order among their kind and
    stay whole (a module fixture is built once per run of its tests in a row); every worker
    collects the same order, as xdist requires."""
    first = {item.path for item in items if shared_group(item) == SHARED[0]}
    heavy = {item.path for item in items
             if any(item.get_closest_marker(m) for m in SLOW_MARKS)}
    items.sort(key=lambda item: 0 if item.path in first else 1 if item.path in heavy else 2)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    loadgroup = getattr(config.option, "loadgroup", False)  # set in xdist's workers
    for item in items:
        group = shared_group(item)
        if group and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))
        if loadgroup:
            _in_group(item)
    _heavy_modules_first(items)
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
