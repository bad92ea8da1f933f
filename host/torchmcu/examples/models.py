"""Example models: small test nets and the MLPerf Tiny reference architectures.

These are untrained but deterministic: weights come from a seeded generator
(Kaiming-normal for conv/linear), every BatchNorm gets random affine
parameters and running statistics measured on random inputs then mildly
perturbed, so BN folding in the exporter is exercised with non-trivial values
and activations stay in a realistic range through depth. Each constructor returns
`(model.eval(), example_inputs)`; `calibration(name, n, seed)` gives inputs of
the right shape and distribution for post-training quantization, and
`calibration_samples(name)` serves them to `torchmcu export torchmcu.examples.models:NAME`.

Architectures follow the MLPerf Tiny v1 reference models (KWS DS-CNN, IC
ResNet-8, VWW MobileNetV1-0.25, AD deep autoencoder) as described in the
benchmark's documentation; the code is ours.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from torchmcu.examples.architectures import ARCHITECTURES, TOKEN_INPUTS, TRANSFORMERS
from torchmcu.examples.architectures.vit import ViT

__all__ = [
    "MODELS",
    "MLPERF_TINY",
    "build",
    "calibration",
    "calibration_samples",
    "count_parameters",
    "input_shape",
    "mlp",
    "small_cnn",
    "ds_cnn",
    "resnet8",
    "mobilenet_v1_025",
    "deep_autoencoder",
    "mobilenet_v2_like",
    "lstm",
]

ModelAndInputs = tuple[nn.Module, tuple[torch.Tensor, ...]]

# Input shapes (batch 1) and whether the input is an image in [-1, 1).
_INPUTS: dict[str, tuple[tuple[int, ...], bool]] = {
    "mlp": ((1, 64), False),
    "small_cnn": ((1, 3, 16, 16), True),
    "ds_cnn": ((1, 1, 49, 10), False),
    "resnet8": ((1, 3, 32, 32), True),
    "mobilenet_v1_025": ((1, 3, 96, 96), True),
    "deep_autoencoder": ((1, 640), False),
    "mobilenet_v2_like": ((1, 3, 96, 96), True),
    "lstm": ((1, 8, 16), False),  # + the (h0, c0) state inputs, see LSTMSequence
    **{name: (shape, image) for name, (_, shape, image) in ARCHITECTURES.items()},
    **{name: (shape, image) for name, (_, shape, image) in TRANSFORMERS.items()},
}


def input_shape(name: str) -> tuple[int, ...]:
    """The (batch 1) input shape of an example model."""
    return _INPUTS[_check_name(name)][0]


def _check_name(name: str) -> str:
    if name not in _INPUTS:
        raise KeyError(f"unknown example model {name!r}; known: {', '.join(_INPUTS)}")
    return name


def _sample(name: str, n: int, gen: torch.Generator) -> list[tuple[torch.Tensor, ...]]:
    shape, image = _INPUTS[name]
    if name == "lstm":
        return [LSTMSequence.sample(gen) for _ in range(n)]
    out = []
    for _ in range(n):
        if name in TOKEN_INPUTS:
            x = torch.randint(0, TOKEN_INPUTS[name], shape, generator=gen)
        elif image:
            x = torch.rand(shape, generator=gen) * 2.0 - 1.0
        else:
            x = torch.randn(shape, generator=gen)
        out.append((x,))
    return out


def calibration(model_name: str, n: int = 16, seed: int = 1) -> list[tuple[torch.Tensor, ...]]:
    """`n` input tuples for calibrating `model_name` (images uniform in [-1,1), else N(0,1))."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    return _sample(_check_name(model_name), n, gen)


def calibration_samples(factory: str) -> list[tuple[torch.Tensor, ...]]:
    """Calibration inputs for `torchmcu export torchmcu.examples.models:FACTORY`: the command
    line passes the factory's name to a calibration_samples() taking one argument, so each
    example model gets inputs of its own shape (calibration(factory), 16 samples)."""
    return calibration(factory)


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters (BatchNorm running statistics are buffers, not counted)."""
    return sum(p.numel() for p in model.parameters())


@torch.no_grad()
def _init(model: nn.Module, seed: int) -> None:
    """Seeded Kaiming-normal weights, small biases, mildly perturbed BatchNorms."""
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (nn.Conv1d, nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu", generator=gen)
            if m.bias is not None:
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.05)
        elif isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            c = m.num_features
            m.weight.copy_(0.8 + 0.4 * torch.rand(c, generator=gen))
            m.bias.copy_(0.1 * torch.randn(c, generator=gen))
            m.running_mean.copy_(0.1 * torch.randn(c, generator=gen))
            m.running_var.copy_(0.5 + torch.rand(c, generator=gen))
        elif isinstance(m, nn.Embedding):  # (a tied LM head, visited later, re-draws it)
            m.weight.copy_(torch.randn(m.weight.shape, generator=gen))
        elif isinstance(m, nn.GRU):  # seeded, as LSTMSequence's weights are
            for p in m.parameters():
                p.copy_(0.35 * torch.randn(p.shape, generator=gen))
        elif isinstance(m, nn.MultiheadAttention):  # q, k, v projections packed in one
            assert m.in_proj_weight is not None and m.in_proj_bias is not None
            nn.init.xavier_uniform_(m.in_proj_weight, generator=gen)
            m.in_proj_bias.copy_(torch.randn(m.in_proj_bias.shape, generator=gen) * 0.05)
        elif isinstance(m, nn.LayerNorm) and m.elementwise_affine:
            c = m.weight.numel()
            m.weight.copy_((0.8 + 0.4 * torch.rand(c, generator=gen)).reshape(m.weight.shape))
            m.bias.copy_((0.1 * torch.randn(c, generator=gen)).reshape(m.bias.shape))
        elif isinstance(m, ViT):  # the class token and position embedding
            m.cls_token.copy_(0.5 * torch.randn(m.cls_token.shape, generator=gen))
            m.pos_embed.copy_(0.5 * torch.randn(m.pos_embed.shape, generator=gen))


@torch.no_grad()
def _settle_batchnorm(name: str, model: nn.Module, seed: int) -> None:
    """Set BN running statistics from 32 random inputs, then perturb them mildly.

    Statistics that match the activations keep every layer centred and scaled
    the way a trained net is, so the output still depends on the input after
    many layers; the perturbation keeps the folded scales non-trivial.
    """
    gen = torch.Generator().manual_seed(seed + 1)
    bns = [m for m in model.modules() if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d))]
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average over the batch below
    model.train()
    model(torch.cat([x for (x,) in _sample(name, 32, gen)]))
    for bn in bns:
        c = bn.num_features
        std = bn.running_var.sqrt()
        bn.running_mean.add_(0.1 * std * torch.randn(c, generator=gen))
        bn.running_var.mul_(0.8 + 0.45 * torch.rand(c, generator=gen))
        bn.momentum = 0.1


def _finish(name: str, model: nn.Module, seed: int) -> ModelAndInputs:
    _init(model, seed)
    _settle_batchnorm(name, model, seed)
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    return model, _sample(name, 1, gen)[0]


def _conv_bn_relu(
    cin: int, cout: int, k: int | tuple[int, int], stride: int = 1, padding: int = 0,
    groups: int = 1, relu6: bool = False,
) -> list[nn.Module]:
    return [
        nn.Conv2d(cin, cout, k, stride=stride, padding=padding, groups=groups),
        nn.BatchNorm2d(cout),
        nn.ReLU6() if relu6 else nn.ReLU(),
    ]


# --- small nets for unit and end-to-end tests --------------------------------------------


def mlp(seed: int = 0) -> ModelAndInputs:
    """Linear(64->32)-ReLU-Linear(32->10)."""
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    return _finish("mlp", model, seed)


def small_cnn(seed: int = 0) -> ModelAndInputs:
    """conv-relu-maxpool-conv-relu-avgpool-linear on 1x3x16x16.

    The average pool leaves a 4x4 map, so the flatten before the linear layer
    sees real spatial data: with NHWC activations this checks that the exporter
    keeps PyTorch's NCHW flatten order.
    """
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 10),
    )
    return _finish("small_cnn", model, seed)


# --- MLPerf Tiny ------------------------------------------------------------------------


class DSCNN(nn.Module):
    """Keyword spotting DS-CNN: 49x10 MFCC input, 12 classes.

    'same' padding of the 10x4 stride-2 first conv, written as an explicit
    ZeroPad2d (left 1, right 1, top 4, bottom 5) so the conv itself is unpadded.
    """

    def __init__(self, width: int = 64, blocks: int = 4, classes: int = 12) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.ZeroPad2d((1, 1, 4, 5))]
        layers += _conv_bn_relu(1, width, (10, 4), stride=2)
        for _ in range(blocks):
            layers += _conv_bn_relu(width, width, 3, padding=1, groups=width)
            layers += _conv_bn_relu(width, width, 1)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d((25, 5))
        self.classifier = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def ds_cnn(seed: int = 0) -> ModelAndInputs:
    """MLPerf Tiny keyword spotting (input 1x1x49x10 -> 12 logits)."""
    return _finish("ds_cnn", DSCNN(), seed)


class _ResidualBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus shortcut (1x1 stride-s conv when the shape changes), ReLU."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            *_conv_bn_relu(cin, cout, 3, stride=stride, padding=1),
            nn.Conv2d(cout, cout, 3, padding=1),
            nn.BatchNorm2d(cout),
        )
        self.shortcut: nn.Module = (
            nn.Conv2d(cin, cout, 1, stride=stride) if (stride != 1 or cin != cout) else nn.Identity()
        )
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.shortcut(x))


class ResNet8(nn.Module):
    """Image classification ResNet-8 for 32x32 CIFAR-10 images."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(*_conv_bn_relu(3, 16, 3, padding=1))
        self.stages = nn.Sequential(
            _ResidualBlock(16, 16, 1), _ResidualBlock(16, 32, 2), _ResidualBlock(32, 64, 2)
        )
        self.pool = nn.AvgPool2d(8)
        self.classifier = nn.Linear(64, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.stages(self.stem(x)))
        return self.classifier(torch.flatten(x, 1))


def resnet8(seed: int = 0) -> ModelAndInputs:
    """MLPerf Tiny image classification (input 1x3x32x32 -> 10 logits)."""
    return _finish("resnet8", ResNet8(), seed)


class MobileNetV1(nn.Module):
    """MobileNetV1 with width multiplier `alpha` (Visual Wake Words: 0.25, 96x96, 2 classes)."""

    # (output channels at alpha 1, stride of the depthwise conv) per separable block
    _BLOCKS = (
        (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
        (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1),
    )

    def __init__(self, alpha: float = 0.25, classes: int = 2, resolution: int = 96) -> None:
        super().__init__()
        c = int(32 * alpha)
        layers = _conv_bn_relu(3, c, 3, stride=2, padding=1)
        for base, stride in self._BLOCKS:
            out = int(base * alpha)
            layers += _conv_bn_relu(c, c, 3, stride=stride, padding=1, groups=c)
            layers += _conv_bn_relu(c, out, 1)
            c = out
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d(resolution // 32)
        self.classifier = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v1_025(seed: int = 0) -> ModelAndInputs:
    """MLPerf Tiny visual wake words (input 1x3x96x96 -> 2 logits)."""
    return _finish("mobilenet_v1_025", MobileNetV1(), seed)


class DeepAutoencoder(nn.Module):
    """Anomaly detection autoencoder (ToyADMOS): 640-128x4-8-128x4-640."""

    def __init__(self, features: int = 640, hidden: int = 128, bottleneck: int = 8) -> None:
        super().__init__()
        widths = [features, hidden, hidden, hidden, hidden, bottleneck,
                  hidden, hidden, hidden, hidden]
        layers: list[nn.Module] = []
        for a, b in zip(widths, widths[1:]):
            layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ReLU()]
        layers.append(nn.Linear(hidden, features))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def deep_autoencoder(seed: int = 0) -> ModelAndInputs:
    """MLPerf Tiny anomaly detection (input 1x640 -> 1x640)."""
    return _finish("deep_autoencoder", DeepAutoencoder(), seed)


# --- MobileNetV2-like ---------------------------------------------------------------------


class _InvertedResidual(nn.Module):
    """Expand 1x1 (ReLU6) -> depthwise 3x3 (ReLU6) -> project 1x1 (linear), add when shapes match."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers += _conv_bn_relu(cin, hidden, 1, relu6=True)
        layers += _conv_bn_relu(hidden, hidden, 3, stride=stride, padding=1, groups=hidden,
                                relu6=True)
        layers += [nn.Conv2d(hidden, cout, 1), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2Like(nn.Module):
    """A narrow MobileNetV2 for 96x96 images (about 295k parameters)."""

    # (expansion t, output channels c, repeats n, first stride s)
    _SETTINGS = (
        (1, 8, 1, 1), (6, 16, 2, 2), (6, 16, 3, 2), (6, 24, 4, 2),
        (6, 32, 3, 1), (6, 48, 3, 2), (6, 128, 1, 1),
    )

    def __init__(self, stem: int = 16, last: int = 448, classes: int = 10,
                 resolution: int = 96) -> None:
        super().__init__()
        layers = _conv_bn_relu(3, stem, 3, stride=2, padding=1, relu6=True)
        c = stem
        for t, out, n, s in self._SETTINGS:
            for i in range(n):
                layers.append(_InvertedResidual(c, out, s if i == 0 else 1, t))
                c = out
        layers += _conv_bn_relu(c, last, 1, relu6=True)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AvgPool2d(resolution // 32)
        self.classifier = nn.Linear(last, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2_like(seed: int = 0) -> ModelAndInputs:
    """MobileNetV2-like benchmark net (input 1x3x96x96 -> 10 logits, ~295k parameters)."""
    return _finish("mobilenet_v2_like", MobileNetV2Like(), seed)


class LSTMSequence(nn.Module):
    """One-layer LSTM (16 -> 16) over an 8-step sequence (batch first), the state passed in
    and out the streaming way, 4 logits from the last hidden state. The state is an input so
    a caller can carry it across windows (and the quantizer observes real state ranges)."""

    HIDDEN = 16

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, self.HIDDEN, batch_first=True)
        self.head = nn.Linear(self.HIDDEN, 4)

    @staticmethod
    def sample(gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        """(x ~ N(0,1), h0 in (-1, 1) like a tanh output, c0 ~ N(0, 0.5^2))."""
        x = torch.randn((1, 8, 16), generator=gen)
        h0 = torch.tanh(torch.randn((1, 1, LSTMSequence.HIDDEN), generator=gen))
        c0 = 0.5 * torch.randn((1, 1, LSTMSequence.HIDDEN), generator=gen)
        return x, h0, c0

    def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(x, (h0, c0))
        return self.head(h[0])


def lstm(seed: int = 0) -> ModelAndInputs:
    """One-layer LSTM sequence model (inputs 1x8x16 + state 2x 1x1x16 -> 4 logits)."""
    model = LSTMSequence()
    gen = torch.Generator().manual_seed(seed + 7)
    with torch.no_grad():
        for p in model.lstm.parameters():  # seeded; wider than torch's default so gates saturate
            p.copy_(0.35 * torch.randn(p.shape, generator=gen))
    return _finish("lstm", model, seed)


MODELS: dict[str, Callable[..., ModelAndInputs]] = {
    "mlp": mlp,
    "small_cnn": small_cnn,
    "ds_cnn": ds_cnn,
    "resnet8": resnet8,
    "mobilenet_v1_025": mobilenet_v1_025,
    "deep_autoencoder": deep_autoencoder,
    "mobilenet_v2_like": mobilenet_v2_like,
    "lstm": lstm,
}

def _architecture(name: str) -> Callable[..., ModelAndInputs]:
    make = {**ARCHITECTURES, **TRANSFORMERS}[name][0]

    def build(seed: int = 0) -> ModelAndInputs:
        return _finish(name, make(), seed)

    build.__name__ = name
    build.__doc__ = f"{make.__doc__ or name} (input {'x'.join(map(str, _INPUTS[name][0]))})"
    return build


MODELS.update({name: _architecture(name) for name in (*ARCHITECTURES, *TRANSFORMERS)})


def __getattr__(name: str) -> Callable[..., ModelAndInputs]:
    """`torchmcu export torchmcu.examples.models:mobilenet_v3_small` finds the architectures."""
    if name in ARCHITECTURES or name in TRANSFORMERS:
        return MODELS[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

MLPERF_TINY = ("ds_cnn", "resnet8", "mobilenet_v1_025", "deep_autoencoder")


def build(name: str, seed: int = 0) -> ModelAndInputs:
    """Construct example model `name` -> (model.eval(), example_inputs)."""
    return MODELS[_check_name(name)](seed)
