"""Read a .pte file back into a Program (for tests and tools).

Accepts what ExecuTorch 1.5.1 writes for a static, CPU-only program: the
extended header may be absent, constants live in the constant segment,
delegate blobs in further segments. Features the Program model does not
represent (inline constant or delegate data, mutable data segments, named
data, dynamic shapes, non-CPU devices) are rejected with an error naming the
field, rather than silently dropped. Purely informative fields (container
metadata, stack traces, requires_grad) are ignored.

Every error is a ValueError (ProgramError) naming the field and, for
container-level problems, the byte offset.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from . import _format as F
from . import program as pm
from ._fbread import Buf, Table
from .validate import ProgramError, tensor_bytes_needed, validate


def _require_string(t: Table, slot: int, name: str) -> str:
    s = t.string(slot, name)
    if s is None:
        raise ProgramError(f"{t.path}.{name}: missing (table at byte offset {t.pos})")
    return s


def _tensor(t: Table) -> pm.Tensor:
    TF = F.TensorF
    st = int(t.scalar(TF.scalar_type, "scalar_type", "<b"))
    try:
        scalar_type = pm.ScalarType(st)
    except ValueError:
        raise ProgramError(
            f"{t.path}.scalar_type: unsupported scalar type {st} (table at byte offset {t.pos})"
        ) from None
    dyn = int(t.scalar(TF.shape_dynamism, "shape_dynamism", "<b"))
    if dyn != F.SHAPE_DYNAMISM_STATIC:
        raise ProgramError(f"{t.path}.shape_dynamism: {dyn} (only static shapes are supported)")
    if t.has(TF.extra_tensor_info):
        raise ProgramError(f"{t.path}.extra_tensor_info: not supported (external/mutable data)")
    layout = int(t.scalar(TF.layout, "layout", "<b"))
    if layout != 0:
        raise ProgramError(f"{t.path}.layout: {layout} (only strided tensors are supported)")
    alloc = None
    a = t.table(TF.allocation_info, "allocation_info")
    if a is not None:
        low = int(a.scalar(F.AllocationF.memory_offset_low, "memory_offset_low", "<I"))
        high = int(a.scalar(F.AllocationF.memory_offset_high, "memory_offset_high", "<I"))
        alloc = pm.Allocation(
            memory_id=int(a.scalar(F.AllocationF.memory_id, "memory_id", "<I")),
            offset=low | (high << 32),
        )
    return pm.Tensor(
        scalar_type=scalar_type,
        sizes=t.scalars(TF.sizes, "sizes", "<i"),
        dim_order=t.scalars(TF.dim_order, "dim_order", "<B"),
        data_buffer_idx=int(t.scalar(TF.data_buffer_idx, "data_buffer_idx", "<I")),
        allocation=alloc,
        storage_offset=int(t.scalar(TF.storage_offset, "storage_offset", "<i")),
    )


_VALUE_NAMES = {v: k for k, v in vars(F.KernelTypes).items() if not k.startswith("_")}
_INSTRUCTION_NAMES = {v: k for k, v in vars(F.InstructionTypes).items() if not k.startswith("_")}


def _evalue(t: Table):
    K = F.KernelTypes
    tag = int(t.scalar(F.EValueF.val_type, "val_type", "<B"))
    names = _VALUE_NAMES
    if tag not in names or tag == K.NONE:
        raise ProgramError(f"{t.path}.val_type: bad union tag {tag} (table at byte offset {t.pos})")
    body = t.table(F.EValueF.val, "val", f"{t.path} ({names[tag]})")
    if body is None:
        raise ProgramError(f"{t.path}.val: missing {names[tag]} table (at byte offset {t.pos})")
    if tag == K.Null:
        return pm.Null()
    if tag == K.Int:
        return pm.Int(int(body.scalar(0, "int_val", "<q")))
    if tag == K.Bool:
        return pm.Bool(bool(body.scalar(0, "bool_val", "<B")))
    if tag == K.Double:
        return pm.Double(float(body.scalar(0, "double_val", "<d", 0.0)))
    if tag == K.String:
        return pm.String(_require_string(body, 0, "string_val"))
    if tag == K.Tensor:
        return _tensor(body)
    if tag == K.IntList:
        return pm.IntList(body.scalars(0, "items", "<q"))
    if tag == K.DoubleList:
        return pm.DoubleList([float(x) for x in body.scalars(0, "items", "<d")])
    if tag == K.BoolList:
        return pm.BoolList([bool(x) for x in body.scalars(0, "items", "<B")])
    if tag == K.TensorList:
        return pm.TensorList(body.scalars(0, "items", "<i"))
    return pm.OptionalTensorList(body.scalars(0, "items", "<i"))


def _instruction(t: Table) -> pm.Instruction:
    T = F.InstructionTypes
    tag = int(t.scalar(F.InstructionF.instr_args_type, "instr_args_type", "<B"))
    names = _INSTRUCTION_NAMES
    if tag not in names or tag == T.NONE:
        raise ProgramError(
            f"{t.path}.instr_args_type: bad union tag {tag} (table at byte offset {t.pos})"
        )
    b = t.table(F.InstructionF.instr_args, "instr_args", f"{t.path} ({names[tag]})")
    if b is None:
        raise ProgramError(f"{t.path}.instr_args: missing (table at byte offset {t.pos})")

    def i32(slot: int, name: str) -> int:
        return int(b.scalar(slot, name, "<i"))

    if tag == T.KernelCall:
        return pm.KernelCall(i32(0, "op_index"), b.scalars(1, "args", "<i"))
    if tag == T.DelegateCall:
        return pm.DelegateCall(i32(0, "delegate_index"), b.scalars(1, "args", "<i"))
    if tag == T.MoveCall:
        return pm.MoveCall(i32(0, "move_from"), i32(1, "move_to"))
    if tag == T.JumpFalseCall:
        return pm.JumpFalseCall(i32(0, "cond_value_index"), i32(1, "destination_instruction"))
    return pm.FreeCall(i32(0, "value_index"))


def _delegate(t: Table) -> tuple[pm.BackendDelegate, int]:
    """Return the delegate and the file segment index of its blob."""
    ref = t.table(F.BackendDelegateF.processed, "processed")
    if ref is None:
        raise ProgramError(f"{t.path}.processed: missing (table at byte offset {t.pos})")
    loc = int(ref.scalar(F.DataReferenceF.location, "location", "<B"))
    if loc != F.DATA_LOCATION_SEGMENT:
        raise ProgramError(
            f"{ref.path}.location: {loc} (only delegate data in segments is supported)"
        )
    specs = [
        pm.CompileSpec(key=_require_string(cs, 0, "key"), value=cs.raw_bytes(1, "value"))
        for cs in t.tables(F.BackendDelegateF.compile_specs, "compile_specs")
    ]
    d = pm.BackendDelegate(
        id=_require_string(t, F.BackendDelegateF.id, "id"),
        segment_index=-1,
        compile_specs=specs,
    )
    return d, int(ref.scalar(F.DataReferenceF.index, "index", "<I"))


def _plan(t: Table) -> tuple[pm.ExecutionPlan, list[int]]:
    E = F.ExecutionPlanF
    if t.has(E.non_const_buffer_device):
        for dev in t.tables(E.non_const_buffer_device, "non_const_buffer_device"):
            if int(dev.scalar(1, "device_type", "<b")) != 0:
                raise ProgramError(f"{dev.path}.device_type: only CPU buffers are supported")
    chains = []
    for c in t.tables(E.chains, "chains"):
        chains.append(
            pm.Chain(
                inputs=c.scalars(F.ChainF.inputs, "inputs", "<i"),
                outputs=c.scalars(F.ChainF.outputs, "outputs", "<i"),
                instructions=[
                    _instruction(i) for i in c.tables(F.ChainF.instructions, "instructions")
                ],
            )
        )
    delegates = [_delegate(d) for d in t.tables(E.delegates, "delegates")]
    plan = pm.ExecutionPlan(
        name=_require_string(t, E.name, "name"),
        values=[_evalue(v) for v in t.tables(E.values, "values")],
        inputs=t.scalars(E.inputs, "inputs", "<i"),
        outputs=t.scalars(E.outputs, "outputs", "<i"),
        chains=chains,
        operators=[
            pm.Operator(
                name=_require_string(o, F.OperatorF.name, "name"),
                overload=o.string(F.OperatorF.overload, "overload") or "",
            )
            for o in t.tables(E.operators, "operators")
        ],
        delegates=[d for d, _ in delegates],
        non_const_buffer_sizes=t.scalars(E.non_const_buffer_sizes, "non_const_buffer_sizes", "<q"),
    )
    return plan, [seg for _, seg in delegates]


def _header(data: bytes) -> tuple[int, int]:
    """Return (program_size, segment_base_offset) from the extended header, if any."""
    if len(data) < 8:
        raise ProgramError(f"file is {len(data)} bytes, too short for a flatbuffer header")
    ident = data[4:8]
    if ident != F.FILE_IDENTIFIER:
        raise ProgramError(
            f"file identifier at byte offset 4 is {ident!r}, expected {F.FILE_IDENTIFIER!r}"
        )
    at = F.EXT_HEADER_OFFSET
    if data[at : at + 4] != F.EXT_HEADER_MAGIC:
        return len(data), 0
    if len(data) < at + F.EXT_HEADER_MIN_LENGTH:
        raise ProgramError(f"extended header at byte offset {at} is truncated")
    length, program_size, base = struct.unpack_from("<IQQ", data, at + 4)
    if length < F.EXT_HEADER_MIN_LENGTH:
        raise ProgramError(f"extended header length at byte offset {at + 4} is {length} < 24")
    if not at + length <= program_size <= len(data):
        raise ProgramError(
            f"extended header program_size at byte offset {at + 8} is {program_size}, "
            f"outside [{at + length}, {len(data)}] (file size)"
        )
    if base != 0 and not program_size <= base <= len(data):
        raise ProgramError(
            f"extended header segment_base_offset at byte offset {at + 16} is {base}, "
            f"outside [{program_size}, {len(data)}]"
        )
    return program_size, base


def parse(data: bytes, *, strict: bool = False) -> pm.Program:
    """Parse .pte bytes into a Program; raise ProgramError (ValueError) if malformed.

    strict: also require every field inside its table's declared size (true
    for files our writer produces, not always for ExecuTorch's own).
    """
    data = bytes(data)
    program_size, base = _header(data)
    root = Buf(data, program_size, strict).root()
    P = F.ProgramF
    for slot, name in (
        (P.constant_buffer, "constant_buffer"),
        (P.backend_delegate_data, "backend_delegate_data"),
        (P.mutable_data_segments, "mutable_data_segments"),
        (P.named_data, "named_data"),
    ):
        if root.tables(slot, name):
            raise ProgramError(f"Program.{name}: not supported (use constant/delegate segments)")

    # File segments, relative to the segment base.
    segments: list[bytes] = []
    for i, s in enumerate(root.tables(P.segments, "segments")):
        off = int(s.scalar(F.DataSegmentF.offset, "offset", "<Q"))
        size = int(s.scalar(F.DataSegmentF.size, "size", "<Q"))
        start = base + off
        if base == 0 or start + size > len(data):
            raise ProgramError(
                f"Program.segments[{i}]: bytes [{start}, {start + size}) are outside the "
                f"segment data [{base}, {len(data)}) of the file"
            )
        segments.append(data[start : start + size])

    const_seg = -1
    offsets: list[int] = []
    cs = root.table(P.constant_segment, "constant_segment")
    if cs is not None:
        offsets = cs.scalars(F.SubsegmentF.offsets, "offsets", "<Q")
        const_seg = int(cs.scalar(F.SubsegmentF.segment_index, "segment_index", "<I"))
        if offsets and not 0 <= const_seg < len(segments):
            raise ProgramError(
                f"Program.constant_segment.segment_index: {const_seg} but the file has "
                f"{len(segments)} segments"
            )
    if not offsets:
        raise ProgramError("Program.constant_segment.offsets: missing (need at least [0])")

    plans_and_segs = [_plan(p) for p in root.tables(P.execution_plan, "execution_plan")]
    plans = [p for p, _ in plans_and_segs]

    # Delegate blobs: every file segment except the constant one, in order.
    seg_map = {}
    segments_data = []
    for i, blob in enumerate(segments):
        if i != const_seg:
            seg_map[i] = len(segments_data)
            segments_data.append(blob)
    for pi, (plan, segs) in enumerate(plans_and_segs):
        for di, (d, seg) in enumerate(zip(plan.delegates, segs)):
            if seg not in seg_map:
                raise ProgramError(
                    f"execution_plan[{pi}].delegates[{di}].processed.index: {seg} is not a "
                    f"delegate segment (file has {len(segments)} segments, constants in "
                    f"{const_seg})"
                )
            d.segment_index = seg_map[seg]

    constants = _split_constants(segments[const_seg] if const_seg >= 0 else b"", offsets, plans)
    program = pm.Program(
        execution_plan=plans,
        constants=constants,
        segments_data=segments_data,
        version=int(root.scalar(P.version, "version", "<I")),
    )
    validate(program)
    return program


def _split_constants(seg: bytes, offsets: list[int], plans: list[pm.ExecutionPlan]) -> list[bytes]:
    """Cut the constant segment at its offsets, trimming padding to what tensors view."""
    need: dict[int, int] = {}
    for pi, plan in enumerate(plans):
        for vi, v in enumerate(plan.values):
            if isinstance(v, pm.Tensor) and v.data_buffer_idx > 0:
                if min(v.sizes, default=0) < 0 or v.storage_offset < 0:
                    raise ProgramError(
                        f"execution_plan[{pi}].values[{vi}] (Tensor): negative size or "
                        f"storage offset ({v.sizes}, {v.storage_offset})"
                    )
                if v.data_buffer_idx >= len(offsets):
                    raise ProgramError(
                        f"execution_plan[{pi}].values[{vi}] (Tensor).data_buffer_idx: "
                        f"{v.data_buffer_idx} but constant_segment has {len(offsets)} offsets"
                    )
                n = tensor_bytes_needed(v)
                need[v.data_buffer_idx] = max(need.get(v.data_buffer_idx, 0), n)
    out = []
    for i, start in enumerate(offsets):
        end = offsets[i + 1] if i + 1 < len(offsets) else len(seg)
        if not start <= end <= len(seg):
            raise ProgramError(
                f"Program.constant_segment.offsets[{i}]: {start} (next {end}) is not inside "
                f"the {len(seg)}-byte constant segment in increasing order"
            )
        blob = seg[start:end]
        if i in need:
            if need[i] > len(blob):
                raise ProgramError(
                    f"constant {i}: {len(blob)} bytes at constant segment offset {start}, "
                    f"but its tensors view {need[i]}"
                )
            blob = blob[: need[i]]
        out.append(blob)
    if out[0] != b"":
        # ExecuTorch's placeholder is empty; keep the model's convention.
        out[0] = b""
    return out


def load(path: str | os.PathLike[str]) -> pm.Program:
    """Read and parse a .pte file."""
    return parse(Path(path).read_bytes())
