# %% [markdown]
# # Lesson 7: below CUDA C, PTX and tensor cores
#
# The kernels so far did their arithmetic on the GPU's ordinary floating-point units, one
# float32 multiply-add per thread per instruction. Since Volta, every SM also has units that
# multiply whole small matrices in one instruction, and they are where a modern GPU's
# speed is: on an H200 they do many times more 16-bit matrix work per second than the
# ordinary units do float32 work. CUDA C reaches them through libraries (cuBLAS, cuDNN) or through the instructions
# themselves; so does Python. In this lesson you go below CUDA C:
#
# 1. what your Numba kernel becomes below Python;
# 2. what the matrix units compute, and which lane holds which element (exercise 1);
# 3. the 16-bit number formats: the precision traded for the speed;
# 4. `ldmatrix` and `cp.async`: feeding the matrix units from shared memory, and a tiled
#    16-bit matmul (exercise 2);
# 5. the fused attention loop of lesson 5 on tensor cores (exercise 3);
# 6. why Hopper's `wgmma` is the next step.
# %% [readonly] id=setup
import cudacourse
cudacourse.setup()  # first: a real GPU or the CUDA simulator, chosen before numba.cuda loads
from cudacourse.course import quiz
import cudacourse.check
import math
import numpy as np
from numba import cuda, float32, uint16
import matplotlib.pyplot as plt
from cudacourse.runtime import asm, device, fragments
from cudacourse.course import prose
from cudacourse.runtime import tensorcore as tc
# cp.async and ldmatrix need shared tiles on 16-byte boundaries: ask a GPU for that
# alignment (the simulator's shared arrays take no alignment option, and need none)
ALIGN = None if device.is_simulator() else 16
# %% [markdown]
# ## 1. PTX and SASS
#
# Numba does not compile your kernel to machine code directly. It translates the Python to
# LLVM's intermediate form, and NVIDIA's libNVVM turns that into *PTX* (Parallel Thread
# Execution): a virtual instruction set, the same for every NVIDIA GPU generation, with
# unlimited virtual registers. The driver (or `ptxas`, the PTX assembler) then translates
# the PTX into *SASS*, the real machine code of one GPU generation (sm_90 for Hopper), where
# registers are allocated, instructions scheduled and some PTX instructions become several.
#
# `asm.ptx(kernel, *args)` gives the PTX for the arguments you would launch with. On a GPU it
# is Numba's `kernel.inspect_asm()`; in the simulator the course compiles the kernel for an
# H200 (sm_90) with NVIDIA's libNVVM and ptxas, in a child process, the same compile that
# checks every kernel you hand in.
# %%
@cuda.jit
def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


x = np.ones(1000, np.float32)
text = asm.ptx(saxpy, np.float32(2.0), x, x, x)
print(len(text.splitlines()), "lines of PTX; the arithmetic and the memory accesses:")
for line in text.splitlines():
    if any(op in line for op in ("ld.global", "st.global", "fma.rn", "setp")):
        print("   ", line.strip())
# %% [markdown]
# `ld.global.f32` and `st.global.f32` are the loads and the store, `fma.rn.f32` the
# multiply-add rounded once (to nearest), `setp` the comparison of the bounds guard. SASS is
# one step further down; reading it needs NVIDIA's disassembler (`nvdisasm` or `cuobjdump`,
# from a full CUDA toolkit, not from pip's wheels):
# %%
tool = asm.disassembler()
if tool is None:
    print("No nvdisasm or cuobjdump here: SASS cannot be shown (install a CUDA toolkit, or",
          "set CUDA_HOME to one); the PTX above is what every GPU starts from.")
else:
    sass = asm.sass(saxpy, np.float32(2.0), x, x, x)
    print("\n".join(l for l in sass.splitlines() if "FFMA" in l or "LDG" in l or "STG" in l))
# %% [markdown]
# PTX matters here because it has instructions that Numba's Python has no name for. The
# course's `tensorcore` module emits them through Numba's `intrinsic` mechanism and an LLVM
# inline-assembly call, as `intrinsics` did for 16-byte loads in lesson 3: `mma.sync`,
# `ldmatrix` and `cp.async`. In the simulator each one is plain Python with the same results.
#
# ## 2. What a tensor core computes
#
# A *tensor core* is a unit of the SM that computes a small matrix product and sum,
# $D = A B + C$, in one instruction, issued by a whole warp at once. The shape this lesson
# uses is `m16n8k16`: A is 16 x 16, B is 16 x 8, C and D are 16 x 8. A and B are
# *bfloat16* numbers (float32 with its low 16 bits cut off; section 4 measures what that
# costs); the products are summed in float32, with C, into a float32 D.
# In PTX:
#
#     mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0,d1,d2,d3}, {a0,a1,a2,a3}, {b0,b1}, {c0,c1,c2,c3};
#
# `sync.aligned`: all 32 lanes of the warp execute it together (the simulator raises an
# error when some lanes do not; a GPU would hang or compute garbage). `row.col`: A is read by
# rows, B by columns. From Python it is `tc.mma_bf16(a, b, c)`, with each lane passing its
# own four registers of A, two of B and four of C, and getting its four of D back.
# %%
quiz.ask("07_ptx_tensor_cores.mma_flops")
# %% [solution] id=answer_mma_flops
# Question 1: The work of one mma. Answer as: answer_mma_flops = <a number of flop>, within 0.5
### BEGIN SOLUTION
answer_mma_flops = 4096
### END SOLUTION
# %% [tests] id=test_answer_mma_flops points=1
quiz.grade("07_ptx_tensor_cores.mma_flops", answer_mma_flops)
# %% [markdown]
# ## 3. Fragments: which lane holds which element
#
# No lane holds a whole matrix. Each holds a *fragment*: a few registers with the elements
# the PTX ISA assigns to it, and the assignment is the whole difficulty of programming tensor
# cores by hand. Split lane l into g = l // 4 (its group, 0-7) and t = l % 4 (its place in
# the group, 0-3). For `m16n8k16`:
#
# - **A** (16 x 16): register r holds the two elements A[g + 8 (r % 2), 2t + 8 (r // 2)] and
#   the one to its right, packed in 32 bits (the left one in the low half);
# - **B** (16 x 8): register r holds B[2t + 8r, g] and the one below it;
# - **C and D** (16 x 8): register i holds C[g + 8 (i // 2), 2t + i % 2].
#
# The picture, drawn from `fragments`' tables (the same tables the simulator and the checkers
# use), colours each element by the lane that holds it and writes the lane's number:
# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 5), gridspec_kw={"width_ratios": [16, 8, 8]})
panels = [("A (16 x 16)", fragments.owner(fragments.a_layout(), 16, 16)),
          ("B (16 x 8)", fragments.owner(fragments.b_layout(), 16, 8)),
          ("C, D (16 x 8)", fragments.owner(fragments.c_layout(), 16, 8))]
for ax, (title, own) in zip(axes, panels):
    lane = own[..., 0]
    ax.imshow(lane % 8 + 8 * (lane // 4 % 2), cmap="tab20", vmin=0, vmax=19)
    for (r, c), l in np.ndenumerate(lane):
        ax.text(c, r, str(l), ha="center", va="center", fontsize=6)
    ax.set_title(title)
    ax.set_xticks(range(0, lane.shape[1], 2))
    ax.set_yticks(range(0, 16, 2))
plt.tight_layout()
plt.show()
# %% [markdown]
# Read it by rows: in C, row 0 is held by lanes 0-3 (two columns each), row 8 by the same
# lanes' registers 2 and 3. In A, the same four lanes hold row 0 and row 8, columns 0-7 in
# registers 0 and 1 and columns 8-15 (the k offset 8) in registers 2 and 3. In B the roles
# turn: the column comes from g, the row (k) from t. `fragments.mma_reference(A, B, C)`
# computes what the instruction gives, and `fragments.c_fragments` and its companions move
# between matrices and fragments, so the layout can be checked with NumPy:
# %%
lay = fragments.c_layout()
print("lane 5 holds C at (row, col):", [tuple(int(v) for v in rc) for rc in lay[5]])
# %%
quiz.ask("07_ptx_tensor_cores.lane_holds")
# %% [solution] id=answer_lane_holds
# Question 2: Which elements lane 13 holds. Answer as: answer_lane_holds = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_lane_holds = "b"
### END SOLUTION
# %% [tests] id=test_answer_lane_holds points=1
quiz.grade("07_ptx_tensor_cores.lane_holds", answer_lane_holds)
# %% [markdown]
# ### Exercise 1: one warp, one 16 x 8 tile
#
# Write `mma_tile(a, b, c, d)`: one warp (32 threads, launched `[1, 32]`) computes
# `d = a @ b + c` with one `tc.mma_bf16`. `a` is 16 x 16, `b` 16 x 8, `c` and `d` 16 x 8,
# all float32 arrays in global memory. Each lane:
#
# 1. builds its four A registers with `tc.pack_bf16x2(lo, hi)` (it rounds two floats to
#    bfloat16 and packs them, `lo` in the low half: the left element of the pair);
# 2. builds its two B registers the same way (the pair is two rows of one column of `b`);
# 3. reads its four C values, calls `r = tc.mma_bf16((a0, a1, a2, a3), (b0, b1), (c0, c1, c2,
#    c3))`;
# 4. stores its four results `r[0] .. r[3]` where they belong in `d`.
#
# The checker compares your `d` with what each of the usual fragment mistakes would give (A
# transposed, rows g and g + 8 swapped, the k offset 8 missing, B read as if row-major, C
# left out, D rounded to bfloat16) and names the one that matches.
# %% [solution] id=mma_tile
@cuda.jit
def mma_tile(a, b, c, d):
    lane = cuda.threadIdx.x
    g = lane // 4  # the group: rows g and g + 8 of A, C and D; column g of B
    t = lane % 4   # the place in the group: columns 2t, 2t + 1 (and + 8) of A; rows of B
    ### BEGIN SOLUTION
    fa = (tc.pack_bf16x2(a[g, 2 * t], a[g, 2 * t + 1]),
          tc.pack_bf16x2(a[g + 8, 2 * t], a[g + 8, 2 * t + 1]),
          tc.pack_bf16x2(a[g, 2 * t + 8], a[g, 2 * t + 9]),
          tc.pack_bf16x2(a[g + 8, 2 * t + 8], a[g + 8, 2 * t + 9]))
    fb = (tc.pack_bf16x2(b[2 * t, g], b[2 * t + 1, g]),
          tc.pack_bf16x2(b[2 * t + 8, g], b[2 * t + 9, g]))
    acc = (c[g, 2 * t], c[g, 2 * t + 1], c[g + 8, 2 * t], c[g + 8, 2 * t + 1])
    r = tc.mma_bf16(fa, fb, acc)
    d[g, 2 * t] = r[0]
    d[g, 2 * t + 1] = r[1]
    d[g + 8, 2 * t] = r[2]
    d[g + 8, 2 * t + 1] = r[3]
    ### END SOLUTION
# %% [tests] id=test_mma_tile points=3
cudacourse.check.check_mma_tile(mma_tile)
### BEGIN HIDDEN TESTS
cudacourse.check.check_mma_tile(mma_tile, hidden=cudacourse.check.Cases(seed=70111, sizes=[2, 9]))
### END HIDDEN TESTS
# %% [markdown]
# ## 4. bfloat16 and TF32: the precision traded for speed
#
# bfloat16 ("brain float") is float32 with the low 16 bits cut off: the same sign and
# 8-bit exponent (so the same range, no overflow where float32 has none), but 7 stored
# mantissa bits instead of float32's `23`. *TF32* ("tensor float") keeps float32's exponent and 10
# mantissa bits; the tensor cores read it from ordinary float32 registers and ignore the
# low 13 bits (`mma` with `.tf32` inputs, shape `m16n8k8`). Both sum their products in
# float32. What does the rounding cost in a matmul? Measured here with NumPy, against the
# exact (float64) product of the same float32 matrices:
# %%
rng = np.random.default_rng(7)
n = 256
a32 = rng.standard_normal((n, n)).astype(np.float32)
b32 = rng.standard_normal((n, n)).astype(np.float32)
exact = a32.astype(np.float64) @ b32.astype(np.float64)


def error_of(a, b):
    """Largest error of a float64 product of rounded inputs, relative to the largest |C|."""
    got = a.astype(np.float64) @ b.astype(np.float64)
    return float(np.abs(got - exact).max() / np.abs(exact).max())


errors = {"float32 (NumPy's float32 matmul)":
              float(np.abs(a32 @ b32 - exact).max() / np.abs(exact).max()),
          "TF32 inputs (rounded, cvt.rna)": error_of(fragments.to_tf32(a32),
                                                     fragments.to_tf32(b32)),
          "TF32 inputs (truncated, as mma reads raw float32)":
              error_of(fragments.round_tf32(a32), fragments.round_tf32(b32)),
          "bfloat16 inputs": error_of(fragments.round_bf16(a32), fragments.round_bf16(b32))}
for name, e in errors.items():
    print(f"{name:52s} {e:.1e}")
# %% [markdown]
# Each input's rounding error is random in sign, so a sum of k products errs by about
# $\sqrt{k}$ times one rounding, not k times. For training and inference that is usually
# enough (bfloat16 was designed for it); for a linear solver or a simulation it may not be,
# which is why cuBLAS keeps float32 as its default and TF32 is opt-in in PyTorch
# (`torch.backends.cuda.matmul.allow_tf32`).
# %%
quiz.ask("07_ptx_tensor_cores.bf16_error")
# %% [solution] id=answer_bf16_error
# Question 3: The rounding error of bfloat16. Answer as: answer_bf16_error = <a number>, within 0.5
### BEGIN SOLUTION
answer_bf16_error = 8
### END SOLUTION
# %% [tests] id=test_answer_bf16_error points=1
quiz.grade("07_ptx_tensor_cores.bf16_error", answer_bf16_error)
# %% [markdown]
# ## 5. Feeding tensor cores: `ldmatrix` and `cp.async`
#
# In exercise 1 every lane loaded its elements one by one from global memory. A real matmul
# stages tiles of A and B in shared memory (lesson 4) and reads fragments from there, and two
# instructions make that fast.
#
# **`ldmatrix`** loads 8 x 8 matrices of 16-bit values from shared memory straight into
# fragment layout. Each lane gives the address of one 8-element row (16 bytes); lanes
# 8m .. 8m + 7 the rows of matrix m. Lane l receives, in register m, the pair
# M_m[g, 2t], M_m[g, 2t + 1]: exactly one register of an A fragment. With `.trans` it
# receives M_m[2t, g], M_m[2t + 1, g]: a B fragment from a tile stored k-major (row = k).
# For a 16 x 16 A tile `sa`, one call gives all four A registers:
#
#     fa = tc.ldmatrix_x4(sa, lane % 16, 8 * (lane // 16))     # rows 0-15, columns 0 or 8
#     fb = tc.ldmatrix_x2_trans(sb, lane % 16, col)             # B: k rows 0-15, 8 columns
#
# (lanes 0-7 address rows 0-7 of columns 0-7, matrix 0 = register 0; lanes 8-15 rows 8-15,
# register 1; lanes 16-31 the same rows 8 columns further, registers 2 and 3.)
# %%
quiz.ask("07_ptx_tensor_cores.ldmatrix_lanes")
# %% [solution] id=answer_ldmatrix_lanes
# Question 4: Addresses of ldmatrix.x4. Answer as: answer_ldmatrix_lanes = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_ldmatrix_lanes = "d"
### END SOLUTION
# %% [tests] id=test_answer_ldmatrix_lanes points=1
quiz.grade("07_ptx_tensor_cores.ldmatrix_lanes", answer_ldmatrix_lanes)
# %% [markdown]
# **`cp.async`** (Ampere and later) copies 4, 8 or 16 bytes from global to shared memory
# without passing through a register, and without waiting: the thread goes on while the
# copy is in flight. That is how a kernel loads the next tile while the tensor cores work on
# this one. The rules:
#
# - `tc.cp_async16(dst, r, c, src, r2, c2)` issues a copy of 16 bytes (8 bfloat16 values);
#   both addresses must be 16-byte aligned;
# - `tc.cp_async_commit()` closes the thread's copies issued so far into a *group*;
# - `tc.cp_async_wait(n)` waits until all but the `n` newest groups of *this thread* have
#   arrived (`n = 0`: all of them);
# - then `cuda.syncthreads()`: the wait says nothing about other threads' copies, and the
#   tile is made of everyone's.
#
# The double-buffered loop keeps one group in flight: issue tile k + 1, commit,
# `cp_async_wait(1)` (tile k has arrived, tile k + 1 may still be copying), barrier, compute
# on tile k. The simulator keeps the rule honestly: a copy's bytes are NaN until the copying
# thread waits, and `ldmatrix` on bytes still in flight stops with `AsyncCopyError`.
# %%
quiz.ask("07_ptx_tensor_cores.cp_async_barrier")
# %% [solution] id=answer_cp_async_barrier
# Question 5: After cp_async_wait. Answer as: answer_cp_async_barrier = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_cp_async_barrier = "c"
### END SOLUTION
# %% [tests] id=test_answer_cp_async_barrier points=1
quiz.grade("07_ptx_tensor_cores.cp_async_barrier", answer_cp_async_barrier)
# %% [markdown]
# ### Exercise 2: a tiled bfloat16 matmul from shared memory
#
# Write the k loop of `mma_matmul(a, b, c)`: `a` (m x k) and `b` (k x n) hold bfloat16 bit
# patterns (`uint16`, made with `fragments.to_bf16_bits`), `c` (m x n) is float32. A block
# of 64 threads (two warps) computes a 16 x 16 tile of `c`: warp w the 16 x 8 half at columns
# 8w .. 8w + 7. For each k tile of 16:
#
# 1. copy the 16 x 16 tile of `a` (rows `row0..`, columns `k0..`) into `sa` and the 16 x 16
#    tile of `b` (rows `k0..`, columns `col0..`) into `sb`: 32 chunks of 16 bytes each, one
#    `tc.cp_async16` per thread (warp 0 copies A, warp 1 copies B, or any split you like);
# 2. commit, wait, and make the tiles visible to the whole block;
# 3. `tc.ldmatrix_x4` for A's fragment, `tc.ldmatrix_x2_trans` for B's (8 columns from
#    8 * warp);
# 4. `acc = tc.mma_bf16(fa, fb, acc)`;
# 5. a barrier before the next tile overwrites `sa` and `sb`.
#
# The tiles are declared 16-byte aligned (`alignment=ALIGN`, from the setup cell), as
# `cp.async` and `ldmatrix` need; the store of `acc` (the C layout) is written for you.
# The checker names a loop that skips the last tile, B's fragment without `.trans`, A's k
# offset missing, an accumulator rounded to bfloat16, and a missing barrier after the wait.
# %% [solution] id=mma_matmul
@cuda.jit
def mma_matmul(a, b, c):
    sa = cuda.shared.array((16, 16), uint16, alignment=ALIGN)
    sb = cuda.shared.array((16, 16), uint16, alignment=ALIGN)
    tid = cuda.threadIdx.x
    lane = tid % 32
    warp = tid // 32
    row0 = cuda.blockIdx.y * 16
    col0 = cuda.blockIdx.x * 16
    acc = (float32(0.0), float32(0.0), float32(0.0), float32(0.0))
    for k0 in range(0, a.shape[1], 16):
        ### BEGIN SOLUTION
        r = lane // 2  # each warp copies one 16 x 16 tile: row r, 8 columns from ch
        ch = 8 * (lane % 2)
        if warp == 0:
            tc.cp_async16(sa, r, ch, a, row0 + r, k0 + ch)
        else:
            tc.cp_async16(sb, r, ch, b, k0 + r, col0 + ch)
        tc.cp_async_commit()
        tc.cp_async_wait(0)  # this thread's copy has landed...
        cuda.syncthreads()   # ...and everyone's
        fa = tc.ldmatrix_x4(sa, lane % 16, 8 * (lane // 16))
        fb = tc.ldmatrix_x2_trans(sb, lane % 16, 8 * warp)
        acc = tc.mma_bf16(fa, fb, acc)
        cuda.syncthreads()   # everyone is done with the tiles before they are overwritten
        ### END SOLUTION
    g = lane // 4
    t = lane % 4
    col = col0 + 8 * warp + 2 * t
    c[row0 + g, col] = acc[0]
    c[row0 + g, col + 1] = acc[1]
    c[row0 + g + 8, col] = acc[2]
    c[row0 + g + 8, col + 1] = acc[3]
# %% [tests] id=test_mma_matmul points=4
cudacourse.check.check_mma_matmul(mma_matmul)
### BEGIN HIDDEN TESTS
cudacourse.check.check_mma_matmul(mma_matmul, hidden=cudacourse.check.Cases(seed=70222, sizes=[(48, 32, 16), (16, 80, 32)]))
### END HIDDEN TESTS
# %% [markdown]
# The course's `matmul_mma.matmul_bf16` is this kernel grown up: a block computes a
# 128 x 128 tile with 8 warps, each warp a 64 x 32 grid of `mma` tiles whose accumulators
# stay in registers, three shared-memory buffers in a ring so that `cp.async` runs two
# tiles ahead, and rows *swizzled* (16-byte chunks permuted per row) so that the eight rows
# one `ldmatrix` reads fall in different banks. Here it is on a small problem, against
# NumPy:
# %%
from cudacourse.kernels import matmul_mma
m_, k_, n_ = device.pick(sim=(64, 64, 64), gpu=(1024, 1024, 1024))
a_ = rng.standard_normal((m_, k_)).astype(np.float32)
b_ = rng.standard_normal((k_, n_)).astype(np.float32)
got = matmul_mma.matmul_bf16(a_, b_)
want = matmul_mma.matmul_bf16_ref(a_, b_)
print(f"matmul_bf16 {m_} x {k_} x {n_}: largest error relative to the largest |C| "
      f"{float(np.abs(got - want).max() / np.abs(want).max()):.1e}")
print("measured on a GPU, at 4096^3, against cuBLAS bf16:",
      prose.measured("bench.ratio.matmul_mma_bf16_vs_cublas_bf16", ".2f"))
# %% [markdown]
# ## 6. The fused attention loop on tensor cores
#
# Lesson 5's fused attention computed one query row per thread on the float32 units. On
# tensor cores a warp owns 16 query rows, and both products become `mma`s:
#
# - **S = Q K^T**: Q's 16 x 16 tile (head dimension d = 16) is the A fragment, loaded once;
#   K^T is the B operand, and B[k, n] = K[n, k] means that lane (g, t) reads key row g,
#   columns 2t, 2t + 1 (and + 8): K stored row by row *is* the "col" layout. Sixteen keys
#   take two `mma`s, one per 8 keys, giving two C fragments s0, s1.
# - **the online softmax** in float32, as in lesson 5, per row: lane (g, t) holds four
#   scores of row g and four of row g + 8; the row's maximum needs the other three lanes of
#   the group, two `cuda.shfl_xor_sync` steps (xor 1, xor 2).
# - **O += P V**: the C fragments of the two score tiles are, element for element, the A
#   fragment of the 16 x 16 P (rows g, g + 8; columns 2t, 2t + 1 and 8 + 2t, 8 + 2t + 1), so
#   P goes from accumulator to operand by packing pairs to bfloat16, with no trip through
#   memory. V (16 keys x 16 dims) is B, two `mma`s for the two 8-column halves of O.
#
# ### Exercise 3: the inner loop
#
# Fill in the loop body of `mma_attention(q, k, v, o, scale)`: one warp per 16 query rows
# (grid `seq // 16`, 32 threads), d = 16, keys in tiles of 16. The state per lane: `m_lo`,
# `m_hi` (running maxima of rows g and g + 8), `l_lo`, `l_hi` (this lane's part of the
# running sums; the group's four parts are added after the loop), `o0`, `o1` (the O
# fragments for columns 0-7 and 8-15). Per tile: the two score fragments by `mma`, the new
# maxima (times `scale`) across the group, the rescale factors exp(m - m_new), the eight
# probabilities exp(s * scale - m_new), the sums, P packed to bfloat16 as an A fragment, V's
# two B fragments, and O rescaled and accumulated by two `mma`s. The checker names a loop
# that skips the last key tile, accumulators that are not rescaled, the scale left out, and
# exp overflowing when no maximum is subtracted (its last case has scores far beyond exp's
# range).
# %% [solution] id=mma_attention
@cuda.jit
def mma_attention(q, k, v, o, scale):
    lane = cuda.threadIdx.x
    g = lane // 4
    t = lane % 4
    r0 = cuda.blockIdx.x * 16
    qa = (tc.pack_bf16x2(q[r0 + g, 2 * t], q[r0 + g, 2 * t + 1]),
          tc.pack_bf16x2(q[r0 + g + 8, 2 * t], q[r0 + g + 8, 2 * t + 1]),
          tc.pack_bf16x2(q[r0 + g, 2 * t + 8], q[r0 + g, 2 * t + 9]),
          tc.pack_bf16x2(q[r0 + g + 8, 2 * t + 8], q[r0 + g + 8, 2 * t + 9]))
    z = float32(0.0)
    m_lo = float32(-math.inf)
    m_hi = float32(-math.inf)
    l_lo = float32(0.0)
    l_hi = float32(0.0)
    o0 = (z, z, z, z)
    o1 = (z, z, z, z)
    for j0 in range(0, k.shape[0], 16):
        ### BEGIN SOLUTION
        # S = Q K^T for keys j0..j0+7 (s0) and j0+8..j0+15 (s1): B[kk, n] = K[j0 + n, kk]
        kb0 = (tc.pack_bf16x2(k[j0 + g, 2 * t], k[j0 + g, 2 * t + 1]),
               tc.pack_bf16x2(k[j0 + g, 2 * t + 8], k[j0 + g, 2 * t + 9]))
        kb1 = (tc.pack_bf16x2(k[j0 + 8 + g, 2 * t], k[j0 + 8 + g, 2 * t + 1]),
               tc.pack_bf16x2(k[j0 + 8 + g, 2 * t + 8], k[j0 + 8 + g, 2 * t + 9]))
        s0 = tc.mma_bf16(qa, kb0, (z, z, z, z))
        s1 = tc.mma_bf16(qa, kb1, (z, z, z, z))
        # the rows' new maxima: this lane's four scores of each row, then the group's
        x_lo = max(max(s0[0], s0[1]), max(s1[0], s1[1])) * scale
        x_hi = max(max(s0[2], s0[3]), max(s1[2], s1[3])) * scale
        x_lo = max(x_lo, cuda.shfl_xor_sync(0xFFFFFFFF, x_lo, 1))
        x_lo = max(x_lo, cuda.shfl_xor_sync(0xFFFFFFFF, x_lo, 2))
        x_hi = max(x_hi, cuda.shfl_xor_sync(0xFFFFFFFF, x_hi, 1))
        x_hi = max(x_hi, cuda.shfl_xor_sync(0xFFFFFFFF, x_hi, 2))
        n_lo = max(m_lo, x_lo)
        n_hi = max(m_hi, x_hi)
        a_lo = math.exp(m_lo - n_lo)  # rescales what was summed with the old maximum
        a_hi = math.exp(m_hi - n_hi)
        p00 = math.exp(s0[0] * scale - n_lo)
        p01 = math.exp(s0[1] * scale - n_lo)
        p02 = math.exp(s0[2] * scale - n_hi)
        p03 = math.exp(s0[3] * scale - n_hi)
        p10 = math.exp(s1[0] * scale - n_lo)
        p11 = math.exp(s1[1] * scale - n_lo)
        p12 = math.exp(s1[2] * scale - n_hi)
        p13 = math.exp(s1[3] * scale - n_hi)
        l_lo = l_lo * a_lo + p00 + p01 + p10 + p11
        l_hi = l_hi * a_hi + p02 + p03 + p12 + p13
        # P as the A fragment: the C layout of s0, s1 is A's layout of the 16 x 16 P
        pa = (tc.pack_bf16x2(p00, p01), tc.pack_bf16x2(p02, p03),
              tc.pack_bf16x2(p10, p11), tc.pack_bf16x2(p12, p13))
        # V as B: B[kk, n] = V[j0 + kk, n], for output columns 0-7 (vb0) and 8-15 (vb1)
        vb0 = (tc.pack_bf16x2(v[j0 + 2 * t, g], v[j0 + 2 * t + 1, g]),
               tc.pack_bf16x2(v[j0 + 2 * t + 8, g], v[j0 + 2 * t + 9, g]))
        vb1 = (tc.pack_bf16x2(v[j0 + 2 * t, g + 8], v[j0 + 2 * t + 1, g + 8]),
               tc.pack_bf16x2(v[j0 + 2 * t + 8, g + 8], v[j0 + 2 * t + 9, g + 8]))
        o0 = tc.mma_bf16(pa, vb0, (o0[0] * a_lo, o0[1] * a_lo, o0[2] * a_hi, o0[3] * a_hi))
        o1 = tc.mma_bf16(pa, vb1, (o1[0] * a_lo, o1[1] * a_lo, o1[2] * a_hi, o1[3] * a_hi))
        m_lo = n_lo
        m_hi = n_hi
        ### END SOLUTION
    # the row sums: the four lanes of a group each hold a part
    l_lo += cuda.shfl_xor_sync(0xFFFFFFFF, l_lo, 1)
    l_lo += cuda.shfl_xor_sync(0xFFFFFFFF, l_lo, 2)
    l_hi += cuda.shfl_xor_sync(0xFFFFFFFF, l_hi, 1)
    l_hi += cuda.shfl_xor_sync(0xFFFFFFFF, l_hi, 2)
    o[r0 + g, 2 * t] = o0[0] / l_lo
    o[r0 + g, 2 * t + 1] = o0[1] / l_lo
    o[r0 + g + 8, 2 * t] = o0[2] / l_hi
    o[r0 + g + 8, 2 * t + 1] = o0[3] / l_hi
    o[r0 + g, 2 * t + 8] = o1[0] / l_lo
    o[r0 + g, 2 * t + 9] = o1[1] / l_lo
    o[r0 + g + 8, 2 * t + 8] = o1[2] / l_hi
    o[r0 + g + 8, 2 * t + 9] = o1[3] / l_hi
# %% [tests] id=test_mma_attention points=4
cudacourse.check.check_mma_attention(mma_attention)
### BEGIN HIDDEN TESTS
cudacourse.check.check_mma_attention(mma_attention, hidden=cudacourse.check.Cases(seed=70333, sizes=[(48, 64), (32, 80)]))
### END HIDDEN TESTS
# %% [markdown]
# The course's `attention_mma` module is this loop with the rest of FlashAttention-2 around
# it: K and V tiles staged in shared memory by `cp.async` and read by `ldmatrix`, several
# warps per block sharing them, d = 64 or 128, causal masking, exp computed as `ex2` with
# the scale folded into log2(e). Its figures, once a GPU run records them:
# %%
for name, key in [("bf16 attention vs SDPA bf16 (cuDNN), 16 x 4096 x 64",
                   "bench.ratio.attention_mma_bf16_vs_sdpa_bf16"),
                  ("the same, causal", "bench.ratio.attention_mma_bf16_vs_sdpa_bf16_causal"),
                  ("the same, d = 128", "bench.ratio.attention_mma_bf16_vs_sdpa_bf16_d128"),
                  ("bf16 attention vs the course's float32 fused kernel",
                   "bench.ratio.attention_mma_bf16_vs_fused_f32")]:
    print(f"{name:55s} {prose.measured(key, '.2f')}")
# %% [markdown]
# ## 7. The next step: Hopper's `wgmma`
#
# `mma.sync` has three costs that grow with the tile: every operand passes through registers
# (ldmatrix first, then the instruction reads them), one warp's 16 x 8 tile is small, and the
# warp waits for the result. Hopper (sm_90) keeps `mma.sync` but adds `wgmma.mma_async`:
#
# - issued by a *warpgroup*, four consecutive warps (128 threads), for tiles up to 64 x 256;
# - operands read from shared memory through *matrix descriptors* (a 64-bit word giving the
#   tile's address, stride and swizzle), so no `ldmatrix` and far fewer registers;
# - asynchronous: `wgmma.commit_group` and `wgmma.wait_group`, like `cp.async`'s groups, so
#   the warps issue the next tile's loads (by the Tensor Memory Accelerator, TMA) while the
#   tensor cores multiply.
#
# cuBLAS and FlashAttention-3 reach Hopper's peak this way. Numba can emit `wgmma` through
# the same `intrinsic` seam; what it costs is the descriptor and TMA set-up, the next
# chapter beyond this course.
# %%
quiz.ask("07_ptx_tensor_cores.wgmma_next")
# %% [solution] id=answer_wgmma_next
# Question 6: Why wgmma. Answer as: answer_wgmma_next = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_wgmma_next = "a"
### END SOLUTION
# %% [tests] id=test_answer_wgmma_next points=1
quiz.grade("07_ptx_tensor_cores.wgmma_next", answer_wgmma_next)
# %% [markdown]
# ## Summary
#
# - Numba compiles Python to PTX, a virtual instruction set; `ptxas` or the driver turns PTX
#   into SASS for one GPU. `asm.ptx` shows the first; the second needs `nvdisasm`.
# - A tensor core computes D = A B + C on a warp: `mma.m16n8k16` multiplies 16 x 16 by
#   16 x 8 with bfloat16 inputs and float32 sums, in one instruction.
# - Each lane holds a fragment: with g = lane // 4 and t = lane % 4, rows come from g and
#   columns from t (for B the other way round), with offsets 8 for the second halves.
# - bfloat16 keeps float32's range with 8 significant bits; TF32 keeps 11. The errors
#   measured above are what the speed costs.
# - `ldmatrix` loads fragments from shared memory (`.trans` for a k-major B);
#   `cp.async` loads tiles without registers and without waiting: commit, wait, then a
#   barrier, because the wait covers only the thread's own copies.
# - The C fragments of Q K^T are the A fragment of P: attention's two products chain in
#   registers.
# - Hopper's `wgmma` makes the multiply larger, asynchronous and fed from shared memory.
#
# ## Further exercises
#
# 1. Rewrite `mma_tile` for TF32 with `tc.mma_tf32` (shape `m16n8k8`: A 16 x 8, B 8 x 8; the
#    layout is in `fragments.a_layout("m16n8k8")`), and compare its error with bfloat16's.
# 2. Make `mma_matmul` double-buffered: two pairs of tiles, issue tile k + 1 before
#    computing tile k, and `cp_async_wait(1)`. Where do the barriers go now?
# 3. Give `mma_matmul` blocks of 4 warps computing 32 x 32 tiles; count the shared-memory
#    bytes each `mma` needs and compare with exercise 2's.
# 4. Add causal masking to `mma_attention`: which lanes' scores must be set to -inf in the
#    diagonal tile, by their (g, t) and register index?
# 5. On a GPU, print `asm.ptx` of your `mma_matmul` and find the `mma.sync`, `ldmatrix` and
#    `cp.async` lines; with a CUDA toolkit, find the `HMMA` instructions in its SASS.
