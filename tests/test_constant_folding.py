"""Constant subgraphs folded before quantization (torchmcu.quantize.constants): tables a model
builds from its buffers or from shapes alone (a causal mask, positions) become constants, so
they need no kernels; parameters are left for the quantizer."""

from __future__ import annotations

import numpy as np
import torch
import torchmcu
from torch import nn
from torchmcu import native
from torchmcu.quantize.api import export_model
from torchmcu.reference.interpreter import run_program as reference_run

_aten = torch.ops.aten


class Positions(nn.Module):
    """x + a position table from arange, gated by a column of a causal-mask buffer, then a
    linear layer: every table op (arange, .float(), mul, slice, ne) is on constants."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.register_buffer("mask", torch.tril(torch.ones(8, 8)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(8).float().unsqueeze(-1) * 0.05
        keep = (self.mask[:, 1:2] != 0).float()
        return self.fc(x + pos * keep)


def _targets(gm: torch.fx.GraphModule) -> set[object]:
    return {n.target for n in gm.graph.nodes if n.op == "call_function"}


def test_tables_fold_and_parameters_stay() -> None:
    gm = export_model(Positions().eval(), (torch.randn(1, 8, 16),))
    targets = _targets(gm)
    # what is left: the add of the folded table and the linear layer on its parameters
    assert targets == {_aten.add.Tensor, _aten.linear.default}, targets
    (table,) = [n for n in gm.graph.nodes if n.op == "get_attr" and n.target.startswith("_folded")]
    expected = torch.arange(8.0).unsqueeze(-1) * 0.05 * (torch.arange(8) >= 1).float().unsqueeze(-1)
    torch.testing.assert_close(getattr(gm, table.target), expected, rtol=0, atol=0)
    assert {n.target for n in gm.graph.nodes if n.op == "get_attr"} >= {"fc.weight", "fc.bias"}


def test_model_with_tables_exports_bit_exact_on_the_host() -> None:
    torch.manual_seed(0)
    model = Positions().eval()
    cal = [(torch.randn(1, 8, 16),) for _ in range(8)]
    exported = torchmcu.export(model, cal[0], calibration=cal)
    ops = [o.name for o in exported.program.execution_plan[0].operators]
    assert ops == [
        "cortex_m::quantize_per_tensor",
        "cortex_m::quantized_add",
        "cortex_m::quantized_linear",
        "cortex_m::dequantize_per_tensor",
    ]
    for (x,) in cal[:3]:
        (host,) = native.run_program(exported.pte_bytes, [x.numpy()])
        (ref,) = reference_run(exported.program, [x.numpy()])
        np.testing.assert_array_equal(host, ref)
        float_out = model(x).detach().numpy()
        sqnr = 10 * np.log10(np.sum(float_out**2) / np.sum((float_out - host) ** 2))
        assert sqnr > 25, sqnr
