"""aten::pixel_shuffle and pixel_unshuffle: a permutation of the bytes, no operator of their own.

int8 (the output keeps the input's qparams, annotate "shared"): on NHWC bytes pixel_shuffle
by r is one cortex_m::transpose of the input viewed as [N, H, W, C, r, r] to
[N, H, r, W, r, C], which is the output's NHWC bytes; pixel_unshuffle is the inverse move
([N, H, r, W, r, C] -> [N, H, W, C, r, r]). The TOSA lowering of that transpose (a RESHAPE and
TRANSPOSE) takes it to the NPU. fp32: the same permutation of the contiguous NCHW tensor viewed
as [N, C, r, r, H, W] by the portable aten::permute_copy. The rules get the lowering Kit
(torchmcu/lower/kit.py) as `k`; `node` is a torch.fx.Node (torch-free here).
"""

from __future__ import annotations

from typing import Any

from torchmcu.ops.core import Annotate, pattern
from torchmcu.ops.defs.portable_copy import PERMUTE_COPY
from torchmcu.ops.defs.transpose import TRANSPOSE


def _geometry(k: Any, node: Any, sizes: list[int], shuffle: bool) -> tuple[int, list[int]]:
    """(factor r, the output's [N, C, H, W]); a clear error for a shape that does not fit."""
    r = int(k.aten_arg(node, "upscale_factor" if shuffle else "downscale_factor"))
    if len(sizes) != 4:
        raise k.unsupported(node, "pixel (un)shuffle of a tensor that is not 4-D")
    n, c, h, w = sizes
    if shuffle:
        return r, [n, c // (r * r), h * r, w * r]
    return r, [n, c * r * r, h // r, w // r]


def lower_int8(k: Any, node: Any, shuffle: bool) -> None:
    x = k.input_value(node.args[0])
    qs, act = [], None
    if k.quantized(node):
        qs, act, qp = k.output_quant(node, allow_activation=False)
        if not k.same_qparams(x.scale, x.zero_point, qp):
            raise k.unsupported(node, "a pixel shuffle that changes qparams")
    r, out_sizes = _geometry(k, node, list(x.sizes), shuffle)
    x = k.as_nhwc(x)
    n, c, h, w = out_sizes if shuffle else x.sizes  # the larger image and its channels
    coarse = [n, h // r, r, w // r, r, c]  # NHWC bytes of the larger image
    fine = [n, h // r, w // r, c, r, r]  # NHWC bytes of the smaller one
    src, dst, perm = (
        (fine, coarse, [0, 1, 4, 2, 5, 3]) if shuffle else (coarse, fine, [0, 1, 3, 5, 2, 4])
    )
    moved = k.new_int8(node.name, dst, None, nhwc=False).with_(
        scale=x.scale, zero_point=x.zero_point
    )
    k.call(
        TRANSPOSE, node, input=k.alias(x, src, nhwc=False).vi, perm=k.int_list(perm), out=moved.vi
    )
    k.bind_shared(node, qs, act, k.alias(moved, out_sizes, nhwc=True))


def lower_float(k: Any, node: Any, shuffle: bool) -> None:
    x = k.float_input(node.args[0])
    r, out_sizes = _geometry(k, node, list(x.sizes), shuffle)
    n, c, h, w = out_sizes if shuffle else x.sizes
    coarse = [n, c, h // r, r, w // r, r]  # contiguous NCHW of the larger image
    fine = [n, c, r, r, h // r, w // r]
    src, perm = (fine, [0, 1, 4, 2, 5, 3]) if shuffle else (coarse, [0, 1, 3, 5, 2, 4])
    moved = k.new_float(node.name, [src[p] for p in perm])
    k.call(PERMUTE_COPY, node, self=k.alias(x, src, nhwc=False).vi, dims=k.int_list(perm),
           out=moved.vi)  # fmt: skip
    k.bind(node, k.alias(moved, out_sizes, nhwc=False))


def lower_shuffle(k: Any, node: Any) -> None:
    lower_int8(k, node, True)


def lower_unshuffle(k: Any, node: Any) -> None:
    lower_int8(k, node, False)


def lower_shuffle_float(k: Any, node: Any) -> None:
    lower_float(k, node, True)


def lower_unshuffle_float(k: Any, node: Any) -> None:
    lower_float(k, node, False)


_SHARED = Annotate("shared")
pattern("aten::pixel_shuffle.default", annotate=_SHARED, lower=lower_shuffle, emits=(TRANSPOSE,))
pattern(
    "aten::pixel_unshuffle.default", annotate=_SHARED, lower=lower_unshuffle, emits=(TRANSPOSE,)
)
# the fp32 rules (kept here rather than beside the portable kernel: they are the same permutation)
pattern("aten::pixel_shuffle.default", lower_float=lower_shuffle_float, emits=(PERMUTE_COPY,))
pattern("aten::pixel_unshuffle.default", lower_float=lower_unshuffle_float, emits=(PERMUTE_COPY,))
