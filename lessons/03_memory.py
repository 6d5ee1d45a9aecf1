# %% [markdown]
# # Lesson 3: host and device memory
#
# A GPU computes on its own memory. On the {{bench.gpu}} that memory moves
# {{bench.ceiling.copy_gb_s/1000:.1f}} TB/s (a device-to-device copy in this course's
# benchmark, `docs/benchmarks.json`, {{bench.date}}); the link to the host's memory moved
# {{const.transfer.H200_PINNED_H2D_GB_S}} GB/s on the same machine on {{const.transfer.H200_H2D.date}} (copies of 1 GiB from *pinned*, page-locked, host
# memory, section 3; measured with CUDA events), some
# {{bench.ceiling.copy_gb_s / const.transfer.H200_PINNED_H2D_GB_S:.0f}} times less. So the question of this lesson is not how to compute but
# **when to move data, and how**:
#
# 1. the explicit lifecycle: allocate, copy in, launch, copy back, free;
# 2. the copies Numba makes for you when you pass NumPy arrays to a kernel;
# 3. pageable against pinned host memory;
# 4. keeping data on the device between launches;
# 5. streams, which overlap copies with computation;
# 6. mapped (zero-copy) memory, the cost of a launch, CuPy and PyTorch interoperation;
# 7. a small model of when offloading pays at all.
#
# Three exercises are checked by `cudacourse.check`; six questions ask you to predict or explain.

# %% [readonly] id=setup
import cudacourse
cudacourse.setup()  # first: a real GPU or the CUDA simulator, chosen before numba.cuda loads
import cudacourse.check
from cudacourse.course import quiz
from cudacourse.runtime import device
from cudacourse.course import prose
from cudacourse.kernels import transfer, launch_cost
from cudacourse.viz import memory as viz
import warnings
import numpy as np
import matplotlib.pyplot as plt
from numba import cuda

SIM = device.is_simulator()

# %% [markdown]
# ## 1. The lifecycle, as CUDA C names it and as Numba spells it
#
# | step | CUDA C runtime | Numba |
# | --- | --- | --- |
# | allocate device memory | `cudaMalloc(&d_x, bytes)` | `d_out = cuda.device_array(n, np.float32)` |
# | copy host to device | `cudaMemcpy(d_x, x, bytes, cudaMemcpyHostToDevice)` | `d_x = cuda.to_device(x)` (allocates too) |
# | launch | `scale<<<blocks, threads>>>(d_x, d_out, a)` | `scale_kernel[blocks, threads](d_x, d_out, a)` |
# | copy device to host | `cudaMemcpy(out, d_out, bytes, cudaMemcpyDeviceToHost)` | `out = d_out.copy_to_host()` |
# | free | `cudaFree(d_x)` | drop the last reference (`del d_x`); Numba frees it |
#
# Here is the kernel used through the lesson: every thread scales one element.

# %%
@cuda.jit
def scale_kernel(x, out, alpha):
    """out[i] = alpha * x[i]."""
    i = cuda.grid(1)
    if i < out.shape[0]:  # the last block has threads past the end
        out[i] = alpha * x[i]

# %% [markdown]
# The five steps, one line each. The device arrays are ordinary Python objects: when the
# last reference goes, Numba queues the `cudaFree` (it frees in batches, since a free
# waits for the device).

# %%
n = device.pick(sim=1000, gpu=100_000_000)
x = np.random.default_rng(0).standard_normal(n).astype(np.float32)


def show(when):
    m = transfer.memory_state()
    if m is not None:  # None in the simulator, which has no device memory of its own
        print(prose.shown("{{when:<28}} free {{free:7.2f}} GiB of {{total:.1f}}; frees queued: "
                          "{{frees:.0f}} ({{queued:.0f}} MiB)", when=when,
                          free=m["free"] / 2**30, total=m["total"] / 2**30,
                          frees=m["queued_frees"], queued=m["queued_bytes"] / 2**20))


show(viz.T("before:"))
d_x = cuda.to_device(x)                                    # allocate + copy in
d_out = cuda.device_array(n, dtype=np.float32)              # allocate, uninitialised
show(viz.T("after two allocations:"))
scale_kernel[(n + 255) // 256, 256](d_x, d_out, np.float32(2.0))   # launch
out = d_out.copy_to_host()                                  # copy back (waits for the kernel)
print(prose.shown("correct: {{ok}}", ok=np.allclose(out, 2 * x)))
del d_x, d_out                                              # free: queued by Numba
show(viz.T("after del:"))
transfer.flush_frees()                                      # what Numba does in batches
show(viz.T("after the queue is flushed:"))
if SIM:
    print(prose.shown("The simulator has no device memory of its own; on a GPU this cell prints "
                      "the free memory and the queued frees after each step."))

# %% [markdown]
# ## 2. Implicit copies
#
# A kernel may also be given NumPy arrays. Numba cannot know which of them the kernel
# writes, so for **each** host argument it copies it to the device before the launch and
# back after it, **on every launch**. On a GPU it warns: `NumbaPerformanceWarning: Host
# array used in CUDA kernel will incur copy overhead to/from device`. The simulator runs
# the kernel on host memory and emits no warning, so it cannot show you this cost.

# %%
small = np.arange(8, dtype=np.float32)
host_out = np.zeros_like(small)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    scale_kernel[1, 32](small, host_out, np.float32(3.0))   # two host arrays: 2 copies each way
print(host_out)
perf = [w for w in caught if "NumbaPerformanceWarning" in type(w.message).__name__]
if perf:
    for w in perf:
        print(prose.shown("warning: {{message}}", message=w.message))
else:
    print(prose.shown("No warning here: the simulator has no separate device memory. On a GPU "
                      "this launch warns once per host array."))

# %%
quiz.ask("03_memory.implicit")

# %% [solution] id=answer_implicit
# Question 1: Copies behind a loop of launches. Answer as: answer_implicit = <a number>, within 0.5
### BEGIN SOLUTION
answer_implicit = 200
### END SOLUTION

# %% [tests] id=test_answer_implicit points=1
quiz.grade("03_memory.implicit", answer_implicit)

# %% [markdown]
# ### Exercise 1: the whole lifecycle
#
# Write `gpu_scale(x, alpha)`: given a 1-D float32 NumPy array, return `alpha * x` as a
# NumPy array, computed on the GPU with `scale_kernel`. Spell out the lifecycle: copy `x`
# in, allocate the output on the device, launch enough blocks for every element, copy the
# result back. The checker records every operation your function issues: it rejects host
# arrays passed to the kernel (implicit copies), a result left on the device, an output
# copied back before the kernel ran, and wrong values.

# %% [solution] id=gpu_scale
def gpu_scale(x, alpha):
    ### BEGIN SOLUTION
    d_x = cuda.to_device(x)
    d_out = cuda.device_array_like(d_x)
    threads = 256
    blocks = (x.shape[0] + threads - 1) // threads
    scale_kernel[blocks, threads](d_x, d_out, np.float32(alpha))
    return d_out.copy_to_host()
    ### END SOLUTION

# %% [tests] id=test_gpu_scale points=3
cudacourse.check.check_gpu_scale(gpu_scale)
### BEGIN HIDDEN TESTS
cudacourse.check.check_gpu_scale(gpu_scale, hidden=cudacourse.check.Cases(
    seed=640291783, sizes=[(1409, 1.25), (103, -1.5), (650, 0.625)]))
### END HIDDEN TESTS

# %%
quiz.ask("03_memory.pinned")

# %% [solution] id=answer_pinned
# Question 2: Why pinned memory copies faster. Answer as: answer_pinned = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_pinned = "c"
### END SOLUTION

# %% [tests] id=test_answer_pinned points=1
quiz.grade("03_memory.pinned", answer_pinned)

# %% [markdown]
# ## 3. Pageable and pinned host memory
#
# An ordinary NumPy array lives in *pageable* memory: the operating system may move its
# pages or swap them out at any time, so the GPU's copy engines (*DMA*, direct memory
# access: hardware that moves bytes between host and device memory without the CPU) cannot read it
# directly. The driver first copies it, with the CPU, into a pinned staging buffer, then
# the DMA engine moves that. *Pinned* (page-locked) memory skips the staging copy:
# `cuda.pinned_array(n, dtype)` allocates it, `with cuda.pinned(a):` pins an existing
# array for a while. Pinning is itself slow (it asks the operating system), so pin once
# and reuse the buffers.
#
# The sweep below times host-to-device copies of growing size with CUDA events on a GPU.
# **In the simulator a "copy" is a NumPy copy timed by the host clock: its numbers say
# nothing about a GPU**, and the sizes are tiny. On the NVIDIA H200 of this course's
# measurements (`cudacourse.transfer`, {{const.transfer.H200_H2D.date}}), pinned copies of 1 GiB reached
# {{const.transfer.H200_PINNED_H2D_GB_S}} GB/s against {{const.transfer.H200_PAGEABLE_H2D_GB_S}}
# GB/s from pageable memory. In the simulator the plot below shows NumPy copies: the two lines
# can lie on top of each other, because there is no DMA engine to tell them apart.

# %%
sizes = device.pick(sim=[2**12, 2**14, 2**16], gpu=[2**k for k in range(12, 30, 2)])
rows = transfer.bandwidth_sweep(sizes, repeats=device.pick(sim=2, gpu=5))
for r in rows:
    print(prose.shown("{{bytes:>11,}} bytes   pageable {{pageable:7.2f}} GB/s   pinned "
                      "{{pinned:7.2f}} GB/s", bytes=int(r["bytes"]), pageable=r["pageable"],
                      pinned=r["pinned"]))
viz.plot_bandwidth(rows, title=viz.T("host to device (simulator: meaningless)") if SIM else
                   viz.T("host to device, measured now with CUDA events"))
plt.show()

# %% [markdown]
# Small copies are slow whatever the memory: each costs a fixed few microseconds before
# the first byte moves, so below some size the bandwidth you see is mostly that latency.
# Batch small transfers into big ones.

# %%
quiz.ask("03_memory.copy_time")

# %% [solution] id=answer_copy_time
# Question 3: How long a copy takes. Answer as: answer_copy_time = <a number of ms>, within 0.5
### BEGIN SOLUTION
answer_copy_time = 16
### END SOLUTION

# %% [tests] id=test_answer_copy_time points=1
quiz.grade("03_memory.copy_time", answer_copy_time)


# %% [markdown]
# ## 4. Keep the data on the device
#
# The cheapest copy is the one you do not make. When a computation takes many steps,
# copy in once, run every step on the device, copy out once. A stencil step (here a
# 3-point average) cannot write into the array it reads: a thread would read a
# neighbour that another thread has already overwritten. So two buffers take turns as
# source and destination, swapped after each step ("ping-pong"), both allocated once.

# %%
@cuda.jit
def smooth_step(src, dst):
    """dst[i] = mean of src[i-1], src[i], src[i+1], with the end values repeated."""
    i = cuda.grid(1)
    n = src.shape[0]
    if i < n:
        left = src[i - 1] if i > 0 else src[i]
        right = src[i + 1] if i + 1 < n else src[i]
        dst[i] = (left + src[i] + right) / np.float32(3.0)

# %% [markdown]
# ### Exercise 2: many steps, one copy each way
#
# Write `smooth_on_device(x, steps)`: apply `smooth_step` `steps` times to the float32
# array `x` and return the result as a NumPy array. The checker counts your operations:
# exactly one copy to the device and one back whatever `steps` is, one launch per step,
# no allocation inside the loop, and never the same buffer as input and output of a
# launch. The reference is `transfer.smooth_ref(x, steps)`.

# %% [solution] id=smooth_on_device
def smooth_on_device(x, steps):
    ### BEGIN SOLUTION
    src = cuda.to_device(x)
    dst = cuda.device_array_like(src)
    threads = 256
    blocks = (x.shape[0] + threads - 1) // threads
    for _ in range(steps):
        smooth_step[blocks, threads](src, dst)
        src, dst = dst, src
    return src.copy_to_host()
    ### END SOLUTION

# %% [tests] id=test_smooth_on_device points=3
cudacourse.check.check_smooth_on_device(smooth_on_device)
### BEGIN HIDDEN TESTS
cudacourse.check.check_smooth_on_device(smooth_on_device, hidden=cudacourse.check.Cases(
    seed=287364519, sizes=[(523, 5), (70, 1), (190, 6)]))
### END HIDDEN TESTS

# %% [markdown]
# ## 5. Streams: overlap copies with computation
#
# A *stream* is a queue of GPU work: operations in one stream run in order, operations in
# different streams may run at the same time. A GPU has copy engines separate from its
# SMs (one per direction at least), so while chunk 0 is computed, chunk 1 can be copied
# in and chunk -1 copied out. Split the data in chunks, send chunk k through stream
# k % n_streams, and the three kinds of work overlap. Three rules make it correct:
#
# * asynchronous copies need **pinned** host memory (pageable copies are staged and stop
#   being asynchronous);
# * two streams must not share a buffer unless something orders them: give every stream its
#   own device buffers;
# * copies return at once: **synchronize** every stream before reading the results.
#
# First the picture, from a model with equal durations for every operation (a GPU with
# one copy engine per direction): one stream against three.

# %%
fig, axes = plt.subplots(2, 1, figsize=(8, 4.5), sharex=True)
viz.plot_timeline(transfer.modelled_timeline(6, 1), title=viz.T("one stream: nothing overlaps"),
                  unit=viz.T("model units"), ax=axes[0])
viz.plot_timeline(transfer.modelled_timeline(6, 3),
                  title=viz.T("three streams: copies in, kernels and copies out overlap"),
                  unit=viz.T("model units"), ax=axes[1])
plt.tight_layout()
plt.show()

# %% [markdown]
# ### Streams in Numba, on a small example
#
# Five pieces of API make a pipeline. Here they are on a job that is *not* one: two
# independent arrays, each squared on its own stream.
#
# * `s = cuda.stream()` creates a stream. Work issued without one goes to the *default
#   stream*, which waits for everything else.
# * Copies take `stream=`: `d.copy_to_device(h, stream=s)`, `d.copy_to_host(h, stream=s)`
#   (and `cuda.to_device(h, stream=s)`). With a stream they are queued and return at once;
#   from pinned host memory the copy then really runs while the host goes on.
# * A launch names its stream as a third value in the brackets:
#   `kernel[blocks, threads, s](args)`. It runs after the work queued on `s` before it.
# * `s.synchronize()` waits until everything queued on `s` is done (`cuda.synchronize()`
#   waits for every stream). Read a host buffer only after that.
# * Slicing a device array, `d[lo:hi]`, gives a **view**: the same device memory, no copy,
#   no allocation. Copies and kernels accept a view like any device array, so a chunk of a
#   big buffer needs no buffer of its own.

# %%
@cuda.jit
def square_kernel(x):
    """x[i] = x[i] ** 2, in place."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] = x[i] * x[i]


streams = [cuda.stream(), cuda.stream()]
hosts = [cuda.pinned_array(6, dtype=np.float32) for _ in streams]  # pinned: async copies
for j, h in enumerate(hosts):
    h[:] = np.arange(6) + 10 * j
devs = [cuda.device_array(6, dtype=np.float32) for _ in streams]  # one buffer per stream
for h, d, s in zip(hosts, devs, streams):
    d.copy_to_device(h, stream=s)     # queued on s; returns at once
    square_kernel[1, 32, s](d)        # on s too: runs after the copy
    d.copy_to_host(h, stream=s)       # queued on s as well
for s in streams:
    s.synchronize()                   # wait for s: now h holds the result
print(prose.shown("stream 0: {{a}}\nstream 1: {{b}}", a=hosts[0], b=hosts[1]))

view = devs[1][2:5]                   # elements 2, 3, 4 of devs[1]: a view, no copy
square_kernel[1, 32](view)            # default stream; the kernel sees a 3-element array
print(prose.shown("after squaring the view again: {{x}}", x=devs[1].copy_to_host()))

# %%
quiz.ask("03_memory.sync_print")

# %% [solution] id=answer_sync_print
# Question 4: Reading a result that was only queued. Answer as: answer_sync_print = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_sync_print = "a"
### END SOLUTION

# %% [tests] id=test_answer_sync_print points=1
quiz.grade("03_memory.sync_print", answer_sync_print)

# %% [markdown]
# What did your code issue? The checker's recorder can show you, operation by operation
# with its stream; it is the same record the checker judges. Here it records one chunk's
# round trip on one stream (not the exercise: no kernel, one chunk), before and after the
# host waits for the stream.

# %%
from cudacourse.check._trace import tracing

with tracing() as trace:
    one = cuda.stream()
    h_back = cuda.pinned_array(8, dtype=np.float32)
    d_chunk = cuda.to_device(np.arange(8, dtype=np.float32), stream=one)
    d_chunk.copy_to_host(h_back, stream=one)  # queued: h_back is not filled yet
    print(prose.shown("still pending before synchronize(): {{n}}", n=len(trace.pending())))
    one.synchronize()
print(trace.log())
print(prose.shown("races: {{races}} | still pending at the end: {{n}}",
                  races=trace.races or prose.shown("none"), n=len(trace.pending())))

# %% [markdown]
# ### Exercise 3: a pipeline over streams
#
# Write `pipelined_scale(x, alpha, n_chunks, n_streams)`: return `alpha * x` (a NumPy
# array) computed chunk by chunk, chunk k on stream k % n_streams with its copy in, its
# `scale_kernel` launch and its copy out. `n_chunks` need not divide `len(x)`: round the
# chunk size up and clip the last chunk. The checker records your operations and rejects
# a dropped tail, a buffer shared by two streams without ordering, a return before every
# stream finished, copies on the default stream, and asynchronous copies from pageable
# memory.

# %% [solution] id=pipelined_scale
def pipelined_scale(x, alpha, n_chunks, n_streams):
    ### BEGIN SOLUTION
    n = x.shape[0]
    size = -(-n // n_chunks)  # round up: the last chunk may be shorter
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(n, dtype=np.float32)
    h_in[:] = x
    h_out = cuda.pinned_array(n, dtype=np.float32)
    d_in = [cuda.device_array(size, dtype=np.float32) for _ in streams]
    d_out = [cuda.device_array(size, dtype=np.float32) for _ in streams]
    for k, lo in enumerate(range(0, n, size)):
        hi = min(lo + size, n)
        s = k % n_streams
        di, do = d_in[s][:hi - lo], d_out[s][:hi - lo]
        di.copy_to_device(h_in[lo:hi], stream=streams[s])
        scale_kernel[(hi - lo + 255) // 256, 256, streams[s]](di, do, np.float32(alpha))
        do.copy_to_host(h_out[lo:hi], stream=streams[s])
    for stream in streams:
        stream.synchronize()
    return h_out
    ### END SOLUTION

# %% [tests] id=test_pipelined_scale points=3
cudacourse.check.check_pipelined_scale(pipelined_scale)
### BEGIN HIDDEN TESTS
cudacourse.check.check_pipelined_scale(pipelined_scale, hidden=cudacourse.check.Cases(
    seed=813572964, sizes=[(781, 2.5, 5, 2), (1003, -0.25, 8, 4), (11, 3.5, 3, 2)]))
### END HIDDEN TESTS

# %% [markdown]
# On a GPU the next cell runs the course's own pipeline, `transfer.pipelined_scale`
# (the same idea as your answer), and draws the bars from CUDA
# events recorded around each operation, so the picture shows what the hardware did in
# this run. The simulator has no timing events and runs everything in order: it prints
# a sentence instead.

# %%
if SIM:
    print(prose.shown("Simulator: there are no timing events and operations run one after "
                      "another, so there is no measured timeline to draw. The model above shows "
                      "what a GPU does."))
else:
    big = np.random.default_rng(1).standard_normal(2**26).astype(np.float32)
    transfer.pipelined_scale(big, 2.0, n_chunks=8, n_streams=3)  # warm-up: compile, pin
    result, bars = transfer.pipelined_scale(big, 2.0, n_chunks=8, n_streams=3, timeline=True)
    print(prose.shown("correct: {{ok}}", ok=np.allclose(result, 2 * big)))
    viz.plot_timeline(bars, title=viz.T("measured now: {mib:.0f} MiB in {chunks} chunks over "
                                        "{streams} streams", mib=big.nbytes / 2**20, chunks=8,
                                        streams=3))
    plt.show()

# %%
quiz.ask("03_memory.streams")

# %% [solution] id=answer_streams
# Question 5: Pick the lines that race. Answer as: answer_streams = "<letters>", every one of a, b, c, d that applies, separated by commas
### BEGIN SOLUTION
answer_streams = "a, b"
### END SOLUTION

# %% [tests] id=test_answer_streams points=1
quiz.grade("03_memory.streams", answer_streams)

# %% [markdown]
# ## 6. Mapped (zero-copy) memory
#
# `cuda.mapped_array` allocates pinned host memory that is also mapped into the device's
# address space: a kernel reads and writes it directly, every access crossing the bus.
# No copies are issued. It pays when each byte is touched once (a copy would move it once
# anyway), when the kernel needs only a little of a large host array, or on devices that
# share memory with the host; it loses badly when a kernel reads the same bytes again and
# again. Remember to wait (`cuda.synchronize()`) before the host reads what the kernel wrote.

# %%
print(transfer.mapped_scale(np.arange(6, dtype=np.float32), 10.0))

# %% [markdown]
# ## 7. What a launch costs from Python
#
# Each `kernel[grid, block](args)` types every argument, converts it into the kernel's
# parameters (a pointer, the sizes, the shape and the strides of each array) and only then
# asks the driver to launch. Measured on the {{bench.gpu}} ({{bench.date}}, one-element arrays,
# `docs/benchmarks.json`): **{{bench.launch_overhead_bare_numba.value:.0f}} microseconds per
# launch with Numba device arrays, {{bench.launch_overhead_bare_numba_cupy.value:.0f}} with
# CuPy arrays**, which Numba wraps anew through `__cuda_array_interface__` on every call,
# against **{{bench.launch_overhead_cupy_add.value:.0f}} for CuPy's own `add` and
# {{bench.launch_overhead_torch_add.value:.0f}} for PyTorch's**. Most of Numba's cost is its
# argument work, the same whichever way the kernel is called (the dispatcher, a
# configuration made once, the compiled kernel's own `launch`): to get below it, do the
# argument work once.
# The cell measures every route here, now (in the simulator: numbers about the simulator
# only), including the course's own launcher, `vector_add(a, b, out)`.

# %%
costs = launch_cost.launch_costs()
for k, v in costs.items():
    print(prose.shown("{{us:10.1f}} us  {{what}}", us=v, what=cudacourse.i18n.shown(k)))
viz.plot_launch_costs(costs, title=viz.T("per launch, measured now (simulator)") if SIM
                      else viz.T("per launch, measured now"))
plt.show()
if SIM:  # the simulator has no driver: its order says nothing; the GPU's, from the bench
    from cudacourse.course import prose
    prose.show(
        "Simulator: every launch here is Python, so the order above says nothing about a GPU. "
        "On the {{bench.gpu}} ({{bench.date}}), per launch: Numba device arrays "
        "{{bench.launch_overhead_bare_numba.value:.0f}} us, CuPy arrays through Numba "
        "{{bench.launch_overhead_bare_numba_cupy.value:.0f}} us, the course's launcher on Numba "
        "arrays {{bench.launch_overhead_numba_arrays.value:.0f}} us and on CuPy arrays "
        "{{bench.launch_overhead.value:.0f}} us, CuPy's `add` "
        "{{bench.launch_overhead_cupy_add.value:.0f}} us, PyTorch's "
        "{{bench.launch_overhead_torch_add.value:.0f}} us.")

# %% [markdown]
# Doing the work once is what `cudacourse.launch.FastLaunch` does: the first launch of a
# given shape goes through Numba (which compiles the kernel and converts the arguments), and
# what it worked out (the compiled kernel, the launch configuration, the flattened
# parameters) is kept under a key; every later launch only writes the new data pointers and
# calls the driver. The course's launchers work that way on device arrays: `vector_add`
# costs {{bench.launch_overhead.value:.0f}} microseconds per call on CuPy arrays
# ({{bench.launch_overhead_numba_arrays.value:.0f}} on Numba arrays) in the same benchmark.
# (In the simulator there is no driver: every launch goes through Numba.)

# %%
from cudacourse.runtime.launch import FastLaunch

d_x = cuda.to_device(np.zeros(4, dtype=np.float32))
launch = FastLaunch()
for _ in range(3):  # the first call compiles and prepares; the next two reuse what it kept
    launch("touch, 4 floats", launch_cost._touch, 1, 32, (d_x,))
print(d_x.copy_to_host())  # three launches of one thread adding 1: [3. 0. 0. 0.]
if SIM:
    from cudacourse.course import prose
    prose.show(
        "Simulator: there is no driver to skip, so `FastLaunch` saves nothing here. On the "
        "{{bench.gpu}} ({{bench.date}}) the course's launcher, which works this way, took "
        "{{bench.launch_overhead_numba_arrays.value:.0f}} us per launch on Numba arrays "
        "against {{bench.launch_overhead_bare_numba.value:.0f}} us for a plain Numba launch.")

# %% [markdown]
# How not to pay it: fewer, bigger launches (one launch over all the data rather than one
# per chunk of a few thousand elements); keep data on the device; pass Numba device
# arrays, converting a CuPy array **once** with `cuda.as_cuda_array`; prepare a launch you
# repeat; and for a fixed sequence of launches, CUDA graphs replay all of it with one call.
# The same work as many small launches and as one big one:

# %%
parts, items = device.pick(sim=(4, 256), gpu=(1000, 4096))
t = launch_cost.launches_versus_one(parts, items)
for k, v in t.items():
    print(prose.shown("{{what}}: {{ms:8.2f}} ms", what=cudacourse.i18n.shown(k), ms=v * 1e3))
if SIM:
    from cudacourse.course import prose
    many, one = t["many small launches"] * 1e3, t["one big launch"] * 1e3
    if many > one:
        prose.show(
            "Simulator: the {{parts:,}} small launches took {{many:,.2f}} ms and the one big "
            "launch {{one:,.2f}} ms, but here the threads themselves are Python and dominate "
            "both.", parts=parts, many=many, one=one)
    else:
        prose.show(
            "Simulator: the {{parts:,}} small launches took {{many:,.2f}} ms and the one big "
            "launch {{one:,.2f}} ms: a launch costs the simulator almost nothing beyond the "
            "threads it runs.", parts=parts, many=many, one=one)
    prose.show(
        "On a GPU each launch costs {{bench.launch_overhead_bare_numba.value:.0f}} us from "
        "Python ({{bench.gpu}}, {{bench.date}}) before any thread runs: the {{parts:,}} small "
        "launches pay it {{parts:,}} times, {{bench.launch_overhead_bare_numba.value:.0f}} ms "
        "for every thousand launches, where one big launch pays it once.", parts=parts)

# %% [markdown]
# ## 8. CuPy and PyTorch, without copies
#
# Device arrays from different libraries can share memory: Numba and CuPy both speak
# `__cuda_array_interface__`, PyTorch and CuPy both speak DLPack. A view costs no copy,
# and writes through one view are seen through the other. CuPy needs a real GPU (it
# imports without one and fails at the first array), so in the simulator this cell says so.

# %%
ok, why = device.cupy_usable()
if not ok:
    print(prose.shown("CuPy is not usable here ({{why}}); on a GPU this cell shares one buffer "
                      "between CuPy, Numba and PyTorch.", why=why))
else:
    import cupy as cp

    c = cp.arange(8, dtype=cp.float32)
    d = cuda.as_cuda_array(c)                    # a Numba view of CuPy's memory: no copy
    scale_kernel[1, 32](d, d, np.float32(10.0))  # Numba writes...
    print(prose.shown("CuPy sees: {{c}}", c=c))                     # ...CuPy sees it
    back = cp.asarray(d)                         # a CuPy view of Numba's array: no copy
    print(prose.shown("same memory: {{ok}}", ok=back.data.ptr == c.data.ptr))
    try:
        import torch
    except ImportError:
        print(prose.shown("PyTorch is not installed: skipping the DLPack example."))
    else:
        t = torch.from_dlpack(c)                 # DLPack: a PyTorch tensor, same memory
        t += 1
        print(prose.shown("PyTorch added 1, CuPy sees: {{c}} | same pointer: {{ok}}", c=c,
                          ok=t.data_ptr() == c.data.ptr))

# %% [markdown]
# ## 9. When offloading pays
#
# Moving data costs time whatever the GPU does with it. A small model: the GPU needs
# `bytes / link bandwidth + flops / GPU throughput` (plus a launch), the CPU needs the
# larger of `bytes / host memory bandwidth` and `flops / CPU throughput`. The ratio
# flops per byte is the *arithmetic intensity*. The model's GPU figures
# (`transfer.Machine.h200()`) are the NVIDIA H200's: cuBLAS *SGEMM* (single-precision general
# matrix multiply: the float32 matmul of cuBLAS, NVIDIA's linear-algebra library) at
# {{bench.ceiling.cublas_sgemm_tflop_s:.1f}} TFLOP/s (the course's benchmark of {{bench.date}})
# and pinned host-to-device copies of {{const.transfer.H200_PINNED_H2D_GB_S}} GB/s (section 3,
# measured on {{const.transfer.H200_H2D.date}}). The CPU
# figures ({{const.transfer.CPU_GB_S}} GB/s, {{const.transfer.CPU_TFLOP_S:.0f}} TFLOP/s) are
# round assumptions for one server socket.

# %%
machine = transfer.Machine.h200()  # the figures, with their sources: cudacourse.kernels.transfer
model = transfer.offload_times(np.logspace(-2, 4, 200), nbytes=1e9, machine=machine)
break_even = transfer.break_even_intensity(1e9, machine)
viz.plot_offload(model, title=viz.T("1 GB of data on the host: CPU against GPU with copies"),
                 break_even=break_even)
plt.show()
print(prose.shown("the model's machine: {{m}}", m=machine.describe()))
print(prose.shown("break-even: {{x:.1f}} FLOP per byte", x=break_even))

# %%
quiz.ask("03_memory.offload")

# %% [solution] id=answer_offload
# Question 6: Whether offloading an add pays. Answer as: answer_offload = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_offload = "d"
### END SOLUTION

# %% [tests] id=test_answer_offload points=1
quiz.grade("03_memory.offload", answer_offload)

# %% [markdown]
# Element-wise work (a float32 add: 1 FLOP per 12 bytes) stays far below the
# break-even point:
# transfer-bound, it is faster on the CPU unless the data already lives on the GPU.
# Matrix multiplication of large matrices does hundreds of FLOP per byte: compute-bound,
# it pays many times over. That is why real programs move data to the GPU once and keep
# it there through many kernels.

# %% [markdown]
# ## Summary
#
# * The lifecycle: `cuda.device_array` / `cuda.to_device` (cudaMalloc, cudaMemcpy),
#   launch, `copy_to_host`, drop the reference (cudaFree).
# * NumPy arrays passed to a kernel are copied in and out on every launch: pass device
#   arrays.
# * Pinned host memory copies several times faster, and only it copies asynchronously.
# * Keep data on the device between launches; allocate buffers once and reuse them.
# * Streams overlap copies with kernels: pinned memory, separate buffers per stream,
#   synchronize before reading.
# * Each launch from Python costs tens of microseconds: fewer, bigger launches.
# * Offloading pays when the arithmetic intensity is high or the data stays on the device.
#
# ## Further exercises
#
# 1. Measure device-to-host bandwidth with `transfer.bandwidth_sweep(sizes, "D2H")`. Is it
#    symmetric with host to device on your GPU?
# 2. Run `transfer.pipelined_scale` with 1, 2, 4 and 8 streams on a GPU and plot the total
#    time. Where does adding streams stop helping, and why (how many copy engines)?
# 3. Make `smooth_step` do two steps per launch with shared memory (lesson 4) and count
#    how the launch count changes the time for a thousand steps.
# 4. Time `transfer.mapped_scale` against `gpu_scale` for sizes from 1 KiB to 1 GiB.
#    Where does zero-copy win?
# 5. Put your own CPU's figures into `transfer.Machine` and find the break-even intensity.
