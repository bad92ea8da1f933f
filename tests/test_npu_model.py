"""The Ethos-U55 functional model (torchmcu.npu.model) against the TOSA reference model.

Each program is exported for ethos-u55-128; the C host runtime runs it with every delegate going
through the TOSA reference model on the delegate's saved TOSA graph, and records each delegate's
input and output bytes. The model then runs the delegate's Vela output (command stream, weights,
scratch layout) on the same input bytes; its output bytes must be equal. The model knows nothing
of the TOSA graph, so the two are independent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torchmcu.api import export_quantized
from torchmcu.examples import models
from torchmcu.npu.blob import parse_blob
from torchmcu.npu.config import resolve_target
from torchmcu.npu.model.decode import CommandStreamError, command_stream, decode
from torchmcu.npu.model.memory import BusError
from torchmcu.npu.model.run import run_blob
from torchmcu.npu.model.weights import Geometry, decode_weights, unpack_weights
from torchmcu.npu.model_check import Comparison, compare
from torchmcu.npu.vela import compile_tosa
from torchmcu.quantize import quantize

pytest.importorskip("tosa_reference_model")
pytest.importorskip("ethosu.vela")

TARGET = ("corstone-300", "ethos-u55-128")
U85_TARGET = ("corstone-320", "ethos-u85-256")


def _delegates_vs_tosa(
    graph: torch.fx.GraphModule, x: Sequence[np.ndarray], accelerator: str = TARGET[1]
) -> Comparison:
    board = TARGET[0] if accelerator == TARGET[1] else None  # corstone-300 offers -128/-256
    if accelerator == U85_TARGET[1]:
        board = U85_TARGET[0]  # corstone-320 offers only the U85-256
    exported = export_quantized(graph, npu_target=resolve_target(board, accelerator))
    return _exported_vs_tosa(exported, [x], accelerator)


def _exported_vs_tosa(
    exported: Any, samples: Sequence[Sequence[np.ndarray]], accelerator: str = TARGET[1]
) -> Comparison:
    """Every delegate call of the program (for each sample) through the model, compared with
    the TOSA reference run of the same call (torchmcu.npu.model_check)."""
    assert exported.npu.subgraphs, "nothing was delegated"
    result = compare(exported, samples, macs_per_cc=int(accelerator.rsplit("-", 1)[1]))
    assert not result.never_ran, f"delegates {result.never_ran} never ran"
    assert not result.mismatches, result.mismatches
    return result


def _quantized(module: nn.Module, shape: tuple[int, ...], seed: int = 0):
    torch.manual_seed(seed)
    module = module.eval()
    cal = [(torch.randn(*shape),) for _ in range(4)]
    return quantize(module, cal[0], cal), [torch.randn(*shape).numpy()]


class _Conv(nn.Module):
    def __init__(
        self, cin: int = 3, cout: int = 8, k: Any = 3, stride: int = 1, pad: Any = 1
    ) -> None:
        super().__init__()
        self.c = nn.Conv2d(cin, cout, k, stride=stride, padding=pad)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.c(x))


class _Depthwise(nn.Module):
    def __init__(self, c: int = 16, stride: int = 1) -> None:
        super().__init__()
        self.pw = nn.Conv2d(3, c, 1)
        self.dw = nn.Conv2d(c, c, 3, stride=stride, padding=1, groups=c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.dw(torch.relu(self.pw(x))))


class _Pool(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.MaxPool2d(2) if kind == "max" else nn.AvgPool2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.c(x)))


class _SignedAvg(nn.Module):
    """Averages of signed values (no ReLU before them): 2x2 sums divided by 4 put a quarter of
    the results on a tie, half of them negative; the rounding modes differ exactly there."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.c = nn.Conv2d(3, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c(x)
        if self.kind == "global":
            return torch.mean(y, dim=(2, 3), keepdim=True)
        return nn.functional.avg_pool2d(y, 2)


class _GlobalAvg(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 16, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.relu(self.c(x)), dim=(2, 3), keepdim=True)


class _Add(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(3, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.a(x) + self.b(x))


class _Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(40, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


class _Sigmoid(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.c(x))


class _Mixed(nn.Module):
    """mul, cat, pad, a padded max pool and a clamp: Vela's elementwise MUL, copies into
    offsets of one feature map, max-pool padding, activation bounds."""

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what
        self.a = nn.Conv2d(3, 8, 3, padding=1)
        self.b = nn.Conv2d(3, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.relu(self.a(x)), self.b(x)
        if self.what == "mul":
            return a * b
        if self.what.startswith("cat"):
            return torch.cat([a, b], dim={"cat": 1, "cat_h": 2, "cat_w": 3}[self.what])
        if self.what == "pad":
            return nn.functional.pad(a, (1, 2, 0, 1))
        if self.what == "maxpool_pad":
            return nn.functional.max_pool2d(a, 3, stride=2, padding=1)
        return torch.clamp(b, -1.0, 2.0)


SMALL = {
    "conv3x3": (lambda: _Conv(), (1, 3, 8, 8)),
    "conv_wide": (lambda: _Conv(24, 40, 3), (1, 24, 10, 12)),
    "conv_stride2": (lambda: _Conv(8, 16, 3, stride=2), (1, 8, 15, 15)),
    "conv_5x5_valid": (lambda: _Conv(4, 8, 5, pad=0), (1, 4, 12, 12)),
    "conv_10x4_stride2": (lambda: _Conv(1, 16, (10, 4), stride=2, pad=(5, 1)), (1, 1, 49, 10)),
    "depthwise": (lambda: _Depthwise(), (1, 3, 9, 9)),
    "depthwise_stride2": (lambda: _Depthwise(24, stride=2), (1, 3, 12, 12)),
    "maxpool": (lambda: _Pool("max"), (1, 3, 8, 8)),
    "avgpool": (lambda: _Pool("avg"), (1, 3, 8, 8)),
    "global_avgpool": (lambda: _GlobalAvg(), (1, 3, 6, 6)),
    "global_avgpool_25x5": (lambda: _GlobalAvg(), (1, 3, 25, 5)),
    "avgpool_signed_ties": (lambda: _SignedAvg("2x2"), (1, 3, 16, 16)),
    "global_avgpool_signed_ties": (lambda: _SignedAvg("global"), (1, 3, 4, 4)),
    "add": (lambda: _Add(), (1, 3, 8, 8)),
    "linear": (lambda: _Linear(), (1, 40)),
    "sigmoid_lut": (lambda: _Sigmoid(), (1, 3, 8, 8)),
    **{
        w: (lambda w=w: _Mixed(w), (1, 3, 8, 8))
        for w in ("mul", "cat", "cat_h", "cat_w", "pad", "maxpool_pad", "clamp")
    },
}


@pytest.mark.parametrize("name", list(SMALL))
def test_single_operations_bit_exact(name):
    make, shape = SMALL[name]
    graph, x = _quantized(make(), shape)
    timing = _delegates_vs_tosa(graph, x)
    # The trace's MACs are Vela's nn_macs, except that Vela counts the 1x1 pools that fill a
    # pad's border, and (since cat is torchmcu::quantized_cat, lowered as RESCALE + CONCAT)
    # those that rescale a cat's inputs, while the model, which cannot tell them from
    # transposes, counts neither; bit-exactness is checked for all of them above.
    if name == "pad" or name.startswith("cat"):
        assert timing.vela_macs >= timing.macs
    else:
        assert timing.macs == timing.vela_macs


@pytest.mark.parametrize("name", list(SMALL))
def test_single_operations_bit_exact_on_u85(name):
    """The same targeted cases on the Ethos-U85 (its arithmetic assumptions: rounding modes,
    IFM/IFM2 scales of ADD, the AVERAGE pool's own division, LUTs, chaining, transposes)."""
    make, shape = SMALL[name]
    graph, x = _quantized(make(), shape)
    timing = _delegates_vs_tosa(graph, x, U85_TARGET[1])
    # Vela writes sigmoid_lut's fused conv + LUT + transpose twice with the same registers
    # (NPU_OP_CONV twice in a row): the NPU runs it twice, Vela's nn_macs counts it once.
    repeated = 8 * 8 * 8 * 3 * 3 * 3 if name == "sigmoid_lut" else 0
    assert timing.macs == timing.vela_macs + repeated


@pytest.mark.parametrize("accelerator", ["ethos-u55-32", "ethos-u55-64", "ethos-u55-256"])
@pytest.mark.parametrize("name", ["conv_wide", "depthwise_stride2", "add"])
def test_other_u55_configurations(name, accelerator):
    """Other MAC array sizes change the micro-block depth (U55-32: 4-deep OFM micro-blocks),
    the block configs and so the weight-stream order."""
    make, shape = SMALL[name]
    graph, x = _quantized(make(), shape)
    _delegates_vs_tosa(graph, x, accelerator)


@pytest.mark.parametrize("accelerator", ["ethos-u85-128", "ethos-u85-512", "ethos-u85-2048"])
@pytest.mark.parametrize("name", ["conv_wide", "depthwise_stride2", "add"])
def test_other_u85_configurations(name, accelerator):
    """The U85's MAC configurations differ in micro-blocks, IFM block depths, depthwise padding
    and the number of weight streams (2 at 512 MACs, 4 at 2048: OFM groups interleaved)."""
    make, shape = SMALL[name]
    graph, x = _quantized(make(), shape)
    _delegates_vs_tosa(graph, x, accelerator)


@pytest.mark.parametrize("target", [TARGET, U85_TARGET], ids=["u55", "u85"])
@pytest.mark.parametrize("name", ["cond", "nested", "map"])
def test_delegates_inside_control_flow(name, target):
    """test_control_flow's programs: delegates inside torch.cond branches (each branch taken)
    and a torch.map body, per delegate call against the TOSA reference; then the whole
    program through the firmware delegate and driver on the model, against the TOSA host run
    and the CPU-only program."""
    import torchmcu
    from test_control_flow import CondNet, MapNet, NestedCondNet, _batches, _inputs
    from test_npu_driver_model import _tosa_and_driver_agree

    if name == "map":
        model, samples = MapNet().eval(), _batches(11)
        cal = [(x,) for x in samples]
    else:
        model = (CondNet() if name == "cond" else NestedCondNet()).eval()
        cal = [(x,) for s in range(3) for x in _inputs(100 + s)]
        samples = _inputs(7)
    exported = torchmcu.export(model, cal[0], calibration=cal, npu=target[1], board=target[0])
    _exported_vs_tosa(exported, [[x.numpy()] for x in samples], target[1])
    _tosa_and_driver_agree(exported, [[x.numpy()] for x in samples], cpu_only=True)


def test_several_delegates_with_several_inputs_and_outputs():
    """test_npu_export's two-delegate programs: a delegate with two outputs, one with two
    inputs (distinct scales, so a swapped I/O order shows), and CPU work between them."""
    from test_npu_export import _StridedInTheMiddle, _TwoByTwo

    for module in (_TwoByTwo(), _StridedInTheMiddle()):
        graph, x = _quantized(module, (1, 3, 16, 16), seed=1)
        _delegates_vs_tosa(graph, x)


MODELS = ("ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder", "mobilenet_v2_like")


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_models_bit_exact(name):
    model, example = models.build(name)
    graph = quantize(model, example, models.calibration(name, 2))
    x = [np.ascontiguousarray(t.numpy()) for t in models.calibration(name, 3, seed=7)[2]]
    timing = _delegates_vs_tosa(graph, x)
    assert timing.macs == timing.vela_macs
    print(
        f"{name}: functional model {timing.model_seconds:.2f} s (TOSA reference "
        f"{timing.tosa_seconds:.2f} s), {timing.ops} NPU ops, {timing.macs} MACs"
    )


def test_bad_opcode_names_the_word_offset():
    graph, _ = _quantized(_Conv(), (1, 3, 8, 8))
    exported = export_quantized(graph, npu_target=resolve_target(*TARGET))
    stream = bytearray(command_stream(exported.npu.subgraphs[0].vela.command_stream))
    assert decode(bytes(stream))
    stream[4 * 5 : 4 * 5 + 4] = (0x3FE).to_bytes(4, "little")
    with pytest.raises(CommandStreamError, match="word 5"):
        decode(bytes(stream))


def test_scratch_smaller_than_vela_planned_is_a_bus_error():
    graph, _ = _quantized(_Conv(), (1, 3, 8, 8))
    exported = export_quantized(graph, npu_target=resolve_target(*TARGET))
    b = parse_blob(exported.npu.subgraphs[0].vela.blob)
    small = type(b)(b.command_stream, b.weights, b.inputs[0].nbytes, [], [])
    with pytest.raises(BusError, match="region 1"):
        run_blob(small, [])


@pytest.mark.parametrize(
    "ofm,kh,kw,ifm,depthwise,part_kernel,block,dilation,sub",
    [
        (8, 3, 3, 3, False, True, 8, 1, 8),
        (16, 3, 3, 40, False, False, 16, 1, 8),
        (24, 1, 1, 64, False, False, 16, 1, 8),
        (40, 3, 3, 1, True, False, 16, 1, 8),
        (20, 10, 10, 5, False, True, 8, 1, 8),
        (16, 3, 3, 20, False, False, 8, 2, 8),
        (8, 5, 9, 33, False, True, 8, 1, 8),
        (8, 5, 9, 33, False, True, 8, 1, 4),
        (16, 6, 6, 20, False, False, 8, 2, 4),
    ],
)
def test_weight_order_matches_vela_encoder(
    ofm, kh, kw, ifm, depthwise, part_kernel, block, dilation, sub
):
    """Our reading of the stream order undoes Vela's own reorder + encode, for depth-first,
    part-kernel-first, depthwise, sub-kernel splits (> 8, or > 4 with the 4x4 decomposition)
    and dilation."""
    from ethosu import mlw_codec

    rng = np.random.default_rng(ofm * 1000 + kh)
    volume = rng.integers(-127, 128, size=(ofm, kh, kw, ifm)).astype(np.int16)
    encoded = mlw_codec.reorder_encode(
        8, 8, volume, block, depthwise, part_kernel, 8, sub // dilation, sub // dilation
    )
    data = encoded[0] if isinstance(encoded, tuple) else encoded
    g = Geometry(
        ofm,
        1 if depthwise else ifm,
        kh,
        kw,
        (dilation, dilation),
        block,
        8,
        8,
        8,
        depthwise,
        part_kernel,
        sub,
    )
    np.testing.assert_array_equal(unpack_weights(decode_weights(bytes(data)), g), volume)


def test_a_corrupted_weight_changes_the_output():
    """The comparison is not vacuous: one flipped scale-stream byte shows in the output."""
    graph, _ = _quantized(_Conv(), (1, 3, 8, 8))
    exported = export_quantized(graph, npu_target=resolve_target(*TARGET))
    b = parse_blob(exported.npu.subgraphs[0].vela.blob)
    rng = np.random.default_rng(3)
    inputs = [rng.integers(0, 256, t.nbytes, dtype=np.uint8).tobytes() for t in b.inputs]
    good = run_blob(b, inputs).outputs
    weights = bytearray(b.weights)
    weights[8] ^= 0x40  # channel 0's scale, top byte (Vela puts the scale stream first)
    bad = run_blob(
        type(b)(b.command_stream, bytes(weights), b.scratch_size, b.inputs, b.outputs), inputs
    )
    assert bad.outputs != good


def test_dump_lists_operations(tmp_path, capsys):
    from torchmcu.npu.model.__main__ import main

    graph, _ = _quantized(_Conv(), (1, 3, 8, 8))
    exported = export_quantized(graph, npu_target=resolve_target(*TARGET))
    path = tmp_path / "delegate.bin"
    path.write_bytes(exported.npu.subgraphs[0].vela.blob)
    assert main(["dump", str(path)]) == 0
    out = capsys.readouterr().out
    assert ">>" in out and "NPU_OP_CONV" in out and "NPU_SET_WEIGHT_BASE" in out
    assert out.rstrip().splitlines()[-1].split()[2] == "NPU_OP_STOP"
    assert main(["trace", str(path)]) == 0
    trace = capsys.readouterr().out.rstrip().splitlines()
    assert any("NPU_OP_CONV" in line and "r1+0x" in line for line in trace)
    total = exported.npu.subgraphs[0].vela.estimate["nn_macs"]
    assert trace[-1].endswith(f"operations, {total} MACs")


def _conv_blob():
    graph, _ = _quantized(_Conv(), (1, 3, 8, 8))
    exported = export_quantized(graph, npu_target=resolve_target(*TARGET))
    return parse_blob(exported.npu.subgraphs[0].vela.blob)


def _with_stream(b, stream: bytes):
    """The blob's payload with its register command stream replaced (same length)."""
    old = command_stream(b.command_stream)
    at = b.command_stream.index(old)
    payload = b.command_stream[:at] + stream + b.command_stream[at + len(old) :]
    return type(b)(payload, b.weights, b.scratch_size, b.inputs, b.outputs)


def test_an_address_outside_its_region_is_a_bus_error():
    b = _conv_blob()
    stream = bytearray(command_stream(b.command_stream))
    ofm_base = next(c for c in decode(bytes(stream)) if c.name == "NPU_SET_OFM_BASE0")
    at = 4 * (ofm_base.offset + 1)
    stream[at : at + 4] = (b.scratch_size + 4096).to_bytes(4, "little")
    # The first OFM_BASE0 is that of Vela's input transpose (NCHW -> NHWC), a 1x1 pool.
    with pytest.raises(BusError, match=r"NPU_OP_POOL at command word \d+: OFM: bytes .* region 1"):
        run_blob(_with_stream(b, bytes(stream)), [bytes(t.nbytes) for t in b.inputs])


def test_a_stream_without_stop_or_with_a_cut_cmd1_is_refused():
    b = _conv_blob()
    stream = command_stream(b.command_stream)
    stop = next(c for c in decode(stream) if c.name == "NPU_OP_STOP")
    nop = (0x012).to_bytes(4, "little")  # NPU_OP_KERNEL_WAIT: a no-op for the model
    no_stop = stream[: 4 * stop.offset] + nop + stream[4 * stop.offset + 4 :]
    with pytest.raises(CommandStreamError, match="without NPU_OP_STOP"):
        run_blob(_with_stream(b, no_stop), [bytes(t.nbytes) for t in b.inputs])
    cmd1 = (0x4000 | 0x010).to_bytes(4, "little")  # NPU_SET_OFM_BASE0 with no payload word
    with pytest.raises(CommandStreamError, match="lacks its payload"):
        decode(stream[:-4] + cmd1)


_VELA_LISTING = re.compile(
    r"^0x([0-9a-f]+):\s+(?:([0-9a-f]{8}) )?\s*([0-9a-f]{4}) ([0-9a-f]{4}) - (NPU_\w+)", re.MULTILINE
)


@pytest.mark.parametrize(
    "name,target",
    [
        (name, target)
        for target in (TARGET, U85_TARGET)
        for name in ("conv3x3", "add", "sigmoid_lut")
    ],
)
def test_decoder_agrees_with_velas_own_listing(name, target, capfd):
    """Vela (regor) prints the register command stream it writes with
    --verbose-register-command-stream: every command's byte offset, payload, parameter, opcode
    and name. Our decoder must read the same commands from the bytes."""
    make, shape = SMALL[name]
    graph, _ = _quantized(make(), shape)
    exported = export_quantized(graph, board=target[0], npu_target=resolve_target(*target))
    sub = exported.npu.subgraphs[0]
    capfd.readouterr()
    again = compile_tosa(
        bytes(sub.tosa.flatbuffer),
        resolve_target(*target),
        extra_args=["--verbose-register-command-stream"],
    )
    listing = capfd.readouterr().out
    assert again.command_stream == sub.vela.command_stream
    want = [
        (int(off, 16) // 4, cmd, int(param, 16), int(data, 16) if data else None)
        for off, data, param, _code, cmd in _VELA_LISTING.findall(listing)
    ]
    got = [
        (c.offset, c.name, c.param & 0xFFFF, c.data)
        for c in decode(command_stream(sub.vela.command_stream), 2 if target == U85_TARGET else 0)
    ]
    assert len(want) > 20
    assert got == want
