"""What is benchmarked: one entry per kernel family, each a list of cases."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from .cases_launch import ENTRY as _launch_entry
from .cases_science import ENTRIES as _science_entries
from .cases_tensorcore import ENTRIES as _tensorcore_entries
from .core import (Case, Ctx, Entry, Prepared, Skipped, _need, _sample_rows, _torch,
                   assert_close)

def _copy_cases(ctx: Ctx) -> list[Case]:
    def prepare(ctx: Ctx) -> Prepared:
        n = ctx.sizes["copy"]
        src, dst = ctx.dev(ctx.uniform(n)), ctx.output(n)

        def check() -> None:
            assert_close(ctx, ctx.read(dst), ctx.read(src), "the copy", rtol=0.0)

        if ctx.sim:
            run = (lambda: dst.copy_to_device(src))
        else:
            # cudaMemcpyAsync through CuPy: a ceiling with a few microseconds of host work,
            # since every call is timed alone (Numba's copy_to_device spends ~0.1 ms first)
            run = (lambda: dst.data.copy_from_device_async(src.data, 4 * n))
        return Prepared(run, check, bytes=8.0 * n,
                        shape=f"{n:,} float32 ({4 * n / 2**30:.2f} GiB)")

    return [Case("copy", "device-to-device copy (cudaMemcpy)", prepare)]


def _matmul_inputs(ctx: Ctx) -> tuple[Any, Any]:
    m, k, n = ctx.sizes["matmul"]
    return ctx.memo("matmul", lambda: (ctx.uniform((m, k), -1.0, 1.0),
                                       ctx.uniform((k, n), -1.0, 1.0)))


def _check_matmul(ctx: Ctx, a: Any, b: Any, got: Any, what: str) -> None:
    """Compare sampled rows with a float64 product; tolerance scaled by |a| @ |b|."""
    xp = ctx.xp
    rows = _sample_rows(ctx, a.shape[0])
    a64, b64 = a[rows].astype(xp.float64), b.astype(xp.float64)
    want = a64 @ b64
    scale = xp.abs(a64) @ xp.abs(b64)
    assert_close(ctx, got[rows], want, what, rtol=1e-4, scale=scale)


def _matmul_work(ctx: Ctx) -> dict:
    m, k, n = ctx.sizes["matmul"]
    return dict(flops=2.0 * m * k * n, bytes=4.0 * (m * k + k * n + m * n),
                shape=f"{m}x{k} @ {k}x{n} float32")


def _cublas_cases(ctx: Ctx) -> list[Case]:
    def prepare(ctx: Ctx) -> Prepared:
        a, b = _matmul_inputs(ctx)
        m, n = a.shape[0], b.shape[1]
        c = ctx.xp.full((m, n), np.nan, np.float32)
        return Prepared(lambda: ctx.xp.matmul(a, b, out=c),
                        lambda: _check_matmul(ctx, a, b, c, "cuBLAS SGEMM"), **_matmul_work(ctx))

    return [Case("cublas_sgemm", "cuBLAS SGEMM (CuPy matmul)", prepare, kind="compute",
                 needs="cupy")]


def _matmul_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.kernels.matmul", "matmul", "MATMUL_VARIANTS")

    def case(variant: str) -> Case:
        def prepare(ctx: Ctx) -> Prepared:
            a, b = _matmul_inputs(ctx)
            da, db = ctx.dev(a), ctx.dev(b)
            out = ctx.output((a.shape[0], b.shape[1]))
            return Prepared(lambda: mod.matmul(da, db, out=out, variant=variant),
                            lambda: _check_matmul(ctx, a, b, ctx.read(out),
                                                  f"matmul variant {variant!r}"),
                            **_matmul_work(ctx))

        label = f"Numba matmul, {variant}"
        if variant == "best" and hasattr(mod, "BEST"):
            label += f" ({mod.BEST})"
        more = (("matmul_best_vs_torch", "torch_matmul"),) if variant == "best" else ()
        return Case(f"matmul_{variant}", label, prepare,
                    ratio=f"matmul_{variant}_vs_cublas", vs="cublas_sgemm", kind="compute",
                    more=more, overhead="matmul" if variant == "best" else None)

    return [case(v) for v in (*mod.MATMUL_VARIANTS, "best")]


def _vector_inputs(ctx: Ctx) -> tuple[Any, Any, Any]:
    n = ctx.sizes["vector"]
    return ctx.memo("vector", lambda: (ctx.uniform(n), ctx.uniform(n), ctx.output(n)))


def _vector_work(ctx: Ctx) -> dict:
    n = ctx.sizes["vector"]
    return dict(bytes=12.0 * n, flops=float(n), shape=f"{n:,} float32")


def _vector_add_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.kernels.vector", "vector_add", "VARIANTS")

    def case(variant: str) -> Case:
        name = "vector_add" if variant == "simple" else f"vector_add_{variant}"

        def prepare(ctx: Ctx) -> Prepared:
            a, b, out = _vector_inputs(ctx)
            da, db = ctx.dev(a), ctx.dev(b)
            ctx.poison(out)
            want = a + b  # the reference: NumPy in the simulator, CuPy on a GPU

            def check() -> None:
                assert_close(ctx, ctx.read(out), want, f"vector_add variant {variant!r}",
                             rtol=0.0)

            return Prepared(lambda: mod.vector_add(da, db, out, variant=variant), check,
                            **_vector_work(ctx))

        label = "Numba vector add, " + ("one element per thread" if variant == "simple"
                                        else variant)
        if variant == "best" and hasattr(mod, "BEST"):
            label += f" ({getattr(mod.BEST, 'name', mod.BEST)})"
        return Case(name, label, prepare, ratio=f"{name}_vs_copy", vs="copy",
                    overhead="vector_add" if variant == "best" else None)

    return [case(v) for v in (*mod.VARIANTS, "best")]


def _library_add_cases(lib: str) -> Callable[[Ctx], list[Case]]:
    def cases(ctx: Ctx) -> list[Case]:
        def prepare(ctx: Ctx) -> Prepared:
            a, b, out = _vector_inputs(ctx)
            ctx.poison(out)
            want = a + b
            if lib == "cupy":
                xout = ctx.xp.asarray(out)

                def run() -> Any:
                    return ctx.xp.add(a, b, out=xout)
            else:
                torch = _torch()
                ta, tb, tout = (torch.as_tensor(x, device="cuda") for x in (a, b, ctx.xp.asarray(out)))

                def run() -> Any:
                    return torch.add(ta, tb, out=tout)

            return Prepared(run, lambda: assert_close(ctx, ctx.read(out), want, f"{lib} add",
                                                      rtol=0.0), **_vector_work(ctx))

        title = {"cupy": "CuPy", "torch": "PyTorch"}[lib]
        return [Case(f"{lib}_add", f"{title} add", prepare, ratio=f"{lib}_add_vs_copy",
                     vs="copy", needs=lib)]

    return cases


def _sum_work(ctx: Ctx) -> dict:
    n = ctx.sizes["sum"]
    return dict(bytes=4.0 * n, flops=float(n), shape=f"{n:,} float32")


def _check_sum(ctx: Ctx, x: Any, got: Any, what: str) -> None:
    xp = ctx.xp
    want = x.astype(xp.float64).sum().reshape(1)
    scale = xp.abs(x).astype(xp.float64).sum().reshape(1)
    assert_close(ctx, xp.asarray(got).reshape(1), want, what, rtol=1e-5, scale=scale)


def _reduce_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.kernels.reduce", "reduce_sum_into", "reduce_sum")

    def prepare(ctx: Ctx) -> Prepared:
        x = ctx.memo("sum", lambda: ctx.uniform(ctx.sizes["sum"]))
        dx = ctx.dev(x)
        out = ctx.output(1)
        return Prepared(lambda: mod.reduce_sum_into(dx, out),
                        lambda: _check_sum(ctx, x, ctx.read(out), "reduce_sum_into"),
                        **_sum_work(ctx))

    return [Case("reduce_sum", "Numba sum (reduce_sum_into)", prepare,
                 ratio="reduce_sum_vs_copy", vs="copy", overhead="reduce_sum")]


def _library_sum_cases(lib: str) -> Callable[[Ctx], list[Case]]:
    def cases(ctx: Ctx) -> list[Case]:
        def prepare(ctx: Ctx) -> Prepared:
            x = ctx.memo("sum", lambda: ctx.uniform(ctx.sizes["sum"]))
            if lib == "cupy":
                out = ctx.xp.full((), np.nan, np.float32)

                def run() -> Any:
                    return ctx.xp.sum(x, out=out)

                def result() -> Any:
                    return out
            else:
                torch = _torch()
                tx = torch.as_tensor(x, device="cuda")
                tout = torch.full((), float("nan"), dtype=torch.float32, device="cuda")

                def run() -> Any:
                    return torch.sum(tx, dim=0, out=tout)

                def result() -> Any:
                    return ctx.xp.asarray([tout.item()], dtype=np.float32)

            return Prepared(run, lambda: _check_sum(ctx, x, result(), f"{lib} sum"),
                            **_sum_work(ctx))

        title = {"cupy": "CuPy", "torch": "PyTorch"}[lib]
        return [Case(f"{lib}_sum", f"{title} sum", prepare, ratio=f"{lib}_sum_vs_copy",
                     vs="copy", needs=lib)]

    return cases


def _transpose_work(ctx: Ctx) -> dict:
    m, n = ctx.sizes["transpose"]
    return dict(bytes=8.0 * m * n, shape=f"{m}x{n} float32")


def _transpose_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.kernels.transpose", "transpose")
    variants = tuple(getattr(mod, "TRANSPOSE_VARIANTS", ())) + ("best",)

    def case(variant: str) -> Case:
        def prepare(ctx: Ctx) -> Prepared:
            m, n = ctx.sizes["transpose"]
            x = ctx.memo("transpose", lambda: ctx.uniform((m, n)))
            dx, out = ctx.dev(x), ctx.output((n, m))
            return Prepared(lambda: mod.transpose(dx, out=out, variant=variant),
                            lambda: assert_close(ctx, ctx.read(out), x.T,
                                                 f"transpose variant {variant!r}", rtol=0.0),
                            **_transpose_work(ctx))

        name = "transpose" if variant == "best" else f"transpose_{variant}"
        label = f"Numba transpose, {variant}"
        if variant == "best" and hasattr(mod, "BEST"):
            label += f" ({mod.BEST})"
        return Case(name, label, prepare, ratio=f"{name}_vs_copy",
                    vs="copy", overhead="transpose" if variant == "best" else None)

    return [case(v) for v in variants]


def _cupy_transpose_cases(ctx: Ctx) -> list[Case]:
    def prepare(ctx: Ctx) -> Prepared:
        m, n = ctx.sizes["transpose"]
        x = ctx.memo("transpose", lambda: ctx.uniform((m, n)))
        out = ctx.xp.full((n, m), np.nan, np.float32)
        return Prepared(lambda: ctx.xp.copyto(out, x.T),
                        lambda: assert_close(ctx, out, x.T, "CuPy transpose", rtol=0.0),
                        **_transpose_work(ctx))

    return [Case("cupy_transpose", "CuPy transpose (copy of x.T)", prepare,
                 ratio="cupy_transpose_vs_copy", vs="copy", needs="cupy")]


def _softmax_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.kernels.softmax", "fused_softmax", "softmax_ref")
    rows, n = ctx.sizes["softmax"]
    scale = 0.125

    def prepare(ctx: Ctx) -> Prepared:
        x = ctx.memo("softmax", lambda: ctx.uniform((rows, n), -4.0, 4.0))
        dx, out = ctx.dev(x), ctx.output((rows, n))
        want = ctx.memo("softmax_ref", lambda: mod.softmax_ref(x, scale, ctx.xp))
        return Prepared(lambda: mod.fused_softmax(dx, scale, out=out),
                        lambda: assert_close(ctx, ctx.read(out), want, "fused_softmax",
                                             rtol=1e-4, atol=1e-7),
                        bytes=8.0 * rows * n, shape=f"{rows} rows x {n} float32")

    return [Case("softmax", "Numba fused softmax (one block per row)", prepare,
                 ratio="softmax_vs_copy", vs="copy", overhead="softmax")]


def _attention_inputs(ctx: Ctx, shape: tuple[int, int, int]) -> tuple[Any, Any, Any]:
    """q, k in [-2, 2) (scores spread enough that the softmax is far from uniform, so a
    kernel that drops or repeats keys shows), v in [-1, 1)."""
    return ctx.memo(f"attention{shape}", lambda: (ctx.uniform(shape, -2.0, 2.0),
                                                  ctx.uniform(shape, -2.0, 2.0),
                                                  ctx.uniform(shape, -1.0, 1.0)))


def _check_attention(ctx: Ctx, q: Any, k: Any, v: Any, got: Any, what: str,
                     causal: bool = False, softcap: float | None = None,
                     window: int | None = None, rtol: float = 1e-3, atol: float = 1e-4) -> None:
    """Compare the first and last heads on sampled query rows with a float64 softmax."""
    xp = ctx.xp
    h, s, d = q.shape
    rows = _sample_rows(ctx, s)
    got = xp.asarray(got)
    for head in sorted({0, h - 1}):
        qh = q[head][rows].astype(xp.float64)
        kh, vh = k[head].astype(xp.float64), v[head].astype(xp.float64)
        scores = qh @ kh.T / math.sqrt(d)
        if softcap is not None:
            scores = softcap * xp.tanh(scores / softcap)
        if causal:
            j, i = xp.arange(s)[None, :], rows[:, None]
            hide = j > i
            if window is not None:
                hide |= j <= i - window
            scores = xp.where(hide, -xp.inf, scores)
        p = xp.exp(scores - scores.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        assert_close(ctx, got[head][rows], p @ vh, f"{what} (head {head})", rtol=rtol,
                     atol=atol)


def _attention_work(shape: tuple[int, int, int], causal: bool = False) -> dict:
    h, s, d = shape
    flops = 4.0 * h * s * s * d / (2 if causal else 1)
    return dict(flops=flops, bytes=16.0 * h * s * d,
                shape=f"{h} heads x {s} x {d} float32" + (", causal" if causal else ""))


def _suffix(s: int, d: int, causal: bool, base_s: int = 4096) -> str:
    """JSON name suffix of an attention shape; the attention entry's sequence length
    (``base_s``: 4096 at full size, 300 at small) x 64, not causal, has none, so a size's
    peers pair with that entry's fused kernel under the same names at every size."""
    return (f"_d{d}" if d != 64 else "") + ("_causal" if causal else "") + \
        (f"_s{s}" if s != base_s else "")


def _fused_attention(ctx: Ctx, mod: Any, shape: tuple[int, int, int]) -> tuple[Callable, Callable]:
    """(run, check) for flash_attention on device copies of fresh inputs: the inputs and the
    output are allocated once, outside the timed call."""
    q, k, v = _attention_inputs(ctx, shape)
    dq, dk, dv = (ctx.dev(t) for t in (q, k, v))
    out = ctx.output(shape)
    return (lambda: mod.flash_attention(dq, dk, dv, out=out),
            lambda: _check_attention(ctx, q, k, v, ctx.read(out), "flash_attention"))


def _attention_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.kernels.attention", "flash_attention", "attention_unfused")
    shape = ctx.sizes["attention"]

    def fused(ctx: Ctx) -> Prepared:
        return Prepared(*_fused_attention(ctx, mod, shape), **_attention_work(shape))

    def unfused(ctx: Ctx) -> Prepared:
        q, k, v = _attention_inputs(ctx, shape)
        result: list[Any] = []

        def run() -> Any:
            result[:] = [mod.attention_unfused(q, k, v)]

        return Prepared(run, lambda: _check_attention(ctx, q, k, v, result[0],
                                                      "attention_unfused"),
                        **_attention_work(shape))

    def step(variant: str) -> Callable[[Ctx], Prepared]:
        def prepare(ctx: Ctx) -> Prepared:
            q, k, v = _attention_inputs(ctx, shape)
            dq, dk, dv = (ctx.dev(t) for t in (q, k, v))
            out = ctx.output(shape)
            return Prepared(lambda: mod.flash_attention(dq, dk, dv, out=out, variant=variant),
                            lambda: _check_attention(ctx, q, k, v, ctx.read(out),
                                                     f"flash_attention variant {variant!r}"),
                            **_attention_work(shape))
        return prepare

    best = getattr(mod, "BEST_VARIANT", "tiled")
    steps = [Case(f"attention_{v}", f"attention, fused, {v} variant (lesson 5 step)", step(v),
                  kind="compute") for v in ("rows", "tiled") if v in getattr(mod, "VARIANTS", ())]
    return [Case("attention_unfused", "attention, unfused (CuPy: cuBLAS + softmax)", unfused,
                 kind="compute", needs="cupy"),
            *steps,
            Case("attention_fused", f"attention, fused (Numba flash_attention, {best})", fused,
                 ratio="attention_fused_vs_unfused", vs="attention_unfused", kind="compute",
                 more=(("attention_fused_vs_torch_eager", "attention_torch_eager"),
                       ("attention_fused_vs_sdpa_f32", "attention_sdpa_f32")),
                 overhead="attention")]


def _torch_qkv(ctx: Ctx, shape: tuple[int, int, int], dtype: str = "float32") -> tuple:
    torch = _torch()
    q, k, v = _attention_inputs(ctx, shape)
    ts = tuple(torch.as_tensor(a, device="cuda") for a in (q, k, v))
    if dtype == "bfloat16":
        ts = ctx.memo(f"bf16{shape}", lambda: tuple(t.to(torch.bfloat16) for t in ts))
    return ts


def _eager_attention(torch: Any, q: Any, k: Any, v: Any, hide: Any = None,
                     softcap: float | None = None) -> Any:
    """PyTorch eager attention: two matmuls and torch.softmax, the scores in memory."""
    s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    if hide is not None:
        s.masked_fill_(hide, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def _sdpa_backend(torch: Any, d: int, causal: bool, dtype: Any) -> str:
    """Which backend PyTorch's dispatcher picks for scaled_dot_product_attention."""
    try:
        t = torch.zeros((1, 16, 4096, d), device="cuda", dtype=dtype)
        choice = torch._fused_sdp_choice(t, t, t, is_causal=causal)
        return str(torch.nn.attention.SDPBackend(choice)).split(".")[-1]
    except Exception as exc:  # noqa: BLE001 - a private API: report, do not fail
        return f"unknown ({type(exc).__name__})"


def _torch_attention_cases(ctx: Ctx) -> list[Case]:
    """PyTorch eager and SDPA (float32, bfloat16), Triton bf16, CuPy unfused and the fused
    kernel, for every shape of SIZES["attention_peers"] and the attention entry's base shape
    (whose fused and unfused cases that entry has)."""
    mod = _need("cudacourse.kernels.attention", "flash_attention")
    base = ctx.sizes["attention"]
    shapes = [(*base, False), *ctx.sizes["attention_peers"]]
    torch = None if ctx.sim else _torch()
    cases: list[Case] = []
    for h, s, d, causal in shapes:
        shape, sfx = (h, s, d), _suffix(s, d, causal, base[1])
        work = _attention_work(shape, causal)

        def check(ctx: Ctx, out: Any, what: str, shape=shape, causal=causal, **tol) -> None:
            q, k, v = _attention_inputs(ctx, shape)
            _check_attention(ctx, q, k, v, out, what, causal=causal, **tol)

        def eager(ctx: Ctx, shape=shape, causal=causal, check=check, work=work) -> Prepared:
            torch = _torch()
            tq, tk, tv = _torch_qkv(ctx, shape)
            n = shape[1]
            hide = torch.ones(n, n, dtype=torch.bool, device="cuda").triu(1) if causal else None
            res: list[Any] = []

            def run() -> None:
                res[:] = [_eager_attention(torch, tq, tk, tv, hide)]

            return Prepared(run, lambda: check(ctx, ctx.xp.asarray(res.pop()),
                                               "PyTorch eager attention"), **work)

        def sdpa(dtype: str, check=check, work=work, shape=shape, causal=causal):
            def prepare(ctx: Ctx, shape=shape, causal=causal, check=check, work=work,
                        dtype=dtype) -> Prepared:
                torch = _torch()
                from torch.nn.functional import scaled_dot_product_attention as f

                tq, tk, tv = _torch_qkv(ctx, shape, dtype)
                res: list[Any] = []

                q4, k4, v4 = (t[None] for t in (tq, tk, tv))  # (1, heads, seq, d)

                def run() -> None:
                    res[:] = [f(q4, k4, v4, is_causal=causal)[0]]

                tol = dict(rtol=2e-2, atol=2e-2) if dtype == "bfloat16" else {}
                return Prepared(run, lambda: check(ctx, ctx.xp.asarray(res.pop().float()),
                                                   f"SDPA {dtype}", **tol), **work)
            return prepare

        def triton(ctx: Ctx, shape=shape, causal=causal, check=check, work=work) -> Prepared:
            from . import triton_flash

            ok, why = triton_flash.available()
            if not ok:
                raise Skipped(why)
            tq, tk, tv = _torch_qkv(ctx, shape, "bfloat16")
            out = tq.new_empty(tq.shape)
            return Prepared(lambda: triton_flash.triton_attention(tq, tk, tv, causal, out=out),
                            lambda: check(ctx, ctx.xp.asarray(out.float()), "Triton bf16",
                                          rtol=2e-2, atol=2e-2), **work)

        def unfused(ctx: Ctx, shape=shape, causal=causal, check=check, work=work) -> Prepared:
            q, k, v = _attention_inputs(ctx, shape)
            res: list[Any] = []

            def run() -> None:
                res[:] = [mod.attention_unfused(q, k, v, causal=causal)]

            return Prepared(run, lambda: check(ctx, res.pop(), "attention_unfused"), **work)

        def fused(ctx: Ctx, shape=shape, causal=causal, check=check, work=work) -> Prepared:
            q, k, v = _attention_inputs(ctx, shape)
            dq, dk, dv = (ctx.dev(t) for t in (q, k, v))
            out = ctx.output(shape)
            return Prepared(lambda: mod.flash_attention(dq, dk, dv, causal=causal, out=out),
                            lambda: check(ctx, ctx.read(out), "flash_attention"), **work)

        f32 = "float32" if torch is None else _sdpa_backend(torch, d, causal, torch.float32)
        b16 = "bf16" if torch is None else _sdpa_backend(torch, d, causal, torch.bfloat16)
        shp = f"{h}x{s}x{d}" + (" causal" if causal else "")
        cases += [Case(f"attention_torch_eager{sfx}", f"PyTorch eager attention, {shp}",
                       eager, kind="compute", needs="torch"),
                  Case(f"attention_sdpa_f32{sfx}", f"PyTorch SDPA float32 ({f32}), {shp}",
                       sdpa("float32"), kind="compute", needs="torch"),
                  Case(f"attention_sdpa_bf16{sfx}", f"PyTorch SDPA bfloat16 ({b16}), {shp}",
                       sdpa("bfloat16"), ratio=f"attention_sdpa_bf16_vs_sdpa_f32{sfx}",
                       vs=f"attention_sdpa_f32{sfx}", kind="compute", needs="torch")]
        if s == base[1]:  # beyond the course: tensor cores from Python, via Triton
            cases.append(Case(f"attention_triton_bf16{sfx}",
                              f"Triton flash attention bfloat16 (beyond the course), {shp}",
                              triton, ratio=f"attention_triton_bf16_vs_sdpa_bf16{sfx}",
                              vs=f"attention_sdpa_bf16{sfx}", kind="compute", needs="torch"))
        if sfx:  # the base shape's fused and unfused kernels are the attention entry's
            cases.append(Case(f"attention_unfused{sfx}", f"attention, unfused (CuPy), {shp}",
                              unfused, kind="compute", needs="cupy"))
            cases.append(Case(f"attention_fused{sfx}", f"attention, fused (Numba), {shp}",
                              fused, ratio=f"attention_fused_vs_torch_eager{sfx}",
                              vs=f"attention_torch_eager{sfx}", kind="compute",
                              more=((f"attention_fused_vs_sdpa_f32{sfx}",
                                     f"attention_sdpa_f32{sfx}"),
                                    (f"attention_fused_vs_unfused{sfx}",
                                     f"attention_unfused{sfx}")),
                              overhead=f"attention{sfx}"))
    return cases


def _softcap_cases(ctx: Ctx) -> list[Case]:
    """Soft-capped scores with a causal sliding window: SDPA cannot express it."""
    mod = _need("cudacourse.kernels.attention", "flash_attention")
    h, s, d, cap, win = ctx.sizes["attention_softcap"]
    shape = (h, s, d)
    # the scores' true work: causal triangle minus what the window hides
    visible = sum(min(i + 1, win) for i in range(s)) if s <= 65536 else s * win
    work = dict(flops=4.0 * h * visible * d, bytes=16.0 * h * s * d,
                shape=f"{h} heads x {s} x {d} float32, cap {cap:g}, window {win}")

    def inputs(ctx: Ctx) -> tuple:
        q, k, v = _attention_inputs(ctx, shape)
        return ctx.memo("softcap", lambda: (q * np.float32(8.0), k, v))  # the cap matters

    def check(ctx: Ctx, out: Any, what: str) -> None:
        q, k, v = inputs(ctx)
        _check_attention(ctx, q, k, v, out, what, causal=True, softcap=cap, window=win)

    def fused(ctx: Ctx) -> Prepared:
        q, k, v = inputs(ctx)
        dq, dk, dv = (ctx.dev(t) for t in (q, k, v))
        out = ctx.output(shape)
        return Prepared(lambda: mod.flash_attention(dq, dk, dv, causal=True, out=out,
                                                    softcap=cap, window=win),
                        lambda: check(ctx, ctx.read(out), "soft-capped flash_attention"), **work)

    def torch_inputs(ctx: Ctx) -> tuple:
        torch = _torch()
        tq, tk, tv = (torch.as_tensor(a, device="cuda") for a in inputs(ctx))
        i = torch.arange(s, device="cuda")
        hide = (i[None, :] > i[:, None]) | (i[None, :] <= i[:, None] - win)
        return torch, tq, tk, tv, hide

    def eager(ctx: Ctx) -> Prepared:
        torch, tq, tk, tv, hide = torch_inputs(ctx)
        res: list[Any] = []

        def run() -> None:
            res[:] = [_eager_attention(torch, tq, tk, tv, hide, softcap=cap)]

        return Prepared(run, lambda: check(ctx, ctx.xp.asarray(res.pop()),
                                           "PyTorch eager soft-capped attention"), **work)

    def eager_memory(ctx: Ctx) -> Prepared:
        torch, tq, tk, tv, hide = torch_inputs(ctx)
        res: list[Any] = []

        def run() -> None:
            res[:] = [_eager_attention(torch, tq, tk, tv, hide, softcap=cap)]

        def value() -> float:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            out = _eager_attention(torch, tq, tk, tv, hide, softcap=cap)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - before - out.numel() * 4
            return max(0, peak) / 2**30

        return Prepared(run, lambda: check(ctx, ctx.xp.asarray(res.pop()),
                                           "PyTorch eager soft-capped attention"),
                        shape=work["shape"], value=value)

    def flex(ctx: Ctx) -> Prepared:
        torch, tq, tk, tv, _ = torch_inputs(ctx)
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        except ImportError as exc:
            raise Skipped(f"FlexAttention unavailable: {exc}") from None

        def score_mod(score, b, hh, qi, ki):
            return cap * torch.tanh(score / cap)

        def mask_mod(b, hh, qi, ki):
            return (qi >= ki) & (qi - ki < win)

        block_mask = create_block_mask(mask_mod, B=None, H=None, Q_LEN=s, KV_LEN=s,
                                       device="cuda")
        compiled = ctx.memo("flex", lambda: torch.compile(flex_attention))
        fq, fk, fv = (t[None] for t in (tq, tk, tv))
        res: list[Any] = []

        def run() -> None:
            res[:] = [compiled(fq, fk, fv, score_mod=score_mod, block_mask=block_mask)]

        return Prepared(run, lambda: check(ctx, ctx.xp.asarray(res.pop()[0]),
                                           "FlexAttention (compiled, float32)"), **work)

    return [Case("attention_softcap_torch_eager", "soft-capped causal-window attention, "
                 "PyTorch eager", eager, kind="compute", needs="torch"),
            Case("attention_softcap_torch_eager_extra_memory", "same, PyTorch eager: extra GiB",
                 eager_memory, ratio="attention_softcap_torch_eager_extra_gib", kind="value",
                 needs="torch"),
            Case("attention_softcap_flex", "same, FlexAttention (torch.compile, float32)", flex,
                 kind="compute", needs="torch"),
            Case("attention_softcap_fused", "same, fused (Numba flash_attention, softcap)",
                 fused, ratio="attention_softcap_fused_vs_torch_eager",
                 vs="attention_softcap_torch_eager", kind="compute",
                 more=(("attention_softcap_fused_vs_flex", "attention_softcap_flex"),))]


def _torch_matmul_cases(ctx: Ctx) -> list[Case]:
    def prepare(ctx: Ctx) -> Prepared:
        torch = _torch()
        torch.backends.cuda.matmul.allow_tf32 = False  # float32 as cuBLAS SGEMM, no TF32
        a, b = _matmul_inputs(ctx)
        ta, tb = torch.as_tensor(a, device="cuda"), torch.as_tensor(b, device="cuda")
        c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda")
        return Prepared(lambda: torch.matmul(ta, tb, out=c),
                        lambda: _check_matmul(ctx, a, b, ctx.xp.asarray(c), "torch.matmul"),
                        **_matmul_work(ctx))

    return [Case("torch_matmul", "PyTorch torch.matmul float32 (TF32 off)", prepare,
                 ratio="torch_matmul_vs_cublas", vs="cublas_sgemm", kind="compute",
                 needs="torch")]


def extra_memory_gib(fn: Callable[[], Any], keep_bytes: int = 0) -> float:
    """GiB of device memory ``fn()`` takes beyond ``keep_bytes`` (what it returns). GPU only.

    Numba's deallocations are deferred for the call and CuPy's pool keeps freed blocks, so
    the drop in free memory is the memory the call needed (an upper bound of its peak).
    """
    from numba import cuda

    import cupy as cp

    cp.get_default_memory_pool().free_all_blocks()
    cuda.synchronize()
    ctx = cuda.current_context()
    with cuda.defer_cleanup():
        free_before = ctx.get_memory_info().free
        result = fn()
        cuda.synchronize()
        free_after = ctx.get_memory_info().free
        del result
    cp.get_default_memory_pool().free_all_blocks()
    return max(0, free_before - free_after - keep_bytes) / 2**30


def _attention_memory_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.kernels.attention", "flash_attention", "attention_unfused")
    shape = ctx.sizes["attention_memory"]
    if shape is None:
        raise Skipped("memory is measured on a GPU only")
    h, s, d = shape
    out_bytes = 4 * h * s * d

    def fused(ctx: Ctx) -> Prepared:
        run, check = _fused_attention(ctx, mod, shape)
        return Prepared(run, check, shape=f"{h} heads x {s} x {d}",
                        value=lambda: extra_memory_gib(run))

    def unfused(ctx: Ctx) -> Prepared:
        q, k, v = _attention_inputs(ctx, shape)
        result: list[Any] = []

        def run() -> Any:
            result[:] = [mod.attention_unfused(q, k, v)]

        return Prepared(run, lambda: _check_attention(ctx, q, k, v, result.pop(),
                                                      "attention_unfused"),
                        shape=f"{h} heads x {s} x {d}",
                        value=lambda: extra_memory_gib(lambda: mod.attention_unfused(q, k, v),
                                                       keep_bytes=out_bytes))

    return [Case(f"attention_fused_extra_memory_s{s}", "fused attention: extra GiB", fused,
                 ratio=f"attention_fused_extra_gib_s{s}", kind="value"),
            Case(f"attention_unfused_extra_memory_s{s}", "unfused attention: extra GiB", unfused,
                 ratio=f"attention_unfused_extra_gib_s{s}", kind="value", needs="cupy")]


ENTRIES: dict[str, Entry] = {e.name: e for e in [
    Entry("copy", "ceiling: device-to-device copy bandwidth (bytes read + written)", "copy",
          _copy_cases),
    Entry("vector_add", "Numba vector add, every variant and the best one", "vector",
          _vector_add_cases, "copy"),
    Entry("cupy_add", "CuPy's add on the same arrays", "vector", _library_add_cases("cupy"),
          "copy"),
    Entry("torch_add", "PyTorch's add on the same arrays (when installed)", "vector",
          _library_add_cases("torch"), "copy"),
    Entry("reduce_sum", "Numba sum (cudacourse.kernels.reduce.reduce_sum_into)", "sum", _reduce_cases,
          "copy"),
    Entry("cupy_sum", "CuPy's sum", "sum", _library_sum_cases("cupy"), "copy"),
    Entry("torch_sum", "PyTorch's sum (when installed)", "sum", _library_sum_cases("torch"),
          "copy"),
    Entry("transpose", "Numba transpose, every variant (cudacourse.kernels.transpose)", "transpose",
          _transpose_cases, "copy"),
    Entry("cupy_transpose", "CuPy transpose (a copy of x.T)", "transpose", _cupy_transpose_cases,
          "copy"),
    Entry("softmax", "Numba fused softmax along rows", "softmax", _softmax_cases, "copy"),
    Entry("cublas", "ceiling: cuBLAS SGEMM through CuPy", "matmul", _cublas_cases),
    Entry("matmul", "Numba matmul, every variant and the best one", "matmul", _matmul_cases,
          "cublas"),
    Entry("torch_matmul", "PyTorch float32 matmul beside cuBLAS", "matmul",
          _torch_matmul_cases, "cublas"),
    Entry("attention", "fused (Numba) vs unfused (CuPy) attention", "attention",
          _attention_cases),
    Entry("attention_torch", "PyTorch eager and SDPA (float32, bfloat16), Triton bf16 and the "
          "fused kernel, d = 64 and 128, causal and not, S = 4096 and 16384", "attention_torch",
          _torch_attention_cases),
    Entry("attention_softcap", "soft-capped causal-window attention: fused, PyTorch eager, "
          "FlexAttention", "attention_softcap", _softcap_cases),
    Entry("attention_memory", "extra device memory of fused and unfused attention, long "
          "sequence", "attention_memory", _attention_memory_cases),
]}
ENTRIES.update((e.name, e) for e in _science_entries)  # lesson 6
ENTRIES[_launch_entry.name] = _launch_entry  # lesson 3
ENTRIES.update((e.name, e) for e in _tensorcore_entries)  # lesson 7


def select(only: str | None) -> list[str]:
    """Entry names to run, in registry order, with the ceilings they need."""
    if not only:
        return list(ENTRIES)
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    unknown = [w for w in wanted if w not in ENTRIES]
    if unknown:
        raise ValueError(f"unknown benchmark {', '.join(unknown)}; choose from "
                         f"{', '.join(ENTRIES)} (see --list)")
    needed = set(wanted) | {ENTRIES[w].ceiling for w in wanted if ENTRIES[w].ceiling}
    return [name for name in ENTRIES if name in needed]


