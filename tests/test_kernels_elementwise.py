"""add/mul kernels vs the reference, bit-exact (quantize: tests/ops/test_quantize_per_tensor.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchmcu import native
from torchmcu import reference as ref
from test_kernels_common import activation_range, channels, int8, legacy, seeds, zero_points

shapes = st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple)


def _add_params(rng, s1, s2, so, negate):
    twice = 2 * max(s1, s2)
    m1, sh1 = ref.quantize_multiplier(s1 / twice)
    m2, sh2 = ref.quantize_multiplier(s2 / twice)
    mo, sho = ref.quantize_multiplier(twice / (so * (1 << 20)))
    return m1, sh1, (-m2 if negate else m2), sh2, mo, sho


@settings(max_examples=40, deadline=None)
@given(seed=seeds, n=st.integers(1, 2), h=st.integers(1, 6), w=st.integers(1, 6), c=channels,
       scales=st.tuples(*[st.floats(0.005, 0.5)] * 3), zps=st.tuples(zero_points, zero_points, zero_points),
       act=activation_range(), broadcast=st.sampled_from(["none", "other", "self"]), negate=st.booleans())
def test_quantized_add(seed, n, h, w, c, scales, zps, act, broadcast, negate):
    rng = np.random.default_rng(seed)
    a = int8(rng, (n, h, w, c))
    b = int8(rng, (n, h, w, c))
    m1, sh1, m2, sh2, mo, sho = _add_params(rng, *scales, negate)
    a_arg, b_arg = legacy(a), legacy(b)
    a_ref, b_ref = a, b
    if broadcast == "other":
        b = int8(rng, (c,))
        b_arg, b_ref = native.TensorArg(b, (1, c, 1, 1), (0, 2, 3, 1)), b
    elif broadcast == "self":
        a = int8(rng, (c,))
        a_arg, a_ref = native.TensorArg(a, (1, c, 1, 1), (0, 1, 2, 3)), a
    out = np.zeros((n, h, w, c), np.int8)
    args = [a_arg, zps[0], m1, sh1, b_arg, zps[1], m2, sh2, zps[2], mo, sho, act[0], act[1], legacy(out)]
    native.call_kernel("cortex_m::quantized_add", args)
    expected = ref.quantized_add(a_ref, zps[0], m1, sh1, b_ref, zps[1], m2, sh2, zps[2], mo, sho, *act)
    np.testing.assert_array_equal(out, expected)


@settings(max_examples=30, deadline=None)
@given(seed=seeds, shape=shapes, scales=st.tuples(*[st.floats(0.005, 0.5)] * 3),
       zps=st.tuples(zero_points, zero_points, zero_points))
def test_quantized_mul(seed, shape, scales, zps):
    rng = np.random.default_rng(seed)
    a, b = int8(rng, shape), int8(rng, shape)
    m, s = ref.quantize_multiplier(scales[0] * scales[1] / scales[2])
    out = np.zeros(shape, np.int8)
    native.call_kernel("cortex_m::quantized_mul", [a, zps[0], b, zps[1], zps[2], m, s, out])
    np.testing.assert_array_equal(out, ref.quantized_mul(a, zps[0], b, zps[1], zps[2], m, s))


def test_quantized_mul_channel_broadcast():
    rng = np.random.default_rng(1)
    a, b = int8(rng, (2, 3, 5, 7)), int8(rng, (7,))
    out = np.zeros(a.shape, np.int8)
    m, s = ref.quantize_multiplier(0.003)
    native.call_kernel("cortex_m::quantized_mul",
                       [legacy(a), 4, native.TensorArg(b, (1, 7, 1, 1), (0, 2, 3, 1)), -9, 2, m, s, legacy(out)])
    np.testing.assert_array_equal(out, ref.quantized_mul(a, 4, b, -9, 2, m, s))


def test_add_rejects_mismatched_shapes():
    a, b = np.zeros((2, 3), np.int8), np.zeros((3, 2), np.int8)
    out = np.zeros((2, 3), np.int8)
    with pytest.raises(native.NativeError, match="bad_argument 4"):
        native.call_kernel("cortex_m::quantized_add", [a, 0, 1 << 30, 0, b, 0, 1 << 30, 0, 0, 1 << 30, 0, -128, 127, out])
