"""The portable aten:: fp32 kernel calls of a program, run through ops_float (the interpreter's
float half). Arguments follow the schemas of docs/operators.md ("Portable fp32 operators"):
tensors are read in logical order whatever their dim order, and results are written through
the out tensors' dim orders."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from torchmcu.pte import program as pm
from torchmcu.reference import ops_float


def _tensor(c: Any, i: int) -> np.ndarray | None:
    v = c.values[c.args[i]]
    if isinstance(v, pm.Null):
        return None
    return c.memory.read_logical(c.args[i])


def _string(c: Any, i: int) -> str:
    v = c.values[c.args[i]]
    if not isinstance(v, pm.String):
        raise TypeError(f"argument {i}: expected a String, got {type(v).__name__}")
    return v.value


def _tensor_list(c: Any, i: int) -> list[np.ndarray]:
    v = c.values[c.args[i]]
    if not isinstance(v, pm.TensorList):
        raise TypeError(f"argument {i}: expected a TensorList, got {type(v).__name__}")
    return [c.memory.read_logical(k) for k in v.items]


def _t(i: int) -> Callable[[Any], Any]:
    return lambda c: _tensor(c, i)


def _s(i: int) -> Callable[[Any], Any]:
    return lambda c: c.scalar(i)


# op -> (ops_float function, readers of the schema arguments before the outs, number of outs)
_CALLS: dict[str, tuple[Callable[..., Any], list[Callable[[Any], Any]], int]] = {
    "aten::addmm": (ops_float.addmm, [_t(0), _t(1), _t(2), _s(3), _s(4)], 1),
    "aten::mm": (ops_float.mm, [_t(0), _t(1)], 1),
    "aten::convolution": (ops_float.convolution, [_t(0), _t(1), _t(2)] + [_s(i) for i in range(3, 9)], 1),
    "aten::add": (ops_float.add, [_t(0), _t(1), _s(2)], 1),
    "aten::mul": (ops_float.mul, [_t(0), _t(1)], 1),
    "aten::relu": (ops_float.relu, [_t(0)], 1),
    "aten::sigmoid": (ops_float.sigmoid, [_t(0)], 1),
    "aten::tanh": (ops_float.tanh, [_t(0)], 1),
    "aten::gelu": (ops_float.gelu, [_t(0), lambda c: _string(c, 1)], 1),
    "aten::_softmax": (ops_float._softmax, [_t(0), _s(1), _s(2)], 1),
    "aten::mean": (ops_float.mean, [_t(0), _s(1), _s(2), _s(3)], 1),
    "aten::view_copy": (ops_float.view_copy, [_t(0), _s(1)], 1),
    "aten::permute_copy": (ops_float.permute_copy, [_t(0), _s(1)], 1),
    "aten::cat": (ops_float.cat, [lambda c: _tensor_list(c, 0), _s(1)], 1),
    "aten::native_layer_norm": (ops_float.native_layer_norm,
                                [_t(0), _s(1), _t(2), _t(3), _s(4)], 3),
}

FLOAT_OPS = frozenset(_CALLS)


def run_float_call(c: Any, op: str) -> None:
    """Run one portable call bound as the interpreter's _Call `c`; writes its out tensor(s)."""
    fn, readers, outs = _CALLS[op]
    expected = len(readers) + outs + 1  # + the returned value (out, or the TensorList of outs)
    if len(c.args) != expected:
        raise ValueError(f"{op}: {len(c.args)} arguments, expected {expected}")
    out_indices = c.args[len(readers):len(readers) + outs]
    returned = c.values[c.args[-1]]
    if outs == 1 and c.args[-1] != c.args[-2]:
        raise ValueError(f"{op}: the returned value is not the out tensor")
    if outs > 1 and (not isinstance(returned, pm.TensorList) or list(returned.items) != list(out_indices)):
        raise ValueError(f"{op}: the returned TensorList is not the out tensors in order")
    result = fn(*(r(c) for r in readers))
    results = result if outs > 1 else (result,)
    for index, value in zip(out_indices, results):
        t = c.memory.tensor(index)
        value = np.asarray(value, dtype=np.float32)
        if list(value.shape) != list(t.sizes):
            raise ValueError(f"{op}: result shape {list(value.shape)} does not fit out {t.sizes}")
        c.memory.write_logical(index, value)
