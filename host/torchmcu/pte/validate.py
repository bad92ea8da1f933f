"""Structural checks of a Program, shared by the writer and the reader.

A .pte is trusted by nobody: the writer refuses to produce a file whose
indices point nowhere, and the reader refuses to hand one to tools. Each
error names the offending field as a path such as
`execution_plan[0].values[7] (Tensor).dim_order`.
"""

from __future__ import annotations

from . import program as pm

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
UINT32_MAX = (1 << 32) - 1


class ProgramError(ValueError):
    """A Program (in memory or in a file) is malformed."""


def _fail(path: str, msg: str) -> None:
    raise ProgramError(f"{path}: {msg}")


def _check_range(path: str, v: int, lo: int, hi: int) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        _fail(path, f"{v!r} is not an integer in [{lo}, {hi}]")


def tensor_bytes_needed(t: pm.Tensor) -> int:
    """Bytes a tensor views, counting its storage offset (in elements)."""
    from .program import ELEMENT_SIZE

    return (t.numel + t.storage_offset) * ELEMENT_SIZE[pm.ScalarType(t.scalar_type)]


def _check_tensor(path: str, t: pm.Tensor, program: pm.Program, plan: pm.ExecutionPlan) -> None:
    try:
        pm.ScalarType(t.scalar_type)
    except ValueError:
        _fail(f"{path}.scalar_type", f"unsupported scalar type {t.scalar_type!r}")
    for d, s in enumerate(t.sizes):
        _check_range(f"{path}.sizes[{d}]", s, 0, INT32_MAX)
    if sorted(t.dim_order) != list(range(len(t.sizes))):
        _fail(f"{path}.dim_order", f"{t.dim_order} is not a permutation of 0..{len(t.sizes) - 1}")
    _check_range(f"{path}.storage_offset", t.storage_offset, 0, INT32_MAX)
    _check_range(f"{path}.data_buffer_idx", t.data_buffer_idx, 0, len(program.constants) - 1)
    if t.data_buffer_idx > 0:
        have = len(program.constants[t.data_buffer_idx])
        need = tensor_bytes_needed(t)
        if have < need:
            _fail(
                f"{path}.data_buffer_idx",
                f"constant {t.data_buffer_idx} has {have} bytes, the tensor needs {need}",
            )
    if t.allocation is not None:
        a = t.allocation
        n = len(plan.non_const_buffer_sizes)
        if not isinstance(a.memory_id, int) or not 1 <= a.memory_id < n:
            _fail(
                f"{path}.allocation.memory_id",
                f"{a.memory_id!r} is not a planned buffer (non_const_buffer_sizes has {n} entries, "
                "id 0 is reserved)",
            )
        _check_range(f"{path}.allocation.offset", a.offset, 0, INT64_MAX)
        end = a.offset + tensor_bytes_needed(t)
        size = plan.non_const_buffer_sizes[a.memory_id]
        if end > size:
            _fail(
                f"{path}.allocation",
                f"bytes [{a.offset}, {end}) exceed buffer {a.memory_id} of {size} bytes",
            )


def _check_refs(path: str, items: list[int], values: list, kind: type, allow_none: bool) -> None:
    """List items are indices of other values of one kind (-1 = None where allowed)."""
    for j, item in enumerate(items):
        if allow_none and item == -1:
            continue
        _check_range(f"{path}.items[{j}]", item, 0, len(values) - 1)
        if not isinstance(values[item], kind):
            found = type(values[item]).__name__
            _fail(f"{path}.items[{j}]", f"value {item} is {found}, not {kind.__name__}")


def _check_value(path: str, v: object, program: pm.Program, plan: pm.ExecutionPlan) -> None:
    values = plan.values
    kind = type(v).__name__
    p = f"{path} ({kind})"
    if isinstance(v, pm.Tensor):
        _check_tensor(p, v, program, plan)
    elif isinstance(v, pm.Int):
        _check_range(f"{p}.value", v.value, INT64_MIN, INT64_MAX)
    elif isinstance(v, pm.Bool):
        if not isinstance(v.value, bool):
            _fail(f"{p}.value", f"{v.value!r} is not a bool")
    elif isinstance(v, pm.Double):
        if not isinstance(v.value, float):
            _fail(f"{p}.value", f"{v.value!r} is not a float")
    elif isinstance(v, pm.String):
        if not isinstance(v.value, str):
            _fail(f"{p}.value", f"{v.value!r} is not a str")
    elif isinstance(v, pm.IntList):
        _check_refs(p, v.items, values, pm.Int, allow_none=False)
    elif isinstance(v, pm.TensorList):
        _check_refs(p, v.items, values, pm.Tensor, allow_none=False)
    elif isinstance(v, pm.OptionalTensorList):
        _check_refs(p, v.items, values, pm.Tensor, allow_none=True)
    elif isinstance(v, pm.DoubleList):
        for j, item in enumerate(v.items):
            if not isinstance(item, float):
                _fail(f"{p}.items[{j}]", f"{item!r} is not a float")
    elif isinstance(v, pm.BoolList):
        for j, item in enumerate(v.items):
            if not isinstance(item, bool):
                _fail(f"{p}.items[{j}]", f"{item!r} is not a bool")
    elif not isinstance(v, pm.Null):
        _fail(path, f"unknown value kind {kind}")


def _check_plan(pi: int, plan: pm.ExecutionPlan, program: pm.Program) -> None:
    base = f"execution_plan[{pi}]"
    nv = len(plan.values)
    if not plan.name:
        _fail(f"{base}.name", "empty method name")
    for i, size in enumerate(plan.non_const_buffer_sizes):
        _check_range(f"{base}.non_const_buffer_sizes[{i}]", size, 0, INT64_MAX)
    for i, v in enumerate(plan.values):
        _check_value(f"{base}.values[{i}]", v, program, plan)
    for field in ("inputs", "outputs"):
        for j, idx in enumerate(getattr(plan, field)):
            _check_range(f"{base}.{field}[{j}]", idx, 0, nv - 1)
    for oi, op in enumerate(plan.operators):
        if not op.name:
            _fail(f"{base}.operators[{oi}].name", "empty operator name")
    for di, d in enumerate(plan.delegates):
        if not d.id:
            _fail(f"{base}.delegates[{di}].id", "empty backend id")
        _check_range(
            f"{base}.delegates[{di}].segment_index",
            d.segment_index,
            0,
            len(program.segments_data) - 1,
        )
    for ci, chain in enumerate(plan.chains):
        cp = f"{base}.chains[{ci}]"
        for field in ("inputs", "outputs"):
            for j, idx in enumerate(getattr(chain, field)):
                _check_range(f"{cp}.{field}[{j}]", idx, 0, nv - 1)
        for ii, ins in enumerate(chain.instructions):
            ip = f"{cp}.instructions[{ii}] ({type(ins).__name__})"
            if isinstance(ins, pm.KernelCall):
                _check_range(f"{ip}.op_index", ins.op_index, 0, len(plan.operators) - 1)
                for j, a in enumerate(ins.args):
                    _check_range(f"{ip}.args[{j}]", a, 0, nv - 1)
            elif isinstance(ins, pm.DelegateCall):
                _check_range(f"{ip}.delegate_index", ins.delegate_index, 0, len(plan.delegates) - 1)
                for j, a in enumerate(ins.args):
                    _check_range(f"{ip}.args[{j}]", a, 0, nv - 1)
            elif isinstance(ins, pm.MoveCall):
                _check_range(f"{ip}.move_from", ins.move_from, 0, nv - 1)
                _check_range(f"{ip}.move_to", ins.move_to, 0, nv - 1)
            elif isinstance(ins, pm.JumpFalseCall):
                _check_range(f"{ip}.cond_value_index", ins.cond_value_index, 0, nv - 1)
                _check_range(
                    f"{ip}.destination_instruction",
                    ins.destination_instruction,
                    0,
                    len(chain.instructions),  # == count: the jump ends the chain
                )
            elif isinstance(ins, pm.FreeCall):
                _check_range(f"{ip}.value_index", ins.value_index, 0, nv - 1)
            else:
                _fail(ip, "unknown instruction kind")


def validate(program: pm.Program) -> None:
    """Raise ProgramError (a ValueError) naming the first malformed field."""
    if not program.constants or program.constants[0] != b"":
        _fail("constants[0]", "must be the empty placeholder b''")
    _check_range("version", program.version, 0, UINT32_MAX)
    if not program.execution_plan:
        _fail("execution_plan", "no methods")
    for pi, plan in enumerate(program.execution_plan):
        _check_plan(pi, plan, program)


def referenced_constants(program: pm.Program) -> set[int]:
    """Constant indices that some tensor points at (index 0 excluded)."""
    used: set[int] = set()
    for plan in program.execution_plan:
        for v in plan.values:
            if isinstance(v, pm.Tensor) and v.data_buffer_idx > 0:
                used.add(v.data_buffer_idx)
    return used


def referenced_segments(program: pm.Program) -> set[int]:
    """Indices of Program.segments_data that some delegate points at."""
    return {d.segment_index for plan in program.execution_plan for d in plan.delegates}
