"""Lesson 3's checkers: the wrong answers each must reject (with the diagnosis) and the right
ones it must accept, in the simulator and on a GPU alike."""

from __future__ import annotations

import re

import numpy as np
import pytest
from numba import cuda

import cudacourse.check as check
from cudacourse.check import _trace
from cudacourse.check._engine import CheckFailure

pytestmark = pytest.mark.lesson3


@cuda.jit
def scale_kernel(x, out, alpha):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = alpha * x[i]


@cuda.jit
def scale_kernel_stride(x, out, alpha):
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = alpha * x[i]


@cuda.jit
def scale_kernel_add(x, out, alpha):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = alpha + x[i]


@cuda.jit
def smooth_step(src, dst):
    i = cuda.grid(1)
    n = src.shape[0]
    if i < n:
        left = src[i - 1] if i > 0 else src[i]
        right = src[i + 1] if i + 1 < n else src[i]
        dst[i] = (left + src[i] + right) / np.float32(3.0)


def blocks(n, t=128):
    return (n + t - 1) // t


def rejects(checker, fn, phrase):
    with pytest.raises(CheckFailure, match=phrase):
        checker(fn, seed=3)


# --- exercise 1: gpu_scale ---------------------------------------------------------------------

def scale_right(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    scale_kernel[blocks(x.size), 128](d_x, d_out, np.float32(alpha))
    return d_out.copy_to_host()


def scale_right_stride(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array(x.shape[0], dtype=np.float32)
    scale_kernel_stride[2, 64](d_x, d_out, alpha)
    out = np.empty_like(x)
    d_out.copy_to_host(out)
    return out


def scale_right_stream(x, alpha):
    s = cuda.stream()
    d_x = cuda.to_device(x, stream=s)
    d_out = cuda.device_array_like(d_x, stream=s)
    scale_kernel[blocks(x.size), 128, s](d_x, d_out, alpha)
    out = d_out.copy_to_host(stream=s)
    s.synchronize()
    return out


def scale_host_args(x, alpha):  # implicit copies: Numba moves x and out on every launch
    out = np.empty_like(x)
    scale_kernel[blocks(x.size), 128](x, out, alpha)
    return out


def scale_host_input(x, alpha):
    d_out = cuda.device_array_like(x)
    scale_kernel[blocks(x.size), 128](x, d_out, alpha)
    return d_out.copy_to_host()


def scale_left_on_device(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    scale_kernel[blocks(x.size), 128](d_x, d_out, alpha)
    return d_out


def scale_numpy_only(x, alpha):
    return (x * alpha).astype(np.float32)


def scale_first_block_only(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    scale_kernel[1, 128](d_x, d_out, alpha)
    return d_out.copy_to_host()


def scale_copy_back_first(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    out = d_out.copy_to_host()
    scale_kernel[blocks(x.size), 128](d_x, d_out, alpha)
    return out


def scale_wrong_formula(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    scale_kernel_add[blocks(x.size), 128](d_x, d_out, alpha)
    return d_out.copy_to_host()


def scale_returns_input(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    scale_kernel[blocks(x.size), 128](d_x, d_out, alpha)
    return d_x.copy_to_host()


def scale_in_place_on_x(x, alpha):
    d_x = cuda.to_device(x)
    scale_kernel[blocks(x.size), 128](d_x, d_x, alpha)
    d_x.copy_to_host(x)
    return x


def scale_float64(x, alpha):
    d_x = cuda.to_device(x.astype(np.float64))
    d_out = cuda.device_array_like(d_x)
    scale_kernel[blocks(x.size), 128](d_x, d_out, alpha)
    return d_out.copy_to_host()


def scale_no_sync(x, alpha):
    s = cuda.stream()
    d_x = cuda.to_device(x, stream=s)
    d_out = cuda.device_array_like(d_x)
    scale_kernel[blocks(x.size), 128, s](d_x, d_out, alpha)
    return d_out.copy_to_host(stream=s)


def scale_uploads_zeros(x, alpha):  # issue 45 item 3: n floats over the bus for nothing
    d_x = cuda.to_device(x)
    d_out = cuda.to_device(np.zeros_like(x))
    scale_kernel[blocks(x.size), 128](d_x, d_out, alpha)
    return d_out.copy_to_host()


def scale_via_pinned(x, alpha):  # one upload of x, from a pinned staging copy: right
    p = cuda.pinned_array(x.shape, dtype=x.dtype)
    p[:] = x
    d_x = cuda.to_device(p)
    d_out = cuda.device_array_like(d_x)
    scale_kernel[blocks(x.size), 128](d_x, d_out, alpha)
    return d_out.copy_to_host()


def scale_stub(x, alpha):
    raise NotImplementedError()


@pytest.mark.parametrize("fn", [scale_right, scale_right_stride, scale_right_stream,
                                scale_via_pinned])
def test_gpu_scale_accepts(fn):
    check.check_gpu_scale(fn, seed=1)
    check.check_gpu_scale(fn, hidden=check.Cases(2, [(1531, 1.75), (97, -2.0), (700, 0.375)]))


def scale_float_grid(x, alpha):
    # issue 45 (mutants): the block count with / instead of //, which Numba refuses
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    scale_kernel[(x.size + 127) / 128, 128](d_x, d_out, np.float32(alpha))
    return d_out.copy_to_host()


@pytest.mark.parametrize("fn, phrase", [
    (scale_host_args, "host \\(NumPy\\) array to a kernel"),
    (scale_float_grid, "grid and block must be whole numbers"),
    (scale_host_input, "implicitly, on every launch"),
    (scale_left_on_device, "returned a device array"),
    (scale_numpy_only, "launched no kernel"),
    (scale_first_block_only, "only the first block"),
    (scale_copy_back_first, "before launching the kernel"),
    (scale_wrong_formula, re.escape("holds alpha + x[i]")),
    (scale_returns_input, re.escape("holds x (not scaled)")),
    (scale_in_place_on_x, "changed its input x"),
    (scale_float64, "dtype float64"),
    (scale_no_sync, "could still be running"),
    (scale_uploads_zeros, "the output buffer needs no upload"),
    (scale_stub, "not written yet"),
    (scale_kernel, "not a @cuda.jit kernel"),
])
def test_gpu_scale_rejects(fn, phrase):
    rejects(check.check_gpu_scale, fn, phrase)


# issue 45 (mutants): what a host function raises names the mistake when it singles it out

def scale_reads_blocks_first(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    blocks = (x.shape[0] + blocks - 1) // 128  # noqa: F821 - `blocks` read before it is bound
    scale_kernel[blocks, 128](d_x, d_out, np.float32(alpha))
    return d_out.copy_to_host()


def scale_alpha_for_x(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    n_blocks = (alpha.shape[0] + 127) // 128  # the number alpha where the array x belongs
    scale_kernel[n_blocks, 128](d_x, d_out, np.float32(alpha))
    return d_out.copy_to_host()


def scale_array_in_count(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    n_blocks = (x.shape[0] + d_x - 1) // 128  # the device array where a count belongs
    scale_kernel[n_blocks, 128](d_x, d_out, np.float32(alpha))
    return d_out.copy_to_host()


def scale_array_as_block(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    scale_kernel[blocks(x.size), d_x](d_x, d_out, np.float32(alpha))  # an array as the block
    return d_out.copy_to_host()


def scale_number_as_output(x, alpha):
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    scale_kernel[blocks(x.size), 128](d_x, 128, np.float32(alpha))  # a number as the output
    return d_out.copy_to_host()


def scale_right_shape_count(x, alpha):
    # right, written differently: the count from the device array's shape, the output
    # allocated from the host array's shape and dtype
    d_x = cuda.to_device(x)
    d_out = cuda.device_array(x.shape, x.dtype)
    n_blocks = -(-d_x.shape[0] // 128)
    scale_kernel[n_blocks, 128](d_x, d_out, np.float32(alpha))
    return d_out.copy_to_host()


@pytest.mark.parametrize("fn, cause, phrase", [
    (scale_reads_blocks_first, "used_before_assigned", "read the variable blocks before"),
    (scale_alpha_for_x, "number_for_array", "has no .shape"),
    (scale_array_in_count, "array_for_number", "device array in host arithmetic"),
    (scale_array_as_block, "bad_launch", "got an array"),
    (scale_number_as_output, "number_for_array", "indexes a number as if it were an array"),
], ids=["read-before-bound", "number-as-array", "array-as-number", "array-as-block",
        "number-as-output"])
def test_gpu_scale_names_what_the_host_function_raised(fn, cause, phrase):
    with pytest.raises(CheckFailure) as info:
        check.check_gpu_scale(fn, seed=3)
    assert info.value.cause == cause and phrase in str(info.value), str(info.value)
    if cause != "bad_launch" and "indexes" not in phrase:
        assert "line " in str(info.value)  # the learner's line is shown


def test_gpu_scale_accepts_counts_from_the_device_arrays_shape():
    check.check_gpu_scale(scale_right_shape_count, seed=1)


# --- exercise 2: smooth_on_device ---------------------------------------------------------------

def smooth_right(x, steps):
    src = cuda.to_device(x)
    dst = cuda.device_array_like(src)
    for _ in range(steps):
        smooth_step[blocks(x.size), 128](src, dst)
        src, dst = dst, src
    return src.copy_to_host()


def smooth_right_three_buffers(x, steps):
    d_x = cuda.to_device(x)
    a = cuda.device_array_like(d_x)
    b = cuda.device_array_like(d_x)
    a.copy_to_device(d_x)
    for _ in range(steps):
        smooth_step[blocks(x.size, 64), 64](a, b)
        a, b = b, a
    return a.copy_to_host()


def smooth_round_trips(x, steps):
    y = x
    for _ in range(steps):
        src = cuda.to_device(y)
        dst = cuda.device_array_like(src)
        smooth_step[blocks(x.size), 128](src, dst)
        y = dst.copy_to_host()
    return y


def smooth_alloc_in_loop(x, steps):
    src = cuda.to_device(x)
    for _ in range(steps):
        dst = cuda.device_array_like(src)
        smooth_step[blocks(x.size), 128](src, dst)
        src = dst
    return src.copy_to_host()


def smooth_in_place(x, steps):
    d = cuda.to_device(x)
    for _ in range(steps):
        smooth_step[blocks(x.size), 128](d, d)
    return d.copy_to_host()


def smooth_no_swap(x, steps):
    src = cuda.to_device(x)
    dst = cuda.device_array_like(src)
    for _ in range(steps):
        smooth_step[blocks(x.size), 128](src, dst)
    return dst.copy_to_host()


def smooth_one_step_short(x, steps):
    src = cuda.to_device(x)
    dst = cuda.device_array_like(src)
    for _ in range(steps - 1):
        smooth_step[blocks(x.size), 128](src, dst)
        src, dst = dst, src
    smooth_step[blocks(x.size), 128](src, dst)
    return src.copy_to_host()


def smooth_host_arrays(x, steps):
    a, b = x.copy(), np.empty_like(x)
    for _ in range(steps):
        smooth_step[blocks(x.size), 128](a, b)
        a, b = b, a
    return a


def smooth_returns_device(x, steps):
    src = cuda.to_device(x)
    dst = cuda.device_array_like(src)
    for _ in range(steps):
        smooth_step[blocks(x.size), 128](src, dst)
        src, dst = dst, src
    return src


def smooth_first_block_only(x, steps):
    src = cuda.to_device(x)
    dst = cuda.device_array_like(src)
    for _ in range(steps):
        smooth_step[1, 128](src, dst)
        src, dst = dst, src
    return src.copy_to_host()


def smooth_copies_back(x, steps):
    # right numbers, but the result is copied into the input buffer every step (a
    # device-to-device copy) instead of swapping the two buffers
    src = cuda.to_device(x)
    dst = cuda.device_array_like(src)
    for _ in range(steps):
        smooth_step[blocks(x.size), 128](src, dst)
        src.copy_to_device(dst)
    return src.copy_to_host()


def smooth_assigns_back(x, steps):
    # the same copy written as a slice assignment
    src = cuda.to_device(x)
    dst = cuda.device_array_like(src)
    for _ in range(steps):
        smooth_step[blocks(x.size), 128](src, dst)
        src[:] = dst
    return src.copy_to_host()


def smooth_returns_stale(x, steps):
    # swaps, then copies back the buffer the last step read
    src = cuda.to_device(x)
    dst = cuda.device_array_like(src)
    for _ in range(steps):
        smooth_step[blocks(x.size), 128](src, dst)
        src, dst = dst, src
    return dst.copy_to_host()


def smooth_right_parity(x, steps):
    # right, written differently: no swap, the buffers chosen by the step's parity
    bufs = (cuda.to_device(x), cuda.device_array(x.shape, np.float32))
    for t in range(steps):
        smooth_step[blocks(x.size, 32), 32](bufs[t % 2], bufs[1 - t % 2])
    return bufs[steps % 2].copy_to_host()


@pytest.mark.parametrize("fn", [smooth_right, smooth_right_three_buffers, smooth_right_parity])
def test_smooth_accepts(fn):
    check.check_smooth_on_device(fn, seed=1)
    check.check_smooth_on_device(fn, hidden=check.Cases(2, [(517, 5), (64, 1), (200, 6)]))


@pytest.mark.parametrize("fn, phrase", [
    (smooth_round_trips, "copied data to the device 4 times for 4 steps"),
    (smooth_alloc_in_loop, "allocate the two buffers once"),
    (smooth_in_place, "same buffer as the step's input and output"),
    (smooth_one_step_short, "copied back the buffer the last step read"),
    (smooth_returns_stale, "copied back the buffer the last step read"),
    (smooth_copies_back, "copied one device buffer into the other 4 time"),
    (smooth_assigns_back, "instead of swapping them"),
    (smooth_host_arrays, "host \\(NumPy\\) array to a kernel"),
    (smooth_returns_device, "returned a device array"),
    (smooth_first_block_only, "never written|only the first block"),
])
def test_smooth_rejects(fn, phrase):
    rejects(check.check_smooth_on_device, fn, phrase)


def test_smooth_host_steps_have_stable_causes():
    for fn, cause in ((smooth_copies_back, "copy_instead_of_swap"),
                      (smooth_assigns_back, "copy_instead_of_swap"),
                      (smooth_returns_stale, "stale_buffer"),
                      (smooth_in_place, "same_buffer_in_out")):
        with pytest.raises(CheckFailure) as info:
            check.check_smooth_on_device(fn, seed=2)
        assert info.value.cause == cause, (fn.__name__, info.value)


def test_smooth_no_swap_diagnosis():
    # Without the swap every launch reads x again: the result is one step of smoothing.
    rejects(check.check_smooth_on_device, smooth_no_swap, "swap the two buffers")


# --- exercise 3: pipelined_scale --------------------------------------------------------------

def chunks(n, n_chunks):
    size = -(-n // n_chunks)
    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]


def pipe_right(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k % n_streams
        d_in[s][:hi - lo].copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
    for s in streams:
        s.synchronize()
    return h_out


def pipe_right_to_device(x, alpha, n_chunks, n_streams):
    """Allocates per chunk with cuda.to_device(stream=...): wasteful, but correct."""
    streams = [cuda.stream() for _ in range(n_streams)]
    h_out = cuda.pinned_array_like(x)
    with cuda.pinned(x):
        for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
            s = streams[k % n_streams]
            d_x = cuda.to_device(x[lo:hi], stream=s)
            d_o = cuda.device_array(hi - lo, np.float32, stream=s)
            scale_kernel_stride[1, 64, s](d_x, d_o, alpha)
            d_o.copy_to_host(h_out[lo:hi], stream=s)
        cuda.synchronize()
    return h_out


def pipe_right_staging_with_sync(x, alpha, n_chunks, n_streams):
    """One small pinned staging buffer per stream, refilled after that stream finished."""
    streams = [cuda.stream() for _ in range(n_streams)]
    size = -(-x.size // n_chunks)
    stage = [cuda.pinned_array(size, np.float32) for _ in streams]
    back = [cuda.pinned_array(size, np.float32) for _ in streams]
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    out = np.empty_like(x)
    pending = [None] * n_streams
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s, m = k % n_streams, hi - lo
        if pending[s] is not None:  # wait before reusing this stream's staging buffers
            streams[s].synchronize()
            plo, phi = pending[s]
            out[plo:phi] = back[s][:phi - plo]
        stage[s][:m] = x[lo:hi]
        d_in[s][:m].copy_to_device(stage[s][:m], stream=streams[s])
        scale_kernel[blocks(m), 128, streams[s]](d_in[s][:m], d_out[s][:m], alpha)
        d_out[s][:m].copy_to_host(back[s][:m], stream=streams[s])
        pending[s] = (lo, hi)
    for s in range(n_streams):
        streams[s].synchronize()
        if pending[s] is not None:
            plo, phi = pending[s]
            out[plo:phi] = back[s][:phi - plo]
    return out


def pipe_drops_tail(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    size = x.size // n_chunks
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k in range(n_chunks):
        lo, hi, s = k * size, (k + 1) * size, k % n_streams
        d_in[s].copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel[blocks(size), 128, streams[s]](d_in[s], d_out[s], alpha)
        d_out[s].copy_to_host(h_out[lo:hi], stream=streams[s])
    for s in streams:
        s.synchronize()
    return h_out


def pipe_shared_buffers(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    size = -(-x.size // n_chunks)
    d_in = cuda.device_array(size, np.float32)  # one pair for every stream: a race
    d_out = cuda.device_array(size, np.float32)
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = streams[k % n_streams]
        d_in[:hi - lo].copy_to_device(h_in[lo:hi], stream=s)
        scale_kernel[blocks(hi - lo), 128, s](d_in[:hi - lo], d_out[:hi - lo], alpha)
        d_out[:hi - lo].copy_to_host(h_out[lo:hi], stream=s)
    cuda.synchronize()
    return h_out


def pipe_no_sync(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k % n_streams
        d_in[s][:hi - lo].copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
    return h_out


def pipe_sync_one_stream(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k % n_streams
        d_in[s][:hi - lo].copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
    streams[0].synchronize()  # the other streams may still be copying
    return h_out


def pipe_staging_no_sync(x, alpha, n_chunks, n_streams):
    """Refills a stream's pinned staging buffer while its previous copy may be pending."""
    streams = [cuda.stream() for _ in range(n_streams)]
    size = -(-x.size // n_chunks)
    stage = [cuda.pinned_array(size, np.float32) for _ in streams]
    h_out = cuda.pinned_array(x.shape, np.float32)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s, m = k % n_streams, hi - lo
        stage[s][:m] = x[lo:hi]
        d_in[s][:m].copy_to_device(stage[s][:m], stream=streams[s])
        scale_kernel[blocks(m), 128, streams[s]](d_in[s][:m], d_out[s][:m], alpha)
        d_out[s][:m].copy_to_host(h_out[lo:hi], stream=streams[s])
    cuda.synchronize()
    return h_out


def pipe_default_stream(x, alpha, n_chunks, n_streams):
    out = np.empty_like(x)
    for lo, hi in chunks(x.size, n_chunks):
        d = cuda.to_device(x[lo:hi])
        o = cuda.device_array_like(d)
        scale_kernel[blocks(hi - lo), 128](d, o, alpha)
        o.copy_to_host(out[lo:hi])
    return out


def pipe_one_stream(x, alpha, n_chunks, n_streams):
    s = cuda.stream()
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    for lo, hi in chunks(x.size, n_chunks):
        d = cuda.to_device(h_in[lo:hi], stream=s)
        o = cuda.device_array(hi - lo, np.float32)
        scale_kernel[blocks(hi - lo), 128, s](d, o, alpha)
        o.copy_to_host(h_out[lo:hi], stream=s)
    s.synchronize()
    return h_out


def pipe_whole_copy(x, alpha, n_chunks, n_streams):
    """Streams for the kernels only: the copies do not overlap anything."""
    streams = [cuda.stream() for _ in range(n_streams)]
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = streams[k % n_streams]
        scale_kernel[blocks(hi - lo), 128, s](d_x[lo:hi], d_out[lo:hi], alpha)
    cuda.synchronize()
    return d_out.copy_to_host()


def pipe_pageable(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    out = np.empty_like(x)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k % n_streams
        d_in[s][:hi - lo].copy_to_device(x[lo:hi], stream=streams[s])
        scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(out[lo:hi], stream=streams[s])
    cuda.synchronize()
    return out


def pipe_right_pinned_pair(x, alpha, n_chunks, n_streams):
    """Right, with Numba's real signature: `cuda.pinned(x, out)` pins several arrays."""
    streams = [cuda.stream() for _ in range(n_streams)]
    out = np.empty_like(x)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    with cuda.pinned(x, out):
        for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
            s = k % n_streams
            d_in[s][:hi - lo].copy_to_device(x[lo:hi], stream=streams[s])
            scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
            d_out[s][:hi - lo].copy_to_host(out[lo:hi], stream=streams[s])
        cuda.synchronize()
    return out


def pipe_block_too_large(x, alpha, n_chunks, n_streams):
    """2048 threads per block: a GPU refuses the launch, the simulator would run it."""
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k % n_streams
        d_in[s][:hi - lo].copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel[1, 2048, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
    for s in streams:
        s.synchronize()
    return h_out


def pipe_wrong_formula(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = streams[k % n_streams]
        d = cuda.to_device(h_in[lo:hi], stream=s)
        o = cuda.device_array(hi - lo, np.float32)
        scale_kernel_add[blocks(hi - lo), 128, s](d, o, alpha)
        o.copy_to_host(h_out[lo:hi], stream=s)
    cuda.synchronize()
    return h_out


def pipe_reads_before_sync(x, alpha, n_chunks, n_streams):
    """Takes each chunk out of the pinned buffer right after queueing its copy: a race on a
    GPU (the copy may not have arrived), right numbers in an in-order simulator."""
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    out = np.empty_like(x)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k % n_streams
        d_in[s][:hi - lo].copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
        out[lo:hi] = h_out[lo:hi]  # too early: nothing waited for the copy
    for s in streams:
        s.synchronize()
    return out


def pipe_right_event_sync(x, alpha, n_chunks, n_streams):
    """Right, written differently: one event per chunk, waited for before its result is read."""
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    out = np.empty_like(x)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    done = []
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k % n_streams
        if k >= n_streams:  # this stream's buffers are reused: its previous chunk must be done
            ev, plo, phi = done[k - n_streams]
            ev.synchronize()
        d_in[s][:hi - lo].copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
        ev = cuda.event()
        ev.record(streams[s])
        done.append((ev, lo, hi))
    for ev, lo, hi in done:
        ev.synchronize()
        out[lo:hi] = h_out[lo:hi]
    return out


def pipe_sync_every_chunk(x, alpha, n_chunks, n_streams):
    """Right numbers, streams and pinned memory, but the host waits after every chunk:
    nothing overlaps."""
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k % n_streams
        d_in[s][:hi - lo].copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
        streams[s].synchronize()
    return h_out


def pipe_device_sync_every_chunk(x, alpha, n_chunks, n_streams):
    """The same with cuda.synchronize() after each chunk."""
    streams = [cuda.stream() for _ in range(n_streams)]
    h_out = cuda.pinned_array_like(x)
    with cuda.pinned(x):
        for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
            s = streams[k % n_streams]
            d_x = cuda.to_device(x[lo:hi], stream=s)
            d_o = cuda.device_array(hi - lo, np.float32, stream=s)
            scale_kernel_stride[1, 64, s](d_x, d_o, alpha)
            d_o.copy_to_host(h_out[lo:hi], stream=s)
            cuda.synchronize()
    return h_out


def test_overlap_is_measured_from_the_record():
    x = np.arange(300, dtype=np.float32)
    for fn, overlapping in ((pipe_right, True), (pipe_right_event_sync, True),
                            (pipe_sync_every_chunk, False)):
        with _trace.tracing([x]) as tr:
            fn(x, 2.0, 4, 2)
        assert bool(tr.concurrent()) is overlapping, fn.__name__
    with pytest.raises(CheckFailure) as info:
        check.check_pipelined_scale(pipe_sync_every_chunk, seed=2)
    assert info.value.cause == "no_overlap", info.value


@pytest.mark.parametrize("fn", [pipe_right, pipe_right_to_device, pipe_right_staging_with_sync,
                                pipe_right_event_sync, pipe_right_pinned_pair])
def test_pipeline_accepts(fn):
    check.check_pipelined_scale(fn, seed=1)
    check.check_pipelined_scale(fn, hidden=check.Cases(2, [(777, 2.25, 5, 2), (999, -0.75, 8, 4), (10, 3.0, 3, 2)]))


@pytest.mark.parametrize("fn, phrase", [
    (pipe_drops_tail, "tail is dropped"),
    (pipe_shared_buffers, "nothing orders them"),
    (pipe_no_sync, "could still be running"),
    (pipe_sync_one_stream, "could still be running"),
    (pipe_staging_no_sync, "refilled a pinned buffer"),
    (pipe_default_stream, "every kernel on the default stream"),
    (pipe_one_stream, "used 1 stream"),
    (pipe_whole_copy, "asynchronous copies to the device"),
    (pipe_pageable, "pageable host memory"),
    (pipe_wrong_formula, re.escape("holds alpha + x[i]")),
    (pipe_reads_before_sync, "before the stream copying them there was synchronized"),
    (pipe_block_too_large, "at most 1024 per block"),
    (pipe_sync_every_chunk, "nothing overlaps"),
    (pipe_device_sync_every_chunk, "nothing overlaps"),
])
def test_pipeline_rejects(fn, phrase):
    rejects(check.check_pipelined_scale, fn, phrase)


# --- the tracer itself ------------------------------------------------------------------

def test_each_check_returns_one_success_line():
    lines = [check.check_gpu_scale(scale_right, seed=1),
             check.check_smooth_on_device(smooth_right, seed=1),
             check.check_pipelined_scale(pipe_right, seed=1)]
    assert [ln.split(":")[0] for ln in lines] == ["gpu_scale passes", "smooth_on_device passes",
                                                 "pipelined_scale passes"], lines
    assert all(ln.endswith("hidden cases (other sizes and seeds)") for ln in lines), lines


def test_tracer_restores_numba():
    before = (cuda.to_device, cuda.device_array, cuda.stream, cuda.synchronize)
    with pytest.raises(RuntimeError):
        with _trace.tracing():
            raise RuntimeError("boom")
    assert (cuda.to_device, cuda.device_array, cuda.stream, cuda.synchronize) == before


def test_tracer_event_orders_streams():
    a = np.arange(64, dtype=np.float32)
    with _trace.tracing([a]) as tr:
        s1, s2 = cuda.stream(), cuda.stream()
        d = cuda.device_array(64, np.float32)
        o = cuda.device_array(64, np.float32)
        h = cuda.pinned_array(64, np.float32)
        h[:] = a
        d.copy_to_device(h, stream=s1)
        ev = cuda.event()
        ev.record(s1)
        ev.wait(s2)  # s2 now waits for the copy on s1
        scale_kernel[1, 64, s2](d, o, 2.0)
        s2.synchronize()
    assert tr.races == []
    # s2 waited for the copy on s1, and the host waited for s2: nothing is left pending.
    assert tr.pending() == []


def test_tracer_event_missing_wait_is_a_race():
    a = np.arange(64, dtype=np.float32)
    with _trace.tracing([a]) as tr:
        s1, s2 = cuda.stream(), cuda.stream()
        d = cuda.device_array(64, np.float32)
        o = cuda.device_array(64, np.float32)
        h = cuda.pinned_array(64, np.float32)
        h[:] = a
        d.copy_to_device(h, stream=s1)
        scale_kernel[1, 64, s2](d, o, 2.0)  # nothing makes s2 wait for the copy
        cuda.synchronize()
    assert len(tr.races) == 1 and "nothing orders them" in tr.races[0]
    assert tr.pending() == []


def test_reading_before_sync_is_a_race_with_a_stable_cause():
    with pytest.raises(CheckFailure) as info:
        check.check_pipelined_scale(pipe_reads_before_sync, seed=3)
    assert info.value.cause == "race", info.value


def test_tracer_delivers_async_copies_at_the_synchronization():
    """An asynchronous copy into pinned memory arrives, for the traced code, when the host
    waits for it: before that the buffer holds the marker, on every device."""
    x = np.arange(16, dtype=np.float32)
    with _trace.tracing([x]) as tr:
        s = cuda.stream()
        d = cuda.to_device(x, stream=s)
        h = cuda.pinned_array(16, np.float32)
        d.copy_to_host(h, stream=s)
        early = h.copy()
        s.synchronize()
        late = h.copy()
    assert np.isnan(early).all() and np.array_equal(late, x)
    assert tr.delivered_late == 1 and tr.pending() == []


def test_tracer_log_names_streams():
    x = np.ones(8, np.float32)
    with _trace.tracing([x]) as tr:
        s = cuda.stream()
        d = cuda.to_device(x, stream=s)
        d.copy_to_host(stream=s)
        s.synchronize()
    assert "stream 1" in tr.log() and "copy to the device of 8 float32" in tr.log()
    assert tr.pending() == []


@pytest.mark.gpu
def test_checkers_on_gpu():
    """On a GPU the same catalogue holds: a sample of right and wrong answers."""
    check.check_gpu_scale(scale_right)
    check.check_pipelined_scale(pipe_right)
    check.check_smooth_on_device(smooth_right)
    rejects(check.check_gpu_scale, scale_host_args, "host \\(NumPy\\) array to a kernel")
    rejects(check.check_pipelined_scale, pipe_shared_buffers, "nothing orders them")
    rejects(check.check_pipelined_scale, pipe_no_sync, "could still be running")
    rejects(check.check_smooth_on_device, smooth_in_place, "same buffer")
    rejects(check.check_smooth_on_device, smooth_copies_back, "instead of swapping them")
    rejects(check.check_smooth_on_device, smooth_returns_stale, "the last step read")
    rejects(check.check_pipelined_scale, pipe_sync_every_chunk, "nothing overlaps")


# --- issue 45 (mutants): pipelined_scale's host exceptions name the mistake ----------------

def pipe_stream_from_chunk(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k  # the chunk's number, where the stream's (k % n_streams) belongs
        d_in[s][:hi - lo].copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
    for s in streams:
        s.synchronize()
    return h_out


def pipe_empty_host_slice(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    size = -(-x.size // n_chunks)
    d_in = [cuda.device_array(size, np.float32) for _ in streams]
    d_out = [cuda.device_array(size, np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k % n_streams
        d_in[s][:hi - lo].copy_to_device(h_in[lo:lo], stream=streams[s])  # lo:lo is empty
        scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
    for s in streams:
        s.synchronize()
    return h_out


def pipe_comprehension_variable(x, alpha, n_chunks, n_streams):
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(x.shape, np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(x.shape, np.float32)
    d_in = [cuda.device_array(-(-x.size // n_chunks), np.float32) for _ in streams]
    d_out = [cuda.device_array(-(-x.size // n_chunks), np.float32) for _ in streams]
    for k, (lo, hi) in enumerate(chunks(x.size, n_chunks)):
        s = k % n_streams
        d_in[s][:hi - _].copy_to_device(h_in[lo:hi], stream=streams[s])  # noqa: F821
        scale_kernel[blocks(hi - lo), 128, streams[s]](d_in[s], d_out[s][:hi - lo], alpha)
        d_out[s][:hi - lo].copy_to_host(h_out[lo:hi], stream=streams[s])
    for s in streams:
        s.synchronize()
    return h_out


@pytest.mark.parametrize("fn, cause, phrase", [
    (pipe_stream_from_chunk, "list_index", "indexed a Python list past its end"),
    (pipe_empty_host_slice, "shape_mismatch", "arrays of different shapes"),
    (pipe_comprehension_variable, "used_before_assigned", "read the name _"),
], ids=["stream-from-chunk", "empty-slice", "comprehension-variable"])
def test_pipelined_scale_names_what_the_host_function_raised(fn, cause, phrase):
    with pytest.raises(CheckFailure) as info:
        check.check_pipelined_scale(fn, seed=3)
    assert info.value.cause == cause and phrase in str(info.value), str(info.value)
