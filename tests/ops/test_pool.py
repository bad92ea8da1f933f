"""cortex_m::quantized_avg_pool2d and quantized_max_pool2d (and their _nhwc aliases), defined
once in torchmcu/ops/defs/pool.py: the references against window loops written here, the C
kernels bit-exact with the references (the interpreter running the definitions) on generated
cases, the TOSA lowerings bit-exact with them on the TOSA reference model, the NPU support
rules, and the one argument check naming the argument the C kernel names, for the
interpreter, NPU support and the TOSA lowering."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _arg_checks import assert_every_stage_names, refused
from _pte_programs import pool_program
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torchmcu import native, ops
from torchmcu.npu.tosa.lower import lower_to_tosa, npu_support, run_tosa_reference
from torchmcu.ops.defs.pool import quantized_avg_pool2d, quantized_max_pool2d
from torchmcu.ops.intmath import quantize_multiplier
from torchmcu.ops.layout import pool_output_size
from torchmcu.reference.interpreter import run_program

AVG = ops.get("cortex_m::quantized_avg_pool2d.out")
MAX = ops.get("cortex_m::quantized_max_pool2d.out")
A_AVG, A_MAX = AVG.schema.A, MAX.schema.A
NHWC_LEGACY = [0, 2, 3, 1]
M, S = quantize_multiplier(0.02)


@st.composite
def geometries(draw, padding: bool = True, max_hw: int = 9, dilation: bool = False):
    g = {
        "h": draw(st.integers(1, max_hw)), "w": draw(st.integers(1, max_hw)),
        "kh": draw(st.integers(1, 4)), "kw": draw(st.integers(1, 4)),
        "sh": draw(st.integers(1, 3)), "sw": draw(st.integers(1, 3)),
    }
    if dilation:
        g["dh"], g["dw"] = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    g["ph"] = draw(st.integers(0, g["kh"] // 2)) if padding else 0
    g["pw"] = draw(st.integers(0, g["kw"] // 2)) if padding else 0
    return g


def _out_hw(g: dict, ceil_mode: bool) -> tuple[int, int]:
    """torch's output size, the dilated kernel's extent g["dh"] * (kh - 1) + 1 (dilation 1 when
    g has none)."""
    return (pool_output_size(g["h"], g.get("dh", 1) * (g["kh"] - 1) + 1, g["sh"], g["ph"], ceil_mode),
            pool_output_size(g["w"], g.get("dw", 1) * (g["kw"] - 1) + 1, g["sw"], g["pw"], ceil_mode))


def _window_args(g: dict) -> dict[str, list[int]]:
    return {"kernel_size": [g["kh"], g["kw"]], "stride": [g["sh"], g["sw"]],
            "padding": [g["ph"], g["pw"]]}


def _avg_scalars(g: dict, ceil_mode: bool, zero_point: int = 3) -> dict:
    return {**_window_args(g), "ceil_mode": ceil_mode, "zero_point": zero_point,
            "multiplier": M, "shift": S}


def _max_scalars(g: dict, zero_point: int, act: tuple[int, int], ceil_mode: bool = False) -> dict:
    return {**_window_args(g), "dilation": [g.get("dh", 1), g.get("dw", 1)], "ceil_mode": ceil_mode,
            "input_zero_point": zero_point, "output_zero_point": zero_point,
            "activation_min": act[0], "activation_max": act[1]}


def _sizes(nhwc: tuple[int, int, int, int], nhwc_sizes: bool) -> list[int]:
    n, h, w, c = nhwc
    return [n, h, w, c] if nhwc_sizes else [n, c, h, w]


def _arg(arr_nhwc: np.ndarray, nhwc_sizes: bool):
    """A native argument of an NHWC array: as is for _nhwc, legacy sizes otherwise."""
    if nhwc_sizes:
        return arr_nhwc
    return native.TensorArg(arr_nhwc, _sizes(arr_nhwc.shape, False), NHWC_LEGACY)


def _native_args(op, x: np.ndarray, scalars: dict, out: np.ndarray, nhwc_sizes: bool) -> list:
    tensors = {"input": _arg(x, nhwc_sizes), "out": _arg(out, nhwc_sizes),
               "scratch": np.zeros(0, np.uint8)}
    return [tensors[a.name] if a.name in tensors else scalars[a.name] for a in op.schema.args]


def _logical(x_nhwc: np.ndarray, nhwc_sizes: bool) -> np.ndarray:
    return x_nhwc if nhwc_sizes else np.transpose(x_nhwc, (0, 3, 1, 2))


def _run_both(op, x: np.ndarray, scalars: dict, out_nhwc: tuple, nhwc_sizes: bool):
    """(the C kernel's out, the interpreter's out), both as NHWC memory."""
    key = op.qualified + ("_nhwc" if nhwc_sizes else "")
    out = np.zeros(out_nhwc, np.int8)
    native.call_kernel(key, _native_args(op, x, scalars, out, nhwc_sizes))
    program = pool_program(key, _sizes(x.shape, nhwc_sizes), scalars, _sizes(out_nhwc, nhwc_sizes))
    (logical,) = run_program(program, [_logical(x, nhwc_sizes)])
    return out, (logical if nhwc_sizes else np.transpose(logical, (0, 2, 3, 1)))


def _taps(x: np.ndarray, g: dict, n: int, oh: int, ow: int, ch: int) -> list[int]:
    dh, dw = g.get("dh", 1), g.get("dw", 1)
    return [int(x[n, y, z, ch])
            for y in (oh * g["sh"] - g["ph"] + dh * j for j in range(g["kh"]))
            for z in (ow * g["sw"] - g["pw"] + dw * j for j in range(g["kw"]))
            if 0 <= y < x.shape[1] and 0 <= z < x.shape[2]]


def _half_away(q: Fraction) -> int:
    whole = int(abs(q) + Fraction(1, 2))  # floor(|q| + 1/2)
    return whole if q >= 0 else -whole


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), g=geometries(), c=st.integers(1, 5), ceil_mode=st.booleans())
def test_avg_reference_is_the_half_away_mean_of_the_in_bounds_taps(seed, g, c, ceil_mode):
    oh, ow = _out_hw(g, ceil_mode)
    assume(oh >= 1 and ow >= 1)
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 3, (2, g["h"], g["w"], c), dtype=np.int8)  # ties are common
    got = quantized_avg_pool2d(x, *_window_args(g).values(), ceil_mode, 0, M, S)
    assert got.shape == (2, oh, ow, c) and got.dtype == np.int8
    for i in np.ndindex(*got.shape):
        taps = _taps(x, g, i[0], i[1], i[2], i[3])
        assert got[i] == _half_away(Fraction(sum(taps), len(taps)))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), g=geometries(dilation=True), c=st.integers(1, 5),
       lo=st.integers(-128, 127), width=st.integers(0, 255), ceil_mode=st.booleans())
def test_max_reference_is_the_clamped_max_of_the_in_bounds_taps(seed, g, c, lo, width, ceil_mode):
    oh, ow = _out_hw(g, ceil_mode)
    assume(oh >= 1 and ow >= 1)
    hi = min(lo + width, 127)
    x = np.random.default_rng(seed).integers(-128, 128, (1, g["h"], g["w"], c), dtype=np.int8)
    got = quantized_max_pool2d(x, *_window_args(g).values(), [g["dh"], g["dw"]], ceil_mode, 5, 5,
                               lo, hi)
    assert got.shape == (1, oh, ow, c)
    for i in np.ndindex(*got.shape):
        taps = _taps(x, g, i[0], i[1], i[2], i[3])
        assert got[i] == (min(max(max(taps), lo), hi) if taps else lo)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), g=geometries(), n=st.integers(1, 2),
       c=st.sampled_from([1, 2, 3, 4, 7, 16, 17, 24]), ceil_mode=st.booleans(),
       nhwc_sizes=st.booleans())
def test_avg_c_kernel_is_bit_exact_with_the_reference(seed, g, n, c, ceil_mode, nhwc_sizes):
    oh, ow = _out_hw(g, ceil_mode)
    assume(oh >= 1 and ow >= 1)
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, g["h"], g["w"], c), dtype=np.int8)
    if seed % 3 == 0:  # small values make exact .5 averages (the rounding ties) common
        x = rng.integers(-2, 3, x.shape, dtype=np.int8)
    c_out, reference = _run_both(AVG, x, _avg_scalars(g, ceil_mode), (n, oh, ow, c), nhwc_sizes)
    assert reference.tobytes() == c_out.tobytes()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), g=geometries(dilation=True), n=st.integers(1, 2),
       c=st.sampled_from([1, 2, 3, 4, 7, 16, 17, 24]), zp=st.integers(-128, 127),
       lo=st.integers(-128, 127), width=st.integers(0, 255), nhwc_sizes=st.booleans(),
       ceil_mode=st.booleans())
def test_max_c_kernel_is_bit_exact_with_the_reference(seed, g, n, c, zp, lo, width, nhwc_sizes,
                                                      ceil_mode):
    oh, ow = _out_hw(g, ceil_mode)
    assume(oh >= 1 and ow >= 1)
    x = np.random.default_rng(seed).integers(-128, 128, (n, g["h"], g["w"], c), dtype=np.int8)
    scalars = _max_scalars(g, zp, (lo, min(lo + width, 127)), ceil_mode)
    c_out, reference = _run_both(MAX, x, scalars, (n, oh, ow, c), nhwc_sizes)
    assert reference.tobytes() == c_out.tobytes()


def _tosa_matches(program, x_nhwc: np.ndarray, families=("u55", "u85")) -> None:
    plan = program.execution_plan[0]
    out = plan.values[plan.outputs[0]]
    for family in ("u55", "u65", "u85"):
        assert npu_support(plan, 0, family) is None, family
    (logical,) = run_program(program, [np.transpose(x_nhwc, np.argsort(plan.values[0].dim_order))])
    want = np.ascontiguousarray(np.transpose(logical, out.dim_order))
    for family in families:
        (got,) = run_tosa_reference(lower_to_tosa(program, family=family), [x_nhwc])
        assert got.tobytes() == want.tobytes(), family


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), g=geometries(padding=False), c=st.integers(1, 6),
       nhwc_sizes=st.booleans(), ties=st.booleans())
def test_avg_tosa_lowering_is_bit_exact_with_the_reference(seed, g, c, nhwc_sizes, ties):
    oh, ow = _out_hw(g, False)
    assume(oh >= 1 and ow >= 1)
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 3, (1, g["h"], g["w"], c), dtype=np.int8) if ties else \
        rng.integers(-128, 128, (1, g["h"], g["w"], c), dtype=np.int8)
    key = AVG.qualified + ("_nhwc" if nhwc_sizes else "")
    program = pool_program(key, _sizes(x.shape, nhwc_sizes), _avg_scalars(g, False, -128),
                           _sizes((1, oh, ow, c), nhwc_sizes))
    _tosa_matches(program, x)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), g=geometries(), c=st.integers(1, 6),
       lo=st.integers(-128, 127), width=st.integers(0, 255), nhwc_sizes=st.booleans(),
       ceil_mode=st.booleans())
def test_max_tosa_lowering_is_bit_exact_with_the_reference(seed, g, c, lo, width, nhwc_sizes,
                                                           ceil_mode):
    oh, ow = _out_hw(g, ceil_mode)
    assume(oh >= 1 and ow >= 1)
    x = np.random.default_rng(seed).integers(-128, 128, (1, g["h"], g["w"], c), dtype=np.int8)
    key = MAX.qualified + ("_nhwc" if nhwc_sizes else "")
    program = pool_program(key, _sizes(x.shape, nhwc_sizes),
                           _max_scalars(g, -7, (lo, min(lo + width, 127)), ceil_mode),
                           _sizes((1, oh, ow, c), nhwc_sizes))
    _tosa_matches(program, x, families=("u85",))


G = {"h": 6, "w": 6, "kh": 3, "kw": 3, "sh": 1, "sw": 1, "ph": 0, "pw": 0}


@pytest.mark.parametrize(
    ("op", "g", "ceil_mode", "reason"),
    [
        (AVG, {**G, "ph": 1}, False, "avg pool with padding"),
        (AVG, {**G, "kh": 2, "kw": 2, "sh": 2, "sw": 2, "h": 5, "w": 5}, True, "partial window"),
        (AVG, {**G, "kh": 1, "kw": 1, "sh": 4, "sw": 4, "h": 9, "w": 9}, False,
         "avg pool stride 4 exceeds U55's limit of 3"),
        (MAX, {**G, "kh": 1, "kw": 1, "sh": 4, "sw": 4, "h": 9, "w": 9}, False,
         "max pool stride 4 exceeds U55's limit of 3"),
        (MAX, {**G, "kh": 257, "kw": 1, "h": 257, "w": 1}, False,
         "max pool kernel 257x1 exceeds the NPU's limit"),
        (MAX, {**G, "dh": 2}, False, "max pool with dilation"),
    ],
)
def test_npu_support_rules(op, g, ceil_mode, reason):
    oh, ow = _out_hw(g, ceil_mode)
    scalars = _avg_scalars(g, ceil_mode, -128) if op is AVG else _max_scalars(g, 0, (-128, 127))
    program = pool_program(op.qualified, _sizes((1, g["h"], g["w"], 2), False), scalars,
                           _sizes((1, oh, ow, 2), False))
    assert refused(op, program) is None
    got = npu_support(program.execution_plan[0], 0, "u55")
    assert got is not None and reason in got


# (changes to the scalars, input sizes (NHWC), out sizes (NHWC), the argument named)
_AVG_BAD = [
    ({"kernel_size": []}, (1, 6, 6, 2), (1, 4, 4, 2), A_AVG.kernel_size),
    ({"kernel_size": [3, 3, 3]}, (1, 6, 6, 2), (1, 4, 4, 2), A_AVG.kernel_size),
    ({"kernel_size": [0, 3]}, (1, 6, 6, 2), (1, 4, 4, 2), A_AVG.kernel_size),
    ({"stride": [0]}, (1, 6, 6, 2), (1, 4, 4, 2), A_AVG.stride),
    ({"stride": [1, 1 << 15]}, (1, 6, 6, 2), (1, 4, 1, 2), A_AVG.stride),
    ({"padding": [2, 0]}, (1, 6, 6, 2), (1, 6, 4, 2), A_AVG.padding),  # above kernel // 2
    ({"padding": [-1]}, (1, 6, 6, 2), (1, 4, 4, 2), A_AVG.padding),
    ({"zero_point": 128}, (1, 6, 6, 2), (1, 4, 4, 2), A_AVG.zero_point),
    ({"multiplier": 1 << 31}, (1, 6, 6, 2), (1, 4, 4, 2), A_AVG.multiplier),
    ({"shift": 32}, (1, 6, 6, 2), (1, 4, 4, 2), A_AVG.shift),
    ({}, (1, 6, 6, 2), (1, 4, 3, 2), A_AVG.out),  # not the pooled width
    ({}, (1, 6, 6, 2), (1, 4, 4, 3), A_AVG.out),  # not the input's channels
    ({"kernel_size": [7, 7]}, (1, 6, 6, 2), (1, 1, 1, 2), A_AVG.out),  # the pool has no output
]
_MAX_BAD = [
    ({"kernel_size": [3, 40000]}, (1, 6, 6, 2), (1, 4, 4, 2), A_MAX.kernel_size),
    ({"stride": [1, 1, 1]}, (1, 6, 6, 2), (1, 4, 4, 2), A_MAX.stride),
    ({"padding": [1, 2]}, (1, 6, 6, 2), (1, 6, 8, 2), A_MAX.padding),
    ({"dilation": [0, 1]}, (1, 6, 6, 2), (1, 4, 4, 2), A_MAX.dilation),
    ({"dilation": [1, 1, 1]}, (1, 6, 6, 2), (1, 4, 4, 2), A_MAX.dilation),
    ({"dilation": [2, 2]}, (1, 6, 6, 2), (1, 4, 4, 2), A_MAX.out),  # not the dilated size (2x2)
    ({"ceil_mode": True, "stride": [2, 2]}, (1, 6, 6, 2), (1, 2, 2, 2), A_MAX.out),  # ceil: 3x3
    ({"input_zero_point": -129}, (1, 6, 6, 2), (1, 4, 4, 2), A_MAX.input_zero_point),
    ({"output_zero_point": 1}, (1, 6, 6, 2), (1, 4, 4, 2), A_MAX.output_zero_point),
    ({"activation_min": 10, "activation_max": 9}, (1, 6, 6, 2), (1, 4, 4, 2), A_MAX.activation_max),
    ({"activation_min": -129}, (1, 6, 6, 2), (1, 4, 4, 2), A_MAX.activation_min),
    ({}, (1, 6, 6, 2), (2, 4, 4, 2), A_MAX.out),  # not the input's batch
]


def _bad_case(op, changes: dict, in_nhwc: tuple, out_nhwc: tuple, bad: int, nhwc_sizes: bool):
    base = _avg_scalars(G, False) if op is AVG else _max_scalars(G, 0, (-128, 127))
    scalars = {**base, **changes}
    x = np.zeros(in_nhwc, np.int8)
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(op.qualified + ("_nhwc" if nhwc_sizes else ""),
                           _native_args(op, x, scalars, np.zeros(out_nhwc, np.int8), nhwc_sizes))
    key = op.qualified + ("_nhwc" if nhwc_sizes else "")
    program = pool_program(key, _sizes(in_nhwc, nhwc_sizes), scalars, _sizes(out_nhwc, nhwc_sizes))
    assert_every_stage_names(ops.get(f"{key}.out"), program, bad, [_logical(x, nhwc_sizes)])


@pytest.mark.parametrize(("changes", "in_nhwc", "out_nhwc", "bad"), _AVG_BAD)
@pytest.mark.parametrize("nhwc_sizes", [False, True])
def test_avg_check_names_the_argument_the_c_kernel_names(changes, in_nhwc, out_nhwc, bad, nhwc_sizes):
    _bad_case(AVG, changes, in_nhwc, out_nhwc, bad, nhwc_sizes)


@pytest.mark.parametrize(("changes", "in_nhwc", "out_nhwc", "bad"), _MAX_BAD)
@pytest.mark.parametrize("nhwc_sizes", [False, True])
def test_max_check_names_the_argument_the_c_kernel_names(changes, in_nhwc, out_nhwc, bad, nhwc_sizes):
    _bad_case(MAX, changes, in_nhwc, out_nhwc, bad, nhwc_sizes)


@pytest.mark.parametrize("op", [AVG, MAX], ids=lambda o: o.key)
@pytest.mark.parametrize("nhwc_sizes", [False, True])
def test_check_refuses_an_input_without_nhwc_memory(op, nhwc_sizes):
    """The legacy op's input in contiguous NCHW bytes; the _nhwc op's in legacy NHWC ones."""
    scalars = _avg_scalars(G, False) if op is AVG else _max_scalars(G, 0, (-128, 127))
    key = op.qualified + ("_nhwc" if nhwc_sizes else "")
    sizes, order = _sizes((1, 6, 6, 2), nhwc_sizes), [0, 1, 2, 3] if not nhwc_sizes else NHWC_LEGACY
    x = np.zeros([sizes[d] for d in order], np.int8)
    out = np.zeros((1, 4, 4, 2), np.int8)
    args = _native_args(op, x, scalars, out, nhwc_sizes)
    args[op.schema.A.input] = native.TensorArg(x, sizes, order)
    with pytest.raises(native.NativeError, match=rf"argument {op.schema.A.input}\b"):
        native.call_kernel(key, args)
    program = pool_program(key, sizes, scalars, _sizes((1, 4, 4, 2), nhwc_sizes), dim_order=order)
    logical = np.zeros(sizes, np.int8)
    assert_every_stage_names(ops.get(f"{key}.out"), program, op.schema.A.input, [logical])


@pytest.mark.parametrize(
    ("changes", "scratch_sizes", "bad"),
    [({"ceil_mode": 0}, [0], A_AVG.ceil_mode), ({}, [1, 1], A_AVG.scratch)],
)
def test_avg_check_names_a_bad_ceil_mode_or_scratch(changes, scratch_sizes, bad):
    """ceil_mode an Int, not a Bool; the scratch 2-D."""
    from torchmcu.pte import program as pm

    scalars = {**_avg_scalars(G, False), **{k: pm.Int(v) for k, v in changes.items()}}
    args = _native_args(AVG, np.zeros((1, 6, 6, 2), np.int8), {**scalars, **changes},
                        np.zeros((1, 4, 4, 2), np.int8), True)
    args[A_AVG.scratch] = np.zeros(scratch_sizes, np.uint8)
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel("cortex_m::quantized_avg_pool2d_nhwc", args)
    program = pool_program("cortex_m::quantized_avg_pool2d_nhwc", [1, 6, 6, 2], scalars,
                           [1, 4, 4, 2], scratch_sizes=scratch_sizes)
    assert_every_stage_names(ops.get("cortex_m::quantized_avg_pool2d_nhwc.out"), program, bad,
                             [np.zeros((1, 6, 6, 2), np.int8)])


def test_scratch_is_the_c_kernel_s():
    """Zero bytes: an empty scratch passes the check and the C kernel alike."""
    assert AVG.scratch_bytes((1, 6, 6, 2)) == 0
    program = pool_program(AVG.qualified, [1, 2, 6, 6], _avg_scalars(G, False), [1, 2, 4, 4])
    assert refused(AVG, program) is None
