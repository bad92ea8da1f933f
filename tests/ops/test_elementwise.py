"""cortex_m::quantized_add and quantized_mul, defined once in torchmcu/ops/defs/elementwise.py:
the references against an independent float-free computation (Python ints, CMSIS-NN's
formula), the C kernels bit-exact with the references (the interpreter running the
definitions) for equal layouts and the channel broadcast, the TOSA lowerings bit-exact with
them on the TOSA reference model, and the one argument check naming the argument the C
kernel names, for the interpreter, NPU support and the TOSA lowering."""

from __future__ import annotations

import numpy as np
import pytest
from _arg_checks import assert_every_stage_names
from _intref import requantize_int
from _pte_programs import binary_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.npu.tosa.lower import lower_to_tosa, npu_support, run_tosa_reference
from torchmcu.ops.defs.elementwise import quantized_add, quantized_mul
from torchmcu.ops.intmath import quantize_multiplier, single_rounding_multiplier
from torchmcu.reference.interpreter import run_program

ADD = ops.get("cortex_m::quantized_add.out")
MUL = ops.get("cortex_m::quantized_mul.out")
NHWC = [0, 2, 3, 1]
BROADCASTS = ["none", "flat", "other", "self", "scalar", "scalar_self"]
# the general broadcast: (self, other) sizes of n, c, h, w; NHWC when 4-D
GENERAL = {
    "g_n1hw": lambda n, c, h, w: ([n, c, h, w], [n, 1, h, w]),
    "g_nch1": lambda n, c, h, w: ([n, c, h, w], [n, c, h, 1]),
    "g_111w_self": lambda n, c, h, w: ([1, 1, 1, w], [n, c, h, w]),
    "g_both": lambda n, c, h, w: ([n, c, 1, w], [n, 1, h, 1]),
    "g_btc_11c": lambda n, c, h, w: ([n, h, c], [1, 1, c]),
    "g_btc_bt1": lambda n, c, h, w: ([n, h, c], [n, h, 1]),
    "g_both_3d": lambda n, c, h, w: ([1, h, c], [n, 1, 1]),
}
BROADCASTS += list(GENERAL)


def _add_params(rng, negate=False) -> dict[str, int]:
    s1, s2, so = (float(v) for v in rng.uniform(0.005, 0.2, 3))
    twice_max = 2 * max(s1, s2)
    m1, sh1 = single_rounding_multiplier(s1 / twice_max)
    m2, sh2 = single_rounding_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / (so * (1 << 20)))
    zps = [int(v) for v in rng.integers(-128, 128, 3)]
    lo = int(rng.integers(-128, 0))
    return {"self_zero_point": zps[0], "self_multiplier": m1, "self_shift": sh1,
                "other_zero_point": zps[1], "other_multiplier": -m2 if negate else m2, "other_shift": sh2,
                "output_zero_point": zps[2], "output_multiplier": mo, "output_shift": sho,
                "activation_min": lo, "activation_max": int(rng.integers(lo, 128))}


def _mul_params(rng) -> dict[str, int]:
    m, s = single_rounding_multiplier(float(rng.uniform(1e-4, 0.05)))
    zps = [int(v) for v in rng.integers(-128, 128, 3)]
    return {"self_zero_point": zps[0], "other_zero_point": zps[1], "output_zero_point": zps[2],
                "output_multiplier": m, "output_shift": s}


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), negate=st.booleans())
def test_add_reference_is_cmsis_nn_on_python_ints(seed, negate):
    rng = np.random.default_rng(seed)
    p = _add_params(rng, negate)
    a, b = (rng.integers(-128, 128, 40, dtype=np.int8) for _ in range(2))
    got = quantized_add(a, p["self_zero_point"], p["self_multiplier"], p["self_shift"], b,
                        p["other_zero_point"], p["other_multiplier"], p["other_shift"],
                        p["output_zero_point"], p["output_multiplier"], p["output_shift"],
                        p["activation_min"], p["activation_max"])
    for x, y, r in zip(a.tolist(), b.tolist(), got.tolist()):
        u = requantize_int((x - p["self_zero_point"]) << 20, p["self_multiplier"], p["self_shift"])
        v = requantize_int((y - p["other_zero_point"]) << 20, p["other_multiplier"], p["other_shift"])
        want = requantize_int(u + v, p["output_multiplier"], p["output_shift"]) + p["output_zero_point"]
        assert r == min(max(want, p["activation_min"]), p["activation_max"])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_mul_reference_is_cmsis_nn_on_python_ints(seed):
    rng = np.random.default_rng(seed)
    p = _mul_params(rng)
    a, b = (rng.integers(-128, 128, 40, dtype=np.int8) for _ in range(2))
    got = quantized_mul(a, p["self_zero_point"], b, p["other_zero_point"], p["output_zero_point"],
                        p["output_multiplier"], p["output_shift"])
    for x, y, r in zip(a.tolist(), b.tolist(), got.tolist()):
        prod = (x - p["self_zero_point"]) * (y - p["other_zero_point"])
        want = requantize_int(prod, p["output_multiplier"], p["output_shift"]) + p["output_zero_point"]
        assert r == min(max(want, -128), 127)


def _layout_case(draw_rng, broadcast: str):
    """(sizes, orders) of self, other, out: equal contiguous, equal NHWC, a one-element
    operand, or a [1,C,1,1] channel vector on either side of an NHWC [N,C,H,W]."""
    n, c, h, w = (int(v) for v in draw_rng.integers(1, 5, 4))
    if broadcast in GENERAL:
        c, w = c + 2, w + 2  # rows of several elements
        sa, sb = GENERAL[broadcast](n, c, h, w)
        so = [max(x, y) for x, y in zip(sa, sb)]
        return (sa, sb, so), ((NHWC, NHWC, NHWC) if len(so) == 4 else None)
    full, vec = [n, c, h, w], [1, c, 1, 1]
    if broadcast == "none":
        return (full, full, full), (NHWC, NHWC, NHWC)
    if broadcast == "flat":
        flat = [n * c, h * w]
        return (flat, flat, flat), None
    if broadcast == "scalar":  # a one-element other of another rank
        return (full, [1], full), (NHWC, [0], NHWC)
    if broadcast == "scalar_self":
        flat = [n * c, h * w]
        return ([1, 1], flat, flat), None
    if broadcast == "other":
        return (full, vec, full), (NHWC, NHWC, NHWC)
    return (vec, full, full), (NHWC, NHWC, NHWC)


def _physical(x: np.ndarray, order) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(x, order))


def _run_both(op: str, params: dict[str, int], sizes, orders, rng):
    orders_ = orders or tuple(list(range(len(s))) for s in sizes)
    a = rng.integers(-128, 128, sizes[0], dtype=np.int8)
    b = rng.integers(-128, 128, sizes[1], dtype=np.int8)
    out = np.zeros([sizes[2][d] for d in orders_[2]], np.int8)
    definition = ADD if op == "cortex_m::quantized_add" else MUL
    args = []
    for arg in definition.schema.args:
        if arg.name == "self":
            args.append(native.TensorArg(_physical(a, orders_[0]), sizes[0], orders_[0]))
        elif arg.name == "other":
            args.append(native.TensorArg(_physical(b, orders_[1]), sizes[1], orders_[1]))
        elif arg.name == "out":
            args.append(native.TensorArg(out, sizes[2], orders_[2]))
        else:
            args.append(params[arg.name])
    native.call_kernel(op, args)
    program = binary_program(op, sizes, params, orders)
    (reference,) = run_program(program, [a, b])
    return a, b, out, _physical(reference, orders_[2]), program


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), broadcast=st.sampled_from(BROADCASTS),
       negate=st.booleans())
def test_add_c_kernel_is_bit_exact_with_the_reference(seed, broadcast, negate):
    rng = np.random.default_rng(seed)
    sizes, orders = _layout_case(rng, broadcast)
    *_, out, reference, _ = _run_both("cortex_m::quantized_add", _add_params(rng, negate), sizes, orders, rng)
    assert out.tobytes() == reference.tobytes()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), broadcast=st.sampled_from(BROADCASTS))
def test_mul_c_kernel_is_bit_exact_with_the_reference(seed, broadcast):
    rng = np.random.default_rng(seed)
    sizes, orders = _layout_case(rng, broadcast)
    *_, out, reference, _ = _run_both("cortex_m::quantized_mul", _mul_params(rng), sizes, orders, rng)
    assert out.tobytes() == reference.tobytes()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), broadcast=st.sampled_from(list(GENERAL)),
       op=st.sampled_from(["cortex_m::quantized_add", "cortex_m::quantized_mul"]))
def test_general_broadcast_is_numpy_broadcasting_of_the_formula(seed, broadcast, op):
    """The C kernel and the interpreter on a general broadcast equal the elementwise formula
    on numpy's broadcast of the logical operands (no period or stride arithmetic)."""
    rng = np.random.default_rng(seed)
    sizes, orders = _layout_case(rng, broadcast)
    add = op == "cortex_m::quantized_add"
    p = _add_params(rng, seed % 2 == 1) if add else _mul_params(rng)
    a, b, out, reference, _ = _run_both(op, p, sizes, orders, rng)
    if add:
        want = quantized_add(a, p["self_zero_point"], p["self_multiplier"], p["self_shift"], b,
                             p["other_zero_point"], p["other_multiplier"], p["other_shift"],
                             p["output_zero_point"], p["output_multiplier"], p["output_shift"],
                             p["activation_min"], p["activation_max"])
    else:
        want = quantized_mul(a, p["self_zero_point"], b, p["other_zero_point"], p["output_zero_point"],
                             p["output_multiplier"], p["output_shift"])
    assert want.shape == tuple(sizes[2])
    want = _physical(want, (orders or tuple(list(range(len(s))) for s in sizes))[2])
    assert out.tobytes() == want.tobytes()
    assert reference.tobytes() == want.tobytes()


@settings(max_examples=24, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), broadcast=st.sampled_from(BROADCASTS),
       op=st.sampled_from(["cortex_m::quantized_add", "cortex_m::quantized_mul"]))
def test_tosa_lowering_is_bit_exact_with_the_reference(seed, broadcast, op):
    rng = np.random.default_rng(seed)
    sizes, orders = _layout_case(rng, broadcast)
    params = _add_params(rng, negate=seed % 2 == 1) if op == "cortex_m::quantized_add" else _mul_params(rng)
    if op == "cortex_m::quantized_add" and seed % 4 >= 2:  # rsub: self subtracted (SUB, or 0 - ADD)
        params["self_multiplier"] = -params["self_multiplier"]
    a, b, _, reference, program = _run_both(op, params, sizes, orders, rng)
    plan = program.execution_plan[0]
    for family in ("u55", "u65", "u85"):
        assert npu_support(plan, 0, family) is None
    orders_ = orders or tuple(list(range(len(s))) for s in sizes)
    (got,) = run_tosa_reference(lower_to_tosa(program), [_physical(a, orders_[0]), _physical(b, orders_[1])])
    assert got.tobytes() == reference.tobytes()


P_ADD = {"self_zero_point": 0, "self_multiplier": 1 << 30, "self_shift": 0, "other_zero_point": 0,
             "other_multiplier": 1 << 30, "other_shift": 0, "output_zero_point": 0,
             "output_multiplier": 1 << 30, "output_shift": 0, "activation_min": -128, "activation_max": 127}
P_MUL = {"self_zero_point": 0, "other_zero_point": 0, "output_zero_point": 0,
             "output_multiplier": 1 << 30, "output_shift": 0}
FULL = ([1, 3, 2, 2], [1, 3, 2, 2], [1, 3, 2, 2])
# (op, changes to the scalars, sizes, the argument named)
BAD = [
    (ADD, {"self_zero_point": 128}, FULL, ADD.schema.A.self_zero_point),
    (ADD, {"self_shift": 32}, FULL, ADD.schema.A.self_shift),
    (ADD, {"other_multiplier": 1 << 31}, FULL, ADD.schema.A.other_multiplier),
    (ADD, {"output_shift": -32}, FULL, ADD.schema.A.output_shift),
    (ADD, {"activation_min": 5, "activation_max": 4}, FULL, ADD.schema.A.activation_max),
    (ADD, {}, ([1, 3, 2, 2], [1, 3, 2, 3], [1, 3, 2, 2]), ADD.schema.A.other),  # no broadcast
    (ADD, {}, ([1, 3, 2, 3], [1, 3, 2, 2], [1, 3, 2, 2]), ADD.schema.A.self),
    (ADD, {}, ([1, 3, 1, 2], [1, 1, 2, 2], [1, 3, 2, 1]), ADD.schema.A.out),  # not the broadcast
    (ADD, {}, ([1, 3, 1, 2], [3, 1, 2], [1, 3, 2, 2]), ADD.schema.A.other),  # another rank
    (ADD, {}, ([1, 3, 2, 2], [1, 3, 2, 2], [1, 3, 2, 1]), ADD.schema.A.out),
    (MUL, {"other_zero_point": -129}, FULL, MUL.schema.A.other_zero_point),
    (MUL, {"output_multiplier": -(1 << 31) - 1}, FULL, MUL.schema.A.output_multiplier),
    (MUL, {}, ([1, 3, 2, 2], [3], [1, 3, 2, 2]), MUL.schema.A.other),  # a rank-1 channel vector
    (MUL, {}, ([2, 3], [3, 2], [2, 3]), MUL.schema.A.other),  # self fits out, other not
    (MUL, {}, ([2, 3], [2, 3], [3, 2]), MUL.schema.A.out),
]


@pytest.mark.parametrize(("definition", "changes", "sizes", "bad"), BAD,
                         ids=lambda v: getattr(v, "key", None))
def test_check_names_the_argument_the_c_kernel_names(definition, changes, sizes, bad):
    params = {**(P_ADD if definition is ADD else P_MUL), **changes}
    tensors = {"self": sizes[0], "other": sizes[1], "out": sizes[2]}
    args = [np.zeros(tensors[a.name], np.int8) if a.name in tensors else params[a.name]
            for a in definition.schema.args]
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(definition.qualified, args)
    program = binary_program(definition.qualified, sizes, params)
    inputs = [np.zeros(sizes[0], np.int8), np.zeros(sizes[1], np.int8)]
    assert_every_stage_names(definition, program, bad, inputs)
