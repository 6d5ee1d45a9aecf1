"""Checkers for lesson 3's exercises: host functions that move data, not only kernels.

A memory mistake often leaves the numbers right (the simulator runs everything in order;
Numba copies host arrays silently), so these checkers record what the learner's function
asked of the GPU (``_trace.tracing``) and judge the operations as well as the result:
implicit copies, results left on the device, copies inside loops, buffers shared between
streams without synchronization, returning before queued copies finished.
"""

from __future__ import annotations
from ..i18n import T

# Causes each checker here raises only after a case's values matched the reference (the
# technique, not the values, was wrong): partial credit keeps the value thirds for them
# (cudacourse.grader.partial, through cudacourse.course.lessons.technique).
TECHNIQUE = {
    "check_gpu_scale": ("needless_upload",),
    "check_pipelined_scale": ("default_stream", "too_few_streams",
                              "sync_copies", "pageable_copy"),
}

from typing import Any, Callable

from . import _raised
from . import kit as K
from .kit import DEFAULT, Trace, resolve, same_memory, tracing
from ..i18n import T

_concatenate = K.np.concatenate
_ndarray_type = K.ndarray


# --- shared parts -------------------------------------------------------------------------

def _require_host_function(fn: Any, name: str, nparams: int) -> None:
    K.require_function(fn, name, nparams)


def _run(fn: Any, name: str, args: tuple, readonly: list) -> tuple[Any, Trace]:
    with tracing(readonly) as trace:
        try:
            result = fn(*args)
        except K.CheckFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - report whatever the learner's code raised
            kind = _raised.launch_not_numbers(exc)
            if kind:  # an array as a grid or block (the simulator's words for it)
                K.fail("bad_launch", T("{name}{args!r}: a launch's grid and block are numbers "
                                       "(of blocks, of threads per block), and this one got "
                                       "an array ({kind}): launch with "
                                       "kernel[blocks, threads](arrays...)", name=name,
                                       args=args[1:], kind=kind))
            got = _raised.launch_not_integers(exc)
            if got:  # a grid or block computed with / : Numba refuses it before any launch
                K.fail("bad_launch", T("{name}{args!r}: a launch's grid and block must be whole numbers, and "
                         "this one got {got}: count blocks with integer division, for example "
                         "(n + 127) // 128 blocks of 128 threads", name=name, args=args[1:], got=got))
            singled = _raised.named(exc, fn, name)
            if singled:  # what was raised says what the learner wrote wrong
                K.fail(singled[0], singled[1])
            K.fail("host_function_raised", T("{name}{args!r} raised {type_exc_name}: {exc}",
                                             name=name, args=args[1:],
                                             type_exc_name=type(exc).__name__,
                                             exc=_raised.words(exc)))
    return result, trace


def _no_host_arguments(trace: Trace, name: str) -> None:
    for op in trace.of("launch"):
        if op.host_args:
            pos = op.host_args[0]
            K.fail("implicit_copy", T("{name} passed a host (NumPy) array to a kernel "
                                      "(argument {pos_plus_1} of operation #{index_plus_1}, "
                                      "{what}). Numba then copies it to the device before the "
                                      "launch and back after it, implicitly, on every launch "
                                      "(on a GPU it warns with NumbaPerformanceWarning). Copy "
                                      "inputs once with cuda.to_device, allocate outputs with "
                                      "cuda.device_array, and pass those device arrays to the "
                                      "kernel.", name=name, pos_plus_1=pos + 1,
                                      index_plus_1=op.index + 1, what=op.what))


def _host_result(result: Any, name: str, n: int) -> K.np.ndarray:
    from ..runtime.arrays import is_device_array

    if is_device_array(result):
        K.fail("result_on_device", T("{name} returned a device array ({type_result_name}): the "
                                     "result is still in GPU memory. Bring it back with "
                                     ".copy_to_host() and return that NumPy array.", name=name,
                                     type_result_name=type(result).__name__))
    if result is None:
        K.fail("no_result", T("{name} returned None: return the result as a NumPy array.",
                              name=name))
    if not isinstance(result, _ndarray_type):
        K.fail("no_result", T("{name} must return a NumPy array, got {type_result_name}.",
                              name=name, type_result_name=type(result).__name__))
    if result.shape != (n,):
        K.fail("wrong_shape", T("{name} returned shape {shape}, expected ({n},).", name=name,
                                shape=result.shape, n=n))
    if result.dtype != K.float32:
        K.fail("wrong_dtype", T("{name} returned dtype {dtype}, expected float32: keep the "
                                "data in float32 (a float64 copy doubles the bytes every "
                                "transfer moves).", name=name, dtype=result.dtype))
    return result


def _no_pending(trace: Trace, name: str) -> None:
    pending = trace.pending()
    if pending:
        op = pending[0]
        K.fail("returned_before_sync", T("{name} returned while {n_pending} operation(s) it "
                                         "queued could still be running, the first: "
                                         "#{index_plus_1}, {what} on {stream_names}. "
                                         "Asynchronous copies and launches return at once; "
                                         "call .synchronize() on every stream you used (or "
                                         "cuda.synchronize()) before returning the result.",
                                         name=name, n_pending=len(pending),
                                         index_plus_1=op.index + 1, what=op.what,
                                         stream_names=trace.stream_names[op.stream]))


def _no_races(trace: Trace, name: str, hint: str) -> None:
    if trace.races:
        K.fail("stream_race", T("{name}: {races}. {hint}", name=name, races=trace.races[0],
                                hint=hint))


def _input_unchanged(x: K.np.ndarray, before: K.np.ndarray, name: str) -> None:
    if not K.array_equal(x, before, equal_nan=True):
        K.fail("inputs_changed", T("{name} changed its input x; only the returned array should "
                                   "hold the result.", name=name))


def _copied_back_early(trace: Trace, name: str) -> None:
    launches = trace.of("launch")
    d2h = trace.of("D2H")
    if launches and d2h and all(op.index < launches[0].index for op in d2h):
        K.fail("copied_back_early", T("{name} copied the result to the host (operation "
                                      "#{index_plus_1}) before launching the kernel (operation "
                                      "#{index_plus_1_2}): the copy took whatever the device "
                                      "buffer held then. Launch first, then copy back.",
                                      name=name, index_plus_1=d2h[0].index + 1,
                                      index_plus_1_2=launches[0].index + 1))


def _needless_uploads(trace: Trace, name: str, x: K.np.ndarray, ctx: str) -> None:
    """More bytes copied to the device than the input holds: an output buffer uploaded
    (``cuda.to_device(np.zeros_like(x))``), though the kernel overwrites every element of
    it, sends n floats over the bus for nothing (issue 45, item 3)."""
    ups = trace.of("H2D")
    sent = sum(hi - lo for op in ups for _space, lo, hi in op.reads)
    if sent > x.nbytes:
        K.fail("needless_upload", T("{name} copied {sent} bytes to the device for an input of {need} bytes "
                 "({k} copies to the device): the output buffer needs no upload, as the kernel "
                 "writes every element of it; allocate it on the device with "
                 "cuda.device_array_like(d_x) instead of copying a host array (such as "
                 "np.zeros_like(x)) over the bus", name=name, sent=sent, need=x.nbytes,
                 k=len(ups)), context=ctx)


def _read_after_sync(result: K.np.ndarray, trace: Trace, name: str, ctx: str) -> None:
    """The host read the pinned buffer only after waiting for the copies into it.

    The trace delivers an asynchronous copy into pinned memory only at the synchronization
    that covers it (see ``_trace``); values read before that are the marker."""
    early = K.poisoned(result)
    if early.any():
        first = int(K.flatnonzero(early)[0])
        K.fail("race", T("{name} read results out of a pinned buffer before the stream copying them "
                 "there was synchronized: result[{first}] and {sum_minus_1} other element(s) "
                 "were taken before their copy was guaranteed to have arrived. copy_to_host(h, "
                 "stream=s) only queues the copy and returns at once: call s.synchronize() (or "
                 "cuda.synchronize()) for every stream first, then read h.", name=name,
                 first=first, sum_minus_1=int(early.sum()) - 1), context=ctx)


# --- exercise 1: the whole lifecycle -----------------------------------------------------------

def check_gpu_scale(fn: Callable, *, hidden: bool = False, seed: int | None = None) -> str:
    """Check ``fn(x, alpha)`` returns ``alpha * x`` as a NumPy array, computed on the GPU.

    Required: the kernel gets device arrays (no implicit copies), the result comes back to
    the host, the input is not modified. Sizes are not multiples of a block size.
    """
    name = "gpu_scale"
    _require_host_function(fn, name, 2)
    cases, seed = resolve(hidden, [(1000, 2.5), (257, -0.5), (1, 3.0)], seed,
                          name="check_gpu_scale")
    gen = K.rng(seed)
    for n, alpha in cases:
        x = K.random_array(gen, n)
        before = K.array(x)
        ctx = f"n={n}, alpha={alpha}"
        result, trace = _run(fn, name, (x, alpha), [x])
        if not trace.of("launch"):
            K.fail("no_kernel", T("{name} launched no kernel: the multiplication must run on "
                                  "the GPU (launch scale_kernel)", name=name), context=ctx)
        _no_host_arguments(trace, name)
        result = _host_result(result, name, n)
        _input_unchanged(x, before, name)
        _copied_back_early(trace, name)
        _no_pending(trace, name)
        a32 = K.float32(alpha)
        want = x * a32
        block = trace.of("launch")[0].block
        K.compare(result, want, name=T("the result"), formula="alpha * x[i]", block=block,
                  factors={"alpha": a32}, context=ctx, alternatives={T("x (not scaled)"): x, "x * x": x * x,
                                             "alpha + x[i]": x + a32, "x[i] / alpha": x / a32})
        _needless_uploads(trace, name, x, ctx)
    return K.passes("gpu_scale", T("{n_cases} sizes with different alphas", n_cases=len(cases)),
             T("device arrays passed to the kernel"), T("the result copied back after the launch"),
             T("nothing left running"), hidden=hidden)


# --- exercise 2: keep the data on the device ------------------------------------------------------

def _smooth_ref(x: K.np.ndarray, steps: int) -> K.np.ndarray:
    y = K.array(x, dtype=K.float32)
    three = K.float32(3.0)
    for _ in range(steps):
        left = _concatenate([y[:1], y[:-1]])
        right = _concatenate([y[1:], y[-1:]])
        y = (left + y + right) / three
    return y


def check_smooth_on_device(fn: Callable, *, hidden: bool = False,
                           seed: int | None = None) -> str:
    """Check ``fn(x, steps)`` applies ``steps`` smoothing steps with the data kept on the GPU.

    Required: one copy to the device and one back whatever ``steps`` is, one launch per
    step, no allocation inside the loop, and never the same buffer as a launch's input and
    output (neighbours would read values already overwritten).
    """
    name = "smooth_on_device"
    _require_host_function(fn, name, 2)
    cases, seed = resolve(hidden, [(300, 4), (129, 3), (2, 2)], seed,
                          name="check_smooth_on_device")
    gen = K.rng(seed)
    for n, steps in cases:
        x = K.random_array(gen, n)
        before = K.array(x)
        ctx = f"n={n}, steps={steps}"
        result, trace = _run(fn, name, (x, steps), [x])
        _no_host_arguments(trace, name)
        launches = trace.of("launch")
        for op in launches:
            for i, a in enumerate(op.args):
                for b in op.args[i + 1:]:
                    if a[0] == b[0] and a[1] < b[2] and b[1] < a[2]:
                        K.fail("same_buffer_in_out", T("{name}: operation #{index_plus_1} "
                                                       "({what}) passes the same buffer as the "
                                                       "step's input and output. Threads then "
                                                       "read neighbours that other threads "
                                                       "have already overwritten (on a GPU, in "
                                                       "an order nobody controls). Use two "
                                                       "buffers and swap them after each step",
                                                       name=name, index_plus_1=op.index + 1,
                                                       what=op.what), context=ctx)
        _copies_instead_of_swap(trace, name, steps, ctx)
        h2d = [op for op in trace.ops if op.kind == "H2D" or
               (op.kind == "fill" and any(r[0] == "host" for r in op.reads))]
        if len(h2d) > 1:
            K.fail("copies_in_loop", T("{name} copied data to the device {n_h2d} times for "
                                       "{steps} steps (operations {h2d}): copy x once before "
                                       "the loop and keep it on the device between launches; "
                                       "each copy crosses the PCIe bus, ~80x slower than "
                                       "device memory", name=name, n_h2d=len(h2d), steps=steps,
                                       h2d=', '.join(('#' + str(op.index + 1) for op in h2d[:4]))), context=ctx)
        d2h = trace.of("D2H")
        if len(d2h) > 1:
            K.fail("copies_in_loop", T("{name} copied data back to the host {n_d2h} times for "
                                       "{steps} steps: the intermediate results are only "
                                       "needed on the device; copy back once, after the last "
                                       "step", name=name, n_d2h=len(d2h), steps=steps), context=ctx)
        if len(launches) != steps:
            K.fail("launch_count", T("{name} launched {n_launches} kernel(s) for "
                                     "steps={steps}: one launch of smooth_step per step",
                                     name=name, n_launches=len(launches), steps=steps), context=ctx)
        device_allocs = [a for a in trace.allocs if a.space == "dev"]
        if len(device_allocs) > 3:
            K.fail("allocs_in_loop", T("{name} allocated {n_device_allocs} device arrays for "
                                       "steps={steps}: allocate the two buffers once, before "
                                       "the loop, and swap them; allocating inside the loop "
                                       "pays a cudaMalloc (and later a cudaFree) per step",
                                       name=name, n_device_allocs=len(device_allocs),
                                       steps=steps), context=ctx)
        _stale_copy_back(trace, name, ctx)
        result = _host_result(result, name, n)
        _input_unchanged(x, before, name)
        _copied_back_early(trace, name)
        _no_pending(trace, name)
        want = _smooth_ref(x, steps)
        alts = {T("x (no smoothing step applied)"): x}
        if steps > 1:
            alts[T("1 step: every launch read x again, so swap the two buffers after each "
                   "launch")] = _smooth_ref(x, 1)
        if steps >= 1:
            alts[T("{steps_minus_1} steps (one too few)",
                   steps_minus_1=steps - 1)] = _smooth_ref(x, steps - 1)
        alts[T("{steps_plus_1} steps (one too many)",
               steps_plus_1=steps + 1)] = _smooth_ref(x, steps + 1)
        K.compare(result, want, name=T("the result"), formula=T("{steps} smoothing steps",
                                                             steps=steps),
                  block=launches[0].block if launches else None, context=ctx,
                  alternatives=alts)
    return K.passes("smooth_on_device", T("{n_cases} cases of 1 to 6 steps",
                                          n_cases=len(cases)),
             T("one copy in and one copy back whatever the steps"), T("one launch per step"),
             T("two buffers swapped, no allocation in the loop"), hidden=hidden)


def _copies_instead_of_swap(trace: Trace, name: str, steps: int, ctx: str) -> None:
    """A device-to-device copy per step (``d_in.copy_to_device(d_out)``, ``d_in[:] = d_out``)
    gives the right numbers but moves every byte twice per step: judged from the record."""
    copies = trace.device_copies()
    if copies:
        op = copies[0]
        K.fail("copy_instead_of_swap", T(
            "{name} copied one device buffer into the other {k} time(s) for {steps} steps "
            "(the first: operation #{index}, {what}) instead of swapping them. A "
            "device-to-device copy reads and writes the whole array again, as much memory "
            "traffic as the step itself; swapping the two names costs nothing: "
            "src, dst = dst, src", name=name, k=len(copies), steps=steps, index=op.index + 1,
            what=op.what), context=ctx)


def _stale_copy_back(trace: Trace, name: str, ctx: str) -> None:
    """The copy back reads the buffer the last step read, not the one it wrote: a stale
    buffer, found from the record of buffers (which one each launch wrote), not from
    values."""
    launches, d2h = trace.of("launch"), trace.of("D2H")
    io = launches[-1].io() if launches else None
    if not (io and d2h and d2h[-1].reads and d2h[-1].index > launches[-1].index):
        return
    src = d2h[-1].reads[0]
    if same_memory(src, io[0]) and not same_memory(src, io[1]):
        K.fail("stale_buffer", T(
            "{name} copied back the buffer the last step read (its input, operation "
            "#{launch}), not the one it wrote: after the swap the newest values are in the "
            "buffer now called src. Copy back that one", name=name,
            launch=launches[-1].index + 1), context=ctx)


# --- exercise 3: a pipeline over streams ----------------------------------------------------------

def check_pipelined_scale(fn: Callable, *, hidden: bool = False,
                          seed: int | None = None) -> str:
    """Check ``fn(x, alpha, n_chunks, n_streams)`` pipelines ``alpha * x`` over streams.

    Required: the right result, also when ``n_chunks`` does not divide ``len(x)``; every
    chunk copied in and out asynchronously on a stream; chunks spread over ``n_streams``
    streams; pinned host memory for asynchronous copies; no buffer shared by two streams
    without ordering; every stream synchronized before returning.
    """
    name = "pipelined_scale"
    _require_host_function(fn, name, 4)
    cases, seed = resolve(hidden, [(1000, 1.5, 7, 3), (301, -2.0, 4, 2), (64, 0.5, 3, 3)], seed,
                          name="check_pipelined_scale")
    gen = K.rng(seed)
    for n, alpha, n_chunks, n_streams in cases:
        x = K.random_array(gen, n)
        before = K.array(x)
        ctx = f"n={n}, n_chunks={n_chunks}, n_streams={n_streams}"
        result, trace = _run(fn, name, (x, alpha, n_chunks, n_streams), [x])
        _no_host_arguments(trace, name)
        result = _host_result(result, name, n)
        _input_unchanged(x, before, name)
        _no_races(trace, name, T("Give each stream its own device buffers (chunk k uses the "
                                 "buffers of stream k % n_streams), or make the streams wait "
                                 "for each other before a buffer is reused."))
        _no_pending(trace, name)
        _read_after_sync(result, trace, name, ctx)
        want = x * K.float32(alpha)
        ok = K.isclose(result, want, rtol=1e-5, atol=1e-5)
        bad = K.flatnonzero(~ok)
        if bad.size and bad[0] > 0 and bad.size == n - int(bad[0]):
            K.fail("dropped_tail", T("the last {size} elements of the result are missing or "
                                     "wrong (n={n}, n_chunks={n_chunks}, n % n_chunks = "
                                     "{n_mod_n_chunks}): with chunk = n // n_chunks the tail "
                                     "is dropped when n_chunks does not divide n. Round the "
                                     "chunk size up, chunk = -(-n // n_chunks), and clip the "
                                     "last chunk at n", size=bad.size, n=n, n_chunks=n_chunks,
                                     n_mod_n_chunks=n % n_chunks), context=ctx)
        K.compare(result, want, name=T("the result"), formula="alpha * x[i]", context=ctx,
                  factors={"alpha": K.float32(alpha)}, alternatives={T("x (not scaled)"): x, "alpha + x[i]": x + K.float32(alpha)})
        expected_chunks = len(range(0, n, max(1, -(-n // n_chunks))))
        launches = trace.of("launch")
        on_streams = {op.stream for op in launches if op.stream != DEFAULT}
        want_streams = min(n_streams, expected_chunks)
        if not on_streams:
            K.fail("default_stream", T("{name} launched every kernel on the default stream, which runs one "
                     "operation at a time: create streams with `cuda.stream()` and launch "
                     "chunk k with `kernel[blocks, threads, streams[k % n_streams]]`",
                     name=name), context=ctx)
        if len(on_streams) < want_streams:
            K.fail("too_few_streams", T("{name} used {n_on_streams} stream(s) for "
                                        "n_streams={n_streams}: spread the chunks round-robin, "
                                        "chunk k on streams[k % n_streams]", name=name,
                                        n_on_streams=len(on_streams), n_streams=n_streams), context=ctx)
        for kind, words in (("H2D", T("to the device")), ("D2H", T("back to the host"))):
            async_copies = [op for op in trace.of(kind) if op.stream != DEFAULT]
            if len(async_copies) < expected_chunks:
                K.fail("sync_copies", T("{name} made {n_async_copies} asynchronous copies "
                                        "{words} for {expected_chunks} chunks: copy each chunk "
                                        "on its stream (stream= argument), so that one chunk's "
                                        "copies overlap another chunk's kernel; a copy on the "
                                        "default stream waits for everything", name=name,
                                        n_async_copies=len(async_copies), words=words,
                                        expected_chunks=expected_chunks), context=ctx)
        for op in trace.ops:
            if op.pageable:
                K.fail("pageable_copy", T("{name}: operation #{index_plus_1} ({what} on "
                                          "{stream_names}) copies pageable host memory. The "
                                          "GPU's copy engines can only read and write pinned "
                                          "(page-locked) memory, so the driver stages such "
                                          "copies through a pinned buffer and they stop being "
                                          "asynchronous. Stage the data in cuda.pinned_array "
                                          "buffers and copy those", name=name,
                                          index_plus_1=op.index + 1, what=op.what,
                                          stream_names=trace.stream_names[op.stream]), context=ctx)
        _overlaps(trace, name, expected_chunks, want_streams, ctx)
    return K.passes("pipelined_scale", T("{n_cases} cases, chunks that do not divide n",
                                         n_cases=len(cases)),
             T("copies and launches spread over the streams, from pinned memory"),
             T("no buffer shared without ordering"), T("results read after the synchronization"),
             hidden=hidden)


def _overlaps(trace: Trace, name: str, chunks: int, streams: int, ctx: str) -> None:
    """Some chunk's copies or kernel may run while another chunk's do: measured from the
    record (operations on two streams that nothing orders), not from a clock. A host that
    synchronizes after every chunk gets the right numbers with nothing overlapping."""
    if streams < 2 or trace.concurrent():
        return
    syncs = [k for k, _ in trace.syncs if 0 < k < len(trace.ops)]
    first = f"#{syncs[0]}" if syncs else "?"
    K.fail("no_overlap", T(
        "{name}: nothing overlaps. The host waited for the GPU {k} time(s) while queueing "
        "the {chunks} chunks (the first time after operation {first}), so every copy and "
        "launch had to finish before the next chunk's were even issued: no two operations "
        "on different streams could run at the same time. Queue every chunk first, then "
        "synchronize the streams once, after the loop", name=name, k=len(syncs),
        chunks=chunks, first=first), context=ctx)
