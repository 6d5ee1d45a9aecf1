"""Accepting arrays from anywhere (NumPy, Numba, CuPy) and refusing wrong ones clearly.

The host-or-device half of the launcher contract (``cudacourse.runtime.launch``): ``check_array``
refuses wrong arguments naming them, ``to_device`` gives a kernel a Numba view of any input,
``output_array`` the array to write, and ``return_like_input`` hands the result back the way
the input came (host in, host out; device in, device out; ``out`` written in place).
"""

from __future__ import annotations

from .. import _device_first  # noqa: F401 - first: the device is chosen before numba.cuda loads

from typing import Any

import numpy as np

from .._numba_private import is_numba_array


def is_device_array(x: Any) -> bool:
    """A GPU array: Numba's own, or anything exposing ``__cuda_array_interface__`` (CuPy,
    PyTorch CUDA tensors)."""
    if isinstance(x, np.ndarray):
        return False
    return is_numba_array(x) or hasattr(x, "__cuda_array_interface__")


def describe(x: Any) -> str:
    if isinstance(x, np.ndarray):
        return f"NumPy array {x.dtype}{list(x.shape)}"
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"{type(x).__module__.split('.')[0]} {type(x).__name__} {x.dtype}{list(x.shape)}"
    return type(x).__name__


def check_array(x: Any, name: str, dtype: Any | tuple = np.float32,
                ndim: int | None = None) -> None:
    """Raise TypeError/ValueError naming ``name`` when ``x`` is not a usable array."""
    if not (isinstance(x, np.ndarray) or is_device_array(x)):
        raise TypeError(f"{name} must be a NumPy array or a GPU array (Numba, CuPy), "
                        f"got {describe(x)}")
    dtypes = dtype if isinstance(dtype, tuple) else (dtype,)
    if np.dtype(x.dtype) not in [np.dtype(d) for d in dtypes]:
        want = " or ".join(np.dtype(d).name for d in dtypes)
        raise TypeError(f"{name} has dtype {np.dtype(x.dtype).name}, expected {want}: "
                        f"convert it with .astype(np.{np.dtype(dtypes[0]).name})")
    if ndim is not None and len(x.shape) != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {tuple(x.shape)}")


def require_device(x: Any, name: str) -> None:
    """For functions that must not copy implicitly: a host array is refused."""
    if isinstance(x, np.ndarray):
        raise TypeError(f"{name} is a host (NumPy) array, but a device array is needed here: "
                        f"move it once with cuda.to_device({name}) and reuse the result")
    if not is_device_array(x):
        raise TypeError(f"{name} must be a device array, got {describe(x)}")


def to_device(x: Any) -> Any:
    """A Numba device array for ``x``: copied if on the host, shared (no copy) if on a GPU."""
    from numba import cuda

    if isinstance(x, np.ndarray):
        return cuda.to_device(np.ascontiguousarray(x))
    if is_numba_array(x):
        return x
    return cuda.as_cuda_array(x)


def same_shape(**arrays: Any) -> None:
    shapes = {k: tuple(v.shape) for k, v in arrays.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError("shape mismatch: " + ", ".join(f"{k} {s}" for k, s in shapes.items()))


def output_array(out: Any, shape: tuple[int, ...], name: str = "out") -> Any:
    """Where a launcher writes its result: a new float32 device array, or the caller's
    ``out`` (host or device) once its shape is checked against ``shape``."""
    from numba import cuda

    if out is None:
        return cuda.device_array(shape, dtype=np.float32)
    check_array(out, name, ndim=len(shape))
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name} has shape {tuple(out.shape)}, expected {tuple(shape)}")
    return to_device(out)


def return_like_input(dout: Any, out: Any, on_host: bool,
                      shape: tuple[int, ...] | None = None) -> Any:
    """Hand a launcher's result back the way its input came: a device array for device input;
    for host input a NumPy array (written into ``out`` when that is a NumPy array)."""
    if not on_host:
        return dout
    result = dout.copy_to_host()
    if shape is not None:
        result = result.reshape(shape)
    if isinstance(out, np.ndarray):
        out[...] = result
        return out
    return result
