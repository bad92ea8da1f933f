"""ops.core.Bound, the named view of one KernelCall, and the stages' subclasses (the
interpreter's memory reads, the TOSA side's constants) on one-op programs."""

from __future__ import annotations

import numpy as np
import pytest
from _pte_programs import linear_program, slice_copy_program
from torchmcu import ops
from torchmcu.npu.tosa.graph import Args, BoundArgs, TosaLoweringError
from torchmcu.ops.core import ArgError, bind
from torchmcu.pte import program as pm
from torchmcu.reference import interpreter

SLICE = ops.get("torchmcu::slice_copy.out")
LINEAR = ops.get("cortex_m::quantized_linear.out")


def _call(program: pm.Program) -> tuple[pm.ExecutionPlan, pm.KernelCall]:
    plan = program.execution_plan[0]
    call = plan.chains[0].instructions[0]
    assert isinstance(call, pm.KernelCall)
    return plan, call


def test_scalars_tensors_and_positions_by_name() -> None:
    plan, call = _call(slice_copy_program([2, 5, 3], 1, 1, 4, 2))
    b = bind(SLICE, plan.values, call.args)
    assert (b.dim, b.start, b.end, b.step) == (1, 1, 4, 2)
    assert b.scalar("step") == 2
    assert b.tensor("self") is plan.values[0] and b.tensor("out") is plan.values[5]
    assert [b.index(n) for n in ("self", "dim", "start", "end", "step", "out")] == list(range(6))
    assert b.index("step") == SLICE.schema.A.step
    assert b.value_index("out") == 5 and not b.is_none("self")


def test_int_lists_and_optional_tensors_of_a_hand_built_call() -> None:
    program = linear_program()
    plan, call = _call(program)
    b = bind(LINEAR, plan.values, call.args)
    assert b.tensor("weights").sizes == [3, 4]
    assert b.input_offset == -128 and b.filter_offset == 5
    # an IntList reads through its items (value 9 lists value 7, Int(-7))
    assert b.requantize_multipliers == [-7]
    assert b.value_index("bias") == 2 and not b.is_none("bias")


def test_wrong_kinds_name_the_argument() -> None:
    plan, call = _call(slice_copy_program([4], 0, 0, 2, 1))
    b = bind(SLICE, plan.values, call.args)
    with pytest.raises(ArgError, match=r"argument 1 \(dim\): expected a Tensor") as info:
        b.tensor("dim")
    assert (info.value.index, info.value.name) == (1, "dim")
    with pytest.raises(ArgError, match=r"argument 0 \(self\): expected a scalar"):
        b.scalar("self")
    with pytest.raises(AttributeError, match="has no argument 'stride'"):
        b.stride  # noqa: B018


def test_interpreter_bound_reads_memory_and_lays_out_the_out() -> None:
    program = slice_copy_program([2, 3], 1, 1, 3, 1)
    plan, call = _call(program)
    memory = interpreter._Memory(program, plan)
    x = np.arange(6, dtype=np.int8).reshape(2, 3)
    memory.write_logical(0, x)
    b = interpreter._Bound(SLICE, interpreter._Call(memory, call.args))
    np.testing.assert_array_equal(b.logical("self"), x)
    np.testing.assert_array_equal(b.physical("self"), x)
    assert b.to_out(x[:, 1:]).shape == (2, 2)
    np.testing.assert_array_equal(SLICE.reference(b), x[:, 1:3])


def test_interpreter_bound_sees_the_rebound_values() -> None:
    """The interpreter passes its own values (a MoveCall rebinds scalars), not the plan's."""
    program = slice_copy_program([4], 0, 0, 2, 1)
    plan, call = _call(program)
    memory = interpreter._Memory(program, plan)
    memory.values[3] = pm.Int(4)
    memory.values[5] = pm.Tensor(pm.ScalarType.CHAR, [4], [0], allocation=pm.Allocation(1, 16))
    b = interpreter._Bound(SLICE, interpreter._Call(memory, call.args))
    assert b.end == 4 and plan.values[3] == pm.Int(2)


def test_tosa_bound_constants_shapes_and_errors() -> None:
    program = linear_program()
    plan, call = _call(program)
    a = BoundArgs(LINEAR, Args(program, plan, call, "instruction 0 (quantized_linear)"))
    w = a.constant("weights")
    assert w.shape == (3, 4) and w.dtype == np.int8 and w[0, :2].tolist() == [1, -2]
    assert a.physical_shape("out") == (1, 3)
    assert isinstance(a.error("no"), TosaLoweringError)
    assert str(a.error("no")) == "instruction 0 (quantized_linear): no"
    with pytest.raises(TosaLoweringError, match="must be a constant"):
        a.constant("input")
