"""cortex_m::quantized_batch_matmul: the product of two int8 activations, batch by batch
(ExecuTorch's name and argument list; attention's q @ k^T and p @ v).

Defined here once: the argument check (the rules firmware/kernels/cortex_m/
quantized_batch_matmul.c enforces, naming the same argument), the reference, the MAC count,
the contract, and the aten rule that emits it (aten::matmul.default, which
quantize/attention.py makes of scaled_dot_product_attention), which gets the lowering Kit
(torchmcu/lower/kit.py) as `k`. The kernel is quantized_linear's matrix product per batch
(firmware/kernels/cortex_m/linear_core.h) with the right-hand side's offset as the filter
offset. No NPU lowering yet.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, op, pattern
from torchmcu.ops.defs.linear import contiguous
from torchmcu.ops.defs.transpose import TRANSPOSE
from torchmcu.ops.intmath import (
    INT8_MAX,
    INT8_MIN,
    INT32_MAX,
    check_int,
    quantize_multiplier,
    requantize,
)
from torchmcu.ops.layout import is_scratch
from torchmcu.pte import program as pm

SHIFT_MIN, SHIFT_MAX = -31, 31

CONTRACT = """\
ExecuTorch's `cortex_m::quantized_batch_matmul` (the name and argument list of its
operators.yaml); the offsets are **negated** zero points (CMSIS-NN's convention).

- `lhs` int8 `[B, M, K]`, `rhs_transposed` int8 `[B, N, K]` (the right-hand matrix
  transposed), `out` int8 `[B, M, N]`, all contiguous; `scratch` a 1-D byte tensor of any
  size (unused: ExecuTorch sizes it for CMSIS-NN's MVE fully connected kernel).
- `lhs_zero_point = -lhs_zp`, `rhs_zero_point = -rhs_zp` (each in [-127, 128]);
  `output_zero_point` the output's int8 zero point.
- `acc[b, m, n] = sum_k (lhs[b, m, k] + lhs_zero_point) * (rhs_transposed[b, n, k] +
  rhs_zero_point)` in int32;
  `out = clamp(requantize(acc, output_multiplier, output_shift) + output_zero_point,
  -128, 127)` with the conventions' requantization (multiplier in [1, 2^31 - 1], shift in
  [-31, 31]).
- torchmcu emits it for `aten::matmul` of two int8 activations of rank >= 3 with equal
  leading sizes (folded into B), after a `cortex_m::transpose` of the right-hand side; none
  when the right-hand side is a transpose of the last two dims read only by matmuls
  (attention's `q @ k.transpose(-2, -1)`: `k` is passed as `rhs_transposed`, and that
  transpose moves nothing). A following `* number` (attention's scale) is folded into
  `output_multiplier` and `output_shift`."""


def quantized_batch_matmul(
    lhs: np.ndarray,
    lhs_zero_point: int,
    rhs_transposed: np.ndarray,
    rhs_zero_point: int,
    output_zero_point: int,
    output_multiplier: int,
    output_shift: int,
) -> np.ndarray:
    """[B, M, K] x [B, N, K] -> [B, M, N] int8."""
    check_int("lhs_zero_point", lhs_zero_point, -INT8_MAX, -INT8_MIN)
    check_int("rhs_zero_point", rhs_zero_point, -INT8_MAX, -INT8_MIN)
    check_int("output_zero_point", output_zero_point, INT8_MIN, INT8_MAX)
    check_int("output_multiplier", output_multiplier, 1, INT32_MAX)
    check_int("output_shift", output_shift, SHIFT_MIN, SHIFT_MAX)
    a = np.asarray(lhs, dtype=np.int64) + lhs_zero_point
    b = np.asarray(rhs_transposed, dtype=np.int64) + rhs_zero_point
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[2]:
        raise ValueError(f"batch matmul of {a.shape} and transposed {b.shape}")
    acc = np.einsum("bmk,bnk->bmn", a, b)
    out = requantize(acc, output_multiplier, output_shift) + output_zero_point
    return np.clip(out, INT8_MIN, INT8_MAX).astype(np.int8)


# -- the check: quantized_batch_matmul.c's TM_ARG_CHECKs in its order
def check(b: Bound) -> None:
    lhs = b.value("lhs")
    if not (contiguous(lhs, pm.ScalarType.CHAR, 3, 3) and min(lhs.sizes) > 0):
        raise b.reject("lhs", "expected a contiguous int8 [B, M, K] tensor, sizes > 0")
    batch, rows, inner = lhs.sizes
    b.int_in("lhs_zero_point", -INT8_MAX, -INT8_MIN)
    rhs = b.value("rhs_transposed")
    if not (
        contiguous(rhs, pm.ScalarType.CHAR, 3, 3)
        and rhs.sizes[0] == batch
        and rhs.sizes[2] == inner
        and rhs.sizes[1] > 0
    ):
        raise b.reject("rhs_transposed", f"expected a contiguous int8 [{batch}, N, {inner}] tensor")
    cols = rhs.sizes[1]
    b.int_in("rhs_zero_point", -INT8_MAX, -INT8_MIN)
    b.int_in("output_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_multiplier", 1, INT32_MAX)
    b.int_in("output_shift", SHIFT_MIN, SHIFT_MAX)
    if not is_scratch(b.value("scratch"), 0):
        raise b.reject("scratch", "expected a 1-D byte tensor")
    out = b.value("out")
    if not (contiguous(out, pm.ScalarType.CHAR, 3, 3) and list(out.sizes) == [batch, rows, cols]):
        raise b.reject("out", f"expected a contiguous int8 [{batch}, {rows}, {cols}] tensor")


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out."""
    return quantized_batch_matmul(
        b.physical("lhs"), b.lhs_zero_point, b.physical("rhs_transposed"), b.rhs_zero_point,
        b.output_zero_point, b.output_multiplier, b.output_shift,
    ).reshape(-1)  # fmt: skip


def macs(b: Bound) -> int:
    return b.tensor("out").numel * b.tensor("lhs").sizes[-1]


QUANTIZED_BATCH_MATMUL = op(
    "cortex_m::quantized_batch_matmul.out(Tensor lhs, int lhs_zero_point, Tensor rhs_transposed,"
    " int rhs_zero_point, int output_zero_point, int output_multiplier, int output_shift,"
    " Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    macs=macs,
    no_npu="no TOSA lowering yet (a later step: TOSA MATMUL)",
    contract=CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def lower_matmul(k: Any, node: Any) -> None:
    """aten::matmul.default of two int8 activations [..., M, K] @ [..., K, N] with the same
    leading sizes: the right-hand side transposed to [..., N, K] (or read under a transpose
    of its last two dims, which then moves nothing: Kit.untransposed_rhs), the leading dims
    folded, a following `* number` folded into the requantization (Kit.scale_mul)."""
    a = k.as_contiguous(k.input_value(k.aten_arg(node, "self")))
    other = k.aten_arg(node, "other")
    rhs_t = k.untransposed_rhs(other)
    if rhs_t is not None:
        rhs_t = k.as_contiguous(rhs_t)
        c = rhs_t.with_(sizes=[*rhs_t.sizes[:-2], rhs_t.sizes[-1], rhs_t.sizes[-2]])
    else:
        c = k.as_contiguous(k.input_value(other))
    out_shape = k.shape_of(node)
    if a.rank < 2 or c.rank != a.rank or a.sizes[:-2] != c.sizes[:-2] or a.sizes[-1] != c.sizes[-2]:
        raise k.unsupported(
            node, f"matmul of {a.sizes} and {c.sizes} (equal leading sizes, no broadcasting)"
        )
    batch = math.prod(a.sizes[:-2])
    rows, inner, cols = a.sizes[-2], a.sizes[-1], c.sizes[-1]
    scaled = k.scale_mul(node)
    factor = 1.0
    if scaled is None:
        qs, act, qp = k.output_quant(node, allow_activation=False)
    else:
        act, factor = scaled
        qs, _, qp = k.output_quant(act, allow_activation=False)
    mult, shift = quantize_multiplier(float(a.scale) * float(c.scale) * factor / qp.scale)
    if rhs_t is not None:
        rhs_t = k.alias(rhs_t, [batch, cols, inner], nhwc=False)
    else:
        rhs = k.alias(c, [batch, inner, cols], nhwc=False)
        rhs_t = k.new_int8(f"{node.name}.rhs_t", [batch, cols, inner], None, nhwc=False)
        k.call(TRANSPOSE, node, input=rhs.vi, perm=k.int_list([0, 2, 1]), out=rhs_t.vi)
    out = k.new_int8(node.name, out_shape, qp, nhwc=False)
    k.call(
        QUANTIZED_BATCH_MATMUL,
        node,
        lhs=k.alias(a, [batch, rows, inner], nhwc=False).vi,
        lhs_zero_point=k.int_(-int(a.zero_point)),
        rhs_transposed=rhs_t.vi,
        rhs_zero_point=k.int_(-int(c.zero_point)),
        output_zero_point=k.int_(qp.zero_point),
        output_multiplier=k.int_(mult),
        output_shift=k.int_(shift),
        scratch=k.scratch(node.name, 0),
        out=k.alias(out, [batch, rows, cols], nhwc=False).vi,
    )
    k.bind_output(qs, act, out)


pattern(
    "aten::matmul.default",
    annotate=Annotate("binary", {"kind": "matmul"}),
    lower=lower_matmul,
    emits=(QUANTIZED_BATCH_MATMUL, TRANSPOSE),
)
