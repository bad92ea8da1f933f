"""Reference interpreter on small hand-built Programs (arena simulation, layouts, errors),
cross-checked against the C runtime running the same .pte."""

from __future__ import annotations

import numpy as np
import pytest

from torchmcu import reference as ref
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import InterpreterError, run_program

NHWC = [0, 2, 3, 1]
I8, I32 = pm.ScalarType.CHAR, pm.ScalarType.INT


class _Builder:
    """Grows one ExecutionPlan value by value."""

    def __init__(self) -> None:
        self.values: list = []
        self.constants: list[bytes] = [b""]
        self.operators: list[pm.Operator] = []
        self.instructions: list = []

    def add(self, value) -> int:
        self.values.append(value)
        return len(self.values) - 1

    def planned(self, stype, sizes, offset, dim_order=None) -> int:
        order = dim_order if dim_order is not None else list(range(len(sizes)))
        return self.add(pm.Tensor(stype, list(sizes), order, allocation=pm.Allocation(1, offset)))

    def const(self, arr: np.ndarray, stype) -> int:
        self.constants.append(np.ascontiguousarray(arr).tobytes())
        return self.add(pm.Tensor(stype, list(arr.shape), list(range(arr.ndim)), data_buffer_idx=len(self.constants) - 1))

    def ints(self, items) -> int:
        return self.add(pm.IntList([self.add(pm.Int(int(v))) for v in items]))

    def call(self, op: str, args: list[int]) -> None:
        self.operators.append(pm.Operator(op, "out"))
        self.instructions.append(pm.KernelCall(len(self.operators) - 1, args + [args[-1]]))

    def program(self, inputs, outputs, arena: int) -> pm.Program:
        plan = pm.ExecutionPlan("forward", self.values, inputs, outputs,
                                [pm.Chain(inputs, outputs, self.instructions)], self.operators,
                                non_const_buffer_sizes=[0, arena])
        return pm.Program([plan], constants=self.constants)


def _conv_pool_linear(rng, out_offset: int = 400):
    """input [1,3,6,6] (NHWC memory) -> conv 3x3 pad 1 -> 2x2 avg pool -> linear over flattened NHWC."""
    b = _Builder()
    w = rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)
    bias = rng.integers(-500, 500, 4, dtype=np.int32)
    m, s = ref.quantize_multiplier(0.004)
    x = b.planned(I8, [1, 3, 6, 6], 0, NHWC)
    conv_out = b.planned(I8, [1, 4, 6, 6], 128, NHWC)
    b.call("cortex_m::quantized_conv2d", [
        x, b.const(w, I8), b.const(bias, I32), b.ints([1, 1]), b.ints([1, 1]), b.ints([1, 1]),
        b.add(pm.Int(5)), b.add(pm.Int(-2)), b.const(np.full(4, m, np.int32), I32),
        b.const(np.full(4, s, np.int32), I32), b.add(pm.Int(-128)), b.add(pm.Int(127)),
        b.planned(pm.ScalarType.BYTE, [0], 0), conv_out])
    pool_out = b.planned(I8, [1, 4, 3, 3], out_offset, NHWC)
    pm_, ps = ref.quantize_multiplier(0.05)
    b.call("cortex_m::quantized_avg_pool2d", [
        conv_out, b.ints([2, 2]), b.ints([2, 2]), b.ints([0, 0]), b.add(pm.Bool(False)), b.add(pm.Int(-2)),
        b.add(pm.Int(pm_)), b.add(pm.Int(ps)), b.planned(pm.ScalarType.BYTE, [0], 0), pool_out])
    flat = b.add(pm.Tensor(I8, [1, 36], [0, 1], allocation=pm.Allocation(1, out_offset)))  # view of pool_out
    lw = rng.integers(-128, 128, (5, 36), dtype=np.int8)
    lm, ls = ref.quantize_multiplier(0.01)
    y = b.planned(I8, [1, 5], 0)  # reuses the input's bytes: the input is dead by now
    b.call("cortex_m::quantized_linear", [
        flat, b.const(lw, I8), b.add(pm.Null()), b.add(pm.Null()), b.add(pm.Int(2)), b.add(pm.Int(0)),
        b.add(pm.Int(1)), b.ints([lm]), b.ints([ls]), b.add(pm.Int(127)), b.add(pm.Int(-128)), y])
    program = b.program([x], [y], 512)

    def expected(x_nchw: np.ndarray) -> np.ndarray:
        nhwc = x_nchw.transpose(0, 2, 3, 1)
        c = ref.quantized_conv2d(nhwc, w, bias, [1, 1], [1, 1], [1, 1], 5, -2, [m] * 4, [s] * 4, -128, 127)
        p = ref.quantized_avg_pool2d(c, [2, 2], [2, 2], [0, 0], False, -2, pm_, ps)
        return ref.quantized_linear(p.reshape(1, 36), lw, None, None, 2, 0, 1, [lm], [ls], 127, -128)

    return program, expected


def test_chain_of_kernels_through_the_arena():
    rng = np.random.default_rng(0)
    program, expected = _conv_pool_linear(rng)
    x = rng.integers(-128, 128, (1, 3, 6, 6), dtype=np.int8)
    (y,) = run_program(program, [x])
    np.testing.assert_array_equal(y, expected(x))


def _skip_connection(t_offset: int) -> pm.Program:
    """t = max_pool(x, 1x1); y = t + x: x must survive until the add."""
    b = _Builder()
    x = b.planned(I8, [1, 2, 4, 4], 0, NHWC)
    t = b.planned(I8, [1, 2, 4, 4], t_offset, NHWC)
    b.call("cortex_m::quantized_max_pool2d", [x, b.ints([1, 1]), b.ints([1, 1]), b.ints([0, 0]), b.ints([1, 1]),
                                              b.add(pm.Bool(False)), b.add(pm.Int(0)), b.add(pm.Int(0)),
                                              b.add(pm.Int(-10)), b.add(pm.Int(127)), t])
    y = b.planned(I8, [1, 2, 4, 4], 64, NHWC)
    half, one = ref.quantize_multiplier(0.5), ref.quantize_multiplier(1.0 / (1 << 20))
    b.call("cortex_m::quantized_add", [t, b.add(pm.Int(0)), b.add(pm.Int(half[0])), b.add(pm.Int(half[1])),
                                       x, b.add(pm.Int(0)), b.add(pm.Int(half[0])), b.add(pm.Int(half[1])),
                                       b.add(pm.Int(0)), b.add(pm.Int(one[0])), b.add(pm.Int(one[1])),
                                       b.add(pm.Int(-128)), b.add(pm.Int(127)), y])
    return b.program([x], [y], 96)


def test_overlapping_plan_changes_the_result():
    x = np.random.default_rng(1).integers(-60, 60, (1, 2, 4, 4), dtype=np.int8)
    clamped = np.maximum(x, -10).astype(np.int64)
    expected = np.round((clamped + x) / 2.0 + 1e-9 * np.sign(clamped + x))  # (t + x) / 2, ties away from 0
    (good,) = run_program(_skip_connection(32), [x])
    np.testing.assert_array_equal(good, expected)
    (bad,) = run_program(_skip_connection(0), [x])  # t overwrites x while x is still live
    assert not np.array_equal(bad, expected)


def test_matches_the_c_runtime():
    native = pytest.importorskip("torchmcu.native")
    writer = pytest.importorskip("torchmcu.pte.writer")
    rng = np.random.default_rng(3)
    program, _ = _conv_pool_linear(rng)
    x = rng.integers(-128, 128, (1, 3, 6, 6), dtype=np.int8)
    np.testing.assert_array_equal(native.run_program(writer.serialize(program), [x])[0], run_program(program, [x])[0])


def test_quantize_transpose_dequantize_logical_io():
    b = _Builder()
    x = b.planned(pm.ScalarType.FLOAT, [2, 3], 0)
    q = b.planned(I8, [2, 3], 24)
    b.call("cortex_m::quantize_per_tensor", [x, b.add(pm.Double(0.1)), b.add(pm.Int(3)), b.add(pm.Int(-128)),
                                             b.add(pm.Int(127)), b.add(pm.Int(1)), q])
    t = b.planned(I8, [3, 2], 32)
    b.call("cortex_m::transpose", [q, b.ints([1, 0]), t])
    y = b.planned(pm.ScalarType.FLOAT, [3, 2], 40)
    b.call("cortex_m::dequantize_per_tensor", [t, b.add(pm.Double(0.1)), b.add(pm.Int(3)), b.add(pm.Int(-128)),
                                               b.add(pm.Int(127)), b.add(pm.Int(1)), y])
    xv = np.array([[0.0, 0.26, -1.0], [12.8, 0.05, -20.0]], np.float32)
    (out,) = run_program(b.program([x], [y], 64), [xv])
    # float32(0.05) * 10 rounds to exactly 0.5 in float32, a tie that goes to even (0)
    expected_q = np.array([[3, 6, -7], [127, 3, -128]])
    np.testing.assert_allclose(out, ((expected_q.T - 3) * np.float32(0.1)).astype(np.float32))


def test_errors_name_instruction_and_operator():
    b = _Builder()
    x = b.planned(I8, [1, 2, 4, 4], 0, NHWC)
    out = b.planned(I8, [1, 2, 2, 2], 64, NHWC)
    b.call("cortex_m::quantized_max_pool2d", [x, b.ints([2, 2]), b.ints([2, 2]), b.ints([0, 0]), b.ints([1, 1]),
                                              b.add(pm.Bool(False)), b.add(pm.Int(0)), b.add(pm.Int(0)),
                                              b.add(pm.Int(-128)), b.add(pm.Int(127)), out])
    bad = b.planned(I8, [1, 2, 2, 2], 64)  # contiguous NCHW bytes: wrong layout for the legacy op
    b.call("cortex_m::quantized_max_pool2d", [bad, b.ints([1, 1]), b.ints([1, 1]), b.ints([0, 0]), b.ints([1, 1]),
                                              b.add(pm.Bool(False)), b.add(pm.Int(0)), b.add(pm.Int(0)),
                                              b.add(pm.Int(-128)), b.add(pm.Int(127)), out])
    with pytest.raises(InterpreterError, match=r"instruction 1 \(cortex_m::quantized_max_pool2d.out\).*NHWC"):
        run_program(b.program([x], [out], 128), [np.zeros((1, 2, 4, 4), np.int8)])


def test_rejects_tensor_outside_arena_and_unknown_op():
    b = _Builder()
    x = b.planned(I8, [4], 0)
    y = b.planned(I8, [4], 14)
    b.call("cortex_m::pad", [x, b.ints([0, 0, 0, 0]), b.ints([0, 0, 0, 0]), b.add(pm.Int(0)), y])
    with pytest.raises(InterpreterError, match=r"instruction 0 \(cortex_m::pad.out\).*outside the arena"):
        run_program(b.program([x], [y], 16), [np.zeros(4, np.int8)])
    b2 = _Builder()
    x2 = b2.planned(I8, [4], 0)
    b2.call("aten::cumsum", [x2, x2])  # no reference implementation
    with pytest.raises(InterpreterError, match="no reference implementation"):
        run_program(b2.program([x2], [x2], 4), [np.zeros(4, np.int8)])
