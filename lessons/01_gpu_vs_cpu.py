# %% [markdown]
# # Lesson 1: GPU vs CPU
#
# Why would anyone write code for a graphics card? In this lesson you will
#
# 1. see how a GPU differs from a CPU: thousands of simple cores against a few complex ones,
#    throughput against latency;
# 2. meet CUDA's programming model and the ways to reach it from Python;
# 3. write your first *kernel* (a function that the GPU runs in many threads at once), a
#    vector add, and have it checked;
# 4. time NumPy, Numba on the CPU and your kernel across sizes, and see where the time goes.
#
# Run the cells from top to bottom. Cells marked *YOUR CODE HERE* are yours to fill in; the
# cells after them check your work.

# %% [readonly] id=setup
import cudacourse
cudacourse.setup()  # first: a real GPU or the CUDA simulator, chosen before numba.cuda loads
import cudacourse.check
from cudacourse.course import quiz, prose
from cudacourse.kernels import cpu_vs_gpu
from cudacourse.runtime import device
from cudacourse import bench

import inspect
import numpy as np
import matplotlib.pyplot as plt
from numba import cuda

# %% [markdown]
# The line printed above tells you where your kernels run. On a machine with an NVIDIA GPU
# they run on it. Without one, they run in **Numba's CUDA simulator**: the same Python code,
# executed by ordinary CPU threads, one simulated GPU thread at a time. The simulator is
# thousands of times slower than a GPU (about
# {{const.hardware.SIMULATOR_THREADS_PER_SECOND:,}} GPU threads per second on a 2-core laptop), so this notebook uses smaller sizes there, and its timings say nothing about GPU
# speed. A kernel that is correct on a GPU is correct in the simulator; the other way round
# is not guaranteed: the simulator lets through some mistakes a GPU punishes (it runs one
# thread at a time, so many races never show, and it does not compile the kernel for the
# GPU, so some type errors appear only there). The checkers add the GPU's own limits and
# poison memory to catch what they can; run the notebook on a GPU once to be sure.

# %%
choice = device.current()
print(prose.shown("mode: {{mode}} | {{reason}}", mode=choice.mode,
                  reason=cudacourse.i18n.shown(choice.reason)))
if choice.gpu:
    print(choice.gpu.describe())

# %%
quiz.ask("01_gpu_vs_cpu.throughput")

# %% [solution] id=answer_throughput
# Question 1: What a GPU is built for. Answer as: answer_throughput = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_throughput = "a"
### END SOLUTION

# %% [tests] id=test_answer_throughput points=1
quiz.grade("01_gpu_vs_cpu.throughput", answer_throughput)

# %% [markdown]
# ## 1. Two kinds of processor
#
# A CPU core is built to finish **one** stream of instructions as fast as possible: deep
# pipelines, branch prediction, out-of-order execution and large caches all serve the
# *latency* of a single thread. A desktop CPU has a handful to a few dozen such cores.
#
# A GPU spends its transistors differently: many small cores, little cache per core, and a
# huge number of threads resident at once. An RTX 4090 has
# {{const.hardware.RTX_4090.cuda_cores:,}} CUDA cores (FP32 lanes) grouped into
# {{const.hardware.RTX_4090.sms}} *streaming multiprocessors* (SMs, the GPU's cores: each
# schedules and runs its own threads); a data-centre H200 has {{const.hardware.H200.sms}} SMs
# of {{const.hardware.H200.fp32_lanes_per_sm}} FP32 lanes each. One GPU thread is slow. What makes the GPU fast is **throughput**: when a group of
# threads waits hundreds of cycles for memory, the SM switches to another group that is
# ready, so the waiting is hidden rather than avoided.
#
# | | CPU core | GPU SM |
# |---|---|---|
# | optimised for | latency of one thread | throughput of thousands |
# | threads in flight | 1 to 2 per core | up to {{const.occupancy.H200_SM.max_warps*32:,.0f}} per SM (H200) |
# | cache per thread | large | tiny |
# | good at | branchy, serial logic | the same operation on lots of data |
#
# The rule of thumb that follows: a GPU pays off when there is a lot of **independent,
# uniform** work, and when the data can stay on the GPU for long enough to amortise moving it.

# %% [markdown]
# ## 2. CUDA's model, and three ways to reach it from Python
#
# In CUDA the CPU is the **host** and the GPU the **device**, each with its own memory. The
# host copies data to the device, launches a **kernel** (a function that runs on the
# device) over a **grid** of **blocks**, each block a group of **threads**, and copies the
# results back. Every thread runs the same kernel code; it finds its own piece of the work
# from its coordinates in the grid.
#
# From Python there are three main routes:
#
# - **Numba** (`numba-cuda`): write kernels in Python syntax with `@cuda.jit`; Numba compiles
#   them to GPU machine code. This course uses it, because you see and control every thread.
# - **CUDA Python** (`cuda.bindings`, `cuda.core`): NVIDIA's direct bindings to the driver and
#   runtime APIs, for when you need the raw API (Numba itself is built on them).
# - **CuPy**: a NumPy-compatible array library on the GPU. `c = a + b` runs a ready-made kernel;
#   `cupy.RawKernel` and `cupy.ElementwiseKernel` accept CUDA C++ source when you need more.
#
# An array library is the right first tool. Writing kernels pays off when no library call
# does what you need, or when fusing several steps into one kernel saves memory traffic
# (lesson 5 is built on that).

# %%
n_demo = device.pick(sim=1_500, gpu=10_000_000)  # not question 2's 1,000: work that out yourself
rng = np.random.default_rng(0)
a = rng.standard_normal(n_demo, dtype=np.float32)
b = rng.standard_normal(n_demo, dtype=np.float32)
c_numpy = a + b  # NumPy: the CPU, one line

usable, why = device.cupy_usable()
if usable:
    import cupy as cp
    c_cupy = cp.asarray(a) + cp.asarray(b)  # CuPy: the GPU, still one line
    print(prose.shown("CuPy agrees with NumPy: {{ok}}",
                      ok=np.allclose(cp.asnumpy(c_cupy), c_numpy)))
else:
    print(prose.shown("CuPy is not available here: {{why}}", why=why))

# %% [markdown]
# ## 3. Your first kernel
#
# Here is the vector add from the `cudacourse` package, the same code its tests check:

# %%
print(inspect.getsource(cudacourse.kernels.vector._vector_add.py_func))

# %% [markdown]
# Read it line by line:
#
# - `@cuda.jit` makes it a kernel: called from the host, run on the device by every thread.
# - `cuda.grid(1)` is this thread's global index, `blockIdx.x * blockDim.x + threadIdx.x`.
# - The grid is made of whole blocks, so it usually has a few more threads than elements.
#   The **bounds guard** `if i < out.shape[0]` keeps those extra threads from reading and
#   writing past the end of the arrays. On a GPU nothing else stops them.
# - A kernel returns nothing: it writes its results into an output array.
#
# It is launched with the grid size in square brackets, `kernel[blocks, threads](args)`.
# Before the launch below, work out the grid for a small case yourself:

# %%
quiz.ask("01_gpu_vs_cpu.blocks")

# %% [solution] id=answer_blocks
# Question 2: Blocks for 1,000 elements. Answer as: answer_blocks = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_blocks = "c"
### END SOLUTION

# %% [tests] id=test_answer_blocks points=1
quiz.grade("01_gpu_vs_cpu.blocks", answer_blocks)

# %%
threads = 256
blocks = (n_demo + threads - 1) // threads  # round up: every element gets a thread
d_a, d_b = cuda.to_device(a), cuda.to_device(b)  # copy in
d_out = cuda.device_array_like(d_a)  # allocate the output on the device
cudacourse.kernels.vector._vector_add[blocks, threads](d_a, d_b, d_out)  # launch
print(prose.shown("{{blocks}} blocks x {{threads}} threads = {{total}} threads for {{n}} elements",
                  blocks=blocks, threads=threads, total=blocks * threads, n=n_demo))
print(prose.shown("matches NumPy: {{ok}}",  # copy back, compare
                  ok=np.allclose(d_out.copy_to_host(), c_numpy)))

# %% [markdown]
# ## Exercise 1: write `vector_add`
#
# Write the kernel `vector_add(a, b, out)` so that `out[i] = a[i] + b[i]` for every element.
# Write it yourself rather than copying the one above: compute the index from `cuda.threadIdx.x`,
# `cuda.blockIdx.x` and `cuda.blockDim.x`.
#
# The checker launches your kernel itself, several times: with random inputs whose length is
# not a multiple of the block size, with several block sizes, and with one block more than
# needed. It fills `out` with NaN first (so an element you never write shows up), and puts
# guard zones around the arrays (so a write past the end is caught). When something is wrong
# it tells you what and the likely cause.

# %% [solution] id=vector_add
@cuda.jit
def vector_add(a, b, out):
    ### BEGIN SOLUTION
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < out.shape[0]:
        out[i] = a[i] + b[i]
    ### END SOLUTION

# %% [tests] id=test_vector_add points=3
cudacourse.check.check_vector_add(vector_add)
### BEGIN HIDDEN TESTS
cudacourse.check.check_vector_add(vector_add, hidden=cudacourse.check.Cases(
    seed=731904265, sizes=[(1601, 64), (113, 96), (650, 512)]))
### END HIDDEN TESTS

# %% [markdown]
# Curious what a mistake looks like? Here is the kernel without its bounds guard; the checker
# names the bug instead of crashing somewhere else later:

# %%
@cuda.jit
def vector_add_no_guard(a, b, out):
    i = cuda.grid(1)
    out[i] = a[i] + b[i]

try:
    cudacourse.check.check_vector_add(vector_add_no_guard)
except AssertionError as err:
    print(prose.shown("rejected: {{why}}", why=err))

# %%
quiz.ask("01_gpu_vs_cpu.spare_threads")

# %% [solution] id=answer_spare_threads
# Question 3: Threads past the end. Answer as: answer_spare_threads = <a number>, within 0.5
### BEGIN SOLUTION
answer_spare_threads = 24
### END SOLUTION

# %% [tests] id=test_answer_spare_threads points=1
quiz.grade("01_gpu_vs_cpu.spare_threads", answer_spare_threads)

# %%
quiz.ask("01_gpu_vs_cpu.global_index")

# %% [solution] id=answer_global_index
# Question 4: A thread's global index. Answer as: answer_global_index = <a number>, within 0.5
### BEGIN SOLUTION
answer_global_index = 677
### END SOLUTION

# %% [tests] id=test_answer_global_index points=1
quiz.grade("01_gpu_vs_cpu.global_index", answer_global_index)

# %% [markdown]
# ## 4. Timing CPU against GPU
#
# Now the same operation four ways, across sizes:
#
# - **NumPy** on one CPU core;
# - **Numba on the CPU** with `@njit(parallel=True)`, the loop split across all cores;
# - the **GPU kernel alone** (timed with CUDA events, which measure the device itself);
# - the **GPU including copies**: host to device, kernel, device to host.
#
# Each figure is the median of several runs after a warm-up run (the first call of a Numba
# function compiles it, which takes a fraction of a second).

# %%
quiz.ask("01_gpu_vs_cpu.transfers")

# %% [solution] id=answer_transfers
# Question 5: Where the time goes. Answer as: answer_transfers = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_transfers = "d"
### END SOLUTION

# %% [tests] id=test_answer_transfers points=1
quiz.grade("01_gpu_vs_cpu.transfers", answer_transfers)

# %%
timings = cpu_vs_gpu.measure()
print(timings.table())

# %%
cpu_vs_gpu.plot(timings)
plt.show()

# %% [markdown]
# How to read the plot, on a GPU:
#
# - For small arrays everything is dominated by fixed costs: a kernel launch from Python costs
#   tens of microseconds, more than adding a few thousand numbers on the CPU.
# - For large arrays the kernel alone is many times faster than the CPU: it streams memory at
#   terabytes per second, where the CPU manages tens of gigabytes per second.
# - But once the copies over *PCIe* (PCI Express, the bus between the host and a plug-in
#   GPU) are counted, the GPU total can be *slower* than the CPU for
#   an operation this simple: each element does one addition and crosses the bus three times.
#   GPUs win when data stays on the device for many operations.
#
# In the simulator the "GPU" lines are Python threads doing the work one element at a time:
# they are slow, and that says nothing about a real GPU. The Numba-CPU line can jump too
# (from microseconds to milliseconds between neighbouring sizes): on a small or shared
# machine, starting its worker threads and competing with other processes cost more than
# the additions. Run this notebook on a machine with an NVIDIA GPU to see real numbers.

# %%
s = timings.seconds
biggest = -1
copies = s["gpu_copy_in"][biggest] + s["gpu_copy_out"][biggest]
print(prose.shown("at n = {{n:,}}: kernel {{kernel:.3f}} ms, copies {{copies:.3f}} ms, NumPy "
                  "{{numpy:.3f}} ms", n=timings.sizes[biggest],
                  kernel=s["gpu_kernel"][biggest] * 1e3, copies=copies * 1e3,
                  numpy=s["numpy"][biggest] * 1e3))
if device.is_simulator():
    # The simulator's kernel is Python emulating every thread, so its ratio says nothing:
    # the GPU's, from the course's benchmark (kernel) and the H200's measured link (copies).
    prose.show(
        "In the simulator the kernel is Python emulating every thread, so the ratio here says "
        "nothing. On the {{bench.gpu}} ({{bench.date}}) the vector add kernel moved "
        "{{bench.vector_add.bytes / 1e9:.1f}} GB in {{bench.vector_add.median_ms:.2f}} ms; "
        "the same bytes over the link from NumPy (pageable) memory, at the "
        "{{const.transfer.H200_PAGEABLE_H2D_GB_S}} GB/s measured there on "
        "{{const.transfer.H200_H2D.date}}, take {{bench.vector_add.bytes / "
        "const.transfer.H200_PAGEABLE_H2D_GB_S / 1e6:,.0f}} ms: the copies cost about "
        "{{bench.vector_add.gb_s / const.transfer.H200_PAGEABLE_H2D_GB_S:,.0f}} times the "
        "kernel's time.")
else:
    print(prose.shown("the copies are {{ratio:.1f}}x the kernel's time",
                      ratio=copies / s["gpu_kernel"][biggest]))

# %%
quiz.ask("01_gpu_vs_cpu.bytes_moved")

# %% [solution] id=answer_bytes_moved
# Question 6: Bytes a vector add moves. Answer as: answer_bytes_moved = <a number of GB>, within 0.05
### BEGIN SOLUTION
answer_bytes_moved = 1.2
### END SOLUTION

# %% [tests] id=test_answer_bytes_moved points=1
quiz.grade("01_gpu_vs_cpu.bytes_moved", answer_bytes_moved)


# %% [markdown]
# ## 5. How fast can a vector add go?
#
# As you just computed, a vector add moves 12 bytes for each addition: it is
# **memory-bound**. Its speed limit is the GPU's memory bandwidth, and the honest way to
# measure that limit is a plain device-to-device copy in the same run. The package has several
# variants of the kernel:
#
# - `simple`: one element per thread, as you wrote it;
# - `grid_stride`: a fixed, smaller grid (a few times as many blocks as the SMs can hold at
#   once), each thread looping over the array in steps of the whole grid, as lesson 2 shows.
#   Neighbouring threads still touch neighbouring addresses, which lets the hardware merge
#   their loads into a few wide memory transactions (*coalescing*, lesson 4);
# - `ilp` (instruction-level parallelism) and `vec4` (four float32 loaded by one 16-byte
#   instruction): each thread starts several loads *before* using any of them. The GPU hides
#   memory latency by having many loads in flight; more independent loads per thread means
#   more bytes in flight with the same number of threads.
#
# A profiler such as Nsight Compute (`ncu --set full python script.py`) would report the
# simple kernel's memory throughput below the copy's, with threads mostly stalled waiting for
# their loads (Nsight calls that stall "long scoreboard"); the multi-element variants keep
# more bytes in flight per stall.

# %%
if device.is_simulator():
    print(prose.shown("Bandwidth needs a real GPU: in the simulator every 'GPU thread' is a "
                      "Python call, so GB/s figures would be meaningless. Here the variants are "
                      "tested for correctness:"))
    for v in cudacourse.kernels.vector.VARIANTS:
        x = rng.standard_normal(777, dtype=np.float32)
        ok = np.allclose(cudacourse.kernels.vector.vector_add(x, x, variant=v), 2 * x)
        print(prose.shown("  {{variant:<12}} correct: {{ok}}", variant=v, ok=ok))
    # the picture from the course's committed GPU run instead (docs/benchmarks.json)
    report = bench.committed_report()
    bw = {"copy": bench.figure(report, "copy", "gb_s")}
    bw.update({v: bench.figure(report, "vector_add" if v == "simple" else f"vector_add_{v}",
                               "gb_s") for v in ("simple", "grid_stride", "ilp", "vec4")})
    if None in bw.values():  # this course has no GPU run: no figures rather than others'
        print(prose.shown("No committed GPU figures in this course (docs/benchmarks.json): "
                          "`cudacourse bench` on a GPU makes them."))
        bw = {}
    else:
        where = prose.shown("{{gpu}}, docs/benchmarks.json of {{date}}",
                            gpu=report["environment"]["gpu"], date=report["date"][:10])
else:
    bw = cpu_vs_gpu.variant_bandwidth()
    where = prose.shown("measured in this run")
if bw:
    for name, gbs in bw.items():
        print(prose.shown("{{name:<12}} {{gbs:8.0f}} GB/s   {{share:.2f}} of the copy ({{where}})",
                          name=name, gbs=gbs, share=gbs / bw["copy"], where=where))
    plt.figure(figsize=(7, 3.5))
    plt.barh(list(bw), [g / bw["copy"] for g in bw.values()])
    plt.axvline(1.0, color="k", lw=1)
    from cudacourse.viz import words  # the plot's words in the course's language
    plt.xlabel(words.T("fraction of device-to-device copy bandwidth ({copy:,.0f} GB/s)",
                       copy=bw["copy"]))
    plt.ylabel(words.T("variant"))
    plt.title(words.T("vector add variants ({where})", where=where))
    plt.show()

# %% [markdown]
# ## Summary
#
# - A GPU trades single-thread speed for throughput: thousands of threads, with memory latency
#   hidden by switching between them.
# - A CUDA kernel runs once per thread; each thread computes its global index
#   (`cuda.grid(1)`) and must check it against the array length, because grids come in whole
#   blocks.
# - Launch configuration: `blocks = ceil(n / threads)`, `kernel[blocks, threads](...)`.
# - For simple element-wise work, the copies between host and device cost more than the
#   kernel: keep data on the GPU. Such kernels are memory-bound; measure them against the
#   copy bandwidth, not against peak FLOP/s.
# - An array library (CuPy) is the first tool; hand-written kernels are for what it cannot do
#   or cannot do in one pass.
#
# ## Further exercises
#
# 1. Write `saxpy(alpha, x, y, out)` computing `alpha * x + y`, and check it against NumPy on
#    sizes that are not multiples of your block size.
# 2. Change the block size of the demo launch to 32, 128 and 1024. What is the largest a GPU
#    accepts? (Try 2048 with `cudacourse.check._engine.validate_launch(8, 2048)`.)
# 3. Time `cudacourse.vector.vector_add` with NumPy inputs (copies included) against device
#    inputs (`cuda.to_device` once, then many launches). How many launches does the copy pay for?
# 4. On a GPU, extend `cpu_vs_gpu.measure` to `float64`. Which gets slower, the kernel or the
#    copies, and by how much?
