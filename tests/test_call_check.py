"""The lowering checks every kernel call it emitted against the operator's definition, after
planning (torchmcu/lower/call_check.py): a rule that gets an argument wrong stops the export
with the instruction, the argument and the model node named, instead of writing a .pte its
runtime refuses. The C kernel is the independent judge of what "refused" means."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _pte_programs import transpose_program
from torch import nn
from torchmcu import export, native
from torchmcu.lower import lowering
from torchmcu.lower.call_check import check_calls
from torchmcu.lower.errors import LoweringError


def test_a_valid_program_passes():
    check_calls(transpose_program([2, 3, 4], [0, 2, 1]))


def test_a_refused_call_is_named_and_the_c_kernel_refuses_it_too():
    # out has the input's sizes, not the permuted ones: transpose.c refuses argument 2 (out)
    program = transpose_program([2, 3, 4], [0, 2, 1], out_sizes=[2, 3, 4])
    with pytest.raises(LoweringError, match=r"instruction 0 \(cortex_m::transpose\.out\).*argument 2 \(out\)"):
        check_calls(program)
    x = np.arange(24, dtype=np.int8).reshape(2, 3, 4)
    with pytest.raises(native.NativeError, match="argument 2"):
        native.call_kernel("cortex_m::transpose", [x, [0, 2, 1], np.zeros((2, 3, 4), np.int8)])


class _Transposes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(5, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).transpose(1, 2)


def test_export_stops_on_a_rule_that_emits_a_bad_argument(monkeypatch):
    rule = lowering.EMITTERS[torch.ops.aten.transpose.int]

    def broken(ctx, node):  # the right call, then its out swapped for its input
        rule(ctx, node)
        call = ctx.b.instructions[-1]
        call.args[-1] = call.args[-2] = call.args[0]

    monkeypatch.setitem(lowering.EMITTERS, torch.ops.aten.transpose.int, broken)
    x = torch.randn(1, 3, 5)
    with pytest.raises(LoweringError, match=r"argument 2 \(out\).*lowered from node transpose"):
        export(_Transposes().eval(), (x,), calibration=[(x,)])
