"""torchmcu::quantized_prelu, defined once in torchmcu/ops/defs/prelu.py: the reference against
the float64 formula (within one step: requantize rounds ties up), the C kernel bit-exact with
the reference (the interpreter running the definition) on generated cases, the argument check
naming the argument the C kernel names, and nn.PReLU / F.prelu exported: int8 calls only, the
host runtime bit-exact with the interpreter and equal to torchao's fake-quantized model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from _arg_checks import assert_every_stage_names
from _pte_programs import one_call_plan
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torchmcu import native, ops
from torchmcu.ops.defs.prelu import quantized_prelu, signed_multiplier
from torchmcu.ops.intmath import single_rounding_multiplier
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import InterpreterError, run_program

PRELU = ops.get("torchmcu::quantized_prelu.out")
A = PRELU.schema.A
NHWC = [0, 2, 3, 1]


def prelu_program(sizes, order, zps, positive, neg_m, neg_s, *, out_sizes=None, out_order=None):
    """One quantized_prelu call: value 0 the planned input, then the scalars, the two constant
    int32 tensors and the planned out."""
    out_sizes = list(sizes) if out_sizes is None else out_sizes
    n = int(np.prod(sizes))
    out_offset = (n + 15) // 16 * 16
    m_bytes = np.asarray(neg_m, np.int32).tobytes()
    s_bytes = np.asarray(neg_s, np.int32).tobytes()
    values = [
        pm.Tensor(pm.ScalarType.CHAR, list(sizes), list(order), allocation=pm.Allocation(1, 0)),
        pm.Int(zps[0]),
        pm.Int(zps[1]),
        pm.Int(positive[0]),
        pm.Int(positive[1]),
        pm.Tensor(pm.ScalarType.INT, [len(neg_m)], [0], data_buffer_idx=1),
        pm.Tensor(pm.ScalarType.INT, [len(neg_s)], [0], data_buffer_idx=2),
        pm.Tensor(
            pm.ScalarType.CHAR,
            out_sizes,
            list(order if out_order is None else out_order),
            allocation=pm.Allocation(1, out_offset),
        ),
    ]
    call = pm.KernelCall(0, [0, 1, 2, 3, 4, 5, 6, 7, 7])
    plan = one_call_plan(values, call, PRELU.qualified, out_offset + int(np.prod(out_sizes)))
    return pm.Program(execution_plan=[plan], constants=[b"", m_bytes, s_bytes])


def _case(sizes, seed):
    """(x, zero points, positive pair, negative pairs, float slopes, scales) of a random case."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, sizes, dtype=np.int8)
    zps = (int(rng.integers(-128, 128)), int(rng.integers(-128, 128)))
    s_in, s_out = float(rng.uniform(0.01, 0.1)), float(rng.uniform(0.01, 0.1))
    slopes = rng.uniform(-2.0, 2.0, sizes[1])
    slopes[0] = 0.0
    positive = single_rounding_multiplier(s_in / s_out)
    pairs = [signed_multiplier(s_in * a / s_out) for a in slopes]
    return x, zps, positive, pairs, slopes, (s_in, s_out)


def test_reference_is_the_float_formula():
    """Within one step of round(d * s_in * (1 or slope) / s_out) + zp_out, mostly equal."""
    x, zps, positive, pairs, slopes, (s_in, s_out) = _case([64, 9], 5)
    got = quantized_prelu(x, *zps, positive, [m for m, _ in pairs], [s for _, s in pairs]).astype(
        int
    )
    d = x.astype(np.float64) - zps[0]
    want = np.clip(np.round(np.where(d >= 0, d, d * slopes) * s_in / s_out) + zps[1], -128, 127)
    assert np.abs(got - want).max() <= 1
    assert (got != want).mean() < 0.01


@settings(max_examples=30, deadline=None)
@given(
    sizes=st.one_of(
        st.lists(st.integers(1, 19), min_size=2, max_size=2),
        st.tuples(st.integers(1, 2), st.integers(1, 19), st.integers(1, 4), st.integers(1, 4)),
    ),
    seed=st.integers(0, 2**31 - 1),
)
def test_c_kernel_is_bit_exact_with_the_reference(sizes, seed):
    sizes = list(sizes)
    x, zps, positive, pairs, _, _ = _case(sizes, seed)
    order = NHWC if len(sizes) == 4 else [0, 1]
    neg_m = np.array([m for m, _ in pairs], np.int32)
    neg_s = np.array([s for _, s in pairs], np.int32)
    phys = np.ascontiguousarray(np.transpose(x, order))
    out = np.zeros_like(phys)
    native.call_kernel(
        PRELU.qualified,
        [
            native.TensorArg(phys, sizes, order),
            *zps,
            *positive,
            neg_m,
            neg_s,
            native.TensorArg(out, sizes, order),
        ],
    )
    program = prelu_program(sizes, order, zps, positive, neg_m, neg_s)
    (reference,) = run_program(program, [x])
    assert np.ascontiguousarray(np.transpose(reference, order)).tobytes() == out.tobytes()


GOOD = {"zps": (3, -4), "positive": (1 << 30, 0), "neg_m": [1 << 29] * 3, "neg_s": [0] * 3}
# (changes to GOOD, the argument named)
BAD = [
    ({"order": [0, 1, 2, 3]}, A.input),  # 4-D but not NHWC: the channel is not innermost
    ({"zps": (200, 0)}, A.input_zero_point),
    ({"zps": (0, -129)}, A.output_zero_point),
    ({"positive": (1, 32)}, A.positive_shift),
    ({"neg_m": [1, 2]}, A.negative_multipliers),  # 2 for 3 channels
    ({"neg_s": [0, 0]}, A.negative_shifts),
    ({"out_sizes": [1, 3, 2, 3]}, A.out),
    ({"neg_s": [0, 40, 0], "shift value": True}, A.negative_shifts),
]


@pytest.mark.parametrize(("changes", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(changes, bad):
    case = {**GOOD, "order": NHWC, "out_sizes": [1, 3, 2, 2], **changes}
    sizes = [1, 3, 2, 2]
    x = np.zeros(sizes, np.int8)
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(
            PRELU.qualified,
            [
                native.TensorArg(x, sizes, case["order"]),
                *case["zps"],
                *case["positive"],
                np.array(case["neg_m"], np.int32),
                np.array(case["neg_s"], np.int32),
                native.TensorArg(np.zeros(case["out_sizes"], np.int8), case["out_sizes"], NHWC),
            ],
        )
    program = prelu_program(
        sizes,
        case["order"],
        case["zps"],
        case["positive"],
        case["neg_m"],
        case["neg_s"],
        out_sizes=case["out_sizes"],
        out_order=NHWC,
    )
    if "shift value" in changes:
        # a constant's values: the stages that read them (the interpreter) name it
        with pytest.raises(InterpreterError, match=rf"argument {bad} \(negative_shifts\)"):
            run_program(program, [x])
        return
    assert_every_stage_names(PRELU, program, bad, [x])


class Prelus(nn.Module):
    """nn.PReLU per channel after a conv (NHWC), F.prelu with one slope after a linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.act = nn.PReLU(6)
        with torch.no_grad():  # of both signs and zero
            self.act.weight.copy_(torch.tensor([0.25, -0.5, 0.0, 1.5, 0.1, -2.0]))
        self.fc = nn.Linear(6 * 5 * 5, 7)
        self.slope = nn.Parameter(torch.tensor([0.3]))

    def forward(self, x):
        return F.prelu(self.fc(torch.flatten(self.act(self.conv(x)), 1)), self.slope)


def test_prelu_exports_as_int8_and_matches_fake_quant():
    torch.manual_seed(0)
    cal = [(torch.randn(1, 3, 5, 5),) for _ in range(8)]
    exported = torchmcu.export(Prelus().eval(), cal[0], calibration=cal)
    plan = exported.program.execution_plan[0]
    names = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert names.count("torchmcu::quantized_prelu") == 2
    assert all(n.startswith(("cortex_m::", "torchmcu::")) for n in names), names
    scale = exported.report["outputs"][0]["scale"]
    for (x,) in [cal[0], (torch.randn(1, 3, 5, 5),)]:
        (ours,) = torchmcu.run_on_host(exported.pte_bytes, [x.numpy()])
        (reference,) = run_program(exported.program, [x.numpy()])
        np.testing.assert_array_equal(ours, reference)
        want = exported.quantized_model(x).detach().numpy()
        assert np.abs(ours - want).max() <= scale + 1e-6
