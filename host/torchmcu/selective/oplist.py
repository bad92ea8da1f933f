"""selected_operators.yaml: the operators (and kernel keys) a program needs.

The layout is ExecuTorch's selective-build one (what `executorch/codegen/tools/gen_oplist.py`
writes), so its tooling can read our lists and we can read its: top-level
`include_all_non_op_selectives`, `include_all_operators`, `operators` (per "name.overload":
is_root_operator, is_used_for_training, include_all_overloads, debug_info) and
`et_kernel_metadata` (per "name.overload": kernel keys "v1/<dtype>;<dim order>|...", one
dtype;dim-order pair per tensor argument in argument order, dtype as the ScalarType number).
Documents are kept canonical (sorted lists, plain bools) so equal selections compare equal.

Delegates: ExecuTorch's layout has no key for backends, so a program's delegates are recorded
as torchgen build features, `build_features: [delegate:<backend id>]` (e.g.
`delegate:EthosUBackend`): torchgen's reader (SelectiveBuilder.from_yaml_dict) accepts the key
and its combine unions it as our merge does. A backend is selected when listed, or by
include_all_non_op_selectives (torchgen's switch for everything that is not an operator).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from torchmcu.pte.program import (
    JumpFalseCall,
    KernelCall,
    MoveCall,
    OptionalTensorList,
    Program,
    String,
    Tensor,
    TensorList,
)
from torchmcu.selective.variants import (
    check_features,
    left_out_defines,
    program_kernel_variants,
)

OpList = dict[str, Any]

_TOP_LEVEL = {
    "include_all_non_op_selectives",
    "include_all_operators",
    "debug_info",
    "operators",
    "kernel_metadata",
    "et_kernel_metadata",
    "custom_classes",
    "build_features",
}
_OP_FLAGS = ("is_root_operator", "is_used_for_training", "include_all_overloads")
DELEGATE_FEATURE = "delegate:"  # build_features entry prefix of a delegate backend id
_BACKEND_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a C identifier: it names a table entry
# a 0-d tensor (a reduction to a scalar) has an empty dim order: "4;"
_KERNEL_KEY = re.compile(r"^(default|v1(/\d+;(\d+(,\d+)*)?(\|\d+;(\d+(,\d+)*)?)*)?)$")


# Runtime features an image may leave out (firmware/runtime/src/loader.h): a program's list
# records those it uses as build_features 'runtime:<feature>'. Delegates are selected by their
# 'delegate:<id>' entries and control flow also by any executorch_prim:: operator (the loop
# kernels); include_all_non_op_selectives selects every feature.
RUNTIME_FEATURE = "runtime:"
RUNTIME_FEATURES = ("delegates", "control_flow", "string_list_values")


class OpListError(ValueError):
    """A selected_operators.yaml that is malformed, or selects what the tree cannot build."""


def op_key(name: str, overload: str) -> str:
    """'cortex_m::quantized_linear' + 'out' -> 'cortex_m::quantized_linear.out' (ExecuTorch's key)."""
    return f"{name}.{overload}" if overload else name


def split_key(key: str) -> tuple[str, str]:
    """'ns::op.overload' -> ('ns::op', 'overload'); no overload -> ('ns::op', '')."""
    ns, sep, rest = key.rpartition("::")
    base, dot, overload = rest.partition(".")
    return f"{ns}{sep}{base}", overload if dot else ""


def kernel_key(call: KernelCall, values: list[Any]) -> str:
    """ExecuTorch's kernel key of one call: dtype;dim-order of each tensor argument, in order."""
    pairs = [
        f"{int(v.scalar_type)};{','.join(str(d) for d in v.dim_order)}"
        for v in (values[i] for i in call.args)
        if isinstance(v, Tensor)
    ]
    return "v1/" + "|".join(pairs) if pairs else "v1"


def program_operators(program: Program) -> list[str]:
    """The 'name.overload' keys of every operator a program's plans declare, sorted."""
    return sorted(
        {op_key(op.name, op.overload) for plan in program.execution_plan for op in plan.operators}
    )


def delegate_feature(backend_id: str) -> str:
    """'EthosUBackend' -> 'delegate:EthosUBackend', its build_features entry."""
    return DELEGATE_FEATURE + backend_id


def program_delegates(program: Program) -> list[str]:
    """The backend ids of every delegate a program's plans declare, sorted (the runtime
    initialises each declared delegate at load, so each needs its backend in the image)."""
    return sorted({d.id for plan in program.execution_plan for d in plan.delegates})


def delegate_ids(doc: OpList) -> list[str]:
    """The backend ids a list selects by name (build_features 'delegate:<id>'), sorted."""
    return sorted(
        f[len(DELEGATE_FEATURE) :] for f in doc["build_features"] if f.startswith(DELEGATE_FEATURE)
    )


def program_runtime_features(program: Program) -> list[str]:
    """The runtime features (RUNTIME_FEATURES) a program's plans use, in that order."""
    used = {
        "delegates": any(plan.delegates for plan in program.execution_plan),
        "control_flow": any(
            isinstance(ins, (MoveCall, JumpFalseCall))
            for plan in program.execution_plan
            for chain in plan.chains
            for ins in chain.instructions
        ),
        "string_list_values": any(
            isinstance(v, (String, TensorList, OptionalTensorList))
            for plan in program.execution_plan
            for v in plan.values
        ),
    }
    return [f for f in RUNTIME_FEATURES if used[f]]


def runtime_features(doc: OpList) -> list[str]:
    """The runtime features a list selects (RUNTIME_FEATURES order)."""
    doc = canonical(doc)
    if doc["include_all_non_op_selectives"]:
        return list(RUNTIME_FEATURES)
    named = {
        f[len(RUNTIME_FEATURE) :] for f in doc["build_features"] if f.startswith(RUNTIME_FEATURE)
    }
    if delegate_ids(doc):
        named.add("delegates")
    if any(op.startswith("executorch_prim::") for op in doc["operators"]):
        named.add("control_flow")
    return [f for f in RUNTIME_FEATURES if f in named]


def includes_all(doc: OpList) -> bool:
    """The list selects every kernel and feature (so every kernel variant)."""
    doc = canonical(doc)
    return bool(doc["include_all_non_op_selectives"] or doc["include_all_operators"])


def kernel_variant_defines(doc: OpList) -> list[str]:
    """The C defines ('TM_VARIANT_...=0') of the kernel variants the list leaves out (all of
    an operator it does not select: its translation unit may still be compiled for another)."""
    doc = canonical(doc)
    selected = {split_key(name)[0] for name in doc["operators"]}
    return left_out_defines(doc["build_features"], includes_all(doc), selected)


def from_program(program: Program, model_name: str) -> OpList:
    """The selected-operator list of one program (debug_info names the model)."""
    keys: dict[str, set[str]] = {}
    for plan in program.execution_plan:
        for op in plan.operators:
            keys.setdefault(op_key(op.name, op.overload), set())
        for chain in plan.chains:
            for ins in chain.instructions:
                if isinstance(ins, KernelCall):
                    op = plan.operators[ins.op_index]
                    keys[op_key(op.name, op.overload)].add(kernel_key(ins, plan.values))
    operators = {
        name: {
            "is_root_operator": True,
            "is_used_for_training": False,  # inference-only firmware
            "include_all_overloads": False,
            "debug_info": [model_name],
        }
        for name in keys
    }
    return canonical(
        {
            "include_all_non_op_selectives": False,
            "include_all_operators": False,
            "operators": operators,
            "et_kernel_metadata": {name: sorted(k) for name, k in keys.items() if k},
            "build_features": [delegate_feature(d) for d in program_delegates(program)]
            + [RUNTIME_FEATURE + f for f in program_runtime_features(program) if f != "delegates"]
            + program_kernel_variants(program),
        }
    )


def empty() -> OpList:
    return canonical({})


def canonical(doc: dict[str, Any], where: str = "selected operators") -> OpList:
    """Validate `doc` and return it in canonical form (sorted lists, all keys present)."""
    if not isinstance(doc, dict):
        raise OpListError(f"{where}: the document is a {type(doc).__name__}, not a mapping")
    unknown = sorted(set(doc) - _TOP_LEVEL)
    if unknown:
        raise OpListError(f"{where}: unknown top-level keys {unknown}")
    out: OpList = {}
    for flag in ("include_all_non_op_selectives", "include_all_operators"):
        out[flag] = _bool(doc.get(flag, False), f"{where}: {flag}")
    out["debug_info"] = _strings(doc.get("debug_info"), f"{where}: debug_info")
    operators = doc.get("operators") or {}
    if not isinstance(operators, dict):
        raise OpListError(f"{where}: operators must be a mapping of 'name.overload' entries")
    out["operators"] = {}
    for name in sorted(operators):
        entry = operators[name] or {}
        if not isinstance(name, str) or "::" not in name:
            raise OpListError(f"{where}: operator {name!r} is not 'namespace::name[.overload]'")
        if not isinstance(entry, dict):
            raise OpListError(f"{where}: operators[{name!r}] must be a mapping")
        extra = sorted(set(entry) - {*_OP_FLAGS, "debug_info"})
        if extra:
            raise OpListError(f"{where}: operators[{name!r}] has unknown keys {extra}")
        out["operators"][name] = {
            **{
                # An omitted flag reads as true, as torchgen's SelectiveBuildOperator does.
                f: _bool(entry.get(f, True), f"{where}: operators[{name!r}].{f}")
                for f in _OP_FLAGS
            },
            "debug_info": _strings(
                entry.get("debug_info"), f"{where}: operators[{name!r}].debug_info"
            ),
        }
    metadata = doc.get("et_kernel_metadata") or {}
    if not isinstance(metadata, dict):
        raise OpListError(f"{where}: et_kernel_metadata must be a mapping of 'name.overload' lists")
    out["et_kernel_metadata"] = {}
    for name in sorted(metadata):
        if name not in out["operators"]:
            raise OpListError(
                f"{where}: et_kernel_metadata names {name!r}, which is not under operators"
            )
        keys = _strings(metadata[name], f"{where}: et_kernel_metadata[{name!r}]")
        for key in keys:
            if not _KERNEL_KEY.match(key):
                raise OpListError(
                    f"{where}: et_kernel_metadata[{name!r}]: {key!r} is not a kernel key "
                    "('default' or 'v1/<dtype>;<dim order>|...')"
                )
        out["et_kernel_metadata"][name] = keys
    out["kernel_metadata"] = doc.get("kernel_metadata") or {}
    out["custom_classes"] = _strings(doc.get("custom_classes"), f"{where}: custom_classes")
    out["build_features"] = _strings(doc.get("build_features"), f"{where}: build_features")
    for feature in out["build_features"]:
        if feature.startswith(RUNTIME_FEATURE) and feature[len(RUNTIME_FEATURE) :] not in (
            "control_flow",
            "string_list_values",
        ):
            raise OpListError(
                f"{where}: build_features: {feature!r} is not a runtime feature "
                "('runtime:control_flow' or 'runtime:string_list_values'; delegates are "
                "selected by 'delegate:<backend id>')"
            )
        if feature.startswith(DELEGATE_FEATURE) and not _BACKEND_ID.match(
            feature[len(DELEGATE_FEATURE) :]
        ):
            raise OpListError(
                f"{where}: build_features: {feature!r} is not 'delegate:<backend id>' "
                "(letters, digits and _ only, as in delegate:EthosUBackend)"
            )
    try:
        check_features(out["build_features"], where)
    except ValueError as e:
        raise OpListError(str(e)) from None
    return out


def operator_names(doc: OpList) -> list[str]:
    """The 'name.overload' keys a list selects, sorted."""
    return sorted(doc["operators"])


def read_yaml(path: str | os.PathLike[str]) -> OpList:
    """Read and validate a selected_operators.yaml (ours or ExecuTorch's)."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise OpListError(f"{p}: not valid YAML: {e}") from None
    return canonical(raw if raw is not None else {}, str(p))


def dumps(doc: OpList) -> str:
    return yaml.safe_dump(canonical(doc), default_flow_style=False, sort_keys=True)


def write_yaml(doc: OpList, path: str | os.PathLike[str]) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(dumps(doc))
    return p


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise OpListError(f"{where}: expected true or false, got {value!r}")
    return value


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):  # ExecuTorch writes [None] when it had no model name
        value = [v for v in value if v is not None]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise OpListError(f"{where}: expected a list of strings, got {value!r}")
    return sorted(set(value))
