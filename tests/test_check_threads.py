"""Lesson 2's checkers: the known wrong answers are rejected with the right diagnosis, and
right answers (one thread per element, 2D and 1D grid-stride loops, shuffle variants) pass."""

from __future__ import annotations

import pytest
from numba import cuda, float32

import cudacourse.check as check
from cudacourse.check import CheckFailure

pytestmark = pytest.mark.lesson2

FULL = 0xFFFFFFFF


def rejects(checker, kernel, phrase: str) -> None:
    with pytest.raises(CheckFailure) as info:
        checker(kernel, seed=7)
    assert phrase.lower() in str(info.value).lower(), str(info.value)


# --- exercise 1: mirror ------------------------------------------------------------------

@cuda.jit
def mirror_right(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[r, img.shape[1] - 1 - c]


@cuda.jit
def mirror_grid_stride(img, out):
    c0, r0 = cuda.grid(2)
    sc, sr = cuda.gridsize(2)
    for r in range(r0, img.shape[0], sr):
        for c in range(c0, img.shape[1], sc):
            out[r, c] = img[r, img.shape[1] - 1 - c]


@cuda.jit
def mirror_explicit_ids(img, out):
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    r = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    rows, cols = img.shape
    if r >= rows or c >= cols:
        return
    out[r, c] = img[r, cols - 1 - c]


@cuda.jit
def mirror_no_guard_x(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[0]:
        out[r, c] = img[r, img.shape[1] - 1 - c]


@cuda.jit
def mirror_no_guard_y(img, out):
    c, r = cuda.grid(2)
    if c < img.shape[1]:
        out[r, c] = img[r, img.shape[1] - 1 - c]


@cuda.jit
def mirror_swapped(img, out):
    r, c = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[r, img.shape[1] - 1 - c]


@cuda.jit
def mirror_swapped_unguarded(img, out):
    r, c = cuda.grid(2)
    out[r, c] = img[r, img.shape[1] - 1 - c]


@cuda.jit
def mirror_first_block(img, out):
    c, r = cuda.threadIdx.x, cuda.threadIdx.y
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[r, img.shape[1] - 1 - c]


@cuda.jit
def mirror_off_by_one(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[r, img.shape[1] - c]


@cuda.jit
def mirror_copy(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[r, c]


@cuda.jit
def mirror_upside_down(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[img.shape[0] - 1 - r, c]


@cuda.jit
def mirror_unwritten_column(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1] - 1:
        out[r, c] = img[r, img.shape[1] - 1 - c]


@cuda.jit
def mirror_one_thread(img, out):
    # right pixels, but thread (0, 0) of block (0, 0) mirrors the whole image alone
    c, r = cuda.grid(2)
    if r == 0 and c == 0:
        for rr in range(img.shape[0]):
            for cc in range(img.shape[1]):
                out[rr, cc] = img[rr, img.shape[1] - 1 - cc]


@cuda.jit
def mirror_stub(img, out):
    raise NotImplementedError()


def mirror_host(img, out):
    out[:] = img[:, ::-1]


@pytest.mark.parametrize("kernel", [mirror_right, mirror_grid_stride, mirror_explicit_ids])
def test_mirror_accepts(kernel):
    check.check_mirror(kernel, seed=1)


def test_mirror_accepts_hidden():
    check.check_mirror(mirror_right, hidden=check.Cases(2, [((16, 48), (16, 4), 0), ((27, 35), (8, 8), 1), ((33, 7), (4, 32), 1)]))


@pytest.mark.parametrize("kernel, phrase", [
    (mirror_no_guard_x, "missing bounds guard"),
    (mirror_no_guard_y, "missing bounds guard"),
    (mirror_swapped, "swapped"),
    (mirror_swapped_unguarded, "swapped"),
    (mirror_first_block, "cuda.blockIdx"),
    (mirror_off_by_one, "off by one"),
    (mirror_copy, "nothing mirrored"),
    (mirror_upside_down, "upside down"),
    (mirror_unwritten_column, "never written"),
    (mirror_one_thread, "not spread over the threads"),
    (mirror_stub, "not written yet"),
    (mirror_host, "@cuda.jit"),
])
def test_mirror_rejects(kernel, phrase):
    rejects(check.check_mirror, kernel, phrase)


def test_mirror_guard_diagnosis_names_the_axis():
    with pytest.raises(CheckFailure, match=r"columns \(x\)"):
        check.check_mirror(mirror_no_guard_x, seed=3)
    with pytest.raises(CheckFailure, match=r"rows \(y\)"):
        check.check_mirror(mirror_no_guard_y, seed=3)


# issue 45 (mutants): an index outside the image in the launch without spare threads is
# named from how it relates to the thread's own (c, r), never "swapped" by default

@cuda.jit
def mirror_row_below(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[r + 1, img.shape[1] - 1 - c]  # the row below: one off


@cuda.jit
def mirror_out_col_after(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c + 1] = img[r, img.shape[1] - 1 - c]


@cuda.jit
def mirror_two_past(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[r, img.shape[1] + 1 - c]  # two past the mirrored column: arithmetic


@cuda.jit
def mirror_subtracted_the_wrong_way(img, out):
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[r, c - 1 - img.shape[1]]  # operands exchanged: negative indices


@cuda.jit
def mirror_pos_indexed(img, out):
    # right, written differently: the pair kept whole and indexed, the width read once
    pos = cuda.grid(2)
    w = img.shape[1]
    if pos[1] < img.shape[0] and pos[0] < w:
        out[pos[1], pos[0]] = img[pos[1], w - pos[0] - 1]


@pytest.mark.parametrize("kernel, cause", [
    (mirror_row_below, "off_by_one"),
    (mirror_out_col_after, "off_by_one"),
    (mirror_swapped_unguarded, "swapped_axes"),
    (mirror_two_past, "out_of_bounds_read"),
    (mirror_subtracted_the_wrong_way, "out_of_bounds_read"),
])
def test_mirror_names_an_index_outside_from_the_threads_own_coordinates(kernel, cause):
    with pytest.raises(CheckFailure) as info:
        check.check_mirror(kernel, seed=7)
    assert info.value.cause == cause, str(info.value)
    assert "no spare threads" in str(info.value)


def test_mirror_accepts_the_pair_kept_whole():
    check.check_mirror(mirror_pos_indexed, seed=1)


def test_each_check_returns_one_success_line():
    lines = [check.check_mirror(mirror_right, seed=1), check.check_saxpy(saxpy_right, seed=1),
             check.check_warp_sum(warp_sum_right, seed=1)]
    assert [ln.split(":")[0] for ln in lines] == ["mirror passes", "saxpy passes",
                                                 "warp_sum passes"], lines
    assert "shuffle rounds" in lines[2] and "each element written once" in lines[1], lines


# --- exercise 2: grid-stride saxpy -------------------------------------------------------

@cuda.jit
def saxpy_right(a, x, y, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_while(a, x, y, out):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    stride = cuda.blockDim.x * cuda.gridDim.x
    while i < x.shape[0]:
        out[i] = a * x[i] + y[i]
        i += stride


@cuda.jit
def saxpy_no_loop(a, x, y, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_block_stride(a, x, y, out):
    for i in range(cuda.threadIdx.x, out.shape[0], cuda.blockDim.x):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_thread_start(a, x, y, out):
    for i in range(cuda.threadIdx.x, out.shape[0], cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_do_while(a, x, y, out):
    i = cuda.grid(1)
    while True:  # no check before the first element: threads past the end write anyway
        out[i] = a * x[i] + y[i]
        i += cuda.gridsize(1)
        if i >= out.shape[0]:
            break


@cuda.jit
def saxpy_one_thread(a, x, y, out):
    # right numbers, but thread 0 loops over the whole array while the others idle
    if cuda.grid(1) == 0:
        for i in range(out.shape[0]):
            out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_loop_past_n(a, x, y, out):
    for i in range(cuda.grid(1), out.shape[0] + 1, cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_off_by_one(a, x, y, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = a * x[i + 1] + y[i + 1]


@cuda.jit
def saxpy_stops_early(a, x, y, out):
    for i in range(cuda.grid(1), out.shape[0] - 1, cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]


@cuda.jit
def saxpy_ignores_y(a, x, y, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = a * x[i]


@cuda.jit
def saxpy_wrong_math(a, x, y, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = a * x[i] - y[i]


@pytest.mark.parametrize("kernel", [saxpy_right, saxpy_while])
def test_saxpy_accepts(kernel):
    check.check_saxpy(kernel, seed=1)
    check.check_saxpy(kernel, hidden=check.Cases(2, [(1531, 3, 64), (97, 4, 32), (640, 1, 128)]))


@pytest.mark.parametrize("kernel, phrase", [
    (saxpy_no_loop, "did you loop with cuda.gridsize"),
    (saxpy_thread_start, "did you loop with cuda.gridsize"),
    (saxpy_do_while, "missing bounds guard"),
    (saxpy_off_by_one, "off by one"),
    (saxpy_stops_early, "never written"),
    (saxpy_ignores_y, "y ignored"),
    (saxpy_wrong_math, "check the arithmetic"),
    (saxpy_one_thread, "not spread over the threads"),
    (saxpy_loop_past_n, "off by one"),
    # right numbers, but each block redoes the whole array: each element written per block
    (saxpy_block_stride, "step by cuda.gridsize(1)"),
])
def test_saxpy_rejects(kernel, phrase):
    rejects(check.check_saxpy, kernel, phrase)


@cuda.jit
def saxpy_y_for_x(a, x, y, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = a * y[i] + y[i]  # y read where x belongs: x never read


@cuda.jit
def saxpy_y_subtracted(a, x, y, out):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = a * x[i] - y[i]


@cuda.jit
def saxpy_right_fma_order(a, x, y, out):
    # right, written differently: y first, the stride and start named
    start, stride = cuda.grid(1), cuda.gridsize(1)
    n = out.size
    while start < n:
        out[start] = y[start] + x[start] * a
        start += stride


@pytest.mark.parametrize("kernel, cause", [(saxpy_y_for_x, "input_ignored"),
                                           (saxpy_y_subtracted, "wrong_formula")])
def test_saxpy_names_an_input_left_out_or_a_known_formula(kernel, cause):
    with pytest.raises(CheckFailure) as info:
        check.check_saxpy(kernel, seed=7)
    assert info.value.cause == cause, str(info.value)


def test_saxpy_accepts_a_while_loop_with_y_first():
    check.check_saxpy(saxpy_right_fma_order, seed=1)


def test_saxpy_every_block_doing_all_the_work_is_named_by_its_cause():
    with pytest.raises(CheckFailure) as info:
        check.check_saxpy(saxpy_block_stride, seed=7)
    assert info.value.cause == "redundant_work", info.value


# --- exercise 3: warp-shuffle sum --------------------------------------------------------

@cuda.jit
def warp_sum_right(x, out):
    i = cuda.grid(1)
    v = 0.0
    if i < x.shape[0]:
        v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_xor(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    for k in range(5):
        v += cuda.shfl_xor_sync(0xFFFFFFFF, v, 16 >> k)
    lane = cuda.threadIdx.x % 32
    if lane == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_grid_stride(x, out):
    lane = cuda.threadIdx.x % 32
    warp = cuda.grid(1) // 32
    nwarps = cuda.gridsize(1) // 32
    for w in range(warp, out.shape[0], nwarps):
        i = w * 32 + lane
        v = x[i] if i < x.shape[0] else 0.0
        offset = 16
        while offset > 0:
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
            offset //= 2
        if lane == 0:
            out[w] = v


@cuda.jit
def warp_sum_offset_tuple(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    for offset in (16, 8, 4, 2, 1):
        v = v + cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
    if cuda.threadIdx.x % 32 == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_lane0_loop(x, out):
    # right sums, no shuffle: lane 0 reads its warp's 32 values itself
    i = cuda.grid(1)
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        v = 0.0
        for j in range(i, min(i + 32, x.shape[0])):
            v += x[j]
        out[i // 32] = v


@cuda.jit
def warp_sum_via_shared(x, out):
    # right sums, no shuffle: each lane stores its value, lane 0 adds the 32 slots
    buf = cuda.shared.array(128, float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    buf[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    if t % 32 == 0 and i // 32 < out.shape[0]:
        v = 0.0
        for j in range(32):
            v += buf[t + j]
        out[i // 32] = v


@cuda.jit
def warp_sum_up(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_up_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_half_offsets(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    offset = 8
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_offset_32(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    offset = 32
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_offsets_up(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    offset = 1
    while offset < 2:  # stops after one step: only lane 0 and lane 1
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset *= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_half_mask(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_mask_without_lane_31(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    for off in (16, 8, 4, 2, 1):
        v += cuda.shfl_down_sync(0x7FFFFFFF, v, off)
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_early_return(x, out):
    i = cuda.grid(1)
    if i >= x.shape[0]:
        return
    v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        out[i // 32] = v


@cuda.jit
def warp_sum_unguarded_read(x, out):
    i = cuda.grid(1)
    v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_unguarded_write(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0:
        out[i // 32] = v


@cuda.jit
def warp_sum_max(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else -1e30
    offset = 16
    while offset > 0:
        v = max(v, cuda.shfl_down_sync(0xFFFFFFFF, v, offset))
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@cuda.jit
def warp_sum_off_by_one(x, out):
    i = cuda.grid(1)
    v = x[i] if i < x.shape[0] else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 + 1 < out.shape[0]:
        out[i // 32 + 1] = v


@cuda.jit
def warp_sum_block_only(x, out):
    i = cuda.threadIdx.x
    v = x[i] if i < x.shape[0] else 0.0
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[i // 32] = v


@pytest.mark.parametrize("kernel", [warp_sum_right, warp_sum_xor, warp_sum_grid_stride,
                                    warp_sum_offset_tuple])
def test_warp_sum_accepts(kernel):
    check.check_warp_sum(kernel, seed=1)


def test_warp_sum_accepts_hidden():
    check.check_warp_sum(warp_sum_right, hidden=check.Cases(2, [(513, 128), (95, 32), (250, 64)]))


@pytest.mark.parametrize("kernel, phrase", [
    (warp_sum_up, "shfl_up_sync"),
    (warp_sum_half_offsets, "only 16 lanes"),
    (warp_sum_offset_32, "twice the sum"),
    (warp_sum_offsets_up, "only 2 lanes"),
    # undefined behaviour that the H200 (2026-11-30) happened to sum right: the verdict
    # there comes from the simulator replay
    (warp_sum_early_return, "do not return before the shuffles"),
    (warp_sum_half_mask, "does not include the lane itself"),
    (warp_sum_mask_without_lane_31, "does not include the lane itself"),
    (warp_sum_lane0_loop, "not made with shuffles"),
    (warp_sum_via_shared, "shfl_down_sync"),
    (warp_sum_unguarded_read, "with the value 0"),
    (warp_sum_unguarded_write, "spare warps must not write"),
    (warp_sum_max, "maximum"),
    (warp_sum_off_by_one, "off by one"),
    (warp_sum_block_only, "never written"),
])
def test_warp_sum_rejects(kernel, phrase):
    rejects(check.check_warp_sum, kernel, phrase)



# --- the first wrong value explained from the record (issue 45 item 3) ---------------------

@cuda.jit
def mirror_reads_an_extra_pixel(img, out):  # no family matches: the record is the evidence
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[r, img.shape[1] - 1 - c] + img[r, 0] * 0.01


def test_the_first_wrong_value_is_explained_from_the_record_without_naming_a_cause():
    with pytest.raises(CheckFailure) as info:
        check.check_mirror(mirror_reads_an_extra_pixel, seed=1)
    err = info.value
    text = str(err)
    assert err.cause == "wrong_values"  # the evidence singles out no cause: none is named
    assert "was written by thread 0 of block 0 (line" in text, text
    assert "which read img[0, {0, 39}] (2 elements)" in text, text
    assert "it read img[0, 0] (1 elements), which the reference does not" in text, text


@cuda.jit
def warp_sum_divides_by_i(x, out):
    i = cuda.grid(1)
    v = 0.0
    if i < x.shape[0]:
        v = x[i]
    offset = 16
    while offset > 0:
        v += cuda.shfl_down_sync(FULL, v, offset)
        offset //= 2
    if cuda.laneid == 0 and i // 32 < out.shape[0]:
        out[32 // i] = v  # operands exchanged: thread 0 divides by 0


def test_warp_sum_names_a_division_by_zero():
    with pytest.raises(CheckFailure) as info:
        check.check_warp_sum(warp_sum_divides_by_i, seed=7)
    assert info.value.cause == "division_by_zero", str(info.value)
