"""cortex_m::quantized_linear: int8 fully connected layer (note activation_max before
activation_min, as ExecuTorch).

Defined here once: the argument check (the rules firmware/kernels/cortex_m/quantized_linear.c
enforces, naming the same argument), the reference, the MAC count, the TOSA lowering and its
NPU rule, the contract, and the aten rule that emits it (aten::linear.default), which gets the
lowering Kit (torchmcu/lower/kit.py) as `k`.

On the NPU a linear layer is a 1x1 CONV2D over [1, 1, rows, K] (int32 accumulator) followed by
the requantizing RESCALE. Our accumulator is sum((x + input_offset) * w) + bias; TOSA's is
sum((x - input_zp) * (w - weight_zp)) + bias, so input_zp = -input_offset.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from torchmcu.ops.core import Annotate, Bound, KernelVariants, Npu, op, pattern
from torchmcu.ops.intmath import (
    INT8_MAX,
    INT8_MIN,
    INT32_MAX,
    INT32_MIN,
    check_activation,
    check_int,
    requantize,
)
from torchmcu.ops.layout import laid_out_as
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)
SHIFT_MIN, SHIFT_MAX = -31, 31

# The body of its docs/operators.md section (hand-kept until step 8 generates it from this)
CONTRACT = """\
Note the order **activation_max before activation_min**.

- `input` int8, rank >= 1, contiguous, `[..., K]`; `weights` int8 `[N, K]` contiguous;
  `out` int8 `[..., N]` contiguous (same leading sizes as input).
- `bias`: None or int32 with N elements. `kernel_sum`: None or int32 with N elements
  (ExecuTorch stores it as `[1, N]`).
- `input_offset = -input_zp`; `filter_offset = -weight_zp` (ExecuTorch: always 0);
  `output_offset = output_zp`.
- `requantize_multipliers`, `requantize_shifts`: int lists of length 1 (per-tensor; what
  ExecuTorch emits) or N (per output channel; torchmcu extension).
- Accumulator for each row `x` and output channel `o`:
  - `kernel_sum` given: `acc = sum_i x[i]*w[o,i] + filter_offset * sum_i x[i] + kernel_sum[o]`;
    **bias is ignored** (CMSIS-NN's MVE contract; ExecuTorch then passes bias = None).
  - otherwise: `acc = sum_i (x[i] + input_offset) * (w[o,i] + filter_offset) + (bias[o] or 0)`.
- What ExecuTorch puts in `kernel_sum` (target MVE only):
  `kernel_sum[o] = input_offset * sum_i (w[o,i] + filter_offset) + bias[o]`, which makes both
  forms equal. For other targets it passes `bias` and `kernel_sum = None`.
  **torchmcu lowering: `kernel_sum` and `bias = None`, as ExecuTorch for MVE** (faster on
  both paths); `bias` where a `kernel_sum` item would not fit int32. Both are accepted.
- `out = clamp(requantize(acc, m[o], s[o]) + output_offset, activation_min, activation_max)`."""


def check_offsets(
    input_offset: int | None, output_offset: int, filter_offset: int | None = None
) -> None:
    """The offsets' ranges of the weighted ops: input/filter offsets are negated int8 zero
    points, the output offset an int8 zero point (ValueError naming the one at fault)."""
    if input_offset is not None:
        check_int("input_offset", input_offset, -INT8_MAX, -INT8_MIN)
    if filter_offset is not None:
        check_int("filter_offset", filter_offset, -INT8_MAX, -INT8_MIN)
    check_int("output_offset", output_offset, INT8_MIN, INT8_MAX)


def _per_channel(values: Sequence[int] | np.ndarray, channels: int, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.int64).reshape(-1)
    if arr.size == 1:
        return np.repeat(arr, channels)
    if arr.size != channels:
        raise ValueError(f"{name} has {arr.size} items, expected 1 or {channels}")
    return arr


def quantized_linear(
    input: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray | None,
    kernel_sum: np.ndarray | None,
    input_offset: int,
    filter_offset: int,
    output_offset: int,
    requantize_multipliers: Sequence[int],
    requantize_shifts: Sequence[int],
    activation_max: int,
    activation_min: int,
) -> np.ndarray:
    """[..., K] x [N, K] -> [..., N]; kernel_sum, when given, replaces bias (CMSIS-NN MVE form)."""
    check_offsets(input_offset, output_offset, filter_offset)
    check_activation(activation_min, activation_max)
    x = np.asarray(input, dtype=np.int64)
    w = np.asarray(weights, dtype=np.int64)
    n_out, k = w.shape
    if x.shape[-1] != k:
        raise ValueError(f"input's last dim {x.shape[-1]} != weights' in_features {k}")
    rows = x.reshape(-1, k)
    if kernel_sum is not None:
        ks = np.asarray(kernel_sum, dtype=np.int64).reshape(-1)
        acc = rows @ w.T + filter_offset * rows.sum(axis=1, keepdims=True) + ks
    else:
        acc = (rows + input_offset) @ (w + filter_offset).T
        if bias is not None:
            acc = acc + np.asarray(bias, dtype=np.int64).reshape(-1)
    m = _per_channel(requantize_multipliers, n_out, "requantize_multipliers")
    s = _per_channel(requantize_shifts, n_out, "requantize_shifts")
    out = requantize(acc, m, s) + output_offset
    out = np.clip(out, activation_min, activation_max).astype(np.int8)
    return out.reshape(*x.shape[:-1], n_out)


# -- the check: quantized_linear.c's TM_ARG_CHECKs in its order
def contiguous(t: pm.EValue, scalar_type: int, lo: int, hi: int) -> TypeGuard[pm.Tensor]:
    """tm_tensor_arg of `scalar_type` and rank lo..hi with tm_has_layout(CONTIGUOUS)."""
    return (
        isinstance(t, pm.Tensor)
        and t.scalar_type == scalar_type
        and lo <= len(t.sizes) <= hi
        and laid_out_as(t.sizes, t.dim_order, range(len(t.sizes)))
    )


def int32_vector(b: Bound, name: str, items: int) -> bool:
    """tm_bias_arg: None, or an int32 tensor of rank 1..6 holding `items` elements."""
    t = b.value(name)
    return isinstance(t, pm.Null) or (
        isinstance(t, pm.Tensor)
        and t.scalar_type == pm.ScalarType.INT
        and 1 <= len(t.sizes) <= MAX_DIMS
        and t.numel == items
    )


def _int_list(b: Bound, name: str, lo: int, hi: int) -> list[int] | None:
    """tm_int_list_arg with a length in [lo, hi] (items are Ints), else None."""
    if not isinstance(b.value(name), pm.IntList):
        return None
    items = b.scalar(name)
    return items if lo <= len(items) <= hi else None


def check(b: Bound) -> None:
    """quantized_linear.c's checks, in its order, on a bound call."""
    x = b.value("input")
    if not (contiguous(x, pm.ScalarType.CHAR, 1, MAX_DIMS) and x.sizes[-1] > 0):
        raise b.reject("input", "expected a contiguous int8 tensor of rank 1..6, last size > 0")
    k = x.sizes[-1]
    w = b.value("weights")
    if not (contiguous(w, pm.ScalarType.CHAR, 2, 2) and w.sizes[1] == k and w.sizes[0] > 0):
        raise b.reject("weights", f"expected a contiguous int8 [N, {k}] tensor")
    n = w.sizes[0]
    for name in ("bias", "kernel_sum"):
        if not int32_vector(b, name, n):
            raise b.reject(name, f"expected None or an int32 tensor of {n} items")
    b.int_in("input_offset", -INT8_MAX, -INT8_MIN)
    b.int_in("filter_offset", -INT8_MAX, -INT8_MIN)
    b.int_in("output_offset", INT8_MIN, INT8_MAX)
    mults = _int_list(b, "requantize_multipliers", 1, n)
    if mults is None or len(mults) not in (1, n):
        raise b.reject("requantize_multipliers", f"expected 1 or {n} ints")
    shifts = _int_list(b, "requantize_shifts", len(mults), len(mults))
    if shifts is None:
        raise b.reject("requantize_shifts", f"expected {len(mults)} ints")
    if not all(INT32_MIN <= m <= INT32_MAX for m in mults):
        raise b.reject("requantize_multipliers", "expected int32 multipliers")
    if not all(SHIFT_MIN <= s <= SHIFT_MAX for s in shifts):
        raise b.reject("requantize_shifts", f"expected shifts in [{SHIFT_MIN}, {SHIFT_MAX}]")
    act_min = b.int_in("activation_min", INT8_MIN, INT8_MAX)
    b.int_in("activation_max", act_min, INT8_MAX)
    out = b.value("out")
    want = [*x.sizes[:-1], n]
    rank = len(x.sizes)
    if not (contiguous(out, pm.ScalarType.CHAR, rank, rank) and list(out.sizes) == want):
        raise b.reject("out", f"expected a contiguous int8 tensor of sizes {want}")


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out (flat: rows x N)."""
    k = b.tensor("weights").sizes[1]
    rows = b.physical("input").reshape(-1, k)
    return quantized_linear(
        rows, b.physical("weights"), b.physical("bias"), b.physical("kernel_sum"),
        b.input_offset, b.filter_offset, b.output_offset, b.requantize_multipliers,
        b.requantize_shifts, b.activation_max, b.activation_min,
    ).reshape(-1)  # fmt: skip


def variants(b: Bound) -> list[str]:
    """quantized_linear.c's Helium paths: the kernel_sum form for one input row or several, or
    the bias form."""
    if b.is_none("kernel_sum"):
        return ["bias"]
    rows = b.tensor("input").numel // b.tensor("weights").sizes[1]
    return ["kernel_sum" if rows == 1 else "kernel_sum_rows"]


def macs(b: Bound) -> int:
    """Multiply-accumulates: one per out element and input feature."""
    return b.tensor("out").numel * b.tensor("weights").sizes[-1]


# -- TOSA (g: tosa Graph, a: its Bound)
def bias_of(a: Any, name: str, channels: int) -> np.ndarray:
    """An optional int32 vector argument as `channels` int32 items (zeros for None)."""
    if a.is_none(name):
        return np.zeros(channels, dtype=np.int32)
    return a.constant(name).reshape(-1).astype(np.int32)


def lower_tosa(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    """A 1x1 CONV2D over [1, 1, rows, K], then the requantizing RESCALE."""
    a.checked()
    filter_offset = int(a.filter_offset)
    if filter_offset != 0:
        raise a.error(f"filter_offset {filter_offset} != 0 (int8 weights are symmetric)")
    x = read(a.index("input"))
    weight = a.constant("weights")  # [N, K]
    n_out, k = weight.shape
    rows = math.prod(x.shape[:-1])
    if not a.is_none("kernel_sum"):
        # kernel_sum = input_offset * sum(w) + bias: the NPU gets the bias and the input zero
        # point back (the graph, and Vela's output, as for the bias form) where that bias fits
        # int32, else the sum as bias and the input as is (the same accumulator).
        ksum = a.constant("kernel_sum").reshape(-1).astype(np.int64)
        offset = int(a.input_offset)
        recovered = ksum - offset * weight.astype(np.int64).sum(axis=1)
        if np.all((recovered >= INT32_MIN) & (recovered <= INT32_MAX)):
            bias, input_zp = recovered.astype(np.int32), -offset
        else:
            bias, input_zp = ksum.astype(np.int32), 0
    else:
        bias, input_zp = bias_of(a, "bias", n_out), -int(a.input_offset)
    acc = g.conv(
        "CONV2D",
        g.reshape(x, (1, 1, rows, k)),
        weight.reshape(n_out, 1, 1, k).astype(np.int8),
        bias,
        input_zp,
        (1, 1, rows, n_out),
        [0, 0, 0, 0],
        (1, 1),
        (1, 1),
    )
    out = g.requantize(
        acc, a.ints("requantize_multipliers"), a.ints("requantize_shifts"),
        int(a.output_offset), int(a.activation_min), int(a.activation_max),
    )  # fmt: skip
    return g.reshape(out, (*x.shape[:-1], n_out))


def npu_support(b: Bound, family: str) -> str | None:
    del family
    if b.filter_offset != 0:
        return "quantized_linear with a non-zero filter offset"
    return None


QUANTIZED_LINEAR = op(
    "cortex_m::quantized_linear.out(Tensor input, Tensor weights, Tensor? bias,"
    " Tensor? kernel_sum, int input_offset, int filter_offset, int output_offset,"
    " int[] requantize_multipliers, int[] requantize_shifts, int activation_max,"
    " int activation_min, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    prepare=True,
    reference=reference,
    check=check,
    macs=macs,
    variants=KernelVariants(("kernel_sum", "kernel_sum_rows", "bias"), variants),
    npu=Npu(
        lower=lower_tosa,
        support=npu_support,
        doc="TOSA CONV2D (1x1 over [1, 1, rows, K]) and RESCALE; filter_offset 0 only",
    ),
    contract=CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def lower_linear(k: Any, node: Any) -> None:
    """aten::linear.default: int8 weights [N, K] (per tensor), the bias at the accumulator
    scale; an NHWC input flattened without a transpose reorders the weight columns instead."""
    x = k.input_value(k.aten_arg(node, "input"))
    out_shape = k.shape_of(node)
    cout = out_shape[-1]
    w, w_scales = k.weights(node, k.aten_arg(node, "weight"), cout)
    if x.flatten_chw is not None:
        # The input is an NHWC tensor flattened without a transpose: reorder the weight
        # columns from (c, h, w) to (h, w, c) instead of moving the activations.
        c, h, wd = x.flatten_chw
        w = np.ascontiguousarray(w.reshape(cout, c, h, wd).transpose(0, 2, 3, 1).reshape(cout, -1))
        x = x.with_(flatten_chw=None)
    elif x.nhwc and not x.layout_free:
        x = k.as_contiguous(x)
    qs, act, qp = k.output_quant(node, allow_activation=True)
    act_min, act_max = k.activation_range(act, qp)
    in_scale, in_zp = float(x.scale), int(x.zero_point)
    bias = k.bias_int32(node, k.aten_arg(node, "bias", None), in_scale * w_scales, cout)
    mults, shifts = k.per_channel_requant(in_scale, w_scales, qp.scale)
    if len(set(zip(mults, shifts))) == 1:
        mults, shifts = mults[:1], shifts[:1]
    out = k.new_int8(node.name, out_shape, qp, nhwc=False)
    x_in = k.alias(x, x.sizes, nhwc=False) if x.nhwc else x
    # The kernel_sum form (ExecuTorch's, for MVE) folds the input offset into one int32 per
    # channel: 2.3-2.5x fewer instructions than the bias form on both of the kernel's paths
    # (bench/kernels_mve.py fc_ae against fc_ae_bias). Bias form where it does not fit int32.
    ksum = (-in_zp) * w.astype(np.int64).sum(axis=1) + bias.astype(np.int64)
    if k.opts.linear_kernel_sum and bool(np.all((ksum >= INT32_MIN) & (ksum <= INT32_MAX))):
        bias_arg, ksum_arg = k.none(), k.constant(ksum.astype(np.int32).reshape(1, cout))
    else:
        bias_arg, ksum_arg = k.constant(bias), k.none()
    k.call(
        QUANTIZED_LINEAR,
        node,
        input=x_in.vi,
        weights=k.constant(np.ascontiguousarray(w)),
        bias=bias_arg,
        kernel_sum=ksum_arg,
        input_offset=k.int_(-in_zp),
        filter_offset=k.int_(0),
        output_offset=k.int_(qp.zero_point),
        requantize_multipliers=k.int_list(mults),
        requantize_shifts=k.int_list(shifts),
        activation_max=k.int_(act_max),
        activation_min=k.int_(act_min),
        out=out.vi,
    )
    k.bind_output(qs, act, out)


pattern(
    "aten::linear.default",
    annotate=Annotate("weighted", {"kind": "linear", "per_channel": False}),
    lower=lower_linear,
    emits=(QUANTIZED_LINEAR,),
)
