"""16-byte loads and stores of four consecutive floats: the course's only LLVM intrinsics.

Numba has no ``float4`` array type, so these ask LLVM for one aligned 16-byte access (PTX
``ld.global.v4.f32`` / ``st.global.v4.f32``, or ``ld.shared.v4.f32``) where plain indexing
would issue four 4-byte instructions. A warp's 16-byte loads cover 512 consecutive bytes:
coalesced, with a quarter of the instructions.

* ``load4(arr, j)`` returns elements 4j .. 4j+3 of a contiguous 1-D float32 array;
  ``store4(arr, j, v0, v1, v2, v3)`` writes them;
* ``hinted(hint)`` gives the ``(load4, store4)`` pair with a PTX cache operator: ``"cs"``
  streams (evict first: data used once should not push anything else out of L2) for loads
  and stores, ``"nc"`` reads through the non-coherent read-only path (as CUDA C does for
  ``const __restrict__`` pointers; stores stay plain);
* ``load4_shared(arr, j)``: the same from a shared-memory array, so NVVM emits
  ``ld.shared.v4.f32``.

The data pointer of the array must be a multiple of 16 bytes (``aligned16`` checks device
arrays; shared arrays get ``alignment=16``). In the simulator these are plain Python
functions with the same results and no alignment rule.

Numba seams used here (extension API): ``numba.cuda.extending.intrinsic``, the target
context's ``make_array``/``cast``/``make_tuple``, and llvmlite IR.
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

from typing import Any

from .._numba_private import simulating

HINTS = ("", "cs", "nc")
SIM = simulating()
SHARED_ALIGNMENT = None if SIM else 16  # bytes; the simulator's shared arrays take no option


def aligned16(*arrays: Any) -> bool:
    """Whether 16-byte accesses are allowed on these device arrays: contiguous (element
    stride 4 bytes) with a data pointer on a 16-byte boundary. Always true in the simulator."""
    if SIM:
        return True
    for x in arrays:
        cai = x.__cuda_array_interface__
        if cai.get("strides") not in (None, (4,)) or cai["data"][0] % 16:
            return False
    return True


if SIM:
    def load4(arr, j):
        """Elements 4j .. 4j+3 of ``arr``."""
        return arr[4 * j], arr[4 * j + 1], arr[4 * j + 2], arr[4 * j + 3]

    def store4(arr, j, v0, v1, v2, v3):
        """Write elements 4j .. 4j+3 of ``arr``."""
        arr[4 * j] = v0
        arr[4 * j + 1] = v1
        arr[4 * j + 2] = v2
        arr[4 * j + 3] = v3

    load4_shared = load4
    _HINTED = {hint: (load4, store4) for hint in HINTS}
else:
    from llvmlite import ir as _ir
    from numba.cuda import types as _types
    from numba.cuda.core.errors import TypingError as _TypingError
    from numba.cuda.extending import intrinsic as _intrinsic

    _F32X4 = _ir.VectorType(_ir.FloatType(), 4)
    _I32 = _ir.IntType(32)
    _ADDRSPACE_SHARED = 3  # NVVM's address space for __shared__

    def _check_types(arr, j):
        if not (isinstance(arr, _types.Array) and arr.ndim == 1 and arr.dtype == _types.float32
                and arr.layout == "C"):
            raise _TypingError(f"16-byte access needs a contiguous 1-D float32 array, got {arr}")
        if not isinstance(j, _types.Integer):
            raise _TypingError(f"16-byte access needs an integer group index, got {j}")

    def _group_pointer(context, builder, arrty, arr, jty, j):
        """Address of element 4j, as a pointer to 4 floats."""
        data = context.make_array(arrty)(context, builder, value=arr).data
        j = context.cast(builder, j, jty, _types.intp)
        ptr = builder.gep(data, [builder.mul(j, _ir.Constant(j.type, 4))])
        return builder.bitcast(ptr, _F32X4.as_pointer())

    def _make_load4(hint: str = "", shared: bool = False):
        @_intrinsic
        def load4(typingctx, arr, j):
            _check_types(arr, j)
            sig = _types.UniTuple(_types.float32, 4)(arr, j)

            def codegen(context, builder, sig, args):
                ptr = _group_pointer(context, builder, sig.args[0], args[0], sig.args[1],
                                     args[1])
                if hint:  # PTX with an explicit cache operator
                    fty = _ir.FunctionType(_ir.LiteralStructType([_ir.FloatType()] * 4),
                                           [ptr.type])
                    asm = _ir.InlineAsm(fty, f"ld.global.{hint}.v4.f32 {{$0, $1, $2, $3}}, "
                                        "[$4];", "=f,=f,=f,=f,l", side_effect=True)
                    res = builder.call(asm, [ptr])
                    vals = [builder.extract_value(res, k) for k in range(4)]
                else:
                    if shared:
                        # Numba's shared arrays are generic pointers to an addrspace(3)
                        # global; casting back lets NVVM emit ld.shared, not a generic ld.
                        ptr = builder.addrspacecast(ptr, _F32X4.as_pointer(_ADDRSPACE_SHARED))
                    vec = builder.load(ptr, align=16)  # one aligned vector load
                    vals = [builder.extract_element(vec, _ir.Constant(_I32, k))
                            for k in range(4)]
                return context.make_tuple(builder, sig.return_type, vals)

            return sig, codegen

        return load4

    def _make_store4(hint: str = ""):
        @_intrinsic
        def store4(typingctx, arr, j, v0, v1, v2, v3):
            _check_types(arr, j)
            sig = _types.void(arr, j, v0, v1, v2, v3)

            def codegen(context, builder, sig, args):
                ptr = _group_pointer(context, builder, sig.args[0], args[0], sig.args[1],
                                     args[1])
                vals = [context.cast(builder, v, t, _types.float32)
                        for v, t in zip(args[2:], sig.args[2:])]
                if hint:
                    fty = _ir.FunctionType(_ir.VoidType(), [ptr.type] + [_ir.FloatType()] * 4)
                    asm = _ir.InlineAsm(fty, f"st.global.{hint}.v4.f32 [$0], "
                                        "{$1, $2, $3, $4};", "l,f,f,f,f,~{memory}")
                    builder.call(asm, [ptr] + vals)
                else:
                    vec = _ir.Constant(_F32X4, _ir.Undefined)
                    for k, v in enumerate(vals):
                        vec = builder.insert_element(vec, v, _ir.Constant(_I32, k))
                    builder.store(vec, ptr, align=16)
                return context.get_dummy_value()

            return sig, codegen

        return store4

    load4, store4 = _make_load4(), _make_store4()
    load4_shared = _make_load4(shared=True)
    _HINTED = {"": (load4, store4), "cs": (_make_load4("cs"), _make_store4("cs")),
               "nc": (_make_load4("nc"), store4)}


def hinted(hint: str = "") -> tuple[Any, Any]:
    """``(load4, store4)`` with PTX cache operator ``hint`` ("" for none, "cs" or "nc")."""
    if hint not in _HINTED:
        raise ValueError(f"hint must be one of {HINTS}, got {hint!r}")
    return _HINTED[hint]
