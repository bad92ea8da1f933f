"""What every stage says about a call the definition's check refuses (the per-op tests'
"names the argument the C kernel names" cases share it)."""

from __future__ import annotations

import numpy as np
import pytest
from torchmcu.lower.call_check import check_calls
from torchmcu.lower.errors import LoweringError
from torchmcu.npu.tosa.lower import TosaLoweringError, lower_to_tosa, npu_support
from torchmcu.ops.core import ArgError, OpDef, bind
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import InterpreterError, run_program


def refused(op: OpDef, program: pm.Program) -> int | None:
    """The argument index the check names for the program's one call, None if it passes."""
    plan = program.execution_plan[0]
    try:
        bind(op, plan.values, plan.chains[0].instructions[0].args).check()
    except ArgError as exc:
        return exc.index
    return None


def check_index(op: OpDef, program: pm.Program) -> int:
    """The argument index the check names for the program's one call (it must refuse it)."""
    index = refused(op, program)
    assert index is not None, f"{op.key}: the check passes"
    return index


def assert_every_stage_names(
    op: OpDef, program: pm.Program, bad: int, inputs: list[np.ndarray]
) -> None:
    """The check, the lowering's final call check, the interpreter and, for an op with a TOSA
    lowering, NPU support and the TOSA lowering all name argument `bad` (index and schema
    name)."""
    assert check_index(op, program) == bad
    name = op.schema.args[bad].name
    with pytest.raises(LoweringError, match=rf"argument {bad} \({name}\)"):
        check_calls(program)
    with pytest.raises(InterpreterError, match=rf"argument {bad} \({name}\)"):
        run_program(program, inputs)
    if op.npu is None or op.npu.lower is None:
        return
    plan = program.execution_plan[0]
    assert f"argument {bad} ({name})" in npu_support(plan, 0, "u85")
    with pytest.raises(TosaLoweringError, match=rf"argument {bad} \({name}\)"):
        lower_to_tosa(program)
