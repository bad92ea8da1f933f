"""cortex_m::quantized_activation: an int8 activation as a 256-entry lookup table.

Defined here once: the argument check (the rules
firmware/kernels/cortex_m/quantized_activation.c enforces, naming the same argument), the
reference, the TOSA lowering, the contract, and the aten side of the table activations
(sigmoid, tanh, hardsigmoid, hardswish, silu, gelu, leaky_relu, elu and their in-place forms):
the quantizer's fixed output qparams (or none: observed), the float function the table
tabulates, and the rule that builds the table and emits the call (it gets the lowering Kit, torchmcu/lower/kit.py, as `k`).

The table is computed from the float function and the input/output qparams: entry q + 128
holds clamp(round_half_away(f((q - zp_in) * s_in) / s_out) + zp_out, -128, 127), the function
evaluated in float64 (math.tanh, a sigmoid that never overflows exp). Half away from zero is
the convention ExecuTorch's own table builder uses, so the same qparams give the same table in
both flows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, Npu, op, pattern
from torchmcu.ops.layout import same_layout
from torchmcu.pte import program as pm

MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)
TABLE_SIZE = 256  # one entry per int8 input
INT8_MIN, INT8_MAX = -128, 127

# The body of its docs/operators.md section (hand-kept until step 8 generates it from this)
CONTRACT = """\
- int8 table activation (ExecuTorch's operator): `out[i] = lut[input[i] + 128]`; `lut` int8 with
  256 elements (argument 1 otherwise), `out` int8 with the input's sizes and dim order
  (elementwise, so any layout).
- torchmcu emits it for sigmoid, tanh, hardsigmoid, hardswish, silu, gelu (exact and tanh),
  leaky_relu and elu (and their in-place forms), and for a relu, relu6, hardtanh or clamp that
  no producer fuses. The table is built on the host
  (`torchmcu.ops.defs.activation_table.activation_lut`): entry `q + 128` is
  `clamp(round_half_away(f((q - zp_in) * s_in) / s_out) + zp_out, -128, 127)`, f evaluated in
  float64; outputs fixed at `s_out, zp_out` = 1/256, -128 (sigmoid, hardsigmoid) and 1/128, 0
  (tanh), observed for the others. torch's fake-quant rounds ties to even, so the two differ
  only at exact ties. A clamp's table is `clamp(requantize(q), lo, hi)`, its bounds quantized
  as a fused activation's are.
- Helium: 16 lookups per step with a byte gather (`VLDRB.U8` gather, offsets `input ^ 0x80`)."""


def quantized_activation(x: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """out = lut[x + 128], elementwise on int8 (ExecuTorch's operators.py semantics)."""
    table = np.asarray(lut).reshape(-1)
    if table.dtype != np.int8 or table.size != TABLE_SIZE:
        raise ValueError(
            f"quantized_activation: lut must be 256 int8 entries, got {table.size} {table.dtype}"
        )
    if x.dtype != np.int8:
        raise ValueError(f"quantized_activation: input must be int8, got {x.dtype}")
    return table[x.astype(np.int32) - INT8_MIN]


def check(b: Bound) -> None:
    """quantized_activation.c's TM_ARG_CHECKs, in its order, on a bound call."""
    x = b.value("input")
    if not (
        isinstance(x, pm.Tensor)
        and x.scalar_type == pm.ScalarType.CHAR
        and len(x.sizes) <= MAX_DIMS
    ):
        raise b.reject("input", "expected an int8 tensor of rank 0..6")
    lut = b.value("lut")
    if not (
        isinstance(lut, pm.Tensor)
        and lut.scalar_type == pm.ScalarType.CHAR
        and 1 <= len(lut.sizes) <= MAX_DIMS
        and math.prod(lut.sizes) == TABLE_SIZE
    ):
        raise b.reject("lut", "expected an int8 tensor of 256 elements")
    out = b.value("out")
    if not (
        isinstance(out, pm.Tensor) and out.scalar_type == pm.ScalarType.CHAR and same_layout(x, out)
    ):
        raise b.reject("out", "expected an int8 tensor with the input's sizes and layout")


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out (elementwise: the input's layout)."""
    return quantized_activation(b.physical("input"), b.physical("lut"))


def clamp_bounds(lut: np.ndarray) -> tuple[int, int] | None:
    """(lo, hi) when the table is the int8 clamp `lut[q + 128] = min(max(q, lo), hi)` (a
    standalone relu, relu6, hardtanh or clamp), else None."""
    table = np.asarray(lut).reshape(-1).astype(np.int32)
    lo, hi = int(table[0]), int(table[-1])
    if lo > hi:
        return None
    levels = np.arange(INT8_MIN, INT8_MAX + 1)
    return (lo, hi) if np.array_equal(table, np.clip(levels, lo, hi)) else None


def lower_tosa(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    """TOSA's int8 TABLE is the operator exactly (g: tosa Graph, a: its Bound); a table that
    is a clamp becomes TOSA CLAMP, the same values on the NPU's activation unit."""
    a.checked()
    lut = a.constant("lut").reshape(-1)
    bounds = clamp_bounds(lut)
    if bounds is not None:
        return g.clamp(read(a.index("input")), *bounds)
    return g.table(read(a.index("input")), lut)


QUANTIZED_ACTIVATION = op(
    "cortex_m::quantized_activation.out(Tensor input, Tensor lut, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    npu=Npu(lower=lower_tosa, doc="TOSA TABLE (int8, exact); TOSA CLAMP when the table is a clamp"),
    contract=CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def hardsigmoid(x: float) -> float:
    return min(max(x / 6.0 + 0.5, 0.0), 1.0)


def hardswish(x: float) -> float:
    return x * min(max(x + 3.0, 0.0), 6.0) / 6.0


def silu(x: float) -> float:
    return x * sigmoid(x)


def gelu(x: float) -> float:
    """The exact GELU, x * Phi(x)."""
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def gelu_tanh(x: float) -> float:
    """GELU's tanh approximation (approximate="tanh")."""
    return 0.5 * x * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def round_half_away(v: float) -> int:
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def activation_lut(
    f: Callable[[float], float], in_scale: float, in_zp: int, out_scale: float, out_zp: int
) -> np.ndarray:
    """The 256-entry int8 table of f for these qparams (entry q + 128 for input q)."""
    lut = np.empty(TABLE_SIZE, dtype=np.int8)
    for q in range(INT8_MIN, INT8_MAX + 1):
        y = f((q - in_zp) * in_scale) / out_scale
        lut[q - INT8_MIN] = max(INT8_MIN, min(INT8_MAX, round_half_away(y) + out_zp))
    return lut


# aten argument reader (node, name, default) -> value, as the Kit's aten_arg
Arg = Any
# (arg, node) -> the float function of this node (its aten arguments fill in the parameters)
FunctionOf = Callable[[Arg, Any], Callable[[float], float]]


def _fixed(f: Callable[[float], float]) -> FunctionOf:
    def function_of(arg: Arg, node: Any) -> Callable[[float], float]:
        return f

    return function_of


def _gelu(arg: Arg, node: Any) -> Callable[[float], float]:
    approximate = arg(node, "approximate", "none")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return gelu_tanh if approximate == "tanh" else gelu


def _leaky_relu(arg: Arg, node: Any) -> Callable[[float], float]:
    slope = float(arg(node, "negative_slope", 0.01))
    return lambda x: x if x > 0 else x * slope


def _elu(arg: Arg, node: Any) -> Callable[[float], float]:
    """torch's elu: scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))."""
    alpha = float(arg(node, "alpha", 1.0))
    scale = float(arg(node, "scale", 1.0))
    input_scale = float(arg(node, "input_scale", 1.0))
    return lambda x: scale * (x if x > 0 else alpha * math.expm1(x * input_scale))


def _table_rule(function_of: FunctionOf) -> Callable[[Any, Any], None]:
    def lower(k: Any, node: Any) -> None:
        """The table of the node's function for its qparams, one quantized_activation call."""
        x = k.input_value(node.args[0])
        try:
            f = function_of(k.aten_arg, node)
        except ValueError as e:
            raise k.unsupported(node, str(e)) from None
        qs, act, qp = k.output_quant(node, allow_activation=False)
        lut = activation_lut(f, float(x.scale), int(x.zero_point), qp.scale, qp.zero_point)
        out = k.new_int8(node.name, x.sizes, qp, nhwc=x.nhwc)
        k.call(QUANTIZED_ACTIVATION, node, input=x.vi, lut=k.constant(lut), out=out.vi)
        k.bind_output(qs, act, out)

    return lower


# name -> (the float function of a node, fixed output qparams or None for observed ones).
# Outputs of the bounded functions are fixed to their range, [0, 1) for sigmoid and
# hardsigmoid, [-1, 1) for tanh, as TFLite's int8 LOGISTIC/TANH fix them (the quantizer's
# annotation, the table's out qparams); the others are observed like any activation.
TABLE_ACTIVATIONS: dict[str, tuple[FunctionOf, tuple[float, int] | None]] = {
    "sigmoid": (_fixed(sigmoid), (1.0 / 256.0, -128)),
    "tanh": (_fixed(math.tanh), (1.0 / 128.0, 0)),
    "hardsigmoid": (_fixed(hardsigmoid), (1.0 / 256.0, -128)),
    "hardswish": (_fixed(hardswish), None),
    "silu": (_fixed(silu), None),
    "gelu": (_gelu, None),
    "leaky_relu": (_leaky_relu, None),
    "elu": (_elu, None),
}

for _name, (_function_of, _qparams) in TABLE_ACTIVATIONS.items():
    pattern(
        f"aten::{_name}.default",
        f"aten::{_name}_.default",  # the in-place form: the same values
        annotate=Annotate("table", {"kind": _name, "fixed_qparams": _qparams}),
        lower=_table_rule(_function_of),
        emits=(QUANTIZED_ACTIVATION,),
        params={"function": _function_of},
    )
