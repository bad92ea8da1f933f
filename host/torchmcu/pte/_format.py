"""Layout facts of the .pte container shared by the writer and the reader.

The numbers come from ExecuTorch 1.5.1's schema/program.fbs (a table's field
slots are numbered in declaration order; a union field takes two slots, its
type byte first) and from how exir/_serialize lays out the file. Keeping them
in one place means the writer and the reader cannot disagree.
"""

from __future__ import annotations

FILE_IDENTIFIER = b"ET12"

# Extended header, inserted right after the 4-byte root offset and the file
# identifier: magic, u32 length, u64 program_size, u64 segment_base_offset,
# u64 segment_data_size (all little endian).
EXT_HEADER_MAGIC = b"eh00"
EXT_HEADER_LENGTH = 32
EXT_HEADER_MIN_LENGTH = 24  # older files stop before segment_data_size
EXT_HEADER_OFFSET = 8
# The inserted header is padded to the largest force_align of the schema (16)
# so every alignment inside the flatbuffer survives the shift; 32 already is.
EXT_HEADER_PADDED = 32

SEGMENT_ALIGNMENT = 128  # start of every segment, relative to the file start
CONSTANT_ALIGNMENT = 16  # each constant inside the constant segment


def align_up(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


# --- field slots (declaration order in program.fbs) ------------------------


class ProgramF:
    version = 0
    execution_plan = 1
    constant_buffer = 2
    backend_delegate_data = 3
    segments = 4
    constant_segment = 5
    mutable_data_segments = 6
    named_data = 7
    COUNT = 8


class ExecutionPlanF:
    name = 0
    container_meta_type = 1
    values = 2
    inputs = 3
    outputs = 4
    chains = 5
    operators = 6
    delegates = 7
    non_const_buffer_sizes = 8
    non_const_buffer_device = 9
    COUNT = 10


class TensorF:
    scalar_type = 0
    storage_offset = 1
    sizes = 2
    dim_order = 3
    requires_grad = 4
    data_buffer_idx = 5
    allocation_info = 6
    layout = 7
    shape_dynamism = 8
    extra_tensor_info = 9
    COUNT = 10


class AllocationF:
    memory_id = 0
    memory_offset_low = 1
    memory_offset_high = 2
    COUNT = 3


class EValueF:
    val_type = 0
    val = 1
    COUNT = 2


class InstructionF:
    instr_args_type = 0
    instr_args = 1
    COUNT = 2


class ChainF:
    inputs = 0
    outputs = 1
    instructions = 2
    stacktrace = 3
    COUNT = 4


class OperatorF:
    name = 0
    overload = 1
    COUNT = 2


class BackendDelegateF:
    id = 0
    processed = 1
    compile_specs = 2
    COUNT = 3


class DataReferenceF:
    location = 0
    index = 1
    COUNT = 2


class CompileSpecF:
    key = 0
    value = 1
    COUNT = 2


class DataSegmentF:
    offset = 0
    size = 1
    COUNT = 2


class SubsegmentF:
    segment_index = 0
    offsets = 1
    COUNT = 2


# Tables with a single field in slot 0: Int, Bool, Double, String, the lists,
# FreeCall. Two-field instruction tables use slots 0 and 1 in schema order.


# --- union tags -------------------------------------------------------------


class KernelTypes:
    NONE = 0
    Null = 1
    Int = 2
    Bool = 3
    Double = 4
    Tensor = 5
    String = 6
    IntList = 7
    DoubleList = 8
    BoolList = 9
    TensorList = 10
    OptionalTensorList = 11


class InstructionTypes:
    NONE = 0
    KernelCall = 1
    DelegateCall = 2
    MoveCall = 3
    JumpFalseCall = 4
    FreeCall = 5


DATA_LOCATION_INLINE = 0
DATA_LOCATION_SEGMENT = 1
SHAPE_DYNAMISM_STATIC = 0
