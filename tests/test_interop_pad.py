"""cortex_m::pad follows ExecuTorch 1.5.1's pad-order rule (docs/operators.md, pad.out).

Expected values are computed here on logical arrays with np.pad: the rule says a 4-D
input with C == 1, or H == W == 1, or dim order 0,2,3,1 takes its pads in N,H,W,C
order; any other input takes them in its sizes' order. The C kernel and the
reference interpreter must both agree with that, for every memory layout ExecuTorch
gives such tensors (including its [0,2,1,3] dim order for a C == 1 tensor).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from test_lower_ops import Seq, _ops, lower_and_compare
from torchmcu import native
from torchmcu.pte import writer
from torchmcu.reference import interpreter, ops_layout

NHWC = (0, 2, 3, 1)


def _expected_logical(x: np.ndarray, pre: list[int], post: list[int], value: int, nhwc: bool) -> np.ndarray:
    """np.pad of the logical array with pads mapped to logical dims by the rule."""
    if nhwc:  # pads are N,H,W,C: logical dim d takes pad item NHWC.index(d)
        widths = [(pre[NHWC.index(d)], post[NHWC.index(d)]) for d in range(4)]
    else:
        widths = list(zip(pre[4 - x.ndim:], post[4 - x.ndim:]))
    return np.pad(x, widths, constant_values=np.int8(value))


def _memory(logical: np.ndarray, dim_order) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(logical, dim_order))


def _run_kernel(x: np.ndarray, order, out_sizes, out_order, pre, post, value) -> np.ndarray:
    out = np.zeros(tuple(out_sizes[d] for d in out_order), np.int8)
    native.call_kernel("cortex_m::pad", [
        native.TensorArg(_memory(x, order), x.shape, order), pre, post, value,
        native.TensorArg(out, out_sizes, out_order)])
    return np.transpose(out, np.argsort(out_order))  # back to logical


def _layouts(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Dim orders ExecuTorch may give a tensor of this shape (all within the rule)."""
    if len(shape) != 4:
        return [tuple(range(len(shape)))]
    return [(0, 1, 2, 3), NHWC] + ([(0, 2, 1, 3)] if shape[1] == 1 else [])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), shape=st.lists(st.integers(1, 4), min_size=1, max_size=4),
       pads=st.lists(st.integers(0, 2), min_size=8, max_size=8), value=st.integers(-128, 127), data=st.data())
def test_pad_rule_kernel_and_reference(seed, shape, pads, value, data) -> None:
    rank = len(shape)
    x = np.random.default_rng(seed).integers(-128, 128, size=shape, dtype=np.int8)
    order = data.draw(st.sampled_from(_layouts(tuple(shape))))
    nhwc = rank == 4 and (shape[1] == 1 or shape[2] == shape[3] == 1 or order == NHWC)
    assert ops_layout.is_channels_last(shape, order) == nhwc
    pre, post = pads[:4], pads[4:]
    for k in range(4 - rank):
        pre[k] = post[k] = 0
    expected = _expected_logical(x, pre, post, value, nhwc)
    out_sizes = list(expected.shape)
    canonical = NHWC if nhwc else tuple(range(rank))
    # keep the input's dim order for out where it still describes the same bytes
    out_order = order if ops_layout.laid_out_as(out_sizes, order, canonical) else canonical
    got = _run_kernel(x, order, out_sizes, out_order, pre, post, value)
    np.testing.assert_array_equal(got, expected)
    flat = ops_layout.pad_tensor(_memory(x, order), shape, order, out_sizes, out_order, pre, post, value)
    np.testing.assert_array_equal(flat, _memory(expected, out_order).ravel())


def test_executorch_ds_cnn_pad_by_hand() -> None:
    """ExecuTorch's DS-CNN pad: sizes [1,1,5,4] dim order [0,2,1,3], NHWC pads (H 1+1, W 2+1)."""
    x = np.arange(20, dtype=np.int8).reshape(1, 1, 5, 4)
    order = (0, 2, 1, 3)
    got = _run_kernel(x, order, [1, 1, 7, 7], order, [0, 1, 2, 0], [0, 1, 1, 0], -5)
    assert got.shape == (1, 1, 7, 7)
    np.testing.assert_array_equal(got[0, 0, 1:6, 2:6], x[0, 0])
    assert (got[0, 0, 0] == -5).all() and (got[0, 0, 6] == -5).all()
    assert (got[0, 0, :, :2] == -5).all() and (got[0, 0, :, 6] == -5).all()


def test_contiguous_c_gt_1_takes_logical_pads() -> None:
    x = np.arange(2 * 3 * 2 * 2, dtype=np.int8).reshape(2, 3, 2, 2)
    got = _run_kernel(x, (0, 1, 2, 3), [2, 4, 2, 3], (0, 1, 2, 3), [0, 1, 0, 0], [0, 0, 0, 1], 7)
    np.testing.assert_array_equal(got, np.pad(x, [(0, 0), (1, 0), (0, 0), (0, 1)], constant_values=7))


@pytest.mark.parametrize(
    "sizes, order, pre, out_sizes, out_order, bad",
    [
        # C > 1 with dim order 0,2,1,3: bytes neither NHWC nor contiguous
        ((1, 3, 4, 5), (0, 2, 1, 3), [0, 2, 0, 0], (1, 3, 6, 5), (0, 2, 1, 3), 0),
        # C == 1 but W before H in memory
        ((1, 1, 4, 5), (0, 1, 3, 2), [0, 2, 0, 0], (1, 1, 6, 5), (0, 1, 3, 2), 0),
        # pads meant in NCHW order (H by 2) pad W under the rule: out sizes do not fit
        ((1, 1, 4, 5), (0, 1, 2, 3), [0, 0, 2, 0], (1, 1, 6, 5), (0, 1, 2, 3), 4),
        # C padded from 1 to 3: out must be NHWC in memory
        ((1, 1, 4, 5), (0, 1, 2, 3), [0, 0, 0, 2], (1, 3, 4, 5), (0, 1, 2, 3), 4),
    ],
)
def test_pad_rejects_layouts_outside_the_rule(sizes, order, pre, out_sizes, out_order, bad) -> None:
    x = np.zeros(tuple(sizes[d] for d in order), np.int8)
    out = np.zeros(tuple(out_sizes[d] for d in out_order), np.int8)
    post = [0, 0, 0, 0]
    with pytest.raises(native.NativeError, match=rf"bad_argument {bad}\)"):
        native.call_kernel("cortex_m::pad", [native.TensorArg(x, sizes, order), pre, post, 0,
                                             native.TensorArg(out, out_sizes, out_order)])
    with pytest.raises(ValueError, match="pad"):
        ops_layout.pad_tensor(x, sizes, order, out_sizes, out_order, pre, post, 0)


@pytest.mark.parametrize("channels", [1, 3])
def test_our_exporter_pad_still_matches(channels: int) -> None:
    """torchmcu's own pads (C == 1 and C > 1 inputs) under the rule: native == reference ~ torch."""
    torch.manual_seed(0)
    model = Seq(nn.ZeroPad2d((1, 2, 3, 0)), nn.Conv2d(channels, 4, 3))
    program, _ = lower_and_compare(model, [(1, channels, 6, 5)])
    assert "cortex_m::pad" in _ops(program)
    x = torch.randn(1, channels, 6, 5).numpy()
    (ours,) = native.run_program(writer.serialize(program), [x])
    (ref,) = interpreter.run_program(program, [x])
    np.testing.assert_array_equal(ours, ref)
