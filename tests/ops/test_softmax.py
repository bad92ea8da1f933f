"""cortex_m::softmax, defined once in torchmcu/ops/defs/softmax.py: the reference against the
float softmax it approximates (within CMSIS-NN's +-1), the C kernel bit-exact with the
reference (the interpreter running the definition), and the one argument check naming the
argument the C kernel names, for the interpreter (the op has no TOSA lowering: it stays on
the CPU)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _arg_checks import assert_every_stage_names
from _pte_programs import softmax_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.npu.tosa.lower import npu_support
from torchmcu.ops.defs.softmax import INPUT_INTEGER_BITS, softmax
from torchmcu.ops.intmath import quantize_multiplier
from torchmcu.reference.interpreter import run_program

SOFTMAX = ops.get("cortex_m::softmax.out")
A = SOFTMAX.schema.A


def _params(scale: float, zero_point: int = 0) -> dict[str, int]:
    """The exporter's parameters for an input scale (docs/operators.md, softmax.out)."""
    mult, shift = quantize_multiplier(min(scale * (1 << (31 - INPUT_INTEGER_BITS)), 2**31 - 1))
    diff_min = -math.floor(31 * math.ldexp(1.0, 31 - INPUT_INTEGER_BITS) / math.ldexp(1.0, shift))
    return {"dim": -1, "input_zero_point": zero_point, "output_zero_point": -128,
            "input_multiplier": mult, "input_shift": shift, "diff_min": diff_min}


def _args(x: np.ndarray, p: dict[str, int], out: np.ndarray) -> list:
    return [x if a.name == "input" else out if a.name == "out" else p[a.name]
            for a in SOFTMAX.schema.args]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), rows=st.integers(1, 4), row=st.integers(1, 40),
       scale=st.floats(0.01, 0.2))
def test_reference_is_the_float_softmax_within_one(seed, rows, row, scale):
    x = np.random.default_rng(seed).integers(-128, 128, (rows, row), dtype=np.int8)
    got = softmax(x, -1, 0, -128, **{k: v for k, v in _params(scale).items()
                                     if k in ("input_multiplier", "input_shift", "diff_min")})
    logits = x.astype(np.float64) * scale
    p = np.exp(logits - logits.max(axis=-1, keepdims=True))
    want = np.clip(np.round(p / p.sum(axis=-1, keepdims=True) * 256) - 128, -128, 127)
    assert np.abs(got.astype(int) - want).max() <= 1


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
       scale=st.floats(0.005, 0.5), zero_point=st.integers(-128, 127))
def test_c_kernel_is_bit_exact_with_the_reference(seed, shape, scale, zero_point):
    x = np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)
    p = _params(scale, zero_point)
    out = np.zeros_like(x)
    native.call_kernel("cortex_m::softmax", _args(x, p, out))
    (reference,) = run_program(softmax_program(shape, p), [x])
    assert reference.tobytes() == out.tobytes()


def test_it_stays_on_the_cpu():
    plan = softmax_program([2, 8], _params(0.05)).execution_plan[0]
    assert npu_support(plan, 0, "u85") is not None


P = _params(0.05)
# (changes to the scalars, sizes, out sizes, the argument named)
BAD = [
    ({"dim": 0}, [2, 8], [2, 8], A.dim),  # not the last dim
    ({"dim": 2}, [2, 8], [2, 8], A.dim),
    ({"dim": -3}, [2, 8], [2, 8], A.dim),
    ({}, [2, 4097], [2, 4097], A.input),  # row beyond the Q12.19 sum
    ({"input_zero_point": 128}, [2, 8], [2, 8], A.input_zero_point),
    ({"output_zero_point": -127}, [2, 8], [2, 8], A.output_zero_point),
    ({"input_multiplier": 0}, [2, 8], [2, 8], A.input_multiplier),
    ({"input_shift": -1}, [2, 8], [2, 8], A.input_shift),
    ({"diff_min": 1}, [2, 8], [2, 8], A.diff_min),
    ({}, [2, 8], [8, 2], A.out),
]


@pytest.mark.parametrize(("changes", "sizes", "out_sizes", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(changes, sizes, out_sizes, bad):
    p = {**P, **changes}
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel("cortex_m::softmax",
                           _args(np.zeros(sizes, np.int8), p, np.zeros(out_sizes, np.int8)))
    program = softmax_program(sizes, p, out_sizes=out_sizes)
    assert_every_stage_names(SOFTMAX, program, bad, [np.zeros(sizes, np.int8)])


def test_check_refuses_an_input_that_is_not_contiguous():
    x = np.zeros((2, 3, 4), np.int8)
    with pytest.raises(native.NativeError, match=rf"argument {A.input}\b"):
        native.call_kernel("cortex_m::softmax",
                           _args(native.TensorArg(x, [2, 4, 3], [0, 2, 1]), P, np.zeros((2, 4, 3), np.int8)))
    program = softmax_program([2, 4, 3], P, dim_order=[0, 2, 1])
    assert_every_stage_names(SOFTMAX, program, A.input, [np.zeros((2, 4, 3), np.int8)])
