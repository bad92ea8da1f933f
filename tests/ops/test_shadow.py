"""The registry against the tables it will replace (docs/design/operator-registry.md, step 2).

Each hand-kept table of today is the independent reference here: the registry must say what
it says. When a table becomes a view of the registry (steps 5-6), its test here becomes
trivially true and is deleted with it."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torchmcu import native, ops
from torchmcu.npu import partition, subprogram
from torchmcu.npu.tosa import lowerings, ops_layout, support
from torchmcu.ops.core import OpDef
from torchmcu.pte import program as pm
from torchmcu.reference import interpreter, ops_predicate, scratch

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "firmware" / "kernels"


def _names(definitions: list[OpDef]) -> set[str]:
    return {o.qualified for o in definitions}


def _npu_ops() -> list[OpDef]:
    return [o for o in ops.ops() if o.npu is not None]


def test_the_45_kernels() -> None:
    assert len(ops.ops()) == 45
    assert [len(ops.ops(f)) for f in ("int8", "portable", "control")] == [18, 16, 11]
    assert [o.kernel.table_index for o in ops.ops()] == list(range(45))


def test_native_kernel_names() -> None:
    # the extension adds test kernels of its own (firmware/host_ext/test_kernels.c)
    built = [k for k in native.kernel_names() if not k[0].startswith("torchmcu_test::")]
    assert sorted(built) == sorted((o.qualified, o.schema.overload) for o in ops.ops())


def test_interpreter_handlers() -> None:
    # _SCHEMA_ARGS is a view (ops.views.schema_args); _HANDLERS is one for the ops with a
    # reference, and the legacy part must hold exactly the others
    int8 = ops.ops("int8")
    assert set(interpreter._HANDLERS) == _names(int8)
    assert set(interpreter._LEGACY_HANDLERS) == _names([o for o in int8 if o.reference is None])
    assert {o.schema.overload for o in int8} == {"out"}  # the interpreter runs .out only


def test_control_ops() -> None:
    control = ops.ops("control")
    assert ops_predicate.CONTROL_OPS == {
        (o.qualified, o.schema.overload): o.schema.n_call_args for o in control
    }
    assert set(ops_predicate.PREDICATE_OPS) == {
        (o.qualified, o.schema.overload) for o in control if o.call == "out"
    }
    assert set(ops_predicate.LOOP_OPS) == {
        (o.qualified, o.schema.overload) for o in control if o.call.startswith("loop_")
    }


def test_method_c_loop_roles() -> None:
    text = (ROOT / "firmware" / "runtime" / "src" / "method.c").read_text()
    rows = re.findall(r'\{"([\w:]+)", "(\w+)", (LOOP_\w+)\}', text)
    role = {
        "LOOP_SCALAR_OUT": "loop_scalar",
        "LOOP_SELECT": "loop_select",
        "LOOP_COPY_INDEX": "loop_copy_index",
    }
    assert {(name, overload): role[r] for name, overload, r in rows} == {
        (o.qualified, o.schema.overload): o.call for o in ops.ops() if o.call.startswith("loop_")
    }


def _plan_of(o: OpDef) -> tuple[pm.ExecutionPlan, pm.KernelCall]:
    plan = SimpleNamespace(operators=[pm.Operator(o.qualified, o.schema.overload)])
    return plan, pm.KernelCall(0, [])  # type: ignore[return-value]


@pytest.mark.parametrize("definition", ops.ops(), ids=lambda o: o.key)
def test_partition_and_subprogram_conventions(definition: OpDef) -> None:
    plan, call = _plan_of(definition)
    assert partition.is_barrier(plan, call, None) == definition.barrier
    raw = subprogram._raw_loop_op(plan, call)
    expected = {"loop_copy_index": "write0", "loop_scalar": "read"}.get(definition.call)
    assert raw == expected


def test_npu_support_sets_and_lowerings() -> None:
    npu = _names(_npu_ops())
    assert set(lowerings.LOWERINGS) == npu
    legacy = _names([o for o in _npu_ops() if o.npu.lower is None])  # type: ignore[union-attr]
    assert set(lowerings._LEGACY_LOWERINGS) == legacy
    assert support.FLOAT_OPS == {o.qualified for o in ops.ops() if o.no_npu is not None}
    assert (
        support.CONV_OPS | support.DEPTHWISE_OPS | support.AVG_POOL_OPS | support.MAX_POOL_OPS
        <= npu
    )
    no_npu = [o for o in ops.ops() if o.no_npu]
    assert {o.no_npu for o in no_npu} == {"works on float tensors; no Ethos-U runs float"}


def test_legacy_emitters_hold_no_defined_pattern() -> None:
    # EMITTERS = {**views.emitters(...), **_LEGACY_EMITTERS}: a pattern that moved into a
    # definition must leave the legacy part in the same commit, and every emitted op exists
    from torchmcu.lower import kit, lowering

    defined = {kit.resolve_target(t) for p in ops.patterns() if p.lower for t in p.aten}
    assert not defined & set(lowering._LEGACY_EMITTERS)
    assert defined <= set(lowering.EMITTERS)
    keys = {o.key for o in ops.ops()}
    assert all(e.key in keys for p in ops.patterns() for e in p.emits)


def test_pad_fold_positions() -> None:
    assert ops_layout._PAD_CONSUMERS == {
        o.qualified: o.schema.A[o.npu.pad_fold] for o in _npu_ops() if o.npu and o.npu.pad_fold
    }


def test_scratch() -> None:
    with_scratch = [o for o in ops.ops() if o.kernel.scratch_c]
    assert set(scratch.SCRATCH_BYTES) == _names(with_scratch)
    header = (KERNELS / "cortex_m" / "cortex_m_kernels.h").read_text()
    for o in with_scratch:
        assert o.kernel.scratch_c == "tm_" + scratch.SCRATCH_BYTES[o.qualified].__name__
        assert re.search(rf"\bsize_t {o.kernel.scratch_c}\(", header), o.kernel.scratch_c
        assert "scratch" in o.schema.A, o.key


@pytest.mark.parametrize("definition", ops.ops(), ids=lambda o: o.key)
def test_kernel_declared_and_defined(definition: OpDef) -> None:
    k = definition.kernel
    headers = "".join(
        (KERNELS / h).read_text()
        for h in ("cortex_m/cortex_m_kernels.h", "portable/portable_kernels.h")
    )
    assert re.search(rf"\b{k.symbol}\b", headers), f"{k.symbol} is not declared"
    assert re.search(rf"^tm_status {k.symbol}\(", (KERNELS / k.source).read_text(), re.MULTILINE), (
        f"{k.symbol} is not defined in {k.source}"
    )
    if definition.variant_of:
        base = ops.get(definition.variant_of)
        assert k.source == base.kernel.source and definition.schema.args == base.schema.args
        assert definition.key == base.key.replace(".out", "_nhwc.out")


def _doc_signatures() -> dict[str, str]:
    """Operator key -> the signature docs/operators.md gives it."""
    text = (ROOT / "docs" / "operators.md").read_text()
    cortex_m, _, portable = text.partition("\n# Portable fp32 operators")
    found: dict[str, str] = {}
    for part, namespace in ((cortex_m, "cortex_m"), (portable, "aten")):
        for section in re.split(r"^## ", part, flags=re.MULTILINE)[1:]:
            heading, _, body = section.partition("\n")
            names = re.findall(r"([\w:]+)\.out", heading)
            lines = re.findall(r"^`(?:(\w+): )?(\(.*?\))`", body, re.MULTILINE)
            for name in names:
                qualified = name if "::" in name else f"{namespace}::{name}"
                sig = [s for prefix, s in lines if prefix in ("", name)]
                if sig:
                    found[f"{qualified}.out"] = sig[0]
    return found


def test_signatures_are_the_documented_ones() -> None:
    documented = _doc_signatures()
    checked = [o for o in ops.ops() if o.family != "control" and not o.variant_of]
    assert {o.key for o in checked} <= set(documented)
    for o in checked:
        assert o.schema.signature == documented[o.key], o.key


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
