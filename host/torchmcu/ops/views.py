"""The stages' tables, derived from the registry (docs/design/operator-registry.md 4.4).

A stage keeps its table as a module-level dict built by one of these (tests may monkeypatch
it); the stage's own types stay out of this layer, so where a table holds a callable the stage
passes `adapt`, which turns a definition into the callable its dispatch calls (binding the call
with the stage's Bound)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from torchmcu import ops
from torchmcu.ops.core import OpDef, Pattern

T = TypeVar("T")


def references(adapt: Callable[[OpDef], T]) -> dict[str, T]:
    """The interpreter's _HANDLERS part: qualified name -> adapt(op), for the int8 ops with a
    reference (the interpreter runs their .out overload)."""
    return {o.qualified: adapt(o) for o in ops.ops("int8") if o.reference is not None}


def portable_references() -> dict[str, OpDef]:
    """reference/float_calls' _CALLS: qualified name -> definition, for the portable ops with a
    reference (the interpreter runs their .out overload)."""
    return {o.qualified: o for o in ops.ops("portable") if o.reference is not None}


def schema_args() -> dict[str, int]:
    """The interpreter's _SCHEMA_ARGS: the schema's argument count (a call passes the out once
    more) of every int8 op."""
    return {o.qualified: o.schema.n_call_args - 1 for o in ops.ops("int8")}


def control_ops() -> dict[tuple[str, str], OpDef]:
    """(qualified name, overload) -> definition of the control ops (torch.cond predicates and
    torch.map loops), as a plan's Operator names them."""
    return {(o.qualified, o.schema.overload): o for o in ops.ops("control")}


def cond_parts(resolve: Callable[[str], object]) -> dict[object, Pattern]:
    """The torch.cond predicate parts: resolve(aten name) -> its pattern (params["cond"] is
    "mean", "sum" or "compare"; emits the control op it becomes)."""
    return {resolve(t): p for p in ops.patterns() if "cond" in p.params for t in p.aten}


def scratch_bytes() -> dict[str, Callable[..., int]]:
    """SCRATCH_BYTES' part: qualified name -> the op's scratch size (NHWC input dims, then the
    op's own shapes), for the ops with a scratch argument."""
    return {o.qualified: o.scratch_bytes for o in ops.ops() if o.scratch_bytes is not None}


def npu_lowerings(adapt: Callable[[OpDef], T]) -> dict[str, T]:
    """LOWERINGS' part: qualified name -> adapt(op), for the ops with a TOSA lowering."""
    return {o.qualified: adapt(o) for o in ops.ops() if o.npu is not None and o.npu.lower}


def npu_rules() -> dict[str, OpDef]:
    """The ops whose NPU support the registry answers: check, then npu.support."""
    return {o.qualified: o for o in ops.ops() if o.npu is not None and o.npu.lower is not None}


def pad_folds() -> dict[str, int]:
    """The convolutions a cortex_m::pad folds into: qualified name -> the position of the
    argument the pad's value must match (npu.pad_fold)."""
    return {
        o.qualified: o.schema.A[o.npu.pad_fold]
        for o in ops.ops()
        if o.npu is not None and o.npu.pad_fold is not None
    }


def macs() -> dict[str, OpDef]:
    """The ops whose MAC count their definition gives (the partitioner's instruction_macs)."""
    return {o.qualified: o for o in ops.ops() if o.macs is not None}


def emitters(resolve: Callable[[str], object], adapt: Callable[[Pattern], T]) -> dict[object, T]:
    """lowering's EMITTERS part: resolve(aten name) -> adapt(pattern), for the patterns with
    an int8 rule. `resolve` turns "aten::slice.Tensor" into the torch target (lower/ does it:
    this layer has no torch), and fails on a name torch lacks."""
    return {resolve(t): adapt(p) for p in ops.patterns() if p.lower is not None for t in p.aten}


def float_emitters(resolve: Callable[[str], object], adapt: Callable[[Pattern], T]) -> dict[object, T]:
    """lowering's FLOAT_EMITTERS: resolve(aten name) -> adapt(pattern), for the patterns with
    an fp32 rule (a Pattern's lower_float: the node was left in float32)."""
    return {
        resolve(t): adapt(p) for p in ops.patterns() if p.lower_float is not None for t in p.aten
    }


def annotations(resolve: Callable[[str], object], kind: str) -> dict[object, Mapping[str, Any]]:
    """The quantizer's targets of one annotate kind: resolve(aten name) -> the Annotate's
    params (e.g. "table": {"kind": "sigmoid", "fixed_qparams": (1/256, -128)})."""
    return {
        resolve(t): p.annotate.params
        for p in ops.patterns()
        if p.annotate is not None and p.annotate.kind == kind
        for t in p.aten
    }


def pattern_params(resolve: Callable[[str], object], key: str) -> dict[object, Any]:
    """resolve(aten name) -> params[key], for the patterns whose params hold `key`."""
    return {resolve(t): p.params[key] for p in ops.patterns() if key in p.params for t in p.aten}


def table_functions(resolve: Callable[[str], object]) -> dict[object, Callable[[float], float]]:
    """TABLE_FUNCTIONS: resolve(aten name) -> the float function its table tabulates."""
    return pattern_params(resolve, "function")


def activation_bounds(resolve: Callable[[str], object]) -> dict[object, Callable[..., Any]]:
    """The fusable activations: resolve(aten name) -> its bounds(arg, node) -> (min, max)
    (torchmcu/ops/defs/activations.py)."""
    return pattern_params(resolve, "bounds")


def noops(resolve: Callable[[str], object]) -> dict[object, Callable[..., bool]]:
    """The eval graph's no-ops, removed before quantization: resolve(aten name) -> its
    noop(arg, node) -> bool (torchmcu/ops/defs/views.py)."""
    return pattern_params(resolve, "noop")
