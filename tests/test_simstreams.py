"""runtime/simstreams.py: the simulator refuses what a GPU's Numba refuses as ``stream=``.

A copy given an array's element as its stream passed in the simulator (which ignores
streams) and raised on the H200 (issue 45's mutants of pipelined_scale, 2026-12-05): one
mistake, two verdicts. Now both raise the same TypeError, which the checkers name.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

from cudacourse.check import _raised
from cudacourse.runtime import device, simstreams

pytestmark = pytest.mark.sim_only(reason="the patch is of Numba's simulator; a GPU's Numba "
                                  "checks streams itself")


@cuda.jit
def _twice(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] *= 2


@pytest.fixture(autouse=True)
def _patched():
    device.ensure()


def test_streams_and_the_default_stream_are_taken():
    s = cuda.stream()
    d = cuda.to_device(np.ones(8, np.float32), stream=s)
    _twice[1, 8, s](d)
    _twice[1, 8, 0](d)
    host = np.zeros(8, np.float32)
    d.copy_to_host(host, stream=s)
    d.copy_to_device(host, stream=0)
    assert (d.copy_to_host(stream=None) == 4).all()


@pytest.mark.parametrize("bad", [np.float32(1.5), 3, "s", np.ones(1)])
def test_anything_else_is_the_gpus_type_error(bad):
    d = cuda.to_device(np.ones(4, np.float32))
    words = "Expected a Stream object or 0, got"
    for call in (lambda: d.copy_to_host(np.zeros(4, np.float32), stream=bad),
                 lambda: d.copy_to_host(np.zeros(4, np.float32), bad),
                 lambda: d.copy_to_device(np.zeros(4, np.float32), stream=bad),
                 lambda: cuda.to_device(np.ones(4), stream=bad),
                 lambda: _twice[1, 4, bad](d)):
        with pytest.raises(TypeError, match=words):
            call()


def test_a_learner_host_function_that_passes_a_value_as_a_stream_is_named(tmp_path):
    def pipelined(x, streams):
        d = cuda.to_device(x)
        h = np.zeros_like(x)
        d.copy_to_host(h, stream=x[0])  # an element of the input where the stream belongs
        return h

    try:
        pipelined(np.full(4, 2.0, np.float32), [cuda.stream()])
    except TypeError as exc:
        cause, words = _raised.named(exc, pipelined, "pipelined_scale")
    assert cause == "stream_argument"
    assert "float32" in str(words) and "cuda.stream()" in str(words)
    assert simstreams.check(0) is None and simstreams.check(None) is None
