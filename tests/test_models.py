"""Example models: shapes, parameter counts from the architecture text, determinism, export.

Expected parameter counts are computed here from the layer lists of the MLPerf
Tiny reference architectures (conv/linear weights + biases, BN gamma + beta),
not taken from the constructors.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchmcu.examples import MLPERF_TINY, MODELS, build, calibration, count_parameters
from torchmcu.examples.models import input_shape

OUTPUT_SHAPES = {
    "mlp": (1, 10),
    "small_cnn": (1, 10),
    "ds_cnn": (1, 12),
    "resnet8": (1, 10),
    "mobilenet_v1_025": (1, 2),
    "deep_autoencoder": (1, 640),
    "mobilenet_v2_like": (1, 10),
    "lstm": (1, 4),
    **{
        name: (1, 10)
        for name in (
            "mobilenet_v3_small",
            "efficientnet_b0",
            "squeezenet1_1",
            "shufflenet_v2_x0_5",
            "mnasnet0_5",
            "mobilenet_v2_035",
            "resnet18",
            "ghostnet_050",
            "lcnet_050",
        )
    },
    "tiny_unet": (1, 2, 64, 64),
    "conv1d_kws": (1, 12),
    "gru_kws": (1, 12),
    "vit_tiny": (1, 10),
    "gpt_tiny": (1, 64, 16),  # logits per position over the vocabulary
    "gpt_tiny_masked": (1, 64, 16),
}
# torchvision's published parameter counts of these architectures (1000 classes) and the
# width of their classifier's input: ours have 10 classes, everything else the same.
PUBLISHED_1000_CLASSES = {
    "mobilenet_v3_small": (2_542_856, 1024),
    "efficientnet_b0": (5_288_548, 1280),
    "squeezenet1_1": (1_235_496, 512),
    "shufflenet_v2_x0_5": (1_366_792, 1024),
    "mnasnet0_5": (2_218_512, 1280),
    "resnet18": (11_689_512, 512),
}
# Models that take more than the one input tensor (the LSTM also takes its state h0, c0).
EXTRA_INPUTS = {"lstm": 2}


def conv(cin: int, cout: int, kh: int, kw: int, groups: int = 1) -> int:
    return cout * (cin // groups) * kh * kw + cout


def bn(c: int) -> int:
    return 2 * c


def linear(i: int, o: int) -> int:
    return i * o + o


def expected_ds_cnn() -> int:
    block = conv(64, 64, 3, 3, groups=64) + bn(64) + conv(64, 64, 1, 1) + bn(64)
    return conv(1, 64, 10, 4) + bn(64) + 4 * block + linear(64, 12)


def expected_resnet8() -> int:
    total = conv(3, 16, 3, 3) + bn(16)
    for cin, cout in [(16, 16), (16, 32), (32, 64)]:
        total += conv(cin, cout, 3, 3) + bn(cout) + conv(cout, cout, 3, 3) + bn(cout)
        if cin != cout:
            total += conv(cin, cout, 1, 1)
    return total + linear(64, 10)


def expected_mobilenet_v1_025() -> int:
    widths = [8, 16, 32, 32, 64, 64] + [128] * 6 + [256, 256]
    total = conv(3, 8, 3, 3) + bn(8)
    for cin, cout in zip(widths, widths[1:]):
        total += conv(cin, cin, 3, 3, groups=cin) + bn(cin) + conv(cin, cout, 1, 1) + bn(cout)
    return total + linear(256, 2)


def expected_deep_autoencoder() -> int:
    dims = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128]
    hidden = sum(linear(a, b) + bn(b) for a, b in zip(dims, dims[1:]))
    return hidden + linear(128, 640)


@pytest.fixture(scope="module", params=list(MODELS))
def built(request: pytest.FixtureRequest) -> tuple[str, nn.Module, tuple[torch.Tensor, ...]]:
    model, inputs = build(request.param)
    return request.param, model, inputs


def test_forward_shape_and_eval_mode(built) -> None:
    name, model, inputs = built
    assert not model.training
    assert len(inputs) == 1 + EXTRA_INPUTS.get(name, 0)
    assert tuple(inputs[0].shape) == input_shape(name)
    with torch.no_grad():
        out = model(*inputs)
    assert tuple(out.shape) == OUTPUT_SHAPES[name]
    assert torch.isfinite(out).all()


def test_output_depends_on_input(built) -> None:
    """Different inputs give clearly different outputs: the signal survives the depth."""
    name, model, _ = built
    with torch.no_grad():
        out = torch.cat([model(*sample) for sample in calibration(name, 8, seed=7)])
    spread = out.std(dim=0).mean().item()
    level = out.abs().mean().item()
    assert spread > 0.1 * level, (name, spread, level)


def test_batchnorm_statistics_are_not_defaults(built) -> None:
    _, model, _ = built
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            assert not torch.allclose(m.running_mean, torch.zeros_like(m.running_mean))
            assert not torch.allclose(m.running_var, torch.ones_like(m.running_var))
            assert not torch.allclose(m.weight, torch.ones_like(m.weight))


@pytest.mark.parametrize(
    "name, expected",
    [
        ("ds_cnn", expected_ds_cnn()),
        ("resnet8", expected_resnet8()),
        ("mobilenet_v1_025", expected_mobilenet_v1_025()),
        ("deep_autoencoder", expected_deep_autoencoder()),
        ("mlp", linear(64, 32) + linear(32, 10)),
        ("small_cnn", conv(3, 8, 3, 3) + conv(8, 16, 3, 3) + linear(256, 10)),
    ],
)
def test_parameter_counts(name: str, expected: int) -> None:
    model, _ = build(name)
    assert count_parameters(model) == expected


def test_parameter_counts_in_published_ranges() -> None:
    # Sizes quoted for the MLPerf Tiny references: ResNet-8 ~78k, FC autoencoder ~270k,
    # MobileNetV1-0.25 VWW ~0.2M, DS-CNN (64 channels, 4 blocks) ~24k.
    ranges = {
        "ds_cnn": (20_000, 30_000),
        "resnet8": (75_000, 80_000),
        "mobilenet_v1_025": (200_000, 230_000),
        "deep_autoencoder": (260_000, 275_000),
    }
    for name in MLPERF_TINY:
        lo, hi = ranges[name]
        assert lo <= count_parameters(build(name)[0]) <= hi, name


def test_mobilenet_v2_like_size() -> None:
    n = count_parameters(build("mobilenet_v2_like")[0])
    print(f"mobilenet_v2_like parameters: {n} (target 295,626)")
    assert abs(n - 295_626) <= 0.01 * 295_626
    model = build("mobilenet_v2_like")[0]
    relu6 = sum(isinstance(m, nn.ReLU6) for m in model.modules())
    depthwise = sum(isinstance(m, nn.Conv2d) and m.groups > 1 for m in model.modules())
    assert relu6 > 0 and depthwise == 17


def test_deterministic_and_seeded() -> None:
    a, xa = build("resnet8", seed=3)
    b, xb = build("resnet8", seed=3)
    c, _ = build("resnet8", seed=4)
    for (k, va), vb, vc in zip(
        a.state_dict().items(), b.state_dict().values(), c.state_dict().values()
    ):
        assert torch.equal(va, vb), k
    assert torch.equal(xa[0], xb[0])
    assert not torch.equal(a.stem[0].weight, c.stem[0].weight)
    assert torch.equal(calibration("resnet8", 2, 5)[1][0], calibration("resnet8", 2, 5)[1][0])
    assert not torch.equal(calibration("resnet8", 1, 5)[0][0], calibration("resnet8", 1, 6)[0][0])


def test_calibration_shapes_and_ranges() -> None:
    for name in MODELS:
        samples = calibration(name, 3, seed=0)
        assert len(samples) == 3
        for sample in samples:
            assert len(sample) == 1 + EXTRA_INPUTS.get(name, 0)
            assert tuple(sample[0].shape) == input_shape(name)
    img = torch.cat([x for (x,) in calibration("resnet8", 4)])
    assert img.min() >= -1.0 and img.max() < 1.0


def test_unknown_model_is_named() -> None:
    with pytest.raises(KeyError, match="unknown example model 'resnet9'"):
        build("resnet9")


def _count_ops(graph: torch.fx.Graph, *names: str) -> int:
    return sum(
        1
        for n in graph.nodes
        if n.op == "call_function" and getattr(n.target, "__name__", "").split(".")[0] in names
    )


def test_torch_export_and_layer_structure(built) -> None:
    name, model, inputs = built
    ep = torch.export.export(model, inputs)
    with torch.no_grad():
        torch.testing.assert_close(ep.module()(*inputs), model(*inputs))
    # Layer counts of the reference architectures (convs, residual adds).
    structure = {
        "ds_cnn": (9, 0),
        "resnet8": (9, 3),
        "mobilenet_v1_025": (27, 0),
        "mobilenet_v2_like": (52, 10),
    }
    if name in structure:
        convs, adds = structure[name]
        assert _count_ops(ep.graph, "conv2d") == convs
        assert _count_ops(ep.graph, "add") == adds


@pytest.mark.parametrize("name", sorted(PUBLISHED_1000_CLASSES))
def test_architectures_have_the_published_parameter_counts(name: str) -> None:
    published, head_in = PUBLISHED_1000_CLASSES[name]
    want = published - (head_in * 1000 + 1000) + (head_in * 10 + 10)
    model, _ = build(name)
    assert count_parameters(model) == want
