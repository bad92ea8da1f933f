"""The stages' tables, derived from the registry (docs/design/operator-registry.md 4.4).

A stage keeps its table as a module-level dict, `{**views.x(...), **_LEGACY_X}`, until every
operator of it is defined here; the stage's own types stay out of this layer, so where a table
holds a callable the stage passes `adapt`, which turns a definition into the callable its
dispatch calls (binding the call with the stage's Bound)."""

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


def npu_lowerings(adapt: Callable[[OpDef], T]) -> dict[str, T]:
    """LOWERINGS' part: qualified name -> adapt(op), for the ops with a TOSA lowering."""
    return {o.qualified: adapt(o) for o in ops.ops() if o.npu is not None and o.npu.lower}


def npu_rules() -> dict[str, OpDef]:
    """The ops whose NPU support the registry answers: check, then npu.support."""
    return {o.qualified: o for o in ops.ops() if o.npu is not None and o.npu.lower is not None}


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


def table_functions(resolve: Callable[[str], object]) -> dict[object, Callable[[float], float]]:
    """TABLE_FUNCTIONS: resolve(aten name) -> the float function its table tabulates."""
    return {resolve(t): p.params["function"] for p in ops.patterns() if "function" in p.params for t in p.aten}
