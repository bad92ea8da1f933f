"""Every emitted kernel call checked against its operator's definition, after planning.

A lowering rule that gets an argument wrong would otherwise write a .pte the runtime refuses
(the C kernel's TM_ARG_CHECK fires at method init or on the first call) or, worse, one it runs
with a wrong result. Each registry operator's `check` is the C kernel's checks in Python, so
running it over the finished program stops such a program before it is written, with the
instruction, the argument and the model node named. It runs after the memory plan because
the checks that two tensors share no byte need the final allocations.
"""

from __future__ import annotations

from collections.abc import Sequence

from torchmcu import ops
from torchmcu.lower.errors import LoweringError
from torchmcu.lower.report import NodeReport
from torchmcu.ops.core import ArgError, bind
from torchmcu.pte import program as pm

__all__ = ["check_calls"]


def check_calls(program: pm.Program, report: Sequence[NodeReport] = ()) -> None:
    """Run each KernelCall's operator check (registry ops with one); LoweringError names the
    plan, the instruction, the refused argument and, from `report` (indexed by instruction),
    the model node it was lowered from."""
    by_instruction = {entry.instruction: entry for entry in report}
    for plan in program.execution_plan:
        definitions = [ops.of_operator(o) for o in plan.operators]
        step = 0
        for chain in plan.chains:
            for instruction in chain.instructions:
                if isinstance(instruction, pm.KernelCall):
                    op = definitions[instruction.op_index]
                    if op is not None and op.check is not None:
                        try:
                            bind(op, plan.values, instruction.args).check()
                        except ArgError as exc:
                            raise LoweringError(
                                _where(plan, step, op, exc, by_instruction.get(step))
                            ) from None
                step += 1


def _where(
    plan: pm.ExecutionPlan, step: int, op: ops.OpDef, exc: ArgError, entry: NodeReport | None
) -> str:
    text = (
        f"internal lowering error: method '{plan.name}' instruction {step} ({op.key}) "
        f"would be refused by its kernel: {exc}"
    )
    if entry is not None and entry.node:
        text += f"; lowered from node {entry.node} ({entry.target})"
        if entry.source:
            text += f" at {entry.source}"
    return text
