"""lower/kit.py, the lowering toolkit a definition's aten rule gets: aten arguments by schema
name, kernel calls by the definition's argument names, registry aten names resolved to torch."""

from __future__ import annotations

import pytest
import torch
import torch.fx
from torchmcu import ops
from torchmcu.lower import lowering
from torchmcu.lower.errors import LoweringError
from torchmcu.lower.kit import Kit, resolve_target

SLICE = ops.get("torchmcu::slice_copy.out")


def _slice_node(*args: object, **kwargs: object) -> torch.fx.Node:
    g = torch.fx.Graph()
    x = g.placeholder("x")
    return g.call_function(torch.ops.aten.slice.Tensor, (x, *args), kwargs)


def test_aten_arguments_by_schema_name() -> None:
    node = _slice_node(1, end=3)
    assert Kit.aten_arg(node, "dim", 0) == 1  # positional
    assert Kit.aten_arg(node, "end", None) == 3  # keyword
    assert Kit.aten_arg(node, "start", None) is None  # absent: the default given
    assert Kit.aten_arg(node, "step", 1) == 1
    with pytest.raises(LoweringError, match="has no argument 'stride'"):
        Kit.aten_arg(node, "stride", 1)


def test_call_takes_the_schema_names_in_schema_order() -> None:
    k = Kit(None)  # type: ignore[arg-type]  # refused before the context is touched
    with pytest.raises(LoweringError, match="the schema's are"):
        k.call(SLICE, None, self=0, start=2, dim=1, end=3, step=4, out=5)
    with pytest.raises(LoweringError, match="the schema's are"):
        k.call(SLICE, None, self=0, dim=1, start=2, end=3, step=4)  # no out


def test_registry_names_resolve_to_torch_targets() -> None:
    assert resolve_target("aten::slice.Tensor") is torch.ops.aten.slice.Tensor
    assert resolve_target("aten::select.int") is torch.ops.aten.select.int
    with pytest.raises(LoweringError, match="torch does not have"):
        resolve_target("aten::no_such_op.default")


def test_emitters_take_the_registry_rules() -> None:
    for target in (torch.ops.aten.slice.Tensor, torch.ops.aten.select.int):
        assert target in lowering.EMITTERS
