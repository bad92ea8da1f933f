"""The .pte writer and reader: file layout, round trips, validation errors.

Layout expectations are hand-computed from the ExecuTorch format rules
(ET12 identifier, 32-byte eh00 header after it, segments 128-aligned,
constants 16-aligned); ExecuTorch's own deserializer checks the same files
in test_pte_executorch.py.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import replace

import pytest
from _pte_programs import every_kind_program, int8_bytes, linear_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torchmcu.pte import ProgramError, load, parse, prune_unused, save, serialize
from torchmcu.pte import program as pm


def header(data: bytes) -> tuple[bytes, int, int, int, int]:
    magic, length, program_size, base, seg_size = struct.unpack_from("<4sIQQQ", data, 8)
    return magic, length, program_size, base, seg_size


# --- layout -----------------------------------------------------------------


def test_layout_of_linear_program() -> None:
    p = linear_program()
    data = serialize(p)
    assert data[4:8] == b"ET12"
    magic, length, program_size, base, seg_size = header(data)
    assert (magic, length) == (b"eh00", 32)
    assert base % 128 == 0 and program_size <= base < program_size + 128
    # Constants: 12 bytes of weights, 12 of bias, 12 of kernel sums; each
    # starts 16-aligned, the last one is not padded: 16 + 16 + 12 = 44.
    assert seg_size == 44
    assert len(data) == base + 44
    seg = data[base:]
    assert seg[0:12] == p.constants[1] and seg[12:16] == bytes(4)
    assert seg[16:28] == p.constants[2] and seg[28:32] == bytes(4)
    assert seg[32:44] == p.constants[3]
    # The root table offset points past the header, inside the program part.
    (root,) = struct.unpack_from("<I", data, 0)
    assert 40 <= root < program_size


def test_delegate_segments_are_128_aligned_after_constants() -> None:
    p = every_kind_program()
    data = serialize(p)
    _, _, _, base, seg_size = header(data)
    assert len(data) == base + seg_size
    blob0, blob1 = p.segments_data
    # Constant segment: 54 (pad to 64) + 16 + 5 (pad to 96) + 8 = 104 bytes, so
    # the first delegate blob starts at 128 and the second at 128 + 896.
    c = p.constants
    seg = data[base:]
    assert seg[0:54] == c[1] and seg[64:80] == c[2] and seg[80:85] == c[3] and seg[96:104] == c[4]
    assert seg[128 : 128 + len(blob0)] == blob0
    assert len(blob0) == 772
    assert seg[896 + 128 :] == blob1
    assert seg_size == 1024 + 1


def test_deterministic_and_copy_independent() -> None:
    a = serialize(every_kind_program())
    b = serialize(every_kind_program())
    assert a == b


@pytest.mark.parametrize("make", [linear_program, every_kind_program])
def test_round_trip(make) -> None:
    p = make()
    data = serialize(p)
    q = parse(data, strict=True)
    assert q == p
    assert serialize(q) == data


def test_save_and_load(tmp_path) -> None:
    path = tmp_path / "m.pte"
    save(linear_program(), path)
    assert load(path) == linear_program()
    assert os.listdir(tmp_path) == ["m.pte"]


def test_save_failure_keeps_old_file(tmp_path, monkeypatch) -> None:
    path = tmp_path / "m.pte"
    save(linear_program(), path)
    before = path.read_bytes()
    bad = linear_program()
    bad.execution_plan[0].values[1].dim_order = [0, 0]
    with pytest.raises(ProgramError):
        save(bad, path)

    def broken_fsync(fd: int) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        save(every_kind_program(), path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.pte"]  # no temp file left behind


# --- writer rules -------------------------------------------------------------


def test_unreferenced_constant_is_an_error_and_prune_drops_it() -> None:
    p = linear_program()
    p.constants.insert(2, b"\x01\x02")  # nobody references index 2
    for v in p.execution_plan[0].values:
        if isinstance(v, pm.Tensor) and v.data_buffer_idx >= 2:
            v.data_buffer_idx += 1
    with pytest.raises(ProgramError, match=r"constants\[2\]: no tensor references it"):
        serialize(p)
    pruned = prune_unused(p)
    assert pruned == linear_program()


def test_unreferenced_segment_is_an_error() -> None:
    p = linear_program()
    p.segments_data.append(b"orphan")
    with pytest.raises(ProgramError, match=r"segments_data\[0\]: no delegate references it"):
        serialize(p)
    assert prune_unused(p).segments_data == []


def test_constant_size_must_match_tensor() -> None:
    p = linear_program()
    p.constants[1] = p.constants[1] + b"\0"
    with pytest.raises(ProgramError, match=r"constants\[1\]: holds 13 bytes but its tensors view"):
        serialize(p)
    p.constants[1] = p.constants[1][:10]
    with pytest.raises(ProgramError, match=r"values\[1\] \(Tensor\)\.data_buffer_idx"):
        serialize(p)


def _plan(p: pm.Program) -> pm.ExecutionPlan:
    return p.execution_plan[0]


def _kernel_call(p: pm.Program) -> pm.KernelCall:
    return _plan(p).chains[0].instructions[0]


_BAD_FIELDS = [
    (
        lambda p: setattr(_plan(p).values[0], "dim_order", [1, 1]),
        r"values\[0\] \(Tensor\)\.dim_order",
    ),
    (
        lambda p: setattr(_plan(p).values[0], "scalar_type", 12),
        r"values\[0\] \(Tensor\)\.scalar_type",
    ),
    (
        lambda p: setattr(_plan(p).values[8], "items", [1]),
        r"values\[8\] \(IntList\)\.items\[0\]: value 1 is Tensor",
    ),
    (
        lambda p: _kernel_call(p).args.append(99),
        r"instructions\[0\] \(KernelCall\)\.args\[12\]",
    ),
    (lambda p: setattr(_kernel_call(p), "op_index", 1), r"op_index"),
    (
        lambda p: setattr(_plan(p), "non_const_buffer_sizes", [0, 17]),
        r"values\[12\] \(Tensor\)\.allocation: bytes \[16, 19\) exceed buffer 1 of 17",
    ),
    (
        lambda p: setattr(_plan(p).values[0], "allocation", pm.Allocation(0, 0)),
        r"allocation\.memory_id",
    ),
    (lambda p: setattr(_plan(p), "outputs", [13]), r"outputs\[0\]"),
    (lambda p: setattr(p, "constants", [b"x"] + p.constants[1:]), r"constants\[0\]"),
    (lambda p: setattr(_plan(p).values[4], "value", 1 << 63), r"values\[4\] \(Int\)\.value"),
    (lambda p: setattr(_plan(p), "name", ""), r"\.name: empty"),
]


@pytest.mark.parametrize("mutate, message", _BAD_FIELDS)
def test_validation_names_the_field(mutate, message) -> None:
    p = linear_program()
    mutate(p)
    with pytest.raises(ValueError, match=message):
        serialize(p)


# --- reader errors ------------------------------------------------------------


def test_reader_rejects_bad_container() -> None:
    data = serialize(linear_program())
    with pytest.raises(ProgramError, match="too short"):
        parse(data[:5])
    with pytest.raises(ProgramError, match=r"file identifier at byte offset 4 is b'ET13'"):
        parse(data[:4] + b"ET13" + data[8:])
    _, _, program_size, base, _ = header(data)
    with pytest.raises(ProgramError, match=r"program_size at byte offset 16"):
        parse(data[:16] + struct.pack("<Q", len(data) + 1) + data[24:])
    # Truncated segment data: the last constant no longer fits.
    with pytest.raises(ProgramError, match=r"segments\[0\]: bytes \[\d+, \d+\) are outside"):
        parse(data[:-1])
    # A root offset pointing past the program part.
    with pytest.raises(ProgramError, match=r"byte offset \d+ lie outside the flatbuffer"):
        parse(struct.pack("<I", program_size + 4) + data[4:])


def test_strict_mode_catches_undersized_table() -> None:
    """A vtable stating too small a table size is rejected in strict mode only."""
    data = bytearray(serialize(linear_program()))
    (root,) = struct.unpack_from("<I", data, 0)
    (soff,) = struct.unpack_from("<i", data, root)
    vt = root - soff
    struct.pack_into("<H", data, vt + 2, 4)  # Program table claims 4 bytes
    assert parse(bytes(data)) == linear_program()
    with pytest.raises(ProgramError, match=r"Program\.\w+: field at byte offset \d+ runs past"):
        parse(bytes(data), strict=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_corrupted_files_raise_value_error_only(data) -> None:
    raw = bytearray(serialize(every_kind_program()))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(8, len(raw)))
    try:
        parse(bytes(raw[:cut]))
    except ValueError:
        pass


# --- random programs ------------------------------------------------------------

_SCALARS = [
    pm.ScalarType.BYTE,
    pm.ScalarType.CHAR,
    pm.ScalarType.INT,
    pm.ScalarType.FLOAT,
    pm.ScalarType.LONG,
    pm.ScalarType.BOOL,
]


@st.composite
def programs(draw) -> pm.Program:
    n_scalars = draw(st.integers(1, 6))
    values: list = []
    constants = [b""]
    arena = 0
    for _ in range(n_scalars):
        kind = draw(st.sampled_from(["Int", "Bool", "Double", "Null", "String"]))
        if kind == "Int":
            values.append(pm.Int(draw(st.integers(-(1 << 63), (1 << 63) - 1))))
        elif kind == "Bool":
            values.append(pm.Bool(draw(st.booleans())))
        elif kind == "Double":
            values.append(pm.Double(draw(st.floats(allow_nan=False))))
        elif kind == "Null":
            values.append(pm.Null())
        else:
            values.append(pm.String(draw(st.text(max_size=12))))
    n_tensors = draw(st.integers(1, 5))
    first_tensor = len(values)
    for _ in range(n_tensors):
        rank = draw(st.integers(0, 4))
        sizes = draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank))
        dim_order = draw(st.permutations(list(range(rank))))
        stype = draw(st.sampled_from(_SCALARS))
        t = pm.Tensor(stype, sizes, list(dim_order))
        if draw(st.booleans()):
            constants.append(draw(st.binary(min_size=t.nbytes, max_size=t.nbytes)))
            t.data_buffer_idx = len(constants) - 1
        elif draw(st.booleans()):
            t.allocation = pm.Allocation(1, arena)
            arena += t.nbytes
        values.append(t)
    tensor_ids = list(range(first_tensor, len(values)))
    int_ids = [i for i, v in enumerate(values) if isinstance(v, pm.Int)]
    values.append(pm.TensorList(draw(st.lists(st.sampled_from(tensor_ids), max_size=4))))
    optional_ids = st.sampled_from(tensor_ids + [-1])
    values.append(pm.OptionalTensorList(draw(st.lists(optional_ids, max_size=4))))
    int_items = draw(st.lists(st.sampled_from(int_ids), max_size=4)) if int_ids else []
    values.append(pm.IntList(int_items))
    values.append(pm.DoubleList(draw(st.lists(st.floats(allow_nan=False), max_size=4))))
    values.append(pm.BoolList(draw(st.lists(st.booleans(), max_size=4))))
    all_ids = list(range(len(values)))
    n_ops = draw(st.integers(1, 3))
    instructions = [
        pm.KernelCall(
            draw(st.integers(0, n_ops - 1)),
            draw(st.lists(st.sampled_from(all_ids), max_size=8)),
        )
        for _ in range(draw(st.integers(0, 4)))
    ]
    plan = pm.ExecutionPlan(
        name=draw(st.sampled_from(["forward", "f", "méthode"])),
        values=values,
        inputs=draw(st.lists(st.sampled_from(tensor_ids), max_size=2)),
        outputs=draw(st.lists(st.sampled_from(tensor_ids), max_size=2)),
        chains=[pm.Chain([], [], instructions)],
        operators=[
            pm.Operator(f"cortex_m::op{i}", draw(st.sampled_from(["out", ""])))
            for i in range(n_ops)
        ],
        non_const_buffer_sizes=[0, arena + draw(st.integers(0, 64))],
    )
    return prune_unused(pm.Program(execution_plan=[plan], constants=constants))


@settings(max_examples=60, deadline=None)
@given(programs())
def test_random_programs_round_trip(p: pm.Program) -> None:
    data = serialize(p)
    assert parse(data, strict=True) == p
    assert serialize(parse(data)) == data
    # Every constant is where constant_segment says, 16-aligned in the file.
    _, _, _, base, _ = header(data)
    seg = data[base:]
    pos = 0
    for c in p.constants[1:]:
        pos = (pos + 15) // 16 * 16 if pos else 0
        assert seg[pos : pos + len(c)] == c
        pos += len(c)


def test_reader_keeps_unreferenced_constant_with_its_padding(monkeypatch) -> None:
    """ExecuTorch files may carry constants nobody uses; their length is unknown
    (the file stores only offsets), so they come back with their padding."""
    from torchmcu.pte import writer

    p = linear_program()
    p.constants.insert(2, b"\x05\x04\x03\x02\x01")
    for v in p.execution_plan[0].values:
        if isinstance(v, pm.Tensor) and v.data_buffer_idx >= 2:
            v.data_buffer_idx += 1
    monkeypatch.setattr(writer, "_check_writable", lambda program: None)
    q = parse(serialize(p))
    assert q.constants[2] == b"\x05\x04\x03\x02\x01" + bytes(11)
    assert [len(c) for c in q.constants] == [0, 12, 16, 12, 12]
    assert prune_unused(q) == linear_program()
