"""EfficientNet-B0 (Tan and Le 2019, Table 1): MBConv blocks with SiLU and squeeze-excite
(sigmoid gate, squeezed to a quarter of the block's input width)."""

from __future__ import annotations

import torch
from torch import nn

from torchmcu.examples.architectures._blocks import SqueezeExcite, conv_bn, silu


class MBConv(nn.Module):
    def __init__(self, cin: int, cout: int, k: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(conv_bn(cin, hidden, 1, act=silu))
        layers += [
            conv_bn(hidden, hidden, k, stride, groups=hidden, act=silu),
            SqueezeExcite(hidden, max(1, cin // 4), act=silu, gate=torch.sigmoid),
            conv_bn(hidden, cout, 1),
        ]
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return y + x if self.residual else y  # stochastic depth is training-only


class EfficientNetB0(nn.Module):
    # (expansion, kernel, stride, output width, repeats)
    STAGES = (
        (1, 3, 1, 16, 1),
        (6, 3, 2, 24, 2),
        (6, 5, 2, 40, 2),
        (6, 3, 2, 80, 3),
        (6, 5, 1, 112, 3),
        (6, 5, 2, 192, 4),
        (6, 3, 1, 320, 1),
    )

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = [conv_bn(3, 32, 3, 2, act=silu)]
        c = 32
        for t, k, s, out, n in self.STAGES:
            for i in range(n):
                layers.append(MBConv(c, out, k, s if i == 0 else 1, t))
                c = out
        layers.append(conv_bn(c, 1280, 1, act=silu))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2, inplace=True), nn.Linear(1280, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.avgpool(self.features(x)), 1)
        return self.classifier(x)
