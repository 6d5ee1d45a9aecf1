"""cudacourse.runtime.launch: the launcher contract every topic module follows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import device, launch
from cudacourse.kernels import reduce, transpose, vector
from cudacourse.runtime.launch import KernelConfig, Variants


@dataclass(frozen=True)
class Cfg(KernelConfig):
    threads: int = 128


@dataclass(frozen=True)
class Other(KernelConfig):
    pass


REG = Variants({"plain": Cfg("plain"), "wide": Cfg("plain", 512)}, best=Cfg("plain", 256),
               chosen_by="a test")


def test_resolve_names_best_and_configurations():
    assert REG.names == ("plain", "wide")
    assert REG.resolve("wide") == Cfg("plain", 512)
    assert REG.resolve("best") is REG.best
    own = Cfg("plain", 64)
    assert REG.resolve(own) is own
    with pytest.raises(ValueError, match=r"variant must be one of \('plain', 'wide', 'best'\), "
                                         r"got 'fast'"):
        REG.resolve("fast")
    with pytest.raises(ValueError, match="variant must be one of"):
        REG.resolve(Other("plain"))  # a configuration of another module


def test_one_type_per_registry_and_str_is_the_name():
    with pytest.raises(TypeError, match="share one type"):
        Variants({"a": Cfg("a")}, best=Other("a"), chosen_by="")
    with pytest.raises(ValueError, match="at least one variant"):
        Variants({}, best=Cfg("a"), chosen_by="")
    assert str(Cfg("plain")) == "plain"


@pytest.mark.parametrize("module", [vector, reduce, transpose])
def test_every_topic_module_follows_the_contract(module):
    assert isinstance(module.BEST, KernelConfig) and isinstance(module.BEST, module.Config)
    assert module.VARIANTS == module.REGISTRY.names
    assert module.REGISTRY.resolve("best") is module.BEST and module.REGISTRY.chosen_by
    for name in module.VARIANTS:
        assert isinstance(module.REGISTRY.resolve(name), module.Config)


def test_launch_configs_are_grid_then_block():
    assert vector.launch_config(1000, "simple") == (4, 256)
    grid, block = transpose.launch_config(100, 70, "tiled_padded64")
    assert grid == (2, 2) and block == (64, 4)
    assert transpose._tiled_kernel("tiled").tile == (32, 32)
    assert reduce.launch_config(10, "shared_tree") == (1, reduce.TPB)


def test_blocks_for_rounds_up_and_never_gives_zero():
    assert launch.blocks_for(1000, 256) == 4
    assert launch.blocks_for(1024, 256) == 4
    assert launch.blocks_for(0, 256) == 1
    with pytest.raises(ValueError, match="must be positive"):
        launch.blocks_for(10, 0)


def test_resident_blocks_fill_the_sms_and_no_more():
    sms = launch.sm_count()
    assert sms == (2 if device.is_simulator() else device.current().gpu.sm_count)
    assert launch.resident_blocks(10**9, 256, 4) == 4 * sms
    assert launch.resident_blocks(300, 256, 4) == 2


def test_thread_and_block_limits_are_named():
    assert launch.check_threads(np.int64(64)) == 64
    with pytest.raises(ValueError, match="from 1 to 1024"):
        launch.check_threads(2048)
    with pytest.raises(ValueError, match="multiple of the warp size 32"):
        launch.check_threads(48, whole_warps=True)
    assert launch.check_block((32, 8)) == (32, 8)
    with pytest.raises(ValueError, match=r"block \(64, 32\) has 2048 threads"):
        launch.check_block((64, 32))


@cuda.jit
def _count(x):
    if cuda.grid(1) == 0:
        x[0] += 1.0


def test_fast_launch_launches_every_time():
    d = cuda.to_device(np.zeros(2, np.float32))
    fast = launch.FastLaunch()
    for _ in range(3):
        fast("count", _count, 1, 32, (d,))
    assert d.copy_to_host()[0] == 3.0
    assert len(fast) == (0 if device.is_simulator() else 1)


def test_device_plans_ignore_host_arrays_and_unknown_layouts():
    plans = launch.DevicePlans()
    h = np.zeros(2, np.float32)
    assert not plans.run("k", h)
    plans.remember("k", (h,), [(_count, 1, 32, (cuda.to_device(h),), (0,))])
    assert len(plans) == 0  # nothing to prepare for a host array
    d = cuda.to_device(h)
    assert not plans.run("k", d)  # never seen


@pytest.mark.gpu
def test_device_plans_replay_on_new_pointers():
    plans = launch.DevicePlans()
    d1, d2 = (cuda.to_device(np.zeros(2, np.float32)) for _ in range(2))
    _count[1, 32](d1)
    plans.remember("k", (d1,), [(_count, 1, 32, (d1,), (0,))])
    assert len(plans) == 1
    assert plans.run("k", d2) and plans.run("k", d2)
    cuda.synchronize()
    assert d2.copy_to_host()[0] == 2.0 and d1.copy_to_host()[0] == 1.0
    assert not plans.run("k", cuda.to_device(np.zeros(3, np.float32)))  # another shape


# --- every public launcher on the prepared path ------------------------------------------------

def _public_calls() -> dict:
    """name -> (module, make(seed) -> (call(args), args, want(args))): each public launcher
    with device inputs and ``out``, and its reference."""
    from cudacourse.kernels import attention, lbm, matmul, softmax, stencil

    g = np.random.default_rng

    def qkv(seed, d=64):
        r = g(seed)
        return tuple(r.uniform(-1, 1, (2, 40, d)).astype(np.float32) for _ in range(3))

    def attn(d, **kw):
        def make(seed):
            q, k, v = qkv(seed, d)
            return ((lambda a: attention.flash_attention(*a[:3], out=a[3], **kw)),
                    (q, k, v, np.zeros_like(q)),
                    lambda a: attention.attention_ref(*a[:3], causal=kw.get("causal", False)))
        return attention, make

    def mm(seed):
        r = g(seed)
        a, b = r.uniform(-1, 1, (33, 20)).astype(np.float32), \
            r.uniform(-1, 1, (20, 31)).astype(np.float32)
        return (lambda x: matmul.matmul(x[0], x[1], out=x[2])), (a, b, np.zeros((33, 31),
                                                                             np.float32)), \
            lambda x: x[0] @ x[1]

    def sm(seed):
        x = g(seed).uniform(-3, 3, (5, 70)).astype(np.float32)
        return (lambda a: softmax.fused_softmax(a[0], 0.5, out=a[1])), (x, np.zeros_like(x)), \
            lambda a: softmax.softmax_ref(a[0], 0.5)

    def st(seed):
        u = g(seed).uniform(0, 1, (20, 37)).astype(np.float32)
        return (lambda a: stencil.heat_step(a[0], a[1], 0.2)), (u, np.zeros_like(u)), \
            lambda a: stencil.heat_step_ref(a[0], 0.2)

    def lb(seed):
        solid = lbm.channel(12, 16).astype(np.uint8)
        f = lbm.init_f(solid.astype(bool), (0.05, 0.0))
        f *= g(seed).uniform(0.9, 1.1, f.shape).astype(np.float32)
        return (lambda a: lbm.lbm_step(a[0], a[1], a[2], 1.2)), \
            (f, np.zeros_like(f), solid), lambda a: lbm.lbm_step_ref(a[0], a[2], 1.2)

    return {"flash_attention fast d64": attn(64), "flash_attention fast d128 causal":
            attn(128, causal=True), "flash_attention tiled": attn(64, variant="tiled"),
            "matmul": (matmul, mm), "fused_softmax": (softmax, sm),
            "heat_step": (stencil, st), "lbm_step": (lbm, lb)}


def test_every_public_launcher_keeps_device_plans():
    """One contract: each topic module's launcher remembers its device launches in a
    ``launch.DevicePlans`` (the prepared path the vector launcher uses)."""
    from cudacourse.kernels import attention, lbm, matmul, softmax, stencil

    for mod in (attention, lbm, matmul, softmax, stencil, vector, transpose, reduce):
        assert isinstance(getattr(mod, "_PLANS", None), launch.DevicePlans), mod.__name__


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(_public_calls()))
def test_repeated_public_calls_replay_the_plan(name, monkeypatch):
    """The second call with new device arrays of the same layout runs the remembered launch
    (no checks: a check that would fail is never reached) and is right for the new data."""
    mod, make = _public_calls()[name]
    mod._PLANS.clear()
    call, first, _ = make(0)
    dfirst = tuple(cuda.to_device(a) for a in first)
    call(dfirst)
    assert len(mod._PLANS) == 1, "Numba's internals differ from _numba_private's"
    _, second, want = make(1)
    dsecond = tuple(cuda.to_device(a) for a in second)

    def no_checks(*args, **kwargs):
        raise AssertionError("the prepared path must not check again")

    monkeypatch.setattr(mod, "check_array", no_checks)
    call(dsecond)
    cuda.synchronize()
    monkeypatch.undo()
    out = dsecond[1] if mod.__name__.endswith(("softmax", "stencil", "lbm")) else dsecond[-1]
    ref = np.asarray(want(second), dtype=np.float64)
    got = out.copy_to_host().astype(np.float64)
    assert np.abs(got - ref).max() <= 2e-4 * max(1.0, np.abs(ref).max()), name
    assert len(mod._PLANS) == 1
