"""Small Programs for the C runtime tests (no tests here; shared builders).

They call the host-only torchmcu_test:: kernels compiled into torchmcu._native
(firmware/host_ext/test_kernels.c), so the runtime is tested independently of
the real cortex_m kernels. Expected numbers are computed with numpy in the tests.
"""

from __future__ import annotations

import numpy as np
from torchmcu.pte import program as pm
from torchmcu.pte import writer

NCHW = [1, 3, 2, 2]
NHWC_ORDER = [0, 2, 3, 1]
# Constant operand in physical (NHWC) order: 12 int8 values chosen by hand.
CONST_NHWC = np.array([100, -100, 7, 1, 2, 3, -5, 60, -60, 0, 127, -128], dtype=np.int8)


def add_program(alpha: int = 2, arena: int = 32) -> pm.Program:
    """out = saturate_int8(x + alpha * c) on a channels-last [1,3,2,2] tensor."""
    values = [
        pm.Tensor(pm.ScalarType.CHAR, NCHW, NHWC_ORDER, allocation=pm.Allocation(1, 0)),  # 0 x
        pm.Tensor(pm.ScalarType.CHAR, NCHW, NHWC_ORDER, data_buffer_idx=1),  # 1 c
        pm.Int(alpha),  # 2
        pm.Tensor(pm.ScalarType.CHAR, NCHW, NHWC_ORDER, allocation=pm.Allocation(1, 16)),  # 3 out
    ]
    plan = pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0],
        outputs=[3],
        chains=[
            pm.Chain(inputs=[0], outputs=[3], instructions=[pm.KernelCall(0, [0, 1, 2, 3, 3])])
        ],
        operators=[pm.Operator("torchmcu_test::add", "out")],
        non_const_buffer_sizes=[0, arena],
    )
    return pm.Program(execution_plan=[plan], constants=[b"", CONST_NHWC.tobytes()])


def describe_program() -> pm.Program:
    """describe(x, c, [7, -3], 2.5, True, None, out): reports what the kernel received."""
    values = [
        pm.Tensor(pm.ScalarType.INT, [2, 3], [0, 1], allocation=pm.Allocation(1, 0)),  # 0 x
        pm.Tensor(pm.ScalarType.SHORT, [2, 2], [1, 0], data_buffer_idx=1),  # 1 c (transposed)
        pm.Int(7),  # 2
        pm.Int(-3),  # 3
        pm.IntList([2, 3]),  # 4 -> [7, -3]
        pm.Double(2.5),  # 5
        pm.Bool(True),  # 6
        pm.Null(),  # 7
        pm.Tensor(pm.ScalarType.LONG, [40], [0], allocation=pm.Allocation(1, 32)),  # 8 out
    ]
    plan = pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0],
        outputs=[8],
        chains=[pm.Chain([0], [8], [pm.KernelCall(0, [0, 1, 4, 5, 6, 7, 8, 8])])],
        operators=[pm.Operator("torchmcu_test::describe", "out")],
        non_const_buffer_sizes=[0, 32 + 8 * 40],
    )
    c = np.array([-2, 300, 5, 9], dtype="<i2").tobytes()
    return pm.Program(execution_plan=[plan], constants=[b"", c])


def fail_program(status: int, bad_argument: int) -> pm.Program:
    """One torchmcu_test::fail call that returns `status` naming `bad_argument`."""
    values = [
        pm.Tensor(pm.ScalarType.CHAR, [4], [0], allocation=pm.Allocation(1, 0)),
        pm.Int(status),
        pm.Int(bad_argument),
        pm.Tensor(pm.ScalarType.CHAR, [4], [0], allocation=pm.Allocation(1, 16)),
    ]
    plan = pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0],
        outputs=[3],
        chains=[pm.Chain([0], [3], [pm.KernelCall(0, [0, 1, 2, 3, 3])])],
        operators=[pm.Operator("torchmcu_test::fail", "out")],
        non_const_buffer_sizes=[0, 32],
    )
    return pm.Program(execution_plan=[plan])


def serialize_unchecked(program: pm.Program, monkeypatch) -> bytes:
    """Writes a Program that the writer's validator would refuse (to test the C verifier)."""
    monkeypatch.setattr(writer, "validate", lambda p: None)
    monkeypatch.setattr(writer, "_check_writable", lambda p: None)
    return writer.serialize(program)
