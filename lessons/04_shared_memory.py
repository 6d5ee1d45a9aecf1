# %% [markdown]
# # Lesson 4: shared memory and tiling
#
# Global memory (*HBM*, high-bandwidth memory: the DRAM stacked beside the GPU chip) is large and far away: hundreds of cycles per access. Every SM also
# has a small **shared memory** on the chip
# ({{const.occupancy.H200_SM.shared_memory/1024:.0f}} KB per SM on an H200, compute capability
# {{bench.compute_capability}}, of which one block may use up to
# {{const.occupancy.H200_SM.max_shared_per_block/1024:.0f}} KB). It is far faster than global memory, though
# slower than a register, and a block's shared memory is visible to all threads of the
# block and to no other block.
#
# In this lesson:
#
# 1. shared memory and `cuda.syncthreads()`: what a *barrier* (a point that every thread of
#    the block reaches before any goes past it) protects, and a missing one;
# 2. matrix multiply in three steps (one thread per output, shared-memory tiles, register
#    blocking), each measured and placed on a roofline; **you write the tiled kernel**;
# 3. reductions: a tree in shared memory (**you write it**), warp shuffles, a single pass;
# 4. transpose: shared memory makes both reads and writes coalesced; *bank conflicts* (threads
#    of a warp queueing for the same slice of shared memory, section 4) and
#    the padding that removes them.
#
# Run the cells in order. In the simulator, sizes are tiny and **timings mean nothing**
# (the CPU pretends to be thousands of GPU threads); on a GPU the same cells measure real
# numbers at run time.

# %% [readonly] id=setup
import cudacourse
cudacourse.setup()  # first: a real GPU or the CUDA simulator, chosen before numba.cuda loads
from cudacourse.course import quiz
import cudacourse.check
import math
import time
import numpy as np
from numba import cuda, float32
import matplotlib.pyplot as plt
from cudacourse.runtime import device
from cudacourse.kernels import matmul, reduce, transpose
from cudacourse.course import prose
from cudacourse.viz import tiling as viz

SIM = device.is_simulator()
TILE = 16  # tile size of the matmul exercise
TPB = 128  # threads per block of the block-sum exercise

# %% [markdown]
# A small timing helper. On a GPU it uses CUDA events (the GPU's own clock) and reports
# the median of several runs after a warm-up run (the first run also compiles the
# kernel). In the simulator it runs once: the number is shown only so the cells work.


# %%
def median_time(fn, reps=None):
    """Median seconds of fn() (CUDA events on a GPU; one wall-clock run in the simulator)."""
    if SIM:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t
    reps = reps or 10
    fn()
    cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = cuda.event(timing=True), cuda.event(timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop) / 1e3)
    return float(np.median(times))


# %% [markdown]
# ## 1. Shared memory and barriers
#
# `cuda.shared.array(shape, dtype)` declares an array that exists once **per block**; its
# shape must be a constant known when the kernel compiles. Threads of a block communicate
# through it: one thread writes a slot, another reads it. That needs an order: the reader
# must wait until the writer has written. `cuda.syncthreads()` is that wait, a **barrier**:
# no thread of the block passes it until every thread of the block has reached it.
#
# The smallest example: each block reverses its own chunk of the array. Thread `t` writes
# slot `t` and reads slot `TPB - 1 - t`, which *another* thread wrote.

# %%
@cuda.jit
def reverse_blocks(x, out):
    """Reverse each TPB-element chunk of x, through shared memory."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i]
    cuda.syncthreads()  # wait until every thread of the block has stored its element
    out[i] = sh[TPB - 1 - t]  # read an element another thread stored


@cuda.jit
def reverse_blocks_no_barrier(x, out):
    """The same, without the barrier: a race."""
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    sh[t] = x[i]
    out[i] = sh[TPB - 1 - t]  # may run before the other thread has stored its element


# %% [markdown]
# Run both on two blocks. In the simulator the demo fills new shared memory with `1e30`
# (as the checkers do), so a slot read before it was written stands out. On a GPU the
# race shows up or not depending on timing: the 4 warps of a block run in an order you do
# not control, and a missing barrier can pass a test a thousand times and fail the next.

# %%
x = np.arange(2 * TPB, dtype=np.float32)
want = x.reshape(2, TPB)[:, ::-1].ravel()
with cudacourse.check.kit.poisoned_shared():
    for kernel in (reverse_blocks, reverse_blocks_no_barrier):
        out = cuda.device_array_like(x)
        kernel[2, TPB](cuda.to_device(x), out)
        wrong = int(np.sum(out.copy_to_host() != want))
        print(prose.shown("{{kernel:28s}} {{wrong:4d}} of {{n}} elements wrong",
                          kernel=kernel.__name__, wrong=wrong, n=x.size))

# %% [markdown]
# Two rules follow:
#
# * a barrier goes **between a write and a read by another thread** (and between a read
#   and the next overwrite of the same slot);
# * every thread of the block must reach the same barriers: a `syncthreads()` inside an
#   `if` that some threads skip is undefined behaviour (it hangs, or worse).

# %%
quiz.ask("04_shared_memory.race_lines")

# %% [solution] id=answer_race_lines
# Question 1: Pick the lines that race. Answer as: answer_race_lines = "<letters>", every one of a, b, c, d, e that applies, separated by commas
### BEGIN SOLUTION
answer_race_lines = "d, e"
### END SOLUTION

# %% [tests] id=test_answer_race_lines points=1
quiz.grade("04_shared_memory.race_lines", answer_race_lines)

# %% [markdown]
# ## 2. Matrix multiply, step by step
#
# $C = AB$ with $A$ of shape (m, k) and $B$ (k, n): $2mkn$ floating-point operations.
#
# **Step 1, one thread per output** (`matmul._matmul_naive`): thread (row, col) reads a
# row of A and a column of B, `k` elements each, from global memory. Every element of A is
# read `n` times (once per output column), every element of B `m` times. Each multiply-add
# needs two loads: the arithmetic waits on memory. How the threads of a warp are laid over
# the output matters as much: `cuda.threadIdx.x` runs along the columns, so at each step of
# k the 32 lanes of a warp read one value of A (a broadcast) and 32 neighbouring values of a
# row of B (one 128-byte transaction), and write 32 neighbouring values of C. With x along
# the rows instead, every lane reads its own row of A, 32 cache lines per load, and the
# stores scatter too: several times slower, with the same reuse, which is none. The version
# with x along the columns (`matmul._matmul_naive`) multiplied 4096 x 4096 matrices at
# {{bench.matmul_naive.tflop_s:.2f}} TFLOP/s on the {{bench.gpu}} ({{bench.date}}).
#
# **Step 2, shared-memory tiles**: a block of TILE x TILE threads computes a TILE x TILE
# tile of C. It walks along k one tile at a time: the block loads a TILE x TILE tile of A
# and one of B into shared memory (one element per thread), waits, and every thread does
# TILE multiply-adds from shared memory. Each global element is now read `n / TILE` times.

# %%
fig = viz.plot_reads(n=4096, tiles=(16, 32, 64, 128))

# %%
quiz.ask("04_shared_memory.barrier_purpose")

# %% [solution] id=answer_barrier_purpose
# Question 2: The second barrier of the tiled matmul. Answer as: answer_barrier_purpose = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_barrier_purpose = "c"
### END SOLUTION

# %% [tests] id=test_answer_barrier_purpose points=1
quiz.grade("04_shared_memory.barrier_purpose", answer_barrier_purpose)

# %% [markdown]
# ### Exercise: the tiled matmul
#
# Write `tiled_matmul(a, b, c)`, launched with blocks of `(TILE, TILE)` threads and a grid
# of `(ceil(n / TILE), ceil(m / TILE))` blocks: `cuda.threadIdx.x` runs along the columns
# of c (neighbouring threads read neighbouring addresses of b and write neighbouring
# addresses of c), `cuda.threadIdx.y` along the rows.
#
# 1. declare two `(TILE, TILE)` float32 shared arrays;
# 2. for each tile `t` of k (`math.ceil(k / TILE)` of them): each thread loads
#    `a[row, t*TILE + tx]` and `b[t*TILE + ty, col]`, or **`0.0` outside the matrices** (the
#    shapes are not multiples of TILE); barrier; accumulate `TILE` products; barrier;
# 3. write `c[row, col]` if it is inside c.
#
# The checker tries shapes that are not tile multiples, watches every thread's shared-memory
# reads and writes between barriers (a slot one thread reads while another may still be
# writing it is a race, whatever order the threads happened to run in), and counts your
# global reads: a kernel without tiles is refused even when its numbers are right.

# %% [solution] id=tiled_matmul
@cuda.jit
def tiled_matmul(a, b, c):
    ### BEGIN SOLUTION
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    row = cuda.blockIdx.y * TILE + ty
    col = cuda.blockIdx.x * TILE + tx
    m, k = a.shape
    n = b.shape[1]
    acc = float32(0.0)
    for t in range(0, k, TILE):
        sa[ty, tx] = a[row, t + tx] if row < m and t + tx < k else float32(0.0)
        sb[ty, tx] = b[t + ty, col] if t + ty < k and col < n else float32(0.0)
        cuda.syncthreads()  # the whole tile is loaded
        for i in range(TILE):
            acc += sa[ty, i] * sb[i, tx]
        cuda.syncthreads()  # everyone is done with this tile
    if row < m and col < n:
        c[row, col] = acc
    ### END SOLUTION

# %% [tests] id=test_tiled_matmul points=4
cudacourse.check.check_tiled_matmul(tiled_matmul)
### BEGIN HIDDEN TESTS
cudacourse.check.check_tiled_matmul(tiled_matmul, hidden=cudacourse.check.Cases(
    seed=375019286, sizes=[(23, 41, 7, 1), (15, 22, 18, 0), (6, 49, 9, 0)]))
### END HIDDEN TESTS

# %%
quiz.ask("04_shared_memory.tile_reads")

# %% [solution] id=answer_tile_reads
# Question 3: Global loads of B in the tiled matmul. Answer as: answer_tile_reads = <a number>, within 0.5
### BEGIN SOLUTION
answer_tile_reads = 32
### END SOLUTION

# %% [tests] id=test_answer_tile_reads points=1
quiz.grade("04_shared_memory.tile_reads", answer_tile_reads)

# %%
quiz.ask("04_shared_memory.smem_blocks")

# %% [solution] id=answer_smem_blocks
# Question 4: Blocks per SM with 32 x 32 tiles. Answer as: answer_smem_blocks = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_smem_blocks = "a"
### END SOLUTION

# %% [tests] id=test_answer_smem_blocks points=1
quiz.grade("04_shared_memory.smem_blocks", answer_smem_blocks)

# %% [markdown]
# **Step 3, register blocking.** With 16 x 16 tiles every multiply-add still needs two
# shared-memory reads, and shared memory delivers one 32-word request per clock per SM
# while the SM can issue four warps' worth of multiply-adds: the tiled kernel waits on
# shared memory. The fix is to give each thread a small grid of outputs: with 8 x 8
# outputs per thread, 8 values of A and 8 of B read from shared memory feed 64
# multiply-adds held in registers (`cuda.local.array` indexed only by constants, in loops
# Numba unrolls, ends up in registers). Bigger block tiles (128 x 128) also read each
# global element fewer times. `cudacourse.matmul` has these steps:
#
# | variant | block tile | outputs per thread | threads per block |
# | --- | --- | --- | --- |
# | `naive` | 16 x 16 | 1 | 256 |
# | your `tiled_matmul` | 16 x 16, shared | 1 | 256 |
# | `register` | 64 x 64, shared | 4 x 4 | 256 |
# | `register128` | 128 x 128, shared, A stored transposed | 8 x 8 | 256 |
# | `register128x256` | 128 x 256, shared | 8 x 16 | 256 |
# | `register128x256v4` | the same, 16-byte shared loads (*`ld.shared.v4.f32`*, the instruction of *PTX*, the virtual instruction set Numba compiles to, that loads 4 float32 from shared memory at once) | 8 x 16 | 256 |
#
# Read `src/cudacourse/matmul.py` for the details (unsigned indices, a prefetch of the
# next tile into registers during the math, a register cap so two blocks fit on an SM).
# Your kernel joins the comparison.

# %%
size = device.pick(sim=32, gpu=4096)
g = np.random.default_rng(0)
a = cuda.to_device(g.standard_normal((size, size)).astype(np.float32))
b = cuda.to_device(g.standard_normal((size, size)).astype(np.float32))
c = cuda.device_array((size, size), np.float32)
# The reference on the CPU: every row in the simulator, 64 spread rows at 4096 (a full
# float64 product on the CPU would take longer than all the GPU runs together).
rows = np.unique(np.linspace(0, size - 1, min(size, 64)).astype(int))
want = a.copy_to_host()[rows].astype(np.float64) @ b.copy_to_host()
flop = matmul.flops(size, size, size)
tflops = {}
grid = (math.ceil(size / TILE), math.ceil(size / TILE))
steps = [("naive", lambda: matmul.matmul(a, b, out=c, variant="naive")),
         ("your tiled_matmul", lambda: tiled_matmul[grid, (TILE, TILE)](a, b, c))]
steps += [(v, lambda v=v: matmul.matmul(a, b, out=c, variant=v))
          for v in matmul.MATMUL_VARIANTS if v != "naive"]
for name, run in steps:
    try:
        t = median_time(run, reps=3 if name == "naive" else 10)
        assert np.allclose(c.copy_to_host()[rows], want, rtol=1e-3, atol=1e-3), "wrong result"
    except Exception as exc:  # your kernel before the exercise is done
        print(prose.shown("{{name:18s}} skipped ({{error}}: {{why}})", name=name,
                          error=type(exc).__name__, why=exc))
        continue
    tflops[name] = flop / t / 1e12
    print(prose.shown("{{name:18s}} {{ms:9.3f}} ms  {{tflops:8.3f}} TFLOP/s", name=name,
                      ms=t * 1e3, tflops=tflops[name]))
if SIM:
    print(prose.shown("(simulator: these timings say nothing about a GPU)"))

# %% [markdown]
# cuBLAS, NVIDIA's tuned library, called through CuPy, sets the bar (GPU only).

# %%
ok, why = device.cupy_usable()
if ok:
    import cupy as cp

    ca, cb = cp.asarray(a), cp.asarray(b)
    t = median_time(lambda: cp.matmul(ca, cb))
    tflops["cuBLAS (CuPy)"] = flop / t / 1e12
    for name, v in tflops.items():
        print(prose.shown("{{name:18s}} {{tflops:8.2f}} TFLOP/s = {{share:.2f}} of cuBLAS",
                          name=name, tflops=v, share=v / tflops["cuBLAS (CuPy)"]))
else:
    print(prose.shown("cuBLAS comparison skipped: {{why}}", why=why))

# %% [markdown]
# ### The steps, as measured by the course's benchmark
#
# The cell below reads the course's committed run (`docs/benchmarks.json`, `cudacourse
# bench` on an NVIDIA H200, 4096^3 float32, cuBLAS and PyTorch measured in the same run).
# Each step removes what limited the one before: the naive kernel rereads A and B from
# global memory for every output; 16 x 16 shared tiles divide those reads by 16
# ({{bench.matmul_tiled.tflop_s / bench.matmul_naive.tflop_s:.1f}}x faster), but then every multiply-add needs two shared-memory reads; 4 x 4 and then 8 x 8
# outputs per thread (`register`, `register128`) feed 16 or 64 multiply-adds from 8 or 16
# values held in registers, and bigger block tiles (128 x 256) cut global reads again; the
# 16-byte shared loads (`register128x256v4`) issue a quarter of the load instructions.
# There it stops, at {{bench.ratio.matmul_best_vs_cublas:.2f}} of cuBLAS: the kernel needs so
# many registers per thread that one block of 256 threads (8 warps) runs per SM, and it waits
# at each barrier while its next tile is stored. Double-buffering the shared tiles (one
# barrier per step instead of two), 256 x 128 tiles, deeper k-slices and a register cap were
# all tried on the H200: none was faster (the comments of `cudacourse.matmul` record each).
# %%
from cudacourse import bench

STEPS = ("naive", "register", "register128", "register128x256", "register128x256v4")
report = bench.committed_report()
names = {v: f"matmul_{v}" for v in STEPS}
names.update(cublas_sgemm="cublas_sgemm", torch_matmul="torch_matmul")
rates = {k: bench.figure(report, n) for k, n in names.items()}
missing = [k for k, r in rates.items() if r is None]
if missing:  # one source for every figure: none rather than another file's
    print(prose.shown("No committed GPU figures for {{missing}} in this course "
                      "(docs/benchmarks.json): `cudacourse bench` on a GPU makes them.",
                      missing=missing))
else:
    print(f"{report['path']}: {report['environment'].get('gpu')}, {report['date'][:10]}")
    for k, r in rates.items():
        print(prose.shown("{{name:18s}} {{tflops:8.2f}} TFLOP/s = {{share:.2f}} of cuBLAS",
                          name=k, tflops=r, share=r / rates["cublas_sgemm"]))

# %% [markdown]
# ### A roofline
#
# A kernel is limited either by arithmetic (the flat roof: peak FLOP/s) or by memory
# traffic (the slope: bandwidth x **arithmetic intensity**, FLOP per byte moved from
# global memory). Tiles raise the intensity: a bm x bn output tile reads bm + bn floats
# per step of k and does 2 bm bn FLOP. The roof below uses this GPU's FP32 peak (SMs x 128
# lanes x 2 FLOP x clock) and a device-to-device copy measured now. (The intensities
# ignore the *L2 cache*, the GPU's last cache before its memory, shared by all SMs
# ({{const.hardware.H200.l2_mb}} MB on an H200), which absorbs part of the naive kernel's traffic.)

# %%
n_copy = device.pick(sim=4096, gpu=256 * 2**20)  # 1 GiB: a small copy under-reports
src = cuda.to_device(np.ones(n_copy, np.float32))
dst = cuda.device_array_like(src)
copy_bw = 2 * 4 * n_copy / median_time(lambda: dst.copy_to_device(src))  # bytes/s
if SIM:
    # the H200's roof (datasheet FP32 peak, the copy of the course's benchmark); the points
    # are meaningless here
    from cudacourse.course import prose
    peak = prose.value("const.hardware.H200.fp32_tflop_s")
    bw_tb = prose.value("bench.ceiling.copy_gb_s") / 1e3
else:
    dev = cuda.get_current_device()
    peak = dev.MULTIPROCESSOR_COUNT * 128 * 2 * dev.CLOCK_RATE * 1e3 / 1e12
    bw_tb = copy_bw / 1e12
tiles = {"naive": None, "your tiled_matmul": (TILE, TILE),
         "register": (64, 64), "register128": (128, 128), "register128x256": (128, 256),
         "register128x256v4": (128, 256)}
points = {k: (viz.matmul_intensity(tiles[k]), v) for k, v in tflops.items() if k in tiles}
fig = viz.plot_roofline(points, peak, bw_tb,
                        title=viz.T("matmul steps (simulator: illustrative only)") if SIM
                        else viz.T("matmul steps"))

# %% [markdown]
# ## 3. Reductions
#
# Summing n numbers in parallel is a tree: pairs, then pairs of pairs, log2(n) levels.
# Inside a block the tree lives in shared memory: TPB values, then TPB/2 threads each add
# two, then TPB/4, ... with a barrier between levels (each level reads the previous
# level's results, written by other threads).
#
# ### Exercise: the block sum
#
# Write `block_sum(x, partial)`, launched with `ceil(n / TPB)` blocks of `TPB` threads:
# block `b` stores the sum of `x[b*TPB : (b+1)*TPB]` in `partial[b]`.
#
# 1. each thread stores its element of x in a `TPB`-slot shared array (**`0.0` past the
#    end of x**), then a barrier;
# 2. `s = TPB // 2`; while `s > 0`: threads `t < s` add slot `t + s` into slot `t`;
#    barrier; `s //= 2`;
# 3. thread 0 writes slot 0 to `partial[cuda.blockIdx.x]`.

# %% [solution] id=block_sum
@cuda.jit
def block_sum(x, partial):
    ### BEGIN SOLUTION
    sh = cuda.shared.array(TPB, float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    sh[t] = x[i] if i < x.shape[0] else float32(0.0)
    cuda.syncthreads()  # every slot is stored
    s = TPB // 2
    while s > 0:
        if t < s:
            sh[t] += sh[t + s]
        cuda.syncthreads()  # this level is done before the next one reads it
        s //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = sh[0]
    ### END SOLUTION

# %% [tests] id=test_block_sum points=3
cudacourse.check.check_block_sum(block_sum)
### BEGIN HIDDEN TESTS
cudacourse.check.check_block_sum(block_sum, hidden=cudacourse.check.Cases(
    seed=129846573, sizes=[262, 1, 190]))
### END HIDDEN TESTS

# %% [markdown]
# The tree leaves one value per block; a second launch of one block reduces those. Two
# further steps, in `cudacourse.reduce`:
#
# * **warp shuffles** (`warp_shuffle`): the 32 threads of a warp swap register values with
#   `cuda.shfl_down_sync(mask, value, offset)`, so the first five levels of the tree need
#   neither shared memory nor barriers; only one value per warp goes through shared memory;
# * **a single pass** (`single_pass`): each thread keeps 16 independent accumulators (16
#   loads in flight instead of one), the block reduces with shuffles, and thread 0 adds
#   the block's result to the total with one `cuda.atomic.add`: no second launch. The
#   order of the atomics varies, so the last bits of a float32 sum can differ from run to
#   run; `cuda.atomic.max` has no such issue.
#
# A reduction reads each byte once and does almost no arithmetic: its ceiling is memory
# bandwidth, so we compare bytes read per second with a device-to-device copy.

# %%
n = device.pick(sim=300, gpu=256 * 2**20)
# Drawn in float32 directly (uniform in [-1, 1)): 1 GiB, not a 2 GiB float64 draw first.
host_x = np.random.default_rng(1).random(n, dtype=np.float32) * 2 - 1
xr = cuda.to_device(host_x)
ref_sum = float(reduce.reduce_sum_ref(host_x))
ref_max = float(reduce.reduce_max_ref(host_x))
del host_x
total = cuda.device_array(1, np.float32)
bandwidth = {}
for v in reduce.REDUCE_VARIANTS:
    t = median_time(lambda v=v: reduce.reduce_sum_into(xr, total, v), reps=20)
    assert abs(float(total.copy_to_host()[0]) - ref_sum) < 1e-3 * max(1.0, n ** 0.5), v
    assert reduce.reduce_max(xr, v) == ref_max, v
    bandwidth[v] = 4 * n / t / 1e9
    print(prose.shown("sum, {{variant:13s}} {{us:10.1f}} us  {{gbs:9.1f}} GB/s read  = "
                      "{{share:.2f}} of copy", variant=v, us=t * 1e6, gbs=bandwidth[v],
                      share=bandwidth[v] * 1e9 / copy_bw))
if SIM:  # simulated threads run thousands of times slower than the copy: bars would be empty
    report4 = bench.committed_report()  # the GPU's picture instead (docs/benchmarks.json)
    sums = {name: bench.figure(report4, key, "gb_s") for name, key in
            (("reduce_sum_into (best)", "reduce_sum"), ("CuPy sum", "cupy_sum"),
             ("PyTorch sum", "torch_sum"))} if report4 is not None else {}
    if sums and None not in sums.values():
        fig = viz.plot_bandwidth(sums, bench.figure(report4, "copy", "gb_s"), title=viz.T(
            "sum of {shape} on the {gpu} ({date}, docs/benchmarks.json)",
            shape=report4["measurements"]["reduce_sum"]["shape"],
            gpu=report4["environment"]["gpu"], date=report4["date"][:10]))
else:
    fig = viz.plot_bandwidth(bandwidth, copy_bw / 1e9,
                             title=viz.T("sum of {n:,} float32", n=n))

# %%
quiz.ask("04_shared_memory.shuffle_barrier")

# %% [solution] id=answer_shuffle_barrier
# Question 5: Why a warp shuffle needs no barrier. Answer as: answer_shuffle_barrier = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_shuffle_barrier = "d"
### END SOLUTION

# %% [tests] id=test_answer_shuffle_barrier points=1
quiz.grade("04_shared_memory.shuffle_barrier", answer_shuffle_barrier)

# %% [markdown]
# ## 4. Transpose, and shared-memory banks
#
# `out[c, r] = x[r, c]`. A warp reading 32 neighbours of a row of x is coalesced, but then
# it writes them 32 rows apart in out: 32 separate memory transactions. The tiled kernel
# reads a 32 x 32 tile with coalesced reads into shared memory, waits, and writes the tile
# out transposed, again along rows: coalesced both ways.
#
# Shared memory has 32 **banks**: word `w` lives in bank `w % 32`, and a warp's request is
# served in one pass only if its 32 threads hit 32 different banks (or the same word).
# Writing out the transposed tile means reading a **column** of the tile: in a 32-wide
# float32 array, the whole column sits in one bank, a 32-way conflict. One spare column
# (a row of 32 + 1 words) shifts each row by one bank:

# %%
fig = viz.plot_banks(pads=(0, 1))

# %% [markdown]
# Measured against a device-to-device copy (bytes read + written per second), with
# `tiled_padded64` moving 64 x 64 tiles, 16 elements per thread:

# %%
shape = device.pick(sim=(40, 33), gpu=(16384, 16384))
host_t = np.random.default_rng(2).standard_normal(shape, dtype=np.float32)
xt = cuda.to_device(host_t)
ot = cuda.device_array((shape[1], shape[0]), np.float32)
want_t = transpose.transpose_ref(host_t)
del host_t
tbw = {}
for v in transpose.TRANSPOSE_VARIANTS:
    t = median_time(lambda v=v: transpose.transpose(xt, out=ot, variant=v))
    assert np.array_equal(ot.copy_to_host(), want_t), v
    tbw[v] = 2 * 4 * shape[0] * shape[1] / t / 1e9
    print(prose.shown("{{variant:15s}} {{ms:9.3f}} ms  {{gbs:9.1f}} GB/s = {{share:.2f}} of copy",
                      variant=v, ms=t * 1e3, gbs=tbw[v], share=tbw[v] * 1e9 / copy_bw))
title = (viz.T("transpose {rows} x {cols} (simulator: meaningless)", rows=shape[0],
               cols=shape[1]) if SIM else
         viz.T("transpose {rows} x {cols}", rows=shape[0], cols=shape[1]))
fig = viz.plot_bandwidth(tbw, copy_bw / 1e9, title=title)

# %%
quiz.ask("04_shared_memory.padding")

# %% [solution] id=answer_padding
# Question 6: Banks of a padded tile. Answer as: answer_padding = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_padding = "b"
### END SOLUTION

# %% [tests] id=test_answer_padding points=1
quiz.grade("04_shared_memory.padding", answer_padding)

# %% [markdown]
# ## Summary
#
# * Shared memory is per block, on chip, and shared by the block's threads; it turns
#   repeated global reads into one load plus fast reuse (tiles), and uncoalesced access
#   into coalesced access (transpose).
# * `cuda.syncthreads()` orders writes and reads by different threads of a block: one
#   after filling a buffer, one before overwriting it. A missing barrier is a race: it may
#   pass tests and fail later. Every thread must reach every barrier.
# * Matmul: tiles cut global traffic by the tile size; register blocking (several outputs
#   per thread) cuts shared-memory traffic the same way. Each step raises the arithmetic
#   intensity and moves the kernel up the roofline.
# * Reductions: a tree in shared memory, then warp shuffles (registers, no barrier), then
#   one pass with several accumulators per thread and one atomic per block: the last one
#   runs at memory bandwidth.
# * Banks: a warp's 32 accesses should hit 32 different banks; padding a 32-wide tile by one
#   column removes the transpose's 32-way conflict.
#
# Measured by the course authors on an {{bench.gpu}} ({{bench.date}}, `cudacourse bench`, the
# table in `docs/benchmarks.md`; medians of event-timed runs, ceilings measured in the same
# run): 4096^3 float32 matmul {{bench.matmul_naive.tflop_s:.2f}} /
# {{bench.matmul_tiled.tflop_s:.1f}} / {{bench.matmul_register.tflop_s:.1f}} /
# {{bench.matmul_register128.tflop_s:.1f}} / {{bench.matmul_register128x256.tflop_s:.1f}} /
# {{bench.matmul_register128x256v4.tflop_s:.1f}} TFLOP/s for naive / tiled / register /
# register128 / register128x256 / register128x256v4, against cuBLAS at
# {{bench.ceiling.cublas_sgemm_tflop_s:.1f}}, so the best Numba kernel reached
# {{bench.ratio.matmul_best_vs_cublas:.2f}} of cuBLAS ({{bench.ratio.matmul_best_vs_torch:.2f}}
# of `torch.matmul`); the sum of 256M float32 read at {{bench.ratio.reduce_sum_vs_copy:.2f}} x
# the copy rate ({{bench.ceiling.copy_gb_s/1000:.2f}} TB/s that run); the transpose of 16384^2
# ran at {{bench.ratio.transpose_naive_vs_copy:.2f}} (naive),
# {{bench.ratio.transpose_tiled_vs_copy:.2f}} (tiled, bank conflicts),
# {{bench.ratio.transpose_tiled_padded_vs_copy:.2f}} (padded) and
# {{bench.ratio.transpose_tiled_padded64_vs_copy:.2f}} (padded 64 x 64) of it.
#
# ## Further exercises
#
# 1. Change `TILE` to 32 in a copy of your kernel and measure it. Why can TILE not be 64
#    with one thread per output?
# 2. Remove the padding from `cudacourse.transpose`'s tile (`TILED_CONFIGS`) and measure
#    the difference; then pad by 2: what happens to the bank of a column now?
# 3. Turn `block_sum` into a full reduction: launch it on its own output until one value
#    remains. How many launches for 2^28 elements with TPB = 128?
# 4. Write `block_max` with the same tree and check it against `reduce.reduce_max_ref`.
#    What identity value must the threads past the end store?
# 5. In `cudacourse.reduce`, try 1, 4 and 16 accumulators per thread (`_make_kernels("sum",
#    items)`) on a GPU: how does the bandwidth change, and why?
