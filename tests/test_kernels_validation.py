"""Kernels reject arguments that break docs/operators.md, naming the argument index, before writing out."""

from __future__ import annotations

import numpy as np
import pytest

from torchmcu import native
from test_kernels_common import legacy, scratch


def _conv_args(**override):
    x = np.zeros((1, 5, 5, 3), np.int8)
    args = {
        "input": legacy(x), "weight": np.ones((4, 3, 3, 3), np.int8), "bias": None, "stride": [1, 1],
        "padding": [1, 1], "dilation": [1, 1], "input_offset": 0, "output_offset": 0,
        "mults": np.full(4, 1 << 30, np.int32), "shifts": np.zeros(4, np.int32), "act_min": -128,
        "act_max": 127, "scratch": scratch(), "out": legacy(np.full((1, 5, 5, 4), 7, np.int8)),
    }
    args.update(override)
    return args


@pytest.mark.parametrize("field,value,index", [
    ("input_offset", 129, 6),  # offsets are negated zero points: [-127, 128]
    ("output_offset", -129, 7),
    ("input", np.zeros((5, 5, 3), np.int8), 0),  # rank 3
    ("input", np.zeros((1, 5, 5, 3), np.int8), 0),  # legacy op given contiguous NCHW bytes [1,5,5,3]
    ("weight", np.ones((4, 3, 3, 2), np.int8), 1),  # 3 input channels do not split into groups of 2
    ("bias", np.zeros(3, np.int32), 2),
    ("stride", [1], 3),
    ("dilation", [0, 1], 5),
    ("mults", np.full(3, 1 << 30, np.int32), 8),
    ("shifts", np.full(4, 32, np.int32), 9),
    ("act_max", -129, 11),
    ("act_min", -129, 10),
    ("out", legacy(np.zeros((1, 4, 4, 4), np.int8)), 13),  # wrong spatial size
])
def test_conv2d_rejects(field, value, index):
    args = _conv_args(**{field: value})
    out = args["out"].array if isinstance(args["out"], native.TensorArg) else args["out"]
    before = out.copy()
    with pytest.raises(native.NativeError, match=rf"INVALID_ARGUMENT.*bad_argument {index}\)"):
        native.call_kernel("cortex_m::quantized_conv2d", list(args.values()))
    np.testing.assert_array_equal(out, before)


def test_conv2d_valid_arguments_pass():
    native.call_kernel("cortex_m::quantized_conv2d", list(_conv_args().values()))


def test_wrong_argument_count():
    with pytest.raises(native.NativeError, match="INVALID_ARGUMENT"):
        native.call_kernel("cortex_m::quantized_mul", [np.zeros(3, np.int8), 0, np.zeros(3, np.int8)])


def test_linear_rejects_list_length_and_zero_point():
    x, w, out = np.zeros((2, 5), np.int8), np.zeros((3, 5), np.int8), np.zeros((2, 3), np.int8)
    ok = [x, w, None, None, 0, 0, 0, [1 << 30], [0], 127, -128, out]
    native.call_kernel("cortex_m::quantized_linear", ok)
    for index, value in ((7, [1 << 30] * 2), (8, [0, 0]), (6, 128), (4, -128), (1, np.zeros((3, 4), np.int8))):
        bad = list(ok)
        bad[index] = value
        with pytest.raises(native.NativeError, match=rf"bad_argument {index}\)"):
            native.call_kernel("cortex_m::quantized_linear", bad)


def test_softmax_rejects_non_last_dim_and_output_zero_point():
    x, out = np.zeros((2, 5), np.int8), np.zeros((2, 5), np.int8)
    with pytest.raises(native.NativeError, match=r"bad_argument 1\)"):
        native.call_kernel("cortex_m::softmax", [x, 0, 0, -128, 1 << 30, 20, -100, out])
    with pytest.raises(native.NativeError, match=r"bad_argument 3\)"):
        native.call_kernel("cortex_m::softmax", [x, 1, 0, 0, 1 << 30, 20, -100, out])
