"""The tensor and layout ops as model code writes them (issue 17): a ShuffleNetV2 unit
(x.chunk(2, dim=1), a conv branch, torch.cat of the two halves, the view / transpose / view
channel shuffle) and a module using torch.split with sizes, stack, permute, repeat, expand,
F.channel_shuffle, unbind, select, slice with a step, flatten in the middle of the graph and a
constant pad of a 5-D tensor.

Each exports for corstone-300 as int8 calls only (no float kernel, no quantize/dequantize:
int8 I/O), the C host runtime equals the reference interpreter bit for bit, and the
reference equals torchao's fake-quantized model (prog.quantized_model) on the output grid:
these ops only move bytes, cat requantizes each branch once, so the integer program rounds
as the fake-quantized graph does. The channel shuffle is one cortex_m::transpose, the chunk
two slices of the NHWC bytes; on ethos-u55-128 the unit is one delegate, bit-exact on the TOSA
reference model. Kept in float (the quantizer's set_operator) they run the fp32 forms.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from torch import nn
from torchmcu import native
from torchmcu.npu.tosa.lower import lower_to_tosa, run_tosa_reference
from torchmcu.quantize import TorchmcuQuantizer
from torchmcu.reference.interpreter import run_program


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNetV2's stride-1 unit behind a stem conv (so its input is an NHWC activation)."""

    def __init__(self, c: int = 16) -> None:
        super().__init__()
        b = c // 2
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c),
                                  nn.ReLU(inplace=True))  # fmt: skip
        self.branch = nn.Sequential(
            nn.Conv2d(b, b, 1, bias=False), nn.BatchNorm2d(b), nn.ReLU(inplace=True),
            nn.Conv2d(b, b, 3, padding=1, groups=b, bias=False), nn.BatchNorm2d(b),
            nn.Conv2d(b, b, 1, bias=False), nn.BatchNorm2d(b), nn.ReLU(inplace=True),
        )  # fmt: skip
        self.head = nn.Conv2d(c, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x1, x2 = x.chunk(2, dim=1)
        out = torch.cat((x1, self.branch(x2)), dim=1)
        return self.head(channel_shuffle(out, 2))


class LayoutOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 1)
        self.fc = nn.Linear(24, 5)

    def forward(self, x: torch.Tensor):
        y = self.conv(x)
        a, b, c = torch.split(y, [1, 2, 3], dim=1)
        return (
            torch.stack([a, b[:, :1]], 1),
            c.permute(0, 2, 3, 1),
            a.repeat(1, 3, 1, 1) + c,
            a.expand(1, 3, 4, 4),
            F.channel_shuffle(y, 3),
            torch.unbind(y, 1)[2],
            self.fc(y[:, ::2, ::2].flatten(1)),
            y[:, 1],
            y[:, :, 1:3].reshape(1, 6, 8).unsqueeze(0),
            F.pad(y.view(1, 2, 3, 4, 4), (1, 1, 2, 0), value=0.5),  # 5-D: [6, 4, 4] padded
        )


SHAPES = {"shuffle_unit": (1, 3, 8, 8), "layout_ops": (1, 4, 4, 4)}
MODELS = {"shuffle_unit": ShuffleUnit, "layout_ops": LayoutOps}


def _build(name: str) -> nn.Module:
    torch.manual_seed(7)
    model = MODELS[name]().eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):  # random statistics, so the signal survives
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    return model


# the layout ops kept in float (their fp32 rules: portable cat / permute_copy, slice_copy)
_FLOAT = ("cat.default", "stack.default", "repeat.default", "expand.default", "permute.default",
          "transpose.int", "channel_shuffle.default", "slice.Tensor", "select.int")  # fmt: skip


def _float_layout() -> TorchmcuQuantizer:
    quantizer = TorchmcuQuantizer()
    for name in _FLOAT:
        packet, overload = name.split(".")
        quantizer.set_operator(getattr(getattr(torch.ops.aten, packet), overload), None)
    return quantizer


@pytest.fixture(scope="module")
def exported():
    cache: dict[tuple[str, str | None], torchmcu.ExportedModel] = {}

    def get(name: str, npu: str | None = None) -> torchmcu.ExportedModel:
        if (name, npu) not in cache:
            gen = torch.Generator().manual_seed(1)
            calib = [(torch.randn(SHAPES[name], generator=gen),) for _ in range(16)]
            kept = npu == "float"
            cache[(name, npu)] = torchmcu.export(
                _build(name), calib[0], calibration=calib, board="corstone-300",
                int8_io=not kept, npu=None if kept else npu,
                quantizer=_float_layout() if kept else None,
            )  # fmt: skip
        return cache[(name, npu)]

    return get


@pytest.mark.parametrize("name", list(MODELS))
def test_exports_int8_calls_only(name, exported):
    counts = exported(name).report["op_counts"]
    float_ops = [op for op in counts if not op.startswith(("cortex_m::", "torchmcu::"))]
    assert not float_ops, counts
    assert "cortex_m::quantize_per_tensor" not in counts and "torchmcu::quantized_cat" in counts
    assert name != "layout_ops" or counts["cortex_m::pad"] == 1


def test_channel_shuffle_is_one_transpose_and_chunk_slices_nhwc_bytes(exported):
    """The unit moves bytes three times: the program input to NHWC, the shuffle, the output
    back to NCHW; chunk is two slices of the stem's NHWC output (no transpose either side)."""
    counts = exported("shuffle_unit").report["op_counts"]
    assert counts["cortex_m::transpose"] == 3
    assert counts["torchmcu::slice_copy"] == 2
    assert counts["torchmcu::quantized_cat"] == 1


@pytest.mark.parametrize("name", list(MODELS))
def test_host_runtime_is_bit_exact_and_matches_fake_quant(name, exported):
    prog = exported(name)
    (inp,) = prog.report["inputs"]
    rng = np.random.default_rng(3)
    for _ in range(3):
        x = rng.integers(-128, 128, SHAPES[name], dtype=np.int8)
        ours = native.run_program(prog.pte_bytes, [x])
        ref = run_program(prog.program, [x])
        assert len(ours) == len(ref)
        for o, r in zip(ours, ref):
            assert o.dtype == np.int8 and o.tobytes() == r.tobytes()
        real = torch.tensor((x.astype(np.float32) - inp["zero_point"]) * inp["scale"])
        with torch.no_grad():
            fake = prog.quantized_model(real)
        fake = fake if isinstance(fake, tuple) else (fake,)
        for r, f, out in zip(ref, fake, prog.report["outputs"]):
            q = np.round(f.numpy().astype(np.float64) / out["scale"]) + out["zero_point"]
            steps = np.abs(r.astype(np.int64) - np.clip(q, -128, 127).astype(np.int64))
            assert steps.max() <= 1, (out["sizes"], steps.max())


@pytest.mark.needs("py:ethos-u-vela", "tosa-reference")
def test_shuffle_unit_is_one_npu_delegate_bit_exact_on_the_tosa_reference(exported):
    """On ethos-u55-128 every call (slices, RESCALE + CONCAT, the shuffle's TRANSPOSE) goes to
    the NPU in one delegate with all the MACs; the CPU program lowered to TOSA, run on the
    TOSA reference model, equals the reference interpreter bit for bit."""
    npu = exported("shuffle_unit", npu="ethos-u55-128").report["npu"]
    assert npu["operators"]["fraction"] == 1.0 and npu["macs"]["fraction"] == 1.0
    assert len(npu["delegates"]) == 1
    program = exported("shuffle_unit").program
    x = np.random.default_rng(5).integers(-128, 128, SHAPES["shuffle_unit"], dtype=np.int8)
    (ref,) = run_program(program, [x])
    (got,) = run_tosa_reference(lower_to_tosa(program, family="u55"), [x])
    assert got.tobytes() == ref.tobytes()


def test_fp32_forms_run_on_the_host_as_the_fake_quantized_model(exported):
    """The same ops kept in float32 (a float region): portable cat / permute_copy and
    slice_copy of float tensors, the host runtime equal to the reference and both equal to
    torchao's graph (the ops move float values exactly)."""
    prog = exported("layout_ops", "float")
    counts = prog.report["op_counts"]
    assert counts["aten::cat"] == 3 and counts["aten::permute_copy"] == 2, counts
    x = torch.randn(SHAPES["layout_ops"], generator=torch.Generator().manual_seed(9))
    ours = native.run_program(prog.pte_bytes, [x.numpy()])
    ref = run_program(prog.program, [x.numpy()])
    with torch.no_grad():
        fake = prog.quantized_model(x)
    for o, r, f in zip(ours, ref, fake, strict=True):
        assert o.tobytes() == r.tobytes()
        np.testing.assert_array_equal(r, f.numpy())
