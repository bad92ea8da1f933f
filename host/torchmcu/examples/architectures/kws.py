"""Two keyword spotters for 12 classes: a Conv1d net over 40 mel bands x 49 frames
(depthwise-separable 1-D convolutions, as TC-ResNet-style KWS nets use), and a GRU over
8 frames of 16 features read out from its last output."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _conv1d_bn_relu(
    cin: int, cout: int, k: int, stride: int = 1, groups: int = 1
) -> list[nn.Module]:
    return [
        nn.Conv1d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm1d(cout),
        nn.ReLU(inplace=True),
    ]


class Conv1dKWS(nn.Module):
    def __init__(self, bands: int = 40, width: int = 64, classes: int = 12) -> None:
        super().__init__()
        layers = _conv1d_bn_relu(bands, width, 3)
        for stride in (2, 1, 2, 1):
            layers += _conv1d_bn_relu(width, width, 3, stride, groups=width)  # depthwise
            layers += _conv1d_bn_relu(width, width, 1)  # pointwise
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.fc = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.pool(self.features(x)), 1)
        return self.fc(F.dropout(x, 0.1, training=self.training))


class GRUKWS(nn.Module):
    def __init__(self, features: int = 16, hidden: int = 32, classes: int = 12) -> None:
        super().__init__()
        self.gru = nn.GRU(features, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(x)
        return self.fc(out[:, -1])
