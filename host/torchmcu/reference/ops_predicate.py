"""The control-flow ops of torch.cond predicates and torch.map loops (ExecuTorch's names), as
views of their definitions (torchmcu/ops/defs/control.py holds the checks and references;
the interpreter runs them by their `call`): (name, overload) -> the values a call passes."""

from __future__ import annotations

from torchmcu.ops import views

_CONTROL = views.control_ops()
CONTROL_OPS = {key: o.schema.n_call_args for key, o in _CONTROL.items()}
PREDICATE_OPS = {key: n for key, n in CONTROL_OPS.items() if _CONTROL[key].call == "out"}
LOOP_OPS = {key: n for key, n in CONTROL_OPS.items() if _CONTROL[key].call.startswith("loop_")}
