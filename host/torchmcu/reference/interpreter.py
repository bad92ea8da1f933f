"""Reference interpreter: runs a Program's KernelCalls with the reference operators.

The planned activation memory is simulated as one byte buffer: every planned
tensor is read from and written to its allocation offset, so an overlapping or
mis-sized memory plan shows up as wrong numbers, as it would on the device.
Inputs and outputs are numpy arrays in logical (sizes) order.

A DelegateCall (an Ethos-U subgraph) runs through `delegate_fn(delegate_index, args)`: it gets
every argument tensor of the call in logical order and returns the outputs, which are written to
the arguments just before the trailing scratch tensor (our [inputs..., outputs..., scratch]
convention). torchmcu.npu.hostrun.subprogram_delegate_fn runs the carved sub-Programs through
this same interpreter, so an NPU program's reference result is our integer semantics throughout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from torchmcu.ops import views
from torchmcu.ops.core import ArgError, Bound, OpDef, scalar_value
from torchmcu.pte import program as pm
from torchmcu.reference import ops_layout
from torchmcu.reference.float_calls import FLOAT_OPS, run_float_call

_DTYPES = {
    pm.ScalarType.BYTE: np.uint8,
    pm.ScalarType.CHAR: np.int8,
    pm.ScalarType.SHORT: np.int16,
    pm.ScalarType.INT: np.int32,
    pm.ScalarType.LONG: np.int64,
    pm.ScalarType.FLOAT: np.float32,
    pm.ScalarType.DOUBLE: np.float64,
    pm.ScalarType.BOOL: np.bool_,
}


class InterpreterError(RuntimeError):
    """A program the reference interpreter cannot run, with the instruction that failed."""


def _physical_shape(t: pm.Tensor) -> tuple[int, ...]:
    return tuple(t.sizes[d] for d in t.dim_order)


class _Memory:
    """Tensor storage of one method: the arena bytes and the program's constants."""

    def __init__(self, program: pm.Program, plan: pm.ExecutionPlan) -> None:
        self.program = program
        self.plan = plan
        self.values = list(plan.values)  # MoveCall may rebind scalar values; never touch the Program
        size = plan.non_const_buffer_sizes[1] if len(plan.non_const_buffer_sizes) > 1 else 0
        self.arena = bytearray(size)

    def tensor(self, index: int) -> pm.Tensor:
        value = self.values[index]
        if not isinstance(value, pm.Tensor):
            raise InterpreterError(f"value {index} is {type(value).__name__}, not a Tensor")
        return value

    def _span(self, index: int) -> tuple[bytes | bytearray, int]:
        t = self.tensor(index)
        if t.data_buffer_idx > 0:
            if t.data_buffer_idx >= len(self.program.constants):
                raise InterpreterError(f"value {index}: constant buffer {t.data_buffer_idx} does not exist")
            data = self.program.constants[t.data_buffer_idx]
            if len(data) < t.nbytes:
                raise InterpreterError(f"value {index}: constant buffer holds {len(data)} bytes, needs {t.nbytes}")
            return data, 0
        if t.allocation is None:
            raise InterpreterError(f"value {index}: tensor has neither constant data nor a planned allocation")
        if t.allocation.memory_id != 1:
            raise InterpreterError(f"value {index}: memory id {t.allocation.memory_id} is not the arena (1)")
        end = t.allocation.offset + t.nbytes
        if t.allocation.offset < 0 or end > len(self.arena):
            raise InterpreterError(f"value {index}: bytes [{t.allocation.offset}, {end}) outside the arena "
                                   f"of {len(self.arena)} bytes")
        return self.arena, t.allocation.offset

    def read(self, index: int) -> np.ndarray:
        """The tensor's elements in memory order, shaped by its physical (dim-ordered) sizes."""
        t = self.tensor(index)
        buf, offset = self._span(index)
        arr = np.frombuffer(bytes(buf[offset : offset + t.nbytes]), dtype=_DTYPES[pm.ScalarType(t.scalar_type)])
        return arr.reshape(_physical_shape(t)).copy()

    def write(self, index: int, physical: np.ndarray) -> None:
        t = self.tensor(index)
        if t.data_buffer_idx > 0:
            raise InterpreterError(f"value {index}: cannot write a constant tensor")
        expected = _physical_shape(t)
        dtype = _DTYPES[pm.ScalarType(t.scalar_type)]
        if tuple(physical.shape) != expected or physical.dtype != dtype:
            raise InterpreterError(f"value {index}: result {physical.dtype}{list(physical.shape)} does not fit "
                                   f"tensor {np.dtype(dtype)}{list(expected)}")
        buf, offset = self._span(index)
        buf[offset : offset + t.nbytes] = np.ascontiguousarray(physical).tobytes()

    def read_logical(self, index: int) -> np.ndarray:
        t = self.tensor(index)
        return np.transpose(self.read(index), np.argsort(t.dim_order))

    def write_logical(self, index: int, logical: np.ndarray) -> None:
        t = self.tensor(index)
        # copy(order="C"), not ascontiguousarray, which makes a 0-d array 1-d
        self.write(index, np.transpose(logical, t.dim_order).copy(order="C"))


class _Call:
    """Argument access for one KernelCall."""

    def __init__(self, memory: _Memory, args: Sequence[int]) -> None:
        self.memory = memory
        self.args = list(args)
        self.values = memory.values

    def scalar(self, i: int):
        try:
            return scalar_value(self.values, self.values[self.args[i]])
        except ValueError as exc:
            raise InterpreterError(f"argument {i}: {exc}") from None

    def tensor_meta(self, i: int) -> pm.Tensor:
        return self.memory.tensor(self.args[i])

    def physical(self, i: int) -> np.ndarray | None:
        if isinstance(self.values[self.args[i]], pm.Null):
            return None
        return self.memory.read(self.args[i])

    def nhwc(self, i: int, nhwc_sizes: bool) -> np.ndarray:
        t = self.tensor_meta(i)
        order = (0, 1, 2, 3) if nhwc_sizes else (0, 2, 3, 1)
        if len(t.sizes) != 4 or not ops_layout.laid_out_as(t.sizes, t.dim_order, order):
            raise InterpreterError(f"argument {i}: expected a 4-D activation with NHWC memory, got sizes "
                                   f"{t.sizes} dim_order {t.dim_order}")
        n, a, b, c = t.sizes
        return self.memory.read(self.args[i]).reshape((n, a, b, c) if nhwc_sizes else (n, b, c, a))

    def write_out(self, result: np.ndarray) -> None:
        self.memory.write(self.args[-2], np.ascontiguousarray(result).reshape(_physical_shape(self.tensor_meta(-2))))


_Handler = Callable[[_Call], np.ndarray]


class _Bound(Bound):
    """The interpreter's named view of one KernelCall of a registry op: memory reads by
    argument name and the out's layout (reference(b) returns the physical out)."""

    def __init__(self, op: OpDef, call: _Call) -> None:
        super().__init__(op, call.values, call.args)
        self.call = call

    def physical(self, name: str) -> np.ndarray | None:
        """The tensor's elements in memory order (None for a Null)."""
        return self.call.physical(self.index(name))

    def nhwc(self, name: str, nhwc_sizes: bool) -> np.ndarray:
        return self.call.nhwc(self.index(name), nhwc_sizes)

    data = physical  # the check reads values from memory

    def logical(self, name: str) -> np.ndarray:
        """The tensor in logical (sizes) order."""
        return self.call.memory.read_logical(self.value_index(name))

    def logical_list(self, name: str) -> list[np.ndarray]:
        """The tensors of a TensorList argument, each in logical order."""
        v = self.value(name)
        if not isinstance(v, pm.TensorList):
            raise self.reject(name, f"expected a TensorList, got {type(v).__name__}")
        return [self.call.memory.read_logical(k) for k in v.items]

    def to_out(self, logical: np.ndarray, out: str | None = None) -> np.ndarray:
        """A logical result in the memory order of the out tensor `out` (the first out)."""
        return np.transpose(logical, self.tensor(out or self.op.schema.outs[0].name).dim_order)


def _from_registry(op: OpDef) -> _Handler:
    def handler(call: _Call) -> np.ndarray:
        bound = _Bound(op, call)
        try:
            bound.check()
        except ArgError as exc:
            raise InterpreterError(str(exc)) from exc
        return op.reference(bound)  # type: ignore[misc]

    return handler


# A dict read at call time (tests monkeypatch it): every int8 operator's reference.
_HANDLERS: dict[str, _Handler] = views.references(_from_registry)


# Number of schema arguments (including `out`) of each operator.
_SCHEMA_ARGS: dict[str, int] = views.schema_args()

# (name, overload) -> definition of the torch.cond predicate and torch.map loop ops
_CONTROL: dict[tuple[str, str], OpDef] = views.control_ops()


def _run_control(memory: _Memory, plan: pm.ExecutionPlan, op: OpDef, args: Sequence[int]) -> None:
    """A control op's call, its arguments as its `call` passes them: the reference's result
    goes to the out tensor ("out", "loop_select"), into self ("loop_copy_index") or into the
    returned scalar value ("loop_scalar")."""
    if len(args) != op.schema.n_call_args:
        raise InterpreterError(f"{op.key}: {len(args)} arguments, expected {op.schema.n_call_args}")
    if any(not 0 <= a < len(plan.values) for a in args):
        raise InterpreterError("argument value index out of range")
    if op.call in ("out", "loop_select") and args[-1] != args[-2]:
        raise InterpreterError("the returned value is not the out tensor")
    call = _Call(memory, args)
    result = _from_registry(op)(call)
    if op.call == "loop_scalar":
        memory.values[args[-1]] = result
    elif op.call == "loop_copy_index":
        memory.write(args[op.schema.A.self], result)
    else:
        call.write_out(result)


def _run_kernel(memory: _Memory, plan: pm.ExecutionPlan, call: pm.KernelCall) -> None:
    if not 0 <= call.op_index < len(plan.operators):
        raise InterpreterError(f"operator index {call.op_index} out of range")
    op = plan.operators[call.op_index]
    control = _CONTROL.get((op.name, op.overload))
    if control is not None:  # torch.cond predicates, torch.map loops
        _run_control(memory, plan, control, call.args)
        return
    if op.name in FLOAT_OPS and op.overload == "out":  # portable fp32 ops (float regions)
        if any(not 0 <= a < len(plan.values) for a in call.args):
            raise InterpreterError("argument value index out of range")
        run_float_call(lambda definition: _Bound(definition, _Call(memory, call.args)), op.name)
        return
    handler = _HANDLERS.get(op.name)
    if handler is None or op.overload != "out":
        raise InterpreterError(f"operator {op.name}.{op.overload} has no reference implementation")
    if len(call.args) != _SCHEMA_ARGS[op.name] + 1:
        raise InterpreterError(f"{len(call.args)} arguments, expected {_SCHEMA_ARGS[op.name]} + the returned out")
    if call.args[-1] != call.args[-2]:
        raise InterpreterError("the returned value is not the out tensor")
    if any(not 0 <= a < len(plan.values) for a in call.args):
        raise InterpreterError("argument value index out of range")
    bound = _Call(memory, call.args)
    bound.write_out(handler(bound))


DelegateFn = Callable[[int, list[np.ndarray]], list[np.ndarray]]


def run_program(
    program: pm.Program,
    inputs: list[np.ndarray],
    method: str = "forward",
    delegate_fn: DelegateFn | None = None,
) -> list[np.ndarray]:
    """Executes `method` of `program` on logical-order numpy inputs; returns logical-order outputs.
    delegate_fn runs DelegateCalls (see the module docstring); without it they are an error."""
    plans = [p for p in program.execution_plan if p.name == method]
    if not plans:
        raise InterpreterError(f"program has no method {method!r}")
    plan = plans[0]
    memory = _Memory(program, plan)
    if len(inputs) != len(plan.inputs):
        raise InterpreterError(f"method {method!r} takes {len(plan.inputs)} inputs, got {len(inputs)}")
    for k, (index, value) in enumerate(zip(plan.inputs, inputs)):
        t = memory.tensor(index)
        arr = np.asarray(value)
        if list(arr.shape) != list(t.sizes) or arr.dtype != _DTYPES[pm.ScalarType(t.scalar_type)]:
            raise InterpreterError(f"input {k}: expected {np.dtype(_DTYPES[pm.ScalarType(t.scalar_type)])}"
                                   f"{list(t.sizes)}, got {arr.dtype}{list(arr.shape)}")
        memory.write_logical(index, arr)
    for chain in plan.chains:
        pc = 0
        while pc < len(chain.instructions):
            instr = chain.instructions[pc]
            try:
                pc = _step(memory, plan, instr, pc, delegate_fn)
            except InterpreterError as exc:
                raise InterpreterError(f"instruction {pc} ({_describe(plan, instr)}): {exc}") from exc
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise InterpreterError(f"instruction {pc} ({_describe(plan, instr)}): {exc}") from exc
    return [memory.read_logical(index) for index in plan.outputs]


def _describe(plan: pm.ExecutionPlan, instr: pm.Instruction) -> str:
    if isinstance(instr, pm.KernelCall) and 0 <= instr.op_index < len(plan.operators):
        op = plan.operators[instr.op_index]
        return f"{op.name}.{op.overload}"
    return type(instr).__name__


def _run_delegate(memory: _Memory, plan: pm.ExecutionPlan, call: pm.DelegateCall,
                  delegate_fn: DelegateFn | None) -> None:
    if not 0 <= call.delegate_index < len(plan.delegates):
        raise InterpreterError(f"delegate index {call.delegate_index} out of range "
                               f"({len(plan.delegates)} delegates)")
    backend = plan.delegates[call.delegate_index].id
    if delegate_fn is None:
        raise InterpreterError(f"delegate {call.delegate_index} ({backend}) needs a delegate_fn to run "
                               "on the host (e.g. torchmcu.npu.hostrun.subprogram_delegate_fn)")
    if any(not 0 <= a < len(plan.values) for a in call.args):
        raise InterpreterError("argument value index out of range")
    arrays = [memory.read_logical(a) for a in call.args]
    outputs = delegate_fn(call.delegate_index, arrays)
    first = len(call.args) - 1 - len(outputs)
    if first < 1:
        raise InterpreterError(f"delegate {call.delegate_index} returned {len(outputs)} outputs for a call "
                               f"of {len(call.args)} arguments")
    for k, out in enumerate(outputs):
        index = call.args[first + k]
        t = memory.tensor(index)
        out = np.asarray(out)
        if list(out.shape) != list(t.sizes):
            raise InterpreterError(f"delegate {call.delegate_index} output {k}: shape {list(out.shape)} does "
                                   f"not fit argument {first + k} of sizes {t.sizes}")
        memory.write_logical(index, out.astype(_DTYPES[pm.ScalarType(t.scalar_type)], copy=False))


def _step(memory: _Memory, plan: pm.ExecutionPlan, instr: pm.Instruction, pc: int,
          delegate_fn: DelegateFn | None = None) -> int:
    if isinstance(instr, pm.KernelCall):
        _run_kernel(memory, plan, instr)
    elif isinstance(instr, pm.DelegateCall):
        _run_delegate(memory, plan, instr, delegate_fn)
    elif isinstance(instr, pm.MoveCall):
        src = memory.values[instr.move_from]
        if isinstance(src, pm.Tensor):
            memory.write(instr.move_to, memory.read(instr.move_from))
        else:
            memory.values[instr.move_to] = src
    elif isinstance(instr, pm.JumpFalseCall):
        cond = memory.values[instr.cond_value_index]
        if isinstance(cond, pm.Tensor) and cond.scalar_type == pm.ScalarType.BOOL:
            cond = pm.Bool(bool(memory.read(instr.cond_value_index).all()))  # ExecuTorch: all true
        if not isinstance(cond, pm.Bool):
            raise InterpreterError("jump condition is not a Bool or a Bool tensor")
        if not cond.value:
            return instr.destination_instruction
    elif isinstance(instr, pm.FreeCall):
        pass
    else:
        raise InterpreterError(f"{type(instr).__name__} is not supported by the reference interpreter")
    return pc + 1
