"""ShuffleNetV2 (Ma et al. 2018): channel split with `chunk`, a branch, concatenation and
a channel shuffle written as reshape-transpose-reshape."""

from __future__ import annotations

import torch
from torch import nn

from torchmcu.examples.architectures._blocks import conv_bn, relu


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    n, c, h, w = x.shape
    x = x.view(n, groups, c // groups, h, w).transpose(1, 2).contiguous()
    return x.view(n, c, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        half = cout // 2
        self.stride = stride
        if stride > 1:
            self.branch1 = nn.Sequential(
                conv_bn(cin, cin, 3, stride, groups=cin), conv_bn(cin, half, 1, act=relu)
            )
        branch_in = cin if stride > 1 else half
        self.branch2 = nn.Sequential(
            conv_bn(branch_in, half, 1, act=relu),
            conv_bn(half, half, 3, stride, groups=half),
            conv_bn(half, half, 1, act=relu),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNetV2; `widths` are the x0.5 model's stage widths by default."""

    def __init__(
        self,
        widths: tuple[int, ...] = (24, 48, 96, 192, 1024),
        repeats: tuple[int, ...] = (4, 8, 4),
        classes: int = 10,
    ) -> None:
        super().__init__()
        self.conv1 = conv_bn(3, widths[0], 3, 2, act=relu)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages: list[nn.Module] = []
        c = widths[0]
        for out, n in zip(widths[1:-1], repeats):
            stages += [ShuffleUnit(c, out, 2)] + [ShuffleUnit(out, out, 1) for _ in range(n - 1)]
            c = out
        self.stages = nn.Sequential(*stages)
        self.conv5 = conv_bn(c, widths[-1], 1, act=relu)
        self.fc = nn.Linear(widths[-1], classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv5(self.stages(self.maxpool(self.conv1(x))))
        return self.fc(x.mean([2, 3]))
