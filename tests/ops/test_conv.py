"""cortex_m::quantized_conv2d and quantized_depthwise_conv2d (and their _nhwc aliases), defined
once in torchmcu/ops/defs/conv.py: the references against a float-free loop on Python ints,
the C kernels (through the C runtime, twice) bit-exact with the references on generated cases,
the TOSA lowerings bit-exact with them on the TOSA reference model, the scratch sizes equal to
the C functions', the MAC counts, the NPU rules, and the one argument check naming the
argument the C kernel names, for the interpreter, NPU support and the TOSA lowering."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np
import pytest
import torch
from _arg_checks import assert_every_stage_names
from _intref import requantize_int
from _pte_programs import Const, Planned, call_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torchmcu import _native, native, ops
from torchmcu.npu.partition import instruction_macs
from torchmcu.npu.tosa.lower import (
    TosaLoweringError,
    lower_to_tosa,
    npu_support,
    run_tosa_reference,
)
from torchmcu.ops.defs.conv import (
    ONLY_PADDING,
    conv_output_size,
    quantized_conv2d,
    quantized_depthwise_conv2d,
)
from torchmcu.ops.defs.conv_transpose import transpose_conv_output_size
from torchmcu.ops.intmath import quantize_multiplier
from torchmcu.pte import program as pm
from torchmcu.pte.writer import serialize
from torchmcu.reference.interpreter import InterpreterError, run_program
from torchmcu.reference.scratch import SCRATCH_BYTES

CONV = ops.get("cortex_m::quantized_conv2d.out")
CONV_NHWC = ops.get("cortex_m::quantized_conv2d_nhwc.out")
DW = ops.get("cortex_m::quantized_depthwise_conv2d.out")
DW_NHWC = ops.get("cortex_m::quantized_depthwise_conv2d_nhwc.out")
NHWC = [0, 2, 3, 1]
PLANNED = ("input", "scratch", "out")


@dataclass
class T:
    """A tensor argument: its memory (physical array), logical sizes and dim order."""

    memory: np.ndarray
    sizes: list[int]
    dim_order: list[int]

    @property
    def logical(self) -> np.ndarray:
        return np.transpose(self.memory, np.argsort(self.dim_order))


def _activation(x_nhwc: np.ndarray, nhwc_sizes: bool) -> T:
    """An NHWC array as the op's activation: N,H,W,C sizes (_nhwc) or N,C,H,W in NHWC memory."""
    n, h, w, c = x_nhwc.shape
    if nhwc_sizes:
        return T(x_nhwc, [n, h, w, c], [0, 1, 2, 3])
    return T(x_nhwc, [n, c, h, w], NHWC)


def _tensor(v: np.ndarray | T) -> T:
    return v if isinstance(v, T) else T(v, list(v.shape), list(range(v.ndim)))


_TYPES = {
    np.dtype(np.int8): pm.ScalarType.CHAR,
    np.dtype(np.int32): pm.ScalarType.INT,
    np.dtype(np.uint8): pm.ScalarType.BYTE,
}


def _program(definition, case: dict[str, object]) -> pm.Program:
    args: dict[str, object] = {}
    for name, v in case.items():
        if isinstance(v, (np.ndarray, T)):
            t = _tensor(v)
            st_ = _TYPES[t.memory.dtype]
            if name in PLANNED:
                args[name] = Planned(t.sizes, t.dim_order, st_)
            else:
                args[name] = Const(t.memory.tobytes(), t.sizes, st_, t.dim_order)
        else:
            args[name] = v
    return call_program(definition.key, args)


def _native_args(case: dict[str, object]) -> list:
    return [
        native.TensorArg(v.memory, v.sizes, v.dim_order) if isinstance(v, T) else v
        for v in case.values()
    ]


def _requant(rng, cout: int) -> tuple[np.ndarray, np.ndarray]:
    pairs = [quantize_multiplier(float(s)) for s in rng.uniform(1e-4, 2e-2, cout)]
    if rng.random() < 0.2:
        pairs[0] = quantize_multiplier(1.7)  # a left shift
    return (np.array([p[0] for p in pairs], np.int32), np.array([p[1] for p in pairs], np.int32))


def _quant_args(rng, cout: int) -> dict[str, object]:
    """input_offset .. activation_max of a convolution call, by schema name."""
    m, s = _requant(rng, cout)
    lo = int(rng.integers(-128, 0))
    return {
        "input_offset": -int(rng.integers(-128, 128)),
        "output_offset": int(rng.integers(-128, 128)),
        "requantize_multipliers": m,
        "requantize_shifts": s,
        "activation_min": lo,
        "activation_max": int(rng.integers(lo, 128)),
    }


def _case(
    definition, rng, g: dict[str, int], n: int, cin: int, cout: int, per_group: int, with_bias: bool
) -> dict[str, object]:
    """One call's arguments by schema name; per_group: weight Cin (conv) or the depth
    multiplier (depthwise)."""
    depthwise = "depthwise" in definition.key
    nhwc_sizes = definition.variant_of is not None
    x = rng.integers(-128, 128, (n, g["h"], g["w"], cin), dtype=np.int8)
    shape = (1, g["kh"], g["kw"], cout) if depthwise else (cout, g["kh"], g["kw"], per_group)
    w = rng.integers(-128, 128, shape, dtype=np.int8)
    oh = conv_output_size(g["h"], g["kh"], g["sh"], g["ph"], g["dh"])
    ow = conv_output_size(g["w"], g["kw"], g["sw"], g["pw"], g["dw"])
    case: dict[str, object] = {
        "input": _activation(x, nhwc_sizes),
        "weight": w,
        "bias": rng.integers(-20000, 20000, cout, dtype=np.int32) if with_bias else None,
        "stride": [g["sh"], g["sw"]],
        "padding": [g["ph"], g["pw"]],
        "dilation": [g["dh"], g["dw"]],
    }
    if depthwise:
        case["depth_multiplier"] = per_group
    case.update(_quant_args(rng, cout))
    nbytes = definition.scratch_bytes((n, g["h"], g["w"], cin), shape)
    case["scratch"] = np.zeros(nbytes, np.uint8)
    case["out"] = _activation(np.zeros((n, oh, ow, cout), np.int8), nhwc_sizes)
    return case


GEOMETRY = {
    "h": st.integers(1, 9),
    "w": st.integers(1, 9),
    "kh": st.integers(1, 4),
    "kw": st.integers(1, 4),
    "sh": st.integers(1, 3),
    "sw": st.integers(1, 3),
    "ph": st.integers(0, 2),
    "pw": st.integers(0, 2),
    "dh": st.integers(1, 2),
    "dw": st.integers(1, 2),
}
geometry = st.fixed_dictionaries(GEOMETRY).filter(
    lambda g: (
        conv_output_size(g["h"], g["kh"], g["sh"], g["ph"], g["dh"]) >= 1
        and conv_output_size(g["w"], g["kw"], g["sw"], g["pw"], g["dw"]) >= 1
    )
)
channels = st.sampled_from([1, 2, 3, 4, 7, 16, 17])


def _draw(
    definition, seed: int, g, n: int, channel: int, groups: int, per_group: int, with_bias: bool
):
    rng = np.random.default_rng(seed)
    if "depthwise" in definition.key:
        return _case(definition, rng, g, n, channel, channel * per_group, per_group, with_bias)
    return _case(definition, rng, g, n, channel * groups, per_group * groups, channel, with_bias)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    depthwise=st.booleans(),
    groups=st.sampled_from([1, 2]),
    with_bias=st.booleans(),
)
def test_reference_is_the_integer_formula(seed, depthwise, groups, with_bias):
    rng = np.random.default_rng(seed)
    g = {
        "h": int(rng.integers(2, 6)),
        "w": int(rng.integers(2, 6)),
        "kh": int(rng.integers(1, 4)),
        "kw": int(rng.integers(1, 4)),
        "sh": int(rng.integers(1, 3)),
        "sw": int(rng.integers(1, 3)),
        "ph": int(rng.integers(0, 2)),
        "pw": int(rng.integers(0, 2)),
        "dh": 1,
        "dw": int(rng.integers(1, 3)),
    }
    if (
        min(
            conv_output_size(g["h"], g["kh"], g["sh"], g["ph"], g["dh"]),
            conv_output_size(g["w"], g["kw"], g["sw"], g["pw"], g["dw"]),
        )
        < 1
    ):
        return
    definition = DW if depthwise else CONV
    c = _draw(definition, seed, g, 1, 2, groups, 2, with_bias)
    x = c["input"].memory.astype(int)  # type: ignore[union-attr]
    w = c["weight"].astype(int)  # type: ignore[union-attr]
    args = {k: (v.memory if isinstance(v, T) else v) for k, v in c.items() if k != "out"}
    got = (quantized_depthwise_conv2d if depthwise else quantized_conv2d)(**args)
    _, h, wd, cin = x.shape
    _, oh, ow, cout = got.shape
    cin_g = 1 if depthwise else w.shape[3]
    cout_g = cout // (cin // cin_g) if not depthwise else 1
    for oc in range(cout):
        for i in range(oh):
            for j in range(ow):
                acc = 0 if c["bias"] is None else int(c["bias"][oc])  # type: ignore[index]
                for p in range(g["kh"]):
                    for q in range(g["kw"]):
                        ih = i * g["sh"] - g["ph"] + p * g["dh"]
                        iw = j * g["sw"] - g["pw"] + q * g["dw"]
                        if not (0 <= ih < h and 0 <= iw < wd):
                            continue
                        if depthwise:
                            acc += (
                                x[0, ih, iw, oc // c["depth_multiplier"]] + c["input_offset"]
                            ) * w[0, p, q, oc]
                        else:
                            base = (oc // cout_g) * cin_g
                            acc += sum(
                                (x[0, ih, iw, base + k] + c["input_offset"]) * w[oc, p, q, k]
                                for k in range(cin_g)
                            )
                m, s = int(c["requantize_multipliers"][oc]), int(c["requantize_shifts"][oc])  # type: ignore[index]
                want = requantize_int(acc, m, s) + c["output_offset"]
                assert got[0, i, j, oc] == min(max(want, c["activation_min"]), c["activation_max"])


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    g=geometry,
    n=st.integers(1, 2),
    channel=channels,
    groups=st.sampled_from([1, 1, 2, 3]),
    per_group=st.sampled_from([1, 2, 5]),
    with_bias=st.booleans(),
    key=st.sampled_from([CONV.key, CONV_NHWC.key, DW.key, DW_NHWC.key]),
)
def test_c_kernels_are_bit_exact_with_the_references(
    seed, g, n, channel, groups, per_group, with_bias, key
):
    definition = ops.get(key)
    case = _draw(definition, seed, g, n, channel, groups, per_group, with_bias)
    program = _program(definition, case)
    x = case["input"].logical  # type: ignore[union-attr]
    (reference,) = run_program(program, [x])
    (got,) = native.run_program(serialize(program), [x], runs=2)
    assert got.tobytes() == reference.tobytes()


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    g=geometry,
    channel=channels,
    per_group=st.sampled_from([1, 2, 3]),
    with_bias=st.booleans(),
    depthwise=st.booleans(),
    groups=st.sampled_from([1, 1, 2, 3]),
)
def test_tosa_lowerings_are_bit_exact_with_the_references(
    seed, g, channel, per_group, with_bias, depthwise, groups
):
    definition = DW if depthwise else CONV
    case = _draw(definition, seed, g, 1, channel, groups, per_group, with_bias)
    program = _program(definition, case)
    plan = program.execution_plan[0]
    x = case["input"].memory  # type: ignore[union-attr]
    in_hw, out_hw = x.shape[1:3], case["out"].memory.shape[1:3]  # type: ignore[union-attr]
    # an output row or column that reads only padding, with input rows or columns past it
    reach = [
        (o - 1) * s + d * (k - 1) + 1 - p
        for o, s, d, k, p in zip(
            out_hw, (g["sh"], g["sw"]), (g["dh"], g["dw"]), (g["kh"], g["kw"]), (g["ph"], g["pw"])
        )
    ]
    if any(r < 1 <= size for r, size in zip(reach, in_hw)) and min(out_hw) >= 1:
        for family in ("u55", "u65", "u85"):
            assert npu_support(plan, 0, family) == ONLY_PADDING
        with pytest.raises(TosaLoweringError, match="has no TOSA form"):
            lower_to_tosa(program)
        return
    for family in ("u55", "u65", "u85"):
        assert npu_support(plan, 0, family) is None
    (reference,) = run_program(program, [case["input"].logical])  # type: ignore[union-attr]
    (got,) = run_tosa_reference(lower_to_tosa(program), [case["input"].memory])  # type: ignore[union-attr]
    assert got.tobytes() == np.ascontiguousarray(np.transpose(reference, NHWC)).tobytes()


def _c_scratch_bytes(symbol: str, input_nhwc, weight) -> int:
    fn = getattr(ctypes.CDLL(_native.__file__), symbol)  # the kernels' own function
    fn.restype = ctypes.c_size_t
    dims = ctypes.c_int32 * 4
    return int(fn(dims(*input_nhwc), dims(*weight)))


@pytest.mark.parametrize("definition", [CONV, CONV_NHWC, DW, DW_NHWC], ids=lambda o: o.key)
def test_scratch_bytes_are_the_c_functions(definition):
    rng = np.random.default_rng(4)
    assert SCRATCH_BYTES[definition.qualified] is definition.scratch_bytes
    for _ in range(50):
        n, h, w, c = (int(v) for v in rng.integers(1, 40, 4))
        kh, kw = (int(v) for v in rng.integers(1, 6, 2))
        weight = (
            (1, kh, kw, c * 2)
            if "depthwise" in definition.key
            else (int(rng.integers(1, 70)), kh, kw, c)
        )
        want = _c_scratch_bytes(definition.kernel.scratch_c, (n, h, w, c), weight)
        assert definition.scratch_bytes((n, h, w, c), weight) == want


def test_macs():
    g = {"h": 7, "w": 6, "kh": 3, "kw": 2, "sh": 2, "sw": 1, "ph": 1, "pw": 0, "dh": 1, "dw": 1}
    for definition, macs_per_out in ((CONV, 3 * 2 * 4), (DW, 3 * 2)):
        case = _draw(definition, 5, g, 2, 4, 2, 3, True)  # conv: Cin 8 in 2 groups, weight Cin 4
        plan = _program(definition, case).execution_plan[0]
        out = case["out"].memory  # type: ignore[union-attr]
        assert instruction_macs(plan, plan.chains[0].instructions[0]) == out.size * macs_per_out


def test_npu_rules():
    g = {"h": 9, "w": 9, "kh": 3, "kw": 3, "sh": 4, "sw": 1, "ph": 0, "pw": 0, "dh": 1, "dw": 1}
    for definition in (CONV, DW):
        plan = _program(definition, _draw(definition, 6, g, 1, 4, 1, 2, True)).execution_plan[0]
        assert npu_support(plan, 0, "u55") == "convolution stride 4 exceeds U55's limit of 3"
        assert npu_support(plan, 0, "u85") is None
    # input column 0 lies under no window: padding 1, kernel 1, one output column
    g_pad = {**g, "sh": 1, "w": 1, "kw": 1, "pw": 1, "sw": 3}
    for definition in (CONV, DW):
        plan = _program(definition, _draw(definition, 6, g_pad, 1, 4, 1, 2, True)).execution_plan[0]
        assert npu_support(plan, 0, "u85") == ONLY_PADDING
    g = {**g, "sh": 1}
    grouped = _program(CONV, _draw(CONV, 7, g, 1, 2, 2, 1, True)).execution_plan[0]
    assert npu_support(grouped, 0, "u85") is None  # per group SLICE, CONV2D, RESCALE; CONCAT


def _base(definition) -> dict[str, object]:
    g = {"h": 4, "w": 5, "kh": 3, "kw": 2, "sh": 1, "sw": 2, "ph": 1, "pw": 0, "dh": 1, "dw": 1}
    return _draw(definition, 8, g, 1, 3, 1, 2, True)  # conv: Cin 3, Cout 2; depthwise: 3 x 2


def _bad_weight(definition, shape) -> np.ndarray:
    return np.zeros(shape, np.int8)


# (definition, changes to the base case, the argument named), in each C kernel's order
BAD = [
    (
        CONV,
        {"input": T(np.zeros((1, 3, 4, 5), np.int8), [1, 3, 4, 5], [0, 1, 2, 3])},
        CONV.schema.A.input,
    ),
    (
        CONV_NHWC,
        {"input": T(np.zeros((1, 4, 5, 3), np.int8), [1, 3, 4, 5], NHWC)},
        CONV.schema.A.input,
    ),
    (CONV, {"weight": np.zeros((2, 3, 2), np.int8)}, CONV.schema.A.weight),
    (
        CONV,
        {"weight": np.zeros((2, 3, 2, 2), np.int8)},
        CONV.schema.A.weight,
    ),  # 2 does not divide 3
    (
        CONV,
        {
            "input": _activation(np.zeros((1, 4, 5, 4), np.int8), False),
            "weight": np.zeros((3, 3, 2, 2), np.int8),
        },
        CONV.schema.A.weight,
    ),  # 3 out, 2 groups
    (CONV, {"bias": np.zeros(3, np.int32)}, CONV.schema.A.bias),
    (CONV, {"stride": [0, 2]}, CONV.schema.A.stride),
    (CONV, {"stride": [1]}, CONV.schema.A.stride),
    (CONV, {"padding": [-1, 0]}, CONV.schema.A.padding),
    (CONV, {"dilation": [1, 0]}, CONV.schema.A.dilation),
    (CONV, {"input_offset": -128}, CONV.schema.A.input_offset),
    (CONV, {"output_offset": 128}, CONV.schema.A.output_offset),
    (CONV, {"requantize_multipliers": np.zeros(3, np.int32)}, CONV.schema.A.requantize_multipliers),
    (CONV, {"requantize_shifts": np.zeros(2, np.int8)}, CONV.schema.A.requantize_shifts),
    (CONV, {"activation_min": 5, "activation_max": 4}, CONV.schema.A.activation_max),
    (CONV, {"scratch": np.zeros((2, 2), np.uint8)}, CONV.schema.A.scratch),
    (CONV, {"out": _activation(np.zeros((1, 4, 4, 2), np.int8), False)}, CONV.schema.A.out),
    (CONV, {"out": _activation(np.zeros((1, 4, 3, 2), np.int8), True)}, CONV.schema.A.out),
    (DW, {"weight": np.zeros((2, 3, 2, 6), np.int8)}, DW.schema.A.weight),
    (DW, {"bias": None, "dilation": [1, -1]}, DW.schema.A.dilation),
    (DW, {"depth_multiplier": 0}, DW.schema.A.depth_multiplier),
    (DW, {"depth_multiplier": 3}, DW.schema.A.depth_multiplier),  # 3 x 3 != 6
    (DW, {"requantize_shifts": np.zeros(5, np.int32)}, DW.schema.A.requantize_shifts),
    (DW, {"scratch": np.zeros((2, 3), np.uint8)}, DW.schema.A.scratch),
    (DW_NHWC, {"out": _activation(np.zeros((1, 4, 3, 6), np.int8), False)}, DW.schema.A.out),
]


@pytest.mark.parametrize(
    ("definition", "changes", "bad"), BAD, ids=lambda v: getattr(v, "key", None)
)
def test_check_names_the_argument_the_c_kernel_names(definition, changes, bad):
    case = {**_base(definition), **changes}
    with pytest.raises(native.NativeError, match=rf"bad_argument {bad}\)"):
        native.call_kernel(definition.qualified, _native_args(case))
    inputs = [_tensor(case["input"]).logical]  # type: ignore[arg-type]
    program = _program(definition, case)
    if definition.variant_of is not None:  # no TOSA lowering takes N,H,W,C sizes
        with pytest.raises(
            InterpreterError, match=rf"argument {bad} \({definition.schema.args[bad].name}\)"
        ):
            run_program(program, inputs)
        return
    assert_every_stage_names(definition, program, bad, inputs)


@pytest.mark.parametrize("definition", [CONV, DW], ids=lambda o: o.key)
def test_a_shift_out_of_range_is_named_where_the_values_are_read(definition):
    # NPU support sees no constant's values (the kernel checks them); the interpreter and the
    # TOSA lowering read them
    case = _base(definition)
    case["requantize_shifts"] = np.array(
        [0] * (len(case["requantize_shifts"]) - 1) + [32], np.int32
    )  # type: ignore[arg-type]
    bad = definition.schema.A.requantize_shifts
    with pytest.raises(native.NativeError, match=rf"bad_argument {bad}\)"):
        native.call_kernel(definition.qualified, _native_args(case))
    program = _program(definition, case)
    with pytest.raises(InterpreterError, match=rf"argument {bad} \(requantize_shifts\)"):
        run_program(program, [_tensor(case["input"]).logical])  # type: ignore[arg-type]
    with pytest.raises(TosaLoweringError, match=rf"argument {bad} \(requantize_shifts\)"):
        lower_to_tosa(program)


TCONV = ops.get("cortex_m::quantized_transpose_conv2d.out")
TCONV_NHWC = ops.get("cortex_m::quantized_transpose_conv2d_nhwc.out")


def _tcase(definition, seed: int, g: dict[str, int], n: int, cin: int, cout: int, with_bias: bool):
    rng = np.random.default_rng(seed)
    nhwc_sizes = definition.variant_of is not None
    x = rng.integers(-128, 128, (n, g["h"], g["w"], cin), dtype=np.int8)
    w = rng.integers(-128, 128, (cout, g["kh"], g["kw"], cin), dtype=np.int8)
    oh = transpose_conv_output_size(g["h"], g["kh"], g["sh"], g["ph"], g["oph"], g["dh"])
    ow = transpose_conv_output_size(g["w"], g["kw"], g["sw"], g["pw"], g["opw"], g["dw"])
    nbytes = TCONV.scratch_bytes((n, g["h"], g["w"], cin), w.shape)
    return {
        "input": _activation(x, nhwc_sizes),
        "weight": w,
        "bias": rng.integers(-20000, 20000, cout, dtype=np.int32) if with_bias else None,
        "stride": [g["sh"], g["sw"]],
        "padding": [g["ph"], g["pw"]],
        "output_padding": [g["oph"], g["opw"]],
        "dilation": [g["dh"], g["dw"]],
        **_quant_args(rng, cout),
        "scratch": np.zeros(nbytes, np.uint8),
        "output_scratch": np.zeros(1, np.uint8),
        "out": _activation(np.zeros((n, oh, ow, cout), np.int8), nhwc_sizes),
    }


tgeometry = st.fixed_dictionaries(
    {
        **GEOMETRY,
        "h": st.integers(1, 6),
        "w": st.integers(1, 6),
        "oph": st.integers(0, 2),
        "opw": st.integers(0, 2),
    }
).filter(
    lambda g: (
        (g["oph"] < g["sh"] or g["oph"] < g["dh"])
        and (g["opw"] < g["sw"] or g["opw"] < g["dw"])
        and transpose_conv_output_size(g["h"], g["kh"], g["sh"], g["ph"], g["oph"], g["dh"]) >= 1
        and transpose_conv_output_size(g["w"], g["kw"], g["sw"], g["pw"], g["opw"], g["dw"]) >= 1
    )
)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), g=tgeometry, cin=st.sampled_from([1, 3, 5, 16, 17]),
       cout=st.sampled_from([1, 2, 4, 7]), with_bias=st.booleans(), nhwc=st.booleans())  # fmt: skip
def test_transpose_reference_and_c_kernel_against_torch(seed, g, cin, cout, with_bias, nhwc):
    """The accumulator is float64 torch conv_transpose2d on the integer values (exact: every
    partial sum is an integer far below 2**53); the requantization is the integer formula."""
    definition = TCONV_NHWC if nhwc else TCONV
    c = _tcase(definition, seed, g, 1 + seed % 2, cin, cout, with_bias)
    x = c["input"].memory.astype(np.float64) + c["input_offset"]  # type: ignore[union-attr]
    w = c["weight"].astype(np.float64)  # type: ignore[union-attr]
    acc = torch.nn.functional.conv_transpose2d(
        torch.from_numpy(x.transpose(0, 3, 1, 2)),
        torch.from_numpy(w.transpose(3, 0, 1, 2)),  # OHWI -> [Cin, Cout, KH, KW]
        None if c["bias"] is None else torch.from_numpy(c["bias"].astype(np.float64)),  # type: ignore[union-attr]
        stride=c["stride"], padding=c["padding"], output_padding=c["output_padding"],
        dilation=c["dilation"],
    ).numpy().transpose(0, 2, 3, 1)  # fmt: skip
    m, s = c["requantize_multipliers"], c["requantize_shifts"]
    want = (
        np.array(
            [
                requantize_int(int(a), int(m[i % cout]), int(s[i % cout]))
                for i, a in enumerate(acc.ravel())
            ]  # type: ignore[index]
        ).reshape(acc.shape)
        + c["output_offset"]
    )
    want = np.clip(want, c["activation_min"], c["activation_max"]).astype(np.int8)
    program = _program(definition, c)
    inputs = [c["input"].logical]  # type: ignore[union-attr]
    (reference,) = run_program(program, inputs)
    (got,) = native.run_program(serialize(program), inputs, runs=2)
    want_logical = want if nhwc else want.transpose(0, 3, 1, 2)
    assert reference.tobytes() == np.ascontiguousarray(want_logical).tobytes()
    assert got.tobytes() == reference.tobytes()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), g=tgeometry, cin=st.sampled_from([1, 4, 9]),
       cout=st.sampled_from([1, 3, 8]), with_bias=st.booleans())  # fmt: skip
def test_transpose_tosa_lowering_is_bit_exact_with_the_reference(seed, g, cin, cout, with_bias):
    g = {
        **g,
        "dh": 1,
        "dw": 1,
        "oph": min(g["oph"], g["sh"] - 1),
        "opw": min(g["opw"], g["sw"] - 1),
    }
    if (
        min(
            transpose_conv_output_size(g["h"], g["kh"], g["sh"], g["ph"], g["oph"], 1),
            transpose_conv_output_size(g["w"], g["kw"], g["sw"], g["pw"], g["opw"], 1),
        )
        < 1
    ):
        return
    c = _tcase(TCONV, seed, g, 1, cin, cout, with_bias)
    program = _program(TCONV, c)
    plan = program.execution_plan[0]
    reason = npu_support(plan, 0, "u85")
    pads_fit = (
        max(g["ph"], g["ph"] - g["oph"]) < g["kh"] and max(g["pw"], g["pw"] - g["opw"]) < g["kw"]
    )
    if not pads_fit:
        assert reason == "transposed convolution padding of the kernel size or more"
        return
    assert reason is None
    (reference,) = run_program(program, [c["input"].logical])  # type: ignore[union-attr]
    (got,) = run_tosa_reference(lower_to_tosa(program), [c["input"].memory])  # type: ignore[union-attr]
    assert got.tobytes() == np.ascontiguousarray(np.transpose(reference, NHWC)).tobytes()


def test_transpose_npu_rules_and_macs():
    g = {"h": 3, "w": 4, "kh": 3, "kw": 3, "sh": 2, "sw": 2, "ph": 1, "pw": 1, "oph": 1, "opw": 0,
         "dh": 2, "dw": 1}  # fmt: skip
    c = _tcase(TCONV, 3, g, 2, 5, 6, True)
    plan = _program(TCONV, c).execution_plan[0]
    assert npu_support(plan, 0, "u85") == "dilated transposed convolution is not lowered to the NPU"
    # every input element meets every output channel through every tap
    assert instruction_macs(plan, plan.chains[0].instructions[0]) == 2 * 3 * 4 * 5 * 6 * 9
    c = _tcase(TCONV, 3, {**g, "dh": 1, "sh": 4, "oph": 0}, 1, 5, 6, True)
    plan = _program(TCONV, c).execution_plan[0]
    assert npu_support(plan, 0, "u55") == "transposed convolution stride 4 exceeds U55's limit of 3"


def test_transpose_scratch_bytes_are_the_c_function():
    rng = np.random.default_rng(4)
    for _ in range(30):
        n, h, w, c = (int(v) for v in rng.integers(1, 40, 4))
        weight = (int(rng.integers(1, 70)), *(int(v) for v in rng.integers(1, 6, 2)), c)
        want = _c_scratch_bytes(TCONV.kernel.scratch_c, (n, h, w, c), weight)
        assert TCONV.scratch_bytes((n, h, w, c), weight) == want


def _tbase() -> dict[str, object]:
    g = {"h": 3, "w": 4, "kh": 3, "kw": 2, "sh": 2, "sw": 1, "ph": 1, "pw": 0, "oph": 1, "opw": 0,
         "dh": 1, "dw": 1}  # fmt: skip
    return _tcase(TCONV, 8, g, 1, 3, 2, True)


A = TCONV.schema.A
TBAD = [
    ({"input": T(np.zeros((1, 3, 4, 5), np.int8), [1, 3, 4, 5], [0, 1, 2, 3])}, A.input),
    ({"weight": np.zeros((2, 3, 2), np.int8)}, A.weight),
    ({"weight": np.zeros((2, 3, 2, 4), np.int8)}, A.weight),  # Cin 4 != 3
    ({"bias": np.zeros(3, np.int32)}, A.bias),
    ({"stride": [0, 1]}, A.stride),
    ({"padding": [-1, 0]}, A.padding),
    ({"dilation": [1, 0]}, A.dilation),
    ({"output_padding": [2, 0]}, A.output_padding),  # not below stride 2 or dilation 1
    ({"output_padding": [0]}, A.output_padding),
    ({"input_offset": -128}, A.input_offset),
    ({"requantize_shifts": np.zeros(3, np.int32)}, A.requantize_shifts),
    ({"activation_min": 5, "activation_max": 4}, A.activation_max),
    ({"scratch": np.zeros((2, 2), np.uint8)}, A.scratch),
    ({"output_scratch": np.zeros((2, 2), np.uint8)}, A.output_scratch),
    ({"out": _activation(np.zeros((1, 6, 4, 2), np.int8), False)}, A.out),
]


@pytest.mark.parametrize(("changes", "bad"), TBAD)
def test_transpose_check_names_the_argument_the_c_kernel_names(changes, bad):
    case = {**_tbase(), **changes}
    with pytest.raises(native.NativeError, match=rf"bad_argument {bad}\)"):
        native.call_kernel(TCONV.qualified, _native_args(case))
    inputs = [_tensor(case["input"]).logical]  # type: ignore[arg-type]
    assert_every_stage_names(TCONV, _program(TCONV, case), bad, inputs)
