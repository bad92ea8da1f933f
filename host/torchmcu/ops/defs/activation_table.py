"""cortex_m::quantized_activation: an int8 activation as a 256-entry lookup table.

Defined here once: the argument check (the rules
firmware/kernels/cortex_m/quantized_activation.c enforces, naming the same argument), the
reference, the TOSA lowering, the contract, and the aten side of sigmoid and tanh: the
quantizer's fixed output qparams, the float function the table tabulates, and the rule that
builds the table and emits the call (it gets the lowering Kit, torchmcu/lower/kit.py, as `k`).

The table is computed from the float function and the input/output qparams: entry q + 128
holds clamp(round_half_away(f((q - zp_in) * s_in) / s_out) + zp_out, -128, 127), the function
evaluated in float64 (math.tanh, a sigmoid that never overflows exp). Half away from zero is
the convention ExecuTorch's own table builder uses, so the same qparams give the same table in
both flows.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, Npu, op, pattern
from torchmcu.ops.layout import same_layout
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)
TABLE_SIZE = 256  # one entry per int8 input
INT8_MIN, INT8_MAX = -128, 127

# The body of its docs/operators.md section (hand-kept until step 8 generates it from this)
CONTRACT = """\
- int8 table activation (ExecuTorch's operator): `out[i] = lut[input[i] + 128]`; `lut` int8 with
  256 elements (argument 1 otherwise), `out` int8 with the input's sizes and dim order
  (elementwise, so any layout).
- torchmcu emits it for sigmoid and tanh. The table is built on the host
  (`torchmcu.ops.defs.activation_table.activation_lut`): entry `q + 128` is
  `clamp(round_half_away(f((q - zp_in) * s_in) / s_out) + zp_out, -128, 127)`, f evaluated in
  float64; outputs fixed at `s_out, zp_out` = 1/256, -128 (sigmoid) and 1/128, 0 (tanh). torch's
  fake-quant rounds ties to even, so the two differ only at exact ties.
- Helium: 16 lookups per step with a byte gather (`VLDRB.U8` gather, offsets `input ^ 0x80`)."""


def quantized_activation(x: np.ndarray, lut: np.ndarray) -> np.ndarray:
    """out = lut[x + 128], elementwise on int8 (ExecuTorch's operators.py semantics)."""
    table = np.asarray(lut).reshape(-1)
    if table.dtype != np.int8 or table.size != TABLE_SIZE:
        raise ValueError(f"quantized_activation: lut must be 256 int8 entries, got {table.size} "
                         f"{table.dtype}")
    if x.dtype != np.int8:
        raise ValueError(f"quantized_activation: input must be int8, got {x.dtype}")
    return table[x.astype(np.int32) - INT8_MIN]


def check(b: Bound) -> None:
    """quantized_activation.c's TM_ARG_CHECKs, in its order, on a bound call."""
    x = b.value("input")
    if not (isinstance(x, pm.Tensor) and x.scalar_type == pm.ScalarType.CHAR and len(x.sizes) <= MAX_DIMS):
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
    if not (isinstance(out, pm.Tensor) and out.scalar_type == pm.ScalarType.CHAR and same_layout(x, out)):
        raise b.reject("out", "expected an int8 tensor with the input's sizes and layout")


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out (elementwise: the input's layout)."""
    return quantized_activation(b.physical("input"), b.physical("lut"))


def lower_tosa(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    """TOSA's int8 TABLE is the operator exactly (g: tosa Graph, a: its Bound)."""
    a.checked()
    lut = a.constant("lut").reshape(-1)
    return g.table(read(a.index("input")), lut)


QUANTIZED_ACTIVATION = op(
    "cortex_m::quantized_activation.out(Tensor input, Tensor lut, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    npu=Npu(lower=lower_tosa, doc="TOSA TABLE (int8, exact)"),
    contract=CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def round_half_away(v: float) -> int:
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def activation_lut(f: Callable[[float], float], in_scale: float, in_zp: int,
                   out_scale: float, out_zp: int) -> np.ndarray:
    """The 256-entry int8 table of f for these qparams (entry q + 128 for input q)."""
    lut = np.empty(TABLE_SIZE, dtype=np.int8)
    for q in range(INT8_MIN, INT8_MAX + 1):
        y = f((q - in_zp) * in_scale) / out_scale
        lut[q - INT8_MIN] = max(INT8_MIN, min(INT8_MAX, round_half_away(y) + out_zp))
    return lut


def _table_rule(f: Callable[[float], float]) -> Callable[[Any, Any], None]:
    def lower(k: Any, node: Any) -> None:
        """The table of f for the node's qparams, one quantized_activation call."""
        x = k.input_value(node.args[0])
        qs, act, qp = k.output_quant(node, allow_activation=False)
        lut = activation_lut(f, float(x.scale), int(x.zero_point), qp.scale, qp.zero_point)
        out = k.new_int8(node.name, x.sizes, qp, nhwc=x.nhwc)
        k.call(QUANTIZED_ACTIVATION, node, input=x.vi, lut=k.constant(lut), out=out.vi)
        k.bind_output(qs, act, out)

    return lower


# Outputs fixed to the function's range, sigmoid [0, 1) and tanh [-1, 1), as TFLite's int8
# LOGISTIC/TANH fix them (the quantizer's annotation, the table's out qparams).
for _name, _f, _qparams in (
    ("sigmoid", sigmoid, (1.0 / 256.0, -128)),
    ("tanh", math.tanh, (1.0 / 128.0, 0)),
):
    pattern(
        f"aten::{_name}.default",
        annotate=Annotate("table", {"kind": _name, "fixed_qparams": _qparams}),
        lower=_table_rule(_f),
        emits=(QUANTIZED_ACTIVATION,),
        params={"function": _f},
    )
