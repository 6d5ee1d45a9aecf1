"""What is benchmarked: one entry per kernel family, each a list of cases."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .core import (Case, Ctx, Prepared, Skipped, _need, _sample_rows, _torch,
                   assert_close)
def _copy_cases(ctx: Ctx) -> list[Case]:
    def prepare(ctx: Ctx) -> Prepared:
        from numba import cuda

        n = ctx.sizes["copy"]
        src = ctx.dev(ctx.uniform(n))
        dst = ctx.output(n)
        stream = cuda.default_stream()

        def check() -> None:
            assert_close(ctx, ctx.read(dst), ctx.read(src), "the copy", rtol=0.0)

        return Prepared(lambda: dst.copy_to_device(src, stream=stream), check,
                        bytes=8.0 * n, shape=f"{n:,} float32 ({4 * n / 2**30:.2f} GiB)")

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
    mod = _need("cudacourse.matmul", "matmul", "MATMUL_VARIANTS")

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
        return Case(f"matmul_{variant}", label, prepare,
                    ratio=f"matmul_{variant}_vs_cublas", vs="cublas_sgemm", kind="compute")

    return [case(v) for v in (*mod.MATMUL_VARIANTS, "best")]


def _vector_inputs(ctx: Ctx) -> tuple[Any, Any, Any]:
    n = ctx.sizes["vector"]
    return ctx.memo("vector", lambda: (ctx.uniform(n), ctx.uniform(n), ctx.output(n)))


def _vector_work(ctx: Ctx) -> dict:
    n = ctx.sizes["vector"]
    return dict(bytes=12.0 * n, flops=float(n), shape=f"{n:,} float32")


def _vector_add_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.vector", "vector_add", "VARIANTS")

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
        return Case(name, label, prepare, ratio=f"{name}_vs_copy", vs="copy")

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
    mod = _need("cudacourse.reduce", "reduce_sum_into", "reduce_sum")

    def prepare(ctx: Ctx) -> Prepared:
        x = ctx.memo("sum", lambda: ctx.uniform(ctx.sizes["sum"]))
        dx = ctx.dev(x)
        out = ctx.output(1)
        return Prepared(lambda: mod.reduce_sum_into(dx, out),
                        lambda: _check_sum(ctx, x, ctx.read(out), "reduce_sum_into"),
                        **_sum_work(ctx))

    return [Case("reduce_sum", "Numba sum (reduce_sum_into)", prepare,
                 ratio="reduce_sum_vs_copy", vs="copy")]


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
    mod = _need("cudacourse.transpose", "transpose")
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
                    vs="copy")

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


def _attention_inputs(ctx: Ctx, shape: tuple[int, int, int]) -> tuple[Any, Any, Any]:
    """q, k in [-2, 2) (scores spread enough that the softmax is far from uniform, so a
    kernel that drops or repeats keys shows), v in [-1, 1)."""
    return ctx.memo(f"attention{shape}", lambda: (ctx.uniform(shape, -2.0, 2.0),
                                                  ctx.uniform(shape, -2.0, 2.0),
                                                  ctx.uniform(shape, -1.0, 1.0)))


def _check_attention(ctx: Ctx, q: Any, k: Any, v: Any, got: Any, what: str) -> None:
    """Compare the first and last heads on sampled query rows with a float64 softmax."""
    xp = ctx.xp
    h, s, d = q.shape
    rows = _sample_rows(ctx, s)
    for head in sorted({0, h - 1}):
        qh = q[head][rows].astype(xp.float64)
        kh, vh = k[head].astype(xp.float64), v[head].astype(xp.float64)
        scores = qh @ kh.T / math.sqrt(d)
        p = xp.exp(scores - scores.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        assert_close(ctx, got[head][rows], p @ vh, f"{what} (head {head})", rtol=1e-3,
                     atol=1e-4)


def _attention_work(shape: tuple[int, int, int]) -> dict:
    h, s, d = shape
    return dict(flops=4.0 * h * s * s * d, bytes=16.0 * h * s * d,
                shape=f"{h} heads x {s} x {d} float32")


def _attention_cases(ctx: Ctx) -> list[Case]:
    mod = _need("cudacourse.attention", "flash_attention", "attention_unfused")
    shape = ctx.sizes["attention"]

    def fused(ctx: Ctx) -> Prepared:
        q, k, v = _attention_inputs(ctx, shape)
        dq, dk, dv = (ctx.dev(t) for t in (q, k, v))
        out = ctx.output(shape)
        return Prepared(lambda: mod.flash_attention(dq, dk, dv, out=out),
                        lambda: _check_attention(ctx, q, k, v, ctx.read(out), "flash_attention"),
                        **_attention_work(shape))

    def unfused(ctx: Ctx) -> Prepared:
        q, k, v = _attention_inputs(ctx, shape)
        result: list[Any] = []

        def run() -> Any:
            result[:] = [mod.attention_unfused(q, k, v)]

        return Prepared(run, lambda: _check_attention(ctx, q, k, v, result[0],
                                                      "attention_unfused"),
                        **_attention_work(shape))

    return [Case("attention_unfused", "attention, unfused (CuPy: cuBLAS + softmax)", unfused,
                 kind="compute", needs="cupy"),
            Case("attention_fused", "attention, fused (Numba flash_attention)", fused,
                 ratio="attention_fused_vs_unfused", vs="attention_unfused", kind="compute")]


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
    mod = _need("cudacourse.attention", "flash_attention", "attention_unfused")
    shape = ctx.sizes["attention_memory"]
    if shape is None:
        raise Skipped("memory is measured on a GPU only")
    h, s, d = shape
    out_bytes = 4 * h * s * d

    def fused(ctx: Ctx) -> Prepared:
        q, k, v = _attention_inputs(ctx, shape)
        dq, dk, dv = (ctx.dev(t) for t in (q, k, v))
        out = ctx.output(shape)
        return Prepared(lambda: mod.flash_attention(dq, dk, dv, out=out),
                        lambda: _check_attention(ctx, q, k, v, ctx.read(out), "flash_attention"),
                        shape=f"{h} heads x {s} x {d}",
                        value=lambda: extra_memory_gib(
                            lambda: mod.flash_attention(dq, dk, dv, out=out)))

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


@dataclass(frozen=True)
class Entry:
    name: str
    help: str
    family: str  # entries of one family share inputs; memory is freed between families
    cases: Callable[[Ctx], list[Case]]
    ceiling: str | None = None  # the entry whose measurement its ratios divide by


ENTRIES: dict[str, Entry] = {e.name: e for e in [
    Entry("copy", "ceiling: device-to-device copy bandwidth (bytes read + written)", "copy",
          _copy_cases),
    Entry("vector_add", "Numba vector add, every variant and the best one", "vector",
          _vector_add_cases, "copy"),
    Entry("cupy_add", "CuPy's add on the same arrays", "vector", _library_add_cases("cupy"),
          "copy"),
    Entry("torch_add", "PyTorch's add on the same arrays (when installed)", "vector",
          _library_add_cases("torch"), "copy"),
    Entry("reduce_sum", "Numba sum (cudacourse.reduce.reduce_sum_into)", "sum", _reduce_cases,
          "copy"),
    Entry("cupy_sum", "CuPy's sum", "sum", _library_sum_cases("cupy"), "copy"),
    Entry("torch_sum", "PyTorch's sum (when installed)", "sum", _library_sum_cases("torch"),
          "copy"),
    Entry("transpose", "Numba transpose, every variant (cudacourse.transpose)", "transpose",
          _transpose_cases, "copy"),
    Entry("cupy_transpose", "CuPy transpose (a copy of x.T)", "transpose", _cupy_transpose_cases,
          "copy"),
    Entry("cublas", "ceiling: cuBLAS SGEMM through CuPy", "matmul", _cublas_cases),
    Entry("matmul", "Numba matmul, every variant and the best one", "matmul", _matmul_cases,
          "cublas"),
    Entry("attention", "fused (Numba) vs unfused (CuPy) attention", "attention",
          _attention_cases),
    Entry("attention_memory", "extra device memory of fused and unfused attention, long "
          "sequence", "attention_memory", _attention_memory_cases),
]}


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


