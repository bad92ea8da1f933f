"""cortex_m::quantized_activation (int8 table): the C kernel against numpy over hypothesis
shapes, bad arguments named, and the host-built sigmoid/tanh tables against torch's
fake-quantized functions (the float semantics they tabulate). torchmcu::slice_copy's tests are
tests/ops/test_slice_copy.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, reference
from torchmcu.ops.defs.activation_table import activation_lut, sigmoid

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
    np.testing.assert_array_equal(reference.quantized_activation(x, lut), expected)


def test_table_kernel_refuses_a_short_table_and_a_mismatched_out():
    x = np.zeros((2, 3), np.int8)
    with pytest.raises(native.NativeError, match="argument 1"):
        native.call_kernel("cortex_m::quantized_activation", [x, np.zeros(255, np.int8),
                                                              np.zeros_like(x)])
    with pytest.raises(native.NativeError, match="argument 2"):
        native.call_kernel("cortex_m::quantized_activation", [x, np.zeros(256, np.int8),
                                                              np.zeros((3, 2), np.int8)])


@pytest.mark.parametrize("f,torch_fn", [(sigmoid, torch.sigmoid), (math.tanh, torch.tanh)])
@pytest.mark.parametrize("in_scale,in_zp", [(0.05, -7), (0.0123, 30), (0.2, 0)])
def test_tables_equal_torch_fake_quant_off_ties(f, torch_fn, in_scale, in_zp):
    out_scale, out_zp = (1 / 256, -128) if torch_fn is torch.sigmoid else (1 / 128, 0)
    lut = activation_lut(f, in_scale, in_zp, out_scale, out_zp)
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
