"""A small decoder-only GPT (Radford et al. 2019, "Language Models are Unsupervised Multitask
Learners"), written the way GPT code is (nanoGPT's idioms): token and learned position
embeddings (`nn.Embedding`, positions from `torch.arange`), pre-norm blocks whose attention
projects q, k and v with one linear and `split`s them, heads by `view` + `transpose`,
`F.scaled_dot_product_attention(..., is_causal=True)`, a GELU MLP of 4x the width, a final
layer norm and an LM head tied to the token embedding (one weight, stored once).

The issue-18 size: vocabulary 16, context 64, 4 layers, dim 128, 4 heads: 0.8 M parameters.
`masked=True` writes the attention as older GPT code does instead: `q @ k^T * scale`,
`masked_fill` of a causal `tril` buffer with -inf, `softmax`, `@ v`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, context: int, masked: bool) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.masked = masked
        if masked:
            causal = torch.tril(torch.ones(context, context)).view(1, 1, context, context)
            self.register_buffer("causal", causal, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        if self.masked:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
            att = att.masked_fill(self.causal[:, :, :t, :t] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, context: int, masked: bool) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, context, masked)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(
        self,
        vocab: int = 16,
        context: int = 64,
        dim: int = 128,
        depth: int = 4,
        heads: int = 4,
        masked: bool = False,
    ) -> None:
        super().__init__()
        self.vocab = vocab
        self.context = context
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList(Block(dim, heads, context, masked) for _ in range(depth))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied: the LM head reads the embedding table

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        t = tokens.shape[1]
        positions = torch.arange(t, dtype=torch.long, device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))
