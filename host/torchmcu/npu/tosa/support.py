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

from torchmcu.npu.tosa.lowerings import LOWERINGS
from torchmcu.ops import views
from torchmcu.ops.core import ArgError, bind
from torchmcu.ops.npu_limits import stride_reason
from torchmcu.pte import program as pm

FAMILIES = ("u55", "u65", "u85")
POOL_KERNEL_Y_MAX = 256
POOL_KERNEL_AREA_MAX = 65536
DIM_MAX = 65536

FLOAT_OPS = {"cortex_m::quantize_per_tensor", "cortex_m::dequantize_per_tensor"}
AVG_POOL_OPS = {"cortex_m::quantized_avg_pool2d", "cortex_m::quantized_avg_pool2d_nhwc"}
MAX_POOL_OPS = {"cortex_m::quantized_max_pool2d", "cortex_m::quantized_max_pool2d_nhwc"}
# The ops whose rule is their definition's: the argument check (its failure is the reason),
# then npu.support. The branches below answer the others until their family moves (step 6).
_DEFINED = views.npu_rules()


def _pair(v: list[int]) -> tuple[int, int]:
    return (v[0], v[0]) if len(v) == 1 else (v[0], v[1])


def _values(plan: pm.ExecutionPlan, call: pm.KernelCall, i: int):
    v = plan.values[call.args[i]]
    if isinstance(v, pm.IntList):
        return [plan.values[k].value for k in v.items]  # type: ignore[union-attr]
    return getattr(v, "value", None)


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
    if name in FLOAT_OPS:
        return f"{name.split('::')[-1]} works on float tensors; no Ethos-U runs float"
    if name not in LOWERINGS:
        return f"{name} has no TOSA lowering"
    reason = _tensor_reason(plan, call)
    if reason:
        return reason
    defined = _DEFINED.get(name)
    if defined is not None:
        b = bind(defined, plan.values, call.args)
        try:
            b.check()
        except ArgError as exc:
            return f"{name}: {exc}"
        rule = defined.npu.support if defined.npu is not None else None
        return rule(b, family) if rule is not None else None
    nhwc = name.endswith("_nhwc")
    out = plan.values[call.args[-2]]
    assert isinstance(out, pm.Tensor)
    out_hw = (
        ((out.sizes[1], out.sizes[2]) if nhwc else (out.sizes[2], out.sizes[3]))
        if len(out.sizes) == 4
        else (1, 1)
    )
    if name in AVG_POOL_OPS or name in MAX_POOL_OPS:
        kind = "avg pool" if name in AVG_POOL_OPS else "max pool"
        kh, kw = _pair(_values(plan, call, 1))
        if kh > POOL_KERNEL_Y_MAX or kh * kw > POOL_KERNEL_AREA_MAX:
            return f"{kind} kernel {kh}x{kw} exceeds the NPU's limit (height <= 256, area <= 65536)"
        padding = _pair(_values(plan, call, 3))
        if kind == "avg pool":
            if any(padding):
                return "avg pool with padding divides border windows by fewer taps (not exact on the NPU)"
            x = plan.values[call.args[0]]
            assert isinstance(x, pm.Tensor)
            in_hw = (x.sizes[1], x.sizes[2]) if nhwc else (x.sizes[2], x.sizes[3])
            sh, sw = _pair(_values(plan, call, 2))
            if (out_hw[0] - 1) * sh + kh > in_hw[0] or (out_hw[1] - 1) * sw + kw > in_hw[1]:
                return (
                    "ceil-mode avg pool with a partial window (fewer taps) is not exact on the NPU"
                )
        elif _pair(_values(plan, call, 4)) != (1, 1) or _values(plan, call, 5):
            return "max pool with dilation or ceil_mode"
        return stride_reason(kind, family, _pair(_values(plan, call, 2)), out_hw)
    return None
