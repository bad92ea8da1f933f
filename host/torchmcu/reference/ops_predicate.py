"""Reference semantics of the predicate ops a torch.cond lowers to (ExecuTorch portable names).

aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim, *, ScalarType? dtype, Tensor(a!) out)
    only the whole-tensor form: dim None, keepdim False, an integer self, int64 0-d out.
aten::{gt,ge,lt,le}.Scalar_out(Tensor self, Scalar other, *, Tensor(a!) out)
    an integer self, an Int other, a Bool out of self's sizes.
"""

from __future__ import annotations

import numpy as np

from torchmcu.pte import program as pm

_COMPARE = {"aten::gt": np.greater, "aten::ge": np.greater_equal, "aten::lt": np.less,
            "aten::le": np.less_equal}
PREDICATE_OPS = {("aten::sum", "IntList_out"): 6, **{(k, "Scalar_out"): 4 for k in _COMPARE}}


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
