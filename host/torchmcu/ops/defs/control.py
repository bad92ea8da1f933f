"""The kernels torch.cond predicates and torch.map loops lower to, under the names ExecuTorch's
emitter gives them (firmware/kernels/portable/predicate.c and prim.c).

Defined here once: the argument checks (the rules the C kernels enforce, naming the same
argument), the references and the contracts. The loop ops pass their arguments as the schema
has them (no out tensor twice): `call` says how (the runtime's method.c LOOP_OPS roles), and
the interpreter writes what the reference returns accordingly: the out tensor's physical
array ("out", "loop_select"), the whole of `self` ("loop_copy_index"), or the returned Int or
Bool value ("loop_scalar"). The runtime runs the loop ops with every argument checked on every
call. The lowering that emits them is lower/rules_control.py's (a stage concern: torch.cond
and torch.map are not patterns).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import ArgError, Bound, Kernel, OpDef, Schema, op, pattern
from torchmcu.ops.layout import same_layout
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable

_PREDICATE = "predicate.c"
_PRIM = "prim.c"

MAX_DIMS = 6  # TM_MAX_DIMS (firmware/runtime/include/torchmcu/types.h)
_INTEGER = (pm.ScalarType.CHAR, pm.ScalarType.INT, pm.ScalarType.LONG)  # predicate.c's self


def control(schema: str, source: str, **fields: Any) -> OpDef:
    """Register a control op of firmware/kernels/portable/`source`. Its entry point is
    tm_portable_<name>_<overload> for an out variant, tm_prim_<name>_<overload> for a kernel
    that returns a scalar or writes its self in place."""
    s = Schema.parse(schema)
    prefix = "portable" if s.overload.endswith("_out") else "prim"
    kernel = Kernel(f"tm_{prefix}_{s.name}_{s.overload.lower()}", f"portable/{source}")
    return op(schema, family="control", kernel=kernel, **fields)


def _tensor(v: pm.EValue, lo: int, hi: int) -> pm.Tensor | None:
    """tm_tensor_arg with any dtype: the tensor when v is one of rank lo..hi, else None."""
    return v if isinstance(v, pm.Tensor) and lo <= len(v.sizes) <= hi else None


def _contiguous(t: pm.Tensor) -> bool:
    """prim.c's contiguous(): dim order 0, 1, 2, ... exactly."""
    return list(t.dim_order) == list(range(len(t.sizes)))


def _returned(b: Bound, kind: type, what: str) -> None:
    """The value a loop_scalar op returns into (its last argument) must be a `kind`."""
    index = len(b.op.schema.args)
    if not isinstance(b.values[b.args[index]], kind):
        raise ArgError(index, "returned", f"expected {what} value to write the result into")


# -- the torch.cond predicate: aten::sum.IntList_out, then aten::<cmp>.Scalar_out
SUM_CONTRACT = """\
- Only the whole-tensor sum: `self` an int8, int32 or int64 tensor of rank 0..6 (argument 0
  otherwise), `dim` None or empty (argument 1), `keepdim` False (argument 2), `dtype` Long
  (argument 3), `out` a one-element int64 tensor (argument 4).
- `out = sum(self)` over every element, in int64, wrapping modulo 2^64 like torch's int64 sum."""


def _integer_self(b: Bound) -> pm.Tensor:
    x = b.value("self")
    if not (isinstance(x, pm.Tensor) and x.scalar_type in _INTEGER and len(x.sizes) <= MAX_DIMS):
        raise b.reject("self", "expected an int8, int32 or int64 tensor")
    return x


def check_sum(b: Bound) -> None:
    """predicate.c's tm_portable_sum_intlist_out checks, in its order."""
    _integer_self(b)
    dim = b.value("dim")
    if not (isinstance(dim, pm.Null) or (isinstance(dim, pm.IntList) and not dim.items)):
        raise b.reject("dim", "only the whole-tensor sum: expected None or []")
    keepdim = b.value("keepdim")
    if not (isinstance(keepdim, pm.Bool) and not keepdim.value):
        raise b.reject("keepdim", "expected False")
    b.int_in("dtype", pm.ScalarType.LONG, pm.ScalarType.LONG)
    out = _tensor(b.value("out"), 0, MAX_DIMS)
    if out is None or out.scalar_type != pm.ScalarType.LONG or out.numel != 1:
        raise b.reject("out", "expected a one-element int64 tensor")


def reference_sum(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the int64 sum (numpy wraps int64 sums like torch)."""
    return np.array(b.physical("self").astype(np.int64).sum(), dtype=np.int64)


SUM = control(
    "aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *,"
    " ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    _PREDICATE,
    reference=reference_sum,
    check=check_sum,
    contract=SUM_CONTRACT,
)

COMPARE_CONTRACT = """\
- `self` an int8, int32 or int64 tensor of rank 0..6 (argument 0 otherwise), `other` an Int
  (argument 1), `out` a Bool tensor with self's element count, laid out as self when of the
  same rank (argument 2).
- Elementwise in memory order: `out[k] = self[k] {op} other`, compared in int64."""


def check_compare(b: Bound) -> None:
    """predicate.c's compare() checks, in its order."""
    x = _integer_self(b)
    if not isinstance(b.value("other"), pm.Int):
        raise b.reject("other", "expected an Int")
    out = _tensor(b.value("out"), 0, MAX_DIMS)
    if (
        out is None
        or out.scalar_type != pm.ScalarType.BOOL
        or out.numel != x.numel
        or (len(out.sizes) == len(x.sizes) and not same_layout(x, out))
    ):
        raise b.reject("out", "expected a Bool tensor of self's element count and layout")


def _compare(name: str, symbol: str, fn: Callable[..., np.ndarray]) -> OpDef:
    """aten::<name>.Scalar_out: an integer tensor against an Int, into a Bool tensor."""

    def reference(b: Any) -> np.ndarray:
        """(b: the interpreter's Bound) -> the physical Bool out."""
        return fn(b.physical("self").astype(np.int64), np.int64(b.scalar("other")))

    return control(
        f"aten::{name}.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)",
        _PREDICATE,
        reference=reference,
        check=check_compare,
        contract=COMPARE_CONTRACT.format(op=symbol),
    )


GT = _compare("gt", ">", np.greater)
GE = _compare("ge", ">=", np.greater_equal)
LT = _compare("lt", "<", np.less)
LE = _compare("le", "<=", np.less_equal)

# The torch.cond predicates the cond lowering (lower/rules_control.py) takes: mean() or sum()
# of an int8 tensor, compared with a constant, become SUM then one comparison of the sum
# against an integer threshold. The patterns give the cond lowering its aten targets; it
# keeps the rule (params["cond"]: the reduction, or "compare").
pattern("aten::mean.default", emits=(SUM,), params={"cond": "mean"})
pattern("aten::sum.default", emits=(SUM,), params={"cond": "sum"})
for _compare_op in (GT, GE, LT, LE):
    pattern(
        f"aten::{_compare_op.schema.name}.Scalar", emits=(_compare_op,), params={"cond": "compare"}
    )


# -- the torch.map loop (ExecuTorch's emitter's form): dim 0 of contiguous tensors
SYM_SIZE_CONTRACT = """\
- `self` a tensor of rank 1..6, any dtype (argument 0 otherwise); `dim` an Int in
  `[0, rank)` (argument 1); the returned value an Int (argument 2), set to `self.sizes[dim]`."""


def check_sym_size(b: Bound) -> None:
    """prim.c's tm_prim_sym_size_int checks, in its order."""
    t = _tensor(b.value("self"), 1, MAX_DIMS)
    if t is None:
        raise b.reject("self", "expected a tensor of rank 1..6")
    b.int_in("dim", 0, len(t.sizes) - 1)
    _returned(b, pm.Int, "an Int")


def reference_sym_size(b: Any) -> pm.Int:
    return pm.Int(int(b.tensor("self").sizes[b.dim]))


SYM_SIZE = control(
    "aten::sym_size.int(Tensor self, int dim) -> SymInt",
    _PRIM,
    reference=reference_sym_size,
    check=check_sym_size,
    call="loop_scalar",
    contract=SYM_SIZE_CONTRACT,
)


def _whole(b: Bound, name: str) -> pm.Tensor:
    """The tensor whose dim 0 is sliced: contiguous, rank 1..6, sizes[0] > 0."""
    t = _tensor(b.value(name), 1, MAX_DIMS)
    if t is None or not _contiguous(t) or t.sizes[0] <= 0:
        raise b.reject(name, "expected a contiguous tensor of rank 1..6 with sizes[0] > 0")
    return t


def _slot(b: Bound, name: str, whole: pm.Tensor) -> None:
    """One slot of dim 0 of `whole`: contiguous, whole's dtype and sizes without dim 0."""
    t = _tensor(b.value(name), 0, MAX_DIMS - 1)
    if (
        t is None
        or not _contiguous(t)
        or t.scalar_type != whole.scalar_type
        or list(t.sizes) != list(whole.sizes[1:])
    ):
        raise b.reject(name, f"expected a contiguous tensor of sizes {list(whole.sizes[1:])}")


def _slot_index(b: Bound, whole: pm.Tensor) -> int:
    return b.int_in("index", 0, whole.sizes[0] - 1)


SELECT_COPY_CONTRACT = """\
- `self` contiguous, rank 1..6, `sizes[0] > 0` (argument 0 otherwise); `dim` 0 only (the map
  dimension; argument 1); `index` an Int in `[0, sizes[0])` (argument 2); `out` contiguous, of
  self's dtype and sizes without dim 0 (argument 3).
- `out = self[index]`: one contiguous block of bytes."""


def check_select_copy(b: Bound) -> None:
    """prim.c's tm_portable_select_copy_int_out checks, in its order."""
    whole = _whole(b, "self")
    b.int_in("dim", 0, 0)
    _slot_index(b, whole)
    _slot(b, "out", whole)


def reference_select_copy(b: Any) -> np.ndarray:
    return b.physical("self")[b.scalar("index")]


SELECT_COPY = control(
    "aten::select_copy.int_out(Tensor self, int dim, SymInt index, *, Tensor(a!) out)"
    " -> Tensor(a!)",
    _PRIM,
    reference=reference_select_copy,
    check=check_select_copy,
    call="loop_select",
    contract=SELECT_COPY_CONTRACT,
)

ET_COPY_INDEX_CONTRACT = """\
- `self` contiguous, rank 1..6, `sizes[0] > 0` (argument 0 otherwise; sizes static);
  `copy_from` contiguous, of self's dtype and sizes without dim 0 (argument 1); `index` an
  Int in `[0, sizes[0])` (argument 2).
- `self[index] = copy_from`; nothing else of self changes."""


def check_et_copy_index(b: Bound) -> None:
    """prim.c's tm_prim_et_copy_index_tensor checks, in its order."""
    whole = _whole(b, "self")
    _slot(b, "copy_from", whole)
    _slot_index(b, whole)


def reference_et_copy_index(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the whole of self, slot `index` replaced."""
    whole = b.physical("self")
    whole[b.scalar("index")] = b.physical("copy_from").reshape(whole.shape[1:])
    return whole


# ExecuTorch's emitter creates this op by name only (no Python schema); the argument list is
# what its C++ kernel reads: the tensor to write, the slice to copy in, the slot.
ET_COPY_INDEX = control(
    "executorch_prim::et_copy_index.tensor(Tensor(a!) self, Tensor copy_from, SymInt index) -> ()",
    _PRIM,
    reference=reference_et_copy_index,
    check=check_et_copy_index,
    call="loop_copy_index",
    barrier=True,
    contract=ET_COPY_INDEX_CONTRACT,
)

SCALAR_CONTRACT = """\
- `a` and `b` Int values (arguments 0 and 1 otherwise); the returned value {kind} (argument 2),
  set to `{result}`{wraps}."""


def _scalar(name: str, fn: Callable[[int, int], pm.EValue]) -> OpDef:
    """executorch_prim::<name>.Scalar on two Int values: the loop counter and its test."""
    returned = pm.Bool if name == "eq" else pm.Int

    def check(b: Bound) -> None:
        """prim.c's prim_scalar checks, in its order."""
        for operand in ("a", "b"):
            if not isinstance(b.value(operand), pm.Int):
                raise b.reject(operand, "expected an Int")
        _returned(b, returned, "a Bool" if returned is pm.Bool else "an Int")

    def reference(b: Any) -> pm.EValue:
        return fn(b.scalar("a"), b.scalar("b"))

    symbol = {"add": "a + b", "sub": "a - b", "eq": "a == b"}[name]
    contract = SCALAR_CONTRACT.format(
        kind="a Bool" if returned is pm.Bool else "an Int",
        result=symbol,
        wraps="" if returned is pm.Bool else " (int64, wrapping like two's complement)",
    )
    return control(
        f"executorch_prim::{name}.Scalar(Scalar a, Scalar b) -> "
        + ("bool" if returned is pm.Bool else "Scalar"),
        _PRIM,
        reference=reference,
        check=check,
        call="loop_scalar",
        barrier=True,
        contract=contract,
    )


def _wrap(v: int) -> pm.Int:
    """int64 two's complement, as prim.c's unsigned arithmetic."""
    return pm.Int((v + 2**63) % 2**64 - 2**63)


PRIM_ADD = _scalar("add", lambda a, b: _wrap(a + b))
PRIM_SUB = _scalar("sub", lambda a, b: _wrap(a - b))
PRIM_EQ = _scalar("eq", lambda a, b: pm.Bool(a == b))
