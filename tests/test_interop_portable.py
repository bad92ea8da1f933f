"""Portable ExecuTorch operators that its Cortex-M programs contain (dim_order_ops::_clone_dim_order).

Expected values come from numpy: the clone keeps every logical value and writes it in
the out tensor's dim order.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchmcu import native

OP = "dim_order_ops::_clone_dim_order"


def _arg(logical: np.ndarray, order) -> native.TensorArg:
    return native.TensorArg(np.ascontiguousarray(np.transpose(logical, order)), logical.shape, order)


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), seed=st.integers(0, 2**32 - 1),
       dtype=st.sampled_from([np.int8, np.int32, np.float32]), data=st.data(), give_order=st.booleans())
def test_clone_dim_order_matches_numpy(shape, seed, dtype, data, give_order) -> None:
    rank = len(shape)
    perms = list(itertools.permutations(range(rank)))
    in_order, out_order = data.draw(st.sampled_from(perms)), data.draw(st.sampled_from(perms))
    x = (np.random.default_rng(seed).integers(-1000, 1000, size=shape)).astype(dtype)
    out = np.zeros(tuple(shape[d] for d in out_order), dtype)
    native.call_kernel(OP, [_arg(x, in_order), False, list(out_order) if give_order else None,
                            native.TensorArg(out, shape, out_order)])
    np.testing.assert_array_equal(out, np.transpose(x, out_order))


def test_clone_nchw_to_nhwc_by_hand() -> None:
    x = np.arange(24, dtype=np.int8).reshape(1, 2, 3, 4)
    out = np.zeros((1, 3, 4, 2), np.int8)
    native.call_kernel(OP, [x, False, [0, 2, 3, 1], native.TensorArg(out, (1, 2, 3, 4), (0, 2, 3, 1))])
    assert out[0, 1, 2].tolist() == [x[0, 0, 1, 2], x[0, 1, 1, 2]] == [6, 18]


@pytest.mark.parametrize(
    "dim_order, out_sizes, out_dtype, bad",
    [
        ([0, 1, 2, 3], (1, 2, 3, 4), np.int8, 2),  # dim_order argument is not out's
        ([0, 2, 3], (1, 2, 3, 4), np.int8, 2),  # wrong length
        (None, (1, 2, 4, 3), np.int8, 3),  # sizes changed
        (None, (1, 2, 3, 4), np.int32, 3),  # dtype changed
    ],
)
def test_clone_rejects(dim_order, out_sizes, out_dtype, bad) -> None:
    x = np.zeros((1, 2, 3, 4), np.int8)
    order = (0, 2, 3, 1)
    out = np.zeros(tuple(out_sizes[d] for d in order), out_dtype)
    with pytest.raises(native.NativeError, match=rf"bad_argument {bad}\)"):
        native.call_kernel(OP, [x, False, dim_order, native.TensorArg(out, out_sizes, order)])


def test_clone_refuses_an_out_overlapping_the_input() -> None:
    """Element copies from a moved planned offset would read bytes already written."""
    memory = np.arange(32, dtype=np.int8)
    x, out = memory[:24].reshape(2, 3, 4), memory[2:26].reshape(2, 3, 4)
    before = memory.copy()
    with pytest.raises(native.NativeError, match=r"bad_argument 3\)"):
        native.call_kernel(OP, [x, False, None, out])
    np.testing.assert_array_equal(memory, before)
