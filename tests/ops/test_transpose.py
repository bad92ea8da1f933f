"""cortex_m::transpose, defined once in torchmcu/ops/defs/transpose.py: the reference against
numpy's transpose, the C kernel bit-exact with the reference (the interpreter running the
definition), the TOSA lowering bit-exact with it on the TOSA reference model, and the one
argument check naming the argument the C kernel names, for the interpreter and NPU support."""

from __future__ import annotations


import numpy as np
import pytest
from _arg_checks import assert_every_stage_names, check_index, refused
from _pte_programs import transpose_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.npu.tosa.lower import (
    lower_to_tosa,
    npu_support,
    run_tosa_reference,
)
from torchmcu.ops.defs.transpose import collapsed_transpose, transpose
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import run_program

TRANSPOSE = ops.get("cortex_m::transpose.out")
A = TRANSPOSE.schema.A
SCALAR_TYPES = {
    np.int8: pm.ScalarType.CHAR,
    np.float32: pm.ScalarType.FLOAT,
    np.int32: pm.ScalarType.INT,
}


@st.composite
def transposes(draw, dtypes=tuple(SCALAR_TYPES), max_rank=5):
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=max_rank))
    perm = list(draw(st.permutations(range(len(shape)))))
    negative = draw(st.lists(st.booleans(), min_size=len(perm), max_size=len(perm)))
    perm = [p - len(shape) if n else p for p, n in zip(perm, negative)]  # taken mod rank
    return shape, perm, draw(st.sampled_from(dtypes))


def _input(shape: list[int], dtype: type, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 50).astype(dtype)


@settings(max_examples=60, deadline=None)
@given(case=transposes(), seed=st.integers(0, 2**31 - 1))
def test_reference_is_numpy_transpose(case, seed):
    shape, perm, dtype = case
    x = _input(shape, dtype, seed)
    got = transpose(x, perm)
    want = np.transpose(x, [p % len(shape) for p in perm])
    np.testing.assert_array_equal(got, want)
    assert got.flags.c_contiguous and got.dtype == x.dtype
    # out[i_0..] = input[j] with j[perm[k]] = i_k, element by element
    for i in np.ndindex(*got.shape):
        j = [0] * len(shape)
        for k, p in enumerate(perm):
            j[p % len(shape)] = i[k]
        assert got[i] == x[tuple(j)]


@settings(max_examples=60, deadline=None)
@given(case=transposes(), seed=st.integers(0, 2**31 - 1))
def test_c_kernel_is_bit_exact_with_the_reference(case, seed):
    shape, perm, dtype = case
    x = _input(shape, dtype, seed)
    out = np.zeros([shape[p % len(shape)] for p in perm], dtype)
    native.call_kernel("cortex_m::transpose", [x, perm, out])
    (reference,) = run_program(transpose_program(shape, perm, SCALAR_TYPES[dtype]), [x])
    assert reference.dtype == out.dtype and reference.tobytes() == out.tobytes()


def test_c_kernel_and_reference_read_a_channels_last_input():
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (2, 3, 4, 5), dtype=np.int8)  # logical N, C, H, W
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    out = np.zeros((2, 4, 5, 3), np.int8)
    native.call_kernel(
        "cortex_m::transpose", [native.TensorArg(nhwc, [2, 3, 4, 5], [0, 2, 3, 1]), [0, 2, 3, 1], out]
    )
    program = transpose_program([2, 3, 4, 5], [0, 2, 3, 1], dim_order=[0, 2, 3, 1])
    (reference,) = run_program(program, [x])
    np.testing.assert_array_equal(out, nhwc)
    assert reference.tobytes() == out.tobytes()


@settings(max_examples=25, deadline=None)
@given(case=transposes(dtypes=(np.int8,), max_rank=4), seed=st.integers(0, 2**31 - 1))
def test_tosa_lowering_is_bit_exact_with_the_reference(case, seed):
    shape, perm, dtype = case
    x = _input(shape, dtype, seed)
    program = transpose_program(shape, perm)
    plan = program.execution_plan[0]
    for family in ("u55", "u65", "u85"):
        assert npu_support(plan, 0, family) is None
    (reference,) = run_program(program, [x])
    for family in ("u55", "u85"):  # u55 collapses the axes
        (got,) = run_tosa_reference(lower_to_tosa(program, family=family), [x])
        assert got.tobytes() == reference.tobytes()


# (sizes, perm, out sizes, the argument named)
BAD = [
    ([2, 3, 4], [0, 1], [2, 3, 4], A.perm),  # too few items
    ([2, 3, 4], [0, 1, 2, 0], [2, 3, 4, 2], A.perm),  # too many
    ([2, 3, 4], [0, 0, 1], [2, 2, 3], A.perm),  # a dim twice
    ([2, 3, 4], [0, 1, 3], [2, 3, 4], A.perm),  # no dim 3
    ([2, 3, 4], [0, -4, 1], [2, 3, 3], A.perm),  # below -rank
    ([2, 3, 4], [2, 1, 0], [4, 3, 3], A.out),  # out sizes not the permuted ones
    ([2, 3, 4], [2, 1, 0], [4, 3], A.out),  # out rank
]


def test_a_negative_perm_item_is_taken_mod_rank():
    program = transpose_program([2, 3, 4], [0, -1, 1])
    assert refused(TRANSPOSE, program) is None
    x = _input([2, 3, 4], np.int8, 0)
    np.testing.assert_array_equal(run_program(program, [x])[0], x.transpose(0, 2, 1))


@pytest.mark.parametrize(("sizes", "perm", "out_sizes", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(sizes, perm, out_sizes, bad):
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(
            "cortex_m::transpose", [np.zeros(sizes, np.int8), perm, np.zeros(out_sizes, np.int8)]
        )
    program = transpose_program(sizes, perm, out_sizes=out_sizes)
    assert_every_stage_names(TRANSPOSE, program, bad, [np.zeros(sizes, np.int8)])


def test_check_refuses_an_input_of_rank_0():
    """rank 1..6 (the extension refuses rank 7 before any kernel runs, so rank 0 it is)."""
    with pytest.raises(native.NativeError, match=rf"argument {A.input}\b"):
        native.call_kernel("cortex_m::transpose", [np.zeros((), np.int8), [], np.zeros((), np.int8)])
    assert check_index(TRANSPOSE, transpose_program([], [])) == A.input


@pytest.mark.parametrize(("out_offset", "overlaps"), [(1, True), (23, True), (24, False)])
def test_check_refuses_a_planned_out_sharing_bytes_with_the_input(out_offset, overlaps):
    """As transpose.c (test_kernels_pool_misc's overlap test): argument 2 when out and the
    input share a byte of the arena."""
    assert refused(TRANSPOSE, transpose_program([2, 3, 4], [2, 1, 0], out_offset=out_offset)) == (A.out if overlaps else None)


def test_u55_collapses_the_axes_u85_keeps_them():
    program = transpose_program([1, 3, 8, 8], [0, 2, 3, 1])
    assert collapsed_transpose((1, 3, 8, 8), [0, 2, 3, 1]) == ((3, 64), [1, 0])
    x = _input([1, 3, 8, 8], np.int8, 2)
    (reference,) = run_program(program, [x])
    for family in ("u55", "u85"):
        (got,) = run_tosa_reference(lower_to_tosa(program, family=family), [x])
        assert got.tobytes() == reference.tobytes()
