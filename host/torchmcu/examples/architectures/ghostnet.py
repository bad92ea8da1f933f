"""GhostNet (Han et al. 2020, Table 1) with a width multiplier: Ghost modules (a primary
1x1 conv plus a cheap depthwise conv, concatenated and sliced to width), squeeze-excite
gated by relu6(x + 3) / 6 as the reference code writes its hard sigmoid."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from torchmcu.examples.architectures._blocks import SqueezeExcite, conv_bn, make_divisible, relu


def hard_sigmoid(x: torch.Tensor) -> torch.Tensor:
    return F.relu6(x + 3.0) / 6.0


class GhostModule(nn.Module):
    def __init__(self, cin: int, cout: int, act: bool) -> None:
        super().__init__()
        self.cout = cout
        primary = math.ceil(cout / 2)
        self.primary = conv_bn(cin, primary, 1, act=relu if act else None)
        self.cheap = conv_bn(primary, primary, 3, groups=primary, act=relu if act else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.primary(x)
        out = torch.cat([x1, self.cheap(x1)], dim=1)
        return out[:, : self.cout]


class GhostBottleneck(nn.Module):
    def __init__(self, cin: int, hidden: int, cout: int, k: int, stride: int, se: bool) -> None:
        super().__init__()
        self.ghost1 = GhostModule(cin, hidden, act=True)
        self.dw = conv_bn(hidden, hidden, k, stride, groups=hidden) if stride > 1 else None
        self.se = (
            SqueezeExcite(hidden, make_divisible(hidden * 0.25, 4), gate=hard_sigmoid)
            if se
            else None
        )
        self.ghost2 = GhostModule(hidden, cout, act=False)
        if stride == 1 and cin == cout:
            self.shortcut: nn.Module = nn.Identity()
        else:
            self.shortcut = nn.Sequential(
                conv_bn(cin, cin, k, stride, groups=cin), conv_bn(cin, cout, 1)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        residual = x
        x = self.ghost1(x)
        if self.dw is not None:
            x = self.dw(x)
        if self.se is not None:
            x = self.se(x)
        x = self.ghost2(x)
        x += self.shortcut(residual)
        return x


class GhostNet(nn.Module):
    # (kernel, expanded width, output width, squeeze-excite, stride) at width 1.0
    BLOCKS = (
        (3, 16, 16, False, 1),
        (3, 48, 24, False, 2),
        (3, 72, 24, False, 1),
        (5, 72, 40, True, 2),
        (5, 120, 40, True, 1),
        (3, 240, 80, False, 2),
        (3, 200, 80, False, 1),
        (3, 184, 80, False, 1),
        (3, 184, 80, False, 1),
        (3, 480, 112, True, 1),
        (3, 672, 112, True, 1),
        (5, 672, 160, True, 2),
        (5, 960, 160, False, 1),
        (5, 960, 160, True, 1),
        (5, 960, 160, False, 1),
        (5, 960, 160, True, 1),
    )

    def __init__(self, width: float = 1.0, classes: int = 10) -> None:
        super().__init__()
        c = make_divisible(16 * width, 4)
        layers: list[nn.Module] = [conv_bn(3, c, 3, 2, act=relu)]
        for k, hidden, out, se, s in self.BLOCKS:
            out = make_divisible(out * width, 4)
            layers.append(GhostBottleneck(c, make_divisible(hidden * width, 4), out, k, s, se))
            c = out
        last = make_divisible(960 * width, 4)
        layers.append(conv_bn(c, last, 1, act=relu))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))
        self.conv_head = nn.Conv2d(last, 1280, 1)
        self.act = nn.ReLU(inplace=True)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.conv_head(self.pool(self.features(x))))
        x = F.dropout(torch.flatten(x, 1), 0.2, training=self.training)
        return self.classifier(x)
