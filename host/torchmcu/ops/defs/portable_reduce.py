"""aten::_softmax.out, mean.out, amax.out, native_layer_norm.out: the fp32 reductions
(firmware/kernels/portable/{softmax,mean,native_layer_norm}.c; amax.out is mean.c's), and the
fp32 rules of aten::softmax/_softmax, mean.dim/adaptive_avg_pool2d, amax, sum.dim_IntList (the
mean times the count) and layer_norm that
emit them.
Conventions: defs/portable.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from torchmcu.ops.core import Bound, pattern
from torchmcu.ops.defs.portable import (
    F32,
    FLOAT,
    MAX_DIMS,
    check_unary,
    dim_arg,
    f32,
    f32_tensor,
    int_list,
    is_f32,
    norm_dim,
    optional,
    portable,
)
from torchmcu.ops.defs.portable_elementwise import MUL
from torchmcu.ops.layout import disjoint, laid_out_as
from torchmcu.pte import program as pm

SOFTMAX_CONTRACT = """\
- Along `dim`: `exp(x - max) / sum(exp(x - max))` (sum in index order, then a multiply by its
  reciprocal). `half_to_float` must be false. Any layout, `out` the input's."""

MEAN_CONTRACT = """\
- Mean over the listed dims (no repeats); `None` or `[]` reduces every dim. `keepdim` keeps
  reduced dims as size 1, else they are dropped; `out` must have exactly those sizes.
  `dtype` None or 6 (Float). Sums in float32 in the input's logical index order, then one
  division by the count (0 elements: NaN, as torch). Any dim orders (the global average pool
  of an NHWC activation is `mean(x, [-1,-2], True)`)."""

LAYER_NORM_CONTRACT = """\
- `normalized_shape` (1..rank items) equals input's trailing sizes; `weight`, `bias` None or
  of sizes `normalized_shape`; `eps` a finite Double >= 0. Per row of the `R` trailing
  elements: `mean = sum/R`, `var = sum((x-mean)^2)/R` (two passes, biased), `rstd =
  1/sqrtf(var + eps)`, `out0 = (x-mean)*rstd*weight + bias`.
- `out0` the input's sizes; `out1` (mean) and `out2` (rstd): the input's rank with the
  normalized dims of size 1 (torch's shapes). All contiguous. The returned TensorList
  (argument 8), when its items are resolved, must be out0, out1, out2 in order."""


def _softmax(self: np.ndarray, dim: int, half_to_float: bool = False) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)) along dim."""
    if half_to_float:
        raise ValueError("_softmax: half_to_float is not supported")
    x = f32(self).astype(np.float64)
    if x.ndim == 0:
        return np.ones_like(self)
    d = norm_dim(dim, x.ndim)
    e = np.exp(x - x.max(axis=d, keepdims=True))
    return (e / e.sum(axis=d, keepdims=True)).astype(F32)


def mean(
    self: np.ndarray,
    dim: Sequence[int] | None = None,
    keepdim: bool = False,
    dtype: int | None = None,
) -> np.ndarray:
    """Mean over dims (None or [] = all dims); keepdim keeps them as size 1."""
    if dtype not in (None, 6):
        raise ValueError("mean: dtype must be None or Float (6)")
    x = f32(self)
    dims = list(range(x.ndim)) if not dim else [norm_dim(d, x.ndim) for d in dim]
    if len(set(dims)) != len(dims):
        raise ValueError("mean: repeated dim")
    if x.ndim == 0:
        return x.copy()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(x.astype(np.float64).mean(axis=tuple(dims), keepdims=keepdim), F32)


def _dims(x: np.ndarray, dim: Sequence[int] | None, what: str) -> tuple[int, ...]:
    dims = list(range(x.ndim)) if not dim else [norm_dim(d, x.ndim) for d in dim]
    if len(set(dims)) != len(dims):
        raise ValueError(f"{what}: repeated dim")
    return tuple(dims)


def amax(self: np.ndarray, dim: Sequence[int] | None = None, keepdim: bool = False) -> np.ndarray:
    """Maximum over dims (None or [] = all dims); NaN if any element is NaN."""
    x = f32(self)
    if x.ndim == 0:
        return x.copy()
    dims = _dims(x, dim, "amax")
    if x.size == 0:
        shape = [1 if d in dims else s for d, s in enumerate(x.shape)]
        out = np.full(shape, -np.inf, F32)
        return out if keepdim else out.reshape([s for d, s in enumerate(x.shape) if d not in dims])
    return np.asarray(np.max(x, axis=dims, keepdims=keepdim), F32)


def native_layer_norm(
    input: np.ndarray,
    normalized_shape: Sequence[int],
    weight: np.ndarray | None,
    bias: np.ndarray | None,
    eps: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(out, mean, rstd) over the trailing normalized_shape dims (biased variance);
    mean and rstd keep the input's rank with those dims of size 1."""
    x = f32(input).astype(np.float64)
    k = len(normalized_shape)
    if k < 1 or tuple(x.shape[x.ndim - k :]) != tuple(normalized_shape):
        raise ValueError("native_layer_norm: normalized_shape is not the trailing sizes")
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - mu) * rstd
    if weight is not None:
        y = y * f32(weight).astype(np.float64)
    if bias is not None:
        y = y + f32(bias).astype(np.float64)
    return y.astype(F32), mu.astype(F32), rstd.astype(F32)


def check_softmax(b: Bound) -> None:
    """softmax.c's TM_ARG_CHECKs, in its order."""
    x = check_unary(b)
    dim_arg(b, "dim", len(x.sizes))
    half = b.value("half_to_float")
    if not (isinstance(half, pm.Bool) and not half.value):
        raise b.reject("half_to_float", "expected the Bool false")


def check_mean(b: Bound) -> None:
    """mean.c's TM_ARG_CHECKs, in its order (amax.out's too, without dtype)."""
    x = f32_tensor(b, "self")
    rank = len(x.sizes)
    reduced = [False] * rank
    dims = [] if b.is_none("dim") else int_list(b, "dim", 0, MAX_DIMS)
    r = max(rank, 1)
    for d in dims:
        if not -r <= d < r or (rank and reduced[d % r]):
            raise b.reject("dim", f"expected distinct dims of a rank-{rank} tensor")
        if rank:
            reduced[d % r] = True
    reduced = [flag or not dims for flag in reduced]
    if not isinstance(b.value("keepdim"), pm.Bool):
        raise b.reject("keepdim", "expected a Bool")
    dtype = b.value("dtype") if "dtype" in b.op.schema.A else pm.Null()
    if not (isinstance(dtype, pm.Null) or (isinstance(dtype, pm.Int) and dtype.value == FLOAT)):
        raise b.reject("dtype", "expected None or Float (6)")
    keepdim = b.keepdim
    want = [1 if red else s for s, red in zip(x.sizes, reduced) if not red or keepdim]
    out = b.value("out")
    if not (is_f32(out) and list(out.sizes) == want and disjoint(x, out)):  # type: ignore[union-attr, arg-type]
        raise b.reject("out", f"expected a float32 {want} tensor apart from the input")


def _contiguous(t: pm.Tensor) -> bool:
    return laid_out_as(t.sizes, t.dim_order, range(len(t.sizes)))


def check_native_layer_norm(b: Bound) -> None:
    """native_layer_norm.c's TM_ARG_CHECKs, in its order (the returned TensorList, argument 8,
    is the interpreter's call-shape rule)."""
    x = f32_tensor(b, "input", 1, MAX_DIMS)
    if not _contiguous(x):
        raise b.reject("input", "expected a contiguous tensor")
    rank = len(x.sizes)
    shape = int_list(b, "normalized_shape", 1, rank)
    if list(shape) != list(x.sizes[rank - len(shape) :]):
        raise b.reject("normalized_shape", f"expected the trailing sizes of {x.sizes}")
    for name in ("weight", "bias"):
        if b.is_none(name):
            continue
        t = b.value(name)
        if not (is_f32(t) and list(t.sizes) == list(shape) and _contiguous(t)):  # type: ignore[union-attr, arg-type]
            raise b.reject(name, f"expected None or a contiguous float32 {shape} tensor")
    eps = b.value("eps")
    if not (isinstance(eps, pm.Double) and 0.0 <= eps.value <= 3.4e38):
        raise b.reject("eps", "expected a finite Double >= 0")
    out0 = b.value("out0")
    if not (is_f32(out0) and list(out0.sizes) == list(x.sizes) and _contiguous(out0)):  # type: ignore[union-attr, arg-type]
        raise b.reject("out0", "expected a contiguous float32 tensor of the input's sizes")
    stat = [s if d + len(shape) < rank else 1 for d, s in enumerate(x.sizes)]
    for name in ("out1", "out2"):
        t = b.value(name)
        if not (is_f32(t) and list(t.sizes) == stat and _contiguous(t)):  # type: ignore[union-attr, arg-type]
            raise b.reject(name, f"expected a contiguous float32 {stat} tensor")


SOFTMAX = portable(
    "aten::_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out) -> Tensor(a!)",
    reference=lambda b: b.to_out(_softmax(b.logical("self"), b.dim, b.half_to_float)),
    check=check_softmax,
    contract=SOFTMAX_CONTRACT,
)
MEAN = portable(
    "aten::mean.out(Tensor self, int[1]? dim, bool keepdim=False, *,"
    " ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    reference=lambda b: b.to_out(mean(b.logical("self"), b.dim, b.keepdim, b.dtype)),
    check=check_mean,
    contract=MEAN_CONTRACT,
)

AMAX = portable(
    "aten::amax.out(Tensor self, int[1] dim=[], bool keepdim=False, *, Tensor(a!) out)"
    " -> Tensor(a!)",
    "mean.c",
    reference=lambda b: b.to_out(amax(b.logical("self"), b.dim, b.keepdim)),
    check=check_mean,
    contract="- mean.out's dims and keepdim rules (no dtype); the maximum, NaN where a reduced"
    " element is NaN, -inf over zero elements.",
)


def _layer_norm_reference(b: Any) -> tuple[np.ndarray, ...]:
    results = native_layer_norm(
        b.logical("input"), b.normalized_shape, optional(b, "weight"), optional(b, "bias"), b.eps
    )
    return tuple(b.to_out(r, out) for r, out in zip(results, ("out0", "out1", "out2")))


# The layer norm's three outs come back as one TensorList (how ExecuTorch's emitter returns
# a tuple).
NATIVE_LAYER_NORM = portable(
    "aten::native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight,"
    " Tensor? bias, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)"
    " -> (Tensor(a!), Tensor(b!), Tensor(c!))",
    call="multi_out",
    reference=_layer_norm_reference,
    check=check_native_layer_norm,
    contract=LAYER_NORM_CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def lower_softmax(k: Any, node: Any) -> None:
    x = k.float_input(k.aten_arg(node, "self"))
    dim = int(k.aten_arg(node, "dim"))
    k.call(
        SOFTMAX,
        node,
        self=x.vi,
        dim=k.int_(dim),
        half_to_float=k.bool_(False),
        out=k.float_out(node).vi,
    )


def _lower_mean(k: Any, node: Any, x: Any, dims: list[int], keepdim: bool) -> None:
    k.call(
        MEAN,
        node,
        self=x.vi,
        dim=k.int_list(dims),
        keepdim=k.bool_(keepdim),
        dtype=k.none(),
        out=k.float_out(node).vi,
    )


def lower_mean(k: Any, node: Any) -> None:
    x = k.float_input(k.aten_arg(node, "self"))
    dims = [int(d) for d in k.aten_arg(node, "dim")]
    _lower_mean(k, node, x, dims, bool(k.aten_arg(node, "keepdim", False)))


def lower_sum(k: Any, node: Any) -> None:
    """aten::sum.dim_IntList in float32: the mean times the element count (mean.out, then
    mul.out by a one-element constant), within float32 rounding of torch's sum."""
    x = k.float_input(k.aten_arg(node, "self"))
    if k.aten_arg(node, "dtype", None) is not None:
        raise k.unsupported(node, "a sum with a dtype")
    dims = [int(d) for d in k.aten_arg(node, "dim", None) or []]
    rank = max(x.rank, 1)
    count = 1
    for d in sorted({d % rank for d in dims}) if dims else range(x.rank):
        count *= int(x.sizes[d])
    keepdim = bool(k.aten_arg(node, "keepdim", False))
    mean = k.new_float(f"{node.name}.mean", k.shape_of(node))
    k.call(MEAN, node, self=x.vi, dim=k.int_list(dims), keepdim=k.bool_(keepdim), dtype=k.none(),
           out=mean.vi)
    k.call(MUL, node, self=mean.vi, other=k.constant(np.array([count], dtype=F32)),
           out=k.float_out(node).vi)


def lower_amax(k: Any, node: Any) -> None:
    x = k.float_input(k.aten_arg(node, "self"))
    dims = [int(d) for d in k.aten_arg(node, "dim") or []]
    k.call(AMAX, node, self=x.vi, dim=k.int_list(dims),
           keepdim=k.bool_(bool(k.aten_arg(node, "keepdim", False))), out=k.float_out(node).vi)


def lower_adaptive_avg_pool2d(k: Any, node: Any) -> None:
    """A global average pool (output 1x1) as mean over H, W keeping them."""
    x = k.float_input(k.aten_arg(node, "self"))
    if [int(s) for s in k.aten_arg(node, "output_size")] != [1, 1]:
        raise k.unsupported(node, "a float adaptive average pool to other than 1x1")
    _lower_mean(k, node, x, [2, 3], True)


def lower_layer_norm(k: Any, node: Any) -> None:
    """layer_norm -> native_layer_norm.out: three outs (y, mean, rstd) and their TensorList."""
    x = k.float_input(k.aten_arg(node, "input"))
    shape = [int(s) for s in k.aten_arg(node, "normalized_shape")]
    weight, bias = k.aten_arg(node, "weight"), k.aten_arg(node, "bias")
    eps = float(k.aten_arg(node, "eps", 1e-5))
    w_vi = k.none() if weight is None else k.float_input(weight).vi
    b_vi = k.none() if bias is None else k.float_input(bias).vi
    y = k.new_float(node.name, x.sizes)
    stat_sizes = x.sizes[: x.rank - len(shape)] + [1] * len(shape)
    mu = k.new_float(f"{node.name}.mean", stat_sizes)
    rstd = k.new_float(f"{node.name}.rstd", stat_sizes)
    k.call(
        NATIVE_LAYER_NORM,
        node,
        input=x.vi,
        normalized_shape=k.int_list(shape),
        weight=w_vi,
        bias=b_vi,
        eps=k.double(eps),
        out0=y.vi,
        out1=mu.vi,
        out2=rstd.vi,
    )
    k.bind(node, y)


pattern("aten::softmax.int", "aten::_softmax.default", lower_float=lower_softmax, emits=(SOFTMAX,))
pattern("aten::mean.dim", lower_float=lower_mean, emits=(MEAN,))
pattern("aten::amax.default", lower_float=lower_amax, emits=(AMAX,))
pattern("aten::sum.dim_IntList", lower_float=lower_sum, emits=(MEAN, MUL))
pattern("aten::adaptive_avg_pool2d.default", lower_float=lower_adaptive_avg_pool2d, emits=(MEAN,))
pattern("aten::layer_norm.default", lower_float=lower_layer_norm, emits=(NATIVE_LAYER_NORM,))
