"""torchmcu.ops: definitions, their registration and the registry API."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from torchmcu import ops
from torchmcu.ops import defs
from torchmcu.ops.core import (
    Annotate,
    Kernel,
    Npu,
    OpDef,
    Registry,
    RegistryError,
    Schema,
    nhwc_variant,
    op,
    pattern,
)

ROOT = Path(__file__).resolve().parents[2]
POOL = (
    "t::pool.out(Tensor input, int[] kernel_size, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)"
)


def _kernel(name: str) -> Kernel:
    return Kernel(f"tm_t_{name}_out", f"t/{name}.c")


def test_op_parses_and_registers() -> None:
    r = Registry()
    pool = op(POOL, family="int8", kernel=_kernel("pool"), npu=Npu(doc="TOSA POOL"), registry=r)
    assert r.get("t::pool.out") is pool and "t::pool.out" in r and len(r) == 1
    assert pool.key == "t::pool.out" and pool.qualified == "t::pool"
    assert pool.schema == Schema.parse(POOL) and pool.schema.A.scratch == 2
    assert pool.kernel.c_name == "T_POOL" and pool.call == "out" and not pool.barrier


def test_duplicates_fail() -> None:
    r = Registry()
    op(POOL, family="int8", kernel=_kernel("pool"), registry=r)
    with pytest.raises(RegistryError, match="t::pool.out is defined twice"):
        op(POOL, family="int8", kernel=_kernel("other"), registry=r)
    other = POOL.replace("t::pool", "t::other")
    with pytest.raises(RegistryError, match="kernel tm_t_pool_out is t::pool.out's too"):
        op(other, family="int8", kernel=_kernel("pool"), registry=r)
    with pytest.raises(RegistryError, match="give scratch_c in its Kernel"):
        op(other, family="int8", kernel=_kernel("other"), scratch_c="tm_s", registry=r)
    assert len(r) == 1


@pytest.mark.parametrize(
    "schema, symbol, source",
    [
        (
            "cortex_m::quantized_add.out",
            "tm_cortex_m_quantized_add_out",
            "cortex_m/quantized_add.c",
        ),
        ("torchmcu::slice_copy.out", "tm_torchmcu_slice_copy_out", "cortex_m/slice_copy.c"),
        ("aten::_softmax.out", "tm_portable_softmax_out", "portable/softmax.c"),
        (
            "dim_order_ops::_clone_dim_order.out",
            "tm_portable_clone_dim_order_out",
            "portable/clone_dim_order.c",
        ),
    ],
)
def test_kernel_naming_rule(schema: str, symbol: str, source: str) -> None:
    r = Registry()
    d = op(schema + "(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", family="int8", registry=r)
    assert (d.kernel.symbol, d.kernel.source, d.kernel.scratch_c) == (symbol, source, None)


def test_nhwc_variant_shares_the_definition() -> None:
    r = Registry()
    kernel = Kernel("tm_t_pool_out", "t/pool.c", scratch_c="tm_t_pool_scratch_bytes")
    base = op(POOL, family="int8", kernel=kernel, npu=Npu(pad_fold="scratch"), registry=r)
    nhwc = nhwc_variant(base, registry=r)
    assert nhwc.key == "t::pool_nhwc.out" and nhwc.variant_of == "t::pool.out"
    # its own entry point, in the base's translation unit, with the base's scratch function
    assert nhwc.kernel == Kernel("tm_portable_pool_nhwc_out", "t/pool.c", kernel.scratch_c)
    assert nhwc.schema.args == base.schema.args and nhwc.npu is base.npu
    orphan = OpDef(
        Schema.parse(POOL.replace("pool", "lone")),
        "int8",
        _kernel("lone"),
        variant_of="t::missing.out",
    )
    with pytest.raises(RegistryError, match="variant_of t::missing.out is not defined"):
        r.add(orphan)


@pytest.mark.parametrize(
    "schema, fields, message",
    [
        (POOL, {"family": "fp16"}, "family 'fp16'"),
        (POOL, {"call": "twice"}, "call 'twice'"),
        (POOL, {"npu": Npu(), "no_npu": "float"}, "both npu and no_npu"),
        ("t::x.out(Tensor(a!) out, int n) -> Tensor(a!)", {}, "one out, the last argument"),
        ("t::x.int(Tensor self, int dim) -> SymInt", {}, "one out, the last argument"),
        (
            "t::x.out(Tensor a, *, Tensor(a!) o0, Tensor(b!) o1) -> (Tensor(a!), Tensor(b!))",
            {},
            "one out",
        ),
        (
            "t::x.out(Tensor a, *, Tensor(a!) out) -> Tensor(a!)",
            {"call": "multi_out"},
            "two or more outs",
        ),
    ],
)
def test_inconsistent_definitions_fail(schema: str, fields: dict, message: str) -> None:
    kw = {"family": "int8", **fields}
    with pytest.raises(RegistryError, match=message):
        op(schema, kernel=_kernel("x"), registry=Registry(), **kw)


def test_order_and_families() -> None:
    r = Registry()
    late = op(POOL.replace("pool", "late"), family="portable", kernel=_kernel("late"), registry=r)
    second = op(POOL.replace("pool", "b"), family="int8", kernel=_kernel("b"), registry=r)
    third = op(POOL.replace("pool", "a"), family="control", kernel=_kernel("a"), registry=r)
    assert r.ops() == [late, second, third]  # registration order
    assert r.ops("portable") == [late] and r.ops("int8") == [second]
    with pytest.raises(ValueError, match="family 'float'"):
        r.ops("float")
    with pytest.raises(KeyError, match="no operator 't::pool.out'"):
        r.get("t::pool.out")


def test_patterns() -> None:
    r = Registry()
    emitted = op(POOL, family="int8", kernel=_kernel("pool"), registry=r)
    p = pattern(
        "aten::max_pool2d.default",
        "aten::avg_pool2d.default",
        annotate=Annotate("shared"),
        emits=(emitted,),
        registry=r,
    )
    assert r.patterns() == [p] and p.aten == (
        "aten::max_pool2d.default",
        "aten::avg_pool2d.default",
    )
    assert p.annotate is not None and dict(p.annotate.params) == {}
    with pytest.raises(RegistryError, match="avg_pool2d.default has two patterns giving annotate"):
        pattern("aten::avg_pool2d.default", annotate=Annotate("shared"), registry=r)
    # the fp32 rule may sit beside the portable kernel it emits, in a pattern of its own
    fp32 = pattern("aten::avg_pool2d.default", lower_float=lambda k, node: None, registry=r)
    assert r.patterns() == [p, fp32]
    with pytest.raises(
        RegistryError, match="avg_pool2d.default has two patterns giving lower_float"
    ):
        pattern("aten::avg_pool2d.default", lower_float=lambda k, node: None, registry=r)
    with pytest.raises(RegistryError, match="annotate kind 'fused'"):
        Annotate("fused")


def test_every_definition_module_is_loaded() -> None:
    names = {m.name for m in pkgutil.iter_modules(defs.__path__)}
    assert {f"{defs.__name__}.{n}" for n in names} <= set(sys.modules)
    assert all(ops.get(o.key) is o for o in ops.ops())


def test_importing_ops_imports_no_torch() -> None:
    code = (
        "import sys, torchmcu.ops; bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'torchao', 'executorch') or m.startswith(('torchmcu.lower', 'torchmcu.npu',"
        " 'torchmcu.reference', 'torchmcu.quantize'))); print(bad); sys.exit(bool(bad))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "host")},
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_reference_package_exports_every_int8_operator() -> None:
    # torchmcu.reference's names are a view of the registry, so none can go missing
    from torchmcu import reference

    names = {o.schema.name for o in ops.ops("int8") if o.variant_of is None}
    assert names <= set(reference.__all__)
    x = np.arange(-4, 4, dtype=np.int8).reshape(2, 4)
    np.testing.assert_array_equal(reference.slice_copy(x, 1, 1, 4, 2), x[:, 1:4:2])
