"""In-memory model of an ExecuTorch program (the contents of a .pte).

This mirrors the tables of ExecuTorch's program.fbs closely enough that the
writer and reader are mechanical, while staying plain Python: the exporter
builds one of these, `writer.serialize` turns it into bytes, `reader.parse`
turns bytes back into it, and the reference interpreter executes it.

Conventions (the same as ExecuTorch's):
- `Program.constants[0]` is an empty placeholder; a tensor with
  `data_buffer_idx == 0` has no constant data.
- Planned memory: `non_const_buffer_sizes[0]` is 0 (reserved); memory id 1 is
  the activation arena. A planned tensor has `allocation` set.
- IntList/TensorList items are indices of other values in `values`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class ScalarType(IntEnum):
    BYTE = 0  # uint8
    CHAR = 1  # int8
    SHORT = 2
    INT = 3
    LONG = 4
    HALF = 5
    FLOAT = 6
    DOUBLE = 7
    BOOL = 11


ELEMENT_SIZE = {
    ScalarType.BYTE: 1,
    ScalarType.CHAR: 1,
    ScalarType.SHORT: 2,
    ScalarType.INT: 4,
    ScalarType.LONG: 8,
    ScalarType.HALF: 2,
    ScalarType.FLOAT: 4,
    ScalarType.DOUBLE: 8,
    ScalarType.BOOL: 1,
}


@dataclass
class Allocation:
    memory_id: int
    offset: int


@dataclass
class Tensor:
    scalar_type: ScalarType
    sizes: list[int]
    dim_order: list[int]
    data_buffer_idx: int = 0  # index into Program.constants; 0 = none
    allocation: Allocation | None = None
    storage_offset: int = 0

    @property
    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * ELEMENT_SIZE[ScalarType(self.scalar_type)]


@dataclass
class Null:
    pass


@dataclass
class Int:
    value: int


@dataclass
class Bool:
    value: bool


@dataclass
class Double:
    value: float


@dataclass
class String:
    value: str


@dataclass
class IntList:
    items: list[int]  # value indices of Int values


@dataclass
class DoubleList:
    items: list[float]


@dataclass
class BoolList:
    items: list[bool]


@dataclass
class TensorList:
    items: list[int]  # value indices of Tensor values


@dataclass
class OptionalTensorList:
    items: list[int]  # value indices; -1 for None


EValue = (
    Null
    | Int
    | Bool
    | Double
    | String
    | IntList
    | DoubleList
    | BoolList
    | TensorList
    | OptionalTensorList
    | Tensor
)


@dataclass
class Operator:
    name: str  # e.g. "cortex_m::quantized_linear"
    overload: str  # e.g. "out"


@dataclass
class KernelCall:
    op_index: int
    args: list[int]


@dataclass
class DelegateCall:
    delegate_index: int
    args: list[int]


@dataclass
class MoveCall:
    move_from: int
    move_to: int


@dataclass
class JumpFalseCall:
    cond_value_index: int
    destination_instruction: int


@dataclass
class FreeCall:
    value_index: int


Instruction = KernelCall | DelegateCall | MoveCall | JumpFalseCall | FreeCall


@dataclass
class Chain:
    inputs: list[int]
    outputs: list[int]
    instructions: list[Instruction]


@dataclass
class CompileSpec:
    key: str
    value: bytes


@dataclass
class BackendDelegate:
    id: str
    segment_index: int  # index into Program.segments_data (DataLocation SEGMENT)
    compile_specs: list[CompileSpec] = field(default_factory=list)


@dataclass
class ExecutionPlan:
    name: str
    values: list[EValue]
    inputs: list[int]
    outputs: list[int]
    chains: list[Chain]
    operators: list[Operator]
    delegates: list[BackendDelegate] = field(default_factory=list)
    non_const_buffer_sizes: list[int] = field(default_factory=lambda: [0])


@dataclass
class Program:
    execution_plan: list[ExecutionPlan]
    constants: list[bytes] = field(default_factory=lambda: [b""])
    # Extra data segments after the constant segment (delegate blobs).
    segments_data: list[bytes] = field(default_factory=list)
    version: int = 0
