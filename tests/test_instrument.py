"""Native evidence (check/_instrument.py): the instrumented build records, on whichever device
runs it, what the simulator's observation records, so one verdict code serves both.

In the simulator these run the rewritten kernel in Numba's simulator (the rewrite is plain
Numba CUDA code); on a GPU (CUDACOURSE_DEVICE=gpu) the very same tests run it compiled for
the GPU. The gpu-marked tests at the end hold it against NVIDIA's compute-sanitizer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import cuda

from cudacourse.runtime import device
from cudacourse.check import _compile
from cudacourse.check import _engine as E
from cudacourse.check import _instrument as I
from cudacourse.check import _observe as O

N = 32


@cuda.jit
def add_right(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def add_one_thread(a, b, out):
    if cuda.grid(1) == 0:
        for i in range(out.shape[0]):
            out[i] = a[i] + b[i]


@cuda.jit
def add_off_by_one(a, b, out):
    i = cuda.grid(1)
    if i <= out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def shift_racy(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    out[t] = s[(t + 1) % 32]  # a neighbour's slot, with no barrier in between


@cuda.jit
def shift_synced(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    out[t] = s[(t + 1) % 32]


@cuda.jit
def shift_unfilled(x, out):
    s = cuda.shared.array(33, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    cuda.syncthreads()
    out[t] = s[t + 1]  # thread 31 reads slot 32, which no thread stores


@cuda.jit
def barrier_in_if(x, out):
    s = cuda.shared.array(32, np.float32)
    t = cuda.threadIdx.x
    s[t] = x[t]
    if t < 16:
        cuda.syncthreads()
    out[t] = s[t]


@cuda.jit
def tile_2d(a, out):
    tile = cuda.shared.array((8, 8), np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tile[ty, tx] = a[ty, tx]
    cuda.syncthreads()
    out[ty, tx] = tile[tx, ty]


@cuda.jit
def atomic_total(x, out):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, 0, x[i])


@cuda.jit
def add_through_transpose(a, b, out):
    o = out.T  # a view: the rewrite cannot follow it, the simulator replay does
    if cuda.grid(1) == 0:
        for i in range(o.shape[0]):
            o[i] = a[i] + b[i]


@cuda.jit
def add_sliced(a, b, out):
    i = cuda.grid(1)
    if i == 0:
        out[:] = 0.0


def _run(kernel, *arrays, grid=1, block=N, names=None):
    obs = I.NativeObservation()
    names = names or [f"x{k}" for k in range(len(arrays))]
    devs = [cuda.to_device(a) for a in arrays]
    views = [obs.watch(d, nm) for d, nm in zip(devs, names)]
    obs.run(kernel, grid, block, *views, name=kernel.__name__)
    assert obs.live and not obs.incomplete, obs.incomplete
    return obs, [d.copy_to_host() for d in devs]


def _abc(n=N):
    return (np.arange(n, dtype=np.float32), np.ones(n, np.float32), np.zeros(n, np.float32))


def test_each_element_is_written_once_by_its_own_thread():
    obs, (_, _, out) = _run(add_right, *_abc(), block=16, grid=2, names=["a", "b", "out"])
    np.testing.assert_array_equal(out, np.arange(N) + 1.0)
    log = obs.log("out")
    assert log.element_writes.tolist() == [1] * N
    assert log.total_writes == N and log.busiest_writer()[1] == 1
    assert obs.log("a").total_reads == N
    # thread 5 of block 1 wrote element 21: keys are (block, thread), as the simulator's
    assert log.writes[((1, 0, 0), (5, 0, 0))] == 1


def test_one_thread_doing_everything_is_seen():
    obs, (_, _, out) = _run(add_one_thread, *_abc(), names=["a", "b", "out"])
    np.testing.assert_array_equal(out, np.arange(N) + 1.0)  # the numbers are right
    assert obs.log("out").busiest_writer() == (((0, 0, 0), (0, 0, 0)), N)
    with pytest.raises(E.CheckFailure) as err:
        O.spread(obs, "out", N, N, "vector_add", "")
    assert err.value.cause == "serial_work"


def test_an_index_past_the_end_is_recorded_and_made_harmless():
    obs, (_, _, out) = _run(add_off_by_one, *_abc(), grid=2, names=["a", "b", "out"])
    assert {(r.array, r.index, r.size, r.write) for r in obs.oob} >= {
        ("a", N, N, False), ("out", N, N, True)}
    assert all(r.thread == ((1, 0, 0), (0, 0, 0)) for r in obs.oob)  # thread i = n alone
    cause, words = O.out_of_bounds_words(obs.oob, (N,), "vector_add")
    assert cause == "off_by_one_guard", words
    np.testing.assert_array_equal(out, np.arange(N) + 1.0)


def test_a_shared_memory_race_is_found_and_a_barrier_removes_it():
    x = np.arange(N, dtype=np.float32)
    obs, _ = _run(shift_racy, x, np.zeros(N, np.float32), names=["x", "out"])
    assert obs.races, "two threads touched one slot between the same barriers"
    r = obs.races[0]
    assert {r.first[1], r.second[1]} == {"wrote", "read"}
    assert r.first[0] != r.second[0] and r.between == "before the first cuda.syncthreads()"
    assert "the shared array allocated at line" in obs.race_words()
    obs, (_, out) = _run(shift_synced, x, np.zeros(N, np.float32), names=["x", "out"])
    assert not obs.races and not obs.divergences and not obs.unfilled
    np.testing.assert_array_equal(out, np.roll(x, -1))


def test_a_slot_no_thread_stored_is_named():
    obs, _ = _run(shift_unfilled, np.arange(N, dtype=np.float32), np.zeros(N, np.float32),
                  names=["x", "out"])
    assert [(idx, who) for _, idx, who, _ in obs.unfilled] == [((32,), ((0, 0, 0), (31, 0, 0)))]


def test_a_barrier_inside_an_if_is_divergent():
    obs, _ = _run(barrier_in_if, np.arange(N, dtype=np.float32), np.zeros(N, np.float32),
                  names=["x", "out"])
    assert obs.divergences
    d = obs.divergences[0]
    assert d.condition == "`if t < 16:`" and len(d.reached) == 16 and len(d.others) == 16
    with pytest.raises(E.CheckFailure) as err:
        O.no_divergent_barrier(obs, "k")
    assert err.value.cause == "divergent_barrier"


def test_two_dimensional_tiles_and_threads():
    a = np.arange(64, dtype=np.float32).reshape(8, 8)
    obs, (_, out) = _run(tile_2d, a, np.zeros((8, 8), np.float32), block=(8, 8),
                         names=["a", "out"])
    np.testing.assert_array_equal(out, a.T)
    assert not obs.races and obs.log("out").element_writes.tolist() == [1] * 64
    assert obs.barriers[((0, 0, 0), (3, 5, 0))] == [obs.barriers[((0, 0, 0), (0, 0, 0))][0]]
    assert obs.shared_reads[((0, 0, 0), (3, 5, 0))] == 1


def test_atomics_are_counted_per_block_and_as_writes():
    x = np.ones(64, np.float32)
    obs, (_, out) = _run(atomic_total, x, np.zeros(1, np.float32), grid=2, names=["x", "out"])
    assert out[0] == 64.0
    assert dict(obs.atomics) == {(0, 0, 0): 32, (1, 0, 0): 32}
    assert obs.log("out").element_writes.tolist() == [64]


def test_what_the_rewrite_cannot_follow_is_said_not_guessed():
    assert I.plan(add_right) == "" and I.plan(shift_racy) == ""
    assert "other than by element" in I.plan(add_through_transpose) or \
        "other than by element" in _build_refusal(add_through_transpose)
    assert "slices out" in _build_refusal(add_sliced)


@cuda.jit
def forges_its_evidence(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]
        __cc_w2[i] = 1  # noqa: F821 - a name of the instrumented build's records


def test_a_kernel_that_names_the_records_is_not_instrumented():
    """Data from a submission is untrusted: a kernel writing into the build's own records
    (their names start with __cc_) would forge its evidence, so it goes to the simulator."""
    assert "__cc_" in I.plan(forges_its_evidence)


def _build_refusal(kernel):
    try:
        I.build(kernel, (0, 1, 2), (1, 1, 1))
    except I.NotInstrumentable as exc:
        return str(exc)
    return ""


def test_a_view_falls_back_to_the_observation_the_simulator_makes():
    """The NativeObservation gives up (live False, with its reason) and launches the
    kernel itself, so a checker never reads an empty record as evidence."""
    obs = I.NativeObservation()
    a, b, out = (cuda.to_device(v) for v in _abc())
    obs.run(add_through_transpose, 1, N, obs.watch(a, "a"), obs.watch(b, "b"),
            obs.watch(out, "out"), name="vector_add")
    assert not obs.live and "other than by element" in obs.incomplete
    np.testing.assert_array_equal(out.copy_to_host(), np.arange(N) + 1.0)


@pytest.mark.sim_only(reason="the offline sm_90 compile gate runs in the simulator only")
def test_instrumented_builds_compile_for_sm90():
    ok, why = _compile.status()
    if not ok:
        pytest.skip(f"no offline sm_90 compiler here: {why}")
    for kernel, arrays in ((add_right, _abc()), (shift_racy, _abc()[:2]),
                           (tile_2d, (np.zeros((8, 8), np.float32),) * 2)):
        ranks = tuple(a.ndim for a in arrays)
        built = I.build(kernel, tuple(range(len(arrays))), ranks)
        args = [cuda.to_device(a) for a in arrays] + _extra_args(built, arrays)
        k = built["kernel"]
        del k.__cc_instrumented__  # unmarked, so that the gate compiles the build itself
        try:
            res = _compile.gate(k, tuple(args), kernel.__name__)
        finally:
            k.__cc_instrumented__ = True
        assert res is not None, f"{kernel.__name__}: not compiled"


def _extra_args(built, arrays):
    z = lambda n, dt: cuda.to_device(np.zeros(n, dt))  # noqa: E731
    extra = [z(8, np.int64), z(8, np.int32), z(8, np.int32), z(8, np.int32), z(1, np.int32),
             z(8, np.int64), z(8, np.int64), z(4, np.int64), z(I.LOOP_NAMES, np.float64)]
    for a in arrays:
        extra += [z(8, np.int32), z(8, np.int32), z(a.size, np.int32), np.float32(0)]
    for _ in built["shared"]:
        extra += [z(8, np.int64), z(8, np.int64)]
    return extra


# --- a second opinion: NVIDIA's compute-sanitizer, on a GPU -----------------------------------

SANITIZER = shutil.which("compute-sanitizer") or (
    "/usr/local/cuda/bin/compute-sanitizer"
    if os.path.exists("/usr/local/cuda/bin/compute-sanitizer") else None)

_SANITIZED = textwrap.dedent("""
    import sys
    import numpy as np
    from numba import cuda

    @cuda.jit
    def racy(x, out):
        s = cuda.shared.array(32, np.float32)
        t = cuda.threadIdx.x
        s[t] = x[t]
        out[t] = s[(t + 1) % 32]

    @cuda.jit
    def synced(x, out):
        s = cuda.shared.array(32, np.float32)
        t = cuda.threadIdx.x
        s[t] = x[t]
        cuda.syncthreads()
        out[t] = s[(t + 1) % 32]

    k = {"racy": racy, "synced": synced}[sys.argv[1]]
    x = cuda.to_device(np.arange(32, dtype=np.float32))
    out = cuda.device_array(32, np.float32)
    k[1, 32](x, out)
    cuda.synchronize()
    """)


def _sanitize(tool: str, which: str, tmp_path) -> str:
    script = tmp_path / "k.py"
    script.write_text(_SANITIZED)
    r = subprocess.run([SANITIZER, f"--tool={tool}", sys.executable, str(script), which],
                       capture_output=True, text=True, timeout=120)
    return r.stdout + r.stderr


@pytest.mark.gpu
@pytest.mark.skipif(SANITIZER is None, reason="compute-sanitizer is not installed here")
def test_racecheck_agrees_with_the_instrumented_build(tmp_path):
    racy = _sanitize("racecheck", "racy", tmp_path)
    synced = _sanitize("racecheck", "synced", tmp_path)
    assert "hazard" in racy.lower(), racy[-2000:]
    assert "0 hazards" in synced.lower() or "hazard" not in synced.lower().replace(
        "0 hazards", ""), synced[-2000:]
    native_racy, _ = _run(shift_racy, *_abc()[:2], names=["x", "out"])
    native_synced, _ = _run(shift_synced, *_abc()[:2], names=["x", "out"])
    assert native_racy.races and not native_synced.races


@pytest.mark.gpu
def test_the_instrumented_build_runs_on_the_gpu():
    assert not device.is_simulator()
    obs, (_, _, out) = _run(add_one_thread, *_abc(), names=["a", "b", "out"])
    assert obs.log("out").busiest_writer()[1] == N


@cuda.jit(device=True)
def _add_all(a, b, out):
    for i in range(out.shape[0]):
        out[i] = a[i] + b[i]


@cuda.jit
def add_in_a_device_function(a, b, out):
    if cuda.grid(1) == 0:
        _add_all(a, b, out)  # the arrays go into a call: the rewrite cannot follow them


def test_a_checker_falls_back_when_the_rewrite_cannot_follow(monkeypatch):
    """Native evidence on (the GPU's default; here asked for): a kernel that hands its
    arrays to a device function is judged by the simulator's observation instead (on a GPU:
    the replay), so one thread doing all the work is still caught."""
    import cudacourse.check

    monkeypatch.setenv("CUDACOURSE_NATIVE", "1")
    with pytest.raises(E.CheckFailure) as err:
        cudacourse.check.check_vector_add(add_in_a_device_function, seed=3)
    assert err.value.cause == "serial_work", str(err.value)


def test_a_checker_uses_native_evidence(monkeypatch):
    import cudacourse.check

    monkeypatch.setenv("CUDACOURSE_NATIVE", "1")
    seen = []
    real = I.NativeObservation._collect

    def spy(self, *a, **k):
        seen.append(self)
        return real(self, *a, **k)

    monkeypatch.setattr(I.NativeObservation, "_collect", spy)
    with pytest.raises(E.CheckFailure) as err:
        cudacourse.check.check_vector_add(add_one_thread, seed=3)
    assert err.value.cause == "serial_work" and seen, str(err.value)
    assert "passes" in cudacourse.check.check_vector_add(add_right, seed=3)


def test_a_launch_with_an_unwatched_observation_is_still_instrumented(monkeypatch):
    """As the simulator's patches see every launch inside observing(), so does the native
    block: a checker helper that launches with a blank Observation still records races."""
    monkeypatch.setenv("CUDACOURSE_NATIVE", "1")
    x = cuda.to_device(np.arange(N, dtype=np.float32))
    out = cuda.to_device(np.zeros(N, np.float32))
    with I.session(shift_racy) as s:
        assert s.active
        with O.observing() as obs:
            O.launch(shift_racy, 1, N, x, out, name="shift", obs=O.Observation(False))
    assert isinstance(obs, I.NativeObservation) and obs.races
