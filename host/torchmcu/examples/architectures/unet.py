"""A tiny U-Net (Ronneberger et al. 2015, narrowed): two max-pooled encoder levels, one
decoder level up by a transposed conv and one by nearest upsampling, skip connections
concatenated, a per-pixel 1x1 classifier."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from torchmcu.examples.architectures._blocks import conv_bn, relu


def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(conv_bn(cin, cout, 3, act=relu), conv_bn(cout, cout, 3, act=relu))


class TinyUNet(nn.Module):
    def __init__(self, cin: int = 3, classes: int = 2, width: int = 8) -> None:
        super().__init__()
        w = width
        self.enc1 = double_conv(cin, w)
        self.enc2 = double_conv(w, 2 * w)
        self.bottom = double_conv(2 * w, 4 * w)
        self.up2 = nn.ConvTranspose2d(4 * w, 2 * w, 2, stride=2)
        self.dec2 = double_conv(4 * w, 2 * w)
        self.up1 = nn.Conv2d(2 * w, w, 1)
        self.dec1 = double_conv(2 * w, w)
        self.out = nn.Conv2d(w, classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s1 = self.enc1(x)
        s2 = self.enc2(F.max_pool2d(s1, 2))
        x = self.bottom(F.max_pool2d(s2, 2))
        x = self.dec2(torch.cat([self.up2(x), s2], dim=1))
        x = self.up1(F.interpolate(x, scale_factor=2, mode="nearest"))
        x = self.dec1(torch.cat([x, s1], dim=1))
        return self.out(x)
