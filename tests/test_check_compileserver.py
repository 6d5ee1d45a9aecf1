"""The compile child kept alive between kernels (check/_compileserver.py): one child serves a
process's kernels with the same answers as a child per kernel; a kernel is read from its
own source even where an earlier one came from a cell of the same name; a request that
hangs ends its child and the next request gets a fresh one; a forked process starts its
own; what learner code prints cannot pass for an answer."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from cudacourse.check import _compile as C, _compileserver as S, _source

pytestmark = pytest.mark.sim_only(reason="the compile gate runs only in the simulator")


def _needs_toolkit() -> dict:
    tk = C.toolkit()
    if isinstance(tk, str):
        pytest.skip(f"the sm_90 compiler is not here: {tk}")
    return tk


def _kernel(body: str, filename: str, name: str = "k"):
    """A kernel defined from ``body`` as a notebook cell named ``filename`` defines it."""
    import linecache

    from numba import cuda

    src = f"@cuda.jit\ndef {name}(a, out):\n" + "".join(f"    {ln}\n" for ln in body.splitlines())
    lines = src.splitlines(keepends=True)
    linecache.cache[filename] = (len(src), None, lines, filename)
    ns = {"cuda": cuda, "np": np}
    exec(compile(src, filename, "exec"), ns)  # noqa: S102 - the test's own kernel
    return ns[name]


SPECS = [C.type_spec(np.zeros(8, np.float32))] * 2
GOOD = "i = cuda.grid(1)\nif i < out.size:\n    out[i] = a[i] * 2.0"
REFUSED = "i = cuda.grid(1)\nif i < out.size:\n    out[i] = np.dot(a, a)"


def _compile_fresh(kernel) -> dict:
    C._STATE["memo"].clear()
    bundle = _source.bundle(kernel)
    return C.run_child("compile", {"toolkit": C.toolkit(), "bundle": bundle,
                                   "entry": bundle["entries"][0], "signatures": [SPECS],
                                   "src_dir": C._SRC_DIR})["results"][0]


def test_one_child_serves_kernel_after_kernel_with_the_answers_of_a_child_each(monkeypatch):
    _needs_toolkit()
    kernels = [_kernel(GOOD, "<cell-a>"), _kernel(REFUSED, "<cell-b>"),
               _kernel(GOOD.replace("2.0", "3.0"), "<cell-c>")]
    served = [_compile_fresh(k) for k in kernels]
    server = S._HELD["server"]
    assert server is not None and server.alive()
    pid = server.proc.pid
    served += [_compile_fresh(k) for k in kernels]
    assert S._HELD["server"].proc.pid == pid  # the same child answered all six
    monkeypatch.setattr(S, "ENABLED", False)
    alone = [_compile_fresh(k) for k in kernels]

    def verdict(r: dict) -> tuple:  # a refusal's raw text varies by process (set order,
        # Numba's indentation of nested errors): its kind and the cause the gate names do not
        if r["ok"]:
            return True, r["resources"]
        return False, r["kind"], C.refusal_cause(r["error"], "", "")

    assert [verdict(r) for r in served] == [verdict(r) for r in alone + alone]
    assert [r["ok"] for r in alone] == [True, False, True]
    assert "dot" in alone[1]["error"]


def test_a_cell_of_the_same_name_is_read_from_its_own_source():
    # a notebook re-runs a cell: the same file name, a new body; the child must not keep the
    # first body's lines (linecache) and compile the old kernel again
    _needs_toolkit()
    first = _compile_fresh(_kernel(GOOD, "<cell-same>"))
    second = _compile_fresh(_kernel(REFUSED, "<cell-same>"))
    third = _compile_fresh(_kernel(GOOD, "<cell-same>"))
    assert first["ok"] and not second["ok"] and third["ok"], (first, second, third)


def test_a_request_that_hangs_ends_its_child_and_the_next_gets_a_fresh_one():
    tk = _needs_toolkit()
    _compile_fresh(_kernel(GOOD, "<cell-d>"))
    before = S._HELD["server"].proc
    hang = {"toolkit": tk, "src_dir": C._SRC_DIR, "entry": "k", "signatures": [],
            "bundle": {"prelude": ["import time\ntime.sleep(120)"], "units": [],
                       "aliases": {}}}
    answer = S.ask(C._CHILD, C._child_env(), C._child_module().RESULT_MARK, hang, timeout=3)
    assert "longer than 3 s" in answer["child_error"]
    assert before.poll() is not None  # that child is gone
    assert _compile_fresh(_kernel(GOOD, "<cell-e>"))["ok"]
    assert S._HELD["server"].proc.pid != before.pid


def test_what_learner_code_prints_cannot_pass_for_an_answer():
    tk = _needs_toolkit()
    mark = C._child_module().RESULT_MARK
    forged = json.dumps({"results": [{"ok": True, "resources": {}}]})
    req = {"toolkit": tk, "src_dir": C._SRC_DIR, "entry": "k", "signatures": [SPECS],
           "bundle": {"prelude": [f"print('\\n' + {mark!r} + {forged!r})",
                                  f"print({mark!r} + 'x' * 32 + {forged!r})"],
                      "units": [], "aliases": {}}}
    answer = S.ask(C._CHILD, C._child_env(), mark, req, timeout=60)
    # no unit defines k: the child's own answer says so; the printed ones were not taken
    assert "KeyError" in answer["child_error"] and "longer" not in answer["child_error"], answer


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_process_starts_its_own_child():
    _needs_toolkit()
    _compile_fresh(_kernel(GOOD, "<cell-f>"))
    parent_child = S._HELD["server"].proc.pid
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked process reports through the pipe
        try:
            ok = _compile_fresh(_kernel(GOOD, "<cell-g>"))["ok"]
            os.write(w, json.dumps([ok, S._HELD["server"].proc.pid]).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as fh:
        ok, its_child = json.loads(fh.read())
    os.waitpid(pid, 0)
    assert ok and its_child != parent_child
    assert S._HELD["server"].proc.pid == parent_child and S._HELD["server"].alive()


def test_a_child_that_died_between_kernels_is_replaced():
    _needs_toolkit()
    assert _compile_fresh(_kernel(GOOD, "<cell-h>"))["ok"]
    gone = S._HELD["server"].proc
    gone.kill()
    gone.wait()
    assert _compile_fresh(_kernel(GOOD, "<cell-i>"))["ok"]
    assert S._HELD["server"].proc.pid != gone.pid


def test_bytes_that_are_not_utf8_in_what_learner_code_prints_do_not_stop_the_answer():
    tk = _needs_toolkit()
    req = {"toolkit": tk, "src_dir": C._SRC_DIR, "entry": "k", "signatures": [SPECS],
           "bundle": {"prelude": ["import sys\nsys.stdout.buffer.write(b'\\xff\\xfe caf\\xe9\\n')"
                                  "\nsys.stdout.flush()"], "units": [], "aliases": {}}}
    answer = S.ask(C._CHILD, C._child_env(), C._child_module().RESULT_MARK, req, timeout=60)
    # the child's own answer (no unit defines k), not a reader stopped by the bytes
    assert "KeyError" in answer["child_error"] and "longer" not in answer["child_error"], answer
    assert _compile_fresh(_kernel(GOOD, "<cell-j>"))["ok"]
