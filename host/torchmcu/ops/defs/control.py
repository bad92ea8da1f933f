"""The kernels torch.cond predicates and torch.map loops lower to, under the names ExecuTorch's
emitter gives them. The loop ops pass their arguments as the schema has them (no out tensor
twice); the runtime runs them with every argument checked on every call (method.c LOOP_OPS)."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, OpDef, op

_PREDICATE = "portable/predicate.c"
_PRIM = "portable/prim.c"


def _control(schema: str, symbol: str, source: str, table_index: int, **fields: object) -> OpDef:
    kernel = Kernel(symbol, source, table_index=table_index)
    return op(schema, family="control", kernel=kernel, **fields)


def _compare(name: str, table_index: int) -> OpDef:
    """aten::<name>.Scalar_out: an integer tensor against an Int, into a Bool tensor."""
    schema = f"aten::{name}.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out) -> Tensor(a!)"
    return _control(schema, f"tm_portable_{name}_scalar_out", _PREDICATE, table_index)


def _scalar(name: str, returns: str, table_index: int) -> OpDef:
    """executorch_prim::<name>.Scalar on two Int values: the loop counter and its test."""
    schema = f"executorch_prim::{name}.Scalar(Scalar a, Scalar b) -> {returns}"
    return _control(
        schema, f"tm_prim_{name}_scalar", _PRIM, table_index, call="loop_scalar", barrier=True
    )


SUM = _control(
    "aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *,"
    " ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_sum_intlist_out",
    _PREDICATE,
    32,
)
GT = _compare("gt", 33)
GE = _compare("ge", 34)
LT = _compare("lt", 35)
LE = _compare("le", 36)

SYM_SIZE = _control(
    "aten::sym_size.int(Tensor self, int dim) -> SymInt",
    "tm_prim_sym_size_int",
    _PRIM,
    37,
    call="loop_scalar",
)
SELECT_COPY = _control(
    "aten::select_copy.int_out(Tensor self, int dim, SymInt index, *, Tensor(a!) out)"
    " -> Tensor(a!)",
    "tm_portable_select_copy_int_out",
    _PRIM,
    38,
    call="loop_select",
)
# ExecuTorch's emitter creates this op by name only (no Python schema); the argument list is
# what its C++ kernel reads: the tensor to write, the slice to copy in, the slot.
ET_COPY_INDEX = _control(
    "executorch_prim::et_copy_index.tensor(Tensor(a!) self, Tensor copy_from, SymInt index) -> ()",
    "tm_prim_et_copy_index_tensor",
    _PRIM,
    39,
    call="loop_copy_index",
    barrier=True,
)
PRIM_ADD = _scalar("add", "Scalar", 40)
PRIM_SUB = _scalar("sub", "Scalar", 41)
PRIM_EQ = _scalar("eq", "bool", 42)
