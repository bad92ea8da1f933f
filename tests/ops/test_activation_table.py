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
from _arg_checks import assert_every_stage_names, check_index
from _pte_programs import activation_table_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.lower.kit import resolve_target
from torchmcu.npu.tosa.lower import lower_to_tosa, npu_support, run_tosa_reference
from torchmcu.ops import views
from torchmcu.ops.defs.activation_table import activation_lut, quantized_activation, sigmoid
from torchmcu.pte import program as pm
from torchmcu.quantize import quantizer
from torchmcu.reference.interpreter import run_program

TABLE = ops.get("cortex_m::quantized_activation.out")
A = TABLE.schema.A
NHWC = [0, 2, 3, 1]
shapes = st.lists(st.integers(1, 6), min_size=0, max_size=4)


def _case(shape, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, shape, dtype=np.int8), rng.integers(-128, 128, 256, dtype=np.int8)


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
        [native.TensorArg(phys, list(shape), order), lut, native.TensorArg(out, list(shape), order)],
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
        native.call_kernel("cortex_m::quantized_activation",
                           [x, np.frombuffer(lut, np.int8).copy(), np.zeros(out_sizes, np.int8)])
    program = activation_table_program([2, 3], lut, out_sizes=out_sizes)
    assert_every_stage_names(TABLE, program, bad, [x])


def test_check_refuses_an_out_in_another_layout():
    """Elementwise on memory: out must place every element where the input does."""
    x = np.zeros((1, 2, 3, 4), np.int8)
    with pytest.raises(native.NativeError, match=rf"argument {A.out}\b"):
        native.call_kernel(
            "cortex_m::quantized_activation",
            [x, np.zeros(256, np.int8),
             native.TensorArg(np.zeros((1, 3, 4, 2), np.int8), [1, 2, 3, 4], NHWC)],
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
        native.call_kernel("cortex_m::quantized_activation",
                           [np.zeros((2, 3), np.float32), np.zeros(256, np.int8), np.zeros((2, 3), np.int8)])


def test_the_aten_side_comes_from_the_definition():
    """The quantizer's fixed output qparams and the lowering's functions are the patterns'."""
    aten = torch.ops.aten
    assert quantizer.TABLE_TARGETS == {
        aten.sigmoid.default: {"kind": "sigmoid", "fixed_qparams": (1.0 / 256.0, -128)},
        aten.tanh.default: {"kind": "tanh", "fixed_qparams": (1.0 / 128.0, 0)},
    }
    functions = views.table_functions(resolve_target)
    assert functions == {aten.sigmoid.default: sigmoid, aten.tanh.default: math.tanh}
    xs = np.linspace(-800.0, 800.0, 41)
    np.testing.assert_allclose([sigmoid(v) for v in xs], torch.sigmoid(torch.from_numpy(xs)).numpy(),
                               rtol=0, atol=1e-15)
    # a table's entries are the function's values at the input's 256 levels, requantized
    lut = activation_lut(math.tanh, 0.05, -7, 1.0 / 128.0, 0)
    want = np.clip(np.round(np.tanh((np.arange(-128, 128) + 7) * 0.05) * 128.0), -128, 127)
    assert np.abs(lut.astype(int) - want).max() <= 1  # ties: numpy to even, the table away
