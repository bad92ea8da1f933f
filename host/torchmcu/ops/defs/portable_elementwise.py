"""aten::add.out, mul.out, relu.out, sigmoid.out, tanh.out, gelu.out: the fp32 elementwise
kernels (firmware/kernels/portable/{add,mul,relu,sigmoid,tanh,gelu}.c), and the fp32 rules of
aten::add/add_/mul/mul_ (Tensor), relu/relu_, sigmoid, tanh and gelu that emit them.
Conventions: defs/portable.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from torchmcu.ops.core import Bound, OpDef, pattern
from torchmcu.ops.defs.portable import (
    F32,
    broadcast_fault,
    check_unary,
    f32,
    f32_scalar,
    f32_tensor,
    is_f32,
    portable,
    string_arg,
    unary_check,
)

BINARY_CONTRACT = """\
- Broadcasting as above; any dim orders (e.g. an NHWC activation plus a `[1,C,1,1]` vector)."""

UNARY_CONTRACT = """\
- relu: `max(x, 0)`, NaN stays NaN. sigmoid: `1/(1+e)` for x >= 0, `e/(1+e)` below, with
  `e = expf(-|x|)` (no overflow). tanh: `tanhf(x)`. `out`: input's sizes and layout."""

GELU_CONTRACT = """\
- `"none"`: `x/2 * (1 + erff(x/sqrt 2))`; `"tanh"`: `x/2 * (1 + tanhf(sqrt(2/pi) (x + 0.044715 x^3)))`.
  Any other string (or a non-String value) is argument 1. `out`: input's sizes and layout."""


def add(self: np.ndarray, other: np.ndarray, alpha: float = 1) -> np.ndarray:
    """self + alpha * other with broadcasting."""
    return (f32(self) + F32(alpha) * f32(other)).astype(F32)


def mul(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    """self * other with broadcasting."""
    return (f32(self) * f32(other)).astype(F32)


def relu(self: np.ndarray) -> np.ndarray:
    """max(self, 0); NaN stays NaN."""
    x = f32(self)
    return np.where(np.isnan(x), x, np.maximum(x, F32(0))).astype(F32)


def sigmoid(self: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-self))."""
    x = f32(self).astype(np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(F32)


def tanh(self: np.ndarray) -> np.ndarray:
    """tanh(self)."""
    return np.tanh(f32(self).astype(np.float64)).astype(F32)


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(self: np.ndarray, approximate: str = "none") -> np.ndarray:
    """x/2 (1 + erf(x/sqrt 2)), or the tanh form for approximate="tanh"."""
    x = f32(self).astype(np.float64)
    if approximate == "none":
        return (0.5 * x * (1 + _erf(x / math.sqrt(2)).astype(np.float64))).astype(F32)
    if approximate == "tanh":
        return (0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))).astype(F32)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', not {approximate!r}")


def check_binary(b: Bound) -> None:
    """tm_f32_binary_kernel's TM_ARG_CHECKs (add.c, mul.c), in its order."""
    a = f32_tensor(b, "self")
    other = f32_tensor(b, "other")
    if "alpha" in b.op.schema.A:
        f32_scalar(b, "alpha")
    out = b.value("out")
    if not is_f32(out):
        raise b.reject("out", "expected a float32 tensor")
    fault = broadcast_fault(a.sizes, other.sizes, out.sizes)  # type: ignore[union-attr]
    if fault:
        name = ("self", "other", "out")[fault - 1]
        raise b.reject(
            name, f"sizes {a.sizes} and {other.sizes} do not broadcast to out {out.sizes}"
        )  # type: ignore[union-attr]


def check_gelu(b: Bound) -> None:
    """gelu.c's TM_ARG_CHECKs: the unary rule, then approximate "none" or "tanh"."""
    check_unary(b)
    if string_arg(b, "approximate") not in ("none", "tanh"):
        raise b.reject("approximate", 'expected the String "none" or "tanh"')


ADD = portable(
    "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    reference=lambda b: b.to_out(add(b.logical("self"), b.logical("other"), b.alpha)),
    check=check_binary,
    contract="`out = self + alpha*other`\n\n" + BINARY_CONTRACT,
)
MUL = portable(
    "aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    reference=lambda b: b.to_out(mul(b.logical("self"), b.logical("other"))),
    check=check_binary,
    contract="`out = self * other`\n\n" + BINARY_CONTRACT,
)


def _unary(name: str, fn: Callable[[np.ndarray], np.ndarray]) -> OpDef:
    return portable(
        f"aten::{name}.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
        reference=lambda b: b.to_out(fn(b.logical("self"))),
        check=unary_check,
        contract=UNARY_CONTRACT,
    )


RELU = _unary("relu", relu)
SIGMOID = _unary("sigmoid", sigmoid)
TANH = _unary("tanh", tanh)
GELU = portable(
    'aten::gelu.out(Tensor self, *, str approximate="none", Tensor(a!) out) -> Tensor(a!)',
    reference=lambda b: b.to_out(gelu(b.logical("self"), string_arg(b, "approximate"))),
    check=check_gelu,
    contract=GELU_CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def _operands(k: Any, node: Any) -> tuple[int, int]:
    a, c = k.aten_arg(node, "self"), k.aten_arg(node, "other")
    if not k.is_node(a) or not k.is_node(c):
        raise k.unsupported(node, "a float tensor-scalar op (both operands must be tensors)")
    return k.float_input(a).vi, k.float_input(c).vi


def lower_add(k: Any, node: Any) -> None:
    a, c = _operands(k, node)
    alpha = k.aten_arg(node, "alpha", 1)
    alpha_vi = k.double(float(alpha)) if isinstance(alpha, float) else k.int_(int(alpha))
    k.call(ADD, node, self=a, other=c, alpha=alpha_vi, out=k.float_out(node).vi)


def lower_mul(k: Any, node: Any) -> None:
    a, c = _operands(k, node)
    k.call(MUL, node, self=a, other=c, out=k.float_out(node).vi)


def _lower_unary(definition: OpDef) -> Callable[[Any, Any], None]:
    def lower(k: Any, node: Any) -> None:
        x = k.float_input(node.args[0])
        k.call(definition, node, self=x.vi, out=k.float_out(node).vi)

    return lower


def lower_gelu(k: Any, node: Any) -> None:
    x = k.float_input(k.aten_arg(node, "self"))
    approximate = str(k.aten_arg(node, "approximate", "none"))
    k.call(GELU, node, self=x.vi, approximate=k.string(approximate), out=k.float_out(node).vi)


pattern("aten::add.Tensor", "aten::add_.Tensor", lower_float=lower_add, emits=(ADD,))
pattern("aten::mul.Tensor", "aten::mul_.Tensor", lower_float=lower_mul, emits=(MUL,))
pattern("aten::relu.default", "aten::relu_.default", lower_float=_lower_unary(RELU), emits=(RELU,))
pattern("aten::sigmoid.default", lower_float=_lower_unary(SIGMOID), emits=(SIGMOID,))
pattern("aten::tanh.default", lower_float=_lower_unary(TANH), emits=(TANH,))
pattern("aten::gelu.default", lower_float=lower_gelu, emits=(GELU,))
