"""numpy-facing wrapper of the C extension torchmcu._native.

The extension runs the firmware runtime and kernels on the host; this module
turns numpy arrays into the plain tuples the C side understands and back, so
tests can call one kernel (`call_kernel`) or run a whole .pte (`run_program`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from torchmcu import _native


class NativeError(RuntimeError):
    """A runtime or kernel error: `status` is the status name, `message` the diagnostic."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


_native._set_error_type(NativeError)

# numpy dtype -> ExecuTorch ScalarType number (tm_scalar_type).
_SCALAR_TYPE = {
    np.dtype(np.uint8): 0,
    np.dtype(np.int8): 1,
    np.dtype(np.int16): 2,
    np.dtype(np.int32): 3,
    np.dtype(np.int64): 4,
    np.dtype(np.float32): 6,
    np.dtype(np.float64): 7,
    np.dtype(np.bool_): 11,
}
_DTYPE = {v: k for k, v in _SCALAR_TYPE.items()}


def scalar_type_of(dtype: np.dtype) -> int:
    """ExecuTorch ScalarType number of a numpy dtype (ValueError if unsupported)."""
    try:
        return _SCALAR_TYPE[np.dtype(dtype)]
    except KeyError:
        raise ValueError(f"dtype {np.dtype(dtype)} has no tm_scalar_type") from None


def dtype_of(scalar_type: int) -> np.dtype:
    """numpy dtype of an ExecuTorch ScalarType number."""
    return _DTYPE[scalar_type]


@dataclass
class TensorArg:
    """A tensor whose logical sizes/dim order differ from the array's shape.

    `array` holds the physical memory (C-contiguous); `sizes` are logical
    (e.g. NCHW) and `dim_order` lists dims outermost to innermost in memory
    (e.g. [0, 2, 3, 1] for NHWC memory).
    """

    array: np.ndarray
    sizes: Sequence[int]
    dim_order: Sequence[int]


def _tensor_tuple(arr: np.ndarray, sizes: Sequence[int], dim_order: Sequence[int]) -> tuple:
    if not arr.flags.c_contiguous:
        raise ValueError("tensor arrays must be C-contiguous (physical memory)")
    return (arr, scalar_type_of(arr.dtype), tuple(int(s) for s in sizes), tuple(int(d) for d in dim_order))


def _convert_arg(arg: Any) -> Any:
    if isinstance(arg, TensorArg):
        return _tensor_tuple(arg.array, arg.sizes, arg.dim_order)
    if isinstance(arg, np.ndarray):
        return _tensor_tuple(arg, arg.shape, range(arg.ndim))
    if isinstance(arg, (np.integer,)):
        return int(arg)
    if isinstance(arg, (np.floating,)):
        return float(arg)
    if isinstance(arg, (list, tuple)):
        return [int(x) for x in arg]
    if arg is None or isinstance(arg, (bool, int, float)):
        return arg
    raise TypeError(f"unsupported kernel argument type {type(arg).__name__}")


def call_kernel(op_name: str, args: list, overload: str = "out") -> None:
    """Calls one registered kernel, e.g. call_kernel("cortex_m::quantized_add", [...]).

    `args` follow the operator schema (operators.yaml) and end with the out
    tensor once; like a program, the call passes it again as the returned
    value. The out array is written in place.
    """
    _native.call_kernel(op_name, overload, [_convert_arg(a) for a in args])


def kernel_names() -> list[tuple[str, str]]:
    """(name, overload) of every kernel built into the extension."""
    return list(_native.kernel_names())
