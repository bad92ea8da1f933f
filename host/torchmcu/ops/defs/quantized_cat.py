"""torchmcu::quantized_cat: int8 tensors joined along one dim, each requantized to the output's
qparams (ExecuTorch's Cortex-M library has no cat; its flow leaves cat to the portable kernel
on shared qparams).

Defined here once: the argument check (the rules firmware/kernels/cortex_m/quantized_cat.c
enforces, naming the same argument), the reference, the TOSA lowering (RESCALE of the inputs
whose qparams differ, CONCAT), the contract, and the aten rules that emit it: aten::cat and
aten::stack (observed inputs, own output qparams: two branches of different ranges, as a
ShuffleNet unit or a U-Net skip joins them), aten::repeat and aten::expand (copies of one
tensor, its qparams). The rules get the lowering Kit (torchmcu/lower/kit.py) as `k`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops import intmath
from torchmcu.ops.core import Annotate, Bound, Npu, op, pattern
from torchmcu.ops.layout import disjoint
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

INT8_MIN, INT8_MAX, INT32_MAX = intmath.INT8_MIN, intmath.INT8_MAX, intmath.INT32_MAX
SHIFT_MIN, SHIFT_MAX, MAX_DIMS = -31, 31, 6  # MAX_DIMS: TM_MAX_DIMS (torchmcu/types.h)
IDENTITY = (1 << 30, 1)  # (multiplier, shift) of scale 1: requantize(x, 2^30, 1) == x

CONTRACT = """\
- Our operator (ExecuTorch's Cortex-M library has no cat). `tensors`: one or more int8
  tensors of out's rank and dim order, sizes equal to out's except along `dim`
  (`0 <= dim < rank`), where they add up to out's; none shares a byte with `out`.
- Per input `i`: `input_zero_points[i]` in [-128, 127], `input_multipliers[i]` in
  [0, 2^31), `input_shifts[i]` in [-31, 31] (each list one item per tensor);
  `output_zero_point` in [-128, 127].
- `out = cat([clamp(output_zero_point + requantize(t_i - input_zero_points[i],
  input_multipliers[i], input_shifts[i]), -128, 127)], dim)`; `(m, s) = qm(s_i / s_out)`
  (single rounding where the ratio allows). An input with out's qparams (zero point equal,
  `(2^30, 1)`: the identity) is copied byte for byte.
- torchmcu emits it for aten::cat and aten::stack (own output qparams) and for aten::repeat /
  aten::expand (copies of one tensor, identity parameters)."""
NPU_DOC = "TOSA RESCALE (inputs whose qparams differ), CONCAT"


def quantized_cat(
    tensors: Sequence[np.ndarray],
    dim: int,
    input_zero_points: Sequence[int],
    input_multipliers: Sequence[int],
    input_shifts: Sequence[int],
    output_zero_point: int,
) -> np.ndarray:
    """The logical result: each int8 tensor requantized to the output's qparams, joined."""
    parts = []
    for t, zp, m, s in zip(
        tensors, input_zero_points, input_multipliers, input_shifts, strict=True
    ):
        v = intmath.requantize(np.asarray(t, np.int64) - int(zp), int(m), int(s)) + int(
            output_zero_point
        )
        parts.append(np.clip(v, INT8_MIN, INT8_MAX).astype(np.int8))
    return np.concatenate(parts, axis=dim)


def _items(b: Bound, name: str, count: int, lo: int, hi: int) -> list[int] | None:
    """An IntList of `count` ints in [lo, hi], else None (int_items in the C kernel)."""
    if not isinstance(b.value(name), pm.IntList):
        return None
    items = b.scalar(name)
    return items if len(items) == count and all(lo <= v <= hi for v in items) else None


def _tensors(b: Bound) -> list[pm.Tensor]:
    v = b.value("tensors")
    if not (isinstance(v, pm.TensorList) and len(v.items) >= 1):
        raise b.reject("tensors", "expected a TensorList of one or more tensors")
    items = [b.values[k] for k in v.items]
    for t in items:
        if not (
            isinstance(t, pm.Tensor)
            and t.scalar_type == pm.ScalarType.CHAR
            and 1 <= len(t.sizes) <= MAX_DIMS
        ):
            raise b.reject("tensors", "expected int8 tensors of rank 1..6")
    return items  # type: ignore[return-value]


def check(b: Bound) -> None:
    """quantized_cat.c's TM_ARG_CHECKs, in its order, on a bound call."""
    items = _tensors(b)
    rank = len(items[0].sizes)
    dim = b.int_in("dim", 0, rank - 1)
    n = len(items)
    if _items(b, "input_zero_points", n, INT8_MIN, INT8_MAX) is None:
        raise b.reject("input_zero_points", f"expected {n} ints in [{INT8_MIN}, {INT8_MAX}]")
    if _items(b, "input_multipliers", n, 0, INT32_MAX) is None:
        raise b.reject("input_multipliers", f"expected {n} ints in [0, 2^31)")
    if _items(b, "input_shifts", n, SHIFT_MIN, SHIFT_MAX) is None:
        raise b.reject("input_shifts", f"expected {n} ints in [{SHIFT_MIN}, {SHIFT_MAX}]")
    b.int_in("output_zero_point", INT8_MIN, INT8_MAX)
    out = b.value("out")
    if not (
        isinstance(out, pm.Tensor)
        and out.scalar_type == pm.ScalarType.CHAR
        and len(out.sizes) == rank
    ):
        raise b.reject("out", f"expected an int8 tensor of rank {rank}")
    for t in items:
        if not (
            len(t.sizes) == rank
            and list(t.dim_order) == list(out.dim_order)
            and all(d == dim or t.sizes[d] == out.sizes[d] for d in range(rank))
            and disjoint(t, out)
        ):
            raise b.reject(
                "tensors",
                f"expected out's dim order and sizes {out.sizes} but along dim {dim},"
                " apart from out",
            )
    total = sum(t.sizes[dim] for t in items)
    if total != out.sizes[dim]:
        raise b.reject("out", f"expected {total} along dim {dim}")


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out."""
    return b.to_out(
        quantized_cat(
            b.logical_list("tensors"),
            b.dim,
            b.input_zero_points,
            b.input_multipliers,
            b.input_shifts,
            b.output_zero_point,
        )
    )


def npu_support(b: Bound, family: str) -> str | None:
    for s in b.input_shifts:
        if not 2 <= 31 - s <= 62:
            return f"input shift {s} (TOSA RESCALE takes shifts 2..62, ours 31 - shift)"
    return None


def lower_tosa(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    """RESCALE (int8 -> int8, DOUBLE_ROUND: our requantize) of every input whose parameters
    are not the identity, then CONCAT along the cat dim's place in memory order (g: tosa Graph,
    a: its Bound; read(position) here reads the list's items)."""
    a.checked()
    out = a.tensor("out")
    axis = list(out.dim_order).index(a.dim)
    parts = []
    items = zip(a.input_zero_points, a.input_multipliers, a.input_shifts, strict=True)
    for k, (zp, m, s) in enumerate(items):
        x = read((a.index("tensors"), k))
        if zp != a.output_zero_point or (m, s) != IDENTITY:
            x = g.rescale(x, "INT8", [m], [31 - s], zp, a.output_zero_point)
        parts.append(x)
    if len(parts) == 1:
        return parts[0]
    return g.concat(parts, axis)


QUANTIZED_CAT = op(
    "torchmcu::quantized_cat.out(Tensor[] tensors, int dim, int[] input_zero_points,"
    " int[] input_multipliers, int[] input_shifts, int output_zero_point, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    npu=Npu(lower=lower_tosa, support=npu_support, doc=NPU_DOC),
    contract=CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def _emit(
    k: Any, node: Any, parts: list[Any], dim: int, sizes: list[int], scale: float, zero_point: int
) -> Any:
    """One quantized_cat of `parts` (LValues of one layout) into a new value of `sizes` with
    the qparams (scale, zero_point)."""
    out = k.new_int8(node.name, sizes, None, nhwc=parts[0].nhwc)
    out = out.with_(scale=scale, zero_point=zero_point)
    params, zps = [], []
    for p in parts:
        same = p.zero_point == zero_point and math.isclose(p.scale, scale, rel_tol=1e-6)
        params.append(IDENTITY if same else intmath.single_rounding_multiplier(p.scale / scale))
        zps.append(zero_point if same else int(p.zero_point))
    k.call(
        QUANTIZED_CAT,
        node,
        tensors=k.tensor_list([p.vi for p in parts]),
        dim=k.int_(dim),
        input_zero_points=k.int_list(zps),
        input_multipliers=k.int_list([m for m, _ in params]),
        input_shifts=k.int_list([s for _, s in params]),
        output_zero_point=k.int_(zero_point),
        out=out.vi,
    )
    return out


def _one_layout(k: Any, values: list[Any]) -> list[Any]:
    """The values in one memory order: NHWC when they are 4-D and one of them is, else
    contiguous (each moved at most once, cached)."""
    if all(v.rank == 4 for v in values) and any(v.nhwc for v in values):
        return [k.as_nhwc(v) for v in values]
    return [k.as_contiguous(v) for v in values]


def lower_cat(k: Any, node: Any) -> None:
    """aten::cat.default: the inputs in one layout, requantized to the output's qparams."""
    tensors = list(k.aten_arg(node, "tensors"))
    values = [k.input_value(t) for t in tensors]
    values = [v for v in values if not (v.rank == 1 and v.sizes[0] == 0)]  # skipped, as torch
    if not values:
        raise k.unsupported(node, "cat of empty tensors only")
    dim = int(k.aten_arg(node, "dim", 0)) % values[0].rank
    qs, act, qp = k.output_quant(node, allow_activation=False)
    parts = _one_layout(k, values)
    k.bind_output(qs, act, _emit(k, node, parts, dim, k.shape_of(node), qp.scale, qp.zero_point))


def lower_stack(k: Any, node: Any) -> None:
    """aten::stack.default: each input viewed with a size-1 dim at `dim`, then a cat."""
    values = [k.as_contiguous(k.input_value(t)) for t in k.aten_arg(node, "tensors")]
    rank = values[0].rank + 1
    dim = int(k.aten_arg(node, "dim", 0)) % rank
    parts = [k.alias(v, v.sizes[:dim] + [1] + v.sizes[dim:], nhwc=False) for v in values]
    qs, act, qp = k.output_quant(node, allow_activation=False)
    k.bind_output(qs, act, _emit(k, node, parts, dim, k.shape_of(node), qp.scale, qp.zero_point))


def _tile(k: Any, node: Any, x: Any, repeats: list[int]) -> Any:
    """x repeated repeats[d] times along each dim d: one identity cat per repeated dim."""
    for d, r in enumerate(repeats):
        if r > 1:
            sizes = [s * r if j == d else s for j, s in enumerate(x.sizes)]
            x = _emit(k, node, [x] * r, d, sizes, x.scale, x.zero_point)
    return x


def _lead(k: Any, x: Any, rank: int) -> Any:
    """x viewed with leading size-1 dims up to `rank`."""
    if rank == x.rank:
        return x
    x = k.as_contiguous(x)
    return k.alias(x, [1] * (rank - x.rank) + x.sizes, nhwc=False)


def _bind_copy(k: Any, node: Any, x: Any, out: Any) -> None:
    """Binds a repeat / expand result, which keeps its input's qparams."""
    if not k.quantized(node):  # PT2E leaves no quantize between ops sharing qparams
        k.bind(node, out)
        return
    qs, act, qp = k.output_quant(node, allow_activation=False)
    if not k.same_qparams(x.scale, x.zero_point, qp):
        raise k.unsupported(node, "a repeat that changes qparams")
    k.bind_output(qs, act, out)


def lower_repeat(k: Any, node: Any) -> None:
    """aten::repeat.default (torch's tile): identity cats of the input with itself."""
    repeats = [int(r) for r in k.aten_arg(node, "repeats")]
    if min(repeats) < 1:
        raise k.unsupported(node, f"repeats {repeats}")
    x = _lead(k, k.input_value(node.args[0]), len(repeats))
    if x.rank == 4 and not x.nhwc and not x.layout_free:
        x = k.as_nhwc(x)
    out = _tile(k, node, x, repeats)
    if out.sizes != k.shape_of(node):
        raise k.unsupported(node, f"repeat result {out.sizes} differs from {k.shape_of(node)}")
    _bind_copy(k, node, x, out)


def lower_expand(k: Any, node: Any) -> None:
    """aten::expand.default: the size-1 dims repeated to the new sizes (a copy: the kernels
    read dense tensors)."""
    want = k.shape_of(node)
    x = _lead(k, k.input_value(node.args[0]), len(want))
    if any(s not in (1, w) for s, w in zip(x.sizes, want)):
        raise k.unsupported(node, f"expand of sizes {x.sizes} to {want}")
    out = _tile(k, node, x, [w // s for s, w in zip(x.sizes, want)])
    _bind_copy(k, node, x, out)


pattern("aten::cat.default", annotate=Annotate("cat"), lower=lower_cat, emits=(QUANTIZED_CAT,))
pattern("aten::stack.default", annotate=Annotate("cat"), lower=lower_stack, emits=(QUANTIZED_CAT,))
pattern(
    "aten::repeat.default", annotate=Annotate("shared"), lower=lower_repeat, emits=(QUANTIZED_CAT,)
)
pattern(
    "aten::expand.default", annotate=Annotate("shared"), lower=lower_expand, emits=(QUANTIZED_CAT,)
)
