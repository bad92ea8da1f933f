"""cortex_m::quantized_add / quantized_mul: int8 elementwise with channel broadcast.

Defined here once: the argument checks (the rules firmware/kernels/cortex_m/quantized_add.c
and quantized_mul.c enforce, naming the same argument), the references, the TOSA lowerings,
the contracts, and the aten rules that emit them (aten::add.Tensor, add_.Tensor, mul.Tensor,
mul_.Tensor), which get the lowering Kit (torchmcu/lower/kit.py) as `k`.

On the NPU each is RESCALE to int32, ADD/MUL (int32 only in TOSA 1.0), RESCALE back.
quantized_add follows CMSIS-NN: each operand's requantize((x - zp) << 20, m, shift), the sum,
and the sum's requantization to int8. An int8 operand has only 256 values, so the operand step
is one RESCALE (int8 -> int32) when some (multiplier, shift) reproduces it for all 256 of them
(checked here, exhaustively); otherwise it is two RESCALEs, the exact << 20 and the operand's
own DOUBLE_ROUND requantization, which is CMSIS-NN's by identity.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, Npu, op, pattern
from torchmcu.ops.intmath import (
    INT8_MAX,
    INT8_MIN,
    INT32_MAX,
    INT32_MIN,
    check_activation,
    check_int,
    quantize_multiplier,
    requantize,
    single_rounding_multiplier,
    tosa_double_round,
)
from torchmcu.ops.layout import binary_broadcast
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)
ADD_INPUT_LEFT_SHIFT = 20  # CMSIS-NN's headroom shift for int8 add
SHIFT_MIN, SHIFT_MAX = -31, 31


def _check_int8_zero_points(**zero_points: int) -> None:
    for name, zp in zero_points.items():
        check_int(name, zp, INT8_MIN, INT8_MAX)


def quantized_add(
    self: np.ndarray,
    self_zero_point: int,
    self_multiplier: int,
    self_shift: int,
    other: np.ndarray,
    other_zero_point: int,
    other_multiplier: int,
    other_shift: int,
    output_zero_point: int,
    output_multiplier: int,
    output_shift: int,
    activation_min: int,
    activation_max: int,
) -> np.ndarray:
    """CMSIS-NN int8 add: both operands rescaled to a common 2^20-headroom scale, summed, rescaled."""
    _check_int8_zero_points(self_zero_point=self_zero_point, other_zero_point=other_zero_point,
                            output_zero_point=output_zero_point)
    check_activation(activation_min, activation_max)
    a = (np.asarray(self, dtype=np.int64) - self_zero_point) << ADD_INPUT_LEFT_SHIFT
    b = (np.asarray(other, dtype=np.int64) - other_zero_point) << ADD_INPUT_LEFT_SHIFT
    a = requantize(a, self_multiplier, self_shift)
    b = requantize(b, other_multiplier, other_shift)
    out = requantize(a + b, output_multiplier, output_shift) + output_zero_point
    return np.clip(out, activation_min, activation_max).astype(np.int8)


def quantized_mul(
    self: np.ndarray,
    self_zero_point: int,
    other: np.ndarray,
    other_zero_point: int,
    output_zero_point: int,
    output_multiplier: int,
    output_shift: int,
) -> np.ndarray:
    """CMSIS-NN int8 mul: product of zero-point-centred operands, one rescale."""
    _check_int8_zero_points(self_zero_point=self_zero_point, other_zero_point=other_zero_point,
                            output_zero_point=output_zero_point)
    prod = (np.asarray(self, dtype=np.int64) - self_zero_point) * (
        np.asarray(other, dtype=np.int64) - other_zero_point
    )
    out = requantize(prod, output_multiplier, output_shift) + output_zero_point
    return np.clip(out, INT8_MIN, INT8_MAX).astype(np.int8)


# -- the checks: the C kernels' TM_ARG_CHECKs in their order
def _tensor(b: Bound, name: str) -> pm.Tensor:
    t = b.value(name)
    if not (isinstance(t, pm.Tensor) and t.scalar_type == pm.ScalarType.CHAR and len(t.sizes) <= MAX_DIMS):
        raise b.reject(name, "expected an int8 tensor of rank 0..6")
    return t


def _requant_args(b: Bound, prefix: str) -> None:
    b.int_in(f"{prefix}_zero_point", INT8_MIN, INT8_MAX)
    b.int_in(f"{prefix}_multiplier", INT32_MIN, INT32_MAX)
    b.int_in(f"{prefix}_shift", SHIFT_MIN, SHIFT_MAX)


def _broadcast(b: Bound, x: pm.Tensor, y: pm.Tensor) -> tuple[int, int]:
    """tm_binary_out_arg: out an int8 tensor, then the broadcast rule."""
    out = _tensor(b, "out")
    periods = binary_broadcast(x, y, out)
    if isinstance(periods, str):
        raise b.reject(periods, "operands and out are neither one layout nor a channel broadcast")
    return periods


def check_add(b: Bound) -> None:
    """quantized_add.c's checks, in its order."""
    x = _tensor(b, "self")
    _requant_args(b, "self")
    y = _tensor(b, "other")
    _requant_args(b, "other")
    b.int_in("output_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_multiplier", INT32_MIN, INT32_MAX)
    b.int_in("output_shift", SHIFT_MIN, SHIFT_MAX)
    act_min = b.int_in("activation_min", INT8_MIN, INT8_MAX)
    b.int_in("activation_max", act_min, INT8_MAX)
    _broadcast(b, x, y)


def check_mul(b: Bound) -> None:
    """quantized_mul.c's checks, in its order."""
    x = _tensor(b, "self")
    b.int_in("self_zero_point", INT8_MIN, INT8_MAX)
    y = _tensor(b, "other")
    b.int_in("other_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_multiplier", INT32_MIN, INT32_MAX)
    b.int_in("output_shift", SHIFT_MIN, SHIFT_MAX)
    _broadcast(b, x, y)


def _operands(b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both operands' memory, the channel vector (if any) as the fastest axis of out's NHWC
    memory: elementwise on bytes."""
    a_period, b_period = binary_broadcast(b.tensor("self"), b.tensor("other"), b.tensor("out"))  # type: ignore[misc]
    x, y = b.physical("self").reshape(-1), b.physical("other").reshape(-1)
    period = min(a_period, b_period)
    return x.reshape(-1, period), y.reshape(-1, period)


def reference_add(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out (flat)."""
    x, y = _operands(b)
    return quantized_add(x, b.self_zero_point, b.self_multiplier, b.self_shift, y,
                         b.other_zero_point, b.other_multiplier, b.other_shift,
                         b.output_zero_point, b.output_multiplier, b.output_shift,
                         b.activation_min, b.activation_max).reshape(-1)


def reference_mul(b: Any) -> np.ndarray:
    x, y = _operands(b)
    return quantized_mul(x, b.self_zero_point, y, b.other_zero_point, b.output_zero_point,
                         b.output_multiplier, b.output_shift).reshape(-1)


# -- TOSA (g: tosa Graph, a: its Bound)
def _checked(a: Any) -> tuple[int, ...]:
    a.checked()
    return a.physical_shape("out")


def _operand(g: Any, a: Any, read: Callable[[int], Any], name: str, out_shape: tuple[int, ...]) -> Any:
    """Operand `name` in the out tensor's physical shape, or as a per-channel [1,...,1,C] one."""
    x = read(a.index(name))
    if x.shape == out_shape:
        return x
    if math.prod(x.shape) == math.prod(out_shape):
        return g.reshape(x, out_shape)
    # the check passed: a channel vector of an NHWC out
    return g.reshape(x, (1,) * (len(out_shape) - 1) + (out_shape[-1],))


def _centred(g: Any, x: Any, zero_point: int, left_shift: int) -> Any:
    """int8 -> int32 (x - zero_point) * 2^left_shift, exactly (m = 2^30, shift = 30 - left_shift)."""
    return g.rescale(x, "INT32", [1 << 30], [30 - left_shift], input_zp=zero_point)


def single_rescale(zero_point: int, multiplier: int, shift: int) -> tuple[int, int] | None:
    """(m, tosa shift) whose one RESCALE of int8 x (input_zp = zero_point) equals
    requantize((x - zero_point) << 20, multiplier, shift) for every int8 x, if one exists.

    For each TOSA shift the multipliers that hit every target value form an interval
    (one linear inequality per x); shifts are tried from the natural one outwards."""
    centred = [x - zero_point for x in range(INT8_MIN, INT8_MAX + 1)]
    want = requantize(np.array(centred, dtype=np.int64) << ADD_INPUT_LEFT_SHIFT, multiplier, shift)
    natural = 31 - shift - ADD_INPUT_LEFT_SHIFT
    # TOSA requires |value| < 2^(shift - 1): x - zero_point spans up to +-255, so shift >= 9.
    for s in sorted(range(9, 63), key=lambda s: (abs(s - natural), s)):
        lo, hi = 0, (1 << 31) - 1
        for v, f in zip(centred, want.tolist()):
            rounding = (1 << (s - 1)) + ((1 << 30) if v >= 0 else -(1 << 30)) * (s > 31)
            # f * 2^s <= v * m + rounding < (f + 1) * 2^s
            a, b = f * (1 << s) - rounding, (f + 1) * (1 << s) - rounding  # a <= v*m < b
            if v > 0:
                lo, hi = max(lo, -(-a // v)), min(hi, (b - 1) // v)
            elif v < 0:  # dividing by v < 0 flips: b / v < m <= a / v
                lo, hi = max(lo, b // v + 1), min(hi, a // v)
            elif not a <= 0 < b:
                lo, hi = 1, 0
            if lo > hi:
                break
        if lo <= hi:
            m = min(max(round(multiplier * 2.0 ** (s - natural)), lo), hi)
            assert np.array_equal(tosa_double_round(np.array(centred), m, s), want)
            return m, s
    return None


def lower_tosa_add(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    out_shape = _checked(a)
    terms = []
    for name in ("self", "other"):
        x = _operand(g, a, read, name, out_shape)
        zero_point = int(a.scalar(f"{name}_zero_point"))
        multiplier, shift = int(a.scalar(f"{name}_multiplier")), int(a.scalar(f"{name}_shift"))
        one = single_rescale(zero_point, multiplier, shift)
        if one is not None:
            terms.append(g.rescale(x, "INT32", [one[0]], [one[1]], input_zp=zero_point))
            continue
        wide = _centred(g, x, zero_point, ADD_INPUT_LEFT_SHIFT)
        terms.append(g.rescale(wide, "INT32", [multiplier], [31 - shift]))
    total = g.add(*terms)
    return g.requantize(
        total, [a.output_multiplier], [a.output_shift], a.output_zero_point,
        a.activation_min, a.activation_max,
    )


def lower_tosa_mul(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    out_shape = _checked(a)
    terms = [
        _centred(g, _operand(g, a, read, name, out_shape), int(a.scalar(f"{name}_zero_point")), 0)
        for name in ("self", "other")
    ]
    return g.requantize(g.mul(*terms), [a.output_multiplier], [a.output_shift], a.output_zero_point)


# The bodies of their docs/operators.md sections (hand-kept until step 8 generates them)
ADD_CONTRACT = """\
- Zero points as is (not negated). Multipliers int32 (may be negative: subtraction folds in
  as a negated `other_multiplier`). Shifts in [-31, 31].
- ExecuTorch's parameters: `twice_max = 2*max(s1, s2)`;
  `(self_multiplier, self_shift) = qm(s1/twice_max)`, same for other;
  `(output_multiplier, output_shift) = qm(twice_max / (s_out * 2^20))`.
- `a' = requantize((a - self_zero_point) * 2^20, self_multiplier, self_shift)`, likewise `b'`;
  `out = clamp(requantize(a' + b', output_multiplier, output_shift) + output_zero_point, activation_min, activation_max)`.
- Shapes (see *Broadcast* below)."""
MUL_CONTRACT = """\
- `out = clamp(requantize((a - self_zero_point) * (b - other_zero_point), output_multiplier, output_shift) + output_zero_point, -128, 127)`,
  `(output_multiplier, output_shift) = qm(s1 * s2 / s_out)`."""
BROADCAST = """\
**Broadcast (add, mul).** All int8. Either (a) `self`, `other`, `out` have equal sizes and
memory-equivalent layouts (elementwise over memory, any rank); or (b) channel broadcast: all
three are 4-D with NHWC bytes (legacy sizes), one operand is full-size `[N,C,H,W]` (its sizes
equal `out`'s) and the other has `sizes[1] == C` and `numel == C` (e.g. `[1,C,1,1]`); the small
operand's value for channel c is used at every position of channel c."""

QUANTIZED_ADD = op(
    "cortex_m::quantized_add.out(Tensor self, int self_zero_point, int self_multiplier,"
    " int self_shift, Tensor other, int other_zero_point, int other_multiplier, int other_shift,"
    " int output_zero_point, int output_multiplier, int output_shift, int activation_min,"
    " int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference_add,
    check=check_add,
    npu=Npu(lower=lower_tosa_add, doc="TOSA RESCALE, ADD (int32), RESCALE"),
    contract=ADD_CONTRACT,
)

QUANTIZED_MUL = op(
    "cortex_m::quantized_mul.out(Tensor self, int self_zero_point, Tensor other,"
    " int other_zero_point, int output_zero_point, int output_multiplier, int output_shift, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference_mul,
    check=check_mul,
    npu=Npu(lower=lower_tosa_mul, doc="TOSA RESCALE, MUL (int32), RESCALE"),
    contract=MUL_CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def _binary_operands(k: Any, node: Any) -> tuple[Any, Any, list[int], bool]:
    """Both operands in one common layout -> (a, c, output sizes, output is NHWC)."""
    a, c = k.input_value(k.aten_arg(node, "self")), k.input_value(k.aten_arg(node, "other"))
    out_shape = k.shape_of(node)
    if a.sizes == c.sizes == out_shape:
        if a.rank == 4 and (a.nhwc or c.nhwc):
            return k.as_nhwc(a), k.as_nhwc(c), out_shape, True
        return k.as_contiguous(a), k.as_contiguous(c), out_shape, False
    if len(out_shape) == 4:
        small = c if c.sizes != out_shape else a
        big = a if small is c else c
        if big.sizes == out_shape and small.rank == 4 and small.sizes[1] == out_shape[1] and \
                math.prod(small.sizes) == out_shape[1]:
            return k.as_nhwc(a), k.as_nhwc(c), out_shape, True
    raise k.unsupported(node, f"broadcasting {a.sizes} with {c.sizes} (only equal shapes or a "
                        "per-channel [1,C,1,1] operand)")


def lower_add(k: Any, node: Any) -> None:
    alpha = k.aten_arg(node, "alpha", 1)
    if alpha != 1:
        raise k.unsupported(node, f"alpha={alpha}")
    a, c, out_shape, nhwc = _binary_operands(k, node)
    qs, act, qp = k.output_quant(node, allow_activation=True)
    act_min, act_max = k.activation_range(act, qp)
    s1, s2 = float(a.scale), float(c.scale)
    twice_max = 2.0 * max(s1, s2)
    # Operand rescales with shift 0 round once instead of twice, so each is one TOSA
    # RESCALE that Vela can fold into the NPU's add (docs/operators.md).
    m1, sh1 = single_rounding_multiplier(s1 / twice_max)
    m2, sh2 = single_rounding_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / (qp.scale * (1 << ADD_INPUT_LEFT_SHIFT)))
    out = k.new_int8(node.name, out_shape, qp, nhwc=nhwc)
    k.call(
        QUANTIZED_ADD,
        node,
        self=a.vi,
        self_zero_point=k.int_(a.zero_point),
        self_multiplier=k.int_(m1),
        self_shift=k.int_(sh1),
        other=c.vi,
        other_zero_point=k.int_(c.zero_point),
        other_multiplier=k.int_(m2),
        other_shift=k.int_(sh2),
        output_zero_point=k.int_(qp.zero_point),
        output_multiplier=k.int_(mo),
        output_shift=k.int_(sho),
        activation_min=k.int_(act_min),
        activation_max=k.int_(act_max),
        out=out.vi,
    )
    k.bind_output(qs, act, out)


def lower_mul(k: Any, node: Any) -> None:
    a, c, out_shape, nhwc = _binary_operands(k, node)
    qs, act, qp = k.output_quant(node, allow_activation=False)
    mo, sho = single_rounding_multiplier(float(a.scale) * float(c.scale) / qp.scale)
    out = k.new_int8(node.name, out_shape, qp, nhwc=nhwc)
    k.call(
        QUANTIZED_MUL,
        node,
        self=a.vi,
        self_zero_point=k.int_(a.zero_point),
        other=c.vi,
        other_zero_point=k.int_(c.zero_point),
        output_zero_point=k.int_(qp.zero_point),
        output_multiplier=k.int_(mo),
        output_shift=k.int_(sho),
        out=out.vi,
    )
    k.bind_output(qs, act, out)


pattern("aten::add.Tensor", "aten::add_.Tensor", annotate=Annotate("binary", {"kind": "add"}),
        lower=lower_add, emits=(QUANTIZED_ADD,))
pattern("aten::mul.Tensor", "aten::mul_.Tensor", annotate=Annotate("binary", {"kind": "mul"}),
        lower=lower_mul, emits=(QUANTIZED_MUL,))
