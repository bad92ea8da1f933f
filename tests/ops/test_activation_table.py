"""cortex_m::quantized_activation, defined once in torchmcu/ops/defs/activation_table.py: the
reference against a lookup element by element, the C kernel bit-exact with the reference
(the interpreter running the definition), the TOSA lowering bit-exact with it on the TOSA
reference model, the one argument check naming the argument the C kernel names, and the aten
side (the quantizer's fixed qparams and the tabulated functions) read from the definition."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.fx
import torch.nn.functional as F
import torchmcu
from _arg_checks import assert_every_stage_names, check_index
from _pte_programs import activation_table_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torchmcu import native, ops
from torchmcu.lower.graph import named_arg
from torchmcu.lower.kit import resolve_target
from torchmcu.npu.tosa.lower import lower_to_tosa, npu_support, run_tosa_reference
from torchmcu.ops import views
from torchmcu.ops.defs.activation_table import (
    activation_lut,
    clamp_bounds,
    quantized_activation,
    sigmoid,
)
from torchmcu.pte import program as pm
from torchmcu.quantize import quantizer
from torchmcu.reference.interpreter import run_program

TABLE = ops.get("cortex_m::quantized_activation.out")
A = TABLE.schema.A
NHWC = [0, 2, 3, 1]
shapes = st.lists(st.integers(1, 6), min_size=0, max_size=4)


def _case(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, shape, dtype=np.int8), rng.integers(
        -128, 128, 256, dtype=np.int8
    )


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**31 - 1))
def test_reference_looks_up_every_element(shape, seed):
    x, lut = _case(shape, seed)
    want = np.array([lut[int(v) + 128] for v in x.reshape(-1)], np.int8).reshape(x.shape)
    np.testing.assert_array_equal(quantized_activation(x, lut), want)


@settings(max_examples=40, deadline=None)
@given(shape=shapes.filter(len), seed=st.integers(0, 2**31 - 1), nhwc=st.booleans())
def test_c_kernel_is_bit_exact_with_the_reference(shape, seed, nhwc):
    # rank >= 1: the interpreter writes a rank-0 input as a 1-element array (ascontiguousarray)
    x, lut = _case(shape, seed)
    order = NHWC if nhwc and len(shape) == 4 else list(range(len(shape)))
    phys = np.ascontiguousarray(np.transpose(x, order))
    out = np.zeros_like(phys)
    native.call_kernel(
        "cortex_m::quantized_activation",
        [
            native.TensorArg(phys, list(shape), order),
            lut,
            native.TensorArg(out, list(shape), order),
        ],
    )
    program = activation_table_program(list(shape), lut.tobytes(), dim_order=order)
    (reference,) = run_program(program, [x])
    assert np.ascontiguousarray(np.transpose(reference, order)).tobytes() == out.tobytes()


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), seed=st.integers(0, 2**31 - 1))
def test_tosa_lowering_is_bit_exact_with_the_reference(shape, seed):
    x, lut = _case(shape, seed)
    order = NHWC if len(shape) == 4 else list(range(len(shape)))
    program = activation_table_program(shape, lut.tobytes(), dim_order=order)
    plan = program.execution_plan[0]
    for family in ("u55", "u65", "u85"):
        assert npu_support(plan, 0, family) is None
    (got,) = run_tosa_reference(lower_to_tosa(program), [np.transpose(x, order)])
    (reference,) = run_program(program, [x])
    assert got.tobytes() == np.ascontiguousarray(np.transpose(reference, order)).tobytes()


LUT = bytes(range(256))
# (program keywords, native arguments builder, the argument named)
BAD = [
    ({"lut": LUT[:255]}, A.lut),  # a short table
    ({"lut": LUT + b"\0"}, A.lut),
    ({"out_sizes": [3, 2]}, A.out),  # other sizes
    ({"out_sizes": [2, 3, 1]}, A.out),  # other rank
]


@pytest.mark.parametrize(("changes", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(changes, bad):
    lut = changes.get("lut", LUT)
    out_sizes = changes.get("out_sizes", [2, 3])
    x = np.zeros((2, 3), np.int8)
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(
            "cortex_m::quantized_activation",
            [x, np.frombuffer(lut, np.int8).copy(), np.zeros(out_sizes, np.int8)],
        )
    program = activation_table_program([2, 3], lut, out_sizes=out_sizes)
    assert_every_stage_names(TABLE, program, bad, [x])


def test_check_refuses_an_out_in_another_layout():
    """Elementwise on memory: out must place every element where the input does."""
    x = np.zeros((1, 2, 3, 4), np.int8)
    with pytest.raises(native.NativeError, match=rf"argument {A.out}\b"):
        native.call_kernel(
            "cortex_m::quantized_activation",
            [
                x,
                np.zeros(256, np.int8),
                native.TensorArg(np.zeros((1, 3, 4, 2), np.int8), [1, 2, 3, 4], NHWC),
            ],
        )
    program = activation_table_program([1, 2, 3, 4], LUT, out_dim_order=NHWC)
    assert_every_stage_names(TABLE, program, A.out, [x])
    # size-1 dims do not matter: a C == 1 tensor is NHWC and contiguous at once
    same = activation_table_program([1, 1, 3, 4], LUT, out_dim_order=NHWC)
    (out,) = run_program(same, [np.zeros((1, 1, 3, 4), np.int8)])
    assert (out == 128 - 256).all()  # LUT[0 + 128] = 128 as int8


def test_check_refuses_an_input_that_is_not_int8():
    program = activation_table_program([2, 3], LUT)
    program.execution_plan[0].values[0] = pm.Tensor(
        pm.ScalarType.FLOAT, [2, 3], [0, 1], allocation=pm.Allocation(1, 0)
    )
    assert check_index(TABLE, program) == A.input
    with pytest.raises(native.NativeError, match=rf"argument {A.input}\b"):
        native.call_kernel(
            "cortex_m::quantized_activation",
            [np.zeros((2, 3), np.float32), np.zeros(256, np.int8), np.zeros((2, 3), np.int8)],
        )


def _node(target, *args, **kwargs):
    g = torch.fx.Graph()
    return g.call_function(target, (g.placeholder("x"), *args), kwargs)


AT = torch.ops.aten
# (node, torch's own function on float64): each table function against torch
FUNCTIONS = [
    (_node(AT.sigmoid.default), torch.sigmoid),
    (_node(AT.tanh_.default), torch.tanh),
    (_node(AT.hardsigmoid_.default), F.hardsigmoid),
    (_node(AT.hardswish.default), F.hardswish),
    (_node(AT.silu_.default), F.silu),
    (_node(AT.gelu.default), F.gelu),
    (_node(AT.gelu.default, approximate="tanh"), lambda t: F.gelu(t, approximate="tanh")),
    (_node(AT.leaky_relu_.default), F.leaky_relu),
    (_node(AT.leaky_relu.default, 0.2), lambda t: F.leaky_relu(t, 0.2)),
    (_node(AT.elu.default, 0.7), lambda t: F.elu(t, 0.7)),
    (_node(AT.elu_.default, 1.0, 1.0507, 1.5), lambda t: torch.ops.aten.elu(t, 1.0, 1.0507, 1.5)),
]


def test_the_aten_side_comes_from_the_definition():
    """The quantizer's fixed output qparams and the lowering's functions are the patterns'."""
    fixed = {
        "sigmoid": (1.0 / 256.0, -128),
        "tanh": (1.0 / 128.0, 0),
        "hardsigmoid": (1.0 / 256.0, -128),
    }
    names = ["sigmoid", "tanh", "hardsigmoid", "hardswish", "silu", "gelu", "leaky_relu", "elu"]
    assert quantizer.TABLE_TARGETS == {
        getattr(AT, n + inplace).default: {"kind": n, "fixed_qparams": fixed.get(n)}
        for n in names
        for inplace in ("", "_")
    } | {AT.prelu.default: {"kind": "prelu", "fixed_qparams": None}}  # observed the same way
    xs = np.linspace(-800.0, 800.0, 41)
    np.testing.assert_allclose(
        [sigmoid(v) for v in xs], torch.sigmoid(torch.from_numpy(xs)).numpy(), rtol=0, atol=1e-15
    )
    # a table's entries are the function's values at the input's 256 levels, requantized
    lut = activation_lut(math.tanh, 0.05, -7, 1.0 / 128.0, 0)
    want = np.clip(np.round(np.tanh((np.arange(-128, 128) + 7) * 0.05) * 128.0), -128, 127)
    assert np.abs(lut.astype(int) - want).max() <= 1  # ties: numpy to even, the table away


@pytest.mark.parametrize(
    ("node", "torch_f"), FUNCTIONS, ids=lambda v: str(getattr(v, "target", ""))
)
def test_each_table_function_is_torchs(node, torch_f):
    function_of = views.table_functions(resolve_target)[node.target]
    f = function_of(named_arg, node)
    xs = np.concatenate([np.linspace(-9.0, 9.0, 721), [-3.0, 0.0, 3.0]])
    want = torch_f(torch.from_numpy(xs)).numpy()
    np.testing.assert_allclose([f(float(v)) for v in xs], want, rtol=1e-12, atol=1e-12)


def test_gelu_with_an_unknown_approximation_is_refused():
    function_of = views.table_functions(resolve_target)[AT.gelu.default]
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        function_of(named_arg, _node(AT.gelu.default, approximate="erf"))


def _clamp_lut(lo: int, hi: int) -> bytes:
    return np.clip(np.arange(-128, 128), lo, hi).astype(np.int8).tobytes()


@pytest.mark.parametrize(
    ("lut", "bounds"),
    [
        (_clamp_lut(-20, 127), (-20, 127)),  # relu, zero point -20
        (_clamp_lut(-128, 40), (-128, 40)),
        (_clamp_lut(-7, 9), (-7, 9)),
        (_clamp_lut(-128, 127), (-128, 127)),  # the identity: a clamp of nothing
        (bytes(range(256)), None),  # 0..255 read as int8: not monotone
        (np.clip(np.arange(-128, 128) + 1, -128, 127).astype(np.int8).tobytes(), None),  # a shift
    ],
)
def test_a_clamp_table_is_tosa_clamp_bit_exact(lut, bounds):
    """A table that is an int8 clamp goes to the NPU as CLAMP, any other as TABLE; both equal
    the reference on the TOSA reference model."""
    assert clamp_bounds(np.frombuffer(lut, np.int8)) == bounds
    program = activation_table_program([1, 3, 4, 5], lut, dim_order=NHWC)
    plan = program.execution_plan[0]
    assert npu_support(plan, 0, "u55") is None
    graph = lower_to_tosa(program)
    x = np.arange(-128, 128, dtype=np.int8)[np.random.default_rng(1).permutation(256)[:60]]
    x = x.reshape(1, 3, 4, 5)
    (got,) = run_tosa_reference(graph, [np.transpose(x, NHWC)])
    (reference,) = run_program(program, [x])
    assert got.tobytes() == np.ascontiguousarray(np.transpose(reference, NHWC)).tobytes()
    want = np.clip(x, *bounds) if bounds else np.frombuffer(lut, np.int8)[x.astype(int) + 128]
    np.testing.assert_array_equal(reference, want)


class Branches(nn.Module):
    """Every table activation and every standalone clamp, written the ways model code calls
    them (nn modules in place, F.*, tensor methods). An in-place one gets its own conv's
    output, or comes last, so it mutates nothing another branch reads."""

    OWN = (  # in place: one conv each
        nn.Hardswish(inplace=True),
        nn.SiLU(inplace=True),
        nn.LeakyReLU(0.2, inplace=True),
        lambda y: F.elu(y, 0.7, inplace=True),
        torch.Tensor.sigmoid_,
    )
    SHARED = (F.hardsigmoid, nn.GELU(), nn.GELU(approximate="tanh"), torch.tanh)
    # after a leaky_relu table (no producer fuses them), the in-place one last
    CLAMPS = (
        lambda y: F.hardtanh(y, -0.5, 0.5),
        lambda y: y.clamp(min=-0.2),
        lambda y: torch.clamp_max(y, 0.3),
        nn.ReLU6(inplace=True),
    )
    TABLES = len(OWN) + len(SHARED) + len(CLAMPS) + 4  # sigmoid, its relu, leaky_relu, relu

    def __init__(self) -> None:
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv2d(3, 4, 1) for _ in range(len(self.OWN) + 3))

    def forward(self, x):
        outs = [f(conv(x)) for f, conv in zip(self.OWN, self.convs)]
        shared = self.convs[-3](x)
        outs += [f(shared) for f in self.SHARED]
        outs.append(F.relu(torch.sigmoid(shared)))  # reads sigmoid's fixed qparams as they are
        leaky = F.leaky_relu(self.convs[-2](x), 0.1)
        outs += [f(leaky) for f in self.CLAMPS]
        pooled = F.avg_pool2d(self.convs[-1](x), 2)  # an avg pool fuses no activation
        outs.append(torch.flatten(F.relu(pooled), 1))  # no quantize between relu and flatten
        return tuple(outs)


@pytest.fixture(scope="module")
def branches():
    torch.manual_seed(3)
    model = Branches().eval()
    cal = [(torch.randn(1, 3, 6, 6) * 2,) for _ in range(8)]
    return torchmcu.export(model, cal[0], calibration=cal, board="corstone-300"), cal


def test_every_activation_exports_as_one_table_call(branches):
    exported, _ = branches
    plan = exported.program.execution_plan[0]
    names = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert names.count("cortex_m::quantized_activation") == Branches.TABLES
    assert all(n.startswith("cortex_m::") for n in names), names  # nothing left in float


def test_every_activation_matches_torch_through_fake_quant(branches):
    """Host C runtime == the reference interpreter, bit for bit; each output equal to torchao's
    fake-quantized model (torch's own functions) but for ties, which round differently; the
    avg pool's output within one step (its own rounding)."""
    exported, cal = branches
    scales = [o["scale"] for o in exported.report["outputs"]]
    for (x,) in [cal[0], (torch.randn(1, 3, 6, 6) * 2,)]:
        ours = torchmcu.run_on_host(exported.pte_bytes, [x.numpy()])
        reference = run_program(exported.program, [x.numpy()])
        want = exported.quantized_model(x)
        assert len(ours) == len(reference) == len(want) == len(scales)
        for i, (a, b, c, scale) in enumerate(zip(ours, reference, want, scales)):
            np.testing.assert_array_equal(a, b)
            steps = np.abs(a - c.detach().numpy()) / scale
            assert steps.max() <= 1.0 + 1e-4, i
            if i < len(ours) - 1:
                assert (steps > 0.5).mean() <= 0.02, i
