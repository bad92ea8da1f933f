"""cortex_m::quantized_activation (int8 table) and torchmcu::slice_copy: the C kernels against
numpy over hypothesis shapes, bad arguments named, and the host-built sigmoid/tanh tables
against torch's fake-quantized functions (the float semantics they tabulate)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native
from torchmcu.lower.rules_activation import TABLE_FUNCTIONS, activation_lut
from torchmcu.reference import ops_table

shapes = st.lists(st.integers(1, 7), min_size=1, max_size=4)


@settings(max_examples=40, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**31 - 1), nhwc=st.booleans())
def test_table_kernel_looks_up_every_element(shape, seed, nhwc):
    rng = np.random.default_rng(seed)
    lut = rng.integers(-128, 128, 256, dtype=np.int8)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    out = np.zeros_like(x)
    if nhwc and len(shape) == 4:  # elementwise: any layout, the same for input and output
        n, c, h, w = shape
        phys = x.reshape(n, h, w, c)
        out = np.zeros_like(phys)
        native.call_kernel("cortex_m::quantized_activation", [
            native.TensorArg(phys, [n, c, h, w], [0, 2, 3, 1]), lut,
            native.TensorArg(out, [n, c, h, w], [0, 2, 3, 1])])
        np.testing.assert_array_equal(out, lut[phys.astype(np.int64) + 128])
        return
    native.call_kernel("cortex_m::quantized_activation", [x, lut, out])
    expected = np.array([lut[int(v) + 128] for v in x.reshape(-1)], np.int8).reshape(shape)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(ops_table.quantized_activation(x, lut), expected)


def test_table_kernel_refuses_a_short_table_and_a_mismatched_out():
    x = np.zeros((2, 3), np.int8)
    with pytest.raises(native.NativeError, match="argument 1"):
        native.call_kernel("cortex_m::quantized_activation", [x, np.zeros(255, np.int8),
                                                              np.zeros_like(x)])
    with pytest.raises(native.NativeError, match="argument 2"):
        native.call_kernel("cortex_m::quantized_activation", [x, np.zeros(256, np.int8),
                                                              np.zeros((3, 2), np.int8)])


@st.composite
def slices(draw):
    shape = draw(shapes)
    dim = draw(st.integers(0, len(shape) - 1))
    start = draw(st.integers(0, shape[dim]))
    end = draw(st.integers(start, shape[dim]))
    step = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.int8, np.float32, np.int32]))
    return shape, dim, start, end, step, dtype


@settings(max_examples=60, deadline=None)
@given(case=slices(), seed=st.integers(0, 2**31 - 1))
def test_slice_copy_kernel_matches_numpy_slicing(case, seed):
    shape, dim, start, end, step, dtype = case
    x = (np.random.default_rng(seed).standard_normal(shape) * 50).astype(dtype)
    index = [slice(None)] * len(shape)
    index[dim] = slice(start, end, step)
    expected = x[tuple(index)]
    out = np.zeros(expected.shape, dtype)
    if out.size == 0:
        return  # numpy has no zero-size buffer the extension can pass
    native.call_kernel("torchmcu::slice_copy", [x, dim, start, end, step, out])
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(ops_table.slice_copy(x, dim, start, end, step), expected)


@pytest.mark.parametrize(
    "args,bad",
    [((1, 2, 1, 1), 3),  # end before start
     ((1, 0, 5, 1), 3),  # end beyond the size
     ((3, 0, 1, 1), 1),  # no dim 3
     ((1, 0, 2, 0), 4)],  # step 0
)
def test_slice_copy_refuses_bad_ranges_naming_the_argument(args, bad):
    x = np.zeros((2, 4, 3), np.int8)
    with pytest.raises(native.NativeError, match=f"argument {bad}"):
        native.call_kernel("torchmcu::slice_copy", [x, *args, np.zeros((2, 1, 3), np.int8)])


@pytest.mark.parametrize("start", [0, 47])  # out one byte before self / on self's last byte
def test_slice_copy_refuses_an_out_sharing_bytes_with_self(start):
    """A planned offset moved by one byte (fuzz_plan: memcpy-param-overlap in the row copy):
    out overlapping self in part is argument 5, and nothing is written."""
    arena = np.arange(64, dtype=np.int8)
    x = arena[1:49].reshape(2, 4, 6) if start == 0 else arena[:48].reshape(2, 4, 6)
    out = arena[start : start + 12].reshape(2, 1, 6)
    before = arena.copy()
    with pytest.raises(native.NativeError, match="argument 5"):
        native.call_kernel("torchmcu::slice_copy", [x, 1, 0, 1, 1, out])
    np.testing.assert_array_equal(arena, before)


def test_slice_copy_into_the_bytes_right_after_self():
    arena = np.arange(64, dtype=np.int8)
    x, out = arena[:48].reshape(2, 4, 6), arena[48:60].reshape(2, 1, 6)
    want = x[:, 2:3].copy()
    native.call_kernel("torchmcu::slice_copy", [x, 1, 2, 3, 1, out])
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("op,torch_fn", [(torch.ops.aten.sigmoid.default, torch.sigmoid),
                                         (torch.ops.aten.tanh.default, torch.tanh)])
@pytest.mark.parametrize("in_scale,in_zp", [(0.05, -7), (0.0123, 30), (0.2, 0)])
def test_tables_equal_torch_fake_quant_off_ties(op, torch_fn, in_scale, in_zp):
    out_scale, out_zp = (1 / 256, -128) if torch_fn is torch.sigmoid else (1 / 128, 0)
    lut = activation_lut(TABLE_FUNCTIONS[op], in_scale, in_zp, out_scale, out_zp)
    q = torch.arange(-128, 128, dtype=torch.float64)
    y = torch_fn((q - in_zp) * in_scale)
    fq = torch.clamp(torch.round(y / out_scale) + out_zp, -128, 127).to(torch.int64).numpy()
    scaled = (y / out_scale).numpy()
    tie = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-9  # torch rounds ties to even, we away
    assert not np.array_equal(lut, np.zeros(256, np.int8))
    np.testing.assert_array_equal(lut[~tie].astype(np.int64), fq[~tie])
    for i in np.nonzero(tie)[0]:
        assert int(lut[i]) - out_zp == int(math.copysign(math.floor(abs(scaled[i]) + 0.5),
                                                         scaled[i]))
