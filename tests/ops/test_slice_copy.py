"""torchmcu::slice_copy, defined once in torchmcu/ops/defs/slice_copy.py: the reference against
numpy slicing, the C kernel bit-exact with the reference (the interpreter running the
definition), the TOSA lowering bit-exact with it on the TOSA reference model, and the one
argument check naming the argument the C kernel names, for the interpreter and NPU support."""

from __future__ import annotations


import numpy as np
import pytest
from _pte_programs import slice_copy_program
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.npu.tosa.lower import (
    TosaLoweringError,
    lower_to_tosa,
    npu_support,
    run_tosa_reference,
)
from torchmcu.ops.core import ArgError, bind
from torchmcu.ops.defs.slice_copy import slice_copy
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import InterpreterError, run_program

SLICE = ops.get("torchmcu::slice_copy.out")
A = SLICE.schema.A
SCALAR_TYPES = {
    np.int8: pm.ScalarType.CHAR,
    np.float32: pm.ScalarType.FLOAT,
    np.int32: pm.ScalarType.INT,
}
shapes = st.lists(st.integers(1, 7), min_size=1, max_size=4)


@st.composite
def slices(draw, dtypes=tuple(SCALAR_TYPES), max_step=3):
    shape = draw(shapes)
    dim = draw(st.integers(0, len(shape) - 1))
    start = draw(st.integers(0, shape[dim]))
    end = draw(st.integers(start, shape[dim]))
    step = draw(st.integers(1, max_step))
    dtype = draw(st.sampled_from(dtypes))
    return shape, dim, start, end, step, dtype


def _input(shape: list[int], dtype: type, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 50).astype(dtype)


def _numpy_slice(x: np.ndarray, dim: int, start: int, end: int, step: int) -> np.ndarray:
    index = [slice(None)] * x.ndim
    index[dim] = slice(start, end, step)
    return x[tuple(index)]


@settings(max_examples=60, deadline=None)
@given(case=slices(), seed=st.integers(0, 2**31 - 1))
def test_reference_is_numpy_slicing(case, seed):
    shape, dim, start, end, step, dtype = case
    x = _input(shape, dtype, seed)
    got = slice_copy(x, dim, start, end, step)
    np.testing.assert_array_equal(got, _numpy_slice(x, dim, start, end, step))
    assert got.flags.c_contiguous and got.dtype == x.dtype


@settings(max_examples=60, deadline=None)
@given(case=slices(), seed=st.integers(0, 2**31 - 1))
def test_c_kernel_is_bit_exact_with_the_reference(case, seed):
    shape, dim, start, end, step, dtype = case
    x = _input(shape, dtype, seed)
    out = np.zeros(_numpy_slice(x, dim, start, end, step).shape, dtype)
    if out.size == 0:
        return  # numpy has no zero-size buffer the extension can pass
    native.call_kernel("torchmcu::slice_copy", [x, dim, start, end, step, out])
    program = slice_copy_program(shape, dim, start, end, step, SCALAR_TYPES[dtype])
    (reference,) = run_program(program, [x])
    assert reference.dtype == out.dtype and reference.tobytes() == out.tobytes()


@settings(max_examples=25, deadline=None)
@given(case=slices(dtypes=(np.int8,), max_step=1), seed=st.integers(0, 2**31 - 1))
def test_tosa_lowering_is_bit_exact_with_the_reference(case, seed):
    shape, dim, start, end, step, dtype = case
    assume(0 < end - start < shape[dim])  # an empty or whole slice is no TOSA SLICE
    x = _input(shape, dtype, seed)
    program = slice_copy_program(shape, dim, start, end, step)
    plan = program.execution_plan[0]
    for family in ("u55", "u65", "u85"):
        assert npu_support(plan, 0, family) is None
    (got,) = run_tosa_reference(lower_to_tosa(program), [x])
    (reference,) = run_program(program, [x])
    assert got.tobytes() == reference.tobytes()


def test_a_step_above_1_stays_on_the_cpu():
    plan = slice_copy_program([2, 8], 1, 0, 8, 2).execution_plan[0]
    assert npu_support(plan, 0, "u55") == "slice with step 2 (TOSA SLICE takes step 1)"


# (sizes, (dim, start, end, step), out sizes, the argument named)
BAD = [
    ([2, 4, 3], (1, 2, 1, 1), [2, 1, 3], A.end),  # end before start
    ([2, 4, 3], (1, 0, 5, 1), [2, 1, 3], A.end),  # end beyond the size
    ([2, 4, 3], (1, 5, 5, 1), [2, 1, 3], A.start),  # start beyond the size
    ([2, 4, 3], (3, 0, 1, 1), [2, 1, 3], A.dim),  # no dim 3
    ([2, 4, 3], (-1, 0, 1, 1), [2, 1, 3], A.dim),
    ([2, 4, 3], (1, 0, 2, 0), [2, 1, 3], A.step),  # step 0
    ([2, 4, 3], (1, 0, 2, 1), [2, 1, 3], A.out),  # out holds one row, the slice two
    ([2, 4, 3], (1, 0, 4, 2), [2, 2, 4], A.out),
]


@pytest.mark.parametrize(("sizes", "scalars", "out_sizes", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(sizes, scalars, out_sizes, bad):
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(
            "torchmcu::slice_copy",
            [np.zeros(sizes, np.int8), *scalars, np.zeros(out_sizes, np.int8)],
        )
    program = slice_copy_program(sizes, *scalars, out_sizes=out_sizes)
    plan = program.execution_plan[0]
    with pytest.raises(ArgError) as info:
        bind(SLICE, plan.values, plan.chains[0].instructions[0].args).check()
    assert info.value.index == bad
    name = SLICE.schema.args[bad].name
    with pytest.raises(InterpreterError, match=rf"argument {bad} \({name}\)"):
        run_program(program, [np.zeros(sizes, np.int8)])
    assert f"argument {bad} ({name})" in npu_support(plan, 0, "u85")


def test_check_refuses_a_self_that_is_not_contiguous():
    with pytest.raises(native.NativeError, match=rf"argument {A.self}\b"):
        native.call_kernel(
            "torchmcu::slice_copy",
            [
                native.TensorArg(np.zeros((2, 3, 4), np.int8), [2, 4, 3], [0, 2, 1]),
                1,
                0,
                1,
                1,
                np.zeros((2, 1, 3), np.int8),
            ],
        )
    program = slice_copy_program([2, 4, 3], 1, 0, 1, 1)
    plan = program.execution_plan[0]
    plan.values[0] = pm.Tensor(
        pm.ScalarType.CHAR, [2, 4, 3], [0, 2, 1], allocation=pm.Allocation(1, 0)
    )
    with pytest.raises(ArgError) as info:
        bind(SLICE, plan.values, plan.chains[0].instructions[0].args).check()
    assert info.value.index == A.self


@pytest.mark.parametrize("start", [0, 47])  # out one byte before self / on self's last byte
def test_slice_copy_refuses_an_out_sharing_bytes_with_self(start):
    """A planned offset moved by one byte (fuzz_plan: memcpy-param-overlap in the row copy):
    out overlapping self in part is argument 5, and nothing is written."""
    arena = np.arange(64, dtype=np.int8)
    x = arena[1:49].reshape(2, 4, 6) if start == 0 else arena[:48].reshape(2, 4, 6)
    out = arena[start : start + 12].reshape(2, 1, 6)
    before = arena.copy()
    with pytest.raises(native.NativeError, match=f"argument {A.out}"):
        native.call_kernel("torchmcu::slice_copy", [x, 1, 0, 1, 1, out])
    np.testing.assert_array_equal(arena, before)


@pytest.mark.parametrize(("out_offset", "overlaps"), [(47, True), (40, True), (48, False)])
def test_check_refuses_a_planned_out_sharing_bytes_with_self(out_offset, overlaps):
    program = slice_copy_program([2, 4, 6], 1, 0, 1, 1, out_offset=out_offset)
    plan = program.execution_plan[0]
    b = bind(SLICE, plan.values, plan.chains[0].instructions[0].args)
    if overlaps:
        with pytest.raises(ArgError, match="shares bytes with self") as info:
            b.check()
        assert info.value.index == A.out
    else:
        b.check()


def test_slice_copy_into_the_bytes_right_after_self():
    arena = np.arange(64, dtype=np.int8)
    x, out = arena[:48].reshape(2, 4, 6), arena[48:60].reshape(2, 1, 6)
    want = x[:, 2:3].copy()
    native.call_kernel("torchmcu::slice_copy", [x, 1, 2, 3, 1, out])
    np.testing.assert_array_equal(out, want)
    program = slice_copy_program([2, 4, 6], 1, 2, 3, 1, out_offset=48)
    np.testing.assert_array_equal(run_program(program, [x.copy()])[0], want)


def test_tosa_lowering_refuses_what_the_npu_rules_refuse():
    with pytest.raises(TosaLoweringError, match="TOSA SLICE takes step 1"):
        lower_to_tosa(slice_copy_program([2, 8], 1, 0, 8, 2))
    bad = slice_copy_program([2, 4, 3], 1, 0, 2, 1, out_sizes=[2, 1, 3])
    with pytest.raises(TosaLoweringError, match=rf"argument {A.out} \(out\)"):
        lower_to_tosa(bad)
