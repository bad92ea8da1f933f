"""cortex_m::quantize_per_tensor and dequantize_per_tensor, defined once in
torchmcu/ops/defs/quantize.py: the references against element-by-element float32 arithmetic
written here, the C kernels bit-exact with the references (the interpreter running the
definitions) on generated cases, the one argument check naming the argument the C kernel
names (check and interpreter: neither op runs on the NPU), and the partitioner's boundary
rule, which reads the definitions."""

from __future__ import annotations


import numpy as np
import pytest
from _arg_checks import assert_every_stage_names
from _pte_programs import quantize_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.npu.tosa.lower import npu_support
from torchmcu.ops.defs.quantize import dequantize_per_tensor, quantize_per_tensor
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import run_program

QUANTIZE = ops.get("cortex_m::quantize_per_tensor.out")
DEQUANTIZE = ops.get("cortex_m::dequantize_per_tensor.out")
A = QUANTIZE.schema.A  # both have the same arguments
NP = {pm.ScalarType.CHAR: np.int8, pm.ScalarType.SHORT: np.int16}
RANGE = {pm.ScalarType.CHAR: (-128, 127), pm.ScalarType.SHORT: (-32768, 32767)}


@st.composite
def qparams(draw):
    dtype = draw(st.sampled_from([pm.ScalarType.CHAR, pm.ScalarType.SHORT]))
    lo, hi = RANGE[dtype]
    quant_min = draw(st.integers(lo, hi))
    return {
        "scale": draw(st.floats(1e-4, 10.0)),
        "zero_point": draw(st.integers(lo, hi)),
        "quant_min": quant_min,
        "quant_max": draw(st.integers(quant_min, hi)),
        "dtype": int(dtype),
    }


def _floats(seed: int, shape: list[int], specials: bool, ties_at: float | None = None) -> np.ndarray:
    """Normal values (x 300); with ties_at = a power-of-two scale, halves of it (x / scale is
    an exact .5, the rounding ties); NaN and +-inf too with specials."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 300).astype(np.float32)
    if ties_at is not None:
        x = ((rng.integers(-300, 300, shape) + 0.5) * ties_at).astype(np.float32)
    if specials and x.size:
        flat = x.reshape(-1)
        flat[:: 3] = np.float32(np.nan)
        flat[1:: 5] = np.float32(np.inf)
        flat[2:: 7] = -np.float32(np.inf)
    return x


def _scalars(p: dict) -> list:
    return [p["scale"], p["zero_point"], p["quant_min"], p["quant_max"], p["dtype"]]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       p=qparams(), specials=st.booleans(), tie_exponent=st.none() | st.integers(-4, 4))
def test_quantize_reference_is_float32_arithmetic_rounded_half_even(seed, shape, p, specials, tie_exponent):
    if tie_exponent is not None:
        p = {**p, "scale": 2.0**tie_exponent}
    x = _floats(seed, shape, specials, None if tie_exponent is None else p["scale"])
    dtype = NP[pm.ScalarType(p["dtype"])]
    got = quantize_per_tensor(x, *_scalars(p)[:4], dtype)
    inv = np.float32(1.0) / np.float32(p["scale"])
    for i in np.ndindex(*x.shape):
        v = float(np.float32(x[i] * inv))
        q = p["zero_point"] if np.isnan(v) else round(max(min(v, 2.0**24), -(2.0**24))) + p["zero_point"]
        assert got[i] == min(max(q, p["quant_min"]), p["quant_max"])  # round(): half to even
    assert got.dtype == dtype


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), p=qparams())
def test_dequantize_reference_is_one_float32_product(seed, shape, p):
    lo, hi = RANGE[pm.ScalarType(p["dtype"])]
    q = np.random.default_rng(seed).integers(lo, hi + 1, shape).astype(NP[pm.ScalarType(p["dtype"])])
    got = dequantize_per_tensor(q, *_scalars(p)[:4], q.dtype)
    for i in np.ndindex(*q.shape):
        assert got[i] == np.float32(int(q[i]) - p["zero_point"]) * np.float32(p["scale"])
    assert got.dtype == np.float32


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       p=qparams(), specials=st.booleans(), tie_exponent=st.none() | st.integers(-4, 4))
def test_quantize_c_kernel_is_bit_exact_with_the_reference(seed, shape, p, specials, tie_exponent):
    if tie_exponent is not None:
        p = {**p, "scale": 2.0**tie_exponent}
    x = _floats(seed, shape, specials, None if tie_exponent is None else p["scale"])
    out = np.zeros(shape, NP[pm.ScalarType(p["dtype"])])
    native.call_kernel(QUANTIZE.qualified, [x, *_scalars(p), out])
    (reference,) = run_program(quantize_program(QUANTIZE.qualified, shape, p), [x])
    assert reference.dtype == out.dtype and reference.tobytes() == out.tobytes()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), p=qparams())
def test_dequantize_c_kernel_is_bit_exact_with_the_reference(seed, shape, p):
    lo, hi = RANGE[pm.ScalarType(p["dtype"])]
    q = np.random.default_rng(seed).integers(lo, hi + 1, shape).astype(NP[pm.ScalarType(p["dtype"])])
    out = np.zeros(shape, np.float32)
    native.call_kernel(DEQUANTIZE.qualified, [q, *_scalars(p), out])
    (reference,) = run_program(quantize_program(DEQUANTIZE.qualified, shape, p), [q])
    assert reference.dtype == out.dtype and reference.tobytes() == out.tobytes()


def test_quantize_specials():
    """NaN gives the zero point, +-inf and 1e30 the bounds, .5 ties go to even: by hand."""
    x = np.array([np.nan, np.inf, -np.inf, 0.5, 1.5, -0.5, -1.5, 1e30], np.float32)
    p = {"scale": 1.0, "zero_point": 3, "quant_min": -128, "quant_max": 127, "dtype": 1}
    out = np.zeros(x.shape, np.int8)
    native.call_kernel(QUANTIZE.qualified, [x, *_scalars(p), out])
    np.testing.assert_array_equal(out, [3, 127, -128, 3, 5, 3, 1, 127])
    (reference,) = run_program(quantize_program(QUANTIZE.qualified, [8], p), [x])
    np.testing.assert_array_equal(reference, out)


def test_c_kernels_and_references_run_over_memory_in_any_layout():
    """Channels-last in, channels-last out: elementwise over the bytes."""
    x = _floats(3, [2, 3, 4, 5], False)  # logical N, C, H, W
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    p = {"scale": 0.5, "zero_point": -3, "quant_min": -128, "quant_max": 127, "dtype": 1}
    out = np.zeros((2, 4, 5, 3), np.int8)
    native.call_kernel(QUANTIZE.qualified, [native.TensorArg(nhwc, [2, 3, 4, 5], [0, 2, 3, 1]),
                                            *_scalars(p),
                                            native.TensorArg(out, [2, 3, 4, 5], [0, 2, 3, 1])])
    program = quantize_program(QUANTIZE.qualified, [2, 3, 4, 5], p, dim_order=[0, 2, 3, 1])
    (reference,) = run_program(program, [x])
    assert np.ascontiguousarray(reference.transpose(0, 2, 3, 1)).tobytes() == out.tobytes()


P = {"scale": 0.25, "zero_point": 0, "quant_min": -128, "quant_max": 127, "dtype": 1}
# (the op, changes to the scalars, the out's sizes, in_type, out_type, the argument named)
BAD = [
    (QUANTIZE, {}, [2, 3], pm.ScalarType.INT, None, A.input),  # not float32
    (QUANTIZE, {"scale": 0.0}, [2, 3], None, None, A.scale),
    (QUANTIZE, {"scale": -1.0}, [2, 3], None, None, A.scale),
    (QUANTIZE, {"scale": float("inf")}, [2, 3], None, None, A.scale),
    (QUANTIZE, {"scale": 1e-300}, [2, 3], None, None, A.scale),  # 0 as a float32
    (QUANTIZE, {"scale": 1e300}, [2, 3], None, None, A.scale),  # inf as a float32
    (QUANTIZE, {"scale": 1}, [2, 3], None, None, A.scale),  # an Int, not a Double
    (QUANTIZE, {"dtype": 3}, [2, 3], None, pm.ScalarType.INT, A.dtype),
    (QUANTIZE, {"zero_point": 128}, [2, 3], None, None, A.zero_point),
    (QUANTIZE, {"quant_min": -129}, [2, 3], None, None, A.quant_min),
    (QUANTIZE, {"quant_min": 5, "quant_max": 4}, [2, 3], None, None, A.quant_max),
    (QUANTIZE, {"dtype": 2, "zero_point": 200}, [2, 3], None, pm.ScalarType.CHAR, A.out),  # zp fits int16
    (QUANTIZE, {}, [3, 2], None, None, A.out),
    (QUANTIZE, {}, [2, 3], None, pm.ScalarType.SHORT, A.out),  # not dtype
    (DEQUANTIZE, {"dtype": 0}, [2, 3], pm.ScalarType.BYTE, None, A.dtype),
    (DEQUANTIZE, {}, [2, 3], pm.ScalarType.SHORT, None, A.input),  # not dtype
    (DEQUANTIZE, {"scale": float("nan")}, [2, 3], None, None, A.scale),
    (DEQUANTIZE, {"zero_point": -129}, [2, 3], None, None, A.zero_point),
    (DEQUANTIZE, {"quant_max": 128}, [2, 3], None, None, A.quant_max),
    (DEQUANTIZE, {}, [2, 3], None, pm.ScalarType.DOUBLE, A.out),
    (DEQUANTIZE, {}, [2, 4], None, None, A.out),
]
_NP_OF = {pm.ScalarType.FLOAT: np.float32, pm.ScalarType.INT: np.int32, pm.ScalarType.BYTE: np.uint8,
          pm.ScalarType.DOUBLE: np.float64, **NP}


@pytest.mark.parametrize(("op", "changes", "out_sizes", "in_type", "out_type", "bad"), BAD,
                         ids=lambda v: getattr(v, "key", None))
def test_check_names_the_argument_the_c_kernel_names(op, changes, out_sizes, in_type, out_type, bad):
    p = {**P, **changes}
    quantize = op is QUANTIZE
    dtype = pm.ScalarType(p["dtype"]) if p["dtype"] in (1, 2) else pm.ScalarType.CHAR
    in_type = in_type or (pm.ScalarType.FLOAT if quantize else dtype)
    out_type = out_type or (dtype if quantize else pm.ScalarType.FLOAT)
    x = np.zeros([2, 3], _NP_OF[in_type])
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(op.qualified, [x, *_scalars(p), np.zeros(out_sizes, _NP_OF[out_type])])
    program = quantize_program(op.qualified, [2, 3], p, in_type=in_type, out_type=out_type,
                               out_sizes=out_sizes)
    assert_every_stage_names(op, program, bad, [x])


@pytest.mark.parametrize("op", [QUANTIZE, DEQUANTIZE], ids=lambda o: o.key)
def test_they_stay_on_the_cpu(op):
    plan = quantize_program(op.qualified, [2, 3], P).execution_plan[0]
    short = op.schema.name
    assert npu_support(plan, 0, "u85") == f"{short} works on float tensors; no Ethos-U runs float"
