"""cortex_m::softmax: int8 softmax along the last dimension (CMSIS-NN arm_softmax_s8).

Defined here once: the argument check (the rules firmware/kernels/cortex_m/softmax.c enforces,
naming the same argument), the reference, the contract, and the aten rules that emit it
(aten::softmax.int, aten::_softmax.default), which get the lowering Kit
(torchmcu/lower/kit.py) as `k`. No TOSA lowering: the NPU has no exact int8 softmax.

The reference is CMSIS-NN's fixed-point algorithm (gemmlowp's): exponentials of the
non-positive differences to the row maximum in Q0.31 from a Q5.26 argument, summed in
Q12.19, one reciprocal by Newton-Raphson, outputs in units of 1/256 offset by -128.
Constants are Q0.31 values of exp(-2^k / 4) etc.; see the comments.
"""


from __future__ import annotations

import math
from typing import Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, Kernel, op, pattern
from torchmcu.ops.intmath import (
    INT8_MAX,
    INT8_MIN,
    INT32_MAX,
    INT32_MIN,
    quantize_multiplier,
    rounding_divide_by_pow2,
    saturate_int32,
    saturating_left_shift,
    wrap_int32,
)
from torchmcu.ops.intmath import check_int as _check_int
from torchmcu.ops.intmath import (
    sat_rounding_doubling_high_mul as srdhm,
)
from torchmcu.ops.layout import laid_out_as, same_layout
from torchmcu.pte import program as pm

ACCUM_BITS = 12  # the exponentials are summed in Q12.19
INPUT_INTEGER_BITS = 5  # the scaled differences are Q5.26
MAX_ROW_SIZE = 1 << (31 - 19)  # 4096 rows of exp(0) fill the Q12.19 sum


def _q31(x: float) -> int:
    return round(x * (1 << 31))


# exp(-1/4 * 2^k) in Q0.31 for k = 0..6 (exp(-1/4), exp(-1/2), ..., exp(-16)).
_EXP_BARREL = (1672461947, 1302514674, 790015084, 290630308, 39332535, 720401, 242)
_EXP_MINUS_EIGHTH = 1895147668  # exp(-1/8) in Q0.31
_ONE_THIRD = 715827883  # 1/3 in Q0.31
_NR_48_17 = 1515870810  # 48/17 in Q2.29
_NR_MINUS_32_17 = -1010580540  # -32/17 in Q2.29


def exp_on_negative_values(a: np.ndarray) -> np.ndarray:
    """exp(a) for a <= 0 given in Q5.26, result in Q0.31 (exp(0) saturates to INT32_MAX)."""
    a = np.asarray(a, dtype=np.int64)
    quarter = 1 << 24  # 1/4 in Q5.26
    a_mod_minus_quarter = (a & (quarter - 1)) - quarter  # in [-1/4, 0)
    remainder = a_mod_minus_quarter - a  # the multiple of 1/4 still to apply
    # Taylor series of exp around -1/8 on x = a_mod_minus_quarter + 1/8 (rescaled to Q0.31).
    x = (a_mod_minus_quarter << 5) + (1 << 28)
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rounding_divide_by_pow2(x4, 2)
    poly = rounding_divide_by_pow2(srdhm(x4_over_4 + x3, _ONE_THIRD) + x2, 1)
    result = _EXP_MINUS_EIGHTH + srdhm(_EXP_MINUS_EIGHTH, x + poly)
    for k, factor in enumerate(_EXP_BARREL):
        apply = (remainder & (1 << (24 + k))) != 0
        result = np.where(apply, srdhm(result, factor), result)
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """1 / (1 + x) for x in [0, 1) given in Q0.31; result in Q0.31 (Newton-Raphson, 3 steps)."""
    a = np.asarray(a, dtype=np.int64)
    total = a + INT32_MAX
    half_denominator = np.where(total >= 0, (total + 1) // 2, -((-total + 1) // 2))  # rounds away
    x = _NR_48_17 + srdhm(half_denominator, _NR_MINUS_32_17)
    one_q29 = 1 << 29
    for _ in range(3):
        x = x + saturating_left_shift(srdhm(x, one_q29 - srdhm(half_denominator, x)), 2)
        x = saturate_int32(x)
    return saturating_left_shift(x, 1)


def _clz32(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.int64)
    bits = np.zeros_like(v)
    for shift in range(32):
        bits = np.where((v >> shift) & 1 == 1, shift + 1, bits)
    return 32 - bits


def softmax(
    input: np.ndarray,
    dim: int,
    input_zero_point: int,
    output_zero_point: int,
    input_multiplier: int,
    input_shift: int,
    diff_min: int,
    mask: np.ndarray | None = None,
) -> np.ndarray:
    """int8 softmax along `dim` (which must be the array's last axis), int8 output with scale
    1/256, zp -128. `mask` (bool, broadcast to the input) leaves out the elements where it is
    true: they take no part in the row's maximum or sum and give -128, as does every element
    of a row the mask leaves out entirely."""
    x = np.asarray(input)
    if x.dtype != np.int8:
        raise ValueError(f"softmax input must be int8, got {x.dtype}")
    if x.ndim == 0:
        raise ValueError("softmax input must have rank >= 1")
    if dim < -x.ndim or dim >= x.ndim or dim % x.ndim != x.ndim - 1:
        raise ValueError(f"softmax dim {dim} is not the last dimension of a rank-{x.ndim} tensor")
    _check_int("input_zero_point", input_zero_point, -128, 127)
    if output_zero_point != -128:
        raise ValueError(f"softmax output_zero_point must be -128, got {output_zero_point}")
    _check_int("input_multiplier", input_multiplier, 1, INT32_MAX)
    _check_int("input_shift", input_shift, 0, 31)
    _check_int("diff_min", diff_min, INT32_MIN, 0)
    if x.shape[-1] > MAX_ROW_SIZE or x.shape[-1] < 1:
        raise ValueError(f"softmax row size {x.shape[-1]} outside [1, {MAX_ROW_SIZE}]")

    v = x.astype(np.int64)
    kept = np.ones(x.shape, bool) if mask is None else ~np.broadcast_to(np.asarray(mask, bool), x.shape)
    diff = v - np.where(kept, v, INT8_MIN).max(axis=-1, keepdims=True)
    live = kept & (diff >= diff_min)
    scaled = srdhm(saturate_int32(diff << input_shift), input_multiplier)
    exps = exp_on_negative_values(np.where(live, scaled, 0))
    total = np.where(live, rounding_divide_by_pow2(exps, ACCUM_BITS), 0).sum(axis=-1, keepdims=True)
    empty = total == 0  # every element masked
    total = np.where(empty, 1 << 19, total)  # any value: the row is all -128
    headroom = _clz32(total)
    # total << headroom has its top bit set; minus 1.0 gives x in [0, 1) for 1/(1+x).
    normalised = wrap_int32((total << headroom) - (1 << 31))
    recip = one_over_one_plus_x_for_x_in_0_1(normalised)
    bits_over_unit = ACCUM_BITS - headroom + 23
    out = rounding_divide_by_pow2(srdhm(recip, exps), bits_over_unit) - 128
    out = np.where(live, np.clip(out, -128, 127), -128)
    return out.astype(np.int8)


# The body of its docs/operators.md section (hand-kept until step 8 generates it from this)
CONTRACT = """\
- `input`, `out` int8, same sizes, contiguous; `dim` (negative allowed) must be the last
  dimension. `output_zero_point` must be -128 (output scale is 1/256).
- `input_multiplier, input_shift = qm(min(input_scale * 2^26, 2^31 - 1))` with
  `input_shift >= 0`; `diff_min = -floor(31 * 2^26 / 2^input_shift)` (<= 0).
  `input_zero_point` is range-checked and unused (softmax is shift-invariant).
- Integer algorithm of CMSIS-NN `arm_softmax_s8` per row: `max` of the row;
  for each `d = x - max >= diff_min`: `e = exp_on_negative_values(SRDHM(d * 2^input_shift, input_multiplier))`
  (Q5.26 in, Q0.31 out); `sum = sum of e rounded-shifted right by 12`; reciprocal of `sum`
  normalised by its leading zeros (`one_over_one_plus_x_for_x_in_0_1`); each output
  `rdivpow2(SRDHM(recip, e), 12 - clz(sum) + 23) - 128`, clamped; elements with
  `d < diff_min` give -128. Exact definition: `reference.softmax`. Row size 1..4096 (the
  Q12.19 sum); rounding shifts wider than 31 bits are computed exactly (CMSIS-NN's are
  undefined there, reachable only with > 512 elements near the row maximum).
- **Differs from ExecuTorch's Python** (float softmax then `round(p*256) - 128`) by +-1 in
  places; the C++ kernel runs `arm_softmax_s8`. We follow CMSIS-NN."""
MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)
OUTPUT_ZERO_POINT = -128  # outputs in units of 1/256 from -128


def check(b: Bound) -> None:
    """softmax.c's TM_ARG_CHECKs, in its order, on a bound call."""
    x = b.value("input")
    if not (
        isinstance(x, pm.Tensor)
        and x.scalar_type == pm.ScalarType.CHAR
        and 1 <= len(x.sizes) <= MAX_DIMS
        and laid_out_as(x.sizes, x.dim_order, range(len(x.sizes)))
    ):
        raise b.reject("input", "expected a contiguous int8 tensor of rank 1..6")
    rank = len(x.sizes)
    dim = b.value("dim")
    if not (isinstance(dim, pm.Int) and -rank <= dim.value <= rank - 1 and dim.value % rank == rank - 1):
        raise b.reject("dim", f"expected the last dimension of a rank-{rank} tensor")
    if not 1 <= x.sizes[-1] <= MAX_ROW_SIZE:
        raise b.reject("input", f"row size {x.sizes[-1]} outside [1, {MAX_ROW_SIZE}]")
    b.int_in("input_zero_point", INT8_MIN, INT8_MAX)
    b.int_in("output_zero_point", OUTPUT_ZERO_POINT, OUTPUT_ZERO_POINT)
    b.int_in("input_multiplier", 1, INT32_MAX)
    b.int_in("input_shift", 0, 31)
    b.int_in("diff_min", INT32_MIN, 0)
    out = b.value("out")
    if not (isinstance(out, pm.Tensor) and out.scalar_type == pm.ScalarType.CHAR and same_layout(x, out)):
        raise b.reject("out", "expected an int8 tensor with the input's sizes and layout")


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out (contiguous, as the input)."""
    return softmax(b.physical("input"), b.dim, b.input_zero_point, b.output_zero_point,
                   b.input_multiplier, b.input_shift, b.diff_min)


SOFTMAX = op(
    "cortex_m::softmax.out(Tensor input, int dim, int input_zero_point, int output_zero_point,"
    " int input_multiplier, int input_shift, int diff_min, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    contract=CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def lower_softmax(k: Any, node: Any) -> None:
    """Softmax over the last dim of a contiguous input, output fixed at 1/256, -128."""
    x = k.input_value(k.aten_arg(node, "self"))
    requested = k.aten_arg(node, "dim")
    dim = int(requested) % max(x.rank, 1)
    if dim != x.rank - 1:
        raise k.unsupported(node, f"softmax over dim {requested} (only the last dimension)")
    x = k.as_contiguous(x)
    qs, act, qp = k.output_quant(node, allow_activation=False)
    out = k.new_int8(node.name, x.sizes, qp, nhwc=False)
    k.call(SOFTMAX, node, input=x.vi, **_softmax_args(k, node, x, qp), out=out.vi)
    k.bind_output(qs, act, out)


def _softmax_args(k: Any, node: Any, x: Any, qp: Any) -> dict[str, int]:
    """The scalar arguments of both softmax operators, for int8 scores x and output qparams
    qp (which must be the fixed 1/256, -128)."""
    if qp.zero_point != OUTPUT_ZERO_POINT or not math.isclose(qp.scale, 1.0 / 256.0, rel_tol=1e-9):
        raise k.unsupported(node, "softmax output qparams must be scale 1/256, zero point -128")
    real = min(float(x.scale) * (1 << (31 - INPUT_INTEGER_BITS)), float(INT32_MAX))
    mult, shift = quantize_multiplier(real)
    diff_min = -math.floor(
        ((1 << INPUT_INTEGER_BITS) - 1)
        * math.ldexp(1.0, 31 - INPUT_INTEGER_BITS) / math.ldexp(1.0, shift)
    )
    return {
        "dim": k.int_(-1),
        "input_zero_point": k.int_(x.zero_point),
        "output_zero_point": k.int_(qp.zero_point),
        "input_multiplier": k.int_(mult),
        "input_shift": k.int_(shift),
        "diff_min": k.int_(diff_min),
    }


pattern("aten::softmax.int", "aten::_softmax.default", annotate=Annotate("softmax"),
        lower=lower_softmax, emits=(SOFTMAX,))


# -- torchmcu::masked_softmax: the same with a boolean mask (attention's causal mask) ---------
MASKED_CONTRACT = """\
- `cortex_m::softmax.out` with a `mask` after the input: bool, contiguous, the input's
  rank, the input's row size (last dim), every other size the input's or 1 (broadcast).
  Where the mask is true the element is left out, as `masked_fill(mask, -inf)` before a
  float softmax leaves it: it takes no part in the row's maximum or sum and its output is
  -128 (probability 0). A row the mask leaves out entirely is all -128 (float gives NaN).
  Exact definition: `reference.softmax(..., mask=)`.
- torchmcu emits it for `masked_fill(x, mask, v)` read only by a softmax over the last dim,
  with a constant mask and `v` -inf (or any value <= -1e4, which a float32 softmax also
  rounds to 0), and for `scaled_dot_product_attention` with `is_causal` or a constant mask
  (decomposed at export). The masked scores are never quantized: the observer sees the
  scores before the fill.
- Helium: the mask's bytes predicate the lanes of the row maximum, the exponentials and
  the stores; unmasked rows run the plain softmax loops."""


def check_masked(b: Bound) -> None:
    """masked_softmax's TM_ARG_CHECKs (softmax.c), in their order: softmax's, then the mask."""
    check(b)
    x, mask = b.value("input"), b.value("mask")
    rank = len(x.sizes)
    if not (
        isinstance(mask, pm.Tensor)
        and mask.scalar_type == pm.ScalarType.BOOL
        and len(mask.sizes) == rank
        and laid_out_as(mask.sizes, mask.dim_order, range(rank))
        and mask.sizes[-1] == x.sizes[-1]
        and all(m in (1, n) for m, n in zip(mask.sizes[:-1], x.sizes[:-1]))
    ):
        raise b.reject("mask", f"expected a contiguous bool tensor broadcast to {list(x.sizes)} "
                       "over its leading dims")


def masked_softmax(
    input: np.ndarray,
    mask: np.ndarray,
    dim: int,
    input_zero_point: int,
    output_zero_point: int,
    input_multiplier: int,
    input_shift: int,
    diff_min: int,
) -> np.ndarray:
    """softmax of `input` leaving out the elements where `mask` (broadcast to it) is true."""
    return softmax(input, dim, input_zero_point, output_zero_point, input_multiplier,
                   input_shift, diff_min, mask=mask)


def reference_masked(b: Any) -> np.ndarray:
    return masked_softmax(b.physical("input"), b.physical("mask"), b.dim, b.input_zero_point,
                          b.output_zero_point, b.input_multiplier, b.input_shift, b.diff_min)


MASKED_SOFTMAX = op(
    "torchmcu::masked_softmax.out(Tensor input, Tensor mask, int dim, int input_zero_point,"
    " int output_zero_point, int input_multiplier, int input_shift, int diff_min, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    kernel=Kernel("tm_torchmcu_masked_softmax_out", "cortex_m/softmax.c"),
    reference=reference_masked,
    check=check_masked,
    contract=MASKED_CONTRACT,
)

MASKED_FILL_MAX = -1e4  # a fill value at or below this is "left out" (float32 exp gives 0)


def lower_masked_softmax(k: Any, node: Any) -> None:
    """masked_fill(x, mask, v) whose only reader is a softmax over the last dim: one
    masked_softmax call bound as the softmax's result (the quantizer annotated the pair)."""
    if k.annotated_pattern(node) != "masked_softmax":
        raise k.unsupported(node, "a masked_fill other than attention's mask before a softmax "
                            "over the last dim (a constant mask, a fill value of -inf or <= -1e4)")
    (soft,) = node.users
    mask = np.asarray(k.bool_constant(node.args[1]))
    x = k.as_contiguous(k.input_value(node.args[0]))
    if mask.ndim > x.rank:
        raise k.unsupported(node, f"a rank-{mask.ndim} mask for rank-{x.rank} scores")
    mask = mask.reshape((1,) * (x.rank - mask.ndim) + mask.shape)
    if mask.shape[-1] != x.sizes[-1]:  # broadcast along the row: write it out
        mask = np.broadcast_to(mask, (*mask.shape[:-1], x.sizes[-1]))
    qs, _, qp = k.output_quant(soft, allow_activation=False)
    out = k.new_int8(soft.name, x.sizes, qp, nhwc=False)
    args = _softmax_args(k, soft, x, qp)
    k.call(MASKED_SOFTMAX, node, input=x.vi, mask=k.constant(np.ascontiguousarray(mask)),
           **args, out=out.vi)
    k.bind_output(qs, soft, out)


pattern("aten::masked_fill.Scalar", annotate=Annotate("masked_softmax", {"fill_max": MASKED_FILL_MAX}),
        lower=lower_masked_softmax, emits=(MASKED_SOFTMAX,))
