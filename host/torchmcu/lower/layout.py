"""Moving activations between NHWC and contiguous memory order (one cached transpose each)."""

from __future__ import annotations

from torchmcu.lower.builder import nbytes_of
from torchmcu.lower.context import Ctx, alias, call
from torchmcu.lower.errors import LoweringError, describe_node
from torchmcu.lower.values import LValue
from torchmcu.ops.defs.transpose import TRANSPOSE


def _transpose(ctx: Ctx, v: LValue, src_sizes: list[int], perm: list[int], hint: str) -> LValue:
    """cortex_m::transpose of v viewed as contiguous src_sizes; returns the contiguous result."""
    src = alias(ctx, v, src_sizes, nhwc=False)
    out_sizes = [src_sizes[p] for p in perm]
    key = ctx.b.new_buffer(hint, nbytes_of(v.scalar_type, out_sizes))
    out_vi = ctx.b.planned(key, v.scalar_type, out_sizes)
    call(ctx, TRANSPOSE.qualified, [src.vi, ctx.b.int_list(perm)], out_vi, None)
    return v.with_(vi=out_vi, buffer=key, sizes=out_sizes, nhwc=False, flatten_chw=None)


def as_nhwc(ctx: Ctx, v: LValue, rank: int = 4) -> LValue:
    """v as a legacy 4-D channels-last tensor (rank 3: a [N, C, L] one stored [N, L, C], the
    bytes of its [N, C, 1, L] NHWC view), transposing once (cached) if needed."""
    if v.rank != rank:
        raise LoweringError(
            f"{describe_node(ctx.current) if ctx.current else ''}: expected a {rank}-D activation, "
            f"got sizes {v.sizes}"
        )
    if v.nhwc:
        return v
    if v.layout_free:
        return alias(ctx, v, v.sizes, nhwc=True)
    return _channels_last(ctx, v, [0, 2, 1] if rank == 3 else [0, 2, 3, 1])


def as_nhwc_1d(ctx: Ctx, v: LValue) -> LValue:
    return as_nhwc(ctx, v, rank=3)


def _channels_last(ctx: Ctx, v: LValue, perm: list[int]) -> LValue:
    cached = ctx.twins.get((v.vi, "nhwc"))
    if cached is not None:
        return cached
    t = _transpose(ctx, v, list(v.sizes), perm, f"{v.buffer}.nhwc")
    out = alias(ctx, t, v.sizes, nhwc=True)
    ctx.twins[(v.vi, "nhwc")] = out
    return out


def as_contiguous(ctx: Ctx, v: LValue) -> LValue:
    """v with PyTorch's contiguous memory order for its logical sizes."""
    if v.flatten_chw is not None:
        n = v.sizes[0]
        c, h, w = v.flatten_chw
        base = alias(ctx, v, [n, c, h, w], nhwc=True)
        return alias(ctx, as_contiguous(ctx, base), v.sizes, nhwc=False)
    if not v.nhwc:
        return v
    if v.layout_free:
        return alias(ctx, v, v.sizes, nhwc=False)
    cached = ctx.twins.get((v.vi, "nchw"))
    if cached is not None:
        return cached
    if v.rank == 3:
        n, c, length = v.sizes
        out = _transpose(ctx, v, [n, length, c], [0, 2, 1], f"{v.buffer}.nchw")
    else:
        n, c, h, w = v.sizes
        out = _transpose(ctx, v, [n, h, w, c], [0, 3, 1, 2], f"{v.buffer}.nchw")
    ctx.twins[(v.vi, "nchw")] = out
    return out
