"""aten::add.out, mul.out, maximum.out, minimum.out, abs.out, relu.out, sigmoid.out, tanh.out,
gelu.out, hardsigmoid.out, hardswish.out, silu.out, leaky_relu.out, hardtanh.out: the fp32
elementwise kernels (firmware/kernels/portable/{add,mul,minmax,abs,relu,sigmoid,tanh,gelu}.c;
hardsigmoid, hardswish and silu in sigmoid.c, leaky_relu and hardtanh in relu.c), and the fp32
rules that emit them: add/sub/rsub/mul with tensors or a Python number (a one-element constant),
div by a number and neg (a mul), maximum, minimum, abs, relu, sigmoid, tanh, gelu,
hardsigmoid/hardswish/silu, leaky_relu and hardtanh/relu6 (and their in-place forms).
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
- relu: `max(x, 0)`, NaN stays NaN. abs: `|x|`. sigmoid: `1/(1+e)` for x >= 0, `e/(1+e)`
  below, with `e = expf(-|x|)` (no overflow). tanh: `tanhf(x)`. hardsigmoid:
  `min(max(x/6 + 1/2, 0), 1)`. hardswish: `x * min(max(x + 3, 0), 6) / 6`. silu:
  `x * sigmoid(x)`. `out`: input's sizes and layout."""

GELU_CONTRACT = """\
- `"none"`: `x/2 * (1 + erff(x/sqrt 2))`; `"tanh"`: `x/2 * (1 + tanhf(sqrt(2/pi) (x + 0.044715 x^3)))`.
  Any other string (or a non-String value) is argument 1. `out`: input's sizes and layout."""


def add(self: np.ndarray, other: np.ndarray, alpha: float = 1) -> np.ndarray:
    """self + alpha * other with broadcasting."""
    return (f32(self) + F32(alpha) * f32(other)).astype(F32)


def mul(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    """self * other with broadcasting."""
    return (f32(self) * f32(other)).astype(F32)


def maximum(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    """max(self, other) with broadcasting; NaN if either is NaN."""
    return np.maximum(f32(self), f32(other)).astype(F32)


def minimum(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    """min(self, other) with broadcasting; NaN if either is NaN."""
    return np.minimum(f32(self), f32(other)).astype(F32)


def abs(self: np.ndarray) -> np.ndarray:
    """|self|."""
    return np.abs(f32(self)).astype(F32)


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


def hardsigmoid(self: np.ndarray) -> np.ndarray:
    """clamp(self / 6 + 1/2, 0, 1)."""
    x = f32(self).astype(np.float64)
    return np.clip(x / 6.0 + 0.5, 0.0, 1.0).astype(F32)


def hardswish(self: np.ndarray) -> np.ndarray:
    """self * clamp(self + 3, 0, 6) / 6."""
    x = f32(self).astype(np.float64)
    return (x * np.clip(x + 3.0, 0.0, 6.0) / 6.0).astype(F32)


def silu(self: np.ndarray) -> np.ndarray:
    """self * sigmoid(self)."""
    return (f32(self).astype(np.float64) * sigmoid(self).astype(np.float64)).astype(F32)


def leaky_relu(self: np.ndarray, negative_slope: float = 0.01) -> np.ndarray:
    """self where positive, else self * negative_slope (in float32, as the kernel)."""
    x = f32(self)
    return np.where(x > 0, x, x * F32(negative_slope)).astype(F32)


def hardtanh(self: np.ndarray, min_val: float = -1.0, max_val: float = 1.0) -> np.ndarray:
    """self clamped to [min_val, max_val]; NaN stays NaN."""
    x = f32(self)
    lo, hi = F32(min_val), F32(max_val)
    return np.where(x < lo, lo, np.where(x > hi, hi, x)).astype(F32)


def check_scalars(b: Bound) -> None:
    """relu.c's family_args: the unary rule, then each Scalar after self, in order."""
    check_unary(b)
    for a in b.op.schema.args[1:]:
        if a.type == "Scalar":
            f32_scalar(b, a.name)


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


def _binary(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray], source: str) -> OpDef:
    return portable(
        f"aten::{name}.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
        source,
        reference=lambda b: b.to_out(fn(b.logical("self"), b.logical("other"))),
        check=check_binary,
        contract=f"`out = {name}(self, other)`, NaN if either is NaN\n\n" + BINARY_CONTRACT,
    )


MAXIMUM = _binary("maximum", maximum, "minmax.c")
MINIMUM = _binary("minimum", minimum, "minmax.c")


def _unary(name: str, fn: Callable[[np.ndarray], np.ndarray], source: str | None = None) -> OpDef:
    return portable(
        f"aten::{name}.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
        source,
        reference=lambda b: b.to_out(fn(b.logical("self"))),
        check=unary_check,
        contract=UNARY_CONTRACT,
    )


RELU = _unary("relu", relu)
SIGMOID = _unary("sigmoid", sigmoid)
TANH = _unary("tanh", tanh)
HARDSIGMOID = _unary("hardsigmoid", hardsigmoid, "sigmoid.c")  # the sigmoid family's file
HARDSWISH = _unary("hardswish", hardswish, "sigmoid.c")
SILU = _unary("silu", silu, "sigmoid.c")
ABS = _unary("abs", abs)
LEAKY_RELU = portable(
    "aten::leaky_relu.out(Tensor self, Scalar negative_slope=0.01, *, Tensor(a!) out)"
    " -> Tensor(a!)",
    "relu.c",
    reference=lambda b: b.to_out(leaky_relu(b.logical("self"), f32_scalar(b, "negative_slope"))),
    check=check_scalars,
    contract="- `self > 0 ? self : self * negative_slope` (float32). `out`: input's sizes and layout.",
)
HARDTANH = portable(
    "aten::hardtanh.out(Tensor self, Scalar min_val=-1, Scalar max_val=1, *, Tensor(a!) out)"
    " -> Tensor(a!)",
    "relu.c",
    reference=lambda b: b.to_out(
        hardtanh(b.logical("self"), f32_scalar(b, "min_val"), f32_scalar(b, "max_val"))
    ),
    check=check_scalars,
    contract="- `self` clamped to `[min_val, max_val]`, NaN stays NaN (float32). `out`: input's "
    "sizes and layout.",
)
GELU = portable(
    'aten::gelu.out(Tensor self, *, str approximate="none", Tensor(a!) out) -> Tensor(a!)',
    reference=lambda b: b.to_out(gelu(b.logical("self"), string_arg(b, "approximate"))),
    check=check_gelu,
    contract=GELU_CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def _value(k: Any, node: Any, v: object) -> int:
    """A float32 operand: a graph value, or a Python number as a one-element constant."""
    if k.is_node(v):
        return k.float_input(v).vi
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise k.unsupported(node, f"an operand {v!r} (a tensor or a number)")
    return k.constant(np.array([v], dtype=F32))


def _operands(k: Any, node: Any) -> tuple[int, int]:
    a, c = k.aten_arg(node, "self"), k.aten_arg(node, "other")
    if not k.is_node(a) and not k.is_node(c):
        raise k.unsupported(node, "a float op of two numbers")
    return _value(k, node, a), _value(k, node, c)


def _alpha(k: Any, value: object) -> int:
    return k.double(float(value)) if isinstance(value, float) else k.int_(int(value))  # type: ignore[arg-type]


def lower_add(k: Any, node: Any) -> None:
    a, c = _operands(k, node)
    alpha_vi = _alpha(k, k.aten_arg(node, "alpha", 1))
    k.call(ADD, node, self=a, other=c, alpha=alpha_vi, out=k.float_out(node).vi)


def lower_sub(k: Any, node: Any) -> None:
    """self - alpha * other: add with -alpha."""
    a, c = _operands(k, node)
    alpha_vi = _alpha(k, -k.aten_arg(node, "alpha", 1))
    k.call(ADD, node, self=a, other=c, alpha=alpha_vi, out=k.float_out(node).vi)


def lower_rsub(k: Any, node: Any) -> None:
    """aten::rsub.Scalar, other - alpha * self: add(other, self, -alpha)."""
    a, c = _operands(k, node)
    alpha_vi = _alpha(k, -k.aten_arg(node, "alpha", 1))
    k.call(ADD, node, self=c, other=a, alpha=alpha_vi, out=k.float_out(node).vi)


def lower_mul(k: Any, node: Any) -> None:
    a, c = _operands(k, node)
    k.call(MUL, node, self=a, other=c, out=k.float_out(node).vi)


def _times(k: Any, node: Any, factor: float) -> None:
    x = k.float_input(k.aten_arg(node, "self"))
    c = k.constant(np.array([factor], dtype=F32))
    k.call(MUL, node, self=x.vi, other=c, out=k.float_out(node).vi)


def lower_div(k: Any, node: Any) -> None:
    """x / c for a number c: x * float32(1/c) (within an ulp of torch's division)."""
    divisor = k.aten_arg(node, "other")
    if k.is_node(divisor) or isinstance(divisor, bool) or not isinstance(divisor, (int, float)) \
            or divisor == 0:
        raise k.unsupported(node, f"a float division by {divisor} (only by a nonzero number)")
    _times(k, node, 1.0 / float(divisor))


def lower_neg(k: Any, node: Any) -> None:
    _times(k, node, -1.0)


def _lower_binary(definition: OpDef) -> Callable[[Any, Any], None]:
    def lower(k: Any, node: Any) -> None:
        a, c = _operands(k, node)
        k.call(definition, node, self=a, other=c, out=k.float_out(node).vi)

    return lower


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
pattern("aten::sub.Tensor", "aten::sub_.Tensor", lower_float=lower_sub, emits=(ADD,))
pattern("aten::rsub.Scalar", lower_float=lower_rsub, emits=(ADD,))
pattern("aten::mul.Tensor", "aten::mul_.Tensor", lower_float=lower_mul, emits=(MUL,))
pattern("aten::div.Tensor", "aten::div_.Tensor", lower_float=lower_div, emits=(MUL,))
pattern("aten::neg.default", "aten::neg_.default", lower_float=lower_neg, emits=(MUL,))
pattern("aten::maximum.default", lower_float=_lower_binary(MAXIMUM), emits=(MAXIMUM,))
pattern("aten::minimum.default", lower_float=_lower_binary(MINIMUM), emits=(MINIMUM,))
pattern("aten::abs.default", "aten::abs_.default", lower_float=_lower_unary(ABS), emits=(ABS,))
pattern("aten::relu.default", "aten::relu_.default", lower_float=_lower_unary(RELU), emits=(RELU,))
pattern("aten::sigmoid.default", lower_float=_lower_unary(SIGMOID), emits=(SIGMOID,))
pattern("aten::tanh.default", lower_float=_lower_unary(TANH), emits=(TANH,))
for _name, _definition in (("hardsigmoid", HARDSIGMOID), ("hardswish", HARDSWISH), ("silu", SILU)):
    pattern(
        f"aten::{_name}.default",
        f"aten::{_name}_.default",
        lower_float=_lower_unary(_definition),
        emits=(_definition,),
    )
pattern("aten::gelu.default", lower_float=lower_gelu, emits=(GELU,))


def lower_leaky_relu(k: Any, node: Any) -> None:
    x = k.float_input(node.args[0])
    slope = k.double(float(k.aten_arg(node, "negative_slope", 0.01)))
    k.call(LEAKY_RELU, node, self=x.vi, negative_slope=slope, out=k.float_out(node).vi)


def lower_hardtanh(k: Any, node: Any) -> None:
    """hardtanh(min_val, max_val); relu6 is hardtanh(0, 6)."""
    x = k.float_input(node.args[0])
    six = "relu6" in str(node.target)
    lo = 0.0 if six else float(k.aten_arg(node, "min_val", -1.0))
    hi = 6.0 if six else float(k.aten_arg(node, "max_val", 1.0))
    out = k.float_out(node).vi
    k.call(HARDTANH, node, self=x.vi, min_val=k.double(lo), max_val=k.double(hi), out=out)


pattern(
    "aten::leaky_relu.default",
    "aten::leaky_relu_.default",
    lower_float=lower_leaky_relu,
    emits=(LEAKY_RELU,),
)
pattern(
    "aten::hardtanh.default",
    "aten::hardtanh_.default",
    "aten::relu6.default",
    "aten::relu6_.default",
    lower_float=lower_hardtanh,
    emits=(HARDTANH,),
)
