"""The executor's verified-arguments bit (tm_kernel_context.arguments_verified), on the host.

A KernelCall's arguments are the same on every execution, so the executor tells a kernel when
this instruction already succeeded once in this method instance; kernels then skip their
argument checks. Checked here: the flag each call sees (a host test kernel records it), and
that quantized_linear's short path gives the reference interpreter's outputs.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_kernels_mve_conv import CASES, _build_program

from torchmcu import native
from torchmcu.pte import writer
from torchmcu.pte.program import Allocation, Chain, ExecutionPlan, KernelCall, Operator, Program, ScalarType, Tensor
from torchmcu.reference import interpreter


def verified_program(calls: int) -> Program:
    """`calls` torchmcu_test::verified calls on one int8 input, each recording its flag."""
    values = [Tensor(ScalarType.CHAR, [4], [0], allocation=Allocation(1, 0))]
    instructions = []
    for c in range(calls):
        values.append(Tensor(ScalarType.LONG, [1], [0], allocation=Allocation(1, 8 + 8 * c)))
        instructions.append(KernelCall(0, [0, c + 1, c + 1]))
    outputs = list(range(1, calls + 1))
    plan = ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0],
        outputs=outputs,
        chains=[Chain([0], outputs, instructions)],
        operators=[Operator("torchmcu_test::verified", "out")],
        non_const_buffer_sizes=[0, 8 + 8 * calls],
    )
    return Program(execution_plan=[plan])


@pytest.mark.parametrize(("runs", "flag"), [(1, 0), (2, 1), (3, 1)])
def test_flag_set_from_the_second_execution(runs: int, flag: int) -> None:
    """Every instruction sees 0 on the method's first execution (its own bit: the second call
    of the first run is not verified by the first call), 1 on later ones."""
    pte = writer.serialize(verified_program(3))
    outs = native.run_program(pte, [np.zeros(4, np.int8)], runs=runs)
    assert [int(o[0]) for o in outs] == [flag] * 3


def test_new_method_instance_starts_unverified() -> None:
    """The bits live in the method's metadata: a fresh init (a new session) clears them."""
    pte = writer.serialize(verified_program(1))
    native.run_program(pte, [np.zeros(4, np.int8)], runs=2)
    (out,) = native.run_program(pte, [np.zeros(4, np.int8)])
    assert int(out[0]) == 0


def test_call_kernel_is_never_verified() -> None:
    out = np.full(1, 7, np.int64)
    for _ in range(2):
        native.call_kernel("torchmcu_test::verified", [np.zeros(4, np.int8), out])
        assert int(out[0]) == 0


def test_runs_must_be_positive() -> None:
    with pytest.raises(ValueError, match="runs must be >= 1"):
        native.run_program(writer.serialize(verified_program(1)), [np.zeros(4, np.int8)], runs=0)


def test_linear_short_path_matches_reference() -> None:
    """quantized_linear on its verified path (second and third execution, host scalar build)
    gives the reference interpreter's outputs for every linear case of the MVE tests."""
    cases = [c for c in CASES if c.op == "cortex_m::quantized_linear"]
    program, inputs = _build_program(cases)
    expected = interpreter.run_program(program, inputs)
    pte = writer.serialize(program)
    for runs in (1, 3):
        got = native.run_program(pte, inputs, runs=runs)
        for case, g, e in zip(cases, got, expected):
            assert g.tobytes() == e.tobytes(), f"{case.name}: runs={runs} differs from the reference"
