# %% [markdown]
# # Lesson 6: scientific computing on the GPU, from a stencil to the flow past a wing
#
# GPUs were number crunchers for physics long before they ran neural networks. Most
# simulations of heat, sound, weather or air share one pattern: a grid of values, and a
# time step that computes every point from its neighbours. That pattern is a **stencil**.
# In this lesson:
#
# 1. heat diffusion on a plate: a naive stencil kernel, then shared-memory tiles with a
#    halo (**you write it**), boundary conditions, double buffering between steps with the
#    data kept on the device (**you write the time loop**), and why a stencil is
#    memory-bound;
# 2. the **lattice Boltzmann method** (LBM) for the flow of a fluid: 9 populations per grid
#    node that stream to their neighbours and collide; walls and obstacles by *bounce-back*
#    (what would flow into a solid node is sent back the way it came);
#    the structure-of-arrays layout; one fused kernel per step (**you write it**), checked
#    against a NumPy reference and against the exact solution of a channel flow;
# 3. the pictures: the vortex street behind a cylinder, the flow around a NACA 0012 wing (a
#    standard symmetric wing section),
#    and the lift that grows with the angle of attack.
#
# Run the cells in order. In the simulator, kernels run on tiny grids (seconds per check),
# and **the flow pictures come from the vectorised NumPy reference of the same step**, at a
# size that runs in well under a minute on two CPU cores; on a GPU the same cells run the
# kernels on grids that fill it (4096 x 1024 nodes, thousands of steps in seconds).

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
from cudacourse import bench
from cudacourse.runtime import device
from cudacourse.kernels import lbm, stencil
from cudacourse.course import prose
from cudacourse.viz import flow as viz

SIM = device.is_simulator()
TX, TY = 16, 8  # block (= tile) shape of the stencil exercise
HALO = (TY + 2, TX + 2)  # the tile with a one-cell halo on every side
LBM_BLOCK = (16, 4)  # block shape of the LBM exercise
CX, CY, OPP = lbm.CX, lbm.CY, lbm.OPP  # D2Q9 lattice velocities and opposite directions
W = lbm.W.astype(np.float32)  # D2Q9 weights

# %% [markdown]
# A timing helper: CUDA events around `reps` runs queued back to back, the median of a few
# such batches, divided by `reps`. Queued back to back matters: a library call spends tens
# of microseconds in Python (argument checks, the launch) before the GPU starts, and with
# one run between two events that host time is counted as GPU time. (In the simulator: one
# wall-clock run, where the number means nothing.)


# %%
def median_time(fn, reps=10, batches=5):
    """Median seconds per fn() call (CUDA events around reps queued calls, on a GPU; one
    wall-clock run in the simulator)."""
    if SIM:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t
    fn()
    cuda.synchronize()
    times = []
    for _ in range(batches):
        start, stop = cuda.event(timing=True), cuda.event(timing=True)
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        times.append(cuda.event_elapsed_time(start, stop) / 1e3 / reps)
    return float(np.median(times))


# %% [markdown]
# ## 1. Heat diffusion: a stencil
#
# A metal plate, hot along one edge. Its temperature $u$ obeys the heat equation
# $\partial_t u = \kappa \nabla^2 u$. On a grid, one explicit time step replaces every
# interior cell by itself plus $\alpha$ times a *discrete Laplacian*: the grid's version of
# $\nabla^2 u$, a weighted sum of the neighbours minus the cell itself, which is zero where
# $u$ is flat or a straight ramp and positive where the cell is colder than its surroundings.
# We use the 9-point one, which weighs the four edge neighbours 4 times as much as the four diagonal ones
# (the diffusion is then the same in every direction, not faster along the axes):
#
# $$u'_{y,x} = u_{y,x} + \alpha \, \frac{4(u_N + u_S + u_E + u_W) + (u_{NE} + u_{NW} + u_{SE} + u_{SW}) - 20\,u_{y,x}}{6}$$
#
# The boundary rows and columns are walls held at a fixed temperature: they keep their
# values (a Dirichlet boundary condition). The step is stable for
# $\alpha \le$ {{const.stencil.MAX_ALPHA}}.
# `stencil.heat_step_ref` is the NumPy reference; `stencil.heat_step` runs a kernel.

# %%
ny, nx = device.pick(sim=(48, 64), gpu=(512, 512))
plate = np.zeros((ny, nx), np.float32)
plate[0, :] = 100.0  # the hot edge
plate[ny // 3: ny // 2, nx // 3: nx // 2] = 60.0  # a warm block in the middle
# In the simulator the kernel would take minutes for this many steps: use the reference.
run = stencil.diffuse_ref if SIM else stencil.diffuse
snapshots = [plate, run(plate, 50, 0.25), run(plate, 400, 0.25)]
fig = viz.plot_heat(snapshots, [viz.T("start"), viz.T("after {steps} steps", steps=50),
                               viz.T("after {steps} steps", steps=400)])

# %% [markdown]
# ### The naive kernel, and what it reads
#
# One thread per cell (`stencil._heat_naive`): thread (x, y) reads its 9 inputs straight
# from global memory and writes one output. Each value of u is needed by 9 threads, so it
# is requested 9 times; the L1 and L2 caches catch most of the repeats, but each request
# still costs an instruction and a cache lookup.
#
# ### Tiles with a halo
#
# The shared-memory version: a block of TX x TY threads owns a TX x TY tile of the output.
# To compute the cells on the tile's edges it also needs a ring of cells one step outside
# the tile, owned by the neighbouring blocks: the **halo**. The block loads tile + halo,
# (TY + 2) x (TX + 2) cells, into shared memory once, waits at a barrier, and then every
# thread computes its cell from shared memory.
#
# Loading the halo is where kernels go wrong. The simplest correct way: treat tile + halo
# as one flat list of (TY + 2)(TX + 2) cells and let the block's TX * TY threads walk over
# it in strides of TX * TY. Consecutive threads load consecutive cells of a row
# (coalesced), and the corners of the halo are loaded like every other cell.

# %%
quiz.ask("06_stencils_lbm.halo_cells")

# %% [solution] id=answer_halo_cells
# Question 1: Cells in a tile with a two-cell halo. Answer as: answer_halo_cells = <a number of cells>, within 0.5
### BEGIN SOLUTION
answer_halo_cells = 432
### END SOLUTION

# %% [tests] id=test_answer_halo_cells points=1
quiz.grade("06_stencils_lbm.halo_cells", answer_halo_cells)

# %% [markdown]
# ### Exercise: the tiled heat step
#
# Write `heat_step(u, out, alpha)`, launched with blocks of `(TX, TY)` threads and a grid of
# `(ceil(nx / TX), ceil(ny / TY))` blocks; `cuda.threadIdx.x` runs along x (the columns).
#
# 1. declare `tile = cuda.shared.array(HALO, float32)`; `tile[r, s]` holds
#    `u[y0 + r, x0 + s]` with `x0 = cuda.blockIdx.x * TX - 1`, `y0 = cuda.blockIdx.y * TY - 1`
#    (the halo starts one cell before the tile);
# 2. load all `HALO[0] * HALO[1]` cells: for `k` from the thread's rank in the block
#    (`ty * TX + tx`) in steps of `TX * TY`, row `r = k // (TX + 2)`, column `s = k % (TX + 2)`;
#    cells outside the grid get `0.0` (**guard every load**: the grid is not a tile multiple);
# 3. barrier;
# 4. the thread's cell is `y = y0 + ty + 1`, `x = x0 + tx + 1`: if it is inside the grid,
#    write `out[y, x]`: `u` itself on the boundary rows and columns, the formula above
#    inside, computed from `tile`.
#
# Never write into `u`: other blocks may still be loading it as their halo. The checker
# tries grids that are not tile multiples and tells you *where* your cells are wrong: on tile
# edges, at tile corners, on the walls. (A write into `u` is a race between blocks. The
# simulator runs blocks one after another in a fixed order, so such a race gives the same
# answer every time there; on a GPU, blocks run at once and it gives different answers from
# run to run. Run the notebook on a GPU once.)

# %% [solution] id=heat_step
@cuda.jit
def heat_step(u, out, alpha):
    ### BEGIN SOLUTION
    tile = cuda.shared.array(HALO, float32)
    ny, nx = u.shape
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    x0 = cuda.blockIdx.x * TX - 1
    y0 = cuda.blockIdx.y * TY - 1
    for k in range(ty * TX + tx, HALO[0] * HALO[1], TX * TY):
        r = k // (TX + 2)
        s = k % (TX + 2)
        gy = y0 + r
        gx = x0 + s
        if 0 <= gy < ny and 0 <= gx < nx:
            tile[r, s] = u[gy, gx]
        else:
            tile[r, s] = 0.0
    cuda.syncthreads()  # every cell of tile and halo is loaded
    y = y0 + ty + 1
    x = x0 + tx + 1
    if y < ny and x < nx:
        r = ty + 1
        s = tx + 1
        c = tile[r, s]
        if y == 0 or x == 0 or y == ny - 1 or x == nx - 1:
            out[y, x] = c
        else:
            edges = tile[r - 1, s] + tile[r + 1, s] + tile[r, s - 1] + tile[r, s + 1]
            corners = tile[r - 1, s - 1] + tile[r - 1, s + 1] + tile[r + 1, s - 1] + tile[r + 1, s + 1]
            out[y, x] = c + alpha * (4.0 * edges + corners - 20.0 * c) / 6.0
    ### END SOLUTION

# %% [tests] id=test_heat_step points=4
cudacourse.check.check_heat_step(heat_step)
### BEGIN HIDDEN TESTS
cudacourse.check.check_heat_step(heat_step, hidden=cudacourse.check.Cases(
    seed=481726305, sizes=[(11, 21, 1), (23, 18, 1), (17, 35, 0)]))
### END HIDDEN TESTS

# %% [markdown]
# ### Double buffering, with the data kept on the device
#
# A step reads every cell of u and writes every cell of out, so it cannot work in place.
# Two buffers take turns: step 1 reads `a` and writes `b`, step 2 reads `b` and writes `a`,
# and so on. Swapping the two Python names costs nothing; the data never leaves the GPU
# between steps (lesson 3: a round trip to the host per step would cost far more than the
# step itself).
#
# ### Exercise: the time loop
#
# Write `diffuse(d_u, d_tmp, steps, alpha)`: `d_u` holds the start, `d_tmp` is a second
# device array of the same shape. Launch your `heat_step` `steps` times, swapping the two
# after each launch, and return the device array that holds the last step's result. No
# copies, no new arrays.

# %% [solution] id=diffuse
def diffuse(d_u, d_tmp, steps, alpha):
    ### BEGIN SOLUTION
    ny, nx = d_u.shape
    grid = (math.ceil(nx / TX), math.ceil(ny / TY))
    for _ in range(steps):
        heat_step[grid, (TX, TY)](d_u, d_tmp, np.float32(alpha))
        d_u, d_tmp = d_tmp, d_u  # the new state is the next step's input
    return d_u
    ### END SOLUTION

# %% [tests] id=test_diffuse points=2
cudacourse.check.check_diffuse(diffuse)
### BEGIN HIDDEN TESTS
cudacourse.check.check_diffuse(diffuse, hidden=cudacourse.check.Cases(
    seed=830517294, sizes=[(9, 37, 3), (33, 11, 4)]))
### END HIDDEN TESTS

# %% [markdown]
# ### Why a stencil is memory-bound
#
# One update does about a dozen floating-point operations and must move at least 8 bytes
# from and to global memory: one float32 read (its own value; the neighbours are re-used
# from caches or shared memory) and one write. An H200 does up to
# {{const.hardware.H200.fp32_tflop_s:.0f}} TFLOP/s of float32 arithmetic (datasheet) but moves
# {{bench.ceiling.copy_gb_s/1000:.1f}} TB/s (the course's copy, {{bench.date}}): a dozen flops
# per 8 bytes is far below the
# {{const.hardware.H200.fp32_tflop_s / bench.ceiling.copy_gb_s * 1000:.0f}} flop/byte where the
# arithmetic would start to limit. The ceiling of a
# stencil is therefore a **device-to-device copy**: the same bytes read and written, with
# no arithmetic at all. We measure against one, run now on this device:

# %%
quiz.ask("06_stencils_lbm.stencil_rate")

# %% [solution] id=answer_stencil_rate
# Question 2: The fastest a stencil can run. Answer as: answer_stencil_rate = <a number of billion cell updates per second>, within 5
### BEGIN SOLUTION
answer_stencil_rate = 500
### END SOLUTION

# %% [tests] id=test_answer_stencil_rate points=1
quiz.grade("06_stencils_lbm.stencil_rate", answer_stencil_rate)

# %%
shape = device.pick(sim=(20, 35), gpu=(8192, 8192))  # 256 MiB per buffer: 5x the H200's L2
g = np.random.default_rng(0)
u0 = g.uniform(0, 1, shape).astype(np.float32)
du, dout = cuda.to_device(u0), cuda.device_array(shape, np.float32)
want = stencil.heat_step_ref(u0.astype(np.float64), 0.2)
copy_src = cuda.to_device(u0)
copy_bw = 8.0 * u0.size / median_time(lambda: dout.copy_to_device(copy_src))  # bytes/s
grid6 = (math.ceil(shape[1] / TX), math.ceil(shape[0] / TY))
steps6 = [("naive", lambda: stencil.heat_step(du, dout, 0.2, "naive")),
          (viz.T("tiled, 1 row per thread"),
           lambda: stencil.heat_step(du, dout, 0.2, "tiled", (32, 8, 1))),
          (viz.T("tiled, 4 rows per thread"),
           lambda: stencil.heat_step(du, dout, 0.2, "tiled", (32, 8, 4))),
          (viz.T("rows: register window"),
           lambda: stencil.heat_step(du, dout, 0.2, "rows", (128, 1, 8))),
          (viz.T("your heat_step"), lambda: heat_step[grid6, (TX, TY)](du, dout, np.float32(0.2)))]
rates = {}
for name, fn in steps6:
    try:
        t = median_time(fn)
        assert np.allclose(dout.copy_to_host(), want, atol=1e-5), "wrong result"
    except Exception as exc:  # your kernel before the exercise is done
        print(prose.shown("{{name:26s}} skipped ({{error}}: {{why}})", name=name,
                          error=type(exc).__name__, why=exc))
        continue
    rates[name] = stencil.bytes_per_step(*shape) / t / 1e9
    print(prose.shown("{{name:26s}} {{ms:8.3f}} ms  {{gbs:8.1f}} GB/s = {{share:.2f}} of copy",
                      name=name, ms=t * 1e3, gbs=rates[name], share=rates[name] * 1e9 / copy_bw))
fig = viz.plot_bandwidth(rates, copy_bw / 1e9, title=(
    viz.T("heat step, {rows} x {cols} (simulator: meaningless)", rows=shape[0], cols=shape[1])
    if SIM else viz.T("heat step, {rows} x {cols}", rows=shape[0], cols=shape[1])))
report6 = bench.committed_report()  # the course's measured figures (docs/benchmarks.json)
if report6 is not None and bench.figure(report6, "stencil_vs_copy", "ratio") is not None:
    m6 = report6["measurements"]["stencil"]
    when = (m6.get("remeasured") or {}).get("date", report6["date"])
    ceil6 = (m6.get("remeasured") or {}).get("ceilings") or report6.get("ceilings", {})
    print(prose.shown("committed bench ({{gpu}}, {{date}}): {{label}}, {{shape}}: {{gbs:.0f}} GB/s "
                      "= {{share:.2f}} of its copy, {{copy:.0f}} GB/s",
                      gpu=report6["environment"].get("gpu"), date=when[:10], label=m6["label"],
                      shape=m6["shape"], gbs=m6["gb_s"],
                      share=bench.figure(report6, "stencil_vs_copy", "ratio"),
                      copy=ceil6.get("copy_gb_s", float("nan")))
          + ("" if SIM else f"; the copy here: {copy_bw / 1e9:.0f} GB/s"))

# %% [markdown]
# On a GPU both grids here are several times the H200's {{const.hardware.H200.l2_mb}} MB L2
# cache, so the data comes from DRAM, as in the bench (`cudacourse bench --only stencil`, a
# 16384 x 16384 grid, every variant and block shape; its committed figure is printed above).
# On the {{bench.gpu}} ({{bench.date}}), with the blocks of the cell above, the naive kernel
# reached only {{bench.ratio.stencil_naive_32x8x1_vs_copy:.2f}} of copy and the tiled one
# {{bench.ratio.stencil_tiled_32x8x1_vs_copy:.2f}} (one row per thread) and
# {{bench.ratio.stencil_tiled_32x8x4_vs_copy:.2f}} (four rows per thread): not the bandwidth
# but the instructions and the latency limited them. Each of the naive kernel's 9 loads costs
# 64-bit index arithmetic (Numba also checks every index for a negative value to wrap), and
# each thread has a single 4-byte load in flight. The `rows` kernel keeps a 3 x 3 window in
# registers while a thread walks down a column: one load per cell instead of 9 (the left and
# right neighbours come from the lanes beside it, by warp shuffles, lesson 2), all its loads
# issued before its first store, and about half the instructions per cell
# ({{bench.ratio.stencil_rows_128x1x8_vs_copy:.2f}} of copy in the same run, with the cell's
# 128 x 1 threads and 8 rows each; the course's best, `rowsblock`, whose committed figure is
# printed above, reached {{bench.ratio.stencil_vs_copy:.2f}}). The 9 reads per cell of the naive kernel do mostly hit
# the L1 cache, which is what shared memory would have provided. Shared-memory
# tiles pay off when a cell is re-used more often than the cache can hold: wider stencils,
# 3D grids (where the planes above and below do not fit in L1), or **temporal blocking**:
# load a tile with a halo of width k, do k steps on it in shared memory (the valid region
# shrinks by one cell per step), write the result once. Global memory traffic per step then
# drops by about k, the one way past the copy ceiling; the price is the halo cells computed
# redundantly by neighbouring blocks and k times the shared-memory traffic, so it pays only
# while those stay cheaper than the DRAM bytes saved. The further exercises come back to it.
#
# ## 2. The lattice Boltzmann method
#
# Instead of solving the Navier-Stokes equations for the velocity directly, the LBM
# follows **populations**: at every node, 9 numbers $f_i$ say how much fluid moves with
# each of the 9 lattice velocities $c_i$ (at rest, 4 along the axes, 4 diagonals: D2Q9).
# Density and velocity are their moments, $\rho = \sum_i f_i$ and
# $\rho\,\mathbf u = \sum_i f_i \mathbf c_i$. One time step:
#
# 1. **stream**: every population moves one node along its velocity. In the *pull* form,
#    node x gathers $f_i$ from its upstream neighbour $x - c_i$; each thread reads others'
#    values and writes only its own node, so no two threads write the same place;
# 2. **bounce-back**: if $x - c_i$ is solid (a wall, the obstacle), the population that
#    left x towards it comes back reversed: $f_i(x) = f_{\bar\imath}(x)$ with
#    $c_{\bar\imath} = -c_i$ (`OPP[i]`). This puts a no-slip wall half-way between the nodes;
# 3. **collide**: relax towards the local equilibrium with one relaxation time $\tau$, the
#    *BGK* collision (after Bhatnagar, Gross and Krook, 1954, who proposed it),
#    $f_i \leftarrow f_i + \omega\,(f_i^{eq}(\rho, \mathbf u) - f_i) + 3 w_i\, c_{i,x} F_x$,
#    with $f_i^{eq} = w_i \rho\,(1 + 3\,c_i\!\cdot\!\mathbf u + 4.5\,(c_i\!\cdot\!\mathbf u)^2 - 1.5\,\mathbf u^2)$
#    and $\omega = 1/\tau$. The last term is a body force driving the flow like a pressure
#    gradient. The viscosity is $\nu = (\tau - 1/2)/3$ in *lattice units*: lengths counted in
#    node spacings, times in time steps, so a velocity of a tenth means a tenth of a node
#    per step (speeds must stay well below the lattice's speed of sound, $1/\sqrt 3$).
#
# The stored populations are the post-collision ones. The directions, in order:

# %%
for i in range(9):
    print(f"i={i}: c=({CX[i]:+d}, {CY[i]:+d})  w={W[i]:.4f}  opposite {OPP[i]}")

# %%
quiz.ask("06_stencils_lbm.soa_layout")

# %% [solution] id=answer_soa_layout
# Question 3: Why f[9, ny, nx]. Answer as: answer_soa_layout = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_soa_layout = "c"
### END SOLUTION

# %% [tests] id=test_answer_soa_layout points=1
quiz.grade("06_stencils_lbm.soa_layout", answer_soa_layout)

# %% [markdown]
# ### Layout: structure of arrays
#
# `f` has shape `(9, ny, nx)`: one plane per direction, x fastest. Thread (x, y) reads
# `f[i, y - CY[i], x - CX[i]]`; the 32 threads of a warp have consecutive x, so for each i
# they read 32 consecutive floats of one plane. The other layout, `f[ny, nx, 9]`, keeps a
# node's 9 values together, which looks natural on a CPU.

# %% [markdown]
# ### Exercise: the fused LBM step
#
# Write `lbm_step(f_in, f_out, solid, omega, fx)`, one lattice node per thread, launched
# with blocks of `LBM_BLOCK` threads and a grid of `(ceil(nx / 16), ceil(ny / 4))` blocks,
# x along `cuda.threadIdx.x`. `solid` is a `(ny, nx)` uint8 mask; the lattice is periodic
# in x and y (walls and obstacles are solid nodes). For node (x, y):
#
# 1. outside the lattice: return; a **solid** node copies its 9 populations from f_in to
#    f_out and returns;
# 2. **pull**: for each i, the upstream node is `xs = (x - CX[i]) % nx`,
#    `ys = (y - CY[i]) % ny`; if it is solid, `g_i = f_in[OPP[i], y, x]` (bounce-back),
#    else `g_i = f_in[i, ys, xs]`. Keep the 9 values in `cuda.local.array(9, float32)`;
# 3. moments of the pulled values: `rho`, `ux = sum(CX[i] g_i) / rho`, `uy` likewise;
# 4. **collide** and write: `f_out[i, y, x] = g_i + omega * (feq_i - g_i) + 3 * W[i] * CX[i] * fx`.
#
# Read only `f_in`, write only your own node of `f_out`. The checker compares with
# `lbm.lbm_step_ref` on small channels with walls and an obstacle, and uses physics to name
# a mistake: the total mass must stay what it was (pull streaming and bounce-back move
# populations without creating any, and collision keeps each node's density; in float32
# the sum drifts only by rounding, a few parts in a million over many steps), and errors
# that sit only next to solid nodes point at bounce-back.

# %% [solution] id=lbm_step
@cuda.jit
def lbm_step(f_in, f_out, solid, omega, fx):
    ### BEGIN SOLUTION
    x, y = cuda.grid(2)
    ny, nx = solid.shape
    if x >= nx or y >= ny:
        return
    if solid[y, x]:
        for i in range(9):
            f_out[i, y, x] = f_in[i, y, x]
        return
    g = cuda.local.array(9, float32)
    rho = float32(0.0)
    jx = float32(0.0)
    jy = float32(0.0)
    for i in range(9):
        xs = (x - CX[i]) % nx
        ys = (y - CY[i]) % ny
        if solid[ys, xs]:
            g[i] = f_in[OPP[i], y, x]  # bounce-back
        else:
            g[i] = f_in[i, ys, xs]  # pull from upstream
        rho += g[i]
        jx += CX[i] * g[i]
        jy += CY[i] * g[i]
    ux = jx / rho
    uy = jy / rho
    usq = 1.5 * (ux * ux + uy * uy)
    for i in range(9):
        cu = CX[i] * ux + CY[i] * uy
        feq = W[i] * rho * (1.0 + 3.0 * cu + 4.5 * cu * cu - usq)
        f_out[i, y, x] = g[i] + omega * (feq - g[i]) + 3.0 * W[i] * CX[i] * fx
    ### END SOLUTION

# %% [tests] id=test_lbm_step points=5
cudacourse.check.check_lbm_step(lbm_step)
### BEGIN HIDDEN TESTS
cudacourse.check.check_lbm_step(lbm_step, hidden=cudacourse.check.Cases(
    seed=259384716, sizes=[(11, 20, 0), (10, 11, 1)]))
### END HIDDEN TESTS

# %% [markdown]
# ### A physical check: flow in a channel
#
# Fluid between two walls, pushed along x by a constant force, settles into the
# **Poiseuille** profile, a parabola: $u_x(y) = \frac{F}{2\nu}(y - y_0)(y_1 - y)$, with the
# walls at $y_0 = 0.5$ and $y_1 = n_y - 1.5$ (half-way between the solid rows and the first
# fluid rows). Your kernel, run for many steps on a channel (periodic along x, so one column
# is enough in the simulator), must reproduce it, and it must not lose any fluid.

# %%
ny_c, nx_c, steps_c = device.pick(sim=(10, 1, 400), gpu=(66, 32, 20000))
# With this tau, BGK's bounce-back wall sits exactly half-way between the nodes for this
# flow; at other values it sits slightly off (1 to 3% of the peak velocity at this width),
# an error that shrinks with the square of the channel width.
tau_c, force_c = 0.5 + math.sqrt(3 / 16), 1e-5
solid_c = lbm.channel(ny_c, nx_c)
a = cuda.to_device(lbm.init_f(solid_c))
b = cuda.device_array_like(a)
ds = cuda.to_device(solid_c.astype(np.uint8))
block_c = (1, 16) if SIM else LBM_BLOCK  # in the simulator: no idle threads on one column
grid_c = (math.ceil(nx_c / block_c[0]), math.ceil(ny_c / block_c[1]))
try:
    mass0 = a.copy_to_host()[:, ~solid_c].sum()
    t = time.perf_counter()
    for _ in range(steps_c):
        lbm_step[grid_c, block_c](a, b, ds, np.float32(1 / tau_c), np.float32(force_c))
        a, b = b, a
    cuda.synchronize()
    f_c = a.copy_to_host()
    print(prose.shown("{{steps}} steps of a {{ny}} x {{nx}} channel in {{s:.2f}} s", steps=steps_c,
                      ny=ny_c, nx=nx_c, s=time.perf_counter() - t))
    _, ux_c, _ = lbm.macroscopic(f_c, (force_c, 0.0))
    ux_c[solid_c] = 0.0  # the wall rows hold no fluid
    u_ref = lbm.poiseuille_ref(ny_c, force_c, tau_c)
    print(prose.shown("largest deviation from the parabola: {{dev:.3%}} of the peak velocity",
                      dev=np.abs(ux_c[:, 0] - u_ref).max() / u_ref.max()))
    print(prose.shown("mass before {{before:.6f}}, after {{after:.6f}}", before=mass0,
                      after=f_c[:, ~solid_c].sum()))
    fig = viz.plot_profile(ux_c[:, 0], u_ref, viz.T("Poiseuille flow, your lbm_step, {steps} "
                                                    "steps", steps=steps_c))
except Exception as exc:  # your kernel before the exercise is done
    print(prose.shown("skipped ({{error}}: {{why}})", error=type(exc).__name__, why=exc))

# %% [markdown]
# ### Bytes per lattice update, and fusing the step
#
# The fused kernel touches global memory only to read the 9 populations it pulls and to
# write the 9 new ones (plus a byte of mask per neighbour, from the cache): no shared memory
# is needed, since every population is read by exactly one thread. Performance is counted
# in million lattice updates per second (MLUPS) and, as for the stencil, against a copy.

# %%
quiz.ask("06_stencils_lbm.lbm_bytes")

# %% [solution] id=answer_lbm_bytes
# Question 4: Bytes per lattice update. Answer as: answer_lbm_bytes = <a number of bytes>, within 0.5
### BEGIN SOLUTION
answer_lbm_bytes = 72
### END SOLUTION

# %% [tests] id=test_answer_lbm_bytes points=1
quiz.grade("06_stencils_lbm.lbm_bytes", answer_lbm_bytes)

# %%
quiz.ask("06_stencils_lbm.fusion_traffic")

# %% [solution] id=answer_fusion_traffic
# Question 5: Streaming and collision as two kernels. Answer as: answer_fusion_traffic = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_fusion_traffic = "b"
### END SOLUTION

# %% [tests] id=test_answer_fusion_traffic points=1
quiz.grade("06_stencils_lbm.fusion_traffic", answer_fusion_traffic)

# %% [markdown]
# `lbm.lbm_step` is the library's fused kernel: the same step, unrolled over the 9
# directions (every population in a register, every weight a float32 constant), with
# float32 arithmetic throughout, and optionally an open inlet and outlet instead of the
# periodic x boundary. Your kernel joins the comparison, on a lattice that fills the GPU.

# %%
ny_p, nx_p = device.pick(sim=(8, 20), gpu=(1024, 4096))  # 151 MB per buffer: 3x the L2
solid_p = lbm.channel(ny_p, nx_p) | lbm.cylinder(ny_p, nx_p, nx_p / 4, ny_p / 2, ny_p / 8)
fa = cuda.to_device(lbm.init_f(solid_p, (0.05, 0.0)))
fb = cuda.device_array_like(fa)
dsp = cuda.to_device(solid_p.astype(np.uint8))
want_p = lbm.lbm_step_ref(fa.copy_to_host().astype(np.float64), solid_p, 1 / 0.6, (1e-5, 0.0))
grid_p = (math.ceil(nx_p / LBM_BLOCK[0]), math.ceil(ny_p / LBM_BLOCK[1]))
nodes = ny_p * nx_p
copy_f = cuda.to_device(fa.copy_to_host())
lbm_copy_bw = 2 * 4 * 9 * nodes / median_time(lambda: fb.copy_to_device(copy_f))
runs_p = [(viz.T("library, fused, unrolled"),
           lambda: lbm.lbm_step(fa, fb, dsp, 1 / 0.6, (1e-5, 0.0))),
          (viz.T("your lbm_step"),
           lambda: lbm_step[grid_p, LBM_BLOCK](fa, fb, dsp, np.float32(1 / 0.6),
                                               np.float32(1e-5)))]
lbm_rates = {}
for name, fn in runs_p:
    try:
        t = median_time(fn)
        assert np.allclose(fb.copy_to_host(), want_p, rtol=1e-4, atol=1e-6), "wrong result"
    except Exception as exc:
        print(prose.shown("{{name:26s}} skipped ({{error}}: {{why}})", name=name,
                          error=type(exc).__name__, why=exc))
        continue
    lbm_rates[name] = lbm.BYTES_PER_NODE * nodes / t / 1e9
    print(prose.shown("{{name:26s}} {{ms:8.3f}} ms  {{mlups:10.0f}} MLUPS  {{share:.2f}} of copy",
                      name=name, ms=t * 1e3, mlups=nodes / t / 1e6,
                      share=lbm_rates[name] * 1e9 / lbm_copy_bw))
ok, why = device.cupy_usable()
if ok:  # the same step in CuPy array operations: the library baseline
    import cupy as cp

    step_cp = lbm.ReferenceStepper(cp.asarray(solid_p), 1 / 0.6, (1e-5, 0.0), xp=cp)
    f_cp = cp.asarray(fa)
    t = median_time(lambda: step_cp.step(f_cp))
    lbm_rates[viz.T("CuPy array operations")] = lbm.BYTES_PER_NODE * nodes / t / 1e9
    print(prose.shown("{{name:26s}} {{ms:8.3f}} ms  {{mlups:10.0f}} MLUPS",
                      name=viz.T("CuPy array operations"), ms=t * 1e3, mlups=nodes / t / 1e6))
else:
    print(prose.shown("CuPy comparison skipped: {{why}}", why=why))
report6 = bench.committed_report()
if report6 is not None and bench.figure(report6, "lbm_vs_copy", "ratio") is not None:
    m6 = report6["measurements"]["lbm"]
    when = (m6.get("remeasured") or {}).get("date", report6["date"])
    print(prose.shown("committed bench ({{gpu}}, {{date}}): {{shape}}: {{mlups:.0f}} MLUPS, "
                      "{{share:.2f}} of copy, {{vs_cupy:.1f}}x the CuPy step",
                      gpu=report6["environment"].get("gpu"), date=when[:10], shape=m6["shape"],
                      mlups=bench.figure(report6, "lbm_mlups", "ratio"),
                      share=bench.figure(report6, "lbm_vs_copy", "ratio"),
                      vs_cupy=bench.figure(report6, "lbm_vs_cupy", "ratio")))
fig = viz.plot_bandwidth(lbm_rates, lbm_copy_bw / 1e9, title=(
    viz.T("LBM step, {rows} x {cols} (simulator: meaningless)", rows=ny_p, cols=nx_p)
    if SIM else viz.T("LBM step, {rows} x {cols}", rows=ny_p, cols=nx_p)))
if not SIM:  # thousands of steps of the whole lattice, buffers swapped on the device
    t = time.perf_counter()
    lbm.simulate(solid_p, 0.6, 2000, f0=fa.copy_to_host(), force=(1e-5, 0.0))
    print(prose.shown("{{steps}} steps of {{ny}} x {{nx}} nodes, with the copies to and from the "
                      "GPU: {{s:.2f}} s", steps=2000, ny=ny_p, nx=nx_p, s=time.perf_counter() - t))

# %% [markdown]
# ## 3. Flow past a cylinder: the vortex street
#
# Now an open channel: fluid enters on the left at a speed of a tenth of a node per step (the populations coming
# in from outside are the equilibrium at that velocity), leaves on the right, and meets a
# cylinder. Its **Reynolds number** $Re = u D / \nu$ (D: the cylinder's diameter) compares
# inertia with viscosity. Above about {{const.lbm.SHEDDING_REYNOLDS}} the wake stops being
# steady: vortices leave the cylinder alternately from the
# top and the bottom, the von Kármán vortex street. A small sideways push at the start
# breaks the symmetry so that shedding starts sooner.
#
# In the simulator this runs with the NumPy reference (`lbm.simulate(..., use_gpu=False)`,
# the same step as your kernel, vectorised), on a small lattice; on a GPU, with the fused
# kernel on a lattice with tens of times more nodes (the cell prints its size). Both run at the
# same Reynolds number: tau is computed from it and from D (`lbm.tau_for`).

# %%
if SIM:
    ny_v, nx_v, r_v, steps_v, every_v = 80, 300, 8, 5600, 280
else:
    ny_v, nx_v, r_v, steps_v, every_v = 512, 2048, 24, 24000, 800
u_in, re_v = 0.1, 100.0
tau_v = lbm.tau_for(re_v, u_in, 2 * r_v)
solid_v = lbm.cylinder(ny_v, nx_v, nx_v / 5, ny_v / 2, r_v)
f0_v = lbm.init_f(solid_v, (u_in, 0.0), kick=(nx_v / 5 + 2 * r_v, ny_v / 2, r_v))
t = time.perf_counter()
f_v, frames_v = lbm.simulate(solid_v, tau_v, steps_v, f0=f0_v, inflow=u_in, every=every_v)
print(prose.shown("{{steps}} steps of {{ny}} x {{nx}} nodes in {{s:.1f}} s (NumPy reference), "
                  "tau = {{tau:.3f}}, Re = {{re:.0f}}", steps=steps_v, ny=ny_v, nx=nx_v,
                  s=time.perf_counter() - t, tau=tau_v, re=re_v) if SIM else
      prose.shown("{{steps}} steps of {{ny}} x {{nx}} nodes in {{s:.1f}} s (fused kernel), "
                  "tau = {{tau:.3f}}, Re = {{re:.0f}}", steps=steps_v, ny=ny_v, nx=nx_v,
                  s=time.perf_counter() - t, tau=tau_v, re=re_v))
ux_v, uy_v = frames_v[-1]
fig = viz.plot_vorticity(ux_v, uy_v, solid_v,
                         viz.T("vorticity behind a cylinder, Re = {re:.0f}", re=re_v))

# %% [markdown]
# The same run over time (red: counter-clockwise, blue: clockwise). The wake starts
# symmetric, then the vortices detach one after the other:

# %%
viz.animate(frames_v, solid_v, every_v, stride=1 if SIM else 4)

# %%
quiz.ask("06_stencils_lbm.reynolds_wake")

# %% [solution] id=answer_reynolds_wake
# Question 6: Viscosity and the wake. Answer as: answer_reynolds_wake = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_reynolds_wake = "d"
### END SOLUTION

# %% [tests] id=test_answer_reynolds_wake points=1
quiz.grade("06_stencils_lbm.reynolds_wake", answer_reynolds_wake)

# %% [markdown]
# ## 4. Air past a wing
#
# A NACA 0012 airfoil (symmetric; its last two digits say it is 12 percent as thick as it is
# long; `lbm.naca0012` builds its mask) at an angle of attack of 8 degrees, nose up. Colour
# shows the speed: the flow is faster over the top than under the bottom, the streamlines
# bend down behind the wing. (At these low Reynolds numbers air behaves more like honey than
# like air around an aircraft, but the picture already has the main features.)
#
# Two things to know when reading it, printed under the picture: it is a snapshot of a short
# run, taken before the flow has crossed the whole lattice once, so the start-up (the starting
# vortex shed from the trailing edge) is still in it; and it is at a higher Reynolds number
# than the lift sweep below, for sharper streamlines. The sweep measures the forces
# properly: at one Reynolds number, averaged over a developed flow.

# %%
if SIM:
    ny_w, nx_w, chord, steps_w, tau_w = 110, 330, 64, 2500, 0.6
else:
    ny_w, nx_w, chord, steps_w, tau_w = 512, 1536, 300, 16000, 0.65
solid_w = lbm.naca0012(ny_w, nx_w, chord, 8.0, nx_w / 5, ny_w / 2)
t = time.perf_counter()
f_w, _ = lbm.simulate(solid_w, tau_w, steps_w, inflow=u_in)
_, ux_w, uy_w = lbm.macroscopic(f_w)
re_w, through_w = lbm.reynolds(u_in, chord, tau_w), steps_w * u_in / nx_w
print(prose.shown("{{steps}} steps of {{ny}} x {{nx}} nodes in {{s:.1f}} s", steps=steps_w,
                  ny=ny_w, nx=nx_w, s=time.perf_counter() - t))
fig = viz.plot_speed_streamlines(ux_w, uy_w, solid_w, viz.T(
    "NACA 0012 at 8 degrees, Re = {re:.0f}, after {through:.2f} flow-throughs: speed and "
    "streamlines", re=re_w, through=through_w))
prose.show("Re = {{re:.0f}} (chord {{chord}} nodes, tau = {{tau:.2f}}); the snapshot is taken "
           "after {{through:.2f}} flow-throughs (`nx / u` = {{t_through:.0f}} steps each), so the "
           "start-up transient is still in it. The lift sweep below runs at its own, lower Re "
           "(printed there), averaged over developed flow.",
           re=re_w, chord=chord, tau=tau_w, through=through_w, t_through=nx_w / u_in)

# %% [markdown]
# ### Lift and drag
#
# The force of the fluid on the wing comes from the bounce-back itself: every population
# that hits the wing and is reversed hands it twice its momentum, $2 f_i c_i$
# (`lbm.obstacle_force`, the momentum-exchange method). Along the flow that is the drag;
# across it, the lift. For a symmetric airfoil the lift is zero at zero angle and grows
# with the angle (thin-airfoil theory: $C_L \approx 2\pi\alpha$ at high Reynolds number;
# less in this viscous flow). Two things make the measurement honest:
#
# * **average, don't snapshot**: the flow starts impulsively, and the starting vortex plus
#   pressure waves bouncing between inlet and outlet make the instantaneous lift swing by as
#   much as its mean for about one flow-through time (`nx / u` steps). `lbm.wing_forces`
#   runs two flow-throughs and averages the force over the last quarter;
# * **compare coefficients at one Reynolds number**: a force in lattice units grows with
#   the chord, so it is divided by $\rho u^2 c / 2$; the small (simulator) and large (GPU)
#   lattices are the same geometry scaled, at the same $Re$, so their $C_L$ agree.

# %%
if SIM:
    ny_a, nx_a, chord_a = 70, 210, 44
else:  # the same geometry, 4 times finer
    ny_a, nx_a, chord_a = 280, 840, 176
re_a = 100.0
angles = [-6.0, 0.0, 3.0, 6.0, 9.0]
lift, drag = [], []
t = time.perf_counter()
for aoa in angles:
    s = lbm.naca0012(ny_a, nx_a, chord_a, aoa, nx_a / 5, ny_a / 2)
    cd_a, cl_a = lbm.wing_forces(s, re_a, chord_a, u_in)
    drag.append(cd_a)
    lift.append(cl_a)
    print(prose.shown("angle {{aoa:+5.1f}}: C_D {{cd:7.4f}}  C_L {{cl:+7.4f}}", aoa=aoa, cd=cd_a,
                      cl=cl_a))
print(prose.shown("{{n}} angles, {{ny}} x {{nx}} nodes, Re = {{re:.0f}}, in {{s:.1f}} s",
                  n=len(angles), ny=ny_a, nx=nx_a, re=re_a, s=time.perf_counter() - t))
fig = viz.plot_forces(angles, lift, drag)

# %% [markdown]
# ## Summary
#
# * A stencil computes each point of a grid from its neighbours. It does a few flops per
#   8 bytes of compulsory traffic: memory-bound, with a device-to-device copy as its
#   ceiling.
# * Shared-memory tiles need a halo, the ring of neighbours owned by other blocks,
#   corners included for a 9-point stencil; one strided loop over tile + halo loads it all,
#   and a barrier separates loading from computing. Boundary cells keep their values;
#   nothing is written in place.
# * Time steps alternate between two device buffers: swapping names costs nothing, and the
#   data never crosses to the host.
# * The lattice Boltzmann method moves 9 populations per node: pull streaming (each thread
#   gathers, writes only its own node: no races), bounce-back for walls (the opposite
#   direction, both components reversed), BGK collision. Stored as a structure of arrays,
#   every warp load is coalesced; fused into one kernel, a step moves
#   {{const.lbm.BYTES_PER_NODE}} bytes per node.
# * Physics checks the code: the Poiseuille parabola, mass conserved to rounding, lift that
#   grows with the angle of attack once averaged over a developed flow (a snapshot of the
#   starting transient can have either sign).
#
# `cudacourse bench --only stencil,lbm,lbm_cupy` measures the kernels on a GPU against a copy
# made in the same run (`stencil_vs_copy`, `lbm_vs_copy` and MLUPS) and the fused kernel
# against the same step in CuPy array operations (`lbm_vs_cupy`); the course's figures are
# in `docs/benchmarks.md`.
#
# ## Further exercises
#
# 1. **Temporal blocking.** Write a heat kernel that loads a (TY + 2k) x (TX + 2k) tile and
#    does k steps in shared memory before writing (the valid region shrinks by a cell per
#    step). Check it against `stencil.diffuse_ref` and measure it against the copy for
#    k = 1, 2, 4: when does it beat the one-step ceiling?
# 2. Rerun the cylinder well below the shedding threshold (`re_v = 20`: the cell computes tau
#    from Re and D, and the same tau would give different Re on the simulator's and the GPU's
#    cylinders, whose D differ) and then well above it (`re_v = 200`). How does the wake
#    change, and the shedding period? Measure it from `uy` at a point behind the cylinder
#    and compute the Strouhal number $St = f D / u$ (about {{const.lbm.CYLINDER_STROUHAL}}
#    for a cylinder).
# 3. Rewrite your `lbm_step` in the array-of-structures layout `f[ny, nx, 9]` and measure
#    both on a GPU. How does the ratio compare with the nine times more memory segments per
#    warp?
# 4. Sweep the angle of attack to twice the largest angle above. Where does the lift stop growing (stall)?
#    Does a finer lattice (double the chord) move it?
# 5. The pull kernel needs two copies of f. Look up the "AA pattern" or "esoteric pull":
#    how do they stream in place with a single array, and what does each thread then
#    read and write?
