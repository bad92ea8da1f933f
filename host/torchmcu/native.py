"""numpy-facing wrapper of the C extension torchmcu._native.

The extension runs the firmware runtime and kernels on the host; this module
turns numpy arrays into the plain tuples the C side understands and back, so
tests can call one kernel (`call_kernel`) or run a whole .pte (`run_program`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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

# "... argument 1, operator torchmcu::quantized_embedding.out ..." in a runtime diagnostic
_BAD_ARGUMENT = re.compile(r"argument (\d+), operator ([A-Za-z_][\w]*::[A-Za-z_]\w*)\.(\w+)")


def named_arguments(message: str) -> str:
    """A runtime diagnostic with the refused argument's schema name added from the operator
    registry ("argument 1 (indices), operator torchmcu::quantized_embedding.out"); as it was
    for an operator the registry does not hold."""
    from torchmcu import ops

    def name(m: re.Match[str]) -> str:
        key = f"{m[2]}.{m[3]}"
        index = int(m[1])
        if key not in ops.REGISTRY or index >= len(ops.get(key).schema.args):
            return m[0]
        return f"argument {index} ({ops.get(key).schema.args[index].name}), operator {key}"

    return _BAD_ARGUMENT.sub(name, message)

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


@dataclass(frozen=True)
class ValueRef:
    """A tensor list item that is argument `index` of the same call (as a program's
    lists reference values): e.g. the returned TensorList of a multi-output op."""

    index: int


def _tensor_tuple(arr: np.ndarray, sizes: Sequence[int], dim_order: Sequence[int]) -> tuple:
    if not arr.flags.c_contiguous:
        raise ValueError("tensor arrays must be C-contiguous (physical memory)")
    return (
        arr,
        scalar_type_of(arr.dtype),
        tuple(int(s) for s in sizes),
        tuple(int(d) for d in dim_order),
    )


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
        if any(isinstance(x, (np.ndarray, TensorArg, ValueRef)) or x is None for x in arg):
            return [_list_item(x) for x in arg]  # a TensorList
        return [int(x) for x in arg]
    if arg is None or isinstance(arg, (bool, int, float, str)):
        return arg
    raise TypeError(f"unsupported kernel argument type {type(arg).__name__}")


def _list_item(x: Any) -> Any:
    if isinstance(x, ValueRef):
        return (int(x.index),)
    if x is None:
        return None
    return _convert_arg(x)


def call_kernel(op_name: str, args: list, overload: str = "out") -> None:
    """Calls one registered kernel, e.g. call_kernel("cortex_m::quantized_add", [...]).

    `args` follow the operator schema (operators.yaml) and end with the out
    tensor once; like a program, the call passes it again as the returned
    value. A multi-output op ends instead with its returned TensorList, e.g.
    [ValueRef(5), ValueRef(6), ValueRef(7)], passed once as ExecuTorch emits it.
    A list of arrays is a TensorList; a str a String. The out arrays are written
    in place.
    """
    _native.call_kernel(op_name, overload, [_convert_arg(a) for a in args])


def kernel_names() -> list[tuple[str, str]]:
    """(name, overload) of every kernel built into the extension."""
    return list(_native.kernel_names())


def _to_physical(x: np.ndarray, dim_order: Sequence[int]) -> np.ndarray:
    """Logical array -> C-contiguous memory in `dim_order` (NCHW -> NHWC for [0,2,3,1])."""
    return np.ascontiguousarray(x.transpose(tuple(dim_order)) if x.ndim else x)


def _from_physical(
    data: bytes, scalar_type: int, sizes: Sequence[int], dim_order: Sequence[int]
) -> np.ndarray:
    """Tensor memory -> a contiguous array in logical sizes."""
    physical = np.frombuffer(data, dtype=dtype_of(scalar_type)).reshape(
        [sizes[d] for d in dim_order]
    )
    return np.ascontiguousarray(
        physical.transpose(np.argsort(dim_order)) if len(sizes) else physical
    )


def parse_ethos_u_blob(blob: bytes) -> dict:
    """The firmware's C parser/verifier of an EthosUBackend blob: offsets and sizes of its parts,
    scratch size, inputs/outputs. Raises NativeError naming the block and blob offset."""
    return _native.parse_ethos_u_blob(bytes(blob))


def program_info(pte: bytes, method: str | None = None) -> dict:
    """Verified facts about a .pte method: operators (and which are missing here), delegates
    (id, missing here), value count, arena/metadata bytes, input/output tensor metadata (scalar_type, dtype name,
    logical sizes, dim_order, nbytes, planned). Raises NativeError."""
    info = _native.program_info(bytes(pte), method)
    for meta in info["inputs"] + info["outputs"]:
        if meta is not None:
            meta["dtype"] = str(dtype_of(meta["scalar_type"]))
    return info


DelegateFn = Callable[[int, list[np.ndarray]], Sequence[np.ndarray]]


def _delegate_bridge(fn: DelegateFn) -> Callable[[int, list, list], list[bytes]]:
    """Wraps delegate_fn for the C host backend: inputs arrive as (bytes, scalar_type, physical
    shape), outputs go back as bytes after their count, dtype and shape were checked here."""

    def bridge(index: int, inputs: list, outputs: list) -> list[bytes]:
        arrays = [
            np.frombuffer(data, dtype=dtype_of(stype)).reshape(shape).copy()
            for data, stype, shape in inputs
        ]
        results = list(fn(index, arrays))
        if len(results) != len(outputs):
            raise ValueError(
                f"delegate {index}: delegate_fn returned {len(results)} outputs, expected {len(outputs)}"
            )
        packed = []
        for k, (res, (stype, shape)) in enumerate(zip(results, outputs)):
            res = np.asarray(res)
            want = dtype_of(stype)
            if res.dtype != want or tuple(res.shape) != tuple(shape):
                raise ValueError(
                    f"delegate {index}: output {k} must be {want}{list(shape)} (physical layout), "
                    f"got {res.dtype}{list(res.shape)}"
                )
            packed.append(np.ascontiguousarray(res).tobytes())
        return packed

    return bridge


def check_inputs(metas: Sequence[dict | None], inputs: Sequence[Any]) -> None:
    """NativeError unless `inputs` are exactly what a method with these input metadata
    (program_info(...)["inputs"]) takes: their count, and each array's dtype and logical shape."""
    if len(inputs) != len(metas):
        raise NativeError(
            "INVALID_ARGUMENT", f"method takes {len(metas)} inputs, {len(inputs)} given"
        )
    for i, (x, meta) in enumerate(zip(inputs, metas)):
        if meta is None:
            raise NativeError("UNSUPPORTED", f"input {i} is not a tensor")
        x = np.asarray(x)
        want = dtype_of(meta["scalar_type"])
        if x.dtype != want or tuple(x.shape) != tuple(meta["sizes"]):
            raise NativeError(
                "INVALID_ARGUMENT",
                f"input {i}: expected {want}{list(meta['sizes'])}, got {x.dtype}{list(x.shape)}",
            )


def run_program(
    pte: bytes,
    inputs: list[np.ndarray],
    method: str = "forward",
    runs: int = 1,
    delegate_fn: DelegateFn | None = None,
    npu_model: bool = False,
    npu_trace: list[Any] | None = None,
) -> list[np.ndarray]:
    """Runs a .pte method with the C runtime; inputs and outputs are in logical sizes
    (channels-last tensors are converted to/from their memory layout here). runs > 1 executes
    the same method instance again on the same inputs (as an inference loop does: later calls
    take the kernels' verified-arguments path) and returns the last run's outputs.

    delegate_fn(delegate_index, inputs) runs each EthosUBackend DelegateCall on the host in
    place of the NPU: it gets the call's inputs as arrays in physical memory layout (NHWC for
    4-D activations) and returns its outputs the same way (dtype and physical shape checked).
    An exception it raises surfaces as NativeError("DELEGATE", ...) with it as __cause__.

    npu_model=True runs each EthosUBackend DelegateCall as the firmware does: the firmware
    delegate and our NPU driver, on the Ethos-U functional model (torchmcu.npu.model.driver)
    behind a host register block. NPU faults come back through the driver's error path as
    NativeError("DELEGATE", ... STATUS ...). npu_trace (a list; implies npu_model) gets one
    torchmcu.npu.model.driver.Job per NPU job: the delegate index and each operation the
    model ran (IFM/OFM shapes and addresses, MACs)."""
    pte = bytes(pte)
    info = _native.program_info(pte, method)
    check_inputs(info["inputs"], inputs)
    packed = []
    for x, meta in zip(inputs, info["inputs"]):
        x = np.asarray(x)
        packed.append((_to_physical(x, meta["dim_order"]), meta["scalar_type"], tuple(x.shape)))
    if runs < 1:
        raise ValueError(f"runs must be >= 1, got {runs}")
    bridge = _delegate_bridge(delegate_fn) if delegate_fn is not None else None
    model = None
    if npu_model or npu_trace is not None:
        import functools

        from torchmcu.npu.model.driver import run_job

        model = run_job if npu_trace is None else functools.partial(run_job, trace=npu_trace)
    try:
        outs = _native.run_program(pte, packed, method, runs, bridge, model)
    except NativeError as exc:
        named = named_arguments(exc.message)
        if named == exc.message:
            raise
        raise NativeError(exc.status, named) from exc
    return [
        _from_physical(*o) if isinstance(o, tuple) else o  # non-tensor outputs as Python scalars
        for o in outs
    ]
