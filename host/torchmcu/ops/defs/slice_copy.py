"""torchmcu::slice_copy: our operator (ExecuTorch's Cortex-M library has no slice), with the
argument list of the portable aten::slice_copy.Tensor_out, bounds resolved by the exporter.

Defined here once: the argument check (the rules firmware/kernels/cortex_m/slice_copy.c
enforces, naming the same argument), the reference, the TOSA lowering and its NPU rule, and
the contract, and the aten rules that emit it (aten::slice.Tensor, aten::select.int), which get
the lowering Kit (torchmcu/lower/kit.py) as `k`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, ArgError, Bound, Npu, op, pattern
from torchmcu.ops.layout import NHWC, disjoint, laid_out_as
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)
INT32_MAX = 2**31 - 1

# The body of its docs/operators.md section (that file is still hand-kept: step 8 generates the
# section from this, adding "On the NPU: <npu.doc>" from the definition)
CONTRACT = """\
- Our operator (ExecuTorch's Cortex-M library has no slice); the argument list of the portable
  `aten::slice_copy.Tensor_out`, with `0 <= start <= end <= self.sizes[dim]` (arguments 2, 3)
  already resolved by the exporter, `0 <= dim < rank` (argument 1) and `step >= 1` (argument 4).
- `out = self[..., start:end:step, ...]` along `dim`; any element type, both tensors contiguous,
  `out` with `self`'s sizes except `out.sizes[dim] = ceil((end - start) / step)`; `out` shares
  no byte with `self` (argument 5 otherwise: the rows are copied with memcpy).
- torchmcu emits it for the time steps and gates of an unrolled LSTM (select / slice that are
  not plain views)."""


def check_range(sizes: Sequence[int], dim: Any, start: Any, end: Any, step: Any) -> None:
    """The scalar rules of the C kernel in its order (tm_int_arg: an int within bounds), raising
    ArgError at the schema position of the first bad one."""
    A = SLICE_COPY.schema.A
    rank = len(sizes)

    def bad(value: Any, lo: int, hi: int) -> bool:
        integer = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        return not integer or not lo <= value <= hi

    if bad(dim, 0, rank - 1):
        raise ArgError(A.dim, "dim", f"dim {dim} out of range for rank {rank}")
    size = int(sizes[dim])
    if bad(start, 0, size):
        raise ArgError(A.start, "start", f"start {start} outside [0, {size}] (size of dim {dim})")
    if bad(end, start, size):
        raise ArgError(A.end, "end", f"end {end} outside [start {start}, {size}]")
    if bad(step, 1, INT32_MAX):
        raise ArgError(A.step, "step", f"step {step} is not a positive int32")


def out_sizes(sizes: Sequence[int], dim: int, start: int, end: int, step: int) -> list[int]:
    """The out sizes of a valid slice (the C kernel's `count` along dim)."""
    result = [int(s) for s in sizes]
    result[dim] = (end - start + step - 1) // step
    return result


def _contiguous(t: pm.Tensor) -> bool:
    return sorted(t.dim_order) == list(range(len(t.sizes))) and laid_out_as(
        t.sizes, t.dim_order, range(len(t.sizes))
    )


def check(b: Bound) -> None:
    """slice_copy.c's TM_ARG_CHECKs, in its order, on a bound call."""
    value = b.value("self")
    if not (
        isinstance(value, pm.Tensor)
        and 1 <= len(value.sizes) <= MAX_DIMS
        and value.scalar_type in pm.ELEMENT_SIZE
        and _contiguous(value)
    ):
        raise b.reject("self", "expected a contiguous tensor of rank 1..6")
    x = value
    scalars = [b.value(name) for name in ("dim", "start", "end", "step")]
    dim, start, end, step = (v.value if isinstance(v, pm.Int) else v for v in scalars)
    check_range(x.sizes, dim, start, end, step)
    out = b.value("out")
    want = out_sizes(x.sizes, dim, start, end, step)
    if not (
        isinstance(out, pm.Tensor)
        and out.scalar_type == x.scalar_type
        and list(out.sizes) == want
        and _contiguous(out)
    ):
        raise b.reject("out", f"expected a contiguous tensor of self's type and sizes {want}")
    if not disjoint(x, out):
        raise b.reject("out", "shares bytes with self")


def slice_copy(x: np.ndarray, dim: int, start: int, end: int, step: int) -> np.ndarray:
    """The logical slice x[..., start:end:step, ...] along dim, as a contiguous array."""
    check_range(x.shape, dim, start, end, step)
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, end, step)
    return np.ascontiguousarray(x[tuple(index)])


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out."""
    return b.to_out(slice_copy(b.logical("self"), b.dim, b.start, b.end, b.step))


def npu_support(b: Bound, family: str) -> str | None:
    if b.step != 1:
        return f"slice with step {b.step} (TOSA SLICE takes step 1)"
    return None


def lower_tosa(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    """TOSA SLICE (g: tosa Graph, a: its Bound). Our slice copies contiguous tensors, so the
    TOSA tensor (the physical shape) is the logical one; a step above 1 has no TOSA SLICE
    equivalent and stays on the CPU (npu_support)."""
    t, out = a.tensor("self"), a.tensor("out")
    rank = len(t.sizes)
    if list(t.dim_order) != list(range(rank)) or list(out.dim_order) != list(range(rank)):
        raise a.error("slice_copy of a tensor that is not contiguous")
    if a.step != 1:
        raise a.error(f"slice step {a.step} (TOSA SLICE takes step 1)")
    a.checked()  # so the out's physical shape is the slice's
    begin = [0] * rank
    begin[a.dim] = a.start
    return g.slice(read(a.index("self")), begin, out_sizes(t.sizes, a.dim, a.start, a.end, 1))


SLICE_COPY = op(
    "torchmcu::slice_copy.out(Tensor self, int dim, int start, int end, int step, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    npu=Npu(
        lower=lower_tosa,
        support=npu_support,
        doc="TOSA SLICE (step 1 only; other steps stay on the CPU)",
    ),
    contract=CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def _emit_copy(k: Any, node: Any, x: Any, dim: int, start: int, end: int, step: int) -> Any:
    out = k.new_int8(node.name, out_sizes(x.sizes, dim, start, end, step), None, nhwc=False)
    out = out.with_(scale=x.scale, zero_point=x.zero_point)
    k.call(
        SLICE_COPY,
        node,
        self=x.vi,
        dim=k.int_(dim),
        start=k.int_(start),
        end=k.int_(end),
        step=k.int_(step),
        out=out.vi,
    )
    return out


def _bounds(k: Any, node: Any, size: int) -> tuple[int, int, int]:
    """(start, end, step) of aten::slice resolved as Python resolves them (0 <= start <= end
    <= size)."""
    start = k.aten_arg(node, "start", None)
    end = k.aten_arg(node, "end", None)
    step = int(k.aten_arg(node, "step", 1))
    start = 0 if start is None else int(start)
    end = size if end is None else int(end)
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, start), size)
    if step < 1:
        raise k.unsupported(node, f"slice step {step}")
    return start, end, step


def _emit_nhwc(k: Any, node: Any, x: Any, dim: int, start: int, end: int, step: int) -> Any:
    """The slice of NHWC bytes as the slice of their memory order [N, H, W, C] along the dim's
    place there: the result is NHWC too (no transpose either side)."""
    n, c, h, w = x.sizes
    part = _emit_copy(
        k, node, k.alias(x, [n, h, w, c], nhwc=False), NHWC.index(dim), start, end, step
    )
    n, h, w, c = part.sizes
    return k.alias(part, [n, c, h, w], nhwc=True)


def lower_slice(k: Any, node: Any) -> None:
    """aten::slice.Tensor: a view when it keeps the whole tensor, else a slice_copy (of the
    memory order when the bytes are NHWC)."""
    x, qs, act, _ = k.shared_input(node, "slice", keep_nhwc=True)
    dim = int(k.aten_arg(node, "dim", 0)) % x.rank
    start, end, step = _bounds(k, node, x.sizes[dim])
    if start == 0 and end == x.sizes[dim] and step == 1:
        out = x
    elif x.nhwc and not x.layout_free:
        out = _emit_nhwc(k, node, x, dim, start, end, step)
    else:
        x = k.as_contiguous(x)
        out = _emit_copy(k, node, x, dim, start, end, step)
    if out.sizes != k.shape_of(node):
        raise k.unsupported(node, f"slice result {out.sizes} differs from {k.shape_of(node)}")
    k.bind_shared(node, qs, act, out)


def lower_select(k: Any, node: Any) -> None:
    """aten::select.int: a view of a size-1 dim, else a one-row slice_copy, viewed without
    the dim. A channel of NHWC bytes is sliced in memory order ([N, H, W] stays in order)."""
    x, qs, act, _ = k.shared_input(node, "select", keep_nhwc=True)
    dim = int(k.aten_arg(node, "dim")) % x.rank
    index = int(k.aten_arg(node, "index")) % x.sizes[dim]
    if x.nhwc and not x.layout_free and dim == 1:
        n, c, h, w = x.sizes
        src = k.alias(x, [n, h, w, c], nhwc=False)
        part = _emit_copy(k, node, src, 3, index, index + 1, 1)
    else:
        x = k.as_contiguous(x)
        part = x if x.sizes[dim] == 1 else _emit_copy(k, node, x, dim, index, index + 1, 1)
    k.bind_shared(node, qs, act, k.alias(part, k.shape_of(node), nhwc=False))


def _float_copy(k: Any, node: Any, x: Any, dim: int, start: int, end: int, step: int) -> Any:
    """slice_copy of a float32 value (the kernel copies any element type)."""
    out = k.new_float(node.name, out_sizes(x.sizes, dim, start, end, step))
    k.call(
        SLICE_COPY, node, self=x.vi, dim=k.int_(dim), start=k.int_(start), end=k.int_(end),
        step=k.int_(step), out=out.vi,
    )  # fmt: skip
    return out


def lower_slice_float(k: Any, node: Any) -> None:
    x = k.float_input(node.args[0])
    dim = int(k.aten_arg(node, "dim", 0)) % x.rank
    start, end, step = _bounds(k, node, x.sizes[dim])
    whole = start == 0 and end == x.sizes[dim] and step == 1
    k.bind(node, x if whole else _float_copy(k, node, x, dim, start, end, step))


def lower_select_float(k: Any, node: Any) -> None:
    """A one-row slice (a view of a size-1 dim), viewed without the dim."""
    x = k.float_input(node.args[0])
    dim = int(k.aten_arg(node, "dim")) % x.rank
    at = int(k.aten_arg(node, "index")) % x.sizes[dim]
    if x.sizes[dim] > 1:
        x = _float_copy(k, node, x, dim, at, at + 1, 1)
    k.bind(node, k.alias(x, k.shape_of(node), nhwc=False))


for _aten, _int8, _fp32 in (
    ("aten::slice.Tensor", lower_slice, lower_slice_float),
    ("aten::select.int", lower_select, lower_select_float),
):
    pattern(_aten, annotate=Annotate("shared"), lower=_int8, lower_float=_fp32, emits=(SLICE_COPY,))
