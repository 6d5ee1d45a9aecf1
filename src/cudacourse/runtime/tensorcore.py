"""Tensor cores from Python: ``mma.sync``, ``ldmatrix`` and ``cp.async`` for Numba kernels.

Numba has no function for these PTX instructions, but it can emit any instruction through
``numba.cuda.extending.intrinsic`` and an LLVM inline-assembly call (as
``cudacourse.runtime.intrinsics`` does for 16-byte loads). In the simulator every function here is
plain Python with the same results: the warp-wide ones are *collectives* -- all 32 lanes meet
(``cudacourse.runtime.simwarp``), the product is computed with NumPy on the rounded inputs, and each
lane gets back its fragment as the PTX ISA lays it out (``cudacourse.runtime.fragments`` has the
tables and explains them).

Values and types (bfloat16 has no Numba type in the simulator, so everything 16-bit travels
as bit patterns):

* a *register* of A or B for bf16/f16 is a ``uint32`` holding two 16-bit values, the lower
  column (A) or lower row (B) in bits 0-15 (:func:`pack_bf16x2` makes one from two floats);
* C and D are float32; TF32 operands are plain float32 (the tensor core ignores their 13 low
  mantissa bits);
* shared-memory tiles of bf16 are ``uint16`` arrays (``cuda.shared.array((rows, cols),
  uint16)``) holding bit patterns; global bf16 arrays likewise (``fragments.to_bf16_bits``).

The functions (``a`` a 4-tuple, ``b`` a 2-tuple, ``c`` a 4-tuple; each returns ``d``):

=====================================  =======================================================
``mma_bf16(a, b, c)``                  ``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32``
``mma_f16(a, b, c)``                   ``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``
``mma_tf32(a, b, c)``                  ``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``
``ldmatrix_x1/x2/x4(tile, row, col)``  ``ldmatrix.sync.aligned.m8n8.x{1,2,4}.shared.b16``
``ldmatrix_x1/x2/x4_trans(...)``       the same with ``.trans``
``smem_addr(tile, row, col)`` -> uint32  the shared-memory byte address of ``tile[row, col]``
``ldmatrix_x4_at(addr)`` (``_trans``)   ldmatrix from an address: ``smem_addr(...) + bytes``
                                       (hoisted address arithmetic in hot loops)
``cp_async16(dst, r, c, src, r, c)``   ``cp.async.cg.shared.global [dst], [src], 16``
``cp_async8 / cp_async4`` (and         ``cp.async.ca.shared.global [dst], [src], 8`` (4, 16)
``cp_async16_ca``)
``cp_async_commit()``                  ``cp.async.commit_group``
``cp_async_wait(n)``                   ``cp.async.wait_group n`` (``n`` a constant)
``cp_async_wait_all()``                ``cp.async.wait_all``
``pack_bf16x2(lo, hi)`` -> uint32      ``cvt.rn.bf16x2.f32`` (``pack_f16x2``: ``.f16x2``)
``unpack_bf16x2(r)`` -> (lo, hi)       two shifts and bit casts
``float_bits(x)`` / ``bits_float(u)``  ``mov.b32`` (a bit cast)
``exp2_approx(x)``                     ``ex2.approx.ftz.f32`` (one MUFU instruction)
``to_tf32(x)``                          ``cvt.rna.tf32.f32``: x rounded to TF32, as float32
``shared_tile(buf, start, rows, cols)``  a 2-D ``rows x cols`` view of a 1-D (dynamic shared)
                                       array from element ``start`` (constant rows, cols)
=====================================  =======================================================

Every warp-wide instruction (``mma``, ``ldmatrix``) must be reached by all 32 lanes of the
warp with the same instruction (``.sync.aligned``): the simulator raises ``WarpError``
otherwise, where a GPU would hang or compute garbage.

The simulator also keeps the ordering rule of ``cp.async``: a copy is *pending* from issue
until a ``cp_async_wait`` that covers its group; until then its destination holds 0xFF bytes
(NaN for float32 and bfloat16), and ``ldmatrix`` on a pending destination raises
:class:`AsyncCopyError` naming the copy. The data is written at the wait, so a thread that
reads another thread's copy without ``cuda.syncthreads()`` after that thread's wait reads
NaNs, or is stopped by ``ldmatrix``, as a GPU would give it stale data.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

import threading
from typing import Any

import numpy as np

from . import fragments as _fr
from .._numba_private import simulating

SIM = simulating()
CP_ASYNC_SIZES = {("cg", 16), ("ca", 16), ("ca", 8), ("ca", 4)}  # PTX: .cg takes only 16


class AsyncCopyError(RuntimeError):
    """Data of a ``cp.async`` was read before a wait made it arrive (simulator)."""


# --- the simulator's versions ------------------------------------------------------------------

def _u32(x: Any) -> int:
    return int(x) & 0xFFFFFFFF


def _sim_mma(kind: str, a: tuple, b: tuple, c: tuple) -> tuple:
    from . import simwarp

    na = 4
    nb = 2
    if len(a) != na or len(b) != nb or len(c) != 4:
        raise TypeError(f"mma_{kind} takes a = 4 registers, b = 2, c = 4; got "
                        f"{len(a)}, {len(b)}, {len(c)}")
    return simwarp.collective(f"mma_{kind}", _resolve_mma(kind), (tuple(a), tuple(b),
                                                                   tuple(c)))


def _resolve_mma(kind: str):
    def resolve(values: dict[int, Any]) -> dict[int, Any]:
        _all_lanes(values, f"mma_{kind}")
        a = np.array([values[l][0] for l in range(32)], dtype=object)
        b = np.array([values[l][1] for l in range(32)], dtype=object)
        c = np.array([values[l][2] for l in range(32)], dtype=np.float32)
        if kind == "tf32":
            af = np.array([[np.float32(x) for x in row] for row in a], np.float32)
            bf = np.array([[np.float32(x) for x in row] for row in b], np.float32)
            A, B = _fr.tf32_a_from_fragments(af), _fr.tf32_b_from_fragments(bf)
        else:
            au = np.vectorize(_u32, otypes=[np.uint32])(a)
            bu = np.vectorize(_u32, otypes=[np.uint32])(b)
            conv = _fr.from_bf16_bits if kind == "bf16" else _fr.from_f16_bits
            A = conv(_fr.a_from_fragments(au))
            B = conv(_fr.b_from_fragments(bu))
        D = _fr.mma_reference(A, B, _fr.c_from_fragments(c), kind)
        d = _fr.c_fragments(D)
        return {lane: tuple(np.float32(x) for x in d[lane]) for lane in values}
    return resolve


def _all_lanes(values: dict, name: str) -> None:
    if len(values) != 32:
        missing = sorted(set(range(32)) - set(values))
        from .simwarp import WarpError

        raise WarpError(f"{name} is a warp-wide instruction (.sync.aligned): all 32 lanes "
                           f"of the warp must execute it together; lanes {missing} did not "
                           "(exited or not part of a full warp)")


def _sim_ldmatrix(num: int, trans: bool, tile: Any, row: Any, col: Any) -> Any:
    from . import simwarp

    res = simwarp.collective(f"ldmatrix_x{num}{'_trans' if trans else ''}",
                             _resolve_ldmatrix(num, trans), (tile, int(row), int(col)))
    return res[0] if num == 1 else res


class SmemAddr:
    """Simulator: a shared-memory byte address (``smem_addr``), kept as (tile, byte offset)
    so that integer arithmetic on it moves through the tile as it would on a GPU."""

    __slots__ = ("tile", "offset")

    def __init__(self, tile: np.ndarray, offset: int) -> None:
        self.tile, self.offset = tile, int(offset)

    def __add__(self, n: Any) -> "SmemAddr":
        return SmemAddr(self.tile, self.offset + int(n))

    __radd__ = __add__

    def __sub__(self, n: Any) -> "SmemAddr":
        return SmemAddr(self.tile, self.offset - int(n))

    def where(self) -> tuple[np.ndarray, int, int]:
        """(tile, row, col) of the address."""
        t = self.tile
        row, rest = divmod(self.offset, t.strides[0])
        return t, row, rest // t.strides[1]


def _sim_ldmatrix_at(num: int, trans: bool, addr: Any) -> Any:
    if not isinstance(addr, SmemAddr):
        raise TypeError(f"ldmatrix_x{num}{'_trans' if trans else ''}_at needs an address from "
                        f"smem_addr (plus or minus bytes), got {type(addr).__name__}")
    return _sim_ldmatrix(num, trans, *addr.where())


def _base(arr: Any) -> np.ndarray:
    return getattr(arr, "_ary", arr)


def _resolve_ldmatrix(num: int, trans: bool):
    name = f"ldmatrix_x{num}{'_trans' if trans else ''}"

    def resolve(values: dict[int, Any]) -> dict[int, Any]:
        _all_lanes(values, name)
        mats = []
        for m in range(num):
            rows = []
            for lane in range(8 * m, 8 * m + 8):
                tile, r, c = values[lane]
                ary = _base(tile)
                if ary.ndim != 2 or ary.dtype.itemsize != 2:
                    raise TypeError(f"{name}: the tile must be a 2-D shared array of 16-bit "
                                    f"values (uint16 bit patterns), got {ary.ndim}-D "
                                    f"{ary.dtype}")
                if not (0 <= r < ary.shape[0] and 0 <= c and c + 8 <= ary.shape[1]):
                    raise IndexError(f"{name}: lane {lane} gives row address tile[{r}, {c}], "
                                     f"but 8 elements from there leave the {ary.shape} tile")
                off = r * ary.strides[0] + c * ary.strides[1]
                if off % 16:
                    raise RuntimeError(f"{name}: lane {lane}'s row address tile[{r}, {c}] is "
                                       f"not on a 16-byte boundary (byte {off} of the tile); "
                                       "each row of an 8 x 8 matrix must be 16-byte aligned")
                _check_not_pending(ary, r, c, c + 8, f"{name} (lane {lane})")
                rows.append(np.ascontiguousarray(ary[r, c:c + 8]).view(np.uint16))
            mats.append(np.array(rows, np.uint16))
        lay = _fr.ldmatrix_layout(trans)
        out = {}
        for lane in range(32):
            (r0, c0), (r1, c1) = lay[lane]
            out[lane] = tuple(np.uint32(_fr.pack_pairs(M[r0, c0], M[r1, c1])) for M in mats)
        return out
    return resolve


# cp.async: the per-block record of pending copies

_CP_LOCK = threading.Lock()


def _span(ary: np.ndarray, row: int, c0: int, c1: int) -> tuple[int, int]:
    """Bytes [start, end) of ``ary[row, c0:c1]`` in the process: views of one shared
    buffer (each thread's own slice or reshape of dynamic shared memory) compare equal."""
    start = ary.__array_interface__["data"][0] + row * ary.strides[0] + c0 * ary.strides[1]
    return start, start + (c1 - c0) * ary.strides[1]


class _Copy:
    __slots__ = ("dst", "row", "c0", "c1", "data", "thread", "span")

    def __init__(self, dst, row, c0, c1, data, thread):
        self.dst, self.row, self.c0, self.c1, self.data = dst, row, c0, c1, data
        self.thread = thread
        self.span = _span(dst, row, c0, c1)


def _cp_state() -> tuple[Any, dict]:
    thread = threading.current_thread()
    manager = getattr(thread, "_manager", None)
    if manager is None:
        raise RuntimeError("cp_async can only be called inside a kernel")
    with _CP_LOCK:
        if not hasattr(manager, "_cp_async"):
            manager._cp_async = {"pending": [], "groups": {}, "open": {}}
    return thread, manager._cp_async


def _thread_name(thread: Any) -> str:
    t = getattr(thread, "threadIdx", None)
    return f"thread {tuple(t)}" if t is not None else "a thread"


def _check_not_pending(ary: np.ndarray, row: int, c0: int, c1: int, who: str) -> None:
    thread = threading.current_thread()
    state = getattr(getattr(thread, "_manager", None), "_cp_async", None)
    if not state:
        return
    lo, hi = _span(ary, row, c0, c1)
    with _CP_LOCK:
        for cp in state["pending"]:
            if cp.span[0] < hi and lo < cp.span[1]:
                raise AsyncCopyError(
                    f"{who} reads tile[{row}, {c0}:{c1}] while the cp.async that "
                    f"{_thread_name(cp.thread)} issued into tile[{row}, {cp.c0}:{cp.c1}] is "
                    "still in flight: wait for it (cp_async_wait / cp_async_wait_all) and "
                    "then cuda.syncthreads() before any thread reads the tile")


def _sim_cp_async(cache: str, nbytes: int, dst, dr, dc, src, sr, sc) -> None:
    d, s = _base(dst), _base(src)
    name = f"cp_async{nbytes}" + ("_ca" if cache == "ca" and nbytes == 16 else "")
    for what, a in (("destination", d), ("source", s)):
        if a.ndim != 2:
            raise TypeError(f"{name}: the {what} must be a 2-D array (reshape a 1-D one to "
                            f"(1, n)), got {a.ndim}-D")
    if d.dtype.itemsize != s.dtype.itemsize:
        raise TypeError(f"{name}: destination {d.dtype} and source {s.dtype} differ in size")
    n = nbytes // d.dtype.itemsize
    dr, dc, sr, sc = int(dr), int(dc), int(sr), int(sc)
    for what, a, r, c in (("destination", d, dr, dc), ("source", s, sr, sc)):
        if not (0 <= r < a.shape[0] and 0 <= c and c + n <= a.shape[1]):
            raise IndexError(f"{name}: {what}[{r}, {c}:{c + n}] is outside the {a.shape} array")
        if (r * a.strides[0] + c * a.strides[1]) % nbytes:
            raise RuntimeError(f"{name}: {what}[{r}, {c}] is not on a {nbytes}-byte boundary; "
                               f"cp.async of {nbytes} bytes needs both addresses aligned to "
                               f"{nbytes}")
    thread, state = _cp_state()
    data = np.array(s[sr, sc:sc + n])  # read now: the source may change after the call
    cp = _Copy(d, dr, dc, dc + n, data, thread)
    with _CP_LOCK:
        d[dr, dc:dc + n].view(np.uint8)[...] = 0xFF  # not there yet: NaN for f32 and bf16
        state["pending"].append(cp)
        state["open"].setdefault(thread, []).append(cp)


def _sim_commit() -> None:
    thread, state = _cp_state()
    with _CP_LOCK:
        group = state["open"].pop(thread, [])
        state["groups"].setdefault(thread, []).append(group)


def _sim_wait(n: int) -> None:
    thread, state = _cp_state()
    with _CP_LOCK:
        groups = state["groups"].get(thread, [])
        keep = groups[len(groups) - n:] if n > 0 else []
        done = groups[:len(groups) - len(keep)]
        state["groups"][thread] = keep
        for group in done:
            for cp in group:
                cp.dst[cp.row, cp.c0:cp.c1] = cp.data.view(cp.dst.dtype)  # the bytes
                state["pending"].remove(cp)


def _sim_wait_all() -> None:
    thread, state = _cp_state()
    with _CP_LOCK:  # wait_all also covers copies not yet committed
        state["groups"].setdefault(thread, []).append(state["open"].pop(thread, []))
    _sim_wait(0)


def pending_copies() -> int:
    """Simulator: how many ``cp.async`` copies of the calling thread's block are in flight."""
    thread = threading.current_thread()
    state = getattr(getattr(thread, "_manager", None), "_cp_async", None)
    return len(state["pending"]) if state else 0


if SIM:
    def mma_bf16(a, b, c):
        """D = A @ B + C on a tensor core, 16 x 8 x 16, bf16 in, float32 accumulate. Warp-wide.

        PTX: ``mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d0,d1,d2,d3},
        {a0,a1,a2,a3}, {b0,b1}, {c0,c1,c2,c3};``. ``a``: 4 ``uint32`` (bf16 pairs), ``b``: 2,
        ``c``: 4 float32; returns 4 float32. Lane layout: ``cudacourse.runtime.fragments``."""
        return _sim_mma("bf16", a, b, c)

    def mma_f16(a, b, c):
        """As :func:`mma_bf16` with IEEE half inputs (``.f16``)."""
        return _sim_mma("f16", a, b, c)

    def mma_tf32(a, b, c):
        """D = A @ B + C, 16 x 8 x 8, TF32 in (float32 registers), float32 accumulate.

        PTX: ``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {d0..d3}, {a0..a3},
        {b0,b1}, {c0..c3};``."""
        return _sim_mma("tf32", a, b, c)

    def ldmatrix_x1(tile, row, col):
        return _sim_ldmatrix(1, False, tile, row, col)

    def ldmatrix_x2(tile, row, col):
        return _sim_ldmatrix(2, False, tile, row, col)

    def ldmatrix_x4(tile, row, col):
        return _sim_ldmatrix(4, False, tile, row, col)

    def ldmatrix_x1_trans(tile, row, col):
        return _sim_ldmatrix(1, True, tile, row, col)

    def ldmatrix_x2_trans(tile, row, col):
        return _sim_ldmatrix(2, True, tile, row, col)

    def ldmatrix_x4_trans(tile, row, col):
        return _sim_ldmatrix(4, True, tile, row, col)

    def smem_addr(tile, row, col):
        """The shared-memory address of ``tile[row, col]`` (bytes, 32-bit on a GPU)."""
        t = _base(tile)
        return SmemAddr(t, int(row) * t.strides[0] + int(col) * t.strides[1])

    def ldmatrix_x4_at(addr):
        return _sim_ldmatrix_at(4, False, addr)

    def ldmatrix_x4_trans_at(addr):
        return _sim_ldmatrix_at(4, True, addr)

    def _make_cp_async(cache: str, nbytes: int):
        def cp_async(dst, dr, dc, src, sr, sc):
            _sim_cp_async(cache, nbytes, dst, dr, dc, src, sr, sc)
        return cp_async

    def cp_async_commit():
        _sim_commit()

    def cp_async_wait(n):
        _sim_wait(int(n))

    def cp_async_wait_all():
        _sim_wait_all()

    def pack_bf16x2(lo, hi):
        b = _fr.to_bf16_bits(np.array([lo, hi], np.float32))
        return np.uint32(_fr.pack_pairs(b[0], b[1]))

    def pack_f16x2(lo, hi):
        b = _fr.to_f16_bits(np.array([lo, hi], np.float32))
        return np.uint32(_fr.pack_pairs(b[0], b[1]))

    def unpack_bf16x2(r):
        lo, hi = _fr.unpack_pairs(np.uint32(_u32(r)))
        return np.float32(_fr.from_bf16_bits(lo)), np.float32(_fr.from_bf16_bits(hi))

    def float_bits(x):
        return np.float32(x).view(np.uint32)

    def bits_float(u):
        return np.uint32(_u32(u)).view(np.float32)

    def exp2_approx(x):
        with np.errstate(over="ignore"):
            return np.float32(np.exp2(np.float32(x)))

    def to_tf32(x):
        return np.float32(_fr.to_tf32(np.float32(x)))

    def shared_tile(buf, start, rows, cols):
        """A ``rows x cols`` 2-D view of ``buf[start:start + rows * cols]``."""
        return buf[start:start + rows * cols].reshape(rows, cols)

else:
    from llvmlite import ir as _ir
    from numba.cuda import cgutils as _cgutils
    from numba.cuda import types as _types
    from numba.cuda.core.errors import TypingError as _TypingError
    from numba.cuda.extending import intrinsic as _intrinsic

    _I32 = _ir.IntType(32)
    _F32 = _ir.FloatType()
    _ADDRSPACE_SHARED = 3

    def _asm(builder, ret, args, text, constraints, side_effect=True):
        fty = _ir.FunctionType(ret, [a.type for a in args])
        return builder.call(_ir.InlineAsm(fty, text, constraints, side_effect=side_effect),
                            args)

    def _unpack(context, builder, tupty, tup, n, target, what):
        if not isinstance(tupty, _types.BaseTuple) or len(tupty) != n:
            raise _TypingError(f"{what} must be a tuple of {n} values, got {tupty}")
        return [context.cast(builder, builder.extract_value(tup, k), tupty[k], target)
                for k in range(n)]

    def _check_tuple(t, n, what):
        if not isinstance(t, _types.BaseTuple) or len(t) != n:
            raise _TypingError(f"{what} must be a tuple of {n} values, got {t}")

    def _make_mma(kind: str):
        ptx = {"bf16": "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
               "f16": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
               "tf32": "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"}[kind]

        @_intrinsic
        def mma(typingctx, a, b, c):
            _check_tuple(a, 4, "a (the A fragment)")
            _check_tuple(b, 2, "b (the B fragment)")
            _check_tuple(c, 4, "c (the accumulator)")
            sig = _types.UniTuple(_types.float32, 4)(a, b, c)

            def codegen(context, builder, sig, args):
                src = _types.float32 if kind == "tf32" else _types.uint32
                av = _unpack(context, builder, sig.args[0], args[0], 4, src, "a")
                bv = _unpack(context, builder, sig.args[1], args[1], 2, src, "b")
                cv = _unpack(context, builder, sig.args[2], args[2], 4, _types.float32, "c")
                if kind == "tf32":  # tf32 operands are .b32 registers: pass the bits
                    av = [builder.bitcast(v, _I32) for v in av]
                    bv = [builder.bitcast(v, _I32) for v in bv]
                res = _asm(builder, _ir.LiteralStructType([_F32] * 4), av + bv + cv,
                           f"{ptx} {{$0, $1, $2, $3}}, {{$4, $5, $6, $7}}, {{$8, $9}}, "
                           "{$10, $11, $12, $13};",
                           "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f",
                           side_effect=False)  # a pure function of its registers
                vals = [builder.extract_value(res, k) for k in range(4)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return mma

    def _shared_u32(context, builder, aryty, ary, inds, indtys):
        """32-bit shared-window address of ``ary[inds]`` (``__cvta_generic_to_shared``)."""
        arr = context.make_array(aryty)(context, builder, value=ary)
        idx = [context.cast(builder, i, t, _types.intp) for i, t in zip(inds, indtys)]
        ptr = _cgutils.get_item_pointer(context, builder, aryty, arr, idx)
        elem = context.get_data_type(aryty.dtype)  # (not ptr.type.pointee: opaque pointers)
        sptr = builder.addrspacecast(ptr, elem.as_pointer(_ADDRSPACE_SHARED))
        return builder.trunc(builder.ptrtoint(sptr, _ir.IntType(64)), _I32)

    def _global_ptr(context, builder, aryty, ary, inds, indtys):
        arr = context.make_array(aryty)(context, builder, value=ary)
        idx = [context.cast(builder, i, t, _types.intp) for i, t in zip(inds, indtys)]
        ptr = _cgutils.get_item_pointer(context, builder, aryty, arr, idx)
        return builder.ptrtoint(ptr, _ir.IntType(64))

    def _check_tile(tile, row, col, what, size=None):
        if not (isinstance(tile, _types.Array) and tile.ndim == 2):
            raise _TypingError(f"{what} needs a 2-D array, got {tile}")
        if size is not None and tile.dtype.bitwidth // 8 != size:
            raise _TypingError(f"{what} needs {8 * size}-bit elements, got {tile.dtype}")
        for i in (row, col):
            if not isinstance(i, _types.Integer):
                raise _TypingError(f"{what} needs integer indices, got {i}")

    def _make_ldmatrix(num: int, trans: bool):
        text = (f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 "
                "{" + ", ".join(f"${k}" for k in range(num)) + f"}}, [${num}];")

        @_intrinsic
        def ldmatrix(typingctx, tile, row, col):
            _check_tile(tile, row, col, "ldmatrix", 2)
            ret = _types.uint32 if num == 1 else _types.UniTuple(_types.uint32, num)
            sig = ret(tile, row, col)

            def codegen(context, builder, sig, args):
                addr = _shared_u32(context, builder, sig.args[0], args[0], args[1:],
                                   sig.args[1:])
                rty = _I32 if num == 1 else _ir.LiteralStructType([_I32] * num)
                res = _asm(builder, rty, [addr], text, ",".join(["=r"] * num) + ",r,~{memory}")
                if num == 1:
                    return res
                vals = [builder.extract_value(res, k) for k in range(num)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return ldmatrix

    def _make_ldmatrix_at(num: int, trans: bool):
        text = (f"ldmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16 "
                "{" + ", ".join(f"${k}" for k in range(num)) + f"}}, [${num}];")

        @_intrinsic
        def ldmatrix_at(typingctx, addr):
            if not isinstance(addr, _types.Integer):
                raise _TypingError(f"ldmatrix_x{num}..._at needs an integer address from "
                                   f"smem_addr, got {addr}")
            ret = _types.UniTuple(_types.uint32, num)
            sig = ret(addr)

            def codegen(context, builder, sig, args):
                a = builder.trunc(args[0], _I32) if args[0].type.width > 32 else args[0]
                res = _asm(builder, _ir.LiteralStructType([_I32] * num), [a], text,
                           ",".join(["=r"] * num) + ",r,~{memory}")
                vals = [builder.extract_value(res, k) for k in range(num)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return ldmatrix_at

    @_intrinsic
    def smem_addr(typingctx, tile, row, col):
        _check_tile(tile, row, col, "smem_addr")
        sig = _types.uint32(tile, row, col)

        def codegen(context, builder, sig, args):
            return _shared_u32(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])

        return sig, codegen

    def _make_cp_async(cache: str, nbytes: int):
        text = ("{ .reg .u64 g; cvta.to.global.u64 g, $1; "
                f"cp.async.{cache}.shared.global [$0], [g], {nbytes}; }}")

        @_intrinsic
        def cp_async(typingctx, dst, dr, dc, src, sr, sc):
            _check_tile(dst, dr, dc, "cp_async (destination)")
            _check_tile(src, sr, sc, "cp_async (source)")
            sig = _types.void(dst, dr, dc, src, sr, sc)

            def codegen(context, builder, sig, args):
                s = _shared_u32(context, builder, sig.args[0], args[0], args[1:3],
                                sig.args[1:3])
                g = _global_ptr(context, builder, sig.args[3], args[3], args[4:6],
                                sig.args[4:6])
                _asm(builder, _ir.VoidType(), [s, g], text, "r,l,~{memory}")
                return context.get_dummy_value()

            return sig, codegen

        return cp_async

    @_intrinsic
    def cp_async_commit(typingctx):
        def codegen(context, builder, sig, args):
            _asm(builder, _ir.VoidType(), [], "cp.async.commit_group;", "~{memory}")
            return context.get_dummy_value()
        return _types.void(), codegen

    @_intrinsic
    def cp_async_wait(typingctx, n):
        if not isinstance(n, _types.IntegerLiteral):
            raise _TypingError("cp_async_wait(n) needs a constant n (PTX takes an immediate)")
        k = int(n.literal_value)

        def codegen(context, builder, sig, args):
            _asm(builder, _ir.VoidType(), [], f"cp.async.wait_group {k};", "~{memory}")
            return context.get_dummy_value()
        return _types.void(n), codegen

    @_intrinsic
    def cp_async_wait_all(typingctx):
        def codegen(context, builder, sig, args):
            _asm(builder, _ir.VoidType(), [], "cp.async.wait_all;", "~{memory}")
            return context.get_dummy_value()
        return _types.void(), codegen

    def _make_pack(kind: str):
        @_intrinsic
        def pack(typingctx, lo, hi):
            sig = _types.uint32(lo, hi)

            def codegen(context, builder, sig, args):
                vals = [context.cast(builder, v, t, _types.float32)
                        for v, t in zip(args, sig.args)]
                # cvt.rn.bf16x2.f32 d, a, b puts a in the upper half, b in the lower
                return builder.call(_ir.InlineAsm(
                    _ir.FunctionType(_I32, [_F32, _F32]),
                    f"cvt.rn.{kind}x2.f32 $0, $2, $1;", "=r,f,f"), vals)
            return sig, codegen
        return pack

    @_intrinsic
    def float_bits(typingctx, x):
        sig = _types.uint32(x)

        def codegen(context, builder, sig, args):
            return builder.bitcast(context.cast(builder, args[0], sig.args[0], _types.float32),
                                   _I32)
        return sig, codegen

    @_intrinsic
    def bits_float(typingctx, u):
        sig = _types.float32(u)

        def codegen(context, builder, sig, args):
            return builder.bitcast(context.cast(builder, args[0], sig.args[0], _types.uint32),
                                   _F32)
        return sig, codegen

    @_intrinsic
    def unpack_bf16x2(typingctx, r):
        sig = _types.UniTuple(_types.float32, 2)(r)

        def codegen(context, builder, sig, args):
            u = context.cast(builder, args[0], sig.args[0], _types.uint32)
            lo = builder.bitcast(builder.shl(u, _ir.Constant(_I32, 16)), _F32)
            hi = builder.bitcast(builder.and_(u, _ir.Constant(_I32, 0xFFFF0000)), _F32)
            return context.make_tuple(builder, sig.return_type, [lo, hi])
        return sig, codegen

    @_intrinsic
    def to_tf32(typingctx, x):
        sig = _types.float32(x)

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], sig.args[0], _types.float32)
            r = builder.call(_ir.InlineAsm(_ir.FunctionType(_I32, [_F32]),
                                           "cvt.rna.tf32.f32 $0, $1;", "=r,f"), [v])
            return builder.bitcast(r, _F32)
        return sig, codegen

    @_intrinsic
    def exp2_approx(typingctx, x):
        sig = _types.float32(x)

        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], sig.args[0], _types.float32)
            return builder.call(_ir.InlineAsm(_ir.FunctionType(_F32, [_F32]),
                                              "ex2.approx.ftz.f32 $0, $1;", "=f,f"), [v])
        return sig, codegen

    @_intrinsic
    def shared_tile(typingctx, buf, start, rows, cols):
        if not (isinstance(buf, _types.Array) and buf.ndim == 1 and buf.layout == "C"):
            raise _TypingError(f"shared_tile needs a contiguous 1-D array, got {buf}")
        if not isinstance(start, _types.Integer):
            raise _TypingError(f"shared_tile needs an integer start, got {start}")
        if not all(isinstance(n, _types.IntegerLiteral) for n in (rows, cols)):
            raise _TypingError("shared_tile(buf, start, rows, cols) needs constant rows and cols")
        nr, nc = int(rows.literal_value), int(cols.literal_value)
        retty = _types.Array(buf.dtype, 2, "C")
        sig = retty(buf, start, rows, cols)

        def codegen(context, builder, sig, args):
            from numba.cuda.np.arrayobj import populate_array

            src = context.make_array(sig.args[0])(context, builder, value=args[0])
            off = context.cast(builder, args[1], sig.args[1], _types.intp)
            data = builder.gep(src.data, [off])
            out = context.make_array(sig.return_type)(context, builder)
            intp = context.get_value_type(_types.intp)
            item = context.get_abi_sizeof(context.get_data_type(sig.args[0].dtype))
            populate_array(out, data=data,
                           shape=[_ir.Constant(intp, nr), _ir.Constant(intp, nc)],
                           strides=[_ir.Constant(intp, nc * item), _ir.Constant(intp, item)],
                           itemsize=_ir.Constant(intp, item), meminfo=None)
            return out._getvalue()

        return sig, codegen

    mma_bf16, mma_f16, mma_tf32 = (_make_mma("bf16"), _make_mma("f16"), _make_mma("tf32"))
    ldmatrix_x1, ldmatrix_x2, ldmatrix_x4 = (_make_ldmatrix(n, False) for n in (1, 2, 4))
    ldmatrix_x1_trans, ldmatrix_x2_trans, ldmatrix_x4_trans = (_make_ldmatrix(n, True)
                                                               for n in (1, 2, 4))
    pack_bf16x2, pack_f16x2 = _make_pack("bf16"), _make_pack("f16")
    ldmatrix_x4_at = _make_ldmatrix_at(4, False)
    ldmatrix_x4_trans_at = _make_ldmatrix_at(4, True)


_CP = {key: _make_cp_async(*key) for key in sorted(CP_ASYNC_SIZES)}
cp_async16 = _CP[("cg", 16)]
cp_async16_ca = _CP[("ca", 16)]
cp_async8 = _CP[("ca", 8)]
cp_async4 = _CP[("ca", 4)]


def cp_async(nbytes: int = 16, cache: str = "cg") -> Any:
    """The ``cp.async`` function for ``nbytes`` (4, 8, 16) and cache operator ``cache``
    ("cg": L2 only, 16 bytes only; "ca": L1 and L2). The function it gives is called in a
    kernel as ``f(dst, dst_row, dst_col, src, src_row, src_col)``: it copies ``nbytes``
    bytes from ``src[src_row, src_col]`` (global memory) to ``dst[dst_row, dst_col]``
    (shared memory) without passing through registers; both addresses must be multiples
    of ``nbytes``. The copy is asynchronous: group copies with :func:`cp_async_commit`,
    wait with ``cp_async_wait(n)`` (all but the ``n`` newest groups done), then
    ``cuda.syncthreads()`` before other threads read the tile."""
    if (cache, nbytes) not in CP_ASYNC_SIZES:
        raise ValueError(f"cp.async copies 4, 8 or 16 bytes with cache 'ca', or 16 with 'cg'; "
                         f"got {nbytes} bytes with {cache!r}")
    return _CP[(cache, nbytes)]


_DOC_LD = """{n} 8 x 8 matrices of 16-bit values from shared memory into fragments. Warp-wide.

PTX: ``ldmatrix.sync.aligned.m8n8.x{n}{t}.shared.b16``. Each lane gives the address of one
row, ``tile[row, col]`` .. ``tile[row, col + 7]`` (16-byte aligned): lanes 8m .. 8m+7 the rows
of matrix m{lanes}. Lane l gets, in register m, the pair {pair} of matrix m packed in a
``uint32`` (the first in the low bits): the A or B fragment layout of ``mma``.
``tile`` is a 2-D shared ``uint16`` (or float16) array. Returns {ret}."""
for _n in (1, 2, 4):
    for _t in (False, True):
        _f = globals()[f"ldmatrix_x{_n}{'_trans' if _t else ''}"]
        try:
            _f.__doc__ = _DOC_LD.format(
                n=_n, t=".trans" if _t else "",
                lanes={1: " (lanes 8-31 give addresses that are not used)",
                       2: " (lanes 16-31 give addresses that are not used)", 4: ""}[_n],
                pair="(M[l//4, 2(l%4)], M[l//4, 2(l%4)+1])" if not _t else
                     "(M[2(l%4), l//4], M[2(l%4)+1, l//4]) (transposed)",
                ret="one uint32" if _n == 1 else f"a tuple of {_n} uint32")
        except AttributeError:  # pragma: no cover - a dispatcher without a writable __doc__
            pass
