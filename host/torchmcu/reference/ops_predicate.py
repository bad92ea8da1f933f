"""Reference semantics of the control-flow ops: torch.cond predicates and torch.map loops
(ExecuTorch's names).

aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim, *, ScalarType? dtype, Tensor(a!) out)
    only the whole-tensor form: dim None, keepdim False, an integer self, int64 0-d out.
aten::{gt,ge,lt,le}.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
    an integer self, an Int other, a Bool out of self's sizes.
The torch.map loop (ExecuTorch emitter's form), all tensors contiguous, dim 0 only:
aten::sym_size.int(self, dim, out Int); aten::select_copy.int_out(self, dim, index, out, out);
executorch_prim::et_copy_index.tensor(self, copy_from, index) writes self[index];
executorch_prim::{add,sub,eq}.Scalar(a, b, out) on Int values (eq: a Bool out).
"""

from __future__ import annotations

import numpy as np

from torchmcu.pte import program as pm

_COMPARE = {"aten::gt": np.greater, "aten::ge": np.greater_equal, "aten::lt": np.less,
            "aten::le": np.less_equal}
PREDICATE_OPS = {("aten::sum", "IntList_out"): 6, **{(k, "Scalar_out"): 4 for k in _COMPARE}}
LOOP_OPS = {("aten::sym_size", "int"): 3, ("aten::select_copy", "int_out"): 5,
            ("executorch_prim::et_copy_index", "tensor"): 3, ("executorch_prim::add", "Scalar"): 3,
            ("executorch_prim::sub", "Scalar"): 3, ("executorch_prim::eq", "Scalar"): 3}
CONTROL_OPS = {**PREDICATE_OPS, **LOOP_OPS}


class PredicateError(ValueError):
    """A predicate op call outside the supported form."""


def run_predicate_call(call, name: str) -> None:  # call: interpreter._Call
    out = call.tensor_meta(-2)
    x = call.physical(0)
    if x is None or x.dtype.kind != "i":
        raise PredicateError(f"{name}: self must be an integer tensor")
    if name == "aten::sum":
        if call.scalar(1) not in (None, []) or call.scalar(2) or call.scalar(3) != int(pm.ScalarType.LONG):
            raise PredicateError("aten::sum: only dim=None, keepdim=False, dtype=Long is supported")
        if out.scalar_type != pm.ScalarType.LONG or out.numel != 1:
            raise PredicateError("aten::sum: out must be a one-element int64 tensor")
        call.write_out(np.array(x.astype(np.int64).sum(), dtype=np.int64))
        return
    other = call.values[call.args[1]]
    if not isinstance(other, pm.Int):
        raise PredicateError(f"{name}: other must be an Int")
    if out.scalar_type != pm.ScalarType.BOOL or out.numel != x.size:
        raise PredicateError(f"{name}: out must be a Bool tensor of self's size")
    call.write_out(_COMPARE[name](x.astype(np.int64), np.int64(other.value)))


def _contiguous(t: pm.Tensor, what: str) -> None:
    if list(t.dim_order) != list(range(len(t.sizes))):
        raise PredicateError(f"{what}: tensors must be contiguous")


def _index(call, i: int, t: pm.Tensor, what: str) -> int:
    v = call.values[call.args[i]]
    if not isinstance(v, pm.Int) or not 0 <= v.value < t.sizes[0]:
        raise PredicateError(f"{what}: index {v} outside dim 0 of size {t.sizes[0]}")
    return v.value


def run_control_call(call, name: str, overload: str) -> None:  # call: interpreter._Call
    """One predicate or loop call (argument count checked here)."""
    if len(call.args) != CONTROL_OPS[(name, overload)]:
        raise PredicateError(f"{name}.{overload}: {len(call.args)} arguments")
    if (name, overload) in PREDICATE_OPS:
        if call.args[-1] != call.args[-2]:
            raise PredicateError(f"{name}: the returned value is not the out tensor")
        run_predicate_call(call, name)
        return
    values = call.values
    if name == "aten::select_copy":
        x = call.tensor_meta(0)
        _contiguous(x, name)
        _contiguous(call.tensor_meta(-2), name)
        if call.scalar(1) != 0 or call.args[-1] != call.args[-2]:
            raise PredicateError(f"{name}: only dim 0, out passed twice")
        call.write_out(call.physical(0)[_index(call, 2, x, name)])
        return
    if name == "executorch_prim::et_copy_index":
        dst = call.tensor_meta(0)
        _contiguous(dst, name)
        _contiguous(call.tensor_meta(1), name)
        whole = call.physical(0)
        whole[_index(call, 2, dst, name)] = call.physical(1).reshape(whole.shape[1:])
        call.memory.write(call.args[0], whole)
        return
    if name == "aten::sym_size":
        t = call.tensor_meta(0)
        result: pm.Int | pm.Bool = pm.Int(int(t.sizes[int(call.scalar(1))]))
    else:
        a, b = values[call.args[0]], values[call.args[1]]
        if not isinstance(a, pm.Int) or not isinstance(b, pm.Int):
            raise PredicateError(f"{name}: operands must be Int values")
        wrap = lambda v: (v + 2**63) % 2**64 - 2**63  # noqa: E731  (int64 two's complement)
        result = {"executorch_prim::add": lambda: pm.Int(wrap(a.value + b.value)),
                  "executorch_prim::sub": lambda: pm.Int(wrap(a.value - b.value)),
                  "executorch_prim::eq": lambda: pm.Bool(a.value == b.value)}[name]()
    if type(values[call.args[2]]) is not type(result):
        raise PredicateError(f"{name}: result value is not a {type(result).__name__}")
    values[call.args[2]] = result
