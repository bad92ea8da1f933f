"""Which KernelCalls the Ethos-U NPUs take: our lowering's own limits plus what Vela 5.2
rejects for its TOSA input, per family - measured by compiling (tests/test_npu_tosa.py),
which is not always what `vela --supported-ops-report` documents:

- CONV2D / DEPTHWISE_CONV2D with a stride above 3 fail on U55 and U65 (documented and
  enforced). Our even-tap average pool is a DEPTHWISE_CONV2D, so it inherits this limit.
- AVG_POOL2D / MAX_POOL2D with a stride above 3 are documented as unsupported on U55/U65;
  Vela 5.2 accepts them by splitting the pool into one NPU operation per output position.
  We keep the documented limit (the split costs one operation per output; the CPU kernel
  is the better place for such a pool).
- Kernels beyond the documented sizes (convolution height 64 / area 4096, pooling height
  256 / area 65536) are also accepted, by decomposition. For convolutions that is exact
  (int32 partial sums); for average pooling the rounding of a decomposed pool cannot be
  checked here, so pools keep the documented limits.
- Any axis whose output is 1 is lowered with stride 1 (the window covers what it reads), so
  a global pool never hits a stride limit.
"""

from __future__ import annotations

from torchmcu import ops
from torchmcu.npu.tosa.lowerings import LOWERINGS
from torchmcu.ops import views
from torchmcu.ops.core import ArgError, bind
from torchmcu.ops.npu_limits import DIM_MAX, FAMILIES
from torchmcu.pte import program as pm

# The ops that never run on an Ethos-U (quantize/dequantize: float tensors) and why
NO_NPU = {o.qualified: o.no_npu for o in ops.ops() if o.no_npu is not None}
# Each op's rule is its definition's: the argument check (its failure is the reason), then
# npu.support.
_DEFINED = views.npu_rules()


def _tensor_reason(plan: pm.ExecutionPlan, call: pm.KernelCall) -> str | None:
    for vi in call.args[:-1]:
        t = plan.values[vi]
        if (
            isinstance(t, pm.Tensor)
            and t.data_buffer_idx == 0
            and t.scalar_type != pm.ScalarType.BYTE
        ):
            if t.scalar_type != pm.ScalarType.CHAR:
                return f"value {vi} is {pm.ScalarType(t.scalar_type).name}, the NPU path takes int8 activations"
            if any(s > DIM_MAX for s in t.sizes):
                return f"value {vi} has a dimension above {DIM_MAX}"
    return None


def npu_support(plan: pm.ExecutionPlan, instruction_index: int, family: str) -> str | None:
    """None if the KernelCall can run on an Ethos-U of `family`, else the reason it cannot."""
    if family not in FAMILIES:
        raise ValueError(f"unknown NPU family {family!r}; valid: {', '.join(FAMILIES)}")
    instructions = plan.chains[0].instructions
    if not 0 <= instruction_index < len(instructions):
        raise IndexError(
            f"instruction {instruction_index} out of range (plan has {len(instructions)})"
        )
    call = instructions[instruction_index]
    if not isinstance(call, pm.KernelCall):
        return f"{type(call).__name__} is not a kernel call"
    name = plan.operators[call.op_index].name
    if name in NO_NPU:
        return f"{name.split('::')[-1]} {NO_NPU[name]}"
    if name not in LOWERINGS:
        return f"{name} has no TOSA lowering"
    reason = _tensor_reason(plan, call)
    if reason:
        return reason
    defined = _DEFINED[name]  # every lowered op is defined in torchmcu.ops
    b = bind(defined, plan.values, call.args)
    try:
        b.check()
    except ArgError as exc:
        return f"{name}: {exc}"
    rule = defined.npu.support if defined.npu is not None else None
    return rule(b, family) if rule is not None else None
