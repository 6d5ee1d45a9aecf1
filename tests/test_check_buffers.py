"""One model of memory (check/_buffers.py): an access through any view of an observed array
is reported as an access to the buffer it aliases, with the elements it touched."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from cudacourse.check import _buffers as B

pytestmark = pytest.mark.sim_only(reason="the probes observe the simulator's NumPy memory; "
                                         "on a GPU the kernel's memory is not NumPy's")


def _observed(shape=(3, 4), dtype=np.float32):
    base = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    seen: list = []
    outside: list = []

    def report(buf, slots, write):
        seen.append(("w" if write else "r", tuple(slots)))

    def out(view, axis, index, size, write):
        outside.append((axis, index, size, write))
        return True

    return B.probe(base, B.Buffer(base, "x", report, out, -1.0)), base, seen, outside


def _in_a_gpu_thread(fn):
    """Run ``fn`` in a thread that looks like a simulated GPU thread (has threadIdx)."""
    errors = []

    def body():
        threading.current_thread().threadIdx = (0, 0, 0)
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(exc)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if errors:
        raise errors[0]


def test_views_report_the_elements_of_the_array_they_alias():
    p, base, seen, _ = _observed()

    def kernel():
        p.T[3, 2] = 7.0  # base[2, 3], flat slot 11
        _ = p[1][2]  # a row, then an element: slot 6
        _ = p[:, ::2][2, 1]  # a strided slice: base[2, 2], slot 10
        p.reshape(12)[5] = 1.0  # slot 5
        _ = p.real[0, 1]  # slot 1
        p.flat[4] = 2.0  # slot 4

    _in_a_gpu_thread(kernel)
    assert seen == [("w", (11,)), ("r", (6,)), ("r", (10,)), ("w", (5,)), ("r", (1,)),
                    ("w", (4,))]
    assert base[2, 3] == 7.0 and base.reshape(12)[5] == 1.0 and base.reshape(12)[4] == 2.0


def test_whole_array_paths_report_every_element():
    p, base, seen, _ = _observed((2, 2))

    def kernel():
        p[0].fill(3.0)  # slots 0, 1
        _ = [v for v in p.T[1]]  # iteration: slots 1 and 3, one read each
        np.copyto(p[1], np.array([5.0, 6.0], np.float32))  # slots 2, 3
        _ = p.T.sum()  # a reduction reads all four

    _in_a_gpu_thread(kernel)
    assert seen[0] == ("w", (0, 1))
    assert seen[1:3] == [("r", (1,)), ("r", (3,))]
    assert ("w", (2, 3)) in seen
    assert sorted(seen[-1][1]) == [0, 1, 2, 3] and seen[-1][0] == "r"
    assert base.tolist() == [[3.0, 3.0], [5.0, 6.0]]


def test_an_index_outside_a_view_is_reported_and_dropped():
    p, base, seen, outside = _observed((2, 3))

    def kernel():
        assert p.T[3, 0] == -1.0  # axis 0 of the transposed view has 3 elements
        p[0][5] = 9.0  # past the end of a row: written nowhere

    _in_a_gpu_thread(kernel)
    assert outside == [(0, 3, 3, False), (0, 5, 3, True)]
    assert seen == [] and 9.0 not in base


def test_host_code_is_not_observed_and_copies_are_plain():
    p, base, seen, _ = _observed()
    p[0, 0] = 5.0  # the host, not a GPU thread
    c = p.copy()
    assert seen == [] and base[0, 0] == 5.0
    assert B.buffer_of(c) is None and B.buffer_of(p.T) is B.buffer_of(p)


def test_item_reads_the_element_it_names():
    p, base, seen, _ = _observed((2, 3))

    def kernel():
        assert p.item(4) == 4.0  # flat index 4: base[1, 1]
        assert p.T.item(2, 1) == 5.0  # base[1, 2], slot 5

    _in_a_gpu_thread(kernel)
    assert seen == [("r", (4,)), ("r", (5,))]
