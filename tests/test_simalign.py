"""runtime/simalign.py: ``alignment=`` on the simulator's shared and local arrays.

Lesson 7's tiles are declared 16-byte aligned on a GPU. The stock simulator refused the
option, so a learner's kernel written for the GPU could not be replayed in a simulator child
(the checkers' first run on a GPU, ``check/_preflight``): every check of lesson 7 failed on
the H200 (2026-12-05) with "Array alignment is not supported in cudasim".
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32, int32

from cudacourse.runtime import device, simalign

pytestmark = pytest.mark.sim_only(reason="the patch is of Numba's simulator; a GPU's "
                                  "compiler takes alignment= itself")


@cuda.jit
def _two_aligned_tiles(out):
    a = cuda.shared.array((4, 4), float32, alignment=16)
    b = cuda.shared.array((4, 4), float32, alignment=64)
    loc = cuda.local.array(3, int32, alignment=16)
    t = cuda.threadIdx.x
    a[t // 4, t % 4] = t
    b[t // 4, t % 4] = 100 + t
    loc[0] = t
    cuda.syncthreads()
    out[0, t] = a[t // 4, t % 4]
    out[1, t] = b[t // 4, t % 4]
    out[2, t] = loc[0]


def test_aligned_arrays_are_arrays_of_their_own_lines():
    device.ensure()  # installs the simulator patches, this one among them
    out = np.zeros((3, 16), np.float32)
    _two_aligned_tiles[1, 16](out)
    assert (out[0] == np.arange(16)).all()  # a and b are two arrays, not one
    assert (out[1] == 100 + np.arange(16)).all()
    assert (out[2] == np.arange(16)).all()


@pytest.mark.parametrize("bad,words", [(3, "power of 2"), (0, "positive"), (-16, "positive"),
                                       (4, "multiple of 8"), (2.0, "integer")])
def test_a_wrong_alignment_is_the_gpu_compilers_error(bad, words):
    with pytest.raises(ValueError, match=words):
        simalign.validate(bad)


def test_an_aligned_copy_starts_at_the_alignment_and_keeps_the_values():
    for k in range(8):
        x = np.arange(5 + k, dtype=np.float32)[1:]  # a view 4 bytes past an allocation
        for al in (16, 64, 256):
            y = simalign.aligned(x, al)
            assert y.ctypes.data % al == 0 and (y == x).all() and y.dtype == x.dtype
