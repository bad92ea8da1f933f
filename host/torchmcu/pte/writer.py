"""Write a Program as an ExecuTorch .pte file.

Layout (as ExecuTorch 1.5.1 lays it out, so its own loader reads our files):

    [root offset u32]["ET12"]["eh00" header, 32 bytes][flatbuffer tables ...]
    padding to 128
    segment 0: constants, each 16-byte aligned; constant_segment.offsets[i] is
               the start of Program.constants[i] (offsets[0] the empty placeholder)
    segment 1..: Program.segments_data (delegate blobs), each 128-byte aligned

Decisions:
- The extended header is always written, also when no segment holds data,
  so every file we produce has the same shape (ExecuTorch omits it in that
  corner case; its readers accept both).
- Only what is referenced is written: a constant no tensor points at, or a
  segment no delegate points at, is an error (the exporter decides what goes
  in; `prune_unused` is there to drop leftovers explicitly).
- A constant holds exactly the bytes its tensors view, so the reader can
  recover it without the padding.
- Output is a pure function of the Program: same Program, same bytes.
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import replace
from pathlib import Path

import flatbuffers

from . import _format as F
from . import program as pm
from .validate import (
    ProgramError,
    referenced_constants,
    referenced_segments,
    tensor_bytes_needed,
    validate,
)

_Builder = flatbuffers.Builder


class _SizeKeyedVtables(dict):
    """Vtable cache for flatbuffers.Builder that also keys on the table size.

    flatbuffers 25.x shares a vtable between tables whose field offsets agree
    even when their sizes differ (e.g. a DataSegment with one u64 and a
    KernelCall with one offset), so the shared vtable can state a table size
    smaller than the table. Readers that check fields against the table size
    then reject the file. The builder looks vtables up with `get` right after
    writing the table's vtable offset (so Offset() - objectEnd is the table
    size) and stores them with `__setitem__` right after; we add the size to
    the key in both. Tests parse our output in strict mode to catch any change
    in that library behaviour.
    """

    def __init__(self, builder: flatbuffers.Builder) -> None:
        super().__init__()
        self._builder = builder
        self._size = 0

    def get(self, key, default=None):  # type: ignore[override]
        self._size = self._builder.Offset() - self._builder.objectEnd
        return super().get((key, self._size), default)

    def __setitem__(self, key, value) -> None:
        super().__setitem__((key, self._size), value)


def _new_builder() -> flatbuffers.Builder:
    b = flatbuffers.Builder(1024)
    b.vtables = _SizeKeyedVtables(b)
    return b


# --- vectors ----------------------------------------------------------------


def _vec_i32(b: _Builder, items: list[int]) -> int:
    b.StartVector(4, len(items), 4)
    for x in reversed(items):
        b.PrependInt32(x)
    return b.EndVector()


def _vec_i64(b: _Builder, items: list[int]) -> int:
    b.StartVector(8, len(items), 8)
    for x in reversed(items):
        b.PrependInt64(x)
    return b.EndVector()


def _vec_u64(b: _Builder, items: list[int]) -> int:
    b.StartVector(8, len(items), 8)
    for x in reversed(items):
        b.PrependUint64(x)
    return b.EndVector()


def _vec_f64(b: _Builder, items: list[float]) -> int:
    b.StartVector(8, len(items), 8)
    for x in reversed(items):
        b.PrependFloat64(x)
    return b.EndVector()


def _vec_bool(b: _Builder, items: list[bool]) -> int:
    b.StartVector(1, len(items), 1)
    for x in reversed(items):
        b.PrependBool(x)
    return b.EndVector()


def _vec_u8(b: _Builder, data: bytes) -> int:
    return b.CreateByteVector(bytes(data))


def _vec_tables(b: _Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


def _single_field_table(b: _Builder, add) -> int:
    b.StartObject(1)
    add()
    return b.EndObject()


# --- values -----------------------------------------------------------------


def _tensor(b: _Builder, t: pm.Tensor) -> int:
    sizes = _vec_i32(b, list(t.sizes))
    dim_order = _vec_u8(b, bytes(t.dim_order))
    alloc = 0
    if t.allocation is not None:
        off = t.allocation.offset
        b.StartObject(F.AllocationF.COUNT)
        b.PrependUint32Slot(F.AllocationF.memory_id, t.allocation.memory_id, 0)
        b.PrependUint32Slot(F.AllocationF.memory_offset_low, off & 0xFFFFFFFF, 0)
        b.PrependUint32Slot(F.AllocationF.memory_offset_high, off >> 32, 0)
        alloc = b.EndObject()
    b.StartObject(F.TensorF.COUNT)
    b.PrependInt8Slot(F.TensorF.scalar_type, int(t.scalar_type), 0)
    b.PrependInt32Slot(F.TensorF.storage_offset, t.storage_offset, 0)
    b.PrependUOffsetTRelativeSlot(F.TensorF.sizes, sizes, 0)
    b.PrependUOffsetTRelativeSlot(F.TensorF.dim_order, dim_order, 0)
    b.PrependUint32Slot(F.TensorF.data_buffer_idx, t.data_buffer_idx, 0)
    if alloc:
        b.PrependUOffsetTRelativeSlot(F.TensorF.allocation_info, alloc, 0)
    # requires_grad, layout (strided) and shape_dynamism (STATIC) stay at 0.
    return b.EndObject()


def _items_table(b: _Builder, vec: int) -> int:
    return _single_field_table(b, lambda: b.PrependUOffsetTRelativeSlot(0, vec, 0))


def _value_body(b: _Builder, v: object) -> tuple[int, int]:
    """Build the union member table; return (union tag, table offset)."""
    K = F.KernelTypes
    if isinstance(v, pm.Tensor):
        return K.Tensor, _tensor(b, v)
    if isinstance(v, pm.Null):
        b.StartObject(0)
        return K.Null, b.EndObject()
    if isinstance(v, pm.Int):
        return K.Int, _single_field_table(b, lambda: b.PrependInt64Slot(0, v.value, 0))
    if isinstance(v, pm.Bool):
        return K.Bool, _single_field_table(b, lambda: b.PrependBoolSlot(0, v.value, False))
    if isinstance(v, pm.Double):
        return K.Double, _single_field_table(b, lambda: b.PrependFloat64Slot(0, v.value, 0.0))
    if isinstance(v, pm.String):
        s = b.CreateString(v.value)
        return K.String, _single_field_table(b, lambda: b.PrependUOffsetTRelativeSlot(0, s, 0))
    if isinstance(v, pm.IntList):
        return K.IntList, _items_table(b, _vec_i64(b, list(v.items)))
    if isinstance(v, pm.DoubleList):
        return K.DoubleList, _items_table(b, _vec_f64(b, list(v.items)))
    if isinstance(v, pm.BoolList):
        return K.BoolList, _items_table(b, _vec_bool(b, list(v.items)))
    if isinstance(v, pm.TensorList):
        return K.TensorList, _items_table(b, _vec_i32(b, list(v.items)))
    if isinstance(v, pm.OptionalTensorList):
        return K.OptionalTensorList, _items_table(b, _vec_i32(b, list(v.items)))
    raise ProgramError(f"unknown value kind {type(v).__name__}")


def _evalue(b: _Builder, v: object) -> int:
    tag, body = _value_body(b, v)
    b.StartObject(F.EValueF.COUNT)
    b.PrependUint8Slot(F.EValueF.val_type, tag, 0)
    b.PrependUOffsetTRelativeSlot(F.EValueF.val, body, 0)
    return b.EndObject()


# --- instructions, chains, plan ------------------------------------------------


def _two_i32(b: _Builder, x: int, y: int) -> int:
    b.StartObject(2)
    b.PrependInt32Slot(0, x, 0)
    b.PrependInt32Slot(1, y, 0)
    return b.EndObject()


def _index_and_args(b: _Builder, index: int, args: list[int]) -> int:
    vec = _vec_i32(b, list(args))
    b.StartObject(2)
    b.PrependInt32Slot(0, index, 0)
    b.PrependUOffsetTRelativeSlot(1, vec, 0)
    return b.EndObject()


def _instruction(b: _Builder, ins: pm.Instruction) -> int:
    T = F.InstructionTypes
    if isinstance(ins, pm.KernelCall):
        tag, body = T.KernelCall, _index_and_args(b, ins.op_index, ins.args)
    elif isinstance(ins, pm.DelegateCall):
        tag, body = T.DelegateCall, _index_and_args(b, ins.delegate_index, ins.args)
    elif isinstance(ins, pm.MoveCall):
        tag, body = T.MoveCall, _two_i32(b, ins.move_from, ins.move_to)
    elif isinstance(ins, pm.JumpFalseCall):
        tag, body = (
            T.JumpFalseCall,
            _two_i32(b, ins.cond_value_index, ins.destination_instruction),
        )
    elif isinstance(ins, pm.FreeCall):
        tag = T.FreeCall
        body = _single_field_table(b, lambda: b.PrependInt32Slot(0, ins.value_index, 0))
    else:
        raise ProgramError(f"unknown instruction kind {type(ins).__name__}")
    b.StartObject(F.InstructionF.COUNT)
    b.PrependUint8Slot(F.InstructionF.instr_args_type, tag, 0)
    b.PrependUOffsetTRelativeSlot(F.InstructionF.instr_args, body, 0)
    return b.EndObject()


def _chain(b: _Builder, c: pm.Chain) -> int:
    inputs = _vec_i32(b, list(c.inputs))
    outputs = _vec_i32(b, list(c.outputs))
    instructions = _vec_tables(b, [_instruction(b, i) for i in c.instructions])
    b.StartObject(F.ChainF.COUNT)
    b.PrependUOffsetTRelativeSlot(F.ChainF.inputs, inputs, 0)
    b.PrependUOffsetTRelativeSlot(F.ChainF.outputs, outputs, 0)
    b.PrependUOffsetTRelativeSlot(F.ChainF.instructions, instructions, 0)
    return b.EndObject()


def _operator(b: _Builder, op: pm.Operator) -> int:
    name = b.CreateString(op.name)
    overload = b.CreateString(op.overload)
    b.StartObject(F.OperatorF.COUNT)
    b.PrependUOffsetTRelativeSlot(F.OperatorF.name, name, 0)
    b.PrependUOffsetTRelativeSlot(F.OperatorF.overload, overload, 0)
    return b.EndObject()


def _delegate(b: _Builder, d: pm.BackendDelegate, file_segment: int) -> int:
    ident = b.CreateString(d.id)
    specs = []
    for cs in d.compile_specs:
        key = b.CreateString(cs.key)
        value = _vec_u8(b, cs.value)
        b.StartObject(F.CompileSpecF.COUNT)
        b.PrependUOffsetTRelativeSlot(F.CompileSpecF.key, key, 0)
        b.PrependUOffsetTRelativeSlot(F.CompileSpecF.value, value, 0)
        specs.append(b.EndObject())
    specs_vec = _vec_tables(b, specs)
    b.StartObject(F.DataReferenceF.COUNT)
    b.PrependUint8Slot(F.DataReferenceF.location, F.DATA_LOCATION_SEGMENT, 0)
    b.PrependUint32Slot(F.DataReferenceF.index, file_segment, 0)
    processed = b.EndObject()
    b.StartObject(F.BackendDelegateF.COUNT)
    b.PrependUOffsetTRelativeSlot(F.BackendDelegateF.id, ident, 0)
    b.PrependUOffsetTRelativeSlot(F.BackendDelegateF.processed, processed, 0)
    b.PrependUOffsetTRelativeSlot(F.BackendDelegateF.compile_specs, specs_vec, 0)
    return b.EndObject()


def _plan(b: _Builder, p: pm.ExecutionPlan) -> int:
    name = b.CreateString(p.name)
    values = _vec_tables(b, [_evalue(b, v) for v in p.values])
    inputs = _vec_i32(b, list(p.inputs))
    outputs = _vec_i32(b, list(p.outputs))
    chains = _vec_tables(b, [_chain(b, c) for c in p.chains])
    operators = _vec_tables(b, [_operator(b, op) for op in p.operators])
    # File segment 0 is the constant segment; delegate blobs follow it.
    delegates = _vec_tables(b, [_delegate(b, d, d.segment_index + 1) for d in p.delegates])
    sizes = _vec_i64(b, list(p.non_const_buffer_sizes))
    E = F.ExecutionPlanF
    b.StartObject(E.COUNT)
    b.PrependUOffsetTRelativeSlot(E.name, name, 0)
    b.PrependUOffsetTRelativeSlot(E.values, values, 0)
    b.PrependUOffsetTRelativeSlot(E.inputs, inputs, 0)
    b.PrependUOffsetTRelativeSlot(E.outputs, outputs, 0)
    b.PrependUOffsetTRelativeSlot(E.chains, chains, 0)
    b.PrependUOffsetTRelativeSlot(E.operators, operators, 0)
    b.PrependUOffsetTRelativeSlot(E.delegates, delegates, 0)
    b.PrependUOffsetTRelativeSlot(E.non_const_buffer_sizes, sizes, 0)
    return b.EndObject()


# --- segments and file ---------------------------------------------------------


def _constant_segment(constants: list[bytes]) -> tuple[bytes, list[int]]:
    """Concatenate constants, each starting 16-byte aligned; return data and offsets."""
    out = bytearray()
    offsets = []
    for i, c in enumerate(constants):
        offsets.append(len(out))
        out += c
        if i < len(constants) - 1:
            out += bytes(F.align_up(len(out), F.CONSTANT_ALIGNMENT) - len(out))
    return bytes(out), offsets


def _layout_segments(blobs: list[bytes]) -> tuple[bytes, list[tuple[int, int]]]:
    """Place blobs one after another, each at a 128-byte aligned offset."""
    out = bytearray()
    placed = []
    for blob in blobs:
        out += bytes(F.align_up(len(out), F.SEGMENT_ALIGNMENT) - len(out))
        placed.append((len(out), len(blob)))
        out += blob
    return bytes(out), placed


def _flatbuffer(program: pm.Program, placed: list[tuple[int, int]], offsets: list[int]) -> bytes:
    b = _new_builder()
    plans = _vec_tables(b, [_plan(b, p) for p in program.execution_plan])
    empty = _vec_tables(b, [])  # constant_buffer and backend_delegate_data are unused
    seg_tables = []
    for off, size in placed:
        b.StartObject(F.DataSegmentF.COUNT)
        b.PrependUint64Slot(F.DataSegmentF.offset, off, 0)
        b.PrependUint64Slot(F.DataSegmentF.size, size, 0)
        seg_tables.append(b.EndObject())
    segments = _vec_tables(b, seg_tables)
    offs = _vec_u64(b, offsets)
    b.StartObject(F.SubsegmentF.COUNT)
    b.PrependUint32Slot(F.SubsegmentF.segment_index, 0, 0)
    b.PrependUOffsetTRelativeSlot(F.SubsegmentF.offsets, offs, 0)
    const_seg = b.EndObject()
    P = F.ProgramF
    b.StartObject(P.COUNT)
    b.PrependUint32Slot(P.version, program.version, 0)
    b.PrependUOffsetTRelativeSlot(P.execution_plan, plans, 0)
    b.PrependUOffsetTRelativeSlot(P.constant_buffer, empty, 0)
    b.PrependUOffsetTRelativeSlot(P.backend_delegate_data, empty, 0)
    b.PrependUOffsetTRelativeSlot(P.segments, segments, 0)
    b.PrependUOffsetTRelativeSlot(P.constant_segment, const_seg, 0)
    root = b.EndObject()
    b.Finish(root, file_identifier=F.FILE_IDENTIFIER)
    return bytes(b.Output())


def _check_writable(program: pm.Program) -> None:
    """Writer-only rules on top of `validate`: nothing unreferenced, exact sizes."""
    used = referenced_constants(program)
    for i in range(1, len(program.constants)):
        if i not in used:
            raise ProgramError(
                f"constants[{i}]: no tensor references it (call prune_unused to drop leftovers)"
            )
    for i in range(len(program.segments_data)):
        if i not in referenced_segments(program):
            raise ProgramError(
                f"segments_data[{i}]: no delegate references it (call prune_unused to drop it)"
            )
    need: dict[int, int] = {}
    for plan in program.execution_plan:
        for v in plan.values:
            if isinstance(v, pm.Tensor) and v.data_buffer_idx > 0:
                n = tensor_bytes_needed(v)
                need[v.data_buffer_idx] = max(need.get(v.data_buffer_idx, 0), n)
    for i, n in sorted(need.items()):
        if len(program.constants[i]) != n:
            raise ProgramError(
                f"constants[{i}]: holds {len(program.constants[i])} bytes but its tensors view "
                f"{n}; a constant must hold exactly the bytes its tensors view"
            )


def serialize(program: pm.Program) -> bytes:
    """Return the .pte bytes of a Program (validated first; deterministic)."""
    validate(program)
    _check_writable(program)
    const_data, offsets = _constant_segment([bytes(c) for c in program.constants])
    seg_data, placed = _layout_segments([const_data] + [bytes(s) for s in program.segments_data])
    fb = _flatbuffer(program, placed, offsets)

    program_size = len(fb) + F.EXT_HEADER_PADDED
    base = F.align_up(program_size, F.SEGMENT_ALIGNMENT)
    header = struct.pack(
        "<4sIQQQ",
        F.EXT_HEADER_MAGIC,
        F.EXT_HEADER_LENGTH,
        program_size,
        base,
        len(seg_data),
    ).ljust(F.EXT_HEADER_PADDED, b"\0")
    # Inserting the header shifts everything after the identifier; only the
    # root offset (which jumps over it) changes, all other offsets are relative.
    (root,) = struct.unpack_from("<I", fb, 0)
    head = struct.pack("<I", root + F.EXT_HEADER_PADDED) + fb[4:8] + header + fb[8:]
    assert len(head) == program_size
    return head + bytes(base - program_size) + seg_data


def save(program: pm.Program, path: str | os.PathLike[str]) -> None:
    """Write the .pte atomically: a failure never leaves a truncated file."""
    data = serialize(program)
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def prune_unused(program: pm.Program) -> pm.Program:
    """Return a copy without unreferenced constants and segments, indices remapped."""
    used_c = referenced_constants(program)
    keep_c = [0] + [i for i in range(1, len(program.constants)) if i in used_c]
    cmap = {old: new for new, old in enumerate(keep_c)}
    used_s = referenced_segments(program)
    keep_s = [i for i in range(len(program.segments_data)) if i in used_s]
    smap = {old: new for new, old in enumerate(keep_s)}

    plans = []
    for plan in program.execution_plan:
        values = [
            replace(v, data_buffer_idx=cmap[v.data_buffer_idx]) if isinstance(v, pm.Tensor) else v
            for v in plan.values
        ]
        delegates = [replace(d, segment_index=smap[d.segment_index]) for d in plan.delegates]
        plans.append(replace(plan, values=values, delegates=delegates))
    return replace(
        program,
        execution_plan=plans,
        constants=[program.constants[i] for i in keep_c],
        segments_data=[program.segments_data[i] for i in keep_s],
    )
