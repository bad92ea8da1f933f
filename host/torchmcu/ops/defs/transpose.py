"""cortex_m::transpose: a permutation of the dims, any element size.

Defined here once: the argument check (the rules firmware/kernels/cortex_m/transpose.c
enforces, naming the same argument), the reference, the TOSA lowering, the contract, and the
aten rule that emits it (aten::transpose.int), which gets the lowering Kit
(torchmcu/lower/kit.py) as `k`. The layout moves of lower/layout.py (NCHW <-> NHWC at the
program's boundaries) emit it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, Npu, op, pattern
from torchmcu.ops.layout import NHWC, disjoint
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)

# The body of its docs/operators.md section (hand-kept until step 8 generates it from this)
CONTRACT = """\
- Any element size (int8 typical; int16/int32/float32 also moved byte-exactly),
  rank 1..6 (argument 0 otherwise); `perm` a permutation of `0..rank-1` (negative items
  allowed, taken mod rank; argument 1 otherwise); `out` same dtype with
  `out.sizes[i] = input.sizes[perm[i]]`, sharing no byte with `input` (argument 2 otherwise).
- Logical: `out[i_0..] = input[j]` with `j[perm[k]] = i_k`. Both tensors are addressed
  through their own dim orders (ExecuTorch's C++ assumes contiguous; torchmcu emits
  contiguous)."""


def permutation(perm: Sequence[Any], rank: int) -> list[int] | None:
    """transpose.c's perm rule: `rank` ints in [-rank, rank), each dim once (mod rank);
    None when perm breaks it."""
    items: list[int] = []
    for p in perm:
        if not isinstance(p, (int, np.integer)) or isinstance(p, bool) or not -rank <= p < rank:
            return None
        items.append(int(p) % rank)
    if len(items) != rank or len(set(items)) != rank:
        return None
    return items


def transpose(input: np.ndarray, perm: Sequence[int]) -> np.ndarray:
    """out = input.permute(perm) (logical arrays; any dtype)."""
    x = np.asarray(input)
    items = permutation(perm, x.ndim)
    if items is None:
        raise ValueError(f"perm {list(perm)} is not a permutation of a rank-{x.ndim} tensor's dims")
    return np.ascontiguousarray(np.transpose(x, items))


def check(b: Bound) -> None:
    """transpose.c's TM_ARG_CHECKs, in its order, on a bound call."""
    x = b.value("input")
    if not (
        isinstance(x, pm.Tensor)
        and 1 <= len(x.sizes) <= MAX_DIMS
        and x.scalar_type in pm.ELEMENT_SIZE
    ):
        raise b.reject("input", "expected a tensor of rank 1..6")
    rank = len(x.sizes)
    perm = b.scalar("perm") if isinstance(b.value("perm"), pm.IntList) else None
    items = permutation(perm, rank) if perm is not None else None
    if items is None:
        raise b.reject("perm", f"expected a permutation of the {rank} dims")
    out = b.value("out")
    want = [x.sizes[p] for p in items]
    if not (
        isinstance(out, pm.Tensor)
        and out.scalar_type == x.scalar_type
        and list(out.sizes) == want
        and disjoint(x, out)
    ):
        raise b.reject("out", f"expected a tensor of input's type, sizes {want}, apart from input")


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out."""
    return b.to_out(transpose(b.logical("input"), b.perm))


def physical_perm(a: Any) -> list[int]:
    """The permutation of physical axes that the call performs on memory (a: a checked
    Bound)."""
    t, out = a.tensor("input"), a.tensor("out")
    perm = permutation(a.perm, len(t.sizes))
    assert perm is not None
    inverse_in = [0] * len(t.sizes)
    for axis, d in enumerate(t.dim_order):
        inverse_in[d] = axis
    # out physical axis k holds logical out dim out.dim_order[k] = logical input dim
    # perm[out.dim_order[k]], stored at input physical axis inverse_in[...].
    return [inverse_in[perm[d]] for d in out.dim_order]


def collapsed_transpose(
    shape: tuple[int, ...], perm: list[int]
) -> tuple[tuple[int, ...], list[int]]:
    """The same byte move with size-1 axes dropped and input axes that stay adjacent and in
    order merged: (input shape, permutation) of the smallest rank (at least 2)."""
    kept = [p for p in perm if shape[p] > 1]
    groups: list[list[int]] = []  # runs of consecutive input axes, in output order
    for p in kept:
        if (
            groups
            and p > groups[-1][-1]
            and all(shape[q] == 1 for q in range(groups[-1][-1] + 1, p))
        ):
            groups[-1].append(p)  # the next input axis, or only size-1 axes lie between
        else:
            groups.append([p])
    order = sorted(range(len(groups)), key=lambda k: groups[k][0])  # input order of the runs
    sizes = [int(np.prod([shape[q] for q in grp])) for grp in groups]
    in_shape = tuple(sizes[k] for k in order)
    merged = [order.index(k) for k in range(len(groups))]
    while len(in_shape) < 2:
        in_shape, merged = (1, *in_shape), [0] + [m + 1 for m in merged]
    return in_shape, merged


def lower_tosa(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    """TOSA TRANSPOSE of the physical shapes (g: tosa Graph, a: its Bound); a reshape when
    only size-1 axes move."""
    a.checked()
    x = read(a.index("input"))
    perm = physical_perm(a)
    shape = tuple(x.shape[p] for p in perm)
    if a.physical_shape("out") != shape:
        raise a.error(f"transposed shape {list(shape)} does not fit the out tensor")
    moved = [p for p in perm if x.shape[p] > 1]
    if moved == sorted(moved):  # only size-1 axes move: the bytes stay where they are
        return g.reshape(x, shape)
    if g.family == "u55":
        # Vela 5.2 splits a rank-4 TRANSPOSE into two passes on Ethos-U55 but runs the same
        # move as one when it is expressed with the fewest axes (NCHW -> NHWC of ResNet8's
        # input: 2 x 1,152 cycles -> 1,152). U65 and U85 are slower that way (measured), so
        # they keep the tensor's own rank.
        in_shape, merged = collapsed_transpose(x.shape, perm)
        if len(merged) < len(perm):
            t = g.transpose(g.reshape(x, in_shape), merged)
            return g.reshape(t, shape)
    return g.transpose(x, perm)


TRANSPOSE = op(
    "cortex_m::transpose.out(Tensor input, int[] perm, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    npu=Npu(lower=lower_tosa, doc="TOSA TRANSPOSE (a RESHAPE when only size-1 dims move)"),
    contract=CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def lower_transpose(k: Any, node: Any) -> None:
    """aten::transpose.int: a view when only size-1 dims move, else a cortex_m::transpose of
    the contiguous input; qparams are shared with the input."""
    x, qs, act, _ = k.shared_input(node, "transpose")
    d0 = int(k.aten_arg(node, "dim0")) % x.rank
    d1 = int(k.aten_arg(node, "dim1")) % x.rank
    perm = list(range(x.rank))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    out_shape = k.shape_of(node)
    moved = [p for p in perm if x.sizes[p] > 1]
    if moved == sorted(moved) or k.matmul_rhs_transpose(node):
        # only size-1 dims move: same bytes; or only matmuls read it, and they read x
        # (Kit.untransposed_rhs): the value bound here is never read
        out = k.alias(x, out_shape, nhwc=False)
    else:
        out = k.new_int8(node.name, out_shape, None, nhwc=False).with_(
            scale=x.scale, zero_point=x.zero_point
        )
        k.call(TRANSPOSE, node, input=x.vi, perm=k.int_list(perm), out=out.vi)
    k.bind_shared(node, qs, act, out)


def _permute(k: Any, node: Any, x: Any, src_sizes: list[int], perm: list[int]) -> Any:
    """x's bytes viewed as contiguous src_sizes, permuted by perm: a new contiguous value of
    x's qparams (an alias when only size-1 dims move)."""
    src = k.alias(x, src_sizes, nhwc=False)
    out_sizes = [src_sizes[p] for p in perm]
    moved = [p for p in perm if src_sizes[p] > 1]
    if moved == sorted(moved):
        return k.alias(src, out_sizes, nhwc=False)
    out = k.new_int8(node.name, out_sizes, None, nhwc=False).with_(
        scale=x.scale, zero_point=x.zero_point
    )
    k.call(TRANSPOSE, node, input=src.vi, perm=k.int_list(perm), out=out.vi)
    return out


def lower_permute(k: Any, node: Any) -> None:
    """aten::permute.default of any rank: one cortex_m::transpose of the memory order. NHWC
    bytes are permuted as they lie (their memory order is [N, H, W, C]); a 4-D result is NHWC
    when that is the bytes' own order (x.permute(0, 3, 1, 2) of channels-last input data
    moves nothing); any other result is contiguous."""
    x, qs, act, _ = k.shared_input(node, "permute", keep_nhwc=True)
    dims = [int(d) % x.rank for d in k.aten_arg(node, "dims")]
    want = k.shape_of(node)
    if x.nhwc and not x.layout_free:
        memory = list(NHWC)  # memory axis j holds logical dim NHWC[j]
        src_sizes = [x.sizes[d] for d in memory]
        perm = [memory.index(d) for d in dims]  # out dim i = memory axis perm[i]
    else:
        x = k.as_contiguous(x)
        src_sizes, perm = list(x.sizes), dims
    nhwc_perm = [perm[d] for d in NHWC] if len(want) == 4 else []
    moved = [p for p in nhwc_perm if src_sizes[p] > 1]
    if nhwc_perm and moved == sorted(moved):  # an NHWC out is these bytes as they lie
        out = k.alias(_permute(k, node, x, src_sizes, nhwc_perm), want, nhwc=True)
    else:
        out = _permute(k, node, x, src_sizes, perm)
    k.bind_shared(node, qs, act, out)


def lower_channel_shuffle(k: Any, node: Any) -> None:
    """aten::channel_shuffle.default (and the view / transpose / view idiom the exporter makes
    one, quantize/layout_idioms.py): channel g * (C / g) + j goes to j * g + i, one transpose
    of the channel axis split in two: [N*H*W, g, C/g] -> [N*H*W, C/g, g] for NHWC bytes,
    [N, g, C/g, H*W] -> [N, C/g, g, H*W] for contiguous ones."""
    x, qs, act, _ = k.shared_input(node, "channel shuffle", keep_nhwc=True)
    g = int(k.aten_arg(node, "groups"))
    if x.rank < 3 or g < 1 or x.sizes[1] % g:
        raise k.unsupported(node, f"channel shuffle of sizes {x.sizes} in {g} groups")
    n, c, rest = x.sizes[0], x.sizes[1], int(np.prod(x.sizes[2:]))
    if x.nhwc and not x.layout_free:
        out = _permute(k, node, x, [n * rest, g, c // g], [0, 2, 1])
        out = k.alias(out, x.sizes, nhwc=True)
    else:
        x = k.as_contiguous(x)
        out = _permute(k, node, x, [n, g, c // g, rest], [0, 2, 1, 3])
        out = k.alias(out, x.sizes, nhwc=False)
    k.bind_shared(node, qs, act, out)


pattern(
    "aten::transpose.int", annotate=Annotate("shared"), lower=lower_transpose, emits=(TRANSPOSE,)
)
pattern(
    "aten::permute.default", annotate=Annotate("shared"), lower=lower_permute, emits=(TRANSPOSE,)
)
pattern(
    "aten::channel_shuffle.default",
    annotate=Annotate("shared"),
    lower=lower_channel_shuffle,
    emits=(TRANSPOSE,),
)
