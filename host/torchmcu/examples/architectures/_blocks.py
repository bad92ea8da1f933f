"""Building blocks shared by the architectures: channel rounding and squeeze-excite."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def make_divisible(value: float, divisor: int = 8) -> int:
    """Round a scaled channel count to a multiple of `divisor`, never more than 10 % down:
    the rule MobileNetV2/V3, EfficientNet, GhostNet and LCNet use for their width multipliers."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def conv_bn(
    cin: int,
    cout: int,
    k: int,
    stride: int = 1,
    groups: int = 1,
    act: Callable[[], nn.Module] | None = None,
) -> nn.Sequential:
    """k x k convolution (same padding, no bias), BatchNorm, then `act` if given."""
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def relu() -> nn.Module:
    return nn.ReLU(inplace=True)


def relu6() -> nn.Module:
    return nn.ReLU6(inplace=True)


def hardswish() -> nn.Module:
    return nn.Hardswish(inplace=True)


def silu() -> nn.Module:
    return nn.SiLU(inplace=True)


class SqueezeExcite(nn.Module):
    """x * gate(fc2(act(fc1(mean(x))))): the [N,C,1,1] x [N,C,H,W] channel reweighting."""

    def __init__(
        self,
        channels: int,
        squeezed: int,
        act: Callable[[], nn.Module] = relu,
        gate: Callable[[torch.Tensor], torch.Tensor] = F.hardsigmoid,
    ) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.act = act()
        self.fc2 = nn.Conv2d(squeezed, channels, 1)
        self.gate = gate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(w))))
