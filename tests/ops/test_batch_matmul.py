"""cortex_m::quantized_batch_matmul (ExecuTorch's name and arguments), defined once in
torchmcu/ops/defs/batch_matmul.py: the reference against the formula on Python ints, the C
kernel bit-exact with the reference on random shapes, and the argument the check names."""

from __future__ import annotations

import numpy as np
import pytest
from _intref import requantize_int
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.ops.defs.batch_matmul import quantized_batch_matmul

BMM = ops.get("cortex_m::quantized_batch_matmul.out")
SCHEMA_A = BMM.schema.A


def _case(seed: int, b: int, m: int, k: int, n: int):
    rng = np.random.default_rng(seed)
    lhs = rng.integers(-128, 128, (b, m, k), dtype=np.int8)
    rhs_t = rng.integers(-128, 128, (b, n, k), dtype=np.int8)
    p = {
        "lhs_zero_point": int(rng.integers(-127, 129)),
        "rhs_zero_point": int(rng.integers(-127, 129)),
        "output_zero_point": int(rng.integers(-128, 128)),
        "output_multiplier": int(rng.integers(1 << 30, 1 << 31)),
        "output_shift": int(rng.integers(-16, -6)),
    }
    return lhs, rhs_t, p


def _args(lhs, rhs_t, p, out, scratch=None):
    scratch = np.zeros(4, dtype=np.int8) if scratch is None else scratch
    named = {"lhs": lhs, "rhs_transposed": rhs_t, "scratch": scratch, "out": out, **p}
    return [named[a.name] for a in BMM.schema.args]


def _reference(lhs, rhs_t, p):
    return quantized_batch_matmul(lhs, p["lhs_zero_point"], rhs_t, p["rhs_zero_point"],
                                  p["output_zero_point"], p["output_multiplier"], p["output_shift"])


def test_reference_is_the_formula():
    lhs, rhs_t, p = _case(1, 2, 3, 5, 4)
    got = _reference(lhs, rhs_t, p)
    for b in range(2):
        for i in range(3):
            for j in range(4):
                acc = sum(
                    (int(lhs[b, i, t]) + p["lhs_zero_point"])
                    * (int(rhs_t[b, j, t]) + p["rhs_zero_point"])
                    for t in range(5)
                )
                v = requantize_int(acc, p["output_multiplier"], p["output_shift"])
                want = min(127, max(-128, v + p["output_zero_point"]))
                assert got[b, i, j] == want


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    b=st.integers(1, 4),
    m=st.integers(1, 19),
    k=st.integers(1, 40),
    n=st.integers(1, 19),
)
def test_c_kernel_is_bit_exact_with_the_reference(seed, b, m, k, n):
    lhs, rhs_t, p = _case(seed, b, m, k, n)
    out = np.zeros((b, m, n), dtype=np.int8)
    native.call_kernel("cortex_m::quantized_batch_matmul", _args(lhs, rhs_t, p, out))
    want = _reference(lhs, rhs_t, p)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"rhs_t": (2, 4, 6)}, "rhs_transposed"),  # inner size differs
        ({"rhs_t": (1, 4, 5)}, "rhs_transposed"),  # batch differs
        ({"lhs_zero_point": 129}, "lhs_zero_point"),
        ({"output_multiplier": 0}, "output_multiplier"),
        ({"output_shift": 32}, "output_shift"),
        ({"out": (2, 3, 5)}, "out"),
    ],
)
def test_the_kernel_names_the_bad_argument(change, named):
    lhs, rhs_t, p = _case(3, 2, 3, 5, 4)
    if "rhs_t" in change:
        rhs_t = np.zeros(change.pop("rhs_t"), dtype=np.int8)
    out = np.zeros(change.pop("out", (2, 3, 4)), dtype=np.int8)
    p = {**p, **change}
    with pytest.raises(Exception, match=f"bad_argument {SCHEMA_A[named]}\\)"):
        native.call_kernel("cortex_m::quantized_batch_matmul", _args(lhs, rhs_t, p, out))
