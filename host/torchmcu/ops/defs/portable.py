"""What the portable fp32 definitions share (defs/portable_*.py): ExecuTorch's portable aten::
operators the float regions run (kernels/portable/functions.yaml; schemas from ATen), and
dim_order_ops::_clone_dim_order, which its Cortex-M flow inserts.

Each definition holds its numpy reference (float32; math functions evaluated in float64 and
rounded once, so at least as accurate as the kernels' libm calls), its argument check (the
TM_ARG_CHECKs of firmware/kernels/portable/*.c, naming the same argument; fp32_util.h's
helpers are the functions here), its contract, and the fp32 rules that emit it: a Pattern's
`lower_float`, which gets the lowering Kit (torchmcu/lower/kit.py) as `k`. A node runs them when
the quantizer left it in float32; the int8 rule of the same aten target is the int8 family's.

References take the interpreter's Bound: tensors are read in logical order whatever their dim
order, and the result goes back in the out's memory order (`b.to_out`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from torchmcu.ops.core import Bound, OpDef, op
from torchmcu.ops.layout import same_layout
from torchmcu.pte import program as pm

F32 = np.float32
FLOAT = pm.ScalarType.FLOAT
MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)
FLOAT_MAX = 3.4028234663852886e38


def portable(schema: str, **fields: Any) -> OpDef:
    """Register a portable kernel (firmware/kernels/portable/, named by Kernel.by_name)."""
    return op(schema, family="portable", **fields)


# -- the numpy side
def f32(x: np.ndarray) -> np.ndarray:
    if x.dtype != F32:
        raise TypeError(f"expected float32, got {x.dtype}")
    return x


def norm_dim(dim: int, rank: int) -> int:
    """tm_f32_dim: dim in [-rank, rank) (a 0-d tensor takes -1 and 0) made non-negative."""
    r = max(rank, 1)
    if not -r <= dim < r:
        raise ValueError(f"dim {dim} out of range for rank {rank}")
    return dim % r


def optional(b: Any, name: str) -> np.ndarray | None:
    """A Tensor? argument in logical order, None for a Null (b: the interpreter's Bound)."""
    return None if b.is_none(name) else b.logical(name)


# -- the checks (fp32_util.h)
def is_f32(v: pm.EValue, lo: int = 0, hi: int = MAX_DIMS) -> bool:
    """tm_f32_arg: a float32 tensor of a rank in [lo, hi]."""
    return isinstance(v, pm.Tensor) and v.scalar_type == FLOAT and lo <= len(v.sizes) <= hi


def is_copyable(v: pm.EValue) -> bool:
    """tm_tensor_arg(any dtype) with an element size the copies handle."""
    return (
        isinstance(v, pm.Tensor) and len(v.sizes) <= MAX_DIMS and v.scalar_type in pm.ELEMENT_SIZE
    )


def f32_tensor(b: Bound, name: str, lo: int = 0, hi: int = MAX_DIMS) -> pm.Tensor:
    """Argument `name` as tm_f32_arg takes it, else its ArgError."""
    v = b.value(name)
    if not is_f32(v, lo, hi):
        rank = f"rank {lo}" if lo == hi else f"rank {lo}..{hi}"
        raise b.reject(name, f"expected a float32 tensor of {rank}")
    return v  # type: ignore[return-value]


def f32_scalar(b: Bound, name: str) -> float:
    """tm_f32_scalar_arg: an Int, Double or Bool finite in float."""
    v = b.value(name)
    if isinstance(v, (pm.Int, pm.Double, pm.Bool)):
        d = float(v.value)
        if -FLOAT_MAX <= d <= FLOAT_MAX:
            return d
    raise b.reject(name, "expected an Int, Double or Bool finite in float32")


def dim_arg(b: Bound, name: str, rank: int) -> int:
    """An Int dim in [-rank, rank) (tm_f32_dim), made non-negative."""
    v = b.value(name)
    r = max(rank, 1)
    if not (isinstance(v, pm.Int) and -r <= v.value < r):
        raise b.reject(name, f"expected a dim of a rank-{rank} tensor")
    return v.value % r


def int_list(b: Bound, name: str, lo: int, hi: int) -> list[int]:
    """tm_int_list_arg: an IntList of lo..hi items."""
    v = b.value(name)
    items = b.scalar(name) if isinstance(v, pm.IntList) else None
    if items is None or not lo <= len(items) <= hi:
        raise b.reject(name, f"expected an int list of {lo}..{hi} items")
    return items


def check_unary(b: Bound, input: str = "self", out: str = "out") -> pm.Tensor:
    """tm_f32_unary_args: float32 input and out of the same sizes and memory layout."""
    x = f32_tensor(b, input)
    o = b.value(out)
    if not (is_f32(o) and same_layout(x, o)):  # type: ignore[arg-type]
        raise b.reject(out, "expected a float32 tensor with the input's sizes and layout")
    return x


def unary_check(b: Bound) -> None:
    check_unary(b)


def broadcast_fault(a: Sequence[int], other: Sequence[int], out: Sequence[int]) -> int:
    """tm_f32_broadcast: 0, or 1/2/3 for the operand at fault (a, other, out)."""
    rank = max(len(a), len(other))
    if len(out) != rank:
        return 3
    for k in range(rank):
        size = 1
        for t, sizes in enumerate((a, other)):
            d = k - (rank - len(sizes))
            s = sizes[d] if d >= 0 else 1
            if s != 1:
                if size not in (1, s):
                    return t + 1
                size = s
        if out[k] != size:
            return 3
    return 0


def string_arg(b: Bound, name: str) -> str | None:
    """A String argument's text (None for any other value)."""
    v = b.value(name)
    return v.value if isinstance(v, pm.String) else None
