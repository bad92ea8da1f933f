"""softmax, pad and transpose kernels vs the reference, bit-exact (the pools: tests/ops/test_pool.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_kernels_common import (
    int8,
    legacy,
    seeds,
    zero_points,
)
from torchmcu import native
from torchmcu import reference as ref


def softmax_params(scale: float) -> tuple[int, int, int]:
    """ExecuTorch's derivation of softmax's (input_multiplier, input_shift, diff_min)."""
    m, s = ref.quantize_multiplier(min(scale * (1 << 26), float((1 << 31) - 1)))
    diff_min = -math.floor(31 * math.ldexp(1.0, 26) / math.ldexp(1.0, s))
    return m, s, diff_min


@settings(max_examples=40, deadline=None)
@given(seed=seeds, lead=st.lists(st.integers(1, 4), max_size=2), row=st.sampled_from([1, 2, 3, 10, 17, 100, 1000]),
       scale=st.floats(0.01, 1.0), zp=zero_points, neg_dim=st.booleans())
def test_softmax(seed, lead, row, scale, zp, neg_dim):
    x = int8(np.random.default_rng(seed), (*lead, row))
    m, s, diff_min = softmax_params(scale)
    dim = -1 if neg_dim else x.ndim - 1
    out = np.zeros(x.shape, np.int8)
    native.call_kernel("cortex_m::softmax", [x, dim, zp, -128, m, s, diff_min, out])
    np.testing.assert_array_equal(out, ref.softmax(x, dim, zp, -128, m, s, diff_min))


@settings(max_examples=30, deadline=None)
@given(seed=seeds, shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       pads=st.lists(st.integers(0, 3), min_size=8, max_size=8), value=zero_points, channels_last=st.booleans())
def test_pad(seed, shape, pads, value, channels_last):
    rank = len(shape)
    pre, post = pads[:4], pads[4:]
    for k in range(4 - rank):
        pre[k] = post[k] = 0
    x = int8(np.random.default_rng(seed), tuple(shape))  # memory order
    out = np.zeros(tuple(d + a + b for d, a, b in zip(shape, pre[4 - rank:], post[4 - rank:])), np.int8)
    if channels_last and rank == 4:
        x_arg, out_arg = legacy(x), legacy(out)
    else:
        # contiguous 4-D with C == 1 or H == W == 1 takes NHWC pads (tests/test_interop_pad.py)
        assume(rank < 4 or not (shape[1] == 1 or shape[2] == shape[3] == 1))
        x_arg, out_arg = x, out
    native.call_kernel("cortex_m::pad", [x_arg, pre, post, value, out_arg])
    np.testing.assert_array_equal(out, ref.pad(x, pre, post, value))


@settings(max_examples=30, deadline=None)
@given(seed=seeds, shape=st.lists(st.integers(1, 5), min_size=1, max_size=5),
       dtype=st.sampled_from([np.int8, np.int32, np.float32]), data=st.data())
def test_transpose(seed, shape, dtype, data):
    perm = data.draw(st.permutations(range(len(shape))))
    x = (np.random.default_rng(seed).standard_normal(shape) * 100).astype(dtype)
    expected = ref.transpose(x, perm)
    out = np.zeros(expected.shape, dtype)
    native.call_kernel("cortex_m::transpose", [x, list(perm), out])
    np.testing.assert_array_equal(out, expected)


def test_transpose_reads_channels_last_input():
    x = int8(np.random.default_rng(0), (2, 4, 5, 3))  # NHWC memory of logical N,C,H,W = 2,3,4,5
    out = np.zeros((2, 4, 5, 3), np.int8)  # logical NCHW -> NHWC, contiguous
    native.call_kernel("cortex_m::transpose", [legacy(x), [0, 2, 3, 1], out])
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("op", ["cortex_m::pad", "cortex_m::transpose"])
def test_out_overlapping_the_input_is_refused(op):
    """out one byte into the input (a planned offset moved off the start): pad would fill it
    before copying and transpose would read bytes it already wrote. Argument 4 / 2, no write."""
    memory = np.arange(64, dtype=np.int8)
    if op == "cortex_m::pad":
        x, out = memory[:16].reshape(4, 4), memory[1:37].reshape(6, 6)
        args, bad = [x, [0, 0, 1, 1], [0, 0, 1, 1], 0, out], 4
    else:
        x, out = memory[:24].reshape(2, 3, 4), memory[1:25].reshape(4, 3, 2)
        args, bad = [x, [2, 1, 0], out], 2
    before = memory.copy()
    with pytest.raises(native.NativeError, match=rf"bad_argument {bad}\)"):
        native.call_kernel(op, args)
    np.testing.assert_array_equal(memory, before)
