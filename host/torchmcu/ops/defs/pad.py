"""cortex_m::pad: constant padding of up to four pad dims.

Defined here once: the argument check (the rules firmware/kernels/cortex_m/pad.c enforces,
naming the same argument), the reference, the TOSA lowering, the contract, and the aten rules
that emit it (aten::pad.default, aten::constant_pad_nd.default), which get the lowering Kit
(torchmcu/lower/kit.py) as `k`. A pad that feeds a convolution may fold into its padding on
the NPU (npu/tosa/ops_layout.foldable_pad, with the convolutions' definitions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, Npu, op, pattern
from torchmcu.ops.intmath import INT16_MAX
from torchmcu.ops.layout import NHWC, disjoint, is_channels_last, laid_out_as, pad_dims
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable

PAD_DIMS = 4  # pre_pad / post_pad items: the pad dims right-aligned to 4-D
INT8_MIN, INT8_MAX = -128, 127

# The body of its docs/operators.md section (hand-kept until step 8 generates it from this)
CONTRACT = """\
- `input` int8, rank 1..4; `out` int8, same rank.
- `pre_pad`, `post_pad`: 4 items each, >= 0, per **pad dim**, right-aligned to 4-D. The pad
  dims follow ExecuTorch 1.5.1's rule (its AOT pass `to_physical_order`, its Python
  `_pad_to_logical_order` and its C++ `pad_out` all decide it from the *input* alone):
  - the input is **channels-last** if it is 4-D and `C == 1`, or `H == W == 1`, or its dim
    order is `[0,2,3,1]` (ExecuTorch's `is_channels_last`). Its pad dims are then
    `[N, H, W, C]` and its bytes must be NHWC (dims of size 1 ignored, so a C == 1 tensor
    with dim order `[0,1,2,3]` or `[0,2,1,3]` qualifies - ExecuTorch emits both);
  - otherwise the pad dims are the sizes in logical order (rank r < 4: items `4-r..3`
    pad dims `0..r-1`, the leading items must be 0) and the bytes must be contiguous.
- `out` must hold the padded pad dims (input pad dims + pre + post) in the same memory
  layout (NHWC resp. contiguous, size-1 dims ignored); any other input or out layout is
  rejected (INVALID_ARGUMENT naming argument 0 resp. 4). New elements = `pad_value`
  (a quantized value in [-128, 127]: ExecuTorch passes `quantize(pad_value_float)`; for
  avg-pool padding, the input zero point).
- Consequence for writers: padding the H/W of a contiguous C == 1 tensor `[N,1,H,W]` takes
  `[0, pad_h, pad_w, 0]`, not `[0, 0, pad_h, pad_w]`. torchmcu's lowering emits 4-D pads
  only for `[0,2,3,1]` tensors (N,H,W,C pads) and lower-rank pads for contiguous tensors,
  both inside the rule. Exact definition: `reference.ops_layout.pad_tensor`."""


def pad(input: np.ndarray, pre_pad: Sequence[int], post_pad: Sequence[int], pad_value: int) -> np.ndarray:
    """Pads a rank 1..4 int8 array given in memory order; pre/post have 4 items each."""
    x = np.asarray(input)
    if x.dtype != np.int8:
        raise ValueError(f"pad input must be int8, got {x.dtype}")
    if not 1 <= x.ndim <= PAD_DIMS:
        raise ValueError(f"pad input rank must be 1..4, got {x.ndim}")
    pre = [int(v) for v in pre_pad]
    post = [int(v) for v in post_pad]
    if len(pre) != PAD_DIMS or len(post) != PAD_DIMS:
        raise ValueError("pre_pad and post_pad must have 4 items")
    if min(pre + post) < 0:
        raise ValueError("pad amounts must be >= 0")
    lead = PAD_DIMS - x.ndim
    if any(pre[:lead]) or any(post[:lead]):
        raise ValueError(f"pad of a rank-{x.ndim} tensor must leave the first {lead} items 0")
    if not INT8_MIN <= int(pad_value) <= INT8_MAX:
        raise ValueError(f"pad_value={pad_value} outside [{INT8_MIN}, {INT8_MAX}]")
    widths = list(zip(pre[lead:], post[lead:]))
    return np.pad(x, widths, mode="constant", constant_values=np.int8(pad_value))


def pad_tensor(
    memory: np.ndarray,
    in_sizes: Sequence[int],
    in_dim_order: Sequence[int],
    out_sizes: Sequence[int],
    out_dim_order: Sequence[int],
    pre_pad: Sequence[int],
    post_pad: Sequence[int],
    pad_value: int,
) -> np.ndarray:
    """cortex_m::pad.out on a tensor's bytes (any shape): returns the out tensor's bytes, flat.

    The input decides the convention (is_channels_last); the out tensor must have the
    padded pad dims in the same memory layout.
    """
    nhwc = is_channels_last(in_sizes, in_dim_order)
    dims = pad_dims(in_sizes, in_dim_order, nhwc)
    result = pad(np.asarray(memory).reshape(dims), pre_pad, post_pad, pad_value)
    if len(out_sizes) != len(in_sizes):
        raise ValueError(f"pad: out rank {len(out_sizes)} differs from input rank {len(in_sizes)}")
    out_dims = pad_dims(out_sizes, out_dim_order, nhwc)
    if out_dims != result.shape:
        raise ValueError(f"pad: out sizes {list(out_sizes)} dim_order {list(out_dim_order)} do not hold "
                         f"the padded dims {list(result.shape)}")
    return result.reshape(-1)


def _c_pad_dims(t: pm.Tensor, nhwc: bool) -> list[int]:
    """pad.c's pad_dims: the four pad dims, right-aligned with 1s."""
    if nhwc:
        return [int(t.sizes[d]) for d in NHWC]
    return [1] * (PAD_DIMS - len(t.sizes)) + [int(s) for s in t.sizes]


def _int_list(b: Bound, name: str) -> list[Any] | None:
    """tm_int_list_arg with 4 items, else None."""
    if not isinstance(b.value(name), pm.IntList):
        return None
    items = b.scalar(name)
    return items if len(items) == PAD_DIMS else None


def check(b: Bound) -> None:
    """pad.c's TM_ARG_CHECKs, in its order, on a bound call."""
    x = b.value("input")
    if not (
        isinstance(x, pm.Tensor)
        and x.scalar_type == pm.ScalarType.CHAR
        and 1 <= len(x.sizes) <= PAD_DIMS
    ):
        raise b.reject("input", "expected an int8 tensor of rank 1..4")
    nhwc = is_channels_last(x.sizes, x.dim_order)
    layout = NHWC if nhwc else range(len(x.sizes))
    if not laid_out_as(x.sizes, x.dim_order, layout):
        raise b.reject("input", "expected NHWC bytes" if nhwc else "expected contiguous bytes")
    pre, post = _int_list(b, "pre_pad"), _int_list(b, "post_pad")
    if pre is None:
        raise b.reject("pre_pad", "expected 4 ints")
    if post is None:
        raise b.reject("post_pad", "expected 4 ints")
    lead = PAD_DIMS - len(x.sizes)
    for k in range(PAD_DIMS):  # pre then post, item by item, as the C loop
        for name, amounts in (("pre_pad", pre), ("post_pad", post)):
            if not 0 <= amounts[k] <= INT16_MAX or (k < lead and amounts[k] != 0):
                raise b.reject(name, f"item {k} ({amounts[k]}) outside [0, {INT16_MAX}]"
                               + (" or not 0 for a missing dim" if k < lead else ""))
    value = b.value("pad_value")
    if not (isinstance(value, pm.Int) and INT8_MIN <= value.value <= INT8_MAX):
        raise b.reject("pad_value", f"expected an int in [{INT8_MIN}, {INT8_MAX}]")
    want = [d + p + q for d, p, q in zip(_c_pad_dims(x, nhwc), pre, post)]
    out = b.value("out")
    if not (
        isinstance(out, pm.Tensor)
        and out.scalar_type == pm.ScalarType.CHAR
        and len(out.sizes) == len(x.sizes)
        and laid_out_as(out.sizes, out.dim_order, layout)
        and disjoint(x, out)
        and _c_pad_dims(out, nhwc) == want
    ):
        raise b.reject("out", f"expected an int8 tensor holding the pad dims {want} in the"
                       " input's layout, apart from the input")


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out (flat)."""
    t, out = b.tensor("input"), b.tensor("out")
    return pad_tensor(b.physical("input"), t.sizes, t.dim_order, out.sizes, out.dim_order,
                      b.pre_pad, b.post_pad, b.pad_value)


def lower_tosa(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    """TOSA PAD of the input's pad dims (g: tosa Graph, a: its Bound)."""
    a.checked()
    t, out = a.tensor("input"), a.tensor("out")
    nhwc = is_channels_last(t.sizes, t.dim_order)
    dims = pad_dims(t.sizes, t.dim_order, nhwc)
    out_dims = pad_dims(out.sizes, out.dim_order, nhwc)
    lead = PAD_DIMS - len(dims)
    pre, post = a.pre_pad[lead:], a.post_pad[lead:]
    amounts = [v for p, q in zip(pre, post) for v in (p, q)]
    x = g.reshape(read(a.index("input")), dims)
    return g.pad(x, amounts, a.pad_value, out_dims)


PAD = op(
    "cortex_m::pad.out(Tensor input, int[] pre_pad, int[] post_pad, int pad_value, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    npu=Npu(lower=lower_tosa, doc="TOSA PAD (or folded into a convolution's padding)"),
    contract=CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def _emit(k: Any, node: Any, value: Any) -> None:
    """Constant padding (e.g. nn.ZeroPad2d) with the quantized pad value."""
    x = k.input_value(node.args[0])
    pads = [int(p) for p in k.aten_arg(node, "pad")]
    value = 0.0 if value is None else float(value)
    if len(pads) % 2 or len(pads) // 2 > x.rank or min(pads) < 0:
        raise k.unsupported(node, f"padding {pads} of a rank-{x.rank} tensor")
    qs, act, qp = k.output_quant(node, allow_activation=False)
    if not k.same_qparams(x.scale, x.zero_point, qp):
        raise k.unsupported(node, "padding that changes qparams")
    logical_pre = [0] * x.rank
    logical_post = [0] * x.rank
    for i in range(len(pads) // 2):  # pairs run from the last dimension backwards
        logical_pre[x.rank - 1 - i] = pads[2 * i]
        logical_post[x.rank - 1 - i] = pads[2 * i + 1]
    if x.rank > PAD_DIMS:  # contiguous bytes, runs of unpadded dims merged into one
        merged = _merged(x.sizes, logical_pre, logical_post)
        if len(merged) > PAD_DIMS:
            raise k.unsupported(node, f"padding {pads} of a rank-{x.rank} tensor (more than "
                                f"{PAD_DIMS} dims once the unpadded ones are merged)")  # fmt: skip
        out = k.new_int8(node.name, k.shape_of(node), qp, nhwc=False)
        sizes, pre, post = (list(t) for t in zip(*merged))
        lead = [0] * (PAD_DIMS - len(merged))
        src = k.alias(k.as_contiguous(x), sizes, nhwc=False)
        dst = k.alias(out, [s + a + b for s, a, b in merged], nhwc=False)
        _call(k, node, src, lead + pre, lead + post, k.q8(value, qp), dst)
        k.bind_output(qs, act, out)
        return
    if x.rank == PAD_DIMS:
        x = k.as_nhwc(x)
        pre = [logical_pre[d] for d in NHWC]  # the pad dims in memory order
        post = [logical_post[d] for d in NHWC]
    else:
        x = k.as_contiguous(x)
        pre = [0] * (PAD_DIMS - x.rank) + logical_pre
        post = [0] * (PAD_DIMS - x.rank) + logical_post
    out = k.new_int8(node.name, k.shape_of(node), qp, nhwc=x.rank == PAD_DIMS)
    _call(k, node, x, pre, post, k.q8(value, qp), out)
    k.bind_output(qs, act, out)


def _merged(sizes: Sequence[int], pre: Sequence[int], post: Sequence[int]) -> list[tuple[int, int, int]]:
    """(size, pre, post) per dim with each run of unpadded dims merged into one (same bytes)."""
    merged: list[tuple[int, int, int]] = []
    for s, a, b in zip(sizes, pre, post):
        if a == b == 0 and merged and merged[-1][1:] == (0, 0):
            merged[-1] = (merged[-1][0] * s, 0, 0)
        else:
            merged.append((s, a, b))
    return merged


def _call(k: Any, node: Any, x: Any, pre: list[int], post: list[int], value: int, out: Any) -> None:
    k.call(
        PAD,
        node,
        input=x.vi,
        pre_pad=k.int_list(pre),
        post_pad=k.int_list(post),
        pad_value=k.int_(value),
        out=out.vi,
    )


def lower_pad(k: Any, node: Any) -> None:
    """aten::pad.default, constant mode only."""
    mode = k.aten_arg(node, "mode", "constant")
    if mode != "constant":
        raise k.unsupported(node, f"padding mode '{mode}' (only constant)")
    _emit(k, node, k.aten_arg(node, "value", None))


def lower_constant_pad_nd(k: Any, node: Any) -> None:
    """aten::constant_pad_nd.default."""
    _emit(k, node, k.aten_arg(node, "value", 0))


pattern("aten::pad.default", annotate=Annotate("shared"), lower=lower_pad, emits=(PAD,))
pattern(
    "aten::constant_pad_nd.default",
    annotate=Annotate("shared"),
    lower=lower_constant_pad_nd,
    emits=(PAD,),
)
