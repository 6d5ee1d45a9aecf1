# %% [markdown]
# # Lesson 2: threads, blocks and warps
#
# In lesson 1 every thread computed `i = cuda.grid(1)` and handled element `i`. This lesson
# opens that up:
#
# 1. **The hierarchy**: threads form blocks, blocks form a grid; `threadIdx`, `blockIdx`,
#    `blockDim`, `gridDim`, and `cuda.grid` which combines them, in 1D and 2D.
# 2. **Grid-stride loops**: kernels that are correct for any grid size.
# 3. **Warps**: the hardware runs threads 32 at a time in lock-step, which makes branches
#    cost more than they look, and lets threads of a warp exchange values directly.
# 4. **Occupancy**: how many threads an SM can keep busy, and what limits it.
#
# Three exercises are graded: a 2D image kernel, a grid-stride loop, and a warp-shuffle sum.

# %% [readonly] id=setup
import cudacourse
cudacourse.setup()  # first: a real GPU or the CUDA simulator, chosen before numba.cuda loads
import cudacourse.check
from cudacourse.course import quiz
from cudacourse.runtime import device, occupancy
from cudacourse.kernels import indexing, warps
from cudacourse.course import prose
from cudacourse.viz import threads as viz
from numba import cuda
import numpy as np
import matplotlib.pyplot as plt

# %% [markdown]
# ## 1. Threads, blocks, grid
#
# A launch `kernel[grid, block](...)` starts `grid` blocks of `block` threads each. Inside
# the kernel every thread can read:
#
# | name | meaning |
# | --- | --- |
# | `cuda.threadIdx.x/.y/.z` | the thread's position inside its block |
# | `cuda.blockIdx.x/.y/.z` | the block's position inside the grid |
# | `cuda.blockDim.x/.y/.z` | the block's size (threads per block, per direction) |
# | `cuda.gridDim.x/.y/.z` | the grid's size (blocks, per direction) |
#
# `cuda.grid(1)` is `blockIdx.x * blockDim.x + threadIdx.x`, the thread's global index, and
# `cuda.grid(2)` gives `(x, y)` the same way in two directions. Blocks exist because the
# hardware schedules them: a block runs on one SM (streaming multiprocessor), and its
# threads can cooperate (share a scratchpad on the SM and wait for each other, which
# lesson 4 teaches), while different blocks are independent and run in any order.
#
# For 2D data such as an image this course uses **x for the column** (the contiguous,
# fast-varying axis) and **y for the row**: `c, r = cuda.grid(2)`, then `img[r, c]`.
# Neighbouring threads (consecutive x) then read neighbouring addresses, which is what
# memory likes (lesson 4 measures it, as *coalescing*).

# %% [markdown]
# Which thread handles which element? The kernel `indexing._thread_map_2d` writes, into
# every element it owns, its block and thread ids. Here on a 10 x 13 array with blocks of
# 4 x 3 threads (4 along x, 3 along y): colour = block, text = `(threadIdx.x, threadIdx.y)`.

# %%
shape, block = (10, 13), (4, 3)
tmap = indexing.thread_map(shape, block)
grid, _ = indexing.launch_config_2d(shape, block)
print(prose.shown("grid = {{grid}} blocks (x, y), block = {{block}} threads (x, y)",
                  grid=grid, block=block))
viz.plot_thread_map(tmap, block)
plt.show()

# %% [markdown]
# 13 columns need `ceil(13 / 4) = 4` blocks along x, so the last block column sticks out by
# 3 threads; 10 rows need 4 blocks of 3 along y, 2 threads too many. Those threads exist,
# and without a guard they would write outside the array. The map the GPU (or simulator)
# produced is exactly the arithmetic `blockIdx * blockDim + threadIdx`:

# %%
want = indexing.thread_map_ref(shape, block)
print(prose.shown("the kernel's map equals the formula: {{ok}}",
                  ok=all((g == w).all() for g, w in zip(tmap, want))))

# %%
quiz.ask("02_threads_blocks_warps.grid_2d")

# %% [solution] id=answer_grid_2d
# Question 1: A 2D grid for an image. Answer as: answer_grid_2d = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_grid_2d = "d"
### END SOLUTION

# %% [tests] id=test_answer_grid_2d points=1
quiz.grade("02_threads_blocks_warps.grid_2d", answer_grid_2d)

# %% [markdown]
# ### A 2D kernel on an image
#
# `indexing.radial` computes each pixel from its coordinates alone (distance from the
# centre). One thread per pixel, a 2D grid, and a 2D guard `if r < rows and c < cols`,
# because blocks stick out in both directions:
#
# ```python
# @cuda.jit
# def _radial_2d(out):
#     c, r = cuda.grid(2)
#     rows, cols = out.shape
#     if r < rows and c < cols:
#         ...
#         out[r, c] = math.sqrt(dr * dr + dc * dc) / half_diag
# ```

# %%
img_shape = device.pick(sim=(40, 60), gpu=(1080, 1920))
img = indexing.radial(img_shape, block=(16, 16))
print(prose.shown("matches the NumPy reference: {{ok}}",
                  ok=np.allclose(img, indexing.radial_ref(img_shape), atol=1e-6)))
plt.imshow(img, cmap="magma")
plt.title(viz.T("radial gradient, {rows} x {cols} pixels, one thread each",
                rows=img_shape[0], cols=img_shape[1]))
plt.xlabel(viz.T("column"))
plt.ylabel(viz.T("row"))
plt.colorbar()
plt.show()

# %% [markdown]
# ### Exercise 1: mirror an image (3 points)
#
# Write `mirror(img, out)` so that `out[r, c] = img[r, W - 1 - c]` (a left-right mirror;
# `W = img.shape[1]`). It is launched with a 2D grid whose x covers the columns and y the
# rows, with blocks that do **not** divide the image evenly in either direction, plus a spare
# block row and column. So:
#
# - get `c, r` from `cuda.grid(2)` (x first!);
# - guard **both** directions before touching memory.

# %% [solution] id=mirror
@cuda.jit
def mirror(img, out):
    ### BEGIN SOLUTION
    c, r = cuda.grid(2)
    if r < img.shape[0] and c < img.shape[1]:
        out[r, c] = img[r, img.shape[1] - 1 - c]
    ### END SOLUTION

# %% [tests] id=test_mirror points=3
cudacourse.check.check_mirror(mirror)
### BEGIN HIDDEN TESTS
cudacourse.check.check_mirror(mirror, hidden=cudacourse.check.Cases(
    seed=402817593, sizes=[((20, 48), (16, 4), 0), ((29, 37), (8, 8), 1), ((35, 9), (4, 32), 1)]))
### END HIDDEN TESTS

# %% [markdown]
# ## 2. Grid-stride loops
#
# One thread per element ties the grid to the data size. A **grid-stride loop** lets any
# grid process any amount of data: each thread starts at its global index and steps by the
# number of threads in the whole grid, `cuda.gridsize(1)`:
#
# ```python
# for i in range(cuda.grid(1), n, cuda.gridsize(1)):
#     out[i] = ...
# ```
#
# On every step neighbouring threads still handle neighbouring elements. The loop also
# guards: a thread whose start is past the end runs zero iterations. Below, more elements
# than threads (the cell prints both) and only 2 blocks of 64 threads: `indexing.coverage` counts, per element, the threads
# that handled it, *atomically* (an atomic operation reads, changes and writes one memory
# location as one indivisible step), so simultaneous counts are not lost.

# %%
n_cov, blocks_cov, tpb_cov = 300, 2, 64
counts = {
    viz.T("one element per thread"): indexing.coverage(n_cov, blocks_cov, tpb_cov, grid_stride=False),
    viz.T("grid-stride loop"): indexing.coverage(n_cov, blocks_cov, tpb_cov, grid_stride=True),
}
for label, c in counts.items():
    print(prose.shown("{{label}}: {{once}} of {{n}} elements handled once, {{never}} never",
                      label=label, once=int((c == 1).sum()), n=n_cov, never=int((c == 0).sum())))
viz.plot_coverage(counts)
plt.show()

# %% [markdown]
# Grid-stride kernels let you choose the grid for the *hardware* instead of the data: a
# few blocks per SM is enough to fill the GPU, and each thread then does several elements.

# %%
quiz.ask("02_threads_blocks_warps.grid_stride")

# %% [solution] id=answer_grid_stride
# Question 2: Elements per thread in a grid-stride loop. Answer as: answer_grid_stride = <a number>, within 0.5
### BEGIN SOLUTION
answer_grid_stride = 10
### END SOLUTION

# %% [tests] id=test_answer_grid_stride points=1
quiz.grade("02_threads_blocks_warps.grid_stride", answer_grid_stride)

# %% [markdown]
# ### Exercise 2: SAXPY with a grid-stride loop (3 points)
#
# Write `saxpy(a, x, y, out)` computing `out[i] = a * x[i] + y[i]` for every `i`, with a
# grid-stride loop. The checker launches it with **fewer threads than elements** (a kernel
# without the loop leaves elements undone) and with more (a kernel without a guard writes
# past the end). In the simulator it also counts reads of `x`: every element should be read
# exactly once.

# %% [solution] id=saxpy
@cuda.jit
def saxpy(a, x, y, out):
    ### BEGIN SOLUTION
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = a * x[i] + y[i]
    ### END SOLUTION

# %% [tests] id=test_saxpy points=3
cudacourse.check.check_saxpy(saxpy)
### BEGIN HIDDEN TESTS
cudacourse.check.check_saxpy(saxpy, hidden=cudacourse.check.Cases(
    seed=918273645, sizes=[(1427, 3, 64), (89, 4, 32), (704, 1, 128)]))
### END HIDDEN TESTS

# %% [markdown]
# ### Choosing a launch configuration
#
# - **Threads per block**: a multiple of 32 (the warp size, next section), usually 128 or
#   256. At most 1024. For 2D, `(16, 16)` or `(32, 8)`: keep x at least 16 or 32 wide so a
#   warp reads a contiguous run of a row.
# - **Blocks**: one thread per element gives `ceil(n / threads)`. With a grid-stride loop,
#   a few times the number of SMs is enough to fill the GPU.
# - **Occupancy** (section 4) can make some block sizes better than others for a kernel.

# %%
print(prose.shown("{{config}} blocks, threads for a million elements",
                  config=indexing.launch_config_1d(1_000_000, 256)))
print(prose.shown("{{config}} grid, block for a 1080p image",
                  config=indexing.launch_config_2d((1080, 1920), (32, 8))))
if device.is_simulator():
    print(prose.shown("simulator mode: no SMs to count"))
else:
    print(prose.shown("this GPU has {{sms}} SMs", sms=device.current().gpu.sm_count))

# %% [markdown]
# ## 3. Warps: 32 threads in lock-step
#
# An SM does not run threads one by one: it runs **warps** of 32 threads that issue one
# instruction at a time together (SIMT, single instruction multiple threads). Warps are cut
# from the linear thread id inside the block, `x + blockDim.x * (y + blockDim.y * z)`:
# 32 consecutive ids per warp. Before the picture below, work out which threads of an
# 8 x 8 block form its first warp.

# %%
quiz.ask("02_threads_blocks_warps.warp_rows")

# %% [solution] id=answer_warp_rows
# Question 3: Which threads form a warp. Answer as: answer_warp_rows = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_warp_rows = "c"
### END SOLUTION

# %% [tests] id=test_answer_warp_rows points=1
quiz.grade("02_threads_blocks_warps.warp_rows", answer_warp_rows)

# %%
viz.plot_warps((8, 8))
plt.show()

# %% [markdown]
# Before reading on, predict what a branch costs when the *lanes* of a warp (its 32 threads,
# numbered from 0: `cuda.laneid`) disagree on it.

# %%
quiz.ask("02_threads_blocks_warps.divergence")

# %% [solution] id=answer_divergence
# Question 4: The cost of a divergent branch. Answer as: answer_divergence = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_divergence = "b"
### END SOLUTION

# %% [tests] id=test_answer_divergence points=1
quiz.grade("02_threads_blocks_warps.divergence", answer_divergence)

# %% [markdown]
# ### Divergence
#
# The answer to question 4, and why.
# When the lanes of a warp disagree on an `if`, the warp runs **both** sides, one after the
# other, with the lanes of the other side switched off. `warps._branchy` runs one of two
# loops per thread. If even and odd lanes disagree (`i % 2 == 0`), every warp runs both
# loops; if whole warps agree (`(i // 32) % 2 == 0`), each warp runs one. Same work per
# thread, different work per warp. `warps.passes_ref` counts the branch paths each warp
# runs, from the pattern alone:

# %%
patterns = warps.branch_patterns(1024)
passes = {label: warps.passes_ref(taken) for label, taken in patterns.items()}
passes["branch-free"] = np.ones(1024 // 32, dtype=np.int32)  # one loop, no branch
viz.plot_passes(passes)
plt.show()

# %% [markdown]
# The branch-free kernel `warps._branch_free` computes the same result as the divergent
# one, choosing its constants by arithmetic (`m = 0.999 if even else 0.998` compiles to a
# select, not a jump), so every lane runs the same loop.
#
# On a GPU the next cell times the three kernels with CUDA events. **In the simulator it
# does not**: there every thread is a CPU thread, warps do not exist, and timings would say
# nothing about a GPU; the counts above are the idea.

# %%
if device.is_simulator():
    print(prose.shown("simulator: no timing (timings here are meaningless); see the model above"))
else:
    times = warps.time_divergence(n=1 << 24, k=64, repeats=10)
    for label, ms in times.items():
        print(prose.shown("{{label:15s}} {{ms:8.3f}} ms", label=cudacourse.i18n.shown(label), ms=ms))
    plt.bar([cudacourse.i18n.shown(k) for k in times], list(times.values()))
    plt.ylabel(viz.T("ms per launch (median)"))
    plt.xlabel(viz.T("kernel"))
    plt.title(viz.T("divergence measured on {gpu}", gpu=device.current().gpu.name))
    plt.show()

# %% [markdown]
# ### SMs and where blocks go
#
# The GPU hands whole blocks to SMs as room frees up; a block stays on its SM until all its
# threads finish. An SM keeps several blocks resident at once and, every cycle, issues an
# instruction from some warp that is ready. While one warp waits hundreds of cycles for
# memory, others run: that is how a GPU hides latency, and why it needs many more threads
# than it has cores. How many warps fit on an SM at once is the subject of the next section.

# %% [markdown]
# ## 4. Occupancy
#
# Two kinds of on-chip storage matter here. **Registers** hold each thread's private
# variables; they are the fastest storage there is, and the compiler decides how many a
# kernel needs per thread (what does not fit *spills* to **local memory**, which despite its
# name lives in the slow GPU memory). **Shared memory** is a scratchpad on the SM that the
# threads of one block share; lesson 4 uses it, with `cuda.syncthreads()`, the barrier that
# makes a block's threads wait for each other.
#
# An SM of *compute capability* {{bench.compute_capability}} (H100, H200; the version number of a GPU generation's
# features and limits, listed per version in the CUDA C++ Programming Guide) has room for at
# most **{{const.occupancy.H200_SM.max_warps}} warps**
# ({{const.occupancy.H200_SM.max_warps*32:.0f}} threads) and
# **{{const.occupancy.H200_SM.max_blocks}} blocks**,
# **{{const.occupancy.H200_SM.registers:,}} registers** and
# **{{const.occupancy.H200_SM.shared_memory/1024:.0f}} KB of shared memory**, shared by all
# resident blocks (one block may use at most
# {{const.occupancy.H200_SM.max_shared_per_block/1024:.0f}} KB of it). A block is placed only if
# all of its registers and shared memory fit, so a kernel that uses many registers per
# thread, or much shared memory per block, leaves warp slots empty. **Occupancy** = resident warps / 64.
#
# A kernel's resources are fixed when it is compiled. On a GPU `occupancy.kernel_resources`
# compiles the kernel for the given arguments and reads them from the driver
# (`kernel.specialize(...).get_regs_per_thread()`, `get_shared_mem_per_block()`, ...). The
# simulator itself compiles nothing, but the course also compiles every kernel for a real
# GPU (sm_90, with NVIDIA's compiler from its pip wheels, no GPU needed), so there the
# numbers come from that compile's report; only where those wheels are missing does it
# return example numbers. `res.source` below says which you got.

# %%
copy_kernel = occupancy._copy_scale_kernel()
xs = cuda.to_device(np.ones(1024, np.float32))
res = occupancy.kernel_resources(copy_kernel, xs, xs, np.float32(2.0))
print(prose.shown("registers per thread: {{regs}}, static shared memory per block: {{shared}} B, "
                  "local memory per thread: {{local}} B", regs=res.registers_per_thread,
                  shared=res.shared_per_block, local=res.local_per_thread))
print(prose.shown("source: {{source}}", source=cudacourse.i18n.shown(res.source)))

# %%
quiz.ask("02_threads_blocks_warps.occupancy_regs")

# %% [solution] id=answer_occupancy_regs
# Question 5: Occupancy limited by registers. Answer as: answer_occupancy_regs = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_occupancy_regs = "a"
### END SOLUTION

# %% [tests] id=test_answer_occupancy_regs points=1
quiz.grade("02_threads_blocks_warps.occupancy_regs", answer_occupancy_regs)

# %% [markdown]
# `occupancy.occupancy(threads_per_block, registers, shared)` applies the allocation rules
# of NVIDIA's occupancy calculator for compute capability
# {{bench.compute_capability}}: registers are handed out per
# warp in units of 256 from four partitions of 16,384, shared memory in 128-byte units plus
# 1 KB the runtime reserves per block. (On a GPU, `tests/test_occupancy.py` checks this model
# against the driver's own answer.) The picture for a few register counts:

# %%
curves = {f"{r} registers/thread": occupancy.occupancy_curve(r) for r in (32, 64, 128)}
curves[f"this kernel ({res.registers_per_thread} regs, {'measured' if res.measured else 'example'})"
       ] = occupancy.occupancy_curve(res.registers_per_thread, res.shared_per_block)
viz.plot_occupancy(curves)
plt.show()
for tpb in (32, 128, 256, 1024):
    print(occupancy.occupancy(tpb, res.registers_per_thread, res.shared_per_block).describe())

# %% [markdown]
# Read the curves: at 32 threads per block the 32-blocks-per-SM cap allows only 32 warps
# (half the slots). At 128 registers per thread a warp needs 4,096 registers and only 16
# warps fit, whatever the block size, and a block of more than 512 threads cannot launch at
# all. Occupancy is a means, not a goal: half is often plenty for a kernel
# with enough independent work per thread, but very low occupancy starves a memory-bound
# kernel.

# %% [markdown]
# ### Block size against bandwidth, measured
#
# A memory-bound kernel (`out = 2 * x`, float32) timed for several block sizes. On a GPU the
# next cell measures it; expect the smallest blocks to lose bandwidth (too few warps per SM
# to keep enough loads in flight) and the rest to be close to each other. **In the
# simulator the measurement is skipped**: its timings would say nothing about a GPU.

# %%
if device.is_simulator():
    print(prose.shown("simulator: skipped (needs a GPU to measure bandwidth)"))
else:
    sweep = occupancy.block_size_sweep(n=1 << 26, repeats=10)
    for row in sweep:
        print(prose.shown("{{tpb:5d}} threads/block: {{gbs:7.0f}} GB/s, occupancy {{occ:.0%}}",
                          tpb=row["threads_per_block"], gbs=row["gb_per_s"],
                          occ=row["occupancy"]))
    viz.plot_block_sweep(sweep, title=viz.T("out = 2 * x on {gpu}",
                                             gpu=device.current().gpu.name))
    plt.show()

# %% [markdown]
# ## 5. Warp-level primitives
#
# Because the lanes of a warp run together, they can exchange registers directly, without
# shared memory or `syncthreads`:
#
# - `cuda.shfl_sync(mask, v, src)`: get `v` from lane `src`;
# - `cuda.shfl_down_sync(mask, v, d)` / `shfl_up_sync`: from lane `laneid + d` / `laneid - d`
#   (your own `v` if that lane is outside the warp);
# - `cuda.shfl_xor_sync(mask, v, m)`: from lane `laneid ^ m` (a butterfly);
# - `cuda.ballot_sync(mask, p)`: a 32-bit mask of the lanes whose predicate `p` is true;
#   `all_sync`, `any_sync`;
# - `cuda.syncwarp(mask)`: wait for the lanes of the warp (a barrier for one warp).
#
# `mask` names the lanes taking part, each of which must make the same call; with all 32
# lanes, `0xFFFFFFFF`. The stock simulator lacks these; `cudacourse.simwarp` adds them with
# the same semantics (a lane waits for the others named in the mask, lanes that exited are
# not waited for), and reports mistakes that would hang or be undefined on a GPU.
#
# A warp sum with `shfl_down_sync`: at each step lane `j` adds lane `j + offset`'s value,
# halving the offset from 16 to 1.

# %%
x = np.random.default_rng(0).standard_normal(200).astype(np.float32)
sums = warps.warp_sums(x)
print(prose.shown("warp sums: {{sums}}", sums=np.round(sums, 3)))
print(prose.shown("match NumPy: {{ok}}", ok=np.allclose(sums, warps.warp_sums_ref(x), atol=1e-4)))
ballots = warps.warp_ballots(x)
print(prose.shown("ballot of x > 0, per warp: {{ballots}}", ballots=[f"{b:#010x}" for b in ballots]))
print(prose.shown("match NumPy: {{ok}}", ok=(ballots == warps.warp_ballots_ref(x > 0)).all()))

# %%
quiz.ask("02_threads_blocks_warps.shuffle_total")

# %% [solution] id=answer_shuffle_total
# Question 6: Where a shuffle sum ends up. Answer as: answer_shuffle_total = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_shuffle_total = "d"
### END SOLUTION

# %% [tests] id=test_answer_shuffle_total points=1
quiz.grade("02_threads_blocks_warps.shuffle_total", answer_shuffle_total)

# %% [markdown]
# ### Exercise 3: a warp-shuffle sum (3 points)
#
# Write `warp_sum(x, out)`: thread `i` belongs to warp `w = i // 32` (blocks are multiples
# of 32 threads, so warps never straddle blocks), and `out[w]` must become
# `x[32 w] + ... + x[32 w + 31]`, elements past the end of `x` counting as 0. Use
# `cuda.shfl_down_sync` (or `shfl_xor_sync`) with the full mask `0xFFFFFFFF`, and write from
# lane 0 (`cuda.laneid == 0`) only.
#
# Careful: `len(x)` is not a multiple of 32, and a spare block is launched. Lanes past the
# end of `x` must still **take part in every shuffle** (with the value 0) rather than
# return early, and warps past the end of `out` must not write.

# %% [solution] id=warp_sum
@cuda.jit
def warp_sum(x, out):
    ### BEGIN SOLUTION
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
    ### END SOLUTION

# %% [tests] id=test_warp_sum points=3
cudacourse.check.check_warp_sum(warp_sum)
### BEGIN HIDDEN TESTS
cudacourse.check.check_warp_sum(warp_sum, hidden=cudacourse.check.Cases(
    seed=556120837, sizes=[(517, 128), (91, 32), (262, 64)]))
### END HIDDEN TESTS

# %% [markdown]
# ## Summary
#
# - A launch is a grid of blocks of threads; `cuda.grid(n)` = `blockIdx * blockDim +
#   threadIdx` per direction. For images: x is the column, y the row, and both need a guard
#   because blocks round up.
# - A grid-stride loop (`range(cuda.grid(1), n, cuda.gridsize(1))`) makes a kernel correct
#   for any grid, so the grid can be sized for the GPU instead of the data.
# - Threads run in warps of 32 consecutive linear ids. Lanes that disagree on a branch make
#   the warp run both sides; branch on things whole warps share, or compute instead of
#   branching.
# - Occupancy is how many of an SM's 64 warp slots a kernel can fill, limited by blocks per
#   SM, registers per thread and shared memory per block; read the kernel's numbers, then
#   compute it.
# - Lanes of a warp exchange values with shuffles and vote with ballots, no shared memory
#   and no `syncthreads` needed.
#
# ## Further exercises (not graded)
#
# 1. Write a 2D grid-stride version of `mirror` and launch it with a single 4 x 4 block on
#    the image of section 1; check it against `img[:, ::-1]`.
# 2. Rewrite `warp_sum` with `shfl_xor_sync`. Which lanes now hold the total?
# 3. Count, for each element, the positive values before it in its warp: once with
#    `warps.warp_prefix_sums` (a `shfl_up_sync` scan) on `x > 0`, once with a single
#    `ballot_sync` and `cuda.popc(ballot & cuda.lanemask_lt())`.
# 4. On a GPU: vary `k` in `warps.time_divergence` and the block size of
#    `occupancy.block_size_sweep`; when does divergence stop mattering relative to memory?
# 5. Use `occupancy.occupancy` to find the largest static shared-memory allocation per
#    256-thread block that still keeps 100% occupancy at 32 registers per thread.
