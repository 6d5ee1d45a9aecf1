"""Lesson 3: moving data between host and device, and hiding the cost of moving it.

The GPU computes on its own memory. Every byte a kernel needs from the host crosses PCIe (or
NVLink-C2C), which is tens of times slower than the GPU's own memory, so this module is about
*when* to move data and *how*: the explicit lifecycle (allocate, copy in, launch, copy back,
free), pinned against pageable host memory, streams that overlap copies with compute,
mapped (zero-copy) memory, and a small model of when offloading pays at all.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from numba import cuda

from .. import _numba_private
from ..runtime.arrays import check_array, is_device_array, same_shape, to_device
from ..runtime.device import is_simulator
from ..runtime.launch import blocks_for
from ..runtime.timing import median_seconds

THREADS = 256


# --- the lifecycle: out = alpha * x ---------------------------------------------------------

def scale_ref(x: Any, alpha: float, xp: Any = np) -> Any:
    """The reference: ``alpha * x`` in the dtype of ``x``."""
    return xp.asarray(x) * xp.asarray(alpha, dtype=x.dtype)


@cuda.jit
def _scale(x, out, alpha):
    """out[i] = alpha * x[i], one thread per element (grid-stride, so any grid works)."""
    start = cuda.grid(1)
    # A grid-stride loop: correct for any grid size, and the bound is the loop condition.
    for i in range(start, out.shape[0], cuda.gridsize(1)):
        out[i] = alpha * x[i]


def gpu_scale(x: Any, alpha: float, out: Any = None, stream: Any = 0) -> Any:
    """``alpha * x`` on the GPU, spelling out the lifecycle.

    Host input: allocate on the device, copy in, launch, copy back, and let the device
    buffers go (their memory returns when the last reference is dropped). Device input: no
    copies at all, the result stays on the device.
    """
    check_array(x, "x", ndim=1)
    on_host = not is_device_array(x)
    d_x = to_device(x)                                    # cudaMalloc + cudaMemcpy H2D
    if out is None:
        d_out = cuda.device_array(x.shape[0], dtype=np.float32, stream=stream)  # cudaMalloc
    else:
        check_array(out, "out", ndim=1)
        same_shape(x=x, out=out)
        d_out = to_device(out) if is_device_array(out) else cuda.device_array_like(out)
    if x.shape[0]:
        _scale[blocks_for(x.shape[0], THREADS), THREADS, stream](d_x, d_out, np.float32(alpha))
    if not on_host:
        return d_out
    if isinstance(out, np.ndarray):
        d_out.copy_to_host(out, stream=stream)            # cudaMemcpy D2H
        result = out
    else:
        result = d_out.copy_to_host(stream=stream)
    if stream:
        stream.synchronize()
    return result                                         # d_x, d_out freed: cudaFree


def memory_state() -> dict[str, float] | None:
    """Device memory free and total, and the frees Numba has queued (bytes); None in the
    simulator, which has no device memory of its own.

    Numba does not call cudaFree the moment the last reference to a device array goes: it
    queues the free and flushes the queue in batches (a free waits for the device).
    """
    if is_simulator():
        return None
    ctx = cuda.current_context()
    free, total = ctx.get_memory_info()
    queued, queued_bytes = _numba_private.queued_frees(ctx)
    return {"free": float(free), "total": float(total), "queued_frees": float(queued),
            "queued_bytes": float(queued_bytes)}


def flush_frees() -> None:
    """Run the frees Numba has queued now (what happens anyway when the queue fills up)."""
    if is_simulator():
        return
    _numba_private.flush_queued_frees(cuda.current_context())


# --- keep data on the device: repeated smoothing with two buffers ----------------------------

def smooth_ref(x: Any, steps: int, xp: Any = np) -> Any:
    """``steps`` rounds of a 3-point average with the end values repeated at the edges."""
    y = xp.asarray(x, dtype=np.float32)
    third = xp.float32(3.0)
    for _ in range(steps):
        left = xp.concatenate([y[:1], y[:-1]])
        right = xp.concatenate([y[1:], y[-1:]])
        y = (left + y + right) / third
    return y


@cuda.jit
def _smooth_step(src, dst):
    """dst[i] = mean of src[i-1], src[i], src[i+1] (the edge values repeated)."""
    i = cuda.grid(1)
    n = src.shape[0]
    # Threads past the end exist because the grid is rounded up to whole blocks.
    if i < n:
        left = src[i - 1] if i > 0 else src[i]
        right = src[i + 1] if i + 1 < n else src[i]
        # Reading src and writing dst: no thread overwrites a value a neighbour still needs.
        dst[i] = (left + src[i] + right) / np.float32(3.0)


def smooth_on_device(x: Any, steps: int) -> Any:
    """``smooth_ref`` on the GPU: one copy in, ``steps`` launches, one copy out.

    Two device buffers take turns as source and destination ("ping-pong"): the data never
    leaves the device between steps and nothing is allocated inside the loop.
    """
    check_array(x, "x", ndim=1)
    if steps < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    on_host = not is_device_array(x)
    if on_host:
        src = cuda.to_device(np.ascontiguousarray(x))        # the only copy in
    else:  # a private copy, device to device, so the caller's array stays unchanged
        src = cuda.device_array(x.shape[0], dtype=np.float32)
        src.copy_to_device(to_device(x))
    dst = cuda.device_array_like(src)
    n = x.shape[0]
    for _ in range(steps):
        _smooth_step[blocks_for(n, THREADS), THREADS](src, dst)
        src, dst = dst, src  # the output of this step is the input of the next
    return src.copy_to_host() if on_host else src


# --- streams: a chunked pipeline --------------------------------------------------------------

def chunk_bounds(n: int, n_chunks: int) -> list[tuple[int, int]]:
    """``n_chunks`` consecutive (start, stop) ranges covering 0..n, the last one shorter.

    The chunk size is rounded up, so the tail is never dropped when n_chunks does not
    divide n (fewer chunks come out when n is tiny).
    """
    if n_chunks < 1:
        raise ValueError(f"n_chunks must be >= 1, got {n_chunks}")
    size = max(1, -(-n // n_chunks))
    return [(lo, min(lo + size, n)) for lo in range(0, n, size)]


@dataclass(frozen=True)
class Bar:
    """One operation on a timeline: which stream, what, when (milliseconds)."""

    stream: int
    kind: str  # "H2D", "kernel", "D2H"
    start: float
    end: float
    chunk: int


def pipelined_scale(x: np.ndarray, alpha: float, n_chunks: int = 8, n_streams: int = 3,
                    timeline: bool = False) -> Any:
    """``alpha * x`` in chunks that flow through ``n_streams`` streams.

    Chunk k uses stream k % n_streams and that stream's own device buffers, so operations on
    different streams never share memory, and the copy engines can move chunk k+1 while the
    SMs work on chunk k. Host memory is pinned (page-locked): the DMA engines copy pinned
    memory directly, which is what lets a copy run asynchronously.

    With ``timeline=True`` return ``(result, bars)``: per-operation start and end times
    from CUDA events on a GPU (empty in the simulator, which has no timing events).
    """
    check_array(x, "x", ndim=1)
    if isinstance(x, np.ndarray) is False:
        raise TypeError("x must be a NumPy (host) array: the pipeline exists to move it")
    if n_streams < 1:
        raise ValueError(f"n_streams must be >= 1, got {n_streams}")
    n = x.shape[0]
    chunks = chunk_bounds(n, n_chunks)
    size = chunks[0][1] - chunks[0][0] if chunks else 0
    streams = [cuda.stream() for _ in range(n_streams)]
    h_in = cuda.pinned_array(n, dtype=np.float32)   # page-locked staging for the input
    h_in[:] = x
    h_out = cuda.pinned_array(n, dtype=np.float32)  # and for the result
    d_in = [cuda.device_array(size, dtype=np.float32) for _ in streams]
    d_out = [cuda.device_array(size, dtype=np.float32) for _ in streams]
    timed = timeline and not is_simulator()
    marks: list[tuple[int, str, int, Any, Any]] = []
    start = cuda.event(timing=True) if timed else None
    if timed:
        start.record()
    for k, (lo, hi) in enumerate(chunks):
        s = k % n_streams
        stream, m = streams[s], hi - lo
        di, do = d_in[s][:m], d_out[s][:m]
        steps = (("H2D", lambda: di.copy_to_device(h_in[lo:hi], stream=stream)),
                 ("kernel", lambda: _scale[blocks_for(m, THREADS), THREADS, stream](
                     di, do, np.float32(alpha))),
                 ("D2H", lambda: do.copy_to_host(h_out[lo:hi], stream=stream)))
        for kind, step in steps:
            if timed:
                e0, e1 = cuda.event(timing=True), cuda.event(timing=True)
                e0.record(stream)
                step()
                e1.record(stream)
                marks.append((s, kind, k, e0, e1))
            else:
                step()
    for stream in streams:
        stream.synchronize()  # h_out is complete only when every stream has finished
    result = np.array(h_out)
    if not timeline:
        return result
    bars = [Bar(s, kind, start.elapsed_time(e0), start.elapsed_time(e1), k)
            for s, kind, k, e0, e1 in marks]
    return result, bars


def modelled_timeline(n_chunks: int, n_streams: int, h2d: float = 1.0, kernel: float = 1.0,
                      d2h: float = 1.0) -> list[Bar]:
    """What a GPU with one copy engine per direction does with the pipeline above.

    Each operation starts when the previous operation of its stream has finished and its
    engine (host-to-device copies, SMs, device-to-host copies) is free; engines take work in
    the order it was issued. Durations are in arbitrary units.
    """
    ready = [0.0] * max(1, n_streams)
    free = {"H2D": 0.0, "kernel": 0.0, "D2H": 0.0}
    bars = []
    for k in range(n_chunks):
        s = k % max(1, n_streams)
        for kind, dur in (("H2D", h2d), ("kernel", kernel), ("D2H", d2h)):
            t0 = max(ready[s], free[kind])
            t1 = t0 + dur
            ready[s] = free[kind] = t1
            bars.append(Bar(s, kind, t0, t1, k))
    return bars


# --- mapped (zero-copy) memory -----------------------------------------------------------------

def mapped_scale(x: np.ndarray, alpha: float) -> np.ndarray:
    """``alpha * x`` with the kernel reading and writing host memory directly.

    ``cuda.mapped_array`` is pinned host memory mapped into the device's address space: no
    copies are issued, each access the kernel makes crosses the bus instead. That pays when
    every byte is touched once (a copy would move it once anyway) and the data is small or
    the device shares memory with the host; it loses badly when bytes are read repeatedly.
    """
    check_array(x, "x", ndim=1)
    n = x.shape[0]
    h_x = cuda.mapped_array(n, dtype=np.float32)
    h_out = cuda.mapped_array(n, dtype=np.float32)
    h_x[:] = x
    if n:
        _scale[blocks_for(n, THREADS), THREADS](h_x, h_out, np.float32(alpha))
    cuda.synchronize()  # the kernel wrote host memory: wait before reading it
    return np.array(h_out)


# --- measuring copies ------------------------------------------------------------------------------

def copy_seconds(nbytes: int, pinned: bool, direction: str = "H2D", repeats: int = 5) -> float:
    """Median seconds to copy ``nbytes`` between host and device.

    On a GPU: CUDA events around each copy. In the simulator a "copy" is a NumPy copy timed
    with the host clock: the number says nothing about a GPU.
    """
    if direction not in ("H2D", "D2H"):
        raise ValueError(f"direction must be 'H2D' or 'D2H', got {direction!r}")
    if nbytes < 4:
        raise ValueError(f"nbytes must be at least 4, got {nbytes}")
    n = nbytes // 4
    host = cuda.pinned_array(n, dtype=np.float32) if pinned else np.empty(n, np.float32)
    host[:] = 1.0
    dev = cuda.device_array(n, dtype=np.float32)

    def copy() -> None:
        dev.copy_to_device(host) if direction == "H2D" else dev.copy_to_host(host)

    return median_seconds(copy, repeats, warmup=1)


def bandwidth_sweep(sizes: Sequence[int], direction: str = "H2D",
                    repeats: int = 5) -> list[dict[str, float]]:
    """GB/s for pageable and pinned host memory at each size in bytes."""
    rows = []
    for nbytes in sizes:
        row = {"bytes": float(nbytes)}
        for label, pinned in (("pageable", False), ("pinned", True)):
            row[label] = nbytes / copy_seconds(nbytes, pinned, direction, repeats) / 1e9
        rows.append(row)
    return rows


# --- when offloading pays -----------------------------------------------------------------------

# Host-to-device copies of 1 GiB measured on the course's NVIDIA H200 (CUDA events, medians
# of repeats; `bandwidth_sweep` above). docs/benchmarks.json has no host-device case yet, so
# this record is the figures' one source, with the day they were measured: lesson 3 renders
# them from here ({{const.transfer.H200_H2D.date}} and the two rates), never retyped.
@dataclass(frozen=True)
class LinkMeasurement:
    gpu: str
    date: str  # YYYY-MM-DD
    nbytes: int
    pinned_gb_s: float
    pageable_gb_s: float


H200_H2D = LinkMeasurement(gpu="NVIDIA H200", date="2026-11-30", nbytes=2**30,
                           pinned_gb_s=52.6, pageable_gb_s=6.8)
H200_PINNED_H2D_GB_S = H200_H2D.pinned_gb_s
H200_PAGEABLE_H2D_GB_S = H200_H2D.pageable_gb_s
CPU_GB_S, CPU_TFLOP_S = 200, 1.0  # round assumptions for one multi-core server socket


def h200_sgemm_tflop_s() -> float:
    """cuBLAS SGEMM on the H200 from the course's benchmark (docs/benchmarks.json)."""
    from ..course import prose

    return float(prose.value("bench.ceiling.cublas_sgemm_tflop_s"))


@dataclass(frozen=True)
class Machine:
    """The few numbers the offload model needs (bytes/s and FLOP/s)."""

    link: float  # host<->device bandwidth, pinned
    gpu_flops: float
    cpu_flops: float
    cpu_bandwidth: float  # host memory bandwidth, for a CPU doing the same work
    launch: float = 40e-6  # seconds per launch from Python

    @classmethod
    def h200(cls) -> "Machine":
        """The NVIDIA H200's pinned host-to-device rate (``H200_H2D``), its SGEMM rate and
        its launch cost from docs/benchmarks.json; the CPU figures are round assumptions for
        one socket."""
        from ..course import prose

        return cls(link=H200_PINNED_H2D_GB_S * 1e9, gpu_flops=h200_sgemm_tflop_s() * 1e12,
                   cpu_flops=CPU_TFLOP_S * 1e12, cpu_bandwidth=CPU_GB_S * 1e9,
                   # a plain Numba launch from Python, measured in the same benchmark
                   launch=float(prose.value("bench.launch_overhead_bare_numba.value")) * 1e-6)

    def describe(self) -> str:
        """The model's figures, as the lesson prints them under its plot."""
        return (f"link {self.link / 1e9:.1f} GB/s, GPU {self.gpu_flops / 1e12:.1f} TFLOP/s, "
                f"host memory {self.cpu_bandwidth / 1e9:.0f} GB/s, CPU "
                f"{self.cpu_flops / 1e12:.1f} TFLOP/s, {self.launch * 1e6:.0f} us per launch")


def offload_times(intensity: Any, nbytes: float, machine: Machine) -> dict[str, Any]:
    """Seconds for work of ``intensity`` FLOP per byte over ``nbytes`` of input and output.

    GPU: bytes cross the link, then compute (no overlap, one launch). CPU: the work runs
    at whichever limit it hits first, memory or arithmetic (a roofline).
    """
    intensity = np.asarray(intensity, dtype=np.float64)
    flops = intensity * nbytes
    gpu = nbytes / machine.link + flops / machine.gpu_flops + machine.launch
    cpu = np.maximum(nbytes / machine.cpu_bandwidth, flops / machine.cpu_flops)
    return {"intensity": intensity, "gpu": gpu, "cpu": cpu, "speedup": cpu / gpu}


def break_even_intensity(nbytes: float, machine: Machine) -> float:
    """The FLOP per byte above which the GPU (copies included) beats the CPU."""
    grid = np.logspace(-2, 5, 2000)
    t = offload_times(grid, nbytes, machine)
    wins = np.flatnonzero(t["gpu"] < t["cpu"])
    return float(grid[wins[0]]) if wins.size else float("inf")
