"""dim_order_ops::_clone_dim_order.out, aten::view_copy.out, permute_copy.out, flip.out, cat.out:
the copies of any element size (firmware/kernels/portable/{clone_dim_order,view_copy,
permute_copy,flip,cat}.c), and the fp32 rules of aten::permute, transpose, channel_shuffle, flip,
cat, stack, repeat, expand and the views (flatten, view, reshape, squeeze, unsqueeze, dropout,
clone, contiguous: the same bytes, no call). flip has no int8 pattern: in an int8 model it runs
in float32 between a dequantize and a quantize (the float fallback). Conventions:
defs/portable.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from torchmcu.ops.core import Bound, OpDef, pattern
from torchmcu.ops.defs.portable import is_copyable, norm_dim, portable
from torchmcu.ops.defs.views import VIEWS
from torchmcu.ops.layout import disjoint, laid_out_as
from torchmcu.pte import program as pm

INT32_MAX = 2**31 - 1
UINT32_MAX = 2**32 - 1

CLONE_CONTRACT = """\
- ExecuTorch's portable copy into another dim order; its Cortex-M flow inserts it (e.g. before
  flattening an NHWC activation for a linear layer).
- Any element size; `out` has the input's dtype and sizes; every logical element is copied, both
  tensors addressed through their own dim orders. `dim_order`, when given, must equal out's dim
  order (argument 2 otherwise); `non_blocking` is accepted and ignored."""

VIEW_COPY_CONTRACT = """\
- Same elements, row-major order, new sizes; one `-1` is inferred. Both tensors contiguous in
  memory (a channels-last tensor first goes through `_clone_dim_order`, as ExecuTorch does).
  A byte copy; `out` may share memory with `self`."""

PERMUTE_COPY_CONTRACT = """\
- `dims` a permutation; `out.sizes[k] = self.sizes[dims[k]]`, `out[i] = self[j]` with
  `j[dims[k]] = i_k`. Any dim orders; no aliasing."""

FLIP_CONTRACT = """\
- `out[i] = self[j]` with `j_d = sizes[d] - 1 - i_d` for each d in `dims`, `j_d = i_d` for the
  others. `dims`: distinct dims in `[-rank, rank)` (a 0-d tensor takes -1 and 0), possibly
  none (a copy). Any element size; `out` has the input's dtype and sizes. Any dim orders; no
  aliasing."""

CAT_CONTRACT = """\
- `tensors`: a TensorList of >= 1 tensors of out's dtype and rank, sizes equal to out's except
  along `dim` (in `[-rank, rank)` of out), where they add up to out's. A 1-D tensor with 0
  elements is skipped, as torch. Any dim orders; the inputs must not share memory with `out`."""


def view_copy(self: np.ndarray, size: Sequence[int]) -> np.ndarray:
    """The elements in row-major order under new sizes (one -1 inferred)."""
    if list(size).count(-1) > 1 or any(s < -1 for s in size):
        raise ValueError("view_copy: bad size")
    return self.reshape(tuple(size)).copy()


def permute_copy(self: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """out.sizes[k] = self.sizes[dims[k]]."""
    perm = [norm_dim(d, self.ndim) for d in dims]
    if sorted(perm) != list(range(self.ndim)):
        raise ValueError("permute_copy: dims is not a permutation")
    return np.ascontiguousarray(np.transpose(self, perm))


def flip(self: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """self reversed along each of dims (distinct, negative counting from the end)."""
    axes = [norm_dim(d, self.ndim) for d in dims]
    if len(set(axes)) != len(axes):
        raise ValueError("flip: dims has duplicates")
    if self.ndim == 0:
        return self.copy()
    return np.ascontiguousarray(np.flip(self, axis=tuple(axes)))


def cat(tensors: Sequence[np.ndarray], dim: int = 0) -> np.ndarray:
    """The tensors one after another along dim; 1-D empty tensors are skipped."""
    kept = [t for t in tensors if not (t.ndim == 1 and t.size == 0)]
    if not kept:
        return np.zeros((0,), tensors[0].dtype)
    return np.concatenate(kept, axis=norm_dim(dim, kept[0].ndim))


def _copyable(b: Bound, name: str) -> pm.Tensor:
    v = b.value(name)
    if not is_copyable(v):
        raise b.reject(name, "expected a tensor of rank 0..6 and a handled dtype")
    return v  # type: ignore[return-value]


def _dims(b: Bound, name: str, rank: int) -> list[int] | None:
    """An IntList of `rank` items, or None when the argument is none."""
    v = b.value(name)
    items = b.scalar(name) if isinstance(v, pm.IntList) else None
    return items if items is not None and len(items) == rank else None


def _distinct_dims(b: Bound, name: str, rank: int, all_dims: bool, what: str) -> list[int]:
    """tm_copy_dims_args: distinct dims of a rank-`rank` tensor, all of them (a permutation)
    or any number, made non-negative."""
    v = b.value(name)
    items = b.scalar(name) if isinstance(v, pm.IntList) else None
    r = max(rank, 1)
    dims: list[int] = []
    fits = items is not None and (len(items) == rank if all_dims else len(items) <= r)
    for d in items if fits else [None]:  # type: ignore[union-attr]
        if d is None or not -r <= d < r or d % r in dims:
            raise b.reject(name, what)
        dims.append(d % r)
    return dims


def _same_out(b: Bound, x: pm.Tensor) -> pm.Tensor:
    """out: a tensor of x's dtype and sizes, apart from it."""
    out = b.value("out")
    if not (
        isinstance(out, pm.Tensor)
        and out.scalar_type == x.scalar_type
        and list(out.sizes) == list(x.sizes)
        and disjoint(x, out)
    ):
        raise b.reject("out", "expected a tensor of the input's dtype and sizes, apart from it")
    return out


def check_clone(b: Bound) -> None:
    """clone_dim_order.c's TM_ARG_CHECKs, in its order."""
    x = _copyable(b, "self")
    if not isinstance(b.value("non_blocking"), pm.Bool):
        raise b.reject("non_blocking", "expected a Bool")
    out = _same_out(b, x)
    if not b.is_none("dim_order") and _dims(b, "dim_order", len(x.sizes)) != list(out.dim_order):
        raise b.reject("dim_order", "expected the out tensor's dim order")


def check_view_copy(b: Bound) -> None:
    """view_copy.c's TM_ARG_CHECKs, in its order."""
    x = _copyable(b, "self")
    if not laid_out_as(x.sizes, x.dim_order, range(len(x.sizes))):
        raise b.reject("self", "expected a contiguous tensor")
    v = b.value("size")
    size = b.scalar("size") if isinstance(v, pm.IntList) else None
    if size is None or len(size) > 6:
        raise b.reject("size", "expected an int list of 0..6 items")
    known, inferred = 1, -1
    for k, s in enumerate(size):
        if s == -1 and inferred < 0:
            inferred = k
        elif not (0 <= s <= INT32_MAX) or known * s > UINT32_MAX:
            raise b.reject("size", "expected sizes in [0, 2^31) and at most one -1")
        else:
            known *= s
    if inferred >= 0 and (known == 0 or x.numel % known):
        raise b.reject("size", f"cannot infer a size of {x.numel} elements")
    if inferred < 0 and known != x.numel:
        raise b.reject("size", f"sizes {size} do not hold {x.numel} elements")
    want = [x.numel // known if k == inferred else s for k, s in enumerate(size)]
    out = b.value("out")
    if not (
        isinstance(out, pm.Tensor)
        and out.scalar_type == x.scalar_type
        and list(out.sizes) == want
        and laid_out_as(out.sizes, out.dim_order, range(len(out.sizes)))
    ):
        raise b.reject("out", f"expected a contiguous tensor of the input's dtype and sizes {want}")


def check_permute_copy(b: Bound) -> None:
    """permute_copy.c's TM_ARG_CHECKs, in its order."""
    x = _copyable(b, "self")
    rank = len(x.sizes)
    perm = _distinct_dims(b, "dims", rank, True, f"expected a permutation of the {rank} dims")
    out = b.value("out")
    if not (
        isinstance(out, pm.Tensor)
        and out.scalar_type == x.scalar_type
        and list(out.sizes) == [x.sizes[p] for p in perm]
        and disjoint(x, out)
    ):
        raise b.reject(
            "out", "expected the permuted sizes, the input's dtype, apart from the input"
        )


def check_flip(b: Bound) -> None:
    """flip.c's TM_ARG_CHECKs, in its order."""
    x = _copyable(b, "self")
    rank = len(x.sizes)
    _distinct_dims(b, "dims", rank, False, f"expected distinct dims of a rank-{rank} tensor")
    _same_out(b, x)


def check_cat(b: Bound) -> None:
    """cat.c's TM_ARG_CHECKs, in its order."""
    items = b.value("tensors")
    if not (isinstance(items, pm.TensorList) and len(items.items) >= 1):
        raise b.reject("tensors", "expected a TensorList of one or more tensors")
    out = b.value("out")
    if not (is_copyable(out) and len(out.sizes) >= 1):  # type: ignore[union-attr]
        raise b.reject("out", "expected a tensor of rank 1..6 and a handled dtype")
    rank = len(out.sizes)  # type: ignore[union-attr]
    v = b.value("dim")
    if not (isinstance(v, pm.Int) and -rank <= v.value < rank):
        raise b.reject("dim", f"expected a dim of the rank-{rank} out")
    dim = v.value % rank
    total = 0
    for k in items.items:
        t = b.values[k]
        if not (
            isinstance(t, pm.Tensor)
            and t.scalar_type == out.scalar_type  # type: ignore[union-attr]
            and 1 <= len(t.sizes) <= 6
            and disjoint(t, out)  # type: ignore[arg-type]
        ):
            raise b.reject("tensors", "expected tensors of out's dtype, apart from out")
        if len(t.sizes) == 1 and t.numel == 0:
            continue  # skipped, as torch
        if len(t.sizes) != rank or any(
            d != dim and t.sizes[d] != out.sizes[d]  # type: ignore[union-attr]
            for d in range(rank)
        ):
            raise b.reject("tensors", f"expected out's sizes {out.sizes} but along dim {dim}")  # type: ignore[union-attr]
        total += t.sizes[dim]
    if total != out.sizes[dim]:  # type: ignore[union-attr]
        raise b.reject("out", f"expected {total} along dim {dim}")


def _clone_reference(b: Any) -> np.ndarray:
    return b.to_out(b.logical("self"))


CLONE_DIM_ORDER = portable(
    "dim_order_ops::_clone_dim_order.out(Tensor self, *, bool non_blocking=False,"
    " int[]? dim_order=None, Tensor(a!) out) -> Tensor(a!)",
    reference=_clone_reference,
    check=check_clone,
    contract=CLONE_CONTRACT,
)
VIEW_COPY = portable(
    "aten::view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out) -> Tensor(a!)",
    reference=lambda b: b.to_out(view_copy(b.logical("self"), b.size)),
    check=check_view_copy,
    contract=VIEW_COPY_CONTRACT,
)


def _over_dims(name: str, fn: Any, check: Any, contract: str) -> OpDef:
    """A copy that reorders self's elements by a list of dims (permute_copy, flip)."""
    return portable(
        f"aten::{name}.out(Tensor self, int[] dims, *, Tensor(a!) out) -> Tensor(a!)",
        reference=lambda b: b.to_out(fn(b.logical("self"), b.dims)),
        check=check,
        contract=contract,
    )


PERMUTE_COPY = _over_dims("permute_copy", permute_copy, check_permute_copy, PERMUTE_COPY_CONTRACT)
FLIP = _over_dims("flip", flip, check_flip, FLIP_CONTRACT)
CAT = portable(
    "aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)",
    reference=lambda b: b.to_out(cat(b.logical_list("tensors"), b.dim)),
    check=check_cat,
    contract=CAT_CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def lower_view(k: Any, node: Any) -> None:
    """flatten/view/reshape/squeeze/dropout of a contiguous float tensor: the same bytes."""
    x = k.float_input(node.args[0])
    out_shape = k.shape_of(node)
    k.bind(node, x if out_shape == x.sizes else k.alias(x, out_shape, nhwc=False))


def lower_permute(k: Any, node: Any) -> None:
    x = k.float_input(k.aten_arg(node, "self"))
    dims = [int(d) for d in k.aten_arg(node, "dims")]
    k.call(PERMUTE_COPY, node, self=x.vi, dims=k.int_list(dims), out=k.float_out(node).vi)


def lower_flip(k: Any, node: Any) -> None:
    x = k.float_input(k.aten_arg(node, "self"))
    dims = [int(d) for d in k.aten_arg(node, "dims")]
    k.call(FLIP, node, self=x.vi, dims=k.int_list(dims), out=k.float_out(node).vi)


def lower_cat(k: Any, node: Any) -> None:
    items = [k.float_input(t).vi for t in k.aten_arg(node, "tensors")]
    dim = int(k.aten_arg(node, "dim", 0))
    k.call(CAT, node, tensors=k.tensor_list(items), dim=k.int_(dim), out=k.float_out(node).vi)


def _permuted(k: Any, node: Any, x: Any, sizes: list[int], dims: list[int]) -> Any:
    """x's float bytes viewed as contiguous `sizes`, permuted by dims into a new value."""
    out = k.new_float(node.name, [sizes[d] for d in dims])
    k.call(
        PERMUTE_COPY, node, self=k.alias(x, sizes, nhwc=False).vi, dims=k.int_list(dims), out=out.vi
    )
    return out


def lower_transpose(k: Any, node: Any) -> None:
    x = k.float_input(k.aten_arg(node, "self"))
    dims = list(range(x.rank))
    d0, d1 = int(k.aten_arg(node, "dim0")) % x.rank, int(k.aten_arg(node, "dim1")) % x.rank
    dims[d0], dims[d1] = dims[d1], dims[d0]
    k.bind(node, _permuted(k, node, x, x.sizes, dims))


def lower_channel_shuffle(k: Any, node: Any) -> None:
    """[N, g, C/g, rest] -> [N, C/g, g, rest]: one permute_copy."""
    x = k.float_input(k.aten_arg(node, "self"))
    g = int(k.aten_arg(node, "groups"))
    if x.rank < 3 or g < 1 or x.sizes[1] % g:
        raise k.unsupported(node, f"channel shuffle of sizes {x.sizes} in {g} groups")
    rest = int(np.prod(x.sizes[2:]))
    out = _permuted(k, node, x, [x.sizes[0], g, x.sizes[1] // g, rest], [0, 2, 1, 3])
    k.bind(node, k.alias(out, x.sizes, nhwc=False))


def _cat(k: Any, node: Any, items: list[Any], dim: int, sizes: list[int]) -> Any:
    out = k.new_float(node.name, sizes)
    k.call(CAT, node, tensors=k.tensor_list([t.vi for t in items]), dim=k.int_(dim), out=out.vi)
    return out


def lower_stack(k: Any, node: Any) -> None:
    """Each input viewed with a size-1 dim at `dim`, then cat."""
    items = [k.float_input(t) for t in k.aten_arg(node, "tensors")]
    dim = int(k.aten_arg(node, "dim", 0)) % (items[0].rank + 1)
    parts = [k.alias(t, t.sizes[:dim] + [1] + t.sizes[dim:], nhwc=False) for t in items]
    k.bind(node, _cat(k, node, parts, dim, k.shape_of(node)))


def _tiled(k: Any, node: Any, repeats: list[int]) -> None:
    """The input (leading size-1 dims added) cat with itself repeats[d] times along each d."""
    x = k.float_input(node.args[0])
    x = k.alias(x, [1] * (len(repeats) - x.rank) + x.sizes, nhwc=False)
    for d, r in enumerate(repeats):
        if r > 1:
            x = _cat(k, node, [x] * r, d, [s * r if j == d else s for j, s in enumerate(x.sizes)])
    k.bind(node, x)


def lower_repeat(k: Any, node: Any) -> None:
    _tiled(k, node, [int(r) for r in k.aten_arg(node, "repeats")])


def lower_expand(k: Any, node: Any) -> None:
    want = k.shape_of(node)
    x = k.float_input(node.args[0])
    sizes = [1] * (len(want) - x.rank) + x.sizes
    if any(s not in (1, w) for s, w in zip(sizes, want)):
        raise k.unsupported(node, f"expand of sizes {x.sizes} to {want}")
    _tiled(k, node, [w // s for s, w in zip(sizes, want)])


pattern("aten::permute.default", lower_float=lower_permute, emits=(PERMUTE_COPY,))
pattern("aten::transpose.int", lower_float=lower_transpose, emits=(PERMUTE_COPY,))
pattern("aten::channel_shuffle.default", lower_float=lower_channel_shuffle, emits=(PERMUTE_COPY,))
pattern("aten::flip.default", lower_float=lower_flip, emits=(FLIP,))
pattern("aten::cat.default", lower_float=lower_cat, emits=(CAT,))
pattern("aten::stack.default", lower_float=lower_stack, emits=(CAT,))
pattern("aten::repeat.default", lower_float=lower_repeat, emits=(CAT,))
pattern("aten::expand.default", lower_float=lower_expand, emits=(CAT,))
pattern(
    *VIEWS,  # the int8 view patterns' targets (defs/views.py)
    lower_float=lower_view,
)
