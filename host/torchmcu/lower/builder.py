"""Incremental construction of one ExecutionPlan: values, constants, kernel calls, buffers.

Planned tensors are grouped by *buffer*: several tensor values (aliases such
as a flatten or a layout re-interpretation) can view the same arena bytes.
Buffer lifetimes are the instruction indices of their first and last use;
the memory planner turns them into arena offsets at the end.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from torchmcu.plan.check import TensorUse, check_plan
from torchmcu.pte import program as pm

NUMPY_SCALAR_TYPE = {
    np.dtype(np.bool_): pm.ScalarType.BOOL,
    np.dtype(np.int8): pm.ScalarType.CHAR,
    np.dtype(np.uint8): pm.ScalarType.BYTE,
    np.dtype(np.int32): pm.ScalarType.INT,
    np.dtype(np.int64): pm.ScalarType.LONG,
    np.dtype(np.float32): pm.ScalarType.FLOAT,
}

CONTIGUOUS_4D = [0, 1, 2, 3]
NHWC_DIM_ORDER = [0, 2, 3, 1]


def contiguous_order(rank: int) -> list[int]:
    return list(range(rank))


@dataclass
class Buffer:
    key: str
    nbytes: int
    first_use: int | None = None
    last_use: int | None = None
    pinned_start: bool = False  # program input: live from instruction 0
    pinned_end: bool = False  # program output: live to the last instruction


@dataclass
class PlanResult:
    arena_bytes: int
    lower_bound: int


@dataclass
class ProgramBuilder:
    """Accumulates the parts of a single-method Program."""

    values: list[pm.EValue] = field(default_factory=list)
    constants: list[bytes] = field(default_factory=lambda: [b""])
    operators: list[pm.Operator] = field(default_factory=list)
    instructions: list[pm.KernelCall | pm.DelegateCall] = field(default_factory=list)
    delegates: list[pm.BackendDelegate] = field(default_factory=list)
    segments: list[bytes] = field(default_factory=list)  # delegate blobs (Program.segments_data)
    buffers: dict[str, Buffer] = field(default_factory=dict)
    # value index -> buffer key, for every planned tensor value
    tensor_buffer: dict[int, str] = field(default_factory=dict)
    _const_index: dict[bytes, int] = field(default_factory=dict)
    _op_index: dict[tuple[str, str], int] = field(default_factory=dict)

    # -- scalar values ---------------------------------------------------------------------
    def add(self, value: pm.EValue) -> int:
        self.values.append(value)
        return len(self.values) - 1

    def int_(self, v: int) -> int:
        return self.add(pm.Int(int(v)))

    def double(self, v: float) -> int:
        return self.add(pm.Double(float(v)))

    def bool_(self, v: bool) -> int:
        return self.add(pm.Bool(bool(v)))

    def none(self) -> int:
        return self.add(pm.Null())

    def int_list(self, items: Sequence[int]) -> int:
        return self.add(pm.IntList([self.int_(x) for x in items]))

    # -- tensors -------------------------------------------------------------------------------
    def constant(self, array: np.ndarray, sizes: Sequence[int] | None = None) -> int:
        """A constant tensor whose bytes are `array` in C order (identical bytes are shared)."""
        arr = np.ascontiguousarray(array)
        st = NUMPY_SCALAR_TYPE[arr.dtype]
        data = arr.tobytes()
        digest = hashlib.sha256(data).digest() + bytes([int(st)])
        idx = self._const_index.get(digest)
        if idx is None:
            self.constants.append(data)
            idx = len(self.constants) - 1
            self._const_index[digest] = idx
        shape = list(sizes) if sizes is not None else list(arr.shape)
        return self.add(pm.Tensor(st, shape, contiguous_order(len(shape)), data_buffer_idx=idx))

    def new_buffer(self, key_hint: str, nbytes: int) -> str:
        key = key_hint
        i = 1
        while key in self.buffers:
            key = f"{key_hint}#{i}"
            i += 1
        self.buffers[key] = Buffer(key, int(nbytes))
        return key

    def planned(
        self,
        buffer: str,
        scalar_type: pm.ScalarType,
        sizes: Sequence[int],
        dim_order: Sequence[int] | None = None,
    ) -> int:
        """A tensor value viewing (the start of) `buffer` in the arena."""
        sizes = [int(s) for s in sizes]
        order = list(dim_order) if dim_order is not None else contiguous_order(len(sizes))
        t = pm.Tensor(scalar_type, sizes, order, allocation=pm.Allocation(1, 0))
        need = t.nbytes
        if need > self.buffers[buffer].nbytes:
            raise AssertionError(f"tensor of {need} bytes does not fit buffer {buffer}")
        vi = self.add(t)
        self.tensor_buffer[vi] = buffer
        return vi

    def tensor(self, vi: int) -> pm.Tensor:
        t = self.values[vi]
        assert isinstance(t, pm.Tensor)
        return t

    # -- instructions -------------------------------------------------------------------------
    def operator(self, name: str, overload: str = "out") -> int:
        key = (name, overload)
        if key not in self._op_index:
            self.operators.append(pm.Operator(name, overload))
            self._op_index[key] = len(self.operators) - 1
        return self._op_index[key]

    def call(self, name: str, args: Sequence[int], out: int) -> int:
        """Append a kernel call; `args` exclude the out tensor, which is appended twice."""
        index = len(self.instructions)
        full = list(args) + [out, out]
        self.instructions.append(pm.KernelCall(self.operator(name), full))
        self.touch_values(full, index)
        return index

    def touch_values(self, value_indices: Sequence[int], index: int) -> None:
        """Instruction `index` uses these values: every planned tensor among them, and every
        item of a tensor list among them (aten::cat reads its inputs through one), lives there."""
        for vi in self.referenced_tensors(value_indices):
            self.touch(self.tensor_buffer[vi], index)

    def referenced_tensors(self, value_indices: Sequence[int]) -> list[int]:
        """The planned tensor values among value_indices, tensor-list items included."""
        found: list[int] = []
        for vi in value_indices:
            value = self.values[vi] if 0 <= vi < len(self.values) else None
            items = (
                value.items if isinstance(value, (pm.TensorList, pm.OptionalTensorList)) else [vi]
            )
            found += [i for i in items if i in self.tensor_buffer]
        return found

    def touch(self, key: str, index: int) -> None:
        b = self.buffers[key]
        b.first_use = index if b.first_use is None else min(b.first_use, index)
        b.last_use = index if b.last_use is None else max(b.last_use, index)

    def delegate(self, backend_id: str, blob: bytes, args: Sequence[int]) -> pm.DelegateCall:
        """A DelegateCall to a new BackendDelegate whose processed data is `blob` (not yet
        placed in `instructions`: the partitioner orders them)."""
        self.segments.append(bytes(blob))
        self.delegates.append(pm.BackendDelegate(backend_id, len(self.segments) - 1))
        return pm.DelegateCall(len(self.delegates) - 1, list(args))

    def recompute_uses(self) -> None:
        """Buffer lifetimes from the current instruction list (after the partitioner replaced
        kernel calls by delegate calls): a buffer no instruction uses drops out of the plan."""
        for b in self.buffers.values():
            b.first_use = b.last_use = None
        for index, ins in enumerate(self.instructions):
            self.touch_values(instruction_values(ins), index)

    # -- finishing ------------------------------------------------------------------------------
    def finish(
        self,
        inputs: list[int],
        outputs: list[int],
        planner: Callable,
        request_type: type,
        name: str = "forward",
    ) -> tuple[pm.Program, PlanResult]:
        """Plan the arena, fix allocations, and return the Program."""
        end = max(len(self.instructions) - 1, 0)
        for vi in inputs:
            key = self.tensor_buffer.get(vi)
            if key is not None:
                self.buffers[key].pinned_start = True
        for vi in outputs:
            key = self.tensor_buffer.get(vi)
            if key is not None:
                self.buffers[key].pinned_end = True
        requests = []
        for b in self.buffers.values():
            first = 0 if b.pinned_start or b.first_use is None else b.first_use
            last = end if b.pinned_end or b.last_use is None else b.last_use
            if b.first_use is None and not (b.pinned_start or b.pinned_end):
                continue  # never used by any instruction: not part of the program
            requests.append(request_type(b.key, b.nbytes, min(first, last), last))
        plan = planner(requests)
        for vi, key in self.tensor_buffer.items():
            t = self.tensor(vi)
            if key in plan.offsets:
                t.allocation = pm.Allocation(1, int(plan.offsets[key]))
        ep = pm.ExecutionPlan(
            name=name,
            values=self.values,
            inputs=list(inputs),
            outputs=list(outputs),
            chains=[pm.Chain(list(inputs), list(outputs), list(self.instructions))],
            operators=self.operators,
            delegates=list(self.delegates),
            non_const_buffer_sizes=[0, int(plan.arena_bytes)],
        )
        self.check_plan(inputs, outputs, int(plan.arena_bytes))
        program = pm.Program([ep], constants=self.constants, segments_data=list(self.segments))
        return program, PlanResult(int(plan.arena_bytes), int(plan.lower_bound))

    def check_plan(self, inputs: list[int], outputs: list[int], arena_bytes: int) -> None:
        """PlanError unless no instruction can see a tensor's bytes overwritten by another
        buffer (torchmcu.plan.check), with the offsets the program's tensors now carry."""

        def uses(value_indices: Sequence[int]) -> list[TensorUse]:
            found = []
            for vi in self.referenced_tensors(value_indices):
                t = self.tensor(vi)
                offset = t.allocation.offset if t.allocation is not None else 0
                found.append(TensorUse(self.tensor_buffer[vi], offset, t.nbytes))
            return found

        steps = [uses(instruction_values(ins)) for ins in self.instructions]
        check_plan(steps, uses(inputs), uses(outputs), arena_bytes, self.describe_instruction)

    def describe_instruction(self, index: int) -> str:
        """'instruction 7 (aten::cat.out)', as the runtime's errors name it."""
        ins = self.instructions[index]
        if isinstance(ins, pm.KernelCall):
            op = self.operators[ins.op_index]
            what = f"{op.name}.{op.overload}"
        elif isinstance(ins, pm.DelegateCall):
            what = f"delegate {self.delegates[ins.delegate_index].id}"
        else:
            what = type(ins).__name__
        return f"instruction {index} ({what})"


def instruction_values(ins: object) -> list[int]:
    """The value indices an instruction reads or writes (control flow included)."""
    if isinstance(ins, pm.MoveCall):
        return [ins.move_from, ins.move_to]
    if isinstance(ins, pm.JumpFalseCall):
        return [ins.cond_value_index]
    return list(getattr(ins, "args", []))


def nbytes_of(scalar_type: pm.ScalarType, sizes: Sequence[int]) -> int:
    n = 1
    for s in sizes:
        n *= int(s)
    return n * pm.ELEMENT_SIZE[scalar_type]
