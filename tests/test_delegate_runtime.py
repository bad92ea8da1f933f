"""Runtime delegate support: DelegateCall through the host EthosUBackend (a Python callback).

Hand-built programs (tests/_delegate_programs.py): an EthosUBackend DelegateCall whose output a
CPU kernel (cortex_m::transpose) then reads. The callback stands in for the NPU; the tests check
what reaches it (physical NHWC layout, order), that its outputs land in the program, and that
everything the runtime must reject at method init (unknown backend, bad blob, argument count,
dtype, size, scratch) is rejected with a message naming the delegate and the problem.
"""

from __future__ import annotations

import numpy as np
import pytest
from _delegate_programs import (
    BLOB_INPUTS,
    BLOB_OUTPUTS,
    COMMAND,
    IO,
    SCRATCH,
    default_blob,
    delegate_program,
    pack,
)
from torchmcu import native
from torchmcu.native import NativeError
from torchmcu.pte.program import ScalarType
from torchmcu.pte.writer import serialize

A = (np.arange(12, dtype=np.int8) * 7 - 40).reshape(1, 3, 2, 2)  # logical NCHW
B = np.array([[1, -2, 3, -4]], dtype=np.int8)


def _sum_fn(calls: list):
    """d = a_nhwc.flat[:4] + b (int8 wrap-free numbers), recording every call."""

    def fn(index: int, inputs: list[np.ndarray]) -> list[np.ndarray]:
        calls.append((index, [x.copy() for x in inputs]))
        return [
            (inputs[0].reshape(-1)[:4].astype(np.int16) + inputs[1].reshape(-1))
            .astype(np.int8)
            .reshape(1, 4)
        ]

    return fn


def test_inputs_arrive_in_physical_layout_and_outputs_are_written_back() -> None:
    calls: list = []
    d, y = native.run_program(serialize(delegate_program()), [A, B], delegate_fn=_sum_fn(calls))
    assert len(calls) == 1
    index, (a_in, b_in) = calls[0]
    assert index == 0
    nhwc = A.transpose(0, 2, 3, 1)  # the memory layout of a [1,3,2,2] tensor with dim order 0,2,3,1
    assert a_in.dtype == np.int8 and a_in.shape == (1, 2, 2, 3)
    np.testing.assert_array_equal(a_in, nhwc)
    np.testing.assert_array_equal(b_in, B)
    expected = (nhwc.reshape(-1)[:4].astype(np.int16) + B.reshape(-1)).astype(np.int8).reshape(1, 4)
    np.testing.assert_array_equal(d, expected)
    np.testing.assert_array_equal(y, expected.T)  # the CPU kernel after the delegate read d


def test_every_run_calls_the_delegate() -> None:
    calls: list = []
    native.run_program(serialize(delegate_program()), [A, B], runs=3, delegate_fn=_sum_fn(calls))
    assert len(calls) == 3


def test_callback_exception_becomes_native_error_with_cause() -> None:
    def boom(index: int, inputs: list[np.ndarray]) -> list[np.ndarray]:
        raise ValueError("boom from the reference model")

    with pytest.raises(NativeError) as e:
        native.run_program(serialize(delegate_program()), [A, B], delegate_fn=boom)
    assert e.value.status == "DELEGATE"
    assert "ValueError: boom from the reference model" in e.value.message
    assert "instruction 0" in e.value.message and "delegate 0 EthosUBackend" in e.value.message
    assert isinstance(e.value.__cause__, ValueError)


@pytest.mark.parametrize(
    "result, needle",
    [
        ([np.zeros((1, 4), np.int16)], "output 0 must be int8[1, 4]"),
        ([np.zeros((4, 1), np.int8)], "output 0 must be int8[1, 4]"),
        ([], "returned 0 outputs, expected 1"),
    ],
)
def test_callback_output_checked(result: list, needle: str) -> None:
    with pytest.raises(NativeError) as e:
        native.run_program(serialize(delegate_program()), [A, B], delegate_fn=lambda i, x: result)
    assert e.value.status == "DELEGATE" and needle in e.value.message


def test_no_callback_is_a_clear_error() -> None:
    with pytest.raises(NativeError) as e:
        native.run_program(serialize(delegate_program()), [A, B])
    assert e.value.status == "DELEGATE" and "needs a delegate_fn" in e.value.message


def test_unknown_backend_is_missing_operator_naming_the_id() -> None:
    with pytest.raises(NativeError) as e:
        native.run_program(
            serialize(delegate_program(delegate_id="VulkanBackend")),
            [A, B],
            delegate_fn=_sum_fn([]),
        )
    assert e.value.status == "MISSING_OPERATOR"
    assert "VulkanBackend" in e.value.message and "not registered" in e.value.message
    info = native.program_info(serialize(delegate_program(delegate_id="VulkanBackend")))
    assert [(d["id"], d["missing"]) for d in info["delegates"]] == [("VulkanBackend", True)]


def _init_error(program) -> NativeError:
    with pytest.raises(NativeError) as e:
        native.run_program(serialize(program), [A, B], delegate_fn=_sum_fn([]))
    return e.value


def test_blob_failing_verification_rejected_at_init_with_file_offset() -> None:
    good = pack(COMMAND, bytes(32), SCRATCH, BLOB_INPUTS, BLOB_OUTPUTS)
    bad = good[:-32]  # the end block is gone
    err = _init_error(delegate_program(blob=bad))
    assert err.status == "INVALID_PROGRAM"
    assert "vela_end_stream" in err.message and "delegate 0 EthosUBackend" in err.message
    pte = serialize(delegate_program(blob=bad))
    offset = int(err.message.split("byte offset ")[1].rstrip(")"))
    # a file offset: the end of the blob's segment, where the missing end block should start
    assert pte.find(bad) + len(bad) == offset


def test_argument_count_rejected() -> None:
    err = _init_error(delegate_program(drop_scratch_arg=True))
    assert (
        err.status == "INVALID_PROGRAM"
        and "argument count" in err.message
        and "instruction 0" in err.message
    )


def test_input_dtype_rejected() -> None:
    with pytest.raises(NativeError) as e:
        native.run_program(
            serialize(delegate_program(b_type=ScalarType.INT, b_size=1)),
            [A, np.zeros((1, 1), np.int32)],
            delegate_fn=_sum_fn([]),
        )
    assert "dtype differs" in e.value.message and "argument 1" in e.value.message


def test_input_size_rejected() -> None:
    blob = pack(
        COMMAND, b"", SCRATCH, [BLOB_INPUTS[0], IO([1, 1, 1, 1, 1, 3], 1, 16)], BLOB_OUTPUTS
    )
    err = _init_error(delegate_program(blob=blob))
    assert "input size differs" in err.message and "argument 1" in err.message


def test_scratch_smaller_than_blob_scratch_size_rejected() -> None:
    err = _init_error(delegate_program(scratch_bytes=32))
    assert (
        "scratch tensor smaller than the blob's scratch_size" in err.message
        and "argument 3" in err.message
    )


def test_delegate_state_is_accounted_in_metadata() -> None:
    one = native.program_info(serialize(delegate_program()))
    two = native.program_info(serialize(delegate_program(extra_delegates=1)))
    assert [(d["id"], d["missing"]) for d in two["delegates"]] == [("EthosUBackend", False)] * 2
    assert two["meta_bytes"] - one["meta_bytes"] >= 256  # TM_DELEGATE_STATE_BYTES per delegate


def test_backend_sees_blob_in_place_and_compile_specs() -> None:
    """What tm_method_init hands a backend: the blob where the .pte's segment holds it, and the
    delegate's compile specs (read back by tm_delegate_compile_spec)."""
    blob = default_blob()
    pte = serialize(delegate_program(blob=blob))
    (d,) = native.program_info(pte)["delegates"]
    assert (
        d["blob_size"] == len(blob) and pte[d["blob_offset"] : d["blob_offset"] + len(blob)] == blob
    )
    assert d["blob_offset"] % 128 == 0  # segments are 128-byte aligned: cmd/weights stay 16-aligned
    assert d["compile_specs"] == {"output_format": b"vela", "npu": b"u55-128"}
