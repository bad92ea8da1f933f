"""Carving a set of KernelCalls out of a lowered Program into a self-contained sub-Program.

An NPU subgraph is handed around as an ordinary Program (one plan, its own values,
constants and memory plan), so the reference interpreter and the C host runtime run
it unchanged and the TOSA lowering sees exactly what the CPU kernels would compute.

Tensors are identified by *storage*, not by value index: a flatten or layout
re-interpretation is a second tensor value viewing the same arena bytes with no
instruction between them. `trace_storage` replays a plan's writes to find, for every
planned tensor an instruction reads, which earlier write (instruction output or
program input) produced its bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torchmcu.ops import views
from torchmcu.pte import program as pm

# A storage is identified by its producer: ("in", k) for program input k, ("op", i) for
# the out tensor of instruction i.
Storage = tuple[str, int]


class CarveError(ValueError):
    """A sub-Program cannot be carved (bad indices, aliasing we cannot follow, non-convex set)."""


@dataclass
class Carved:
    """A sub-Program and the parent's value indices of its inputs and outputs (same order)."""

    program: pm.Program
    inputs: list[int]
    outputs: list[int]


@dataclass
class StorageTrace:
    """For each instruction, the storage behind each planned tensor argument it reads;
    the storage and value index each instruction writes; and what each plan output shows."""

    # instruction -> {arg position, or (position, item) of a tensor list's item: storage}
    reads: dict[int, dict[ReadPos, Storage]]
    writes: dict[int, tuple[Storage, int]]  # instruction -> (storage, out value index)
    outputs: list[Storage]  # storage behind each plan output
    value_of: dict[Storage, int]  # storage -> value index of its producer's tensor


ReadPos = int | tuple[int, int]  # an argument's position, or a tensor list argument's item


def read_value(plan: pm.ExecutionPlan, args: Sequence[int], pos: ReadPos) -> int:
    """The value index a read position of a call with `args` names (a tensor list's item for
    a pair)."""
    if isinstance(pos, tuple):
        items = plan.values[args[pos[0]]]
        assert isinstance(items, pm.TensorList)
        return items.items[pos[1]]
    return args[pos]


def is_scratch(t: pm.Tensor) -> bool:
    """Planned uint8 tensors passed to a kernel are its scratch buffer (never data)."""
    return t.scalar_type == pm.ScalarType.BYTE and t.data_buffer_idx == 0


def _planned(values: Sequence[pm.EValue], vi: int) -> pm.Tensor | None:
    v = values[vi]
    if isinstance(v, pm.Tensor) and v.data_buffer_idx == 0 and v.allocation is not None:
        return v
    return None


def _span(t: pm.Tensor) -> tuple[int, int]:
    assert t.allocation is not None
    start = t.allocation.offset + t.storage_offset
    return start, start + t.nbytes


def trace_storage(plan: pm.ExecutionPlan) -> StorageTrace:
    """Replays `plan`'s writes in order; every planned data read must view exactly the
    bytes of the latest write overlapping it."""
    live: list[tuple[int, int, Storage]] = []  # (start, end, storage), latest last
    value_of: dict[Storage, int] = {}
    for k, vi in enumerate(plan.inputs):
        t = _planned(plan.values, vi)
        if t is not None:
            live.append((*_span(t), ("in", k)))
            value_of[("in", k)] = vi

    def resolve(vi: int, where: str) -> Storage:
        t = _planned(plan.values, vi)
        assert t is not None
        start, end = _span(t)
        for s, e, storage in reversed(live):
            if s < end and start < e:
                if (s, e) != (start, end):
                    raise CarveError(
                        f"{where}: value {vi} views bytes [{start}, {end}) that only partly "
                        f"overlap the tensor written there ([{s}, {e}))"
                    )
                return storage
        raise CarveError(f"{where}: value {vi} reads arena bytes [{start}, {end}) nothing wrote")

    reads: dict[int, dict[ReadPos, Storage]] = {}
    writes: dict[int, tuple[Storage, int]] = {}
    instructions = plan.chains[0].instructions if plan.chains else []
    for i, instr in enumerate(instructions):
        if isinstance(instr, (pm.FreeCall, pm.JumpFalseCall)):
            continue  # control flow: the straight-line replay covers every branch's writes
        if isinstance(instr, pm.MoveCall):  # reads its source, shows the bytes as its target
            reads[i] = {}
            if _planned(plan.values, instr.move_from) is not None:
                reads[i][0] = resolve(instr.move_from, f"instruction {i} (MoveCall)")
            if _planned(plan.values, instr.move_to) is not None:
                live.append((*_span(plan.values[instr.move_to]), ("op", i)))  # type: ignore[arg-type]
                writes[i] = (("op", i), instr.move_to)
                value_of[("op", i)] = instr.move_to
            continue
        if isinstance(instr, pm.KernelCall) and _raw_loop_op(plan, instr):
            reads[i] = {}
            args = instr.args
            written = args[0] if _raw_loop_op(plan, instr) == "write0" else None
            for pos, vi in enumerate(args):
                if vi != written and _planned(plan.values, vi) is not None:
                    reads[i][pos] = resolve(vi, f"instruction {i}")
            if written is not None and _planned(plan.values, written) is not None:
                live.append((*_span(plan.values[written]), ("op", i)))  # type: ignore[arg-type]
                writes[i] = (("op", i), written)
                value_of[("op", i)] = written
            continue
        if not isinstance(instr, pm.KernelCall):
            raise CarveError(
                f"instruction {i}: {type(instr).__name__} cannot be traced (KernelCalls only)"
            )
        where = f"instruction {i}"
        reads[i] = {}
        returned = plan.values[instr.args[-1]]
        if isinstance(returned, pm.TensorList):  # a multi-output op: outs, then their list
            outs = list(returned.items)
            ins = instr.args[: len(instr.args) - 1 - len(outs)]
        else:
            outs, ins = [instr.args[-2]], instr.args[:-2]
        for pos, vi in enumerate(ins):
            t = _planned(plan.values, vi)
            if t is not None and not is_scratch(t):
                reads[i][pos] = resolve(vi, where)
            items = plan.values[vi]
            if isinstance(items, pm.TensorList):  # its items by (position, item index)
                for k, item in enumerate(items.items):
                    if _planned(plan.values, item) is not None:
                        reads[i][(pos, k)] = resolve(item, where)
        for out in outs:  # the first out stands for the call (only float CPU ops have several)
            t = _planned(plan.values, out)
            if t is None:
                raise CarveError(f"{where}: out value {out} is not a planned tensor")
            live.append((*_span(t), ("op", i)))
        out = outs[0]
        writes[i] = (("op", i), out)
        value_of[("op", i)] = out
    outputs = [resolve(vi, f"plan output {k}") for k, vi in enumerate(plan.outputs)]
    return StorageTrace(reads, writes, outputs, value_of)


# A loop op's `call` (torchmcu/ops/defs/control.py) -> how it touches tensor bytes
_LOOP_ACCESS = {"loop_copy_index": "write0", "loop_scalar": "read"}
_CONTROL = views.control_ops()


def _raw_loop_op(plan: pm.ExecutionPlan, instr: pm.KernelCall) -> str | None:
    """ExecuTorch's loop ops take their arguments as the schema has them (no out tensor passed
    twice): et_copy_index writes into its first argument, the scalar ops touch no tensor bytes
    (select_copy passes its out twice, as an ordinary call)."""
    op = plan.operators[instr.op_index]
    definition = _CONTROL.get((op.name, op.overload))
    return None if definition is None else _LOOP_ACCESS.get(definition.call)


def carve(program: pm.Program, instruction_indices: list[int]) -> Carved:
    """The KernelCalls `instruction_indices` of program's first plan as a self-contained
    Program. Inputs: storages the calls read but do not produce (in order of first read);
    outputs: storages they produce that a call outside the set or a program output reads
    (in order of production)."""
    if not program.execution_plan:
        raise CarveError("program has no execution plan")
    plan = program.execution_plan[0]
    instructions = plan.chains[0].instructions
    chosen = sorted({int(i) for i in instruction_indices})
    if not chosen:
        raise CarveError("no instructions to carve")
    if len(chosen) != len(instruction_indices):
        raise CarveError(f"duplicate instruction indices in {list(instruction_indices)}")
    for i in chosen:
        if not 0 <= i < len(instructions) or not isinstance(instructions[i], pm.KernelCall):
            raise CarveError(f"instruction {i} is not a KernelCall of plan {plan.name!r}")
    trace = trace_storage(plan)
    inside = set(chosen)
    _check_convex(trace, inside, len(instructions))

    produced = {trace.writes[i][0] for i in chosen}
    needed_outside: set[Storage] = set(trace.outputs)
    for i, reads in trace.reads.items():
        if i not in inside:
            needed_outside.update(reads.values())
    builder = _SubBuilder(program, plan)
    inputs: list[int] = []
    parent_inputs: list[int] = []
    for i in chosen:
        for pos, storage in trace.reads[i].items():
            if storage not in produced and storage not in builder.storage_buffer:
                vi = read_value(plan, instructions[i].args, pos)
                builder.new_storage(storage, plan.values[vi])
                inputs.append(builder.view(storage, vi))
                parent_inputs.append(vi)
        builder.copy_call(i, instructions[i], trace.reads[i], trace.writes[i][0])
    outputs: list[int] = []
    parent_outputs: list[int] = []
    for i in chosen:
        storage, out_vi = trace.writes[i]
        if storage in needed_outside:
            outputs.append(builder.view(storage, out_vi))
            parent_outputs.append(out_vi)
    if not outputs:
        raise CarveError(f"instructions {chosen} produce nothing read outside them")
    sub = builder.finish(inputs, outputs, plan.name)
    return Carved(sub, parent_inputs, parent_outputs)


def _check_convex(trace: StorageTrace, inside: set[int], count: int) -> None:
    """A call outside the set that depends on the set must not feed the set again (the
    subgraph runs as one delegate call)."""
    tainted: set[int] = set()  # outside instructions depending on an inside one
    for i in range(count):
        if i not in trace.reads:
            continue
        sources = {s[1] for s in trace.reads[i].values() if s[0] == "op"}
        if i in inside:
            bad = sources & tainted
            if bad:
                raise CarveError(
                    f"instruction {i} reads the result of instruction {min(bad)}, which is "
                    "outside the set but depends on it: the set is not convex"
                )
        elif sources & (inside | tainted):
            tainted.add(i)


class _SubBuilder:
    """Copies values, constants and calls into a new single-plan Program."""

    def __init__(self, program: pm.Program, plan: pm.ExecutionPlan) -> None:
        from torchmcu.lower.builder import ProgramBuilder

        self.parent = program
        self.plan = plan
        self.b = ProgramBuilder()
        self.storage_buffer: dict[Storage, str] = {}
        self._views: dict[tuple[Storage, int], int] = {}
        self._const: dict[int, int] = {}
        self._scalars: dict[int, int] = {}

    def new_storage(self, storage: Storage, value: pm.EValue) -> None:
        assert isinstance(value, pm.Tensor)
        self.storage_buffer[storage] = self.b.new_buffer(f"{storage[0]}{storage[1]}", value.nbytes)

    def view(self, storage: Storage, vi: int) -> int:
        """The sub-Program value viewing `storage` as parent value `vi` does."""
        key = (storage, vi)
        if key not in self._views:
            t = self.plan.values[vi]
            assert isinstance(t, pm.Tensor)
            self._views[key] = self.b.planned(
                self.storage_buffer[storage], pm.ScalarType(t.scalar_type), t.sizes, t.dim_order
            )
        return self._views[key]

    def _constant(self, vi: int) -> int:
        if vi not in self._const:
            t = self.plan.values[vi]
            assert isinstance(t, pm.Tensor)
            if t.data_buffer_idx >= len(self.parent.constants):
                raise CarveError(f"value {vi}: constant buffer {t.data_buffer_idx} does not exist")
            self.b.constants.append(self.parent.constants[t.data_buffer_idx])
            self._const[vi] = self.b.add(
                pm.Tensor(
                    t.scalar_type,
                    list(t.sizes),
                    list(t.dim_order),
                    data_buffer_idx=len(self.b.constants) - 1,
                    storage_offset=t.storage_offset,
                )
            )
        return self._const[vi]

    def _scalar(self, vi: int) -> int:
        if vi not in self._scalars:
            v = self.plan.values[vi]
            if isinstance(v, pm.IntList):
                items = [self._scalar(k) for k in v.items]
                self._scalars[vi] = self.b.add(pm.IntList(items))
            elif isinstance(v, (pm.TensorList, pm.OptionalTensorList)):
                raise CarveError(f"value {vi}: tensor lists are not supported in a carved call")
            else:
                self._scalars[vi] = self.b.add(type(v)(**vars(v)))
        return self._scalars[vi]

    def copy_call(
        self, index: int, call: pm.KernelCall, reads: dict[ReadPos, Storage], out: Storage
    ) -> None:
        op = self.plan.operators[call.op_index]
        new_index = len(self.b.instructions)
        args: list[int] = []
        for pos, vi in enumerate(call.args[:-2]):
            v = self.plan.values[vi]
            if pos in reads:
                args.append(self.view(reads[pos], vi))
            elif isinstance(v, pm.TensorList) and all(
                (pos, k) in reads for k in range(len(v.items))
            ):
                views = [self.view(reads[(pos, k)], item) for k, item in enumerate(v.items)]
                args.append(self.b.add(pm.TensorList(views)))
            elif isinstance(v, pm.Tensor) and v.data_buffer_idx > 0:
                args.append(self._constant(vi))
            elif isinstance(v, pm.Tensor) and v.allocation is not None:  # scratch: its own buffer
                key = self.b.new_buffer(f"scratch{index}", v.nbytes)
                args.append(self.b.planned(key, pm.ScalarType(v.scalar_type), v.sizes, v.dim_order))
            elif isinstance(v, pm.Tensor):
                raise CarveError(
                    f"instruction {index}: value {vi} has neither data nor an allocation"
                )
            else:
                args.append(self._scalar(vi))
        self.new_storage(out, self.plan.values[call.args[-2]])
        out_vi = self.view(out, call.args[-2])
        args += [out_vi, out_vi]
        self.b.instructions.append(pm.KernelCall(self.b.operator(op.name, op.overload), args))
        self.b.touch_values(args, new_index)

    def finish(self, inputs: list[int], outputs: list[int], name: str) -> pm.Program:
        from torchmcu.plan import BufferRequest, plan_memory

        program, _ = self.b.finish(inputs, outputs, plan_memory, BufferRequest, name=name)
        return program
