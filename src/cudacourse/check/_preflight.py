"""Instrumented first: on a GPU, no launch of learner code runs before an index-checked run.

An index outside an array, on a GPU, does not raise: a read returns whatever lies there, and
a write or a read far enough away ends the launch with CUDA_ERROR_ILLEGAL_ADDRESS, after
which the process's CUDA context is unusable (every later call fails the same way, so every
later cell of the notebook fails until the kernel is restarted). The simulator checks every
index and names the thread and the index instead. So, during a check, every launch of a
kernel made of learner code (the learner's kernel, or a course kernel that calls a learner
device function), however it is launched (by a checker, or by a learner host function that
a checker calls: ``kernel[grid, block](...)``), first runs :mod:`._instrument`'s build of
that kernel on copies of the same arguments, every index of every array checked (an access
outside is recorded and dropped, so the build itself never goes outside). Only when that run
found no access outside does the launch itself go on; otherwise the check fails with the
thread, the array, the index and the line, in the simulator's words (``_engine.outside``),
and the raw kernel never runs. So too when a ``while`` loop of that run went past the
build's cap (``_instrument.LOOP_CAP``): the check fails ``endless_loop``, naming the loop and
the thread, and the raw kernel, which on a GPU would spin beyond interruption, never runs.

The one place that decides is :func:`first_run`, called by the launch hook :func:`guarding`
installs (every public ``check_*`` runs inside it, ``check/__init__._public``), at the seam
every launch passes (the simulator's ``FakeCUDAKernel.__call__``, Numba's
``CUDADispatcher.call`` on a GPU). A kernel the rewrite cannot follow (a view of an array,
an array handed to a device function) is run first in a simulator child instead, on the
same arguments (``_replay``): slower, as safe. In the simulator itself the hook is off (every
simulated index is checked anyway) unless ``CUDACOURSE_PREFLIGHT=1``, which the tests set to
take the GPU's path there: the same build, run by the simulator. ``CUDACOURSE_PREFLIGHT=0``
turns it off on a GPU (to show, on purpose, what it prevents).
"""

from __future__ import annotations

import base64
import contextlib
import inspect
import os
import threading
from typing import Any, Iterator

from . import _buffers
from . import _engine as E
from . import _instrument, _observe, _origin, _replay, _spy
from ..i18n import T

_np = E._np
_STATE: dict = {"depth": 0, "lock": threading.Lock(), "learner": {}}


# what ``_engine.outside`` calls an index outside an array (a first run's verdicts)
OUTSIDE_CAUSES = frozenset({"out_of_bounds_read", "out_of_bounds_write", "off_by_one_guard",
                            "off_by_one", "periodic_wrap"})


class OutOfBoundsFound(E.CheckFailure):
    """A launch's instrumented first run went outside an array: the verdict (in the
    simulator's words) and the records it came from, so that a checker's launch
    (``_engine.launch``, ``_observe.launch``) can say it in its own words, as the simulator
    would have."""

    records: list  # the first run's accesses outside ([] when the simulator refused one)
    where: tuple  # (who, index, axis, size, tile) of the first, for ``_engine.outside``
    positions: dict  # the kernel's array parameter -> its position in the launch's arguments

    @classmethod
    def of(cls, exc: E.CheckFailure, records: list, where: tuple,
           positions: dict) -> "OutOfBoundsFound":
        found = cls(exc.text_message or exc.message, cause=exc.cause,
                    hint=exc.text_hint or exc.hint, context=exc.context)
        found.records, found.where, found.positions = records, where, positions
        return found

    def reword(self, said: E.CheckFailure) -> None:
        """Take the words of ``said`` (the same refusal, in a checker's launch's words:
        its name for the kernel, its case), keeping the records."""
        E.CheckFailure.__init__(self, said.text_message or said.message, cause=said.cause,
                                hint=said.text_hint or said.hint, context=said.context)


def required() -> bool:
    """Whether launches of learner code run their instrumented build first: on a GPU (unless
    CUDACOURSE_PREFLIGHT=0), in the simulator only when CUDACOURSE_PREFLIGHT=1 (tests)."""
    if E.simulator():
        return os.environ.get("CUDACOURSE_PREFLIGHT", "0") == "1"
    return os.environ.get("CUDACOURSE_PREFLIGHT", "1") != "0"


def learner_code(kernel: Any) -> bool:
    """Whether launching ``kernel`` runs learner code: a kernel that is not the course's, or
    a course kernel that calls a device function that is not (``check_online_update``'s
    wrappers call the learner's ``online_update``). The instrumented builds never are."""
    if _instrument.is_build(kernel) or getattr(kernel, "_device", False):
        return False
    py = _origin.unwrap(kernel)
    key = id(py)
    hit = _STATE["learner"].get(key)
    if hit is not None and hit[0] is py:
        return hit[1]
    course = _origin.package_origin(py)
    code = getattr(py, "__code__", None)
    # Numba's own kernels (a device array's ``d[:] = v`` launches one) and any installed
    # package's: not the learner's, and not instrumentable (they use Numba's internals)
    other = not course and code is not None and _origin.library_file(code.co_filename)
    mine = not course and not other
    if course:
        called = dict(getattr(py, "__globals__", {}) or {})
        for cell_name, cell in zip(py.__code__.co_freevars, py.__closure__ or ()):
            with contextlib.suppress(ValueError):
                called[cell_name] = cell.cell_contents
        names = set(py.__code__.co_names) | set(py.__code__.co_freevars)
        mine = any(_origin.is_dispatcher(called[n]) and
                   not _origin.package_origin(_origin.unwrap(called[n]))
                   for n in names if n in called)
    _STATE["learner"][key] = (py, mine)
    return mine


spying = _spy.spying  # tests: the order of a check's launches (see check/_spy.py)


def _note(event: str, kernel: Any) -> None:
    _spy.note(event, getattr(_origin.unwrap(kernel), "__name__", "kernel"))


@contextlib.contextmanager
def _inside() -> Iterator[None]:
    with _STATE["lock"]:
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _STATE["lock"]:
            _STATE["depth"] -= 1


def _busy() -> bool:
    return _STATE["depth"] > 0


# --- the one decision ------------------------------------------------------------------------

def _is_array(a: Any) -> bool:
    """An array argument, a 0-d one included (``cuda.to_device(alpha)`` makes one); not a
    NumPy scalar (``np.float32(2.0)``), which has a shape and a dtype too."""
    return hasattr(a, "shape") and hasattr(a, "dtype") and not isinstance(a, _np.generic)


def _host_values(a: Any) -> Any:
    """The values of an array argument as a plain NumPy array, read without any observer
    seeing the read (a counting or watched array of the simulator reports nothing)."""
    inner = a
    for _ in range(3):
        nxt = getattr(inner, "__dict__", {}).get("_ary")
        if nxt is None:
            break
        inner = nxt
    if isinstance(inner, _np.ndarray):
        return _np.array(_buffers._plain(inner), copy=True)
    return a.copy_to_host()


def _copy(a: Any) -> Any:
    """A device copy of an array argument: the first run may write it (an output, an
    accumulator), and the launch itself must see the values it was given."""
    from numba import cuda

    if E.simulator() or isinstance(a, _np.ndarray):
        return cuda.to_device(_host_values(a))
    try:
        out = cuda.device_array(a.shape, dtype=a.dtype)
        out.copy_to_device(a)  # device to device: nothing crosses the bus
        return out
    except Exception:  # noqa: BLE001 - a strided view: through the host, then
        return cuda.to_device(_np.ascontiguousarray(a.copy_to_host()))


def first_run(kernel: Any, grid: Any, block: Any, args: tuple, shared: int = 0) -> None:
    """Run ``kernel``'s instrumented build for this launch, on copies of ``args``; raise
    :class:`OutOfBoundsFound` when it went outside an array, any other failure of that run
    as it is (the launch would fail the same way); return when the launch may go on."""
    __tracebackhide__ = True
    from numba import cuda

    name = getattr(_origin.unwrap(kernel), "__name__", "kernel")
    grid, block = E.launch_dims(grid), E.launch_dims(block)
    cuda.synchronize()  # what earlier work (any stream) writes into the arguments is there
    with _inside():
        try:
            with _observe.unobserved():
                _instrumented(kernel, grid, block, args, shared, name)
        except _instrument.NotInstrumentable:
            _in_simulator(kernel, grid, block, args, shared, name)


def _instrumented(kernel: Any, grid: Any, block: Any, args: tuple, shared: int,
                  name: str) -> None:
    """The first run itself: every array argument copied and watched (every index checked)."""
    __tracebackhide__ = True
    params = _params(kernel, len(args))
    copies = list(args)
    obs = _instrument.NativeObservation()
    positions = {}
    for i, a in enumerate(args):
        if _is_array(a) and a.ndim > 0:
            copies[i] = obs.watch(_copy(a), params[i])
            positions[params[i]] = i
        elif _is_array(a):  # 0-d: no index to check, but the launch may write it
            copies[i] = _copy(a)
    try:
        obs.run(kernel, grid, block, *copies, name=name, shared=shared, strict=True)
    except E.CheckFailure:
        if obs.oob:  # the run failed after going outside (the simulator computes on)
            _note("instrumented", kernel)
            _found(obs, kernel, name, grid, block, positions)
        if obs.endless is not None:  # a while loop past the build's cap: the launch itself
            _note("instrumented", kernel)  # would never end, so it never runs
            _note("refused", kernel)
        raise
    _note("instrumented", kernel)
    if obs.oob:
        _found(obs, kernel, name, grid, block, positions)


def _params(kernel: Any, n: int) -> list[str]:
    try:
        names = list(inspect.signature(_origin.unwrap(kernel)).parameters)
    except (TypeError, ValueError):
        names = []
    return [names[i] if i < len(names) else f"arg{i}" for i in range(n)]


def _who(r: Any) -> Any:
    (bx, by, bz), (tx, ty, tz) = r.thread
    return T("thread ({tid_x}, {tid_y}, {tid_z}) of block ({bid_x}, {bid_y}, {bid_z})",
             tid_x=tx, tid_y=ty, tid_z=tz, bid_x=bx, bid_y=by, bid_z=bz)


def _tile(r: Any) -> tuple | None:
    return (r.array, r.line, r.shared[0], tuple(r.shared[1])) if r.shared is not None else None


def _found(obs: Any, kernel: Any, name: str, grid: Any, block: Any,
           positions: dict) -> None:
    """Raise the verdict on ``obs``'s first access outside an array."""
    __tracebackhide__ = True
    r = obs.oob[0]
    where = (_who(r), r.index, r.axis, r.size, _tile(r))
    _note("refused", kernel)
    _raise(name, {"grid": grid, "block": block}, len(grid) if isinstance(grid, tuple) else 1,
           list(obs.oob), where, positions)


def _raise(name: str, ctx: dict, grid_ndim: int, records: list, where: tuple,
           positions: dict) -> None:
    __tracebackhide__ = True
    who, index, axis, size, tile = where
    try:
        E.outside(name, ctx, who, grid_ndim, index, axis, size, tile=tile)
    except E.CheckFailure as exc:
        raise OutOfBoundsFound.of(exc, records, where, positions) from None


def refused_by_simulator(kernel: Any, exc: IndexError) -> None:
    """The simulator refused an index (it checks every one) in a launch of learner code made
    outside a checker's own launch (inside a learner host function): the same verdict as
    ``_engine.launch`` gives, and as a GPU's first run gives, instead of the bare IndexError."""
    __tracebackhide__ = True
    m = E._OOB.search(str(exc))
    if m is None:
        raise exc
    who = E.plain(str(exc).split(":")[0])
    where = (who, int(m.group(1)), int(m.group(2)), int(m.group(3)), E._shared_index(exc, m))
    grid = E.launch_dims(kernel.grid_dim)
    _note("refused", kernel)
    _raise(getattr(_origin.unwrap(kernel), "__name__", "kernel"),
           {"grid": grid, "block": E.launch_dims(kernel.block_dim)},
           len(grid) if isinstance(grid, tuple) else 1, [], where, {})


# --- a kernel the rewrite cannot follow: its first run in the simulator -------------------------

def _in_simulator(kernel: Any, grid: Any, block: Any, args: tuple, shared: int,
                  name: str) -> None:
    """The first run of a launch the instrumented build cannot make: in a simulator child on
    a GPU (every simulated index is checked), on the same values (in the simulator, with
    CUDACOURSE_PREFLIGHT=1, the same part runs in this process)."""
    __tracebackhide__ = True
    wire = [wire_arg(a) for a in args]
    _note("replayed", kernel)
    try:
        _replay.run_sim_checks(simulated_launch, kernel, grid=_jsonable(grid),
                               block=_jsonable(block), shared=int(shared or 0), name=name,
                               args=wire)
    except E.CheckFailure as exc:
        if E.simulator() or exc.cause not in OUTSIDE_CAUSES:
            raise  # (in the simulator, the part in this process noted its refusal itself)
        _note("refused", kernel)  # the child found an index outside: the launch never runs
        raise


def _jsonable(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def wire_arg(a: Any) -> dict:
    """One launch argument as a JSON value (arrays by dtype, shape and base64 bytes)."""
    if _is_array(a):
        host = _np.array(_host_values(a), order="C")  # (ascontiguousarray makes 0-d 1-d)
        return {"array": base64.b64encode(host.tobytes()).decode("ascii"),
                "dtype": host.dtype.str, "shape": list(host.shape)}
    if isinstance(a, _np.generic):
        return {"scalar": a.item(), "dtype": a.dtype.str}
    return {"value": a}


def unwire_arg(w: dict) -> Any:
    if "array" in w:
        raw = base64.b64decode(w["array"].encode("ascii"))
        return _np.frombuffer(raw, dtype=_np.dtype(w["dtype"])).reshape(w["shape"]).copy()
    if "scalar" in w:
        return _np.dtype(w["dtype"]).type(w["scalar"])
    return w["value"]


def simulated_launch(kernel: Any, *, grid: Any, block: Any, shared: int = 0,
                     name: str = "kernel", args: list = ()) -> None:
    """A sim part (``_replay``): the launch, every array watched, in the simulator; its first
    access outside an array is the verdict, in the words :func:`first_run` gives it."""
    __tracebackhide__ = True
    from numba import cuda

    grid = tuple(grid) if isinstance(grid, list) else grid
    block = tuple(block) if isinstance(block, list) else block
    params = _params(kernel, len(args))
    values = [unwire_arg(w) for w in args]
    with _observe.observing() as obs:
        launched = [(obs.watch(cuda.to_device(v), params[i]) if v.ndim > 0 else
                     cuda.to_device(v)) if _is_array(v) else v for i, v in enumerate(values)]
        E.launch(kernel, grid, block, *launched, name=name, shared=shared)
    if obs.oob:
        _found(obs, kernel, name, grid, block, {p: i for i, p in enumerate(params)})


# --- the hook ---------------------------------------------------------------------------------

@contextlib.contextmanager
def guarding() -> Iterator[None]:
    """Within the block, every launch of learner code runs :func:`first_run` before it
    (where :func:`required`), however it is launched; in the simulator an index it refuses
    is said in the checkers' words (:func:`refused_by_simulator`). Every public ``check_*``
    runs inside."""
    if not required() and not E.simulator():
        yield
        return
    if E.simulator():
        from numba.cuda.simulator import kernel as sim_kernel

        owner, attr = sim_kernel.FakeCUDAKernel, "__call__"
    else:
        from numba.cuda import dispatcher

        owner, attr = dispatcher.CUDADispatcher, "call"
    orig = owner.__dict__[attr]
    if getattr(orig, "_cudacourse_first_run", False):  # already (a checker inside one)
        yield
        return
    if E.simulator():
        def hooked(self: Any, *args: Any) -> Any:
            __tracebackhide__ = True
            if self._device or sim_kernel._kernel_context is not None or _busy() \
                    or not learner_code(self):
                return orig(self, *args)
            if required():
                first_run(self, self.grid_dim, self.block_dim, args,
                          int(getattr(self, "dynshared_size", 0) or 0))
            _note("raw", self)
            try:
                return orig(self, *args)
            except IndexError as exc:
                refused_by_simulator(self, exc)
    else:
        def hooked(self: Any, args: Any, launch_config: Any) -> Any:  # type: ignore[misc]
            __tracebackhide__ = True
            if _busy() or not learner_code(self):
                return orig(self, args, launch_config)
            first_run(self, launch_config.griddim, launch_config.blockdim, tuple(args),
                      int(launch_config.sharedmem or 0))
            _note("raw", self)
            with _inside():  # Numba's own re-dispatch (a specialised kernel) goes straight
                return orig(self, args, launch_config)

    hooked._cudacourse_first_run = True
    setattr(owner, attr, hooked)
    try:
        yield
    finally:
        setattr(owner, attr, orig)
