"""cortex_m::quantized_linear, defined once in torchmcu/ops/defs/linear.py: the reference
against a float-free computation on Python ints, the C kernel (through the C runtime, twice,
so the verified-arguments path runs too) bit-exact with the reference on generated cases, the
TOSA lowering bit-exact with it on the TOSA reference model, the MAC count, and the one
argument check naming the argument the C kernel names, for the interpreter, NPU support and
the TOSA lowering."""

from __future__ import annotations


import numpy as np
import pytest
from _arg_checks import assert_every_stage_names
from _intref import requantize_int
from _pte_programs import Const, Planned, call_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.npu.partition import instruction_macs
from torchmcu.npu.tosa.lower import lower_to_tosa, npu_support, run_tosa_reference
from torchmcu.ops.defs.linear import quantized_linear
from torchmcu.ops.intmath import quantize_multiplier
from torchmcu.pte import program as pm
from torchmcu.pte.writer import serialize
from torchmcu.reference.interpreter import run_program

LINEAR = ops.get("cortex_m::quantized_linear.out")
A = LINEAR.schema.A
KEY = LINEAR.key


def _case(rng, lead: list[int], k: int, n: int, form: str, per_channel: bool) -> dict[str, object]:
    """Arrays and scalars of one call, by schema name (input: the logical array)."""
    zp_in, zp_out = (int(v) for v in rng.integers(-128, 128, 2))
    pairs = [
        quantize_multiplier(float(s)) for s in rng.uniform(1e-4, 2e-2, n if per_channel else 1)
    ]
    if rng.random() < 0.2:
        pairs[0] = quantize_multiplier(1.7)  # a left shift
    lo = int(rng.integers(-128, 0))
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    bias = rng.integers(-5000, 5000, n, dtype=np.int32)
    kernel_sum = None
    if form == "kernel_sum":  # what ExecuTorch precomputes (filter_offset 0)
        kernel_sum = (-zp_in * w.astype(np.int64).sum(axis=1) + bias).astype(np.int32).reshape(1, n)
    return {
        "input": rng.integers(-128, 128, (*lead, k), dtype=np.int8),
        "weights": w,
        "bias": bias if form == "bias" else None,
        "kernel_sum": kernel_sum,
        "input_offset": -zp_in,
        "filter_offset": 0,
        "output_offset": zp_out,
        "requantize_multipliers": [p[0] for p in pairs],
        "requantize_shifts": [p[1] for p in pairs],
        "activation_max": int(rng.integers(lo, 128)),
        "activation_min": lo,
    }


def _program(
    case: dict[str, object], out: Planned | None = None, input_order: list[int] | None = None
) -> pm.Program:
    args: dict[str, object] = {}
    for name, v in case.items():
        if name == "input":
            args[name] = Planned(list(v.shape), input_order)  # type: ignore[union-attr]
        elif isinstance(v, np.ndarray):
            st_ = pm.ScalarType.CHAR if v.dtype == np.int8 else pm.ScalarType.INT
            args[name] = Const(v.tobytes(), list(v.shape), st_)
        else:
            args[name] = v
    x = case["input"]
    args["out"] = out or Planned([*x.shape[:-1], case["weights"].shape[0]])  # type: ignore[union-attr]
    return call_program(KEY, args)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    form=st.sampled_from(["bias", "none", "kernel_sum"]),
    per_channel=st.booleans(),
    filter_offset=st.sampled_from([0, 0, 5, -127]),
)
def test_reference_is_the_integer_formula(seed, form, per_channel, filter_offset):
    rng = np.random.default_rng(seed)
    c = _case(rng, [3], int(rng.integers(1, 12)), int(rng.integers(1, 6)), form, per_channel)
    c["filter_offset"] = filter_offset
    got = quantized_linear(*c.values())
    x, w = c["input"].tolist(), c["weights"].tolist()  # type: ignore[union-attr]
    mults, shifts = c["requantize_multipliers"], c["requantize_shifts"]
    for r, row in enumerate(x):
        for o, w_row in enumerate(w):
            if c["kernel_sum"] is not None:
                acc = sum(a * b for a, b in zip(row, w_row)) + filter_offset * sum(row)
                acc += int(c["kernel_sum"].reshape(-1)[o])  # type: ignore[union-attr]
            else:
                acc = sum((a + c["input_offset"]) * (b + filter_offset) for a, b in zip(row, w_row))
                acc += 0 if c["bias"] is None else int(c["bias"][o])  # type: ignore[index]
            q = o if per_channel else 0
            want = requantize_int(acc, mults[q], shifts[q]) + c["output_offset"]
            assert got[r, o] == min(max(want, c["activation_min"]), c["activation_max"])


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    lead=st.lists(st.integers(1, 4), min_size=0, max_size=2),
    k=st.integers(1, 40),
    n=st.sampled_from([1, 2, 3, 4, 7, 16, 17]),
    form=st.sampled_from(["bias", "none", "kernel_sum"]),
    per_channel=st.booleans(),
)
def test_c_kernel_is_bit_exact_with_the_reference(seed, lead, k, n, form, per_channel):
    rng = np.random.default_rng(seed)
    case = _case(rng, lead, k, n, form, per_channel)
    program = _program(case)
    (reference,) = run_program(program, [case["input"]])
    (got,) = native.run_program(serialize(program), [case["input"]], runs=2)
    assert got.tobytes() == reference.tobytes()
    # the numpy function on the case's arrays (the definition's reference reads the same)
    want = quantized_linear(*case.values())
    assert reference.tobytes() == want.tobytes()


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    lead=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    form=st.sampled_from(["bias", "none", "kernel_sum"]),
    per_channel=st.booleans(),
)
def test_tosa_lowering_is_bit_exact_with_the_reference(seed, lead, form, per_channel):
    rng = np.random.default_rng(seed)
    case = _case(rng, lead, int(rng.integers(1, 30)), int(rng.integers(1, 12)), form, per_channel)
    program = _program(case)
    plan = program.execution_plan[0]
    for family in ("u55", "u65", "u85"):
        assert npu_support(plan, 0, family) is None
    (reference,) = run_program(program, [case["input"]])
    (got,) = run_tosa_reference(lower_to_tosa(program), [case["input"]])
    assert got.tobytes() == reference.tobytes()


def test_a_filter_offset_stays_on_the_cpu():
    case = _case(np.random.default_rng(1), [2], 8, 3, "bias", False)
    case["filter_offset"] = 3
    plan = _program(case).execution_plan[0]
    assert npu_support(plan, 0, "u85") == "quantized_linear with a non-zero filter offset"


def test_macs():
    case = _case(np.random.default_rng(2), [2, 3], 11, 5, "bias", True)
    plan = _program(case).execution_plan[0]
    assert instruction_macs(plan, plan.chains[0].instructions[0]) == 2 * 3 * 11 * 5


def _base() -> dict[str, object]:
    return _case(np.random.default_rng(3), [2], 5, 3, "bias", True)


# (changes to the case, the argument named). The C kernel checks in this order too:
# a case breaking two rules names the first.
BAD = [
    ({"weights": np.zeros((3, 4), np.int8)}, A.weights),  # K differs from the input's
    ({"weights": np.zeros((3, 5, 1), np.int8)}, A.weights),
    ({"bias": np.zeros(2, np.int32)}, A.bias),
    ({"bias": np.zeros(3, np.int8)}, A.bias),
    ({"kernel_sum": np.zeros((1, 4), np.int32)}, A.kernel_sum),
    ({"input_offset": -128}, A.input_offset),
    ({"filter_offset": 129}, A.filter_offset),
    ({"output_offset": 128}, A.output_offset),
    (
        {"requantize_multipliers": [1 << 30] * 2, "requantize_shifts": [0] * 2},
        A.requantize_multipliers,
    ),
    (
        {"requantize_multipliers": [1 << 30] * 4, "requantize_shifts": [0] * 4},
        A.requantize_multipliers,
    ),
    ({"requantize_shifts": [0, 0]}, A.requantize_shifts),
    (
        {"requantize_multipliers": [1 << 30, 1 << 31, 1 << 30], "requantize_shifts": [0, 0, 32]},
        A.requantize_multipliers,
    ),  # every multiplier is checked before the shifts
    ({"requantize_shifts": [0, -32, 0]}, A.requantize_shifts),
    ({"activation_min": -129}, A.activation_min),
    ({"activation_min": 10, "activation_max": 9}, A.activation_max),
]


@pytest.mark.parametrize(("changes", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(changes, bad):
    case = {**_base(), **changes}
    out = np.zeros((*case["input"].shape[:-1], case["weights"].shape[0]), np.int8)  # type: ignore[union-attr]
    with pytest.raises(native.NativeError, match=rf"bad_argument {bad}\)"):
        native.call_kernel(LINEAR.qualified, [*case.values(), out])
    assert_every_stage_names(LINEAR, _program(case), bad, [case["input"]])


@pytest.mark.parametrize(
    ("sizes", "dim_order"), [([2, 4], None), ([2, 3, 1], None), ([3, 2], [1, 0])]
)
def test_check_names_the_out(sizes, dim_order):
    case = _base()
    order = list(range(len(sizes))) if dim_order is None else dim_order
    out = native.TensorArg(np.zeros([sizes[d] for d in order], np.int8), sizes, order)
    with pytest.raises(native.NativeError, match=rf"bad_argument {A.out}\)"):
        native.call_kernel(LINEAR.qualified, [*case.values(), out])
    program = _program(case, Planned(sizes, dim_order))
    assert_every_stage_names(LINEAR, program, A.out, [case["input"]])


def test_check_names_a_non_contiguous_input():
    case = _base()
    x = case["input"]
    arg = native.TensorArg(np.ascontiguousarray(x.T), [2, 5], [1, 0])  # type: ignore[union-attr]
    with pytest.raises(native.NativeError, match=rf"bad_argument {A.input}\)"):
        native.call_kernel(
            LINEAR.qualified, [arg, *list(case.values())[1:], np.zeros((2, 3), np.int8)]
        )
    program = _program(case, input_order=[1, 0])
    assert_every_stage_names(LINEAR, program, A.input, [x])
