"""Kernel variants: the code paths of a kernel an image may leave out (ops.KernelVariants).

A program's list records the paths its calls take as build_features
'kernel:<operator>/<variant>' (e.g. 'kernel:cortex_m::quantized_depthwise_conv2d/tail'), from
each registry operator's `used` rule; merge unions them. CMake compiles an operator's
variants that its list records and defines the others' TM_VARIANT_* to 0. An operator whose
variants the list does not record (ExecuTorch's lists, hand-written ones, or
include_all_non_op_selectives / include_all_operators) gets all of them, so only a list written
by export can leave a path out, and export records every path a call takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from torchmcu import ops
from torchmcu.ops.core import ArgError, Bound, OpDef
from torchmcu.pte import program as pm

KERNEL_FEATURE = "kernel:"  # build_features entry prefix of a kernel variant

_DTYPES = {pm.ScalarType.INT: np.int32, pm.ScalarType.CHAR: np.int8}


class _ConstantBound(Bound):
    """A call of a program, with the program's constant tensors readable (data())."""

    def __init__(
        self, op: OpDef, values: Sequence[pm.EValue], args: Sequence[int], constants: list[bytes]
    ) -> None:
        super().__init__(op, values, args)
        self._constants = constants

    def data(self, name: str) -> Any:
        t = self.value(name)
        dtype = _DTYPES.get(t.scalar_type) if isinstance(t, pm.Tensor) else None
        if dtype is None or not 0 < t.data_buffer_idx < len(self._constants):
            return None
        raw = self._constants[t.data_buffer_idx]
        size = np.dtype(dtype).itemsize
        offset = t.storage_offset * size  # storage_offset counts elements
        if len(raw) < offset + t.numel * size:
            return None
        return np.frombuffer(raw, dtype, t.numel, offset)


def base_op(op: OpDef) -> OpDef:
    """The operator whose translation unit (and variants) an _nhwc alias shares."""
    return ops.get(op.variant_of) if op.variant_of is not None else op


def variant_feature(op: OpDef, variant: str) -> str:
    """'kernel:cortex_m::quantized_conv2d/shift_any'."""
    return f"{KERNEL_FEATURE}{base_op(op).qualified}/{variant}"


def variant_define(op: OpDef, variant: str) -> str:
    """The C macro of a variant: TM_VARIANT_CORTEX_M_QUANTIZED_CONV2D_SHIFT_ANY."""
    return base_op(op).variant_macro(variant)


def program_kernel_variants(program: pm.Program) -> list[str]:
    """The build_features entries of the variants a program's calls take, sorted. A call whose
    rule cannot bind it (an argument the kernel would refuse) records all its variants."""
    used: set[str] = set()
    for plan in program.execution_plan:
        definitions = [ops.of_operator(o) for o in plan.operators]
        for chain in plan.chains:
            for ins in chain.instructions:
                if not isinstance(ins, pm.KernelCall):
                    continue
                op = definitions[ins.op_index]
                if op is None or op.variants is None:
                    continue
                b = _ConstantBound(op, plan.values, ins.args, program.constants)
                try:
                    names: Iterable[str] = op.variants.used(b)
                except (ArgError, ValueError, IndexError):
                    names = op.variants.names
                used.update(variant_feature(op, v) for v in names)
    return sorted(used)


def variant_ops() -> list[tuple[OpDef, tuple[str, ...]]]:
    """The registry's operators with variants and their names, in registry order (aliases left
    out: they share their base's)."""
    return [
        (o, o.variants.names) for o in ops.ops() if o.variants is not None and o.variant_of is None
    ]


def _recorded(features: Iterable[str]) -> dict[str, set[str]]:
    """'kernel:<operator>/<variant>' entries by operator."""
    out: dict[str, set[str]] = {}
    for f in features:
        if f.startswith(KERNEL_FEATURE):
            name, _, variant = f[len(KERNEL_FEATURE) :].partition("/")
            out.setdefault(name, set()).add(variant)
    return out


def check_features(features: Iterable[str], where: str) -> None:
    """ValueError naming a 'kernel:' entry that is no registry operator's variant."""
    known = {o.qualified: names for o, names in variant_ops()}
    for name, variants in _recorded(features).items():
        if name not in known:
            raise ValueError(
                f"{where}: build_features: 'kernel:{name}/...' names no operator with kernel "
                f"variants (those with some: {', '.join(sorted(known))})"
            )
        unknown = sorted(variants - set(known[name]))
        if unknown:
            raise ValueError(
                f"{where}: build_features: {name} has no kernel variant "
                f"{', '.join(unknown)} (its variants: {', '.join(known[name])})"
            )


def compiled_variants(
    features: Iterable[str], everything: bool, selected: Iterable[str] | None = None
) -> dict[str, tuple[str, ...]]:
    """Per operator with variants, those an image compiles: every one when `everything` (no
    list, or it includes all) or when the list records none of that operator's; none of an
    operator not `selected` (the 'namespace::name' of the list's operators; None: all
    selected), which matters where two operators share a translation unit."""
    recorded = _recorded(features)
    chosen_ops = None if selected is None or everything else set(selected)
    out = {}
    for o, names in variant_ops():
        chosen = recorded.get(o.qualified)
        if chosen_ops is not None and not _selected(o, chosen_ops):
            out[o.qualified] = ()
        elif everything or not chosen:
            out[o.qualified] = names
        else:
            out[o.qualified] = tuple(n for n in names if n in chosen)
    return out


def _selected(op: OpDef, names: set[str]) -> bool:
    """The operator or its _nhwc alias is among `names` ('namespace::name')."""
    return op.qualified in names or f"{op.qualified}_nhwc" in names


def left_out_defines(
    features: Iterable[str], everything: bool, selected: Iterable[str] | None = None
) -> list[str]:
    """'TM_VARIANT_...=0' for each variant an image leaves out, in registry order."""
    compiled = compiled_variants(features, everything, selected)
    return [
        f"{variant_define(o, v)}=0"
        for o, names in variant_ops()
        for v in names
        if v not in compiled[o.qualified]
    ]


def missing_variants(program: pm.Program, features: Iterable[str], everything: bool) -> list[str]:
    """The program's variant entries an image built from the list would leave out, sorted."""
    compiled = compiled_variants(features, everything)
    missing = []
    for f in program_kernel_variants(program):
        name, _, variant = f[len(KERNEL_FEATURE) :].partition("/")
        if variant not in compiled.get(name, (variant,)):
            missing.append(f)
    return missing
