"""Lesson 5 checkers: known wrong answers are rejected with the right diagnosis, right ones pass."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda

import cudacourse.check
from cudacourse.check import CheckFailure

pytestmark = pytest.mark.lesson5

TILE = 16
D_MAX = 32


# --- exercise 1: online_update(m, l, acc, s, v) -> (m, l, acc) --------------------------------

@cuda.jit(device=True)
def update_right(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s - m_new)
    return m_new, l * alpha + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_right_branchy(m, l, acc, s, v):
    # the other correct shape: rescale the old state or the new term, whichever is smaller
    if s > m:
        alpha = math.exp(m - s)
        return s, l * alpha + 1.0, acc * alpha + v
    p = math.exp(s - m)
    return m, l + p, acc + p * v


@cuda.jit(device=True)
def update_no_acc_rescale(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s - m_new)
    return m_new, l * alpha + p, acc + p * v


@cuda.jit(device=True)
def update_no_l_rescale(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s - m_new)
    return m_new, l + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_no_max(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s)
    return m_new, l * alpha + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_unstable_ratio(m, l, acc, s, v):
    # right on paper, but exp(m) and exp(m_new) overflow on their own for large scores
    m_new = max(m, s)
    alpha = math.exp(m) / math.exp(m_new) if m > -1e30 else 0.0
    p = math.exp(s) / math.exp(m_new)
    return m_new, l * alpha + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_min(m, l, acc, s, v):
    m_new = min(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s - m_new)
    return m_new, l * alpha + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_normalised(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s - m_new)
    l_new = l * alpha + p
    return m_new, l_new, (acc * alpha * l + p * v) / l_new


@cuda.jit(device=True)
def update_old_max_weight(m, l, acc, s, v):
    # the new score weighted with the old maximum: exp(s - m), infinite when a row starts
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s - m)
    return m_new, l * alpha + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_alpha_sign(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m + m_new)
    p = math.exp(s - m_new)
    return m_new, l * alpha + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_p_sign(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s + m_new)
    return m_new, l * alpha + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_l_added_alpha(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s - m_new)
    return m_new, l + alpha + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_acc_p_plus_v(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s - m_new)
    return m_new, l * alpha + p, acc * alpha + (p + v)


@cuda.jit(device=True)
def update_acc_minus(m, l, acc, s, v):
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(s - m_new)
    return m_new, l * alpha + p, acc * alpha - p * v


@cuda.jit(device=True)
def update_stub(m, l, acc, s, v):
    raise NotImplementedError()


@cuda.jit
def update_kernel(m, l, acc, s, v):
    pass


def update_host(m, l, acc, s, v):
    return m, l, acc


def test_online_update_accepts_right_ones():
    cudacourse.check.check_online_update(update_right, seed=1)
    cudacourse.check.check_online_update(update_right_branchy, seed=2)
    cudacourse.check.check_online_update(update_right, hidden=cudacourse.check.Cases(3, [(419, 7, 33)]))


@pytest.mark.parametrize("update, phrase", [
    (update_no_acc_rescale, "accumulator is not rescaled"),
    (update_no_l_rescale, "running sum is not rescaled"),
    (update_no_max, "maximum is not subtracted"),
    (update_unstable_ratio, "exp overflowed"),
    (update_min, "min(m, s)"),
    (update_normalised, "keep acc un-normalised"),
    (update_old_max_weight, "weighted with the old maximum m"),
    (update_alpha_sign, "l * exp(m + m_new) + exp(s - m_new)"),
    (update_p_sign, "l * exp(m - m_new) + exp(s + m_new)"),
    (update_l_added_alpha, "l + exp(m - m_new) + exp(s - m_new)"),
    (update_acc_p_plus_v, "acc * exp(m - m_new) + (exp(s - m_new) + v)"),
    (update_acc_minus, "acc * exp(m - m_new) - exp(s - m_new) * v"),
    (update_stub, "not written yet"),
    (update_kernel, "must be a device function"),
    (update_host, "@cuda.jit(device=True)"),
])
def test_online_update_rejects(update, phrase):
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_online_update(update, seed=4)
    assert phrase in str(info.value)


@cuda.jit(device=True)
def update_p_old_max_name(m, l, acc, s, v):
    # issue 45 (mutants: a name read for its neighbour): p weighs the old maximum, not s
    m_new = max(m, s)
    alpha = math.exp(m - m_new)
    p = math.exp(m - m_new)
    return m_new, l * alpha + p, acc * alpha + p * v


@cuda.jit(device=True)
def update_max_of_acc(m, l, acc, s, v):
    big = acc if acc > m else m  # the maximum taken over the accumulator, not the score
    a = math.exp(m - big)
    e = math.exp(s - big)
    return big, a * l + e, a * acc + v * e


@cuda.jit(device=True)
def update_right_inline(m, l, acc, s, v):
    # right, written differently: no names for the weights, the maximum by a comparison
    top = s if s > m else m
    return top, l * math.exp(m - top) + math.exp(s - top), \
        math.exp(m - top) * acc + v * math.exp(s - top)


@pytest.mark.parametrize("update, phrase", [
    (update_p_old_max_name, "`p = exp(m - m_new)` in place of `p = exp(s - m_new)`"),
    (update_max_of_acc, "`m_new = max(m, acc)` in place of `m_new = max(m, s)`"),
])
def test_online_update_names_the_one_changed_statement(update, phrase):
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_online_update(update, seed=4)
    assert info.value.cause == "wrong_formula"
    assert phrase in str(info.value)
    cudacourse.check.check_online_update(update_right_inline, seed=5)


# --- exercise 2: the fused kernel, one thread per query row -----------------------------------

def make_rows_kernel(bug: str = "", grid_stride: bool = False):
    """The lesson's kernel with the exercise part written right, or with one known bug."""
    no_acc = bug == "no_acc_rescale"
    no_l = bug == "no_l_rescale"
    no_max = bug == "no_max"
    no_scale = bug == "no_scale"
    mask_plus = bug == "mask_plus_one"
    mask_minus = bug == "mask_minus_one"
    no_causal = bug == "no_causal"
    no_end = bug == "no_end_guard"
    no_load_barrier = bug == "no_load_barrier"  # computes from a tile others still load
    plain = bug == "plain_exp"  # softmax with no running max at all: exp(s) summed directly
    own_scale = bug == "own_scale"  # ignores the scale argument, computes 1/sqrt(d) itself
    global_kv = bug == "global_kv"  # loads the tiles, then reads k and v from global memory
    no_m_update = bug == "no_m_update"  # `m = m_new` missing: the running max never moves
    scale_twice = bug == "scale_twice"  # the scores multiplied by scale twice
    l_plus_alpha = bug == "l_plus_alpha"  # issue 45 (mutants): l = l + alpha + p
    new_rescaled = bug == "new_rescaled"  # issue 45: p multiplied by alpha as well
    acc_uses_k = bug == "acc_uses_k"  # issue 45 (mutants): k_tile read where v_tile belongs

    @cuda.jit
    def flash_rows(q, k, v, out, scale, causal):
        bh = cuda.blockIdx.y
        t = cuda.threadIdx.x
        seq = q.shape[1]
        d = q.shape[2]
        k_tile = cuda.shared.array((TILE, D_MAX), np.float32)
        v_tile = cuda.shared.array((TILE, D_MAX), np.float32)
        acc = cuda.local.array(D_MAX, np.float32)
        first_row = cuda.blockIdx.x * TILE
        row_step = TILE * cuda.gridDim.x if grid_stride else seq + TILE
        for row0 in range(first_row, seq + TILE - 1 if grid_stride else first_row + 1,
                          row_step):
            row = row0 + t
            for c in range(d):
                acc[c] = 0.0
            m = -math.inf
            l = 0.0
            for start in range(0, seq, TILE):
                j = start + t
                if j < seq:
                    for c in range(d):
                        k_tile[t, c] = k[bh, j, c]
                        v_tile[t, c] = v[bh, j, c]
                if not no_load_barrier:
                    cuda.syncthreads()
                if row < seq:
                    for jj in range(TILE):
                        j = start + jj
                        lim = row
                        if mask_plus:
                            lim = row + 1
                        if mask_minus:
                            lim = row - 1
                        if (j < seq or no_end) and (not causal or no_causal or j <= lim):
                            s = 0.0
                            for c in range(d):
                                if global_kv:
                                    s += q[bh, row, c] * k[bh, j, c]
                                else:
                                    s += q[bh, row, c] * k_tile[jj, c]
                            if own_scale:
                                s *= 1.0 / math.sqrt(d)
                            elif not no_scale:
                                s *= scale
                            if scale_twice:
                                s *= scale
                            m_new = max(m, s)
                            alpha = 1.0 if plain else math.exp(m - m_new)
                            p = math.exp(s) if no_max or plain else math.exp(s - m_new)
                            if new_rescaled:
                                p *= alpha
                            if l_plus_alpha:
                                l = l + alpha + p
                            else:
                                l = l + p if no_l else l * alpha + p
                            for c in range(d):
                                if no_acc:
                                    acc[c] = acc[c] + p * v_tile[jj, c]
                                elif global_kv:
                                    acc[c] = acc[c] * alpha + p * v[bh, j, c]
                                elif acc_uses_k:
                                    acc[c] = acc[c] * alpha + p * k_tile[jj, c]
                                else:
                                    acc[c] = acc[c] * alpha + p * v_tile[jj, c]
                            if not no_m_update:
                                m = m_new
                cuda.syncthreads()
            if row < seq:
                for c in range(d):
                    out[bh, row, c] = acc[c] / l

    return flash_rows


@cuda.jit
def rows_right_while(q, k, v, out, scale, causal):
    """Right, written differently (issue 20, item 5): a while loop over the key tiles,
    q read from global memory in the inner loop, the causal limit as a loop bound."""
    bh = cuda.blockIdx.y
    t = cuda.threadIdx.x
    row = cuda.blockIdx.x * TILE + t
    seq = q.shape[1]
    d = q.shape[2]
    k_tile = cuda.shared.array((TILE, D_MAX), np.float32)
    v_tile = cuda.shared.array((TILE, D_MAX), np.float32)
    acc = cuda.local.array(D_MAX, np.float32)
    for c in range(d):
        acc[c] = 0.0
    m = -math.inf
    l = 0.0
    start = 0
    while start < seq:
        if start + t < seq:
            for c in range(d):
                k_tile[t, c] = k[bh, start + t, c]
                v_tile[t, c] = v[bh, start + t, c]
        cuda.syncthreads()
        if row < seq:
            stop = min(TILE, seq - start)
            if causal:
                stop = min(stop, row - start + 1)
            jj = 0
            while jj < stop:
                s = 0.0
                c = 0
                while c < d:
                    s += q[bh, row, c] * k_tile[jj, c]
                    c += 1
                s *= scale
                m_new = max(m, s)
                alpha = math.exp(m - m_new)
                p = math.exp(s - m_new)
                l = l * alpha + p
                for c in range(d):
                    acc[c] = acc[c] * alpha + p * v_tile[jj, c]
                m = m_new
                jj += 1
        cuda.syncthreads()
        start += TILE
    if row < seq:
        for c in range(d):
            out[bh, row, c] = acc[c] / l


def test_flash_rows_accepts_a_while_loop_within_its_budget():
    # the hidden check of this answer once ran past 6 minutes; now it must pass, in budget
    cudacourse.check.check_flash_rows(rows_right_while, seed=21)
    cudacourse.check.check_flash_rows(rows_right_while, hidden=cudacourse.check.Cases(22, [(2, 29, 32, False), (1, 45, 32, True), (1, 1, 16, True), (1, 23, 16, False)]))


def test_flash_rows_accepts_right_ones():
    cudacourse.check.check_flash_rows(make_rows_kernel(), seed=5)
    cudacourse.check.check_flash_rows(make_rows_kernel(grid_stride=True), seed=15)


def test_flash_rows_refuses_the_library_kernel():
    # the package has no one-thread-per-row kernel (it is this exercise's answer); its
    # tiled kernel takes the same arguments and must be refused just the same
    from cudacourse.kernels.attention import flash_kernel

    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_flash_rows(flash_kernel(32), seed=6)
    assert info.value.cause == "package_kernel", info.value


def test_each_check_returns_one_success_line():
    lines = [cudacourse.check.check_online_update(update_right, seed=1),
             cudacourse.check.check_flash_rows(make_rows_kernel(), seed=5)]
    assert [ln.split(":")[0] for ln in lines] == ["online_update passes", "flash_rows passes"]
    assert "scales other than 1/sqrt(d)" in lines[1], lines


def test_flash_rows_hidden_cases_pass():
    cudacourse.check.check_flash_rows(make_rows_kernel(), hidden=cudacourse.check.Cases(7, [(2, 29, 32, False), (1, 45, 32, True), (1, 1, 16, True), (1, 23, 16, False)]))


@pytest.mark.parametrize("bug, phrase", [
    ("no_acc_rescale", "accumulator is not rescaled"),
    ("no_l_rescale", "running sum is not rescaled"),
    ("no_max", "maximum is not subtracted"),
    ("plain_exp", "exp overflowed"),
    ("no_scale", "without the 1/sqrt(d) scale"),
    ("mask_plus_one", "keys j <= row + 1"),
    ("mask_minus_one", "drops the diagonal"),
    ("no_causal", "non-causal attention"),
    ("no_end_guard", "skip keys j >= seq"),
    ("own_scale", "not by the scale argument"),
    ("global_kv", "instead of k[bh, j, c]"),
    ("no_load_barrier", "races on shared memory"),
    ("no_m_update", "`m = m_new` is missing"),
    ("scale_twice", "the scale applied twice"),
    ("l_plus_alpha", "running sum is l + exp(m - m_new) + p"),
    ("new_rescaled", "new term is rescaled too"),
    ("acc_uses_k", "`acc = acc * alpha + p * k_row` in place of `acc = acc * alpha + p * "
                   "v_row`"),
])
def test_flash_rows_rejects(bug, phrase):
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_flash_rows(make_rows_kernel(bug), seed=8)
    assert phrase in str(info.value)


def test_flash_rows_technique_causes():
    causes = {}
    for bug in ("own_scale", "global_kv"):
        with pytest.raises(CheckFailure) as info:
            cudacourse.check.check_flash_rows(make_rows_kernel(bug), seed=8)
        causes[bug] = info.value.cause
    assert causes == {"own_scale": "wrong_formula", "global_kv": "no_tiles"}


@cuda.jit
def rows_unwritten(q, k, v, out, scale, causal):
    pass


@cuda.jit
def rows_stub(q, k, v, out, scale, causal):
    raise NotImplementedError()


@cuda.jit
def rows_writes_past_end(q, k, v, out, scale, causal):
    bh = cuda.blockIdx.y
    row = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    for c in range(q.shape[2]):
        out[bh, row, c] = v[bh, 0, c]  # no row < seq guard


def plain_function(q, k, v, out, scale, causal):
    pass


@pytest.mark.parametrize("kernel, phrase", [
    (rows_unwritten, "never written"),
    (rows_stub, "not written yet"),
    (rows_writes_past_end, "bounds guard"),
    (plain_function, "@cuda.jit"),
])
def test_flash_rows_rejects_generic_mistakes(kernel, phrase):
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_flash_rows(kernel, seed=9)
    assert phrase in str(info.value)


# --- issue 45: slips named from the compiler's words, the record and the lesson's program ------

@cuda.jit(device=True)
def update_max_of_itself(m, l, acc, s, v):
    m_new = max(m, m_new)  # noqa: F821 - the slip: m_new read before it is assigned
    alpha = math.exp(m - m_new)
    p = math.exp(s - m_new)
    return m_new, l * alpha + p, acc * alpha + p * v


def test_a_name_read_before_assignment_is_named_from_the_compiler():
    """Numba refuses `m_new = max(m, m_new)` (Variable 'm_new' is not defined) on both
    devices: the compile gate names it used_before_assigned, with the name and the line."""
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_online_update(update_max_of_itself, seed=4)
    assert info.value.cause == "used_before_assigned", info.value
    assert "m_new is read before any value is assigned" in str(info.value)


def _rows_slip(slip: str):
    """The lesson's kernel with one slip in its tile loads."""
    first_key = slip == "first_key"  # j = start (+ bh, 0 for one head): every slot key start
    k_from_v = slip == "k_from_v"  # k_tile loaded from v
    k_into_v = slip == "k_into_v"  # k's row stored into v_tile: k_tile never stored
    one_slot = slip == "one_slot"  # k_tile[bh, c]: every thread stores the same slot
    times_bh = slip == "times_bh"  # s *= bh (0 for one head): every key scores alike
    acc_shift = 1 if slip == "acc_shift" else 0  # acc[c + 1] = ...: acc[0] never updated
    last_only = slip == "last_only"  # s = q * k in the loop over c: `=` where `+=` belongs

    @cuda.jit
    def flash_rows(q, k, v, out, scale, causal):
        bh = cuda.blockIdx.y
        t = cuda.threadIdx.x
        row = cuda.blockIdx.x * TILE + t
        seq = q.shape[1]
        d = q.shape[2]
        k_tile = cuda.shared.array((TILE, D_MAX), np.float32)
        v_tile = cuda.shared.array((TILE, D_MAX), np.float32)
        acc = cuda.local.array(D_MAX, np.float32)
        for c in range(d):
            acc[c] = 0.0
        m = -math.inf
        l = 0.0
        for start in range(0, seq, TILE):
            j = start + bh if first_key else start + t
            if j < seq:
                for c in range(d):
                    if k_into_v:
                        v_tile[t, c] = k[bh, j, c]
                    elif one_slot:
                        k_tile[bh, c] = k[bh, j, c]
                    else:
                        k_tile[t, c] = v[bh, j, c] if k_from_v else k[bh, j, c]
                    v_tile[t, c] = v[bh, j, c]
            cuda.syncthreads()
            if row < seq:
                for jj in range(TILE):
                    j = start + jj
                    if j < seq and (not causal or j <= row):
                        s = 0.0
                        for c in range(d):
                            if last_only:
                                s = q[bh, row, c] * k_tile[jj, c]
                            else:
                                s += q[bh, row, c] * k_tile[jj, c]
                        s *= bh if times_bh else scale
                        m_new = max(m, s)
                        alpha = math.exp(m - m_new)
                        p = math.exp(s - m_new)
                        l = l * alpha + p
                        for c in range(d):
                            acc[c + acc_shift] = acc[c] * alpha + p * v_tile[jj, c]
                        m = m_new
            cuda.syncthreads()
        if row < seq:
            for c in range(d):
                out[bh, row, c] = acc[c] / l

    return flash_rows


@pytest.fixture(params=["sim", "native"])
def gpu_path(request, monkeypatch):
    if request.param == "native":
        monkeypatch.setenv("CUDACOURSE_NATIVE", "1")
        monkeypatch.setenv("CUDACOURSE_PREFLIGHT", "1")
    return request.param


@pytest.mark.parametrize("slip, cause, phrase", [
    ("first_key", "wrong_formula", "`j = start` in place of `j = start + t`"),
    ("k_from_v", "wrong_formula", "`k_row = v[bh, j]` in place of `k_row = k[bh, j]`, and just "
                                  "as well with"),
    ("k_into_v", "unfilled_tile", "which no thread of its block had stored"),
    ("one_slot", "slot_collision", "two threads computed the same slot"),
    ("times_bh", "wrong_formula", "every key got the same score"),
    ("acc_shift", "wrong_index", "acc[0] kept the 0.0 it started with"),
    ("last_only", "wrong_formula", "score is only the last product"),
])
def test_flash_rows_names_a_slip_in_the_tile_loads(slip, cause, phrase, gpu_path):
    with pytest.raises(CheckFailure) as info:
        cudacourse.check.check_flash_rows(_rows_slip(slip), seed=8)
    assert info.value.cause == cause, info.value
    assert phrase in str(info.value), info.value


def test_flash_rows_tile_load_diagnoses_keep_right_answers(gpu_path):
    cudacourse.check.check_flash_rows(_rows_slip(""), seed=8)
    cudacourse.check.check_flash_rows(make_rows_kernel(grid_stride=True), seed=15)
