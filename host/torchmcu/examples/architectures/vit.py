"""A small Vision Transformer (Dosovitskiy et al. 2020, "An Image is Worth 16x16 Words"),
written the way ViT code is: the patch embedding is a strided convolution whose output is
flattened to tokens with `flatten(2).transpose(1, 2)`, a learned class token is prepended, a
learned position embedding added, then pre-norm encoder layers
(`nn.TransformerEncoderLayer(batch_first=True, norm_first=True)`, GELU MLP), a final layer
norm and a linear head on the class token.

The issue-18 size: 32x32 input, patch 8 (16 tokens + the class token), 2 layers, dim 64,
4 heads, MLP 128.
"""

from __future__ import annotations

import torch
from torch import nn


class ViT(nn.Module):
    def __init__(
        self,
        image: int = 32,
        patch: int = 8,
        dim: int = 64,
        depth: int = 2,
        heads: int = 4,
        mlp: int = 128,
        classes: int = 10,
    ) -> None:
        super().__init__()
        tokens = (image // patch) ** 2
        self.patch_embed = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens + 1, dim))
        layer = nn.TransformerEncoderLayer(
            dim, heads, mlp, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x).flatten(2).transpose(1, 2)  # [B, tokens, dim]
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos_embed
        x = self.norm(self.encoder(x))
        return self.head(x[:, 0])
