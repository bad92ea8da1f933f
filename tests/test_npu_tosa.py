"""TOSA 1.0 lowering of NPU sub-Programs (torchmcu.npu.tosa.lower) and carving (subprogram).

The TOSA reference model's output must equal our reference interpreter's, bit for bit,
on the same sub-Program and inputs: for the six example models' whole int8 part and for
targeted programs (avg-pool ties, add/mul scales, per-channel conv geometry, depthwise
channel counts, layout ops). Vela must compile each model's graph for U55 and U85.
"""

from __future__ import annotations

import os

os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")  # before tosa_reference_model is imported

import numpy as np
import pytest
from torchmcu import ops
from torchmcu.lower.builder import NHWC_DIM_ORDER, ProgramBuilder
from torchmcu.npu.subprogram import CarveError, carve
from torchmcu.npu.tosa.lower import (
    TosaLoweringError,
    lower_to_tosa,
    npu_support,
    run_tosa_reference,
)
from torchmcu.ops.defs.pool import divisor
from torchmcu.ops.intmath import tosa_double_round
from torchmcu.plan import BufferRequest, plan_memory
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import run_program
from torchmcu.reference.quant import quantize_multiplier, round_half_away

pytest.importorskip("tosa_serializer")
pytest.importorskip("tosa_reference_model")

MODELS = ("mlp", "small_cnn", "ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder")
# the ops that never run on the NPU (quantize/dequantize: they work on float tensors)
FLOAT_OPS = frozenset(o.qualified for o in ops.ops() if o.no_npu is not None)


# --- helpers ------------------------------------------------------------------------------


def physical(x: np.ndarray, t: pm.Tensor) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(x, t.dim_order))


def random_inputs(program: pm.Program, rng: np.random.Generator) -> list[np.ndarray]:
    plan = program.execution_plan[0]
    return [rng.integers(-128, 128, plan.values[i].sizes).astype(np.int8) for i in plan.inputs]  # type: ignore[union-attr]


def assert_tosa_matches(
    program: pm.Program, samples: int = 3, seed: int = 0, inputs=None, family=None
) -> None:
    """TOSA reference model == reference interpreter on `samples` random int8 inputs."""
    plan = program.execution_plan[0]
    graph = lower_to_tosa(program, family=family)
    assert graph.inputs == plan.inputs and graph.outputs == plan.outputs
    rng = np.random.default_rng(seed)
    cases = inputs if inputs is not None else [random_inputs(program, rng) for _ in range(samples)]
    for xs in cases:
        expected = run_program(program, xs)
        got = run_tosa_reference(
            graph, [physical(x, plan.values[i]) for x, i in zip(xs, plan.inputs)]
        )
        assert len(got) == len(expected)
        for k, (e, g, vi) in enumerate(zip(expected, got, plan.outputs)):
            want = physical(e, plan.values[vi])  # type: ignore[arg-type]
            assert g.dtype == np.int8 and g.shape == want.shape, f"output {k}: {g.dtype}{g.shape}"
            diff = np.flatnonzero(g != want)
            assert diff.size == 0, (
                f"output {k}: {diff.size} of {want.size} differ, first at {diff[0]}: "
                f"tosa {g.reshape(-1)[diff[0]]} reference {want.reshape(-1)[diff[0]]}"
            )


def vela_compile(flatbuffer: bytes, accelerator: str) -> dict:
    """Compiles with Vela through torchmcu.npu.vela (our shipped ini); returns the estimate."""
    from torchmcu.npu.config import resolve_target
    from torchmcu.npu.vela import compile_tosa

    result = compile_tosa(flatbuffer, resolve_target(None, accelerator))
    assert result.command_stream[:4] == b"COP1"
    return result.estimate


class Net:
    """A hand-built single-plan program (ProgramBuilder), independent of torch export."""

    def __init__(self) -> None:
        self.b = ProgramBuilder()
        self.inputs: list[int] = []

    def act(self, sizes, nhwc: bool = True, key: str = "t") -> int:
        buf = self.b.new_buffer(key, int(np.prod(sizes)))
        order = NHWC_DIM_ORDER if nhwc and len(sizes) == 4 else list(range(len(sizes)))
        return self.b.planned(buf, pm.ScalarType.CHAR, sizes, order)

    def input(self, sizes, nhwc: bool = True) -> int:
        vi = self.act(sizes, nhwc, "in")
        self.inputs.append(vi)
        return vi

    def scratch(self, nbytes: int = 64) -> int:
        return self.b.planned(self.b.new_buffer("scratch", nbytes), pm.ScalarType.BYTE, [nbytes])

    def ints(self, values) -> int:
        return self.b.constant(np.asarray(values, dtype=np.int32))

    def finish(self, outputs: list[int]) -> pm.Program:
        program, _ = self.b.finish(self.inputs, outputs, plan_memory, BufferRequest)
        return program


def requant_params(rng: np.random.Generator, n: int, lo: float = 1e-4, hi: float = 4e-3):
    pairs = [quantize_multiplier(float(s)) for s in rng.uniform(lo, hi, n)]
    return [m for m, _ in pairs], [s for _, s in pairs]


def _window_out(net: Net, x: int, cout: int | None, k, stride, padding, dilation=(1, 1)) -> int:
    """The int8 activation a window op (floor mode) writes; cout None keeps x's channels."""
    n, c, h, w = net.b.tensor(x).sizes
    oh = (h + 2 * padding[0] - dilation[0] * (k[0] - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (k[1] - 1) - 1) // stride[1] + 1
    return net.act([n, c if cout is None else cout, oh, ow])


def _conv_constants(net: Net, rng, weight_shape, cout: int, *scale_range) -> tuple:
    """Random int8 weights of weight_shape, int32 bias and per-channel requantization."""
    weight = net.b.constant(rng.integers(-127, 128, weight_shape).astype(np.int8))
    bias = net.b.constant(rng.integers(-3000, 3000, cout).astype(np.int32))
    return (weight, bias, *requant_params(rng, cout, *scale_range))


def _requantize_args(net: Net, mults, shifts, act) -> list[int]:
    """A convolution's last arguments: per-channel requantization, clamp and scratch."""
    return [
        net.ints(mults),
        net.ints(shifts),
        net.b.int_(act[0]),
        net.b.int_(act[1]),
        net.scratch(),
    ]


def conv(
    net: Net,
    x: int,
    rng,
    cout: int,
    k,
    stride,
    padding,
    dilation=(1, 1),
    act=(-128, 127),
    in_off=5,
    out_off=-3,
) -> int:
    cin = net.b.tensor(x).sizes[1]
    out = _window_out(net, x, cout, k, stride, padding, dilation)
    weight, bias, mults, shifts = _conv_constants(net, rng, (cout, *k, cin), cout)
    b = net.b
    args = [
        x,
        weight,
        bias,
        *map(b.int_list, (stride, padding)),
        b.int_list(dilation),
        b.int_(in_off),
        b.int_(out_off),
        *_requantize_args(net, mults, shifts, act),
    ]
    b.call("cortex_m::quantized_conv2d", args, out)
    return out


def depthwise(net: Net, x: int, rng, multiplier: int, k, stride, padding, act=(-128, 127)) -> int:
    cout = net.b.tensor(x).sizes[1] * multiplier
    out = _window_out(net, x, cout, k, stride, padding)
    weight, bias, mults, shifts = _conv_constants(net, rng, (1, *k, cout), cout, 1e-3, 2e-2)
    b = net.b
    args = [
        x,
        weight,
        bias,
        *map(b.int_list, (stride, padding)),
        b.int_list([1, 1]),
        b.int_(multiplier),
        b.int_(-7),
        b.int_(2),
        *_requantize_args(net, mults, shifts, act),
    ]
    b.call("cortex_m::quantized_depthwise_conv2d", args, out)
    return out


def avg_pool(net: Net, x: int, k, stride, padding=(0, 0), ceil_mode: bool = False) -> int:
    out, b = _window_out(net, x, None, k, stride, padding), net.b
    args = [
        x,
        b.int_list(k),
        b.int_list(stride),
        b.int_list(padding),
        b.bool_(ceil_mode),
        b.int_(-128),
        b.int_(1 << 30),
        b.int_(0),
        net.scratch(0),
    ]
    b.call("cortex_m::quantized_avg_pool2d", args, out)
    return out


def max_pool(net: Net, x: int, k, stride, padding=(0, 0), act=(-128, 127)) -> int:
    out, b = _window_out(net, x, None, k, stride, padding), net.b
    args = [
        x,
        b.int_list(k),
        b.int_list(stride),
        b.int_list(padding),
        b.int_list([1, 1]),
        b.bool_(False),
        b.int_(-20),
        b.int_(-20),
        b.int_(act[0]),
        b.int_(act[1]),
    ]
    b.call("cortex_m::quantized_max_pool2d", args, out)
    return out


# --- the six models ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported():
    torch = pytest.importorskip("torch")
    import torchmcu
    from torchmcu.examples import models

    torch.manual_seed(0)
    programs = {}
    for name in MODELS:
        model, example = models.build(name, seed=0)
        result = torchmcu.export(
            model, example, calibration=models.calibration(name, 4, seed=1), int8_io=True
        )
        programs[name] = result.program
    return programs


def int8_part(program: pm.Program) -> list[int]:
    plan = program.execution_plan[0]
    return [
        i
        for i, instr in enumerate(plan.chains[0].instructions)
        if isinstance(instr, pm.KernelCall) and plan.operators[instr.op_index].name not in FLOAT_OPS
    ]


@pytest.fixture(scope="module")
def carved(exported):
    return {name: carve(program, int8_part(program)) for name, program in exported.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_model_bit_exact(name, exported, carved):
    sub = carved[name].program
    # The sub-Program computes what the whole program computes (int8_io: the whole program is int8).
    rng = np.random.default_rng(1)
    xs = random_inputs(sub, rng)
    assert all(
        np.array_equal(a, b) for a, b in zip(run_program(exported[name], xs), run_program(sub, xs))
    )
    assert_tosa_matches(sub, samples=3, seed=MODELS.index(name))


@pytest.mark.slow
def test_carved_program_runs_on_native_runtime(carved):
    native = pytest.importorskip("torchmcu.native")
    from torchmcu.pte.writer import serialize

    for name in ("small_cnn", "resnet8"):
        sub = carved[name].program
        xs = random_inputs(sub, np.random.default_rng(2))
        got = native.run_program(serialize(sub), xs)
        assert all(np.array_equal(a, b) for a, b in zip(run_program(sub, xs), got)), name


@pytest.mark.slow
@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256", "ethos-u85-256"])
def test_vela_compiles_models(accelerator, carved):
    pytest.importorskip("ethosu.vela")
    for name in MODELS:
        estimate = vela_compile(lower_to_tosa(carved[name].program).flatbuffer, accelerator)
        assert estimate["cycles_npu"] > 0, name


# --- carving -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_carve_middle_chunk(exported):
    program = exported["resnet8"]
    plan = program.execution_plan[0]
    ops = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert ops[1:5] == ["cortex_m::quantized_conv2d"] * 3 + ["cortex_m::quantized_add"]
    c = carve(program, [2, 3, 4])  # conv, conv, add: reads conv 1's output twice
    conv1_out = plan.chains[0].instructions[1].args[-2]
    add_out = plan.chains[0].instructions[4].args[-2]
    assert c.inputs == [conv1_out] and c.outputs == [add_out]
    sub_plan = c.program.execution_plan[0]
    assert len(sub_plan.chains[0].instructions) == 3
    assert sub_plan.values[sub_plan.inputs[0]].sizes == plan.values[conv1_out].sizes  # type: ignore[union-attr]
    assert_tosa_matches(c.program, samples=2)


@pytest.mark.slow
def test_carve_output_read_later_outside(exported):
    # conv1 (instruction 1) feeds conv2 and the residual add; carving conv1+conv2 must
    # export both results, in production order.
    program = exported["resnet8"]
    plan = program.execution_plan[0]
    c = carve(program, [1, 2])
    outs = [plan.chains[0].instructions[i].args[-2] for i in (1, 2)]
    assert c.outputs == outs
    assert_tosa_matches(c.program, samples=2)  # a graph output also read inside the graph


@pytest.mark.slow
def test_carve_rejects_non_convex_and_bad_indices(exported):
    program = exported["resnet8"]
    with pytest.raises(CarveError, match="not convex"):
        carve(program, [2, 4])  # 4 reads 3, which is outside and reads 2
    with pytest.raises(CarveError, match="not a KernelCall"):
        carve(program, [999])
    with pytest.raises(CarveError, match="duplicate"):
        carve(program, [2, 2])


# --- targeted ops ----------------------------------------------------------------------------------


def test_divisor_rescale_is_exact():
    for count in (1, 2, 3, 4, 6, 9, 16, 25, 49, 64, 125, 196):
        weight, multiplier, shift = divisor(count)
        sums = np.arange(-128 * count, 127 * count + 1)
        assert np.array_equal(
            tosa_double_round(sums * weight, multiplier, shift), round_half_away(sums, count)
        )


def test_avg_pool_negative_ties():
    # 2x2 windows: sums -2, 2, -10, 10, -6 -> means -0.5, 0.5, -2.5, 2.5, -1.5: half away from zero.
    windows = [[-1, -1, 0, 0], [1, 1, 0, 0], [-3, -3, -3, -1], [3, 3, 3, 1], [-2, -2, -1, -1]]
    expected = [-1, 1, -3, 3, -2]
    x = np.zeros((1, 2, 2 * len(windows), 1), dtype=np.int8)  # NHWC
    for k, win in enumerate(windows):
        x[0, :, 2 * k : 2 * k + 2, 0] = np.array(win).reshape(2, 2)
    net = Net()
    xi = net.input([1, 1, 2, 2 * len(windows)])
    out = avg_pool(net, xi, (2, 2), (2, 2))
    program = net.finish([out])
    logical = np.transpose(x, (0, 3, 1, 2))
    got = run_tosa_reference(lower_to_tosa(program), [x])[0]
    assert got.reshape(-1).tolist() == expected
    assert run_program(program, [logical])[0].reshape(-1).tolist() == expected


@pytest.mark.parametrize(
    ("shape", "k", "stride"),
    [
        ((1, 5, 12, 9), (3, 3), (3, 3)),  # count 9, C not a multiple of 4
        ((1, 7, 25, 5), (25, 5), (25, 5)),  # DS-CNN-like global pool, count 125, stride 25 -> 1
        ((1, 16, 8, 8), (8, 8), (8, 8)),  # ResNet8-like global pool
        ((1, 3, 9, 7), (2, 3), (2, 2)),  # crop: rows/cols past the last window
        ((1, 4, 6, 6), (5, 5), (5, 5)),  # window smaller than the input, 1x1 output
    ],
)
def test_avg_pool_shapes(shape, k, stride):
    net = Net()
    xi = net.input(list(shape))
    program = net.finish([avg_pool(net, xi, k, stride)])
    assert_tosa_matches(program, samples=4)
    # Ties on purpose: inputs from a few values make exact halves common.
    rng = np.random.default_rng(3)
    ties = [[rng.choice(np.array([-3, -1, 0, 1, 2], dtype=np.int8), size=shape)] for _ in range(3)]
    assert_tosa_matches(program, inputs=ties)


@pytest.mark.parametrize(
    ("shape", "k"),
    [
        ((1, 16, 8, 8), (8, 8)),  # ResNet8's pool: count 64
        ((1, 3, 4, 6), (4, 6)),  # count 24, C = 3
        ((1, 5, 9, 8), (8, 8)),  # one input row past the window: cropped first
        ((1, 4, 1, 6), (1, 6)),  # one row: one strip, nothing to sum
        ((1, 2, 2, 66), (2, 66)),  # rows longer than STRIP_MAX (U55/U65): transposed form
    ],
)
@pytest.mark.parametrize("family", [None, "u55", "u85"])
def test_global_even_pool_sums_strips(shape, k, family, monkeypatch):
    # An even-count window over the whole input: row sums (a DEPTHWISE_CONV2D spanning a row)
    # added up (U85: ADDs, else REDUCE_SUM), or for long rows the positions transposed into
    # channels and summed by a 1x1 CONV2D; half away from zero at ties.
    from torchmcu.npu.tosa.graph import Graph
    from torchmcu.ops.global_sum import STRIP_MAX

    ops: list[tuple[str, list[tuple[int, ...]]]] = []
    real_op = Graph.op

    def spy(self, op, inputs, *rest):
        ops.append((op, [t.shape for t in inputs]))
        return real_op(self, op, inputs, *rest)

    monkeypatch.setattr(Graph, "op", spy)
    net = Net()
    xi = net.input(list(shape))
    program = net.finish([avg_pool(net, xi, k, k)])
    lower_to_tosa(program, family=family)
    names = [op for op, _ in ops]
    assert "MATMUL" not in names and "AVG_POOL2D" not in names
    if k[1] > STRIP_MAX:
        assert "TRANSPOSE" in names and "CONV2D" in names and "DEPTHWISE_CONV2D" not in names
    else:
        assert "TRANSPOSE" not in names
        kernels = [shapes[1][:2] for op, shapes in ops if op == "DEPTHWISE_CONV2D"]
        assert kernels == [(1, k[1])]  # one row sum per row, never the whole window
        # U85 ADDs the k[0] row sums; U55/U65 REDUCE_SUM them (one row: nothing to sum)
        adds, reduces = names.count("ADD"), names.count("REDUCE_SUM")
        assert (adds, reduces) == ((k[0] - 1, 0) if family == "u85" else (0, int(k[0] > 1)))
    n, c, h, w = shape
    rng = np.random.default_rng(5)
    ties = rng.choice(np.array([-3, -1, 0, 1, 2], dtype=np.int8), size=(n, h, w, c))
    ties[..., 0] = 0
    ties[0, : k[0], : k[1] // 2, 0] = -1  # the first channel's mean is exactly -0.5
    extremes = np.full((n, h, w, c), -128, dtype=np.int8)
    extremes[..., -1] = 127
    inputs = [[np.transpose(a, (0, 3, 1, 2))] for a in (ties, extremes)]
    assert_tosa_matches(program, samples=3, inputs=inputs, family=family)
    graph = lower_to_tosa(program, family=family)
    assert run_tosa_reference(graph, [ties])[0].reshape(-1)[0] == -1


@pytest.mark.parametrize("family", [None, "u55", "u65", "u85"])
@pytest.mark.parametrize(
    ("shape", "weight", "zero_point"),
    [
        ((1, 2, 2, 8), 1, -128),  # a squeeze-excite's 2x2 mean: int16 partial sums
        ((1, 2, 2, 8), 127, 127),  # weight * (x - zp) up to 32,385: partial sums stay int32
        ((1, 4, 4, 24), 1, 5),  # 16 positions: U55/U65 halve the row sums
        ((1, 1, 4, 8), 64, 0),  # one row
        ((1, 4, 1, 8), 2, -1),  # one column
        ((1, 2, 8, 8), 3, -7),
    ],
)
def test_global_sum_by_halves(shape, weight, zero_point, family, monkeypatch):
    # At most 16 positions, H and W powers of two: the halves ADDed (H, then W) down to one
    # position, exact in int32 whatever the weight and zero point; checked against numpy.
    from torchmcu.npu.tosa.graph import Graph
    from torchmcu.npu.tosa.lower import TosaGraph
    from torchmcu.ops.global_sum import global_sum

    ops_seen: list[tuple[str, list[tuple[int, ...]], str]] = []
    real_op = Graph.op

    def spy(self, op, inputs, out_shape, out_dtype, attribute):
        ops_seen.append((op, [t.shape for t in inputs], out_dtype))
        return real_op(self, op, inputs, out_shape, out_dtype, attribute)

    monkeypatch.setattr(Graph, "op", spy)
    g = Graph(family)
    x = g.placeholder(shape)
    total = global_sum(g, x, weight, zero_point)
    g.mark_output(total)
    n, h, w, c = shape
    names = [op for op, _, _ in ops_seen]
    assert total.shape == (n, 1, 1, c) and total.dtype == "INT32"
    assert "REDUCE_SUM" not in names and "TRANSPOSE" not in names
    kernels = [shapes[1][:2] for op, shapes, _ in ops_seen if op == "DEPTHWISE_CONV2D"]
    rows_first = family != "u85" and h * w > 4
    assert kernels == ([(1, w)] if rows_first else [])
    assert names.count("ADD") == (h.bit_length() - 1) + (0 if rows_first else w.bit_length() - 1)
    narrow = [dt for op, _, dt in ops_seen if op == "RESCALE" and dt == "INT16"]
    bound = weight * max(abs(-128 - zero_point), abs(127 - zero_point)) * (w if rows_first else 1)
    assert bool(narrow) == (2 * bound <= 32767 and names.count("ADD") > 1)
    graph = TosaGraph(g.serialize(), [0], [0])
    rng = np.random.default_rng(12)
    cases = [np.full(shape, -128), np.full(shape, 127), *rng.integers(-128, 128, (4, *shape))]
    for xs in cases:
        xs = xs.astype(np.int8)
        want = weight * (xs.astype(np.int64) - zero_point).sum(axis=(1, 2), keepdims=True)
        got = run_tosa_reference(graph, [xs])[0]
        assert got.dtype == np.int32 and np.array_equal(got, want)


@pytest.mark.parametrize(("channels", "also_read"), [(64, False), (64, True), (32, False)])
def test_odd_global_pool_folds_channels_into_width(channels, also_read, monkeypatch):
    # An odd-count global AVG_POOL2D pools [N, H*W, 2, C/2] by an (H*W, 1) window (Vela runs it
    # about twice as fast), but only where the pool is the input's one reader (another
    # reader would make Vela copy the reshaped tensor) and of 64 channels or more.
    from torchmcu.npu.tosa.graph import Graph

    pools: list[tuple[tuple[int, ...], list[int]]] = []
    real_pool = Graph.avg_pool2d

    def spy(self, x, kernel, *rest):
        pools.append((x.shape, list(kernel)))
        return real_pool(self, x, kernel, *rest)

    monkeypatch.setattr(Graph, "avg_pool2d", spy)
    net = Net()
    xi = net.input([1, channels, 1, 13])
    outputs = [avg_pool(net, xi, (1, 13), (1, 13))]
    if also_read:
        outputs.append(max_pool(net, xi, (1, 13), (1, 13)))
    program = net.finish(outputs)
    lower_to_tosa(program, family="u55")
    folds = channels >= 64 and not also_read
    plain = ((1, 1, 13, channels), [1, 13])
    assert pools == [((1, 13, 2, channels // 2), [13, 1]) if folds else plain]
    assert_tosa_matches(program, samples=4)
    extremes = np.full((1, channels, 1, 13), -128, dtype=np.int8)
    extremes[:, channels // 2 :] = 127
    assert_tosa_matches(program, inputs=[[extremes]])


@pytest.mark.parametrize(
    ("family", "accelerator"),
    [(None, "ethos-u55-128"), ("u55", "ethos-u55-128"), ("u85", "ethos-u85-256")],
)
def test_global_pool_stride_over_3_lowers_for_u55(family, accelerator):
    pytest.importorskip("ethosu.vela")
    net = Net()
    xi = net.input([1, 16, 8, 8])
    program = net.finish([avg_pool(net, xi, (8, 8), (8, 8))])
    assert npu_support(program.execution_plan[0], 0, "u55") is None
    vela_compile(lower_to_tosa(program, family=family).flatbuffer, accelerator)


@pytest.mark.parametrize(
    ("geometry"),
    [
        {"shape": (1, 3, 16, 16), "cout": 8, "k": (3, 3), "stride": (1, 1), "padding": (1, 1)},
        {
            "shape": (1, 6, 15, 16),
            "cout": 5,
            "k": (3, 3),
            "stride": (2, 2),
            "padding": (1, 1),
        },  # odd/even sizes
        {
            "shape": (1, 8, 16, 16),
            "cout": 16,
            "k": (1, 1),
            "stride": (2, 2),
            "padding": (0, 0),
        },  # crop needed
        {
            "shape": (1, 1, 49, 10),
            "cout": 12,
            "k": (10, 4),
            "stride": (2, 2),
            "padding": (5, 1),
        },  # DS-CNN first conv
        {
            "shape": (1, 4, 12, 11),
            "cout": 6,
            "k": (3, 2),
            "stride": (3, 1),
            "padding": (1, 0),
            "dilation": (2, 1),
        },
    ],
)
def test_conv_per_channel_geometry(geometry):
    rng = np.random.default_rng(4)
    net = Net()
    xi = net.input(list(geometry["shape"]))
    out = conv(
        net,
        xi,
        rng,
        geometry["cout"],
        geometry["k"],
        geometry["stride"],
        geometry["padding"],
        geometry.get("dilation", (1, 1)),
        act=(-100, 90),
    )
    assert_tosa_matches(net.finish([out]), samples=3)


@pytest.mark.parametrize(("channels", "multiplier"), [(3, 1), (5, 1), (7, 2), (1, 3), (13, 1)])
def test_depthwise_channel_counts(channels, multiplier):
    rng = np.random.default_rng(5)
    net = Net()
    xi = net.input([1, channels, 10, 9])
    out = depthwise(net, xi, rng, multiplier, (3, 3), (2, 2), (1, 1), act=(-128, 100))
    assert_tosa_matches(net.finish([out]), samples=3)


def _add(net: Net, a: int, b: int, out_sizes, params) -> int:
    out = net.act(list(out_sizes))
    args = [
        a,
        net.b.int_(params["za"]),
        net.b.int_(params["ma"]),
        net.b.int_(params["sa"]),
        b,
        net.b.int_(params["zb"]),
        net.b.int_(params["mb"]),
        net.b.int_(params["sb"]),
        net.b.int_(params["zo"]),
        net.b.int_(params["mo"]),
        net.b.int_(params["so"]),
        net.b.int_(params.get("lo", -128)),
        net.b.int_(params.get("hi", 127)),
    ]
    net.b.call("cortex_m::quantized_add", args, out)
    return out


def _add_params(
    scale_a: float, scale_b: float, scale_out: float, za: int, zb: int, zo: int, **extra
) -> dict:
    """CMSIS-NN/TFLite add parameters: inputs to 2 * max scale with a 2^20 headroom."""
    twice_max = 2 * max(scale_a, scale_b)
    ma, sa = quantize_multiplier(scale_a / twice_max)
    mb, sb = quantize_multiplier(scale_b / twice_max)
    mo, so = quantize_multiplier(twice_max / ((1 << 20) * scale_out))
    return dict(za=za, zb=zb, zo=zo, ma=ma, sa=sa, mb=mb, sb=sb, mo=mo, so=so, **extra)


@pytest.mark.parametrize(
    "params",
    [
        _add_params(0.05, 0.02, 0.06, 5, -128, -128),
        _add_params(0.013, 0.11, 0.09, -7, 3, 11, lo=-100, hi=80),
        _add_params(0.02, 0.02, 0.5, 0, 0, 0),
        _add_params(0.9, 0.003, 0.01, 100, -100, -20),  # output scale smaller than the inputs'
    ],
)
def test_add_different_scales(params):
    net = Net()
    a = net.input([1, 6, 5, 7])
    b = net.input([1, 6, 5, 7])
    program = net.finish([_add(net, a, b, [1, 6, 5, 7], params)])
    assert_tosa_matches(program, samples=4)


def test_add_per_channel_operand():
    net = Net()
    a = net.input([1, 6, 4, 4])
    # [1, C, 1, 1]: the C kernels' channel vector is 4-D (a rank-1 [C] operand is refused,
    # argument 4, by quantized_add.c and so by the definition's check)
    b = net.input([1, 6, 1, 1])
    program = net.finish([_add(net, a, b, [1, 6, 4, 4], _add_params(0.03, 0.07, 0.05, 1, -2, 3))])
    assert_tosa_matches(program, samples=3)


@pytest.mark.parametrize(
    ("scale", "za", "zb", "zo"), [(0.004, 3, -128, 0), (0.05, -9, 7, -100), (1.7e-5, 0, 0, 12)]
)
def test_mul_different_scales(scale, za, zb, zo):
    net = Net()
    a = net.input([1, 5, 3, 4])
    b = net.input([1, 5, 3, 4])
    out = net.act([1, 5, 3, 4])
    m, s = quantize_multiplier(scale)
    b_ = net.b
    b_.call(
        "cortex_m::quantized_mul",
        [a, b_.int_(za), b, b_.int_(zb), b_.int_(zo), b_.int_(m), b_.int_(s)],
        out,
    )
    assert_tosa_matches(net.finish([out]), samples=4)


def test_max_pool_padding_and_clamp():
    net = Net()
    xi = net.input([1, 5, 9, 8])
    out = max_pool(net, xi, (3, 3), (2, 2), (1, 1), act=(-50, 60))
    assert_tosa_matches(net.finish([out]), samples=4)


@pytest.mark.parametrize("family", [None, "u55", "u85"])
def test_pad_and_transpose(family):
    net = Net()
    x = net.input([1, 3, 5, 4], nhwc=False)  # contiguous NCHW, as a program input
    t = net.act([1, 5, 4, 3], nhwc=False)
    b = net.b
    b.call("cortex_m::transpose", [x, b.int_list([0, 2, 3, 1])], t)
    # The same bytes as an NHWC-ordered [1, 3, 5, 4] (a view), padded in H and W.
    view = b.planned(b.tensor_buffer[t], pm.ScalarType.CHAR, [1, 3, 5, 4], NHWC_DIM_ORDER)
    padded = net.act([1, 3, 8, 5])
    b.call(
        "cortex_m::pad",
        [view, b.int_list([0, 1, 0, 0]), b.int_list([0, 2, 1, 0]), b.int_(-7)],
        padded,
    )
    assert_tosa_matches(net.finish([padded]), samples=3, family=family)


def test_collapsed_transpose_moves_the_same_bytes():
    # For U55 a TRANSPOSE is emitted with the fewest axes; numpy checks it is the same move.
    from torchmcu.ops.defs.transpose import collapsed_transpose

    rng = np.random.default_rng(11)
    assert collapsed_transpose((1, 3, 32, 32), [0, 2, 3, 1]) == ((3, 1024), [1, 0])
    for _ in range(200):
        rank = int(rng.integers(2, 6))
        shape = tuple(int(v) for v in rng.choice([1, 1, 2, 3, 4], size=rank))
        perm = [int(p) for p in rng.permutation(rank)]
        x = np.arange(int(np.prod(shape))).reshape(shape)
        in_shape, merged = collapsed_transpose(shape, perm)
        assert len(merged) == len(in_shape) >= 2 and sorted(merged) == list(range(len(merged)))
        want = np.transpose(x, perm).reshape(-1)
        got = np.transpose(x.reshape(in_shape), merged).reshape(-1)
        assert np.array_equal(got, want), (shape, perm, in_shape, merged)


def test_transpose_fewer_axes_for_u55(monkeypatch):
    from torchmcu.npu.tosa.graph import Graph

    perms: dict[str, list[int]] = {}
    real_op = Graph.op

    def spy(self, op, inputs, out_shape, dtype, attribute):
        if op == "TRANSPOSE":
            perms[self.family] = list(inputs[0].shape)
        return real_op(self, op, inputs, out_shape, dtype, attribute)

    monkeypatch.setattr(Graph, "op", spy)
    for family in ("u55", "u85"):
        net = Net()
        x = net.input([1, 3, 6, 4], nhwc=False)
        t = net.act([1, 6, 4, 3], nhwc=False)
        net.b.call("cortex_m::transpose", [x, net.b.int_list([0, 2, 3, 1])], t)
        assert_tosa_matches(net.finish([t]), samples=2, family=family)
    assert perms == {"u55": [3, 24], "u85": [1, 3, 6, 4]}


# --- npu_support ------------------------------------------------------------------------------------------


def test_npu_support_pool_stride_limit():
    # An even-tap average pool is a DEPTHWISE_CONV2D, whose stride U55/U65 caps at 3.
    net = Net()
    xi = net.input([1, 8, 16, 16])
    program = net.finish([avg_pool(net, xi, (2, 2), (4, 4))])  # 4x4 output, stride 4
    plan = program.execution_plan[0]
    reason = npu_support(plan, 0, "u55")
    assert reason is not None and "stride 4" in reason and "U55" in reason
    assert "U65" in (npu_support(plan, 0, "u65") or "")
    assert npu_support(plan, 0, "u85") is None
    with pytest.raises(ValueError, match="u55"):
        npu_support(plan, 0, "u99")
    pytest.importorskip("ethosu.vela")
    from torchmcu.npu.vela import VelaCompileError

    graph = lower_to_tosa(program)
    with pytest.raises(VelaCompileError):
        vela_compile(graph.flatbuffer, "ethos-u55-128")
    vela_compile(graph.flatbuffer, "ethos-u85-256")


def test_npu_support_pool_and_conv_strides():
    # Pools with stride 4: Vela 5.2 would split them per output position; we keep the
    # documented U55/U65 limit. A convolution with stride 4 Vela rejects on U55.
    for pool in (
        lambda n: max_pool(n, n.input([1, 4, 16, 16]), (2, 2), (4, 4)),
        lambda n: avg_pool(n, n.input([1, 4, 11, 11]), (3, 3), (4, 4)),
    ):
        net = Net()
        program = net.finish([pool(net)])
        assert "stride 4 exceeds U55's limit of 3" in (
            npu_support(program.execution_plan[0], 0, "u55") or ""
        )
        assert npu_support(program.execution_plan[0], 0, "u85") is None
        assert_tosa_matches(program, samples=2)
    pytest.importorskip("ethosu.vela")
    from torchmcu.npu.vela import VelaCompileError

    net = Net()
    rng = np.random.default_rng(9)
    program = net.finish([conv(net, net.input([1, 2, 17, 17]), rng, 4, (3, 3), (4, 4), (1, 1))])
    assert "stride 4" in (npu_support(program.execution_plan[0], 0, "u55") or "")
    assert_tosa_matches(program, samples=2)
    with pytest.raises(VelaCompileError):
        vela_compile(lower_to_tosa(program).flatbuffer, "ethos-u55-128")
    vela_compile(lower_to_tosa(program).flatbuffer, "ethos-u85-256")


def test_npu_support_reasons():
    rng = np.random.default_rng(7)
    net = Net()
    xi = net.input([1, 4, 9, 9])
    padded_pool = avg_pool(net, xi, (3, 3), (1, 1), padding=(1, 1))
    c = conv(net, padded_pool, rng, 4, (3, 3), (1, 1), (1, 1))
    program = net.finish([c])
    plan = program.execution_plan[0]
    assert "padding" in (npu_support(plan, 0, "u85") or "")
    assert npu_support(plan, 1, "u55") is None
    with pytest.raises(TosaLoweringError, match="padding"):
        lower_to_tosa(program)


@pytest.mark.slow
def test_npu_support_float_ops():
    import torchmcu
    from torchmcu.examples import models

    model, example = models.build("mlp", seed=0)
    program = torchmcu.export(
        model, example, calibration=models.calibration("mlp", 2, seed=1)
    ).program
    plan = program.execution_plan[0]
    names = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    q = names.index("cortex_m::quantize_per_tensor")
    assert "float" in (npu_support(plan, q, "u55") or "")
    assert npu_support(plan, names.index("cortex_m::quantized_linear"), "u55") is None


@pytest.mark.parametrize(("pad_value", "folds"), [(-5, True), (7, False)])
def test_pad_folds_into_convolution(pad_value, folds, monkeypatch):
    # conv's input_offset is 5 (zero point -5): a pad with that value becomes conv padding.
    from torchmcu.npu.tosa import lowerings

    emitted = []
    real_pad = lowerings.LOWERINGS["cortex_m::pad"]
    monkeypatch.setitem(
        lowerings.LOWERINGS,
        "cortex_m::pad",
        lambda g, a, r: emitted.append(1) or real_pad(g, a, r),
    )
    rng = np.random.default_rng(8)
    net = Net()
    x = net.input([1, 2, 9, 6])
    padded = net.act([1, 2, 9 + 4 + 5, 6 + 1 + 1])
    b = net.b
    args = [x, b.int_list([0, 4, 1, 0]), b.int_list([0, 5, 1, 0]), b.int_(pad_value)]
    b.call("cortex_m::pad", args, padded)
    out = conv(net, padded, rng, 8, (10, 4), (2, 2), (0, 0), in_off=5)
    assert_tosa_matches(net.finish([out]), samples=3)
    assert emitted == ([] if folds else [1])


def test_avg_pool_paths():
    from torchmcu.ops.defs.pool import avg_pool_is_exact

    # Odd tap counts: TOSA AVG_POOL2D itself is exact (no ties); even ones are not.
    assert all(avg_pool_is_exact(c) for c in (1, 3, 9, 25, 49, 125))
    assert not any(avg_pool_is_exact(c) for c in (2, 4, 6, 64))


def test_activation_table():
    # cortex_m::quantized_activation (ExecuTorch's int8 LUT op): out = lut[x + 128], checked
    # against numpy indexing (the reference interpreter has no such op yet).
    rng = np.random.default_rng(10)
    lut = rng.integers(-128, 128, 256).astype(np.int8)
    net = Net()
    x = net.input([1, 3, 4, 5])
    out = net.act([1, 3, 4, 5])
    net.b.call("cortex_m::quantized_activation", [x, net.b.constant(lut)], out)
    program = net.finish([out])
    graph = lower_to_tosa(program)
    xs = np.arange(-128, 128, dtype=np.int8)[:60].reshape(1, 4, 5, 3)  # NHWC memory
    got = run_tosa_reference(graph, [xs])[0]
    assert np.array_equal(got.reshape(-1), lut[xs.reshape(-1).astype(np.int32) + 128])
    assert npu_support(program.execution_plan[0], 0, "u55") is None


def test_carve_through_a_view_and_scratch():
    # conv -> (a flatten view of its output: no instruction) -> linear. Carving the linear
    # alone: its input is the view; carving both: the view becomes a RESHAPE inside.
    rng = np.random.default_rng(11)
    net = Net()
    x = net.input([1, 3, 6, 6])
    c = conv(net, x, rng, 4, (3, 3), (1, 1), (1, 1))
    b = net.b
    flat = b.planned(b.tensor_buffer[c], pm.ScalarType.CHAR, [1, 4 * 6 * 6])
    out = net.act([1, 5], nhwc=False)
    mults, shifts = requant_params(rng, 5)
    w = rng.integers(-127, 128, (5, 144)).astype(np.int8)
    args = [
        flat,
        b.constant(w),
        b.constant(np.arange(5, dtype=np.int32)),
        b.none(),
        b.int_(3),
        b.int_(0),
        b.int_(1),
        b.int_list(mults),
        b.int_list(shifts),
        b.int_(127),
        b.int_(-128),
    ]
    b.call("cortex_m::quantized_linear", args, out)
    program = net.finish([out])
    xs = random_inputs(program, np.random.default_rng(12))
    whole = run_program(program, xs)

    tail = carve(program, [1])
    assert tail.inputs == [flat] and tail.outputs == [out]
    mid = run_program(carve(program, [0]).program, xs)[0]
    flat_bytes = np.transpose(mid, (0, 2, 3, 1)).reshape(1, 144)  # the view sees NHWC memory
    assert np.array_equal(run_program(tail.program, [flat_bytes])[0], whole[0])
    assert_tosa_matches(tail.program, samples=2)

    both = carve(program, [0, 1])
    assert both.inputs == [x] and both.outputs == [out]
    assert np.array_equal(run_program(both.program, xs)[0], whole[0])
    assert_tosa_matches(both.program, samples=2)
    native = pytest.importorskip("torchmcu.native")
    from torchmcu.pte.writer import serialize

    assert np.array_equal(native.run_program(serialize(both.program), xs)[0], whole[0])


@pytest.mark.parametrize("seed", range(6))
def test_random_configurations(seed):
    # Seeded random geometry and quantization parameters for conv, depthwise, pools, add, mul.
    rng = np.random.default_rng(100 + seed)
    lo, hi = int(rng.integers(-128, 0)), int(rng.integers(1, 128))
    k = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
    stride = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    dilation = (int(rng.integers(1, 3)), int(rng.integers(1, 3)))
    padding = (int(rng.integers(0, k[0])), int(rng.integers(0, k[1])))
    h = int(rng.integers(dilation[0] * (k[0] - 1) + 1, 14))
    w = int(rng.integers(dilation[1] * (k[1] - 1) + 1, 14))
    net = Net()
    x = net.input([1, int(rng.integers(1, 6)), h, w])
    c = conv(
        net,
        x,
        rng,
        int(rng.integers(1, 7)),
        k,
        stride,
        padding,
        dilation,
        act=(lo, hi),
        in_off=int(rng.integers(-127, 129)),
        out_off=int(rng.integers(-128, 128)),
    )
    d = depthwise(
        net, c, rng, int(rng.integers(1, 3)), (min(k[0], 3), min(k[1], 3)), (1, 1), (1, 1)
    )
    pool_k = (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    _, _, h_, w_ = net.b.tensor(d).sizes
    pool_k = (min(pool_k[0], h_), min(pool_k[1], w_))
    ap = avg_pool(net, d, pool_k, (int(rng.integers(1, 3)), int(rng.integers(1, 3))))
    mp = max_pool(net, ap, (1, 1), (1, 1), act=(lo, hi))
    scales = [float(v) for v in rng.uniform(0.001, 0.2, 3)]
    zps = [int(v) for v in rng.integers(-128, 128, 3)]
    sizes = net.b.tensor(mp).sizes
    other = net.input(list(sizes))
    s = _add(net, mp, other, sizes, _add_params(*scales, *zps, lo=lo, hi=hi))
    out = net.act(list(sizes))
    m, sh = quantize_multiplier(float(rng.uniform(1e-5, 0.3)))
    b = net.b
    b.call(
        "cortex_m::quantized_mul",
        [s, b.int_(zps[0]), other, b.int_(zps[1]), b.int_(zps[2]), b.int_(m), b.int_(sh)],
        out,
    )
    assert_tosa_matches(net.finish([out]), samples=3, seed=seed)
