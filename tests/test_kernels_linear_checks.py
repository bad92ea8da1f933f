"""quantized_linear's argument checks (fast plain-case checks with the general ones as fallback):
every broken contract is rejected with its argument index before out is written, and the
plain and non-plain layouts that the contract allows still pass with the reference's numbers.
Runs the host build's kernel (the check code is the same on every target)."""

from __future__ import annotations

import numpy as np
import pytest
from torchmcu import native
from torchmcu.reference import ops_linear_conv as ops

IN, W, BIAS, KSUM, MULTS, SHIFTS, ACT_MAX, ACT_MIN, OUT = 0, 1, 2, 3, 7, 8, 9, 10, 11


def _args(rows=(2,), k=5, n=3) -> list:
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=(*rows, k), dtype=np.int8)
    w = rng.integers(-128, 128, size=(n, k), dtype=np.int8)
    ksum = (7 * w.astype(np.int64).sum(axis=1) + 100).astype(np.int32)
    out = np.full((*rows, n), 55, np.int8)
    return [x, w, None, ksum, 7, 0, 3, [1 << 30] * n, [-3] * n, 127, -128, out]


def _array(v):
    """The memory of a tensor argument (None stays None)."""
    return None if v is None else np.asarray(v.array if isinstance(v, native.TensorArg) else v)


def _expected(args: list) -> np.ndarray:
    x, w, bias, ksum, a, b, c, m, s, hi, lo = args[:11]
    arr = _array
    xs = arr(x).reshape(-1, arr(w).shape[1])
    want = ops.quantized_linear(xs, arr(w), arr(bias), arr(ksum), a, b, c, list(m), list(s), hi, lo)
    return np.asarray(want).reshape(-1)


@pytest.mark.parametrize(
    ("index", "value"),
    [
        (OUT, np.zeros((2, 4), np.int8)),  # last size is not n
        (OUT, np.zeros((3, 3), np.int8)),  # leading size differs from the input's
        (OUT, np.zeros((2, 3), np.int32)),  # not int8
        (OUT, native.TensorArg(np.zeros((3, 2), np.int8), [2, 3], [1, 0])),  # not contiguous
        (IN, native.TensorArg(np.zeros((5, 2), np.int8), [2, 5], [1, 0])),
        (KSUM, np.zeros(4, np.int32)),
        (KSUM, np.zeros(3, np.int8)),
        (MULTS, [1 << 30, 1 << 31, 1 << 30]),
        (MULTS, [1 << 30, 1 << 30, -(1 << 31) - 1]),
        (SHIFTS, [0, 0, 32]),
        (SHIFTS, [-32, 0, 0]),
        (ACT_MAX, -129),
    ],
)
def test_linear_rejects(index: int, value) -> None:
    args = _args()
    args[index] = value
    out = args[OUT].array if isinstance(args[OUT], native.TensorArg) else args[OUT]
    before = out.copy()
    with pytest.raises(native.NativeError, match=rf"INVALID_ARGUMENT.*bad_argument {index}\)"):
        native.call_kernel("cortex_m::quantized_linear", args)
    np.testing.assert_array_equal(out, before)


def test_linear_rejects_bias_length() -> None:
    args = _args()
    args[KSUM], args[BIAS] = None, np.zeros(2, np.int32)
    with pytest.raises(native.NativeError, match=rf"bad_argument {BIAS}\)"):
        native.call_kernel("cortex_m::quantized_linear", args)


@pytest.mark.parametrize("case", ["plain", "rank3", "size1_permuted", "extreme_requant"])
def test_linear_accepts(case: str) -> None:
    args = _args(rows=(2, 1) if case == "rank3" else (2,))
    if case == "size1_permuted":  # dims of size 1 may sit anywhere in the dim order
        args = _args(rows=(1,))
        args[OUT] = native.TensorArg(np.zeros((3, 1), np.int8), [1, 3], [1, 0])
        args[IN] = native.TensorArg(args[IN].reshape(5, 1), [1, 5], [1, 0])
    if case == "extreme_requant":
        args[MULTS], args[SHIFTS] = [(1 << 31) - 1, -(1 << 31), 1], [31, -31, 0]
    want = _expected(args)
    native.call_kernel("cortex_m::quantized_linear", args)
    out = args[OUT].array if isinstance(args[OUT], native.TensorArg) else args[OUT]
    np.testing.assert_array_equal(out.reshape(-1), want)
