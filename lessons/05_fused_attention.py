# %% [markdown]
# # Lesson 5: fused attention
#
# Attention is the core of every transformer. Written the obvious way, it stores a score for
# every pair of positions, S x S numbers per *head* (attention runs several heads side by
# side, each with its own queries, keys and values), and spends most of its time moving them
# through GPU memory. In this lesson you take it apart and rebuild it as one fused kernel,
# in the style of *FlashAttention* (attention computed tile by tile, its scores never written
# to memory; Dao et al., 2022):
#
# 1. the NumPy reference and the library (CuPy) version, and what they cost in bytes;
# 2. fusing a softmax into one kernel with warp and block reductions;
# 3. the **online softmax**: a softmax that reads each row once (exercise 1);
# 4. a fused attention kernel that never writes the scores (exercise 2);
# 5. the fast version: several warps per query tile, K and V tiles in shared memory,
#    register blocking, and *causal* masking (each position attends only to the ones before
#    it).
# %% [readonly] id=setup
import cudacourse
cudacourse.setup()  # first: a real GPU or the CUDA simulator, chosen before numba.cuda loads
from cudacourse.course import quiz
import cudacourse.check
import math
import numpy as np
from numba import cuda
import matplotlib.pyplot as plt
from cudacourse.kernels import attention, softmax
from cudacourse.runtime import device
from cudacourse.course import prose
from cudacourse.viz import attention as viz
# %% [markdown]
# ## 1. Scaled dot-product attention
#
# For one head, with Q, K, V of shape (S, d) (S positions, head dimension d):
#
# $$\mathrm{attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt d}\right) V$$
#
# Row i of the scores $Q K^\top$ says how much query i matches every key; the softmax turns
# the row into weights that sum to 1; the output row i is the weighted average of the rows
# of V. With **causal** masking (language models), query i may only look at keys 0..i.
# Here is the float64 NumPy reference every kernel is checked against:
# %%
S, d = 6, 4
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((1, S, d)).astype(np.float32) for _ in range(3))
print(attention.attention_ref(q, k, v)[0].round(3))
print(prose.shown("causal, row 0 attends only to key 0, so it equals v[0]: {{ok}}",
                  ok=np.allclose(attention.attention_ref(q, k, v, causal=True)[0, 0], v[0, 0])))
# %% [markdown]
# The library way on a GPU is three steps: a matmul (cuBLAS) writes the scores, a softmax
# reads and rewrites them, a second matmul reads them again. `attention.attention_unfused`
# does exactly that with CuPy; it needs a real GPU.
# %%
if device.is_simulator():
    print(prose.shown("Simulator mode: CuPy needs a real GPU, so attention_unfused is skipped here."))
else:
    got = attention.attention_unfused(q, k, v)
    print(prose.shown("unfused CuPy, relative error: {{err}}",
                      err=attention.relative_error(got, attention.attention_ref(q, k, v))))
# %%
quiz.ask("05_fused_attention.memory_bound")
# %% [solution] id=answer_memory_bound
# Question 1: Why the softmax steps are slow. Answer as: answer_memory_bound = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_memory_bound = "b"
### END SOLUTION
# %% [tests] id=test_answer_memory_bound points=1
quiz.grade("05_fused_attention.memory_bound", answer_memory_bound)
# %% [markdown]
# ## 2. Counting bytes: why unfused attention is memory-bound
#
# With 16 heads, S = 16384 and float32, the scores alone are
# 16 x 16384^2 x 4 bytes = **16 GiB**. The two matmuls do a number of flops per score that
# grows with d, but each softmax step (scale, max, subtract, exp, sum, divide) does about one
# operation per 4-byte score it reads and writes. To keep its arithmetic busy an H200 needs
# many flops per byte moved: {{bench.ceiling.cublas_sgemm_tflop_s:.1f}} TFLOP/s of SGEMM
# against {{bench.ceiling.copy_gb_s/1000:.2f}} TB/s of copy bandwidth (both from this course's
# benchmark, `docs/benchmarks.json`, {{bench.date}}; divide one by the other). Compare that
# with the softmax steps' one operation per 4-byte score (question 1 asked why they are slow).
# The fused kernel keeps the scores in registers and shared memory; its only extra memory is
# the output.
# %%
seqs = [512, 1024, 2048, 4096, 8192, 16384, 32768]
viz.plot_memory_model(seqs, batch_heads=16, head_dim=64)
plt.show()
for s in (4096, 16384):
    print(prose.shown("S={{s}}: unfused {{unfused:.2f}} GiB, fused {{fused:.3f}} GiB", s=s,
                      unfused=attention.extra_memory_bytes(16, s, 64, "unfused") / 2**30,
                      fused=attention.extra_memory_bytes(16, s, 64, "fused") / 2**30))
# %%
quiz.ask("05_fused_attention.scores_memory")
# %% [solution] id=answer_scores_memory
# Question 2: Memory for the score matrix. Answer as: answer_scores_memory = <a number of GiB>, within 0.05
### BEGIN SOLUTION
answer_scores_memory = 2
### END SOLUTION
# %% [tests] id=test_answer_scores_memory points=1
quiz.grade("05_fused_attention.scores_memory", answer_scores_memory)
# %%
quiz.ask("05_fused_attention.flops_per_score")
# %% [solution] id=answer_flops_per_score
# Question 3: FLOPs per score. Answer as: answer_flops_per_score = <a number of FLOP>, within 0.5
### BEGIN SOLUTION
answer_flops_per_score = 256
### END SOLUTION
# %% [tests] id=test_answer_flops_per_score points=1
quiz.grade("05_fused_attention.flops_per_score", answer_flops_per_score)
# %% [markdown]
# ## 3. Kernel fusion: a softmax in one kernel
#
# `softmax.fused_softmax(x, scale)` computes softmax(scale * x) along each row in **one**
# launch, one block per row:
#
# - each thread reads its share of the row once and keeps a *running (max, sum) pair*: the
#   largest score $m$ seen so far and $\ell = \sum e^{x_j - m}$ over the scores seen. When a
#   new score raises the max to $m'$, the sum so far is multiplied by $e^{m - m'}$ (section 4
#   derives this: it is the online softmax);
# - two partial pairs, over two disjoint parts of the row, merge into the pair of the whole:
#   $m = \max(m_a, m_b)$, $\ell = \ell_a e^{m_a - m} + \ell_b e^{m_b - m}$ (each sum is
#   rescaled to the common maximum, then they add);
# - a warp merges its 32 pairs that way with shuffles (`cuda.shfl_xor_sync`, registers to
#   registers: lane i takes lane i XOR k's pair, for k = 16, 8, 4, 2, 1); one pair per warp
#   goes through shared memory to the first warp, which merges those;
# - a second pass writes the probabilities $e^{x_j - m} / \ell$.
#
# The row is read twice and written once, instead of the five or so full passes of separate
# library calls.
# %%
x = rng.standard_normal((4, 300)).astype(np.float32) * 20
p = softmax.fused_softmax(x, scale=0.5)
print(prose.shown("max error vs NumPy: {{err}} | rows sum to {{sums}}",
                  err=np.abs(p - softmax.softmax_ref(x, 0.5)).max(), sums=p.sum(axis=1).round(6)))
# %% [markdown]
# Count the passes of the CuPy composition
# `s = x * c; s -= s.max(-1, keepdims=True); cp.exp(s, out=s); s /= s.sum(-1, keepdims=True)`:
# every step reads the whole matrix and four of them write it back, against the fused
# kernel's two reads and one write. A memory-bound step's time follows its bytes, so the fused
# softmax wins by about the ratio of the two counts (further exercise 5 measures it).
#
# ## 4. The online softmax
#
# The softmax needs the row maximum *before* it can exponentiate (`exp(1000)` overflows
# float32, whose largest value is about 3.4e38). So the textbook softmax reads the row twice: once for the max, once for the sum.
# The **online softmax** reads it once, keeping a running max $m$ and a running sum
# $\ell = \sum_{j \le t} e^{s_j - m}$. When a new score raises the max to $m'$, every term
# already in $\ell$ was computed against the old $m$, and
# $e^{s_j - m'} = e^{s_j - m}\, e^{m - m'}$, so
#
# $$m' = \max(m, s), \qquad \ell' = \ell\, e^{m - m'} + e^{s - m'} .$$
#
# Attention adds an accumulator for the weighted sum of values, rescaled the same way:
# $\mathrm{acc}' = \mathrm{acc}\, e^{m - m'} + e^{s - m'} v$; the output is
# $\mathrm{acc} / \ell$ at the end. Every exponent is $\le 0$: nothing can overflow.
# %%
row = rng.standard_normal(40) * 3
viz.plot_online_softmax(row)
plt.show()
# %% [markdown]
# The two versions agree, in any chunk size, even with scores of magnitude 10^4, where
# `exp(s)` on its own would overflow:
# %%
big = rng.standard_normal((3, 50)) * 1e4
for chunk in (1, 7, 50):
    err = np.abs(softmax.online_softmax_ref(big, chunk=chunk) - softmax.softmax_ref(big)).max()
    print(prose.shown("chunk {{chunk:2d}}: max difference from the two-pass softmax {{err:.1e}}",
                      chunk=chunk, err=err))
with np.errstate(over="ignore", invalid="ignore"):
    e = np.exp(big)
    print(prose.shown("without subtracting the max: {{p}}", p=(e / e.sum(axis=1, keepdims=True))[0, :4]))
# %% [markdown]
# ### Exercise 1: the online update
#
# Write the device function that folds one score `s` (with its value `v`, a single number
# here) into the state `(m, l, acc)` and returns the new state. A row starts from
# `(-inf, 0, 0)`. Use `math.exp`. The checker calls it from its own kernel, with random
# states and with scores up to +-3000.
# %% [solution] id=online_update
@cuda.jit(device=True)
def online_update(m, l, acc, s, v):
    """Fold score s with value v into the running max m, running sum l, accumulator acc."""
    ### BEGIN SOLUTION
    m_new = max(m, s)
    alpha = math.exp(m - m_new)  # rescales everything summed against the old maximum
    p = math.exp(s - m_new)
    return m_new, l * alpha + p, acc * alpha + p * v
    ### END SOLUTION
# %% [tests] id=test_online_update points=3
cudacourse.check.check_online_update(online_update)
### BEGIN HIDDEN TESTS
cudacourse.check.check_online_update(online_update, hidden=cudacourse.check.Cases(
    seed=964028371, sizes=[(431, 6, 35)]))
### END HIDDEN TESTS
# %%
quiz.ask("05_fused_attention.rescale")
# %% [solution] id=answer_rescale
# Question 4: One step of the online softmax. Answer as: answer_rescale = <a number>, within 0.01
### BEGIN SOLUTION
answer_rescale = 1.15
### END SOLUTION
# %% [tests] id=test_answer_rescale points=1
quiz.grade("05_fused_attention.rescale", answer_rescale)
# %% [markdown]
# ## 5. A fused attention kernel
#
# Now the whole attention in one kernel, the simple way: **one thread per query row**,
# 16 rows per block. The block walks over the keys in tiles of 16: every thread loads one key
# row and one value row into shared memory, and each
# thread folds the tile's 16 keys into its running `m`, `l` and its accumulator row
# `acc[0:d]`. The S x S scores never exist in GPU memory.
#
# ### Exercise 2: the inner loop
#
# Fill in the part that processes one K/V tile for this thread's query row: for each key
# `j = start + jj` of the tile that exists (`j < seq`) and is allowed (`not causal or
# j <= row`): the score `s = scale * (q[bh, row, :] . k_tile[jj, :])`, the new maximum, the
# rescale of `l` and of every `acc[c]`, and the new term. The checker launches it with
# grid (ceil(seq / 16), batch_heads) and 16 threads per block, on sequences that are not
# multiples of 16, causal or not, and with scores far beyond exp's range.
# %% [solution] id=flash_rows
TILE = 16    # keys per shared-memory tile, and query rows per block
D_MAX = 32   # the largest head_dim this kernel handles

@cuda.jit
def flash_rows(q, k, v, out, scale, causal):
    """One thread per query row; K and V tiles staged in shared memory."""
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
        j = start + t
        if j < seq:  # every thread loads one key row and one value row
            for c in range(d):
                k_tile[t, c] = k[bh, j, c]
                v_tile[t, c] = v[bh, j, c]
        cuda.syncthreads()  # wait until the whole tile is loaded
        if row < seq:
            ### BEGIN SOLUTION
            for jj in range(TILE):
                j = start + jj
                if j < seq and (not causal or j <= row):
                    s = 0.0
                    for c in range(d):
                        s += q[bh, row, c] * k_tile[jj, c]
                    s *= scale
                    m_new = max(m, s)
                    alpha = math.exp(m - m_new)
                    p = math.exp(s - m_new)
                    l = l * alpha + p
                    for c in range(d):
                        acc[c] = acc[c] * alpha + p * v_tile[jj, c]
                    m = m_new
            ### END SOLUTION
        cuda.syncthreads()  # everyone is done with the tile before it is overwritten
    if row < seq:
        for c in range(d):
            out[bh, row, c] = acc[c] / l
# %% [tests] id=test_flash_rows points=4
cudacourse.check.check_flash_rows(flash_rows)
### BEGIN HIDDEN TESTS
cudacourse.check.check_flash_rows(flash_rows, hidden=cudacourse.check.Cases(
    seed=702938416, sizes=[(2, 29, 32, False), (1, 43, 32, True), (1, 1, 16, True), (1, 21, 16, False)]))
### END HIDDEN TESTS
# %%
quiz.ask("05_fused_attention.shared_tiles")
# %% [solution] id=answer_shared_tiles
# Question 5: Why K and V go through shared memory. Answer as: answer_shared_tiles = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_shared_tiles = "d"
### END SOLUTION
# %% [tests] id=test_answer_shared_tiles points=1
quiz.grade("05_fused_attention.shared_tiles", answer_shared_tiles)
# %% [markdown]
# ## 6. Making it fast
#
# One thread per row is correct but slow: each thread does a long serial loop, keeps a
# d-long accumulator (in slow local memory when d is a loop bound), and a block has only 16
# threads. In the same spirit as a good matmul, `attention.flash_attention` (the "tiled"
# variant) gives a block 64 query rows and 64 or 128 threads, and every thread a small 2D
# patch of work. Its tile shape is `attention.FlashConfig(bq, bk, tr, tc)`: `bq` query rows
# per block, `bk` keys per tile, and per thread a *TR x TC patch*: TR query rows (`tr`) by TC
# keys (`tc`) of the scores, 4 x 4 by default, so that the `bk // tc` threads covering one
# group of TR rows split the tile's keys between them:
#
# - the Q tile is loaded once into shared memory, pre-multiplied by scale x log2(e) so that
#   `math.exp2` replaces `exp`;
# - per tile of 32 keys, K and V go to shared memory (K padded by one column so that the
#   lanes of a warp hit different banks);
# - each thread computes its TR x TC patch of the scores in registers (each Q and K value
#   loaded once, used TC or TR times) and masks it. A query row's maximum over the tile is
#   then spread over the threads that hold that row: bk / tc = 32 / 4 = 8 adjacent *lanes
#   sharing a row* (lanes: the 32 threads of a warp, numbered from 0); they agree on it with
#   `shfl_xor_sync`, in three exchanges (XOR 4, 2, 1);
# - it rescales its running sums and its TR x (d/8) patch of the output accumulator, writes
#   its probabilities to shared memory, and accumulates P V;
# - tile shapes are compile-time constants, so every inner loop is unrolled and the small
#   per-thread arrays live in registers (*ptxas*, NVIDIA's assembler that turns the PTX
#   Numba emits into the GPU's machine code, reports no local memory and no spills);
# - with causal masking some key tiles need no work at all, and the loop never visits them
#   (question 6 asks which).
#
# The "tiled" kernel is bound by shared-memory loads: per key dimension a thread issues one
# 4-byte load for each of its TR query values and TC keys, TR + TC loads for TR x TC
# multiply-adds, while an SM serves one warp-wide shared load per clock against four warps
# of multiply-adds. The **"fast"** variant (the default, `variant="best"`) changes that and a
# few other things, each a habit from the matmul lesson:
#
# - every shared-memory read is 16 bytes (4 floats in one instruction, which PTX writes
#   *`ld.shared.v4.f32`*: load, shared memory, vector of 4, float32): Q, K and P are
#   stored row by row, padded by 4 words, so a thread reads 4 dimensions of a query row or of
#   a key in one load: a quarter of the load instructions;
# - 128 query rows and 256 threads per block, a 4 x 4 patch of scores per thread, the next
#   K and V tile loaded into registers while the current one is used (prefetch);
# - the running maximum is raised only when a tile's maximum passes it by a factor 2^8: most
#   tiles skip rescaling the accumulator (deferred rescaling, as FlashAttention-4 does);
# - masks are computed only on the tiles that need them (the diagonal, the last tile), and
#   causal blocks start with the longest query tiles;
# - tiles above the {{const.hardware.STATIC_SHARED_KIB}} KiB of shared memory a block gets
#   without asking (dynamic shared memory, once the kernel's limit is raised through the
#   driver, up to {{const.attention.MAX_SHARED_BYTES/1024:.0f}} KiB per block on the H200).
#
# The speed of each step is in the table of section 8.
# %%
bh, S, d = device.pick(sim=(2, 37), gpu=(16, 1000)) + (32,)
q, k, v = (rng.standard_normal((bh, S, d)).astype(np.float32) for _ in range(3))
for causal in (False, True):
    want = attention.attention_ref(q, k, v, causal=causal)
    for variant in ("fast", "tiled"):
        got = attention.flash_attention(q, k, v, causal=causal, variant=variant)
        print(prose.shown("causal={{causal:5}} {{variant:5}}: relative error {{err:.1e}}",
                          causal=str(causal), variant=variant,
                          err=attention.relative_error(got, want)))
# %% [markdown]
# Scores of large magnitude (inputs a hundred times larger) are no problem: every exponent
# is <= 0.
# %%
got = attention.flash_attention(q * 100, k * 100, v, causal=True)
print(prose.shown("all finite: {{ok}} | relative error: {{err}}", ok=np.isfinite(got).all(),
                  err=attention.relative_error(got, attention.attention_ref(q * 100, k * 100, v,
                                                                            causal=True))))
# %%
quiz.ask("05_fused_attention.causal_skip")
# %% [solution] id=answer_causal_skip
# Question 6: Tiles a causal block can skip. Answer as: answer_causal_skip = "<letter>", one of a, b, c, d
### BEGIN SOLUTION
answer_causal_skip = "c"
### END SOLUTION
# %% [tests] id=test_answer_causal_skip points=1
quiz.grade("05_fused_attention.causal_skip", answer_causal_skip)
# %% [markdown]
# ## 7. Time and memory against sequence length
#
# On a GPU the next cell measures, in this session, the median time of the fused kernel and
# of the unfused CuPy attention (16 heads, head_dim 64, CUDA events) and the extra device
# memory each allocates; the numbers are your GPU's, computed now. In the simulator, kernel
# times mean nothing (Python threads, thousands of times slower than a GPU), so only the
# memory model above is shown.
# %%
def median_ms(fn, reps=5):
    fn()  # warm-up: the first call compiles the kernel
    times = []
    for _ in range(reps):
        e0, e1 = cuda.event(timing=True), cuda.event(timing=True)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        times.append(cuda.event_elapsed_time(e0, e1))
    return float(np.median(times))

if device.is_simulator():
    print(prose.shown("Simulator mode: no timings (they would measure Python, not a GPU)."))
else:
    import cupy as cp
    seqs = [512, 1024, 2048, 4096, 8192]
    fused, unfused = viz.T("fused (Numba)"), viz.T("unfused (CuPy)")  # the legend's words
    times = {fused: [], unfused: []}
    for s in seqs:
        cq, ck, cv = (cp.random.standard_normal((16, s, 64), dtype=cp.float32) for _ in range(3))
        times[fused].append(median_ms(lambda: attention.flash_attention(cq, ck, cv)))
        times[unfused].append(median_ms(lambda: attention.attention_unfused(cq, ck, cv)))
    viz.plot_timings(seqs, times, title=viz.T("16 heads, head_dim 64, float32 (this GPU, now)"))
    plt.show()
    for s, f, u in zip(seqs, times[fused], times[unfused]):
        tf = attention.attention_flops(16, s, 64) / f / 1e9
        print(prose.shown("S={{s:5d}}: fused {{f:7.3f}} ms ({{tf:5.1f}} TFLOP/s), unfused "
                          "{{u:7.3f}} ms, speed-up {{x:4.2f}}x", s=s, f=f, tf=tf, u=u, x=u / f))
    s = 8192
    cq = cp.random.standard_normal((16, s, 64), dtype=cp.float32)
    for name, fn in (("fused", attention.flash_attention), ("unfused", attention.attention_unfused)):
        extra, res = attention.measure_extra_memory(lambda: fn(cq, cq, cq))
        del res
        print(prose.shown("S={{s}}: {{name}} attention allocated {{gib:.3f}} GiB", s=s, name=name,
                          gib=extra / 2**30))
# %% [markdown]
# ## 8. What the fused kernel beats, and what it does not
#
# The fair comparison is not CuPy but PyTorch, measured in the same run: **eager** attention
# (two matmuls and `torch.softmax`, the scores in memory, as a model written by hand does
# it), and `scaled_dot_product_attention` (**SDPA**), PyTorch's fused kernels, in float32
# (it picks its memory-efficient backend there; *cuDNN*, NVIDIA's library of deep-learning
# kernels, and flash refuse float32) and in *bfloat16* (a 16-bit float with float32's range
# and 8 bits of precision). The cell reads the course's committed benchmark, `docs/benchmarks.json`
# (`cudacourse bench` on an NVIDIA H200); rates are TFLOP/s of the useful work (the causal
# triangle counts half).
# %%
from cudacourse import bench

SHAPES = [("", "16 x 4096 x 64"), ("_causal", "  causal"), ("_d128", "16 x 4096 x 128"),
          ("_d128_causal", "  causal"), ("_s16384", "16 x 16384 x 64"),
          ("_causal_s16384", "  causal"), ("_d128_s16384", "16 x 16384 x 128"),
          ("_d128_causal_s16384", "  causal")]
report = bench.committed_report()
if bench.figure(report, "attention_fused_vs_sdpa_f32", "ratio") is None:
    # one source for every figure: none rather than another file's
    print(prose.shown("No committed PyTorch comparison in this course (docs/benchmarks.json): "
                      "`cudacourse bench` on a GPU makes it."))
    report = None
else:
    env = report["environment"]
    print(prose.shown("{{path}}: {{gpu}}, {{date}}, torch {{torch}}", path=report["path"],
                      gpu=env.get("gpu"), date=report["date"][:10],
                      torch=env.get("libraries", {}).get("torch")))
    rates = {sfx: tuple(bench.figure(report, f"attention_{m}{sfx}") for m in
                        ("fused", "torch_eager", "sdpa_f32", "sdpa_bf16")) for sfx, _ in SHAPES}
    print(f"{prose.shown('heads x S x d'):18} {'fused':>6} {'eager':>6} {'SDPA32':>6} {'SDPA16':>7}"
          f" {'fused/eager':>11} {'fused/SDPA32':>12}")
    for sfx, name in SHAPES:
        f, e, s32, s16 = rates[sfx]
        if None in (f, e, s32, s16):
            print(prose.shown("{{name:18}} (not measured)", name=name))
            continue
        print(f"{name:18} {f:6.1f} {e:6.1f} {s32:6.1f} {s16:7.1f} {f / e:11.2f} "
              f"{f / s32:12.2f}")
if report is not None:
    print("\n" + prose.shown("the steps at 16 x 4096 x 64: {{steps}}", steps=", ".join(
        prose.shown("{{step}} {{tf:.2f}} TFLOP/s ({{ms:.1f}} ms)", step=n,
                    tf=bench.figure(report, k), ms=bench.figure(report, k, "median_ms"))
        for n, k in (
            (prose.shown("one thread per row"), "attention_rows"), ("tiled", "attention_tiled"),
            ("fast", "attention_fused"), (prose.shown("CuPy unfused"), "attention_unfused"))
        if bench.figure(report, k) is not None)))
# %% [markdown]
# On the {{bench.gpu}} run of {{bench.date}} (16 x 4096 x 64), the steps of section 6 went
# from {{bench.attention_rows.tflop_s:.2f}} TFLOP/s (one thread per row,
# {{bench.attention_rows.median_ms:.0f}} ms) to {{bench.attention_tiled.tflop_s:.1f}} ("tiled",
# {{bench.attention_tiled.median_ms:.1f}} ms) to {{bench.attention_fused.tflop_s:.1f}} ("fast",
# {{bench.attention_fused.median_ms:.1f}} ms); the CuPy unfused version ran at
# {{bench.attention_unfused.tflop_s:.1f}}. What the fast kernel **beats**:
#
# - eager PyTorch at d = 64 ({{bench.ratio.attention_fused_vs_torch_eager:.2f}}x at S = 4096,
#   {{bench.ratio.attention_fused_vs_torch_eager_s16384:.2f}}x at 16384), and every causal
#   shape (from {{bench.ratio.attention_fused_vs_torch_eager_d128_causal:.2f}}x at
#   16 x 4096 x 128 to {{bench.ratio.attention_fused_vs_torch_eager_causal_s16384:.2f}}x at
#   16 x 16384 x 64): eager computes the whole square of scores and then masks half of it,
#   where the fused kernel never visits the future tiles;
# - every unfused version on memory: no score matrix at all (CuPy's unfused attention
#   allocated {{bench.ratio.attention_unfused_extra_gib_s16384:.0f}} GiB at 16 x 16384 x 64,
#   the fused kernel {{bench.ratio.attention_fused_extra_gib_s16384:.0f}}).
#
# What it does **not** beat:
#
# - eager PyTorch at d = 128 without a mask ({{bench.ratio.attention_fused_vs_torch_eager_d128:.2f}}):
#   its matmuls are cuBLAS SGEMM at about {{bench.ceiling.cublas_sgemm_tflop_s:.0f}} TFLOP/s
#   and, with more work per score, the memory-bound softmax is a smaller share;
# - SDPA in float32: {{bench.ratio.attention_fused_vs_sdpa_f32:.2f}} of it at d = 64,
#   {{bench.ratio.attention_fused_vs_sdpa_f32_d128:.2f}} at d = 128. SDPA's memory-efficient
#   kernel is *CUTLASS* C++ (NVIDIA's template library for matrix-multiply kernels) with tiles pipelined through shared memory by asynchronous copies;
#   the Numba kernel loads K and V with ordinary loads and waits at a barrier, and the GPU's
#   compiler gives it so many registers per thread that one block of 256 threads (8 warps)
#   takes most of an SM's {{const.occupancy.H200_SM.registers:,}} registers, so one block runs
#   per SM: capping registers to fit two blocks made it spill and run slower;
# - anything in bfloat16 (section 10).
#
# ## 9. Where PyTorch has no fused kernel: soft-capped scores, sliding window
#
# Real models change the scores before the softmax in ways SDPA cannot express. Gemma 2
# soft-caps every score, s -> cap * tanh(s / cap) (`cap = 50.0`), so that no score grows without
# bound, and alternates two kinds of layer: one with full causal attention, the next with a
# causal *sliding window*, where query i sees only the keys i - W + 1 .. i (W = 4096 there;
# 1024 below). In PyTorch that means eager attention, with
# the whole score matrix in memory, or FlexAttention, which compiles the two functions into
# a *Triton* kernel (Triton: a Python language for GPU kernels written over tiles, compiled
# when first called). In the fused kernel it is three lines: the tanh on each score in
# registers, one more mask condition, and the tiles before the window's start skipped.
# %%
bh, S, d, cap, window = 1, device.pick(sim=40, gpu=1000), 64, 5.0, device.pick(sim=7, gpu=300)
q, k, v = (rng.standard_normal((bh, S, d)).astype(np.float32) * 2 for _ in range(3))
got = attention.flash_attention(q, k, v, causal=True, softcap=cap, window=window)
want = attention.attention_ref(q, k, v, causal=True, softcap=cap, window=window)
print(prose.shown("soft-cap {{cap}}, window {{window}}: relative error {{err:.1e}}", cap=cap,
                  window=window, err=attention.relative_error(got, want)))
if report is not None and bench.figure(report, "attention_softcap_fused", "median_ms"):
    ms = {n: bench.figure(report, f"attention_softcap_{n}", "median_ms")
          for n in ("torch_eager", "flex", "fused")}
    gib = bench.figure(report, "attention_softcap_torch_eager_extra_gib", "ratio")
    # the run's own sizes (heads, S, d, cap, window), not retyped
    sh, ss, sd, scap, swin = bench.core.SIZES[report["size"]]["attention_softcap"]
    print(prose.shown("{{gpu}}, {{date}}, {{h}} x {{s}} x {{d}}, cap {{cap:g}}, window {{win}}: "
                      "eager {{eager:.2f}} ms{{extra}}, FlexAttention {{flex:.2f}} ms, fused "
                      "{{fused:.2f}} ms", h=sh, s=ss, d=sd, cap=scap, win=swin,
                      gpu=report["environment"].get("gpu"),
                      date=report["date"][:10], eager=ms["torch_eager"], flex=ms["flex"],
                      fused=ms["fused"],
                      extra=prose.shown(" ({{gib:.1f}} GiB extra)", gib=gib) if gib else ""))
# %% [markdown]
# On that run the fused kernel was {{bench.ratio.attention_softcap_fused_vs_torch_eager:.1f}}x
# faster than eager PyTorch and {{bench.ratio.attention_softcap_fused_vs_flex:.2f}}x faster than
# FlexAttention (float32 too; FlexAttention's compile takes seconds the first time), with
# no memory beyond its output. Here a hand-written kernel wins outright: the library has no
# kernel for this function, and the generic compiled one pays for its generality.
#
# ## 10. Beyond float32: tensor cores
#
# SDPA in bfloat16 ran {{bench.ratio_min.attention_sdpa_bf16_vs_sdpa_f32:.1f}}x to
# {{bench.ratio_max.attention_sdpa_bf16_vs_sdpa_f32:.1f}}x faster than in float32 on the shapes
# above ({{bench.attention_sdpa_bf16.tflop_s:.0f}} against
# {{bench.attention_sdpa_f32.tflop_s:.1f}} TFLOP/s at 16 x 4096 x 64). The difference is not a
# better algorithm but different hardware: **tensor cores**, matrix units that multiply small
# tiles of 16-bit inputs with float32 accumulation, about
# {{const.hardware.H200_BF16_TENSOR_TFLOP_S:.0f}} TFLOP/s of dense bf16 on an H200 (datasheet)
# against {{const.hardware.H200.fp32_tflop_s:.0f}} TFLOP/s for the FP32 cores that every Numba
# kernel of this course uses (cuBLAS SGEMM reached {{bench.ceiling.cublas_sgemm_tflop_s:.1f}}
# of those). On Hopper they are driven by the `wgmma` instruction, issued by a *warpgroup* of
# four warps together. Numba's Python kernels cannot reach them directly. Routes
# that do, from Python:
#
# - **Triton**: Python-like kernels over tiles; `tl.dot` on 16-bit tiles compiles to tensor
#   core instructions. It ships with PyTorch;
# - **nvmath-python**'s device APIs: cuBLASDx-style matrix multiplies callable from a Numba
#   kernel;
# - **CUDA C++** compiled and launched from Python through CUDA Python's `cuda.core`.
#
# Beyond this course's float32 Numba kernels, `cudacourse.bench.triton_flash` is a small
# FlashAttention forward in Triton (a page of Python: the same online softmax in exp2, both
# products with `tl.dot` in bf16). Measured with the rest:
# %%
if report is not None and bench.figure(report, "attention_triton_bf16") is not None:
    for sfx, name in SHAPES[:4]:
        t, s16 = (bench.figure(report, f"attention_{m}{sfx}") for m in ("triton_bf16", "sdpa_bf16"))
        if t and s16:
            print(prose.shown("{{name:18}} Triton bf16 {{t:6.1f}} TFLOP/s, SDPA bf16 {{s16:6.1f}}: "
                              "{{x:.2f}}", name=name, t=t, s16=s16, x=t / s16))
from cudacourse.bench import triton_flash  # imports Triton only when called

ok, why = triton_flash.available() if not device.is_simulator() else (False, "simulator mode")
if ok:
    import torch
    tq, tk, tv = (torch.randn(4, 1000, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = triton_flash.triton_attention(tq, tk, tv, causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(tq.float(), tk.float(), tv.float(),
                                                           is_causal=True)
    print(prose.shown("Triton bf16 on this GPU, relative error against float32 SDPA: {{err:.1e}}",
                      err=float((o.float() - ref).abs().max() / ref.abs().max())))
else:
    print(prose.shown("Triton kernel not run here: {{why}}", why=why))
# %% [markdown]
# One run, one GPU: Triton's page of Python reached
# {{bench.ratio.attention_triton_bf16_vs_sdpa_bf16:.2f}} of cuDNN's bf16 kernel without causal
# masking ({{bench.attention_triton_bf16.tflop_s:.0f}} TFLOP/s, against
# {{bench.attention_fused.tflop_s:.1f}} for the float32 Numba kernel), with no tuning beyond
# tile sizes.
# The structure is the one you wrote: tiles of K and V streaming past a tile of Q, a
# running maximum and sum, the scores never leaving the chip.
#
# ## Summary
#
# - Unfused attention writes S x S scores per head to GPU memory (16 GiB at 16 heads,
#   S = 16384) and its softmax steps are memory-bound.
# - Fusion keeps intermediate values on chip; a fused softmax reads a row twice and writes
#   it once.
# - The online softmax keeps a running max and sum, rescaled by exp(m - m_new) when the max
#   grows: one pass, no overflow, and it composes with a weighted sum of values.
# - FlashAttention-style kernels tile Q, K and V through shared memory, keep the running
#   state in registers, and never materialise the scores: memory grows like S, not S^2.
# - Speed comes from reuse: many query rows per block share each K/V tile, and each thread
#   computes a small 2D patch in registers.
#
# ## Further exercises
#
# 1. Change `flash_rows` to process the tile in two steps: first the tile's maximum over its
#    16 scores, then one rescale per tile instead of one per key. Why is that cheaper?
# 2. Extend `flash_rows` to cross-attention, where K and V have a different length than Q.
# 3. Time `attention.flash_attention(..., variant="tiled",
#    config=attention.FlashConfig(64, 32, 4, 4))` against the default on a GPU; explain the
#    difference with shared-memory loads per score.
# 4. Write the backward pass of the online softmax: which saved numbers (m and l per row)
#    let you recompute P without storing it?
# 5. On a GPU, time `softmax.fused_softmax` against the CuPy composition of section 3 on a
#    65536 x 4096 float32 matrix (CUDA events, median of several runs). Predict the ratio
#    from the passes over memory first.
