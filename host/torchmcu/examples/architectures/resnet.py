"""ResNet-18 (He et al. 2016): the ImageNet layout (7x7 stem, max pool, four stages of two
basic blocks) with its default widths, here fed 32x32 images."""

from __future__ import annotations

import torch
from torch import nn

from torchmcu.examples.architectures._blocks import conv_bn, relu


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = conv_bn(cin, cout, 3, stride, act=relu)
        self.conv2 = conv_bn(cout, cout, 3)
        self.downsample = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.conv2(self.conv1(x))
        out += identity
        return self.relu(out)


class ResNet18(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks: list[nn.Module] = []
        c = 64
        for out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(c, out, stride), BasicBlock(out, out, 1)]
            c = out
        self.layers = nn.Sequential(*blocks)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.avgpool(self.layers(self.stem(x)))
        return self.fc(torch.flatten(x, 1))
