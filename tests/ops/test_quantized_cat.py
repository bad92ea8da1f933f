"""torchmcu::quantized_cat, defined once in torchmcu/ops/defs/quantized_cat.py: the reference
against the real-valued requantization written here (float64), the C kernel bit-exact with the
reference (the interpreter running the definition) in NHWC and contiguous layouts, the TOSA
lowering (RESCALE, CONCAT) bit-exact with it on the TOSA reference model, and the one argument
check naming the argument the C kernel names, for the interpreter and NPU support."""

from __future__ import annotations

import numpy as np
import pytest
from _arg_checks import assert_every_stage_names
from _pte_programs import Planned, call_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.npu.tosa.lower import lower_to_tosa, npu_support, run_tosa_reference
from torchmcu.ops.defs.quantized_cat import quantized_cat
from torchmcu.ops.intmath import single_rounding_multiplier
from torchmcu.reference.interpreter import run_program

CAT = ops.get("torchmcu::quantized_cat.out")
A = CAT.schema.A
NHWC = [0, 2, 3, 1]
IDENTITY = (1 << 30, 1)


@st.composite
def cats(draw, max_items=3):
    """(input sizes, dim, dim order, zps, (m, s) pairs, out zp, ratios)."""
    nhwc = draw(st.booleans())
    rank = 4 if nhwc else draw(st.integers(1, 4))
    base = draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))
    dim = draw(st.integers(0, rank - 1))
    n = draw(st.integers(1, max_items))
    sizes = []
    for _ in range(n):
        s = list(base)
        s[dim] = draw(st.integers(1, 6))
        sizes.append(s)
    out_zp = draw(st.integers(-128, 127))
    ratios = [draw(st.sampled_from([1.0, 0.3, 0.75, 1.6, 4.0, 0.01])) for _ in range(n)]
    zps = [out_zp if r == 1.0 else draw(st.integers(-128, 127)) for r in ratios]
    params = [IDENTITY if r == 1.0 else single_rounding_multiplier(r) for r in ratios]
    return sizes, dim, NHWC if nhwc else None, zps, params, out_zp, ratios


def _program(sizes, dim, order, zps, params, out_zp):
    out = list(sizes[0])
    out[dim] = sum(s[dim] for s in sizes)
    return call_program(
        CAT.key,
        {
            "tensors": [Planned(s, order) for s in sizes],
            "dim": dim,
            "input_zero_points": zps,
            "input_multipliers": [m for m, _ in params],
            "input_shifts": [s for _, s in params],
            "output_zero_point": out_zp,
            "out": Planned(out, order),
        },
    )


def _inputs(sizes, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 128, s, dtype=np.int8) for s in sizes]


def _memory(x: np.ndarray, order) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(order) if order else x)


@settings(max_examples=40, deadline=None)
@given(case=cats(), seed=st.integers(0, 2**31 - 1))
def test_reference_is_the_real_requantization(case, seed):
    """Each input's values at the output's scale, rounded: identity inputs copied exactly,
    the others within one step of round(ratio * (q - zp)) + out_zp (ties and the kernel's
    fixed-point multiplier), joined along dim."""
    sizes, dim, _, zps, params, out_zp, ratios = case
    xs = _inputs(sizes, seed)
    got = quantized_cat(xs, dim, zps, [m for m, _ in params], [s for _, s in params], out_zp)
    at = 0
    for x, zp, ratio in zip(xs, zps, ratios):
        index = [slice(None)] * x.ndim
        index[dim] = slice(at, at + x.shape[dim])
        part = got[tuple(index)].astype(np.int64)
        want = np.clip(np.floor(ratio * (x.astype(np.float64) - zp) + 0.5) + out_zp, -128, 127)
        if ratio == 1.0:
            np.testing.assert_array_equal(part, x)
        else:
            assert np.abs(part - want).max() <= 1
        at += x.shape[dim]
    assert at == got.shape[dim]


@settings(max_examples=40, deadline=None)
@given(case=cats(), seed=st.integers(0, 2**31 - 1))
def test_c_kernel_is_bit_exact_with_the_reference(case, seed):
    sizes, dim, order, zps, params, out_zp, _ = case
    xs = _inputs(sizes, seed)
    out_sizes = list(sizes[0])
    out_sizes[dim] = sum(s[dim] for s in sizes)
    dims = order or list(range(len(out_sizes)))
    out = np.zeros([out_sizes[d] for d in dims], np.int8)
    args = [
        [native.TensorArg(_memory(x, order), s, dims) for x, s in zip(xs, sizes)],
        dim, zps, [m for m, _ in params], [s for _, s in params], out_zp,
        native.TensorArg(out, out_sizes, dims),
    ]  # fmt: skip
    native.call_kernel("torchmcu::quantized_cat", args)
    (reference,) = run_program(_program(sizes, dim, order, zps, params, out_zp), xs)
    assert out.tobytes() == _memory(reference, order).tobytes()


@settings(max_examples=12, deadline=None)
@given(case=cats(), seed=st.integers(0, 2**31 - 1))
def test_tosa_lowering_is_bit_exact_with_the_reference(case, seed):
    sizes, dim, order, zps, params, out_zp, _ = case
    xs = _inputs(sizes, seed)
    program = _program(sizes, dim, order, zps, params, out_zp)
    for family in ("u55", "u85"):
        assert npu_support(program.execution_plan[0], 0, family) is None
    (reference,) = run_program(program, xs)
    (got,) = run_tosa_reference(lower_to_tosa(program), [_memory(x, order) for x in xs])
    assert got.tobytes() == _memory(reference, order).tobytes()


GOOD = {"sizes": [[2, 3], [2, 4]], "dim": 1, "zps": [0, 1], "mults": [1 << 30, 1 << 30], "shifts": [1, 0],
            "out_zp": 0, "out": [2, 7]}  # fmt: skip
# (changes to GOOD, the argument named)
BAD = [
    ({"dim": 2}, A.dim),
    ({"dim": -1}, A.dim),
    ({"zps": [0]}, A.input_zero_points),
    ({"zps": [0, 128]}, A.input_zero_points),
    ({"mults": [1 << 30, -1]}, A.input_multipliers),
    ({"shifts": [1, 32]}, A.input_shifts),
    ({"shifts": [1, 0, 0]}, A.input_shifts),
    ({"out_zp": -129}, A.output_zero_point),
    ({"out": [2, 6]}, A.out),
    ({"out": [2, 7, 1]}, A.out),
    ({"sizes": [[2, 3], [3, 4]]}, A.tensors),
]


@pytest.mark.parametrize(("change", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(change, bad):
    case = {**GOOD, **change}
    xs = _inputs(case["sizes"], 0)
    args = [
        list(xs), case["dim"], case["zps"], case["mults"], case["shifts"], case["out_zp"],
        np.zeros(case["out"], np.int8),
    ]  # fmt: skip
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel("torchmcu::quantized_cat", args)
    program = call_program(
        CAT.key,
        {
            "tensors": [Planned(s) for s in case["sizes"]], "dim": case["dim"],
            "input_zero_points": case["zps"], "input_multipliers": case["mults"],
            "input_shifts": case["shifts"], "output_zero_point": case["out_zp"],
            "out": Planned(case["out"]),
        },
    )  # fmt: skip
    assert_every_stage_names(CAT, program, bad, xs)


def test_check_refuses_inputs_of_another_dim_order():
    """Every tensor in out's dim order (the kernel copies rows of memory)."""
    sizes = [[1, 2, 3, 3], [1, 2, 3, 3]]
    program = call_program(
        CAT.key,
        {
            "tensors": [Planned(sizes[0], NHWC), Planned(sizes[1])], "dim": 1,
            "input_zero_points": [0, 0], "input_multipliers": [1 << 30] * 2, "input_shifts": [1, 1],
            "output_zero_point": 0, "out": Planned([1, 4, 3, 3], NHWC),
        },
    )  # fmt: skip
    assert_every_stage_names(CAT, program, A.tensors, _inputs(sizes, 1))
