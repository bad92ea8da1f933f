"""The registry against the tables it will replace (docs/design/operator-registry.md, step 2).

Each hand-kept table of today is the independent reference here: the registry must say what
it says. When a table becomes a view of the registry (steps 5-6), its test here becomes
trivially true and is deleted with it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch
from torchmcu import native, ops
from torchmcu.npu.tosa import lowerings, support
from torchmcu.ops import generate
from torchmcu.ops.core import OpDef
from torchmcu.reference import interpreter, scratch

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "firmware" / "kernels"


def _names(definitions: list[OpDef]) -> set[str]:
    return {o.qualified for o in definitions}


def _npu_ops() -> list[OpDef]:
    return [o for o in ops.ops() if o.npu is not None]


def test_native_kernel_names() -> None:
    # the extension adds test kernels of its own (firmware/host_ext/test_kernels.c)
    built = [k for k in native.kernel_names() if not k[0].startswith("torchmcu_test::")]
    assert sorted(built) == sorted((o.qualified, o.schema.overload) for o in ops.ops())


def test_interpreter_handlers() -> None:
    # _SCHEMA_ARGS and _HANDLERS are views (ops.views): every int8 op has a reference
    int8 = ops.ops("int8")
    assert set(interpreter._HANDLERS) == _names(int8)
    assert all(o.reference is not None for o in int8)
    assert {o.schema.overload for o in int8} == {"out"}  # the interpreter runs .out only




def test_npu_support_sets_and_lowerings() -> None:
    npu = _names(_npu_ops())
    assert set(lowerings.LOWERINGS) == npu
    assert all(o.npu.lower is not None for o in _npu_ops())  # type: ignore[union-attr]
    assert set(support.NO_NPU) == _names([o for o in ops.ops() if o.no_npu])
    no_npu = [o for o in ops.ops() if o.no_npu]
    assert {o.no_npu for o in no_npu} == {
        "works on float tensors; no Ethos-U runs float",
        "TOSA has no PReLU; it stays on the Cortex-M",  # torchmcu::quantized_prelu
        "adaptive windows of unequal size (the output size does not divide the input)",
        "no TOSA lowering yet (a later step: TOSA MATMUL)",  # cortex_m::quantized_batch_matmul
        "no TOSA lowering yet",  # torchmcu::quantized_layer_norm
        "no TOSA lowering yet (int16 stays on the CPU)",  # torchmcu::quantized_add16
        # torchmcu::quantized_embedding
        "TOSA GATHER runs on the Ethos-U85 only and is not lowered yet; it stays on the Cortex-M",
    }


def test_emitters_are_the_patterns() -> None:
    # EMITTERS = the patterns' int8 rules, then the torch.cond/torch.map lowering; every
    # emitted op exists
    from torchmcu.lower import kit, lowering
    from torchmcu.lower.rules_control import CONTROL_FLOW_EMITTERS

    defined = {kit.resolve_target(t) for p in ops.patterns() if p.lower for t in p.aten}
    assert set(lowering.EMITTERS) == defined | set(CONTROL_FLOW_EMITTERS)
    keys = {o.key for o in ops.ops()}
    assert all(e.key in keys for p in ops.patterns() for e in p.emits)


def test_scratch() -> None:
    with_scratch = [o for o in ops.ops() if o.kernel.scratch_c]
    assert set(scratch.SCRATCH_BYTES) == _names(with_scratch)
    assert all(o.scratch_bytes is not None for o in with_scratch)  # SCRATCH_BYTES is a view
    header = generate.generated()[generate.KERNEL_ENTRIES_H]
    for o in with_scratch:
        assert o.kernel.scratch_c == "tm_" + scratch.SCRATCH_BYTES[o.qualified].__name__
        assert re.search(rf"\bsize_t {o.kernel.scratch_c}\(", header), o.kernel.scratch_c
        assert "scratch" in o.schema.A, o.key


@pytest.mark.parametrize("definition", ops.ops(), ids=lambda o: o.key)
def test_kernel_declared_and_defined(definition: OpDef) -> None:
    k = definition.kernel
    headers = generate.generated()[generate.KERNEL_ENTRIES_H]
    assert re.search(rf"\b{k.symbol}\b", headers), f"{k.symbol} is not declared"
    assert re.search(rf"^tm_status {k.symbol}\(", (KERNELS / k.source).read_text(), re.MULTILINE), (
        f"{k.symbol} is not defined in {k.source}"
    )
    if definition.variant_of:
        base = ops.get(definition.variant_of)
        assert k.source == base.kernel.source and definition.schema.args == base.schema.args
        assert definition.key == base.key.replace(".out", "_nhwc.out")


def test_aten_schemas_are_torch_s() -> None:
    for o in ops.ops():
        if o.schema.namespace != "aten":
            continue
        packet = getattr(torch.ops.aten, o.schema.name)
        overload = getattr(packet, o.schema.overload or "default")
        assert str(o.schema) == str(overload._schema), o.key


def test_bench_entry_points() -> None:
    tree = ast.parse((ROOT / "bench" / "kernels_mve.py").read_text())
    (entry,) = [
        ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "ENTRY"
    ]
    assert entry == {q: ops.get(f"{q}.out").kernel.symbol for q in entry}
