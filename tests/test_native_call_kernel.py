"""native.call_kernel: argument marshalling to the C kernel ABI and error mapping.

Uses the host-only kernels torchmcu_test::describe/add/fail (firmware/host_ext/
test_kernels.c); expected records are written out by hand from the ABI rules.
"""

from __future__ import annotations

import numpy as np
import pytest

from torchmcu import native


def _describe(args: list, out_len: int = 64) -> list[int]:
    out = np.zeros(out_len, dtype=np.int64)
    native.call_kernel("torchmcu_test::describe", [*args, out])
    return out.tolist()


def test_scalars_and_lists_arrive_tagged() -> None:
    rec = _describe([None, True, False, -5, 2**40, 1.25, [3, -1, 2**33], []])
    # nargs = 8 args + out twice; out pointer passed twice -> flag 1.
    assert rec[:2] == [10, 1]
    body = rec[2:]
    expected = [0, 2, 1, 2, 0, 1, -5, 1, 2**40, 3, 1250, 6, 3, 3, -1, 2**33, 6, 0]
    assert body[: len(expected)] == expected
    assert all(v == 0 for v in body[len(expected) :])


def test_tensor_metadata_default_and_channels_last() -> None:
    a = np.array([[-7, 2, 3], [4, 5, 6]], dtype=np.int8)
    nhwc = np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4) + 0.5  # physical N,H,W,C
    arg = native.TensorArg(nhwc, sizes=[1, 4, 2, 3], dim_order=[0, 2, 3, 1])
    rec = _describe([a, arg])
    assert rec[:2] == [4, 1]
    # tag 4, int8=1, dim 2, sizes, dim_order, numel, nbytes, first element
    t0 = [4, 1, 2, 2, 3, 0, 1, 6, 6, -7]
    # float first element reported *1000
    t1 = [4, 6, 4, 1, 4, 2, 3, 0, 2, 3, 1, 24, 96, 500]
    assert rec[2 : 2 + len(t0) + len(t1)] == t0 + t1


def test_out_written_in_place_and_readonly_input() -> None:
    a = np.array([100, -100, 5, 0], dtype=np.int8)
    b = np.array([20, -20, 1, -1], dtype=np.int8)
    a.setflags(write=False)
    out = np.zeros(4, dtype=np.int8)
    native.call_kernel("torchmcu_test::add", [a, b, 3, out])
    ref = np.clip(a.astype(np.int64) + 3 * b.astype(np.int64), -128, 127)
    np.testing.assert_array_equal(out, ref)


def test_kernel_error_maps_to_native_error() -> None:
    x = np.zeros(4, dtype=np.int8)
    with pytest.raises(native.NativeError) as e:
        native.call_kernel("torchmcu_test::fail", [x, 4, 2, np.zeros(4, np.int8)])
    assert e.value.status == "INVALID_ARGUMENT"
    assert "torchmcu_test::fail.out" in e.value.message and "bad_argument 2" in e.value.message


def test_kernel_rejects_mismatched_argument() -> None:
    a = np.zeros(4, dtype=np.int8)
    with pytest.raises(native.NativeError) as e:
        native.call_kernel("torchmcu_test::add", [a, np.zeros(3, np.int8), 1, np.zeros(4, np.int8)])
    assert "bad_argument 1" in e.value.message


def test_missing_operator_named() -> None:
    with pytest.raises(native.NativeError) as e:
        native.call_kernel("cortex_m::no_such_op", [np.zeros(1, np.int8)])
    assert e.value.status == "MISSING_OPERATOR"
    assert "cortex_m::no_such_op.out" in e.value.message


def test_bad_tensor_arguments_rejected_before_the_call() -> None:
    x = np.zeros(6, dtype=np.int8)
    with pytest.raises(ValueError, match="bytes"):
        native.call_kernel("torchmcu_test::describe", [native.TensorArg(x, [2, 4], [0, 1]), x])
    with pytest.raises(ValueError, match="dim_order"):
        native.call_kernel("torchmcu_test::describe", [native.TensorArg(x, [2, 3], [0, 0]), x])
    with pytest.raises(ValueError, match="C-contiguous"):
        native.call_kernel("torchmcu_test::describe", [np.zeros((4, 4), np.int8)[:, ::2], x])
    with pytest.raises(ValueError, match="no tm_scalar_type"):
        native.call_kernel("torchmcu_test::describe", [np.zeros(2, np.complex64), x])
