"""torchmcu::quantized_add16 (the residual stream's add), defined in
torchmcu/ops/defs/elementwise.py: the reference against CMSIS-NN's formula on Python ints
with the int16 headroom 2^15 and against the float sum (within one int16 step), the C kernel
bit-exact with the reference interpreter for every operand type pair and layout, and the
argument check naming the argument the C kernel names at every stage."""

from __future__ import annotations

import numpy as np
import pytest
from _arg_checks import assert_every_stage_names
from _intref import requantize_int
from _pte_programs import binary_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.ops.defs.elementwise import quantized_add16
from torchmcu.ops.intmath import quantize_multiplier, single_rounding_multiplier
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import run_program

ADD16 = ops.get("torchmcu::quantized_add16.out")
A = ADD16.schema.A
# (self sizes, other sizes, out sizes): equal, a single element, the general broadcast
LAYOUTS = {
    "equal": ([1, 17, 64], [1, 17, 64], [1, 17, 64]),
    "odd": ([3, 5, 7], [3, 5, 7], [3, 5, 7]),
    "scalar": ([2, 9], [1], [2, 9]),
    "row": ([1, 17, 64], [1, 1, 64], [1, 17, 64]),
    "both": ([2, 1, 5], [1, 3, 1], [2, 3, 5]),
}


def _operand(rng, wide: bool, shape) -> tuple[np.ndarray, float, int]:
    """(values, scale, zero point): int16 symmetric (zero point 0) or int8 asymmetric."""
    if wide:
        return rng.integers(-32767, 32768, shape, dtype=np.int16), float(rng.uniform(1e-5, 3e-4)), 0
    zp = int(rng.integers(-128, 128))
    return rng.integers(-128, 128, shape, dtype=np.int8), float(rng.uniform(0.005, 0.05)), zp


def _params(
    s1: float, z1: int, s2: float, z2: int, so: float, lo=-32768, hi=32767
) -> dict[str, int]:
    """What the lowering passes (elementwise._add_like with the 2^15 headroom)."""
    twice_max = 2 * max(s1, s2)
    m1, sh1 = single_rounding_multiplier(s1 / twice_max)
    m2, sh2 = single_rounding_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / (so * (1 << 15)))
    return {"self_zero_point": z1, "self_multiplier": m1, "self_shift": sh1,
            "other_zero_point": z2, "other_multiplier": m2, "other_shift": sh2,
            "output_zero_point": 0, "output_multiplier": mo, "output_shift": sho,
            "activation_min": lo, "activation_max": hi}  # fmt: skip


def _call_ref(a, b, p):
    return quantized_add16(a, p["self_zero_point"], p["self_multiplier"], p["self_shift"], b,
                           p["other_zero_point"], p["other_multiplier"], p["other_shift"],
                           p["output_zero_point"], p["output_multiplier"], p["output_shift"],
                           p["activation_min"], p["activation_max"])  # fmt: skip


def _case(seed: int, wide_a: bool, wide_b: bool, shape_a, shape_b):
    rng = np.random.default_rng(seed)
    a, s1, z1 = _operand(rng, wide_a, shape_a)
    b, s2, z2 = _operand(rng, wide_b, shape_b)
    peak = float(
        np.abs((a.astype(np.float64) - z1) * s1).max()
        + np.abs((b.astype(np.float64) - z2) * s2).max()
    )
    so = peak / 32767
    lo = int(rng.integers(-32768, -30000)) if seed % 3 == 0 else -32768  # a clamp now and then
    return a, b, (s1, z1, s2, z2, so), _params(s1, z1, s2, z2, so, lo, 32767)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), wide_a=st.booleans(), wide_b=st.booleans())
def test_reference_is_cmsis_nn_with_int16_headroom_and_near_the_float_sum(seed, wide_a, wide_b):
    a, b, (s1, z1, s2, z2, so), p = _case(seed, wide_a, wide_b, [40], [40])
    got = _call_ref(a, b, p)
    assert got.dtype == np.int16
    for x, y, r in zip(a.tolist(), b.tolist(), got.tolist()):
        u = requantize_int((x - z1) << 15, p["self_multiplier"], p["self_shift"])
        v = requantize_int((y - z2) << 15, p["other_multiplier"], p["other_shift"])
        want = requantize_int(u + v, p["output_multiplier"], p["output_shift"])
        assert r == min(max(want, p["activation_min"]), p["activation_max"])
        real = ((x - z1) * s1 + (y - z2) * s2) / so
        assert abs(r - min(max(real, p["activation_min"]), 32767)) <= 1.0


def _tensor(x: np.ndarray, sizes) -> native.TensorArg:
    return native.TensorArg(np.ascontiguousarray(x), list(sizes), list(range(len(sizes))))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), wide_a=st.booleans(), wide_b=st.booleans(),
       layout=st.sampled_from(sorted(LAYOUTS)))  # fmt: skip
def test_c_kernel_is_bit_exact_with_the_reference(seed, wide_a, wide_b, layout):
    sa, sb, so = LAYOUTS[layout]
    a, b, _, p = _case(seed, wide_a, wide_b, sa, sb)
    out = np.zeros(so, np.int16)
    tensors = {"self": _tensor(a, sa), "other": _tensor(b, sb), "out": _tensor(out, so)}
    native.call_kernel(
        ADD16.qualified, [tensors.get(x.name, p.get(x.name)) for x in ADD16.schema.args]
    )
    types = tuple(pm.ScalarType.SHORT if w else pm.ScalarType.CHAR for w in (wide_a, wide_b, True))
    (reference,) = run_program(
        binary_program(ADD16.qualified, (sa, sb, so), p, types=types), [a, b]
    )
    np.testing.assert_array_equal(tensors["out"].array, reference)
    # numpy broadcasting of the formula (the shape rule, independently)
    want = _call_ref(np.broadcast_to(a, so), np.broadcast_to(b, so), p)
    np.testing.assert_array_equal(reference, want)


P = _params(1e-4, 0, 0.02, 3, 2e-4)
FULL = ([1, 3, 4], [1, 3, 4], [1, 3, 4])
I16, I8 = pm.ScalarType.SHORT, pm.ScalarType.CHAR
# (changes to the scalars, sizes, (self, other, out) types, the argument named)
BAD = [
    ({"self_zero_point": 1}, FULL, (I16, I8, I16), A.self_zero_point),  # int16: zero point 0
    ({"other_zero_point": 128}, FULL, (I16, I8, I16), A.other_zero_point),
    ({"other_shift": 32}, FULL, (I16, I8, I16), A.other_shift),
    ({"output_zero_point": 1}, FULL, (I16, I8, I16), A.output_zero_point),
    ({"activation_min": -32769}, FULL, (I16, I8, I16), A.activation_min),
    ({"activation_min": 5, "activation_max": 4}, FULL, (I16, I8, I16), A.activation_max),
    ({}, FULL, (pm.ScalarType.INT, I8, I16), A.self),
    ({}, FULL, (I16, I8, I8), A.out),  # out int16 only
    ({}, ([1, 3, 4], [1, 3, 5], [1, 3, 4]), (I16, I8, I16), A.other),
]
NP = {I16: np.int16, I8: np.int8, pm.ScalarType.INT: np.int32}


@pytest.mark.parametrize(("changes", "sizes", "types", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(changes, sizes, types, bad):
    params = {**P, **changes}
    arrays = {n: np.zeros(s, NP[t]) for n, s, t in zip(("self", "other", "out"), sizes, types)}
    args = [arrays.get(a.name, params.get(a.name)) for a in ADD16.schema.args]
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(ADD16.qualified, args)
    program = binary_program(ADD16.qualified, sizes, params, types=types)
    assert_every_stage_names(ADD16, program, bad, [arrays["self"], arrays["other"]])
