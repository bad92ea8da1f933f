"""The MobileNet family and its relatives: MobileNetV2, MobileNetV3-Small, MnasNet, PP-LCNet.

Layer lists follow the papers (Sandler et al. 2018, Howard et al. 2019, Tan et al. 2019,
Cui et al. 2021); each class is written the way model code writes it (inplace activations,
`F.*` calls, `torch.flatten`, dropout in the head).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from torchmcu.examples.architectures._blocks import (
    SqueezeExcite,
    conv_bn,
    hardswish,
    make_divisible,
    relu,
    relu6,
)


class InvertedResidual(nn.Module):
    """1x1 expand -> k x k depthwise -> optional squeeze-excite -> 1x1 project (linear),
    with the identity added when stride is 1 and the widths match."""

    def __init__(
        self,
        cin: int,
        hidden: int,
        cout: int,
        k: int,
        stride: int,
        act: Callable[[], nn.Module],
        se_channels: int = 0,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if hidden != cin:
            layers.append(conv_bn(cin, hidden, 1, act=act))
        layers.append(conv_bn(hidden, hidden, k, stride, groups=hidden, act=act))
        if se_channels:
            layers.append(SqueezeExcite(hidden, se_channels))
        layers.append(conv_bn(hidden, cout, 1))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    """MobileNetV2 with a width multiplier (Sandler et al. 2018, Table 2)."""

    # (expansion t, output channels c, repeats n, first stride s)
    SETTINGS = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )

    def __init__(self, width: float = 1.0, classes: int = 10) -> None:
        super().__init__()
        c = make_divisible(32 * width)
        last = make_divisible(1280 * max(1.0, width))
        layers: list[nn.Module] = [conv_bn(3, c, 3, 2, act=relu6)]
        for t, out, n, s in self.SETTINGS:
            out = make_divisible(out * width)
            for i in range(n):
                layers.append(InvertedResidual(c, c * t, out, 3, s if i == 0 else 1, relu6))
                c = out
        layers.append(conv_bn(c, last, 1, act=relu6))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(last, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


class MobileNetV3Small(nn.Module):
    """MobileNetV3-Small (Howard et al. 2019, Table 2)."""

    # (kernel, expanded width, output width, squeeze-excite, hardswish, stride)
    SETTINGS = (
        (3, 16, 16, True, False, 2),
        (3, 72, 24, False, False, 2),
        (3, 88, 24, False, False, 1),
        (5, 96, 40, True, True, 2),
        (5, 240, 40, True, True, 1),
        (5, 240, 40, True, True, 1),
        (5, 120, 48, True, True, 1),
        (5, 144, 48, True, True, 1),
        (5, 288, 96, True, True, 2),
        (5, 576, 96, True, True, 1),
        (5, 576, 96, True, True, 1),
    )

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [conv_bn(3, 16, 3, 2, act=hardswish)]
        c = 16
        for k, hidden, out, se, hs, s in self.SETTINGS:
            se_channels = make_divisible(hidden / 4) if se else 0
            act = hardswish if hs else relu
            layers.append(InvertedResidual(c, hidden, out, k, s, act, se_channels))
            c = out
        layers.append(conv_bn(c, 576, 1, act=hardswish))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(576, 1024),
            nn.Hardswish(inplace=True),
            nn.Dropout(0.2, inplace=True),
            nn.Linear(1024, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1)
        return self.classifier(x)


def _mnas_depth(value: int, alpha: float) -> int:
    """MnasNet scales a depth to a multiple of 8, rounding up when rounding down loses > 10 %."""
    return make_divisible(value * alpha, 8)


class MnasNet(nn.Module):
    """MnasNet-B1 with a depth multiplier (Tan et al. 2019), as torchvision's mnasnet0_5 has it."""

    # (kernel, stride, expansion, repeats) of the six inverted-residual stacks
    STACKS = ((3, 2, 3, 3), (5, 2, 3, 3), (5, 2, 6, 3), (3, 1, 6, 2), (5, 2, 6, 4), (3, 1, 6, 1))
    DEPTHS = (32, 16, 24, 40, 80, 96, 192, 320)

    def __init__(self, alpha: float = 1.0, classes: int = 10) -> None:
        super().__init__()
        d = [_mnas_depth(v, alpha) for v in self.DEPTHS]
        layers: list[nn.Module] = [
            conv_bn(3, d[0], 3, 2, act=relu),
            conv_bn(d[0], d[0], 3, groups=d[0], act=relu),
            conv_bn(d[0], d[1], 1),
        ]
        c = d[1]
        for (k, s, t, n), out in zip(self.STACKS, d[2:]):
            for i in range(n):
                layers.append(InvertedResidual(c, c * t, out, k, s if i == 0 else 1, relu))
                c = out
        layers.append(conv_bn(c, 1280, 1, act=relu))
        self.layers = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2, inplace=True), nn.Linear(1280, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.layers(x).mean([2, 3]))


class LCNet(nn.Module):
    """PP-LCNet with a width scale (Cui et al. 2021): depthwise-separable blocks with
    hardswish, squeeze-excite in the last two, a 1x1 conv head after the pooling."""

    # (kernel, input width, output width, stride, squeeze-excite) at scale 1.0
    BLOCKS = (
        (3, 16, 32, 1, False),
        (3, 32, 64, 2, False),
        (3, 64, 64, 1, False),
        (3, 64, 128, 2, False),
        (3, 128, 128, 1, False),
        (3, 128, 256, 2, False),
        *((5, 256, 256, 1, False),) * 5,
        (5, 256, 512, 2, True),
        (5, 512, 512, 1, True),
    )

    def __init__(self, scale: float = 0.5, classes: int = 10, head: int = 1280) -> None:
        super().__init__()
        layers: list[nn.Module] = [conv_bn(3, make_divisible(16 * scale), 3, 2, act=hardswish)]
        for k, cin, cout, s, se in self.BLOCKS:
            cin, cout = make_divisible(cin * scale), make_divisible(cout * scale)
            layers.append(conv_bn(cin, cin, k, s, groups=cin, act=hardswish))
            if se:
                layers.append(SqueezeExcite(cin, cin // 4))
            layers.append(conv_bn(cin, cout, 1, act=hardswish))
        self.features = nn.Sequential(*layers)
        last = make_divisible(512 * scale)
        self.head = nn.Conv2d(last, head, 1)
        self.fc = nn.Linear(head, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        x = F.hardswish(self.head(x), inplace=True)
        x = F.dropout(x, 0.2, training=self.training)
        return self.fc(torch.flatten(x, 1))
