"""cortex_m::pad, defined once in torchmcu/ops/defs/pad.py: the reference against np.pad of the
logical array (pads mapped to dims by ExecuTorch's rule, computed here), the C kernel
bit-exact with the reference (the interpreter running the definition), the TOSA lowering
bit-exact with it on the TOSA reference model, and the one argument check naming the argument
the C kernel names, for the interpreter, NPU support and the TOSA lowering."""

from __future__ import annotations


import numpy as np
import pytest
from _arg_checks import assert_every_stage_names, check_index, refused
from _pte_programs import pad_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.npu.tosa.lower import (
    lower_to_tosa,
    npu_support,
    run_tosa_reference,
)
from torchmcu.ops.defs.pad import pad_tensor
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import run_program

PAD = ops.get("cortex_m::pad.out")
A = PAD.schema.A
NHWC = (0, 2, 3, 1)


@st.composite
def pads(draw, max_pad=2):
    """(sizes, dim order, pre, post, value) within the rule, every layout ExecuTorch gives."""
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    rank = len(sizes)
    orders = [tuple(range(rank))]
    if rank == 4:
        orders.append(NHWC)
        if sizes[1] == 1:
            orders.append((0, 2, 1, 3))
    order = draw(st.sampled_from(orders))
    amounts = draw(st.lists(st.integers(0, max_pad), min_size=8, max_size=8))
    pre, post = amounts[:4], amounts[4:]
    for k in range(4 - rank):
        pre[k] = post[k] = 0
    return sizes, list(order), pre, post, draw(st.integers(-128, 127))


def _nhwc(sizes, order) -> bool:
    return len(sizes) == 4 and (sizes[1] == 1 or sizes[2] == sizes[3] == 1 or tuple(order) == NHWC)


def _expected_logical(x: np.ndarray, pre, post, value: int, nhwc: bool) -> np.ndarray:
    """np.pad of the logical array, pad item k applied to the logical dim the rule names."""
    dims = NHWC if nhwc else range(4 - x.ndim, 4)
    widths = [(0, 0)] * x.ndim
    for k, d in enumerate(dims):
        item = k if nhwc else d
        logical = d if nhwc else d - (4 - x.ndim)
        widths[logical] = (pre[item], post[item])
    return np.pad(x, widths, constant_values=np.int8(value))


def _program(case):
    sizes, order, pre, post, value = case
    canonical = NHWC if _nhwc(sizes, order) else tuple(range(len(sizes)))
    return pad_program(sizes, pre, post, value, dim_order=order, out_dim_order=list(canonical))


@settings(max_examples=60, deadline=None)
@given(case=pads(), seed=st.integers(0, 2**31 - 1))
def test_reference_is_np_pad_of_the_logical_array(case, seed):
    sizes, order, pre, post, value = case
    x = np.random.default_rng(seed).integers(-128, 128, sizes, dtype=np.int8)
    nhwc = _nhwc(sizes, order)
    want = _expected_logical(x, pre, post, value, nhwc)
    out_order = NHWC if nhwc else tuple(range(len(sizes)))
    got = pad_tensor(np.transpose(x, order).ravel(), sizes, order, want.shape, out_order, pre, post,
                     value)
    np.testing.assert_array_equal(got, np.transpose(want, out_order).ravel())
    (interpreted,) = run_program(_program(case), [x])
    np.testing.assert_array_equal(interpreted, want)


@settings(max_examples=60, deadline=None)
@given(case=pads(), seed=st.integers(0, 2**31 - 1))
def test_c_kernel_is_bit_exact_with_the_reference(case, seed):
    sizes, order, pre, post, value = case
    x = np.random.default_rng(seed).integers(-128, 128, sizes, dtype=np.int8)
    program = _program(case)
    out_t = program.execution_plan[0].values[-1]
    out = np.zeros([out_t.sizes[d] for d in out_t.dim_order], np.int8)
    native.call_kernel(
        "cortex_m::pad",
        [
            native.TensorArg(np.ascontiguousarray(np.transpose(x, order)), sizes, order),
            pre,
            post,
            value,
            native.TensorArg(out, out_t.sizes, out_t.dim_order),
        ],
    )
    (reference,) = run_program(program, [x])
    assert np.ascontiguousarray(np.transpose(reference, out_t.dim_order)).tobytes() == out.tobytes()


@settings(max_examples=25, deadline=None)
@given(case=pads(), seed=st.integers(0, 2**31 - 1))
def test_tosa_lowering_is_bit_exact_with_the_reference(case, seed):
    x = np.random.default_rng(seed).integers(-128, 128, case[0], dtype=np.int8)
    program = _program(case)
    plan = program.execution_plan[0]
    for family in ("u55", "u65", "u85"):
        assert npu_support(plan, 0, family) is None
    out_order = plan.values[-1].dim_order
    # the TOSA graph reads and writes physical (memory-order) arrays
    (got,) = run_tosa_reference(lower_to_tosa(program), [np.transpose(x, case[1])])
    (reference,) = run_program(program, [x])
    assert got.tobytes() == np.ascontiguousarray(np.transpose(reference, out_order)).tobytes()


# (sizes, dim order, pre, post, value, out sizes, the argument named)
BAD = [
    ([2, 3, 4, 5], [0, 2, 1, 3], [0] * 4, [0] * 4, 0, [2, 3, 4, 5], A.input),  # neither layout
    ([2, 3], [0, 1], [0, 0, 0], [0] * 4, 0, [2, 3], A.pre_pad),  # 3 items
    ([2, 3], [0, 1], [0] * 4, [0, 0, 0, 0, 0], 0, [2, 3], A.post_pad),  # 5 items
    ([2, 3], [0, 1], [1, 0, 0, 0], [0] * 4, 0, [2, 3], A.pre_pad),  # a missing dim padded
    ([2, 3], [0, 1], [0] * 4, [0, 0, 0, -1], 0, [2, 3], A.post_pad),  # negative
    ([2, 3], [0, 1], [0, 0, 1, 0], [1, 0, 0, 0], 0, [3, 3], A.post_pad),  # post's item 0 first
    ([2, 3], [0, 1], [0] * 4, [0] * 4, 128, [2, 3], A.pad_value),
    ([2, 3], [0, 1], [0, 0, 1, 0], [0] * 4, 0, [2, 3], A.out),  # out without the padding
    ([2, 3], [0, 1], [0] * 4, [0] * 4, 0, [2, 3, 1], A.out),  # out rank
]


@pytest.mark.parametrize(("sizes", "order", "pre", "post", "value", "out_sizes", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(sizes, order, pre, post, value, out_sizes, bad):
    x = np.zeros([sizes[d] for d in order], np.int8)
    out_order = list(range(len(out_sizes)))
    out = np.zeros(out_sizes, np.int8)
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(
            "cortex_m::pad",
            [native.TensorArg(x, sizes, order), pre, post, value,
             native.TensorArg(out, out_sizes, out_order)],
        )
    program = pad_program(sizes, pre, post, value, dim_order=order, out_sizes=out_sizes,
                          out_dim_order=out_order)
    assert_every_stage_names(PAD, program, bad, [np.zeros(sizes, np.int8)])


def test_check_refuses_an_input_that_is_not_int8():
    program = pad_program([2, 3], [0] * 4, [0] * 4, 0)
    program.execution_plan[0].values[0] = pm.Tensor(pm.ScalarType.FLOAT, [2, 3], [0, 1], allocation=pm.Allocation(1, 0))
    assert check_index(PAD, program) == A.input
    with pytest.raises(native.NativeError, match=rf"argument {A.input}\b"):
        native.call_kernel("cortex_m::pad", [np.zeros((2, 3), np.float32), [0] * 4, [0] * 4, 0,
                                             np.zeros((2, 3), np.float32)])


@pytest.mark.parametrize(("out_offset", "overlaps"), [(1, True), (5, True), (16, False)])
def test_check_refuses_a_planned_out_sharing_bytes_with_the_input(out_offset, overlaps):
    """pad.c fills out before copying the rows: out must share no byte with the input
    (argument 4, as test_kernels_pool_misc's overlap test for the C kernel)."""
    assert refused(PAD, pad_program([4, 4], [0, 0, 1, 1], [0, 0, 1, 1], 0, out_offset=out_offset)) == (A.out if overlaps else None)
