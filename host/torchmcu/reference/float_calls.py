"""The portable fp32 kernel calls of a program (the interpreter's float half), run through
their definitions in torchmcu.ops (defs/portable_*.py): the check, then the reference. Tensors
are read in logical order whatever their dim order, and results are written through the out
tensors' dim orders (docs/operators.md, "Portable fp32 operators")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from torchmcu.ops import views
from torchmcu.ops.core import OpDef
from torchmcu.pte import program as pm

# qualified name -> definition: the portable ops the interpreter runs (their .out overload)
_CALLS: dict[str, OpDef] = views.portable_references()
FLOAT_OPS = frozenset(_CALLS)


def run_float_call(bind: Callable[[OpDef], Any], op: str) -> None:
    """Run one portable call of `op`; bind(definition) is the interpreter's Bound of the call.
    Writes its out tensor(s)."""
    definition = _CALLS[op]
    b = bind(definition)
    expected = definition.schema.n_call_args  # the arguments + the returned value
    if len(b.args) != expected:
        raise ValueError(f"{op}: {len(b.args)} arguments, expected {expected}")
    outs = [b.value_index(a.name) for a in definition.schema.outs]
    returned = b.values[b.args[-1]]
    if definition.call == "out" and b.args[-1] != b.args[-2]:
        raise ValueError(f"{op}: the returned value is not the out tensor")
    if definition.call == "multi_out" and (
        not isinstance(returned, pm.TensorList) or list(returned.items) != outs
    ):
        raise ValueError(f"{op}: the returned TensorList is not the out tensors in order")
    b.check()
    result = definition.reference(b)  # type: ignore[misc]
    results = result if definition.call == "multi_out" else (result,)
    for index, value in zip(outs, results):
        t = b.call.memory.tensor(index)
        value = (
            np.asarray(value, dtype=np.float32) if t.scalar_type == pm.ScalarType.FLOAT else value
        )
        physical = [t.sizes[d] for d in t.dim_order]
        if list(value.shape) != physical:
            raise ValueError(f"{op}: result shape {list(value.shape)} does not fit out {t.sizes}")
        b.call.memory.write(index, value)  # tobytes() writes C order
