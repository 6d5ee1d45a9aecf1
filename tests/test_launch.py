"""cudacourse.launch: the launcher contract every topic module follows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from numba import cuda

from cudacourse import device, launch, reduce, transpose, vector
from cudacourse.launch import KernelConfig, Variants


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
