"""The C runtime through torchmcu._native: load, verify, init, execute, diagnostics.

Programs come from tests/test_runtime_programs.py and call host-only test
kernels; expected outputs are computed here with numpy. Each rejection test
names the status and the diagnostic the verifier must give.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np
import pytest
from test_runtime_programs import (
    CONST_NHWC,
    NCHW,
    NHWC_ORDER,
    add_program,
    describe_program,
    fail_program,
    serialize_unchecked,
)
from torchmcu import native
from torchmcu.pte import program as pm
from torchmcu.pte import writer


def _nchw_input() -> np.ndarray:
    return (np.arange(12, dtype=np.int16) * 11 - 60).astype(np.int8).reshape(NCHW)


def test_run_channels_last_add_matches_numpy() -> None:
    x = _nchw_input()
    (y,) = native.run_program(writer.serialize(add_program(alpha=2)), [x])
    c_logical = CONST_NHWC.reshape(1, 2, 2, 3).transpose(0, 3, 1, 2)  # NHWC memory -> NCHW
    ref = np.clip(x.astype(np.int32) + 2 * c_logical.astype(np.int32), -128, 127).astype(np.int8)
    assert y.shape == tuple(NCHW) and y.dtype == np.int8 and y.flags.c_contiguous
    np.testing.assert_array_equal(y, ref)


def test_program_info_reports_method_facts() -> None:
    info = native.program_info(writer.serialize(add_program(arena=40)))
    assert info["methods"] == ["forward"]
    assert info["operators"] == [("torchmcu_test::add", "out")]
    assert info["missing_operators"] == []
    assert info["num_values"] == 4 and info["num_tensors"] == 3 and info["num_instructions"] == 1
    assert info["arena_bytes"] == 48  # 40 rounded up to 16
    (inp,) = info["inputs"]
    assert inp == {"scalar_type": 1, "dtype": "int8", "sizes": (1, 3, 2, 2), "dim_order": (0, 2, 3, 1),
                   "nbytes": 12, "planned": True}


def test_program_values_reach_the_kernel() -> None:
    x = np.array([[31, 2, 3], [4, 5, 6]], dtype=np.int32)
    (rec,) = native.run_program(writer.serialize(describe_program()), [x])
    expected = [
        8, 1,  # nargs (6 + out twice), out passed twice
        4, 3, 2, 2, 3, 0, 1, 6, 24, 31,  # x: int32 [2,3]
        4, 2, 2, 2, 2, 1, 0, 4, 8, -2,  # c: int16 [2,2] dim order [1,0], constant data
        6, 2, 7, -3,  # IntList resolved through its Int values
        3, 2500,  # Double 2.5 (x1000)
        2, 1,  # Bool True
        0,  # None
    ]
    assert rec.tolist()[: len(expected)] == expected


def test_missing_operator_names_op_and_overload() -> None:
    p = add_program()
    p.execution_plan[0].operators = [pm.Operator("cortex_m::not_here", "out")]
    with pytest.raises(native.NativeError) as e:
        native.run_program(writer.serialize(p), [_nchw_input()])
    assert e.value.status == "MISSING_OPERATOR"
    assert "operator cortex_m::not_here.out" in e.value.message
    info = native.program_info(writer.serialize(p))
    assert info["missing_operators"] == [("cortex_m::not_here", "out")]


def test_kernel_error_names_instruction_argument_and_value() -> None:
    pte = writer.serialize(fail_program(status=4, bad_argument=2))
    with pytest.raises(native.NativeError) as e:
        native.run_program(pte, [np.zeros(4, np.int8)])
    assert e.value.status == "INVALID_ARGUMENT"
    msg = e.value.message
    assert "instruction 0" in msg and "argument 2" in msg and "value 2" in msg
    assert "operator torchmcu_test::fail.out" in msg


def test_input_mismatch_is_rejected() -> None:
    pte = writer.serialize(add_program())
    with pytest.raises(native.NativeError, match="expected int8"):
        native.run_program(pte, [np.zeros(NCHW, np.float32)])
    with pytest.raises(native.NativeError, match="inputs"):
        native.run_program(pte, [])


def test_unknown_method_is_rejected() -> None:
    with pytest.raises(native.NativeError, match="no method"):
        native.run_program(writer.serialize(add_program()), [_nchw_input()], method="train")


# ---- verifier rejections (programs the writer's own validator would refuse) ----


def _values(p: pm.Program) -> list:
    return p.execution_plan[0].values


def _set_tensor(i: int, **changes) -> Callable[[pm.Program], None]:
    def mutate(p: pm.Program) -> None:
        for k, v in changes.items():
            setattr(_values(p)[i], k, v)

    return mutate


def _plan(**changes) -> Callable[[pm.Program], None]:
    def mutate(p: pm.Program) -> None:
        for k, v in changes.items():
            setattr(p.execution_plan[0], k, v)

    return mutate


def _instructions(*ins) -> Callable[[pm.Program], None]:
    def mutate(p: pm.Program) -> None:
        p.execution_plan[0].chains[0].instructions = list(ins)

    return mutate


def _append_values(*vals) -> Callable[[pm.Program], None]:
    def mutate(p: pm.Program) -> None:
        _values(p).extend(vals)

    return mutate


LOAD_REJECTIONS = [
    ("planned_outside", _set_tensor(3, allocation=pm.Allocation(1, 24)), "INVALID_PROGRAM",
     "planned tensor outside its memory buffer"),
    ("memory_id_high", _set_tensor(3, allocation=pm.Allocation(2, 0)), "INVALID_PROGRAM", "memory_id out of range"),
    ("memory_id_zero", _set_tensor(3, allocation=pm.Allocation(0, 0)), "INVALID_PROGRAM", "memory_id out of range"),
    ("constant_index", _set_tensor(1, data_buffer_idx=5), "INVALID_PROGRAM", "data_buffer_idx beyond"),
    ("constant_too_big", _set_tensor(1, sizes=[1, 3, 2, 3]), "INVALID_PROGRAM",
     "constant tensor data outside its segment"),
    ("negative_size", _set_tensor(3, sizes=[1, -3, 2, 2]), "INVALID_PROGRAM", "negative tensor size"),
    ("dim_order", _set_tensor(3, dim_order=[0, 2, 2, 1]), "INVALID_PROGRAM", "not a permutation"),
    ("dim_order_len", _set_tensor(3, dim_order=[0, 1]), "INVALID_PROGRAM", "dim_order length"),
    ("rank7", _set_tensor(3, sizes=[1] * 7, dim_order=list(range(7))), "UNSUPPORTED", "rank above"),
    ("half", _set_tensor(3, scalar_type=pm.ScalarType.HALF), "UNSUPPORTED", "scalar type not supported"),
    ("numel_overflow", _set_tensor(3, sizes=[65536, 65536, 1, 1]), "INVALID_PROGRAM", "overflows"),
    ("storage_offset", _set_tensor(3, storage_offset=1), "UNSUPPORTED", "storage_offset"),
    ("mutable_initial", _set_tensor(1, allocation=pm.Allocation(1, 0)), "UNSUPPORTED", "initial data"),
    ("buffer_size_negative", _plan(non_const_buffer_sizes=[0, -1]), "INVALID_PROGRAM",
     "non_const_buffer_sizes"),
    ("input_index", _plan(inputs=[4]), "INVALID_PROGRAM", "value index out of range"),
    ("arg_index", _instructions(pm.KernelCall(0, [0, 1, 2, 3, 99])), "INVALID_PROGRAM",
     "value index out of range (instruction 0, value 99"),
    ("op_index", _instructions(pm.KernelCall(1, [0, 1, 2, 3, 3])), "INVALID_PROGRAM", "op_index out of range"),
    ("jump_destination", _instructions(pm.JumpFalseCall(2, 5)), "INVALID_PROGRAM", "destination out of range"),
    ("move_index", _instructions(pm.MoveCall(0, 4)), "INVALID_PROGRAM", "move value index out of range"),
    ("int_list_item", _append_values(pm.IntList([0])), "INVALID_PROGRAM",
     "int list item does not reference an Int (value 4"),
    ("int_list_range", _append_values(pm.IntList([9])), "INVALID_PROGRAM", "not a value index"),
    ("empty_op_name", _plan(operators=[pm.Operator("", "out")]), "INVALID_PROGRAM", "operator without a name"),
]


@pytest.mark.parametrize("mutate,status,text", [r[1:] for r in LOAD_REJECTIONS],
                         ids=[r[0] for r in LOAD_REJECTIONS])
def test_verifier_rejects(mutate, status: str, text: str, monkeypatch) -> None:
    p = add_program()
    mutate(p)
    pte = serialize_unchecked(p, monkeypatch)
    with pytest.raises(native.NativeError) as e:
        native.program_info(pte)
    assert e.value.status == status
    assert text in e.value.message
    assert "byte offset" in e.value.message or text.startswith("value index")


def test_two_chains_unsupported(monkeypatch) -> None:
    p = add_program()
    p.execution_plan[0].chains.append(pm.Chain([], [], []))
    with pytest.raises(native.NativeError, match="more than one chain") as e:
        native.program_info(serialize_unchecked(p, monkeypatch))
    assert e.value.status == "UNSUPPORTED"


EXECUTE_REJECTIONS = [
    ("move", _instructions(pm.KernelCall(0, [0, 1, 2, 3, 3]), pm.MoveCall(2, 3)), "INVALID_PROGRAM",
     "move between values of different kinds (or tensors of different type, sizes or memory) "
     "(instruction 1"),
    ("no_out_tensor", _instructions(pm.KernelCall(0, [0, 1, 2, 3, 2])), "INVALID_PROGRAM",
     "does not end with an out tensor (instruction 0, operator torchmcu_test::add.out"),
    ("unplanned_arg", _set_tensor(3, allocation=None), "INVALID_PROGRAM", "has no memory"),
]


@pytest.mark.parametrize("mutate,status,text", [r[1:] for r in EXECUTE_REJECTIONS],
                         ids=[r[0] for r in EXECUTE_REJECTIONS])
def test_executor_rejects(mutate, status: str, text: str, monkeypatch) -> None:
    p = add_program()
    mutate(p)
    with pytest.raises(native.NativeError) as e:
        native.run_program(serialize_unchecked(p, monkeypatch), [_nchw_input()])
    assert e.value.status == status
    assert text in e.value.message


# ---- strings that are not UTF-8 ------------------------------------------------
# Each replaces bytes of one string of the add program, keeping its length. Python's strict
# UTF-8 decoder (the reference) refuses every one; the C loader must too, naming the field and
# the string's byte offset exactly as the Python reader (torchmcu.pte.reader) does.

NOT_UTF8 = {
    "invalid_byte": (b"::", b"\xff:"),
    "lone_continuation": (b"::", b"\x80:"),
    "overlong_slash": (b"::", b"\xc0\xaf"),
    "overlong_3_bytes": (b"_test", b"\xe0\x80\xaf_t"),
    "surrogate": (b"_test", b"\xed\xa0\x80_t"),
    "beyond_10ffff": (b"_test", b"\xf4\x90\x80\x80t"),
    "truncated_at_end": (b"add", b"a\xe2\x82"),
}


def _replace_once(pte: bytes, old: bytes, new: bytes) -> bytes:
    assert len(old) == len(new) and pte.count(old) == 1
    return pte.replace(old, new)


def _operator_name_with(old: bytes, new: bytes) -> bytes:
    pte = writer.serialize(add_program())
    name = b"torchmcu_test::add"
    return _replace_once(pte, name, name.replace(old, new, 1))


def _python_reader_offset(pte: bytes, field: str) -> int:
    from torchmcu.pte.reader import ProgramError, parse

    with pytest.raises(ProgramError) as e:
        parse(pte)
    assert f"{field}: string at byte offset " in str(e.value) and "is not UTF-8" in str(e.value)
    return int(str(e.value).split("byte offset ")[1].split()[0])


@pytest.mark.parametrize("old,new", NOT_UTF8.values(), ids=list(NOT_UTF8))
def test_operator_name_not_utf8_names_field_and_offset(old: bytes, new: bytes) -> None:
    pte = _operator_name_with(old, new)
    name = b"torchmcu_test::add".replace(old, new, 1)
    with pytest.raises(UnicodeDecodeError):
        name.decode("utf-8")
    offset = _python_reader_offset(pte, "Program.execution_plan[0].operators[0].name")
    assert offset == pte.index(name) - 4  # the string's length prefix
    for call in (
        lambda: native.program_info(pte),
        lambda: native.run_program(pte, [_nchw_input()]),
    ):
        with pytest.raises(native.NativeError) as e:
            call()
        assert e.value.status == "INVALID_PROGRAM"
        assert e.value.message == f"Operator.name is not UTF-8 (byte offset {offset})"


@pytest.mark.parametrize(
    "old,new,python_field,c_field",
    [
        (b"out", b"o\xfft", "Program.execution_plan[0].operators[0].overload", "Operator.overload"),
        (b"forward", b"forw\xe9rd", "Program.execution_plan[0].name", "ExecutionPlan.name"),
    ],
)
def test_other_strings_not_utf8_name_field_and_offset(old, new, python_field, c_field) -> None:
    pte = _replace_once(writer.serialize(add_program()), old, new)
    offset = _python_reader_offset(pte, python_field)
    with pytest.raises(native.NativeError) as e:
        native.program_info(pte)
    assert e.value.message == f"{c_field} is not UTF-8 (byte offset {offset})"


@pytest.mark.parametrize(
    "name", ["torchmcu_test::\u00e4dd", "torchmcu_test::\u20acd", "t::\U0001f600dd"]
)
def test_operator_name_in_multibyte_utf8_loads(name: str) -> None:
    """Well-formed 2, 3 and 4 byte sequences pass; the unknown operator is then named."""
    p = add_program()
    p.execution_plan[0].operators = [pm.Operator(name, "out")]
    pte = writer.serialize(p)
    assert native.program_info(pte)["missing_operators"] == [(name, "out")]
    with pytest.raises(native.NativeError, match=f"operator {name}.out") as e:
        native.run_program(pte, [_nchw_input()])
    assert e.value.status == "MISSING_OPERATOR"


# ---- byte-level damage ---------------------------------------------------------


def _rejects(pte: bytes, text: str) -> None:
    with pytest.raises(native.NativeError) as e:
        native.program_info(pte)
    assert e.value.status == "INVALID_PROGRAM"
    assert text in e.value.message


def test_bad_identifier() -> None:
    pte = bytearray(writer.serialize(add_program()))
    pte[4:8] = b"ET11"
    _rejects(bytes(pte), "file identifier is not ET12")


@pytest.mark.parametrize("cut", [0, 7, 12, 39, 100, -13, -1])
def test_truncated_file(cut: int) -> None:
    pte = writer.serialize(add_program())
    with pytest.raises(native.NativeError) as e:
        native.program_info(pte[:cut])
    assert e.value.status == "INVALID_PROGRAM"


def test_extended_header_sizes_checked() -> None:
    pte = bytearray(writer.serialize(add_program()))
    length, program_size, base, seg_size = struct.unpack_from("<IQQQ", pte, 12)
    assert length == 32 and base >= program_size
    bad = bytearray(pte)
    struct.pack_into("<Q", bad, 16, len(pte) + 1)
    _rejects(bytes(bad), "program_size")
    bad = bytearray(pte)
    struct.pack_into("<Q", bad, 32, seg_size + 1)
    _rejects(bytes(bad), "segment data outside the file")
    bad = bytearray(pte)
    struct.pack_into("<Q", bad, 24, 2**64 - 8)
    _rejects(bytes(bad), "segment data outside the file")


def test_root_offset_out_of_bounds() -> None:
    pte = bytearray(writer.serialize(add_program()))
    struct.pack_into("<I", pte, 0, len(pte) + 64)
    _rejects(bytes(pte), "table offset out of bounds")


def test_int_output_is_plain_value(monkeypatch) -> None:
    # An Int plan output comes back as a Python int (non-tensor outputs pass through).
    p = add_program()
    p.execution_plan[0].outputs = [3, 2]
    y, alpha = native.run_program(serialize_unchecked(p, monkeypatch), [_nchw_input()])
    assert alpha == 2 and y.shape == tuple(NCHW)


def test_layout_helpers_roundtrip() -> None:
    x = np.arange(24, dtype=np.int8).reshape(1, 2, 3, 4)
    phys = native._to_physical(x, NHWC_ORDER)
    assert phys.shape == (1, 3, 4, 2) and phys[0, 1, 2, 1] == x[0, 1, 1, 2]
    back = native._from_physical(phys.tobytes(), 1, [1, 2, 3, 4], NHWC_ORDER)
    np.testing.assert_array_equal(back, x)


def test_int_value_type_in_int_list_resolves(monkeypatch) -> None:
    # IntList referencing an Int placed after the list still resolves (forward reference).
    p = describe_program()
    vals = _values(p)
    vals[4] = pm.IntList([9, 2])
    vals.append(pm.Int(-99))
    (rec,) = native.run_program(serialize_unchecked(p, monkeypatch), [np.zeros((2, 3), np.int32)])
    assert rec.tolist()[22:26] == [6, 2, -99, 7]


def test_constant_tensor_points_into_program() -> None:
    # A [4] int16 constant viewed by a describe call reports its first element from the file.
    p = describe_program()
    _values(p)[1] = pm.Tensor(pm.ScalarType.SHORT, [4], [0], data_buffer_idx=1)
    (rec,) = native.run_program(writer.serialize(p), [np.zeros((2, 3), np.int32)])
    assert rec.tolist()[12:20] == [4, 2, 1, 4, 0, 4, 8, -2]


def test_second_memory_id_is_laid_out_after_the_first() -> None:
    # Memory ids 1 and 2 share one arena: id 2 starts at the 16-aligned end of id 1.
    p = add_program()
    p.execution_plan[0].non_const_buffer_sizes = [0, 20, 12]
    _values(p)[3].allocation = pm.Allocation(2, 0)
    pte = writer.serialize(p)
    assert native.program_info(pte)["arena_bytes"] == 32 + 16
    x = _nchw_input()
    (y,) = native.run_program(pte, [x])
    c_logical = CONST_NHWC.reshape(1, 2, 2, 3).transpose(0, 3, 1, 2)
    np.testing.assert_array_equal(y, np.clip(x.astype(np.int32) + 2 * c_logical.astype(np.int32), -128, 127).astype(np.int8))
