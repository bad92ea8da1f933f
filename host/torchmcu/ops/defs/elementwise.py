"""cortex_m::quantized_add / quantized_mul: int8 elementwise with broadcasting.

Defined here once: the argument checks (the rules firmware/kernels/cortex_m/quantized_add.c
and quantized_mul.c enforce, naming the same argument), the references, the TOSA lowerings,
the contracts, and the aten rules that emit them, which get the lowering Kit
(torchmcu/lower/kit.py) as `k`: add, sub (alpha and sign in the operand multipliers), rsub
(`1 - x`), mul, div by a number (`x / 6`: x times an exact int8 constant 1/6), neg (x * -1),
each with tensors or a Python number, and abs (a quantized_activation table).

On the NPU each is RESCALE to int32, ADD/MUL (int32 only in TOSA 1.0), RESCALE back.
quantized_add follows CMSIS-NN: each operand's requantize((x - zp) << 20, m, shift), the sum,
and the sum's requantization to int8. An int8 operand has only 256 values, so the operand step
is one RESCALE (int8 -> int32) when some (multiplier, shift) reproduces it for all 256 of them
(checked here, exhaustively); otherwise it is two RESCALEs, the exact << 20 and the operand's
own DOUBLE_ROUND requantization, which is CMSIS-NN's by identity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, Npu, op, pattern
from torchmcu.ops.defs.activation_table import QUANTIZED_ACTIVATION, activation_lut
from torchmcu.ops.intmath import (
    INT8_MAX,
    INT8_MIN,
    INT16_MAX,
    INT16_MIN,
    INT32_MAX,
    INT32_MIN,
    check_activation,
    check_int,
    quantize_multiplier,
    requantize,
    single_rounding_multiplier,
    tosa_double_round,
)
from torchmcu.ops.layout import GENERAL, binary_broadcast, broadcast_physical
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)
ADD_INPUT_LEFT_SHIFT = 20  # CMSIS-NN's headroom shift for int8 add
ADD16_INPUT_LEFT_SHIFT = 15  # and for int16 (arm_elementwise_add_s16)
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
    return _add(self, self_zero_point, self_multiplier, self_shift, other, other_zero_point,
                other_multiplier, other_shift, output_zero_point, output_multiplier,
                output_shift, activation_min, activation_max, ADD_INPUT_LEFT_SHIFT).astype(np.int8)


def _add(a: np.ndarray, a_zp: int, a_mult: int, a_shift: int, b: np.ndarray, b_zp: int,
         b_mult: int, b_shift: int, out_zp: int, out_mult: int, out_shift: int, lo: int, hi: int,
         left_shift: int) -> np.ndarray:
    """The add both kernels share: (x - zp) << left_shift, each operand's requantization,
    the sum's, the zero point, the clamp (int64 out)."""
    x = requantize((np.asarray(a, dtype=np.int64) - a_zp) << left_shift, a_mult, a_shift)
    y = requantize((np.asarray(b, dtype=np.int64) - b_zp) << left_shift, b_mult, b_shift)
    return np.clip(requantize(x + y, out_mult, out_shift) + out_zp, lo, hi)


def quantized_add16(
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
    """The residual stream's add: each operand int8 (any zero point) or int16 (zero point 0),
    int16 out (zero point 0); quantized_add's steps with CMSIS-NN's s16 headroom, 2^15."""
    for name, x, zp in (("self", self, self_zero_point), ("other", other, other_zero_point)):
        lo, hi = (0, 0) if np.asarray(x).dtype == np.int16 else (INT8_MIN, INT8_MAX)
        check_int(f"{name}_zero_point", zp, lo, hi)
    check_int("output_zero_point", output_zero_point, 0, 0)
    check_int("activation_min", activation_min, INT16_MIN, INT16_MAX)
    check_int("activation_max", activation_max, activation_min, INT16_MAX)
    return _add(self, self_zero_point, self_multiplier, self_shift, other, other_zero_point,
                other_multiplier, other_shift, output_zero_point, output_multiplier,
                output_shift, activation_min, activation_max, ADD16_INPUT_LEFT_SHIFT
                ).astype(np.int16)


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
def tensor_operand(b: Bound, name: str) -> pm.Tensor:
    t = b.value(name)
    if not (isinstance(t, pm.Tensor) and t.scalar_type == pm.ScalarType.CHAR and len(t.sizes) <= MAX_DIMS):
        raise b.reject(name, "expected an int8 tensor of rank 0..6")
    return t


def _requant_args(b: Bound, prefix: str, zp_range: tuple[int, int] = (INT8_MIN, INT8_MAX)) -> None:
    b.int_in(f"{prefix}_zero_point", *zp_range)
    b.int_in(f"{prefix}_multiplier", INT32_MIN, INT32_MAX)
    b.int_in(f"{prefix}_shift", SHIFT_MIN, SHIFT_MAX)


def operands_tensor(b: Bound, x: pm.Tensor, y: pm.Tensor, out_int16: bool = False) -> tuple[int, int]:
    """tm_binary_out_arg: out an int8 (int16) tensor, then the broadcast rule."""
    out = tensor16_operand(b, "out", int8=False) if out_int16 else tensor_operand(b, "out")
    periods = binary_broadcast(x, y, out)
    if isinstance(periods, str):
        raise b.reject(periods, "operands and out are neither one layout nor a broadcast")
    return periods


def check_add(b: Bound) -> None:
    """quantized_add.c's checks, in its order."""
    x = tensor_operand(b, "self")
    _requant_args(b, "self")
    y = tensor_operand(b, "other")
    _requant_args(b, "other")
    b.int_in("output_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_multiplier", INT32_MIN, INT32_MAX)
    b.int_in("output_shift", SHIFT_MIN, SHIFT_MAX)
    act_min = b.int_in("activation_min", INT8_MIN, INT8_MAX)
    b.int_in("activation_max", act_min, INT8_MAX)
    operands_tensor(b, x, y)


def tensor16_operand(b: Bound, name: str, int8: bool = True) -> pm.Tensor:
    """An int16 (or, with int8, int8) tensor of rank 0..6."""
    t = b.value(name)
    types = (pm.ScalarType.SHORT, pm.ScalarType.CHAR) if int8 else (pm.ScalarType.SHORT,)
    if not (isinstance(t, pm.Tensor) and t.scalar_type in types and len(t.sizes) <= MAX_DIMS):
        what = "an int8 or int16" if int8 else "an int16"
        raise b.reject(name, f"expected {what} tensor of rank 0..6")
    return t


def check_add16(b: Bound) -> None:
    """quantized_add16.c's checks, in its order."""
    operands = []
    for name in ("self", "other"):
        t = tensor16_operand(b, name)
        operands.append(t)
        _requant_args(b, name, (0, 0) if t.scalar_type == pm.ScalarType.SHORT else (INT8_MIN, INT8_MAX))
    b.int_in("output_zero_point", 0, 0)
    b.int_in("output_multiplier", INT32_MIN, INT32_MAX)
    b.int_in("output_shift", SHIFT_MIN, SHIFT_MAX)
    act_min = b.int_in("activation_min", INT16_MIN, INT16_MAX)
    b.int_in("activation_max", act_min, INT16_MAX)
    operands_tensor(b, operands[0], operands[1], out_int16=True)


def check_mul(b: Bound) -> None:
    """quantized_mul.c's checks, in its order."""
    x = tensor_operand(b, "self")
    b.int_in("self_zero_point", INT8_MIN, INT8_MAX)
    y = tensor_operand(b, "other")
    b.int_in("other_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_multiplier", INT32_MIN, INT32_MAX)
    b.int_in("output_shift", SHIFT_MIN, SHIFT_MAX)
    operands_tensor(b, x, y)


def physical_operands(b: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both operands' memory, the channel vector (if any) as the fastest axis of out's NHWC
    memory, a general broadcast's operands broadcast to out's memory: elementwise on bytes."""
    ta, tb, out = b.tensor("self"), b.tensor("other"), b.tensor("out")
    a_period, b_period = binary_broadcast(ta, tb, out)  # type: ignore[misc]
    x, y = b.physical("self").reshape(-1), b.physical("other").reshape(-1)
    if (a_period, b_period) == GENERAL:
        return broadcast_physical(x, ta, out)[None], broadcast_physical(y, tb, out)[None]
    period = min(a_period, b_period)
    return x.reshape(-1, period), y.reshape(-1, period)


def reference_add(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out (flat)."""
    x, y = physical_operands(b)
    return quantized_add(x, b.self_zero_point, b.self_multiplier, b.self_shift, y,
                         b.other_zero_point, b.other_multiplier, b.other_shift,
                         b.output_zero_point, b.output_multiplier, b.output_shift,
                         b.activation_min, b.activation_max).reshape(-1)


def reference_add16(b: Any) -> np.ndarray:
    x, y = physical_operands(b)
    return quantized_add16(x, b.self_zero_point, b.self_multiplier, b.self_shift, y,
                           b.other_zero_point, b.other_multiplier, b.other_shift,
                           b.output_zero_point, b.output_multiplier, b.output_shift,
                           b.activation_min, b.activation_max).reshape(-1)


def reference_mul(b: Any) -> np.ndarray:
    x, y = physical_operands(b)
    return quantized_mul(x, b.self_zero_point, y, b.other_zero_point, b.output_zero_point,
                         b.output_multiplier, b.output_shift).reshape(-1)


# -- TOSA (g: tosa Graph, a: its Bound)
def _checked(a: Any) -> tuple[int, ...]:
    a.checked()
    return a.physical_shape("out")


def tosa_operand(g: Any, a: Any, read: Callable[[int], Any], name: str, out_shape: tuple[int, ...]) -> Any:
    """Operand `name` (an arena tensor or a constant) in the out tensor's physical shape, or
    of its rank with 1 where it is broadcast (a single element, a per-channel [1,...,1,C],
    the general broadcast's sizes in out's dim order): TOSA broadcasts equal ranks."""
    data = a.data(name)
    x = g.const(data, "INT8") if data is not None else read(a.index(name))
    if x.shape == out_shape:
        return x
    if math.prod(x.shape) == math.prod(out_shape):
        return g.reshape(x, out_shape)
    if math.prod(x.shape) == 1:  # a single element, broadcast by TOSA
        return g.reshape(x, (1,) * len(out_shape))
    # the check passed: a channel vector of an NHWC out, or the general broadcast
    t, out = a.tensor(name), a.tensor("out")
    return g.reshape(x, tuple(int(t.sizes[d]) for d in out.dim_order))


def centred_operand(g: Any, x: Any, zero_point: int, left_shift: int) -> Any:
    """int8 -> int32 (x - zero_point) * 2^left_shift, exactly (m = 2^30, shift = 30 - left_shift)."""
    return g.rescale(x, "INT32", [1 << 30], [30 - left_shift], input_zp=zero_point)


def single_rescale(zero_point: int, multiplier: int, shift: int) -> tuple[int, int] | None:
    """(m, tosa shift) whose one RESCALE of int8 x (input_zp = zero_point) equals
    requantize((x - zero_point) << 20, multiplier, shift) for every int8 x, if one exists;
    for a negative multiplier (a subtracted operand) it equals minus that, so the term is
    subtracted (TOSA's RESCALE multipliers are non-negative).

    For each TOSA shift the multipliers that hit every target value form an interval
    (one linear inequality per x); shifts are tried from the natural one outwards."""
    centred = [x - zero_point for x in range(INT8_MIN, INT8_MAX + 1)]
    want = requantize(np.array(centred, dtype=np.int64) << ADD_INPUT_LEFT_SHIFT, multiplier, shift)
    if multiplier < 0:
        want = -want
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
            m = min(max(round(abs(multiplier) * 2.0 ** (s - natural)), lo), hi)
            assert np.array_equal(tosa_double_round(np.array(centred), m, s), want)
            return m, s
    return None


def npu_support_add(b: Bound, family: str) -> str | None:
    for name in ("self", "other"):
        if b.scalar(f"{name}_multiplier") == INT32_MIN:
            return f"{name}_multiplier -2^31: TOSA RESCALE multipliers are below 2^31 in magnitude"
    return None


def _add_term(g: Any, a: Any, read: Callable[[int], Any], name: str, out_shape: tuple[int, ...]) -> tuple[Any, bool]:
    """(int32 term, subtract it): operand `name`'s requantize((x - zp) << 20, m, shift).

    One RESCALE where one reproduces it (for m < 0 it gives minus the term, to subtract);
    otherwise the exact << 20 RESCALE, for m < 0 negated (requantize(v, -m) is
    requantize(-v, m): the same product), and the operand's own DOUBLE_ROUND RESCALE."""
    x = tosa_operand(g, a, read, name, out_shape)
    zero_point = int(a.scalar(f"{name}_zero_point"))
    multiplier, shift = int(a.scalar(f"{name}_multiplier")), int(a.scalar(f"{name}_shift"))
    one = single_rescale(zero_point, multiplier, shift)
    if one is not None:
        return g.rescale(x, "INT32", [one[0]], [one[1]], input_zp=zero_point), multiplier < 0
    wide = centred_operand(g, x, zero_point, ADD_INPUT_LEFT_SHIFT)
    if multiplier < 0:
        wide = g.sub(g.scalar_tensor(0, "INT32", len(out_shape)), wide)
    return g.rescale(wide, "INT32", [abs(multiplier)], [31 - shift]), False


def lower_tosa_add(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    out_shape = _checked(a)
    if (reason := npu_support_add(a, "")) is not None:
        raise a.error(reason)
    (x, sub_x), (y, sub_y) = (_add_term(g, a, read, name, out_shape) for name in ("self", "other"))
    if sub_x and sub_y:
        total = g.sub(g.scalar_tensor(0, "INT32", len(out_shape)), g.add(x, y))
    elif sub_x or sub_y:
        total = g.sub(y, x) if sub_x else g.sub(x, y)
    else:
        total = g.add(x, y)
    return g.requantize(
        total, [a.output_multiplier], [a.output_shift], a.output_zero_point,
        a.activation_min, a.activation_max,
    )


def lower_tosa_mul(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    out_shape = _checked(a)
    terms = [
        centred_operand(g, tosa_operand(g, a, read, name, out_shape), int(a.scalar(f"{name}_zero_point")), 0)
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
**Broadcast (add, mul, maximum, minimum).** All int8. Either (a) `self`, `other`, `out` have
equal sizes and memory-equivalent layouts (elementwise over memory, any rank); or (s) one
operand has a single element (any rank; the exporter's form of a Python number such as
`x * 0.5`, `x + 1`, `x / 6`: +-127 at scale |c|/127, exactly c) and the other out's sizes and
layout; or (b) channel broadcast: all
three are 4-D with NHWC bytes (legacy sizes), one operand is full-size `[N,C,H,W]` (its sizes
equal `out`'s) and the other has `sizes[1] == C` and `numel == C` (e.g. `[1,C,1,1]`); the small
operand's value for channel c is used at every position of channel c; or (g) the general
broadcast: `self`, `other` and `out` of one rank (1..6), each operand's size along every dim
`out`'s or 1, `out`'s size one of theirs, and each operand's bytes in `out`'s dim order (dims
of size 1 free), e.g. `[N,C,H,W] + [N,1,H,W]`, `[N,C,H,W] * [N,C,H,1]`, `[N,C,1,W] + [N,1,H,1]`
(NHWC) or `[B,T,C] * [B,T,1]`; numpy broadcasting of the operands in that order. The exporter
gives a lower-rank operand leading 1s (a view). Kernels: out's memory as nested loops (size-1
dims dropped, neighbours merged), the vector row loop on the innermost; an operand broadcast
along it is one value repeated into a 64-byte row. On the NPU the operands are reshaped to
out's rank (TOSA ADD/MUL/MAXIMUM broadcast size-1 dims)."""

QUANTIZED_ADD = op(
    "cortex_m::quantized_add.out(Tensor self, int self_zero_point, int self_multiplier,"
    " int self_shift, Tensor other, int other_zero_point, int other_multiplier, int other_shift,"
    " int output_zero_point, int output_multiplier, int output_shift, int activation_min,"
    " int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference_add,
    check=check_add,
    npu=Npu(lower=lower_tosa_add, support=npu_support_add,
            doc="TOSA RESCALE, ADD or SUB (int32), RESCALE"),
    contract=ADD_CONTRACT.replace("- Shapes (see *Broadcast* below).", "- " + BROADCAST.replace("\n", "\n  ")),
)

ADD16_CONTRACT = """\
The residual stream's add (a transformer's, symmetric int16; the quantizer's residual_stream).
- `self`, `other` each int8 (zero point in [-128, 127]) or int16 (zero point 0); `out` int16,
  `output_zero_point` 0, `activation_min <= activation_max` in [-32768, 32767]. Multipliers
  int32, shifts in [-31, 31], as quantized_add's.
- quantized_add's steps with CMSIS-NN's int16 headroom 2^15 instead of 2^20:
  `a' = requantize((a - self_zero_point) * 2^15, self_multiplier, self_shift)`, likewise `b'`;
  `out = clamp(requantize(a' + b', output_multiplier, output_shift), activation_min, activation_max)`;
  the lowering's `(output_multiplier, output_shift) = qm(twice_max / (s_out * 2^15))`.
- Shapes: quantized_add's rule (*Broadcast* below), on elements of either size."""

QUANTIZED_ADD16 = op(
    "torchmcu::quantized_add16.out(Tensor self, int self_zero_point, int self_multiplier,"
    " int self_shift, Tensor other, int other_zero_point, int other_multiplier, int other_shift,"
    " int output_zero_point, int output_multiplier, int output_shift, int activation_min,"
    " int activation_max, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference_add16,
    check=check_add16,
    no_npu="no TOSA lowering yet (int16 stays on the CPU)",
    contract=ADD16_CONTRACT,
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
@dataclass(frozen=True)
class _Operand:
    """What the rules read of an int8 operand: its value index and qparams."""

    vi: int
    scale: float
    zero_point: int


def scalar_operand(value: float) -> tuple[int, float]:
    """(q, scale) of a Python number as a one-element int8 constant with zero point 0: +-127
    at scale |value|/127, so q * scale is the number exactly (0 is q = 0, scale 1) and the
    multipliers of the op absorb it."""
    if value == 0:
        return 0, 1.0
    return (127 if value > 0 else -127), abs(float(value)) / 127.0


def _scalar(k: Any, value: object, node: Any) -> _Operand:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise k.unsupported(node, f"a scalar operand {value!r} (a finite number)")
    q, scale = scalar_operand(float(value))
    return _Operand(k.constant(np.array([q], dtype=np.int8)), scale, 0)


def binary_operands(k: Any, node: Any) -> tuple[Any, Any, list[int], bool]:
    """Both operands in one common layout -> (a, c, output sizes, output is NHWC). A Python
    number becomes a one-element int8 constant (scalar_operand), broadcast to every element."""
    raw_a, raw_c = k.aten_arg(node, "self"), k.aten_arg(node, "other")
    out_shape = k.shape_of(node)
    if not k.is_node(raw_a) or not k.is_node(raw_c):
        t = k.input_value(raw_a if k.is_node(raw_a) else raw_c)
        if t.sizes != out_shape:
            raise k.unsupported(node, f"a tensor-scalar op whose output {out_shape} is not its "
                                f"tensor's {t.sizes}")
        a = t if k.is_node(raw_a) else _scalar(k, raw_a, node)
        c = t if k.is_node(raw_c) else _scalar(k, raw_c, node)
        return a, c, out_shape, t.nhwc
    a, c = k.input_value(raw_a), k.input_value(raw_c)
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
    rank = len(out_shape)
    ranked = [[1] * (rank - v.rank) + list(v.sizes) for v in (a, c)]
    if rank > MAX_DIMS or min(a.rank, c.rank) < 1 or \
            any(s not in (1, o) for sizes in ranked for s, o in zip(sizes, out_shape)):
        raise k.unsupported(node, f"broadcasting {a.sizes} with {c.sizes} to {out_shape} (rank "
                            f"at most {MAX_DIMS}, each size the output's or 1)")
    # the general broadcast: both operands of out's rank, in out's memory order
    a, c = (v if v.rank == rank else k.alias(k.as_contiguous(v), sizes, nhwc=False)
            for v, sizes in zip((a, c), ranked))
    if rank == 4 and (a.nhwc or c.nhwc):
        return k.as_nhwc(a), k.as_nhwc(c), out_shape, True
    return k.as_contiguous(a), k.as_contiguous(c), out_shape, False


def _add_like(k: Any, node: Any, self_sign: float, other_sign: float) -> None:
    """out = self_sign * self + other_sign * other as one quantized_add: a sign (or sub's
    alpha) goes into the operand's scale, a negative one into its multiplier's sign."""
    a, c, out_shape, nhwc = binary_operands(k, node)
    qs, act, qp = k.output_quant(node, allow_activation=True)
    act_min, act_max = k.activation_range(act, qp)
    s1, s2 = float(a.scale) * abs(self_sign), float(c.scale) * abs(other_sign)
    twice_max = 2.0 * max(s1, s2)
    # Operand rescales with shift 0 round once instead of twice, so each is one TOSA
    # RESCALE that Vela can fold into the NPU's add (docs/operators.md).
    m1, sh1 = single_rounding_multiplier(s1 / twice_max)
    m2, sh2 = single_rounding_multiplier(s2 / twice_max)
    wide = qp.int16  # the residual stream: int16 out, int8 or int16 operands
    shift = ADD16_INPUT_LEFT_SHIFT if wide else ADD_INPUT_LEFT_SHIFT
    mo, sho = quantize_multiplier(twice_max / (qp.scale * (1 << shift)))
    out = (k.new_int16 if wide else k.new_int8)(node.name, out_shape, qp, nhwc=nhwc)
    k.call(
        QUANTIZED_ADD16 if wide else QUANTIZED_ADD,
        node,
        self=a.vi,
        self_zero_point=k.int_(a.zero_point),
        self_multiplier=k.int_(-m1 if self_sign < 0 else m1),
        self_shift=k.int_(sh1),
        other=c.vi,
        other_zero_point=k.int_(c.zero_point),
        other_multiplier=k.int_(-m2 if other_sign < 0 else m2),
        other_shift=k.int_(sh2),
        output_zero_point=k.int_(qp.zero_point),
        output_multiplier=k.int_(mo),
        output_shift=k.int_(sho),
        activation_min=k.int_(act_min),
        activation_max=k.int_(act_max),
        out=out.vi,
    )
    k.bind_output(qs, act, out)


def _alpha(k: Any, node: Any) -> float:
    alpha = k.aten_arg(node, "alpha", 1)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or alpha == 0:
        raise k.unsupported(node, f"alpha={alpha}")
    return float(alpha)


def lower_add(k: Any, node: Any) -> None:
    alpha = k.aten_arg(node, "alpha", 1)
    if alpha != 1:
        raise k.unsupported(node, f"alpha={alpha}")
    _add_like(k, node, 1.0, 1.0)


def lower_sub(k: Any, node: Any) -> None:
    """self - alpha * other."""
    _add_like(k, node, 1.0, -_alpha(k, node))


def lower_rsub(k: Any, node: Any) -> None:
    """aten::rsub.Scalar (`1 - x`): other - alpha * self."""
    _add_like(k, node, -_alpha(k, node), 1.0)


def _mul_like(k: Any, node: Any, constant: float | None = None) -> None:
    """self * other, or self * `constant` (div by a number, neg) as one quantized_mul."""
    if constant is None:
        a, c, out_shape, nhwc = binary_operands(k, node)
    else:
        a, out_shape = k.input_value(k.aten_arg(node, "self")), k.shape_of(node)
        if a.sizes != out_shape:
            raise k.unsupported(node, f"its output {out_shape} is not its input's {a.sizes}")
        c, nhwc = _scalar(k, constant, node), a.nhwc
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


def lower_mul(k: Any, node: Any) -> None:
    _mul_like(k, node)


def lower_div(k: Any, node: Any) -> None:
    """x / c for a number c: x * (1/c), the reciprocal an exact int8 constant's scale."""
    divisor = k.aten_arg(node, "other")
    if k.is_node(divisor):
        raise k.unsupported(node, "a division by a tensor (only by a number: x / 6)")
    if isinstance(divisor, bool) or not isinstance(divisor, (int, float)) or divisor == 0:
        raise k.unsupported(node, f"a division by {divisor!r}")
    _mul_like(k, node, 1.0 / float(divisor))


def lower_neg(k: Any, node: Any) -> None:
    """-x: x * -1."""
    _mul_like(k, node, -1.0)


def lower_abs(k: Any, node: Any) -> None:
    """|x| as a 256-entry table (cortex_m::quantized_activation) for the node's qparams."""
    x = k.input_value(k.aten_arg(node, "self"))
    qs, act, qp = k.output_quant(node, allow_activation=False)
    lut = activation_lut(abs, float(x.scale), int(x.zero_point), qp.scale, qp.zero_point)
    out = k.new_int8(node.name, x.sizes, qp, nhwc=x.nhwc)
    k.call(QUANTIZED_ACTIVATION, node, input=x.vi, lut=k.constant(lut), out=out.vi)
    k.bind_output(qs, act, out)


pattern("aten::add.Tensor", "aten::add_.Tensor", annotate=Annotate("binary", {"kind": "add"}),
        lower=lower_add, emits=(QUANTIZED_ADD, QUANTIZED_ADD16))
pattern("aten::sub.Tensor", "aten::sub_.Tensor", annotate=Annotate("binary", {"kind": "sub"}),
        lower=lower_sub, emits=(QUANTIZED_ADD,))
pattern("aten::rsub.Scalar", annotate=Annotate("binary", {"kind": "rsub"}),
        lower=lower_rsub, emits=(QUANTIZED_ADD,))
pattern("aten::mul.Tensor", "aten::mul_.Tensor", annotate=Annotate("binary", {"kind": "mul"}),
        lower=lower_mul, emits=(QUANTIZED_MUL,))
pattern("aten::div.Tensor", "aten::div_.Tensor",
        annotate=Annotate("binary", {"kind": "div"}), lower=lower_div, emits=(QUANTIZED_MUL,))
# neg and abs: observed input and output (the "binary" annotation of one tensor operand)
pattern("aten::neg.default", "aten::neg_.default", annotate=Annotate("binary", {"kind": "neg"}),
        lower=lower_neg, emits=(QUANTIZED_MUL,))
pattern("aten::abs.default", "aten::abs_.default", annotate=Annotate("binary", {"kind": "abs"}),
        lower=lower_abs, emits=(QUANTIZED_ACTIVATION,))
