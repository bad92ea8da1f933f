"""torchmcu.ops.core.Schema: ExecuTorch schema strings parsed into named arguments.

The reference for the grammar is the argument lists docs/operators.md writes (ExecuTorch's and
ATen's own text): every one of them must parse and print back unchanged."""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest
from torchmcu import ops
from torchmcu.ops.core import Arg, OpDef, Schema, SchemaError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("definition", ops.ops(), ids=lambda o: o.key)
def test_every_definition_schema_round_trips(definition: OpDef) -> None:
    # docs/operators.md prints str(schema) (torchmcu/ops/docs.py): it must parse back
    text = str(definition.schema)
    assert Schema.parse(text) == definition.schema
    assert text.startswith(f"{definition.qualified}.{definition.schema.overload}(")


CONV = (
    "cortex_m::quantized_conv2d.out(Tensor input, Tensor weight, Tensor? bias, int[] stride,"
    " int[] padding, int[] dilation, int input_offset, int output_offset,"
    " Tensor requantize_multipliers, Tensor requantize_shifts, int activation_min,"
    " int activation_max, Tensor scratch, *, Tensor(a!) out) -> Tensor(a!)"
)


def test_names_positions_and_call_args() -> None:
    s = Schema.parse(CONV)
    assert (s.namespace, s.name, s.overload) == ("cortex_m", "quantized_conv2d", "out")
    assert s.qualified == "cortex_m::quantized_conv2d"
    assert s.key == "cortex_m::quantized_conv2d.out"
    assert s.A.stride == 3 and s.A["input_offset"] == 6 and s.A.out == 13
    assert "scratch" in s.A and "groups" not in s.A
    assert list(s.A)[:3] == ["input", "weight", "bias"]
    assert [a.name for a in s.outs] == ["out"]
    assert s.n_call_args == 15  # 14 arguments + the out tensor again
    with pytest.raises(AttributeError, match="quantized_conv2d.out has no argument 'groups'"):
        _ = s.A.groups
    with pytest.raises(AttributeError):
        s.A.stride = 4  # type: ignore[misc]


def test_argument_fields() -> None:
    s = Schema.parse(CONV)
    bias, stride, out = s.args[2], s.args[3], s.args[13]
    assert bias == Arg("bias", "Tensor?", 2)
    assert bias.optional and bias.base == "Tensor" and not bias.is_list
    assert stride.is_list and stride.base == "int" and not stride.kw_only
    assert out == Arg("out", "Tensor", 13, kw_only=True, alias="a", mutable=True)
    assert str(out) == "Tensor(a!) out"


def test_keyword_only_defaults_and_optional_lists() -> None:
    s = Schema.parse(
        "aten::mean.out(Tensor self, int[1]? dim, bool keepdim=False, *,"
        " ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)"
    )
    dim, keepdim, dtype = s.args[1:4]
    assert (dim.type, dim.optional, dim.is_list, dim.base) == ("int[1]?", True, True, "int")
    assert (keepdim.default, keepdim.kw_only) == ("False", False)
    assert (dtype.type, dtype.default, dtype.kw_only) == ("ScalarType?", "None", True)
    assert [a.kw_only for a in s.args] == [False, False, False, True, True]

    s = Schema.parse(
        'aten::gelu.out(Tensor self, *, str approximate="none", Tensor(a!) out) -> Tensor(a!)'
    )
    assert s.args[1].default == '"none"'
    s = Schema.parse("aten::x.y(Tensor self, *, int[]? dim_order=None, str s='a, b') -> Tensor")
    assert s.args[1].type == "int[]?" and s.args[2].default == "'a, b'"  # a comma in a string


def test_tensor_lists() -> None:
    s = Schema.parse("aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)")
    assert s.args[0] == Arg("tensors", "Tensor[]", 0)
    assert s.args[0].is_list and s.args[1].default == "0"
    s = Schema.parse("aten::unbind_copy.int_out(Tensor self, int dim=0, *, Tensor(a!)[] out) -> ()")
    assert s.args[2].type == "Tensor[]" and s.args[2].alias == "a" and s.args[2].mutable
    assert str(s.args[2]) == "Tensor(a!)[] out"
    assert s.returns == () and s.n_call_args == 3


def test_returns() -> None:
    s = Schema.parse(
        "aten::native_layer_norm.out(Tensor input, SymInt[] normalized_shape,"
        " Tensor? weight, Tensor? bias, float eps, *, Tensor(a!) out0,"
        " Tensor(b!) out1, Tensor(c!) out2) -> (Tensor(a!), Tensor(b!), Tensor(c!))"
    )
    assert [r.alias for r in s.returns] == ["a", "b", "c"]
    assert [a.name for a in s.outs] == ["out0", "out1", "out2"]
    assert s.n_call_args == 9  # 8 arguments + one TensorList of the outs
    s = Schema.parse("aten::sym_size.int(Tensor self, int dim) -> SymInt")
    assert s.returns == (Arg("", "SymInt", 0),) and s.outs == () and s.n_call_args == 3
    s = Schema.parse(
        "executorch_prim::et_copy_index.tensor(Tensor(a!) self, Tensor copy_from,"
        " SymInt index) -> ()"
    )
    assert s.returns == () and s.n_call_args == 3 and s.args[0].mutable
    s = Schema.parse(
        "aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)"
    )
    assert [r.name for r in s.returns] == ["values", "indices"]
    assert str(s).endswith("-> (Tensor values, Tensor indices)")


def test_default_overload_and_normalised_text() -> None:
    s = Schema.parse("aten::relu(Tensor self) -> Tensor")
    assert (
        s.overload == "" and s.key == "aten::relu" and str(s) == "aten::relu(Tensor self) -> Tensor"
    )
    messy = "aten::x.y(  Tensor  self ,int dim = 0,  *,Tensor(a!) out ) ->  (Tensor(a!))"
    assert (
        str(Schema.parse(messy))
        == "aten::x.y(Tensor self, int dim=0, *, Tensor(a!) out) -> Tensor(a!)"
    )
    assert Schema.parse("a::b.c() -> ()").args == ()


def test_renamed_keeps_the_arguments() -> None:
    s = Schema.parse(CONV)
    nhwc = s.renamed("quantized_conv2d_nhwc")
    assert nhwc.key == "cortex_m::quantized_conv2d_nhwc.out" and nhwc.args == s.args
    assert nhwc.A.scratch == 12


def test_copies_and_pickles() -> None:
    s = Schema.parse(CONV)
    for twin in (copy.deepcopy(s), pickle.loads(pickle.dumps(s))):
        assert twin == s and twin.A.scratch == 12


@pytest.mark.parametrize(
    "text, message",
    [
        ("quantized_conv2d.out(Tensor x) -> Tensor", "expected 'ns::name.overload"),
        ("a::b.c(Tensor x) Tensor", "missing '-> returns'"),
        ("a::b.c(Tensor x -> Tensor", "unclosed argument list"),
        ("a::b.c(Tensor) -> Tensor", "cannot parse argument 'Tensor'"),
        ("a::b.c(Tensor x, int[ y) -> Tensor", "unbalanced"),
        ("a::b.c(Tensor(a -> *) self) -> Tensor(a)", "cannot parse argument"),
        ("a::b.c(Tensor x, Tensor x) -> Tensor", "repeated argument names"),
        ("a::b.c(Tensor x, *, *, Tensor y) -> Tensor", "two '\\*'"),
        ("a::b.c(Tensor x, *) -> Tensor", "no keyword-only argument"),
        ("a::b.c(Tensor x, , int y) -> Tensor", "cannot parse argument ''"),
        ("a::b.c(Tensor x) -> (Tensor, )", "empty returned item"),
        ("a::b.c(Tensor x) -> Tensor y=1", "cannot parse returned item"),
    ],
)
def test_rejects(text: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        Schema.parse(text)
