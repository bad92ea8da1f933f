"""quantized_add and quantized_mul: RESCALE to int32, ADD/MUL (int32 only in TOSA 1.0), RESCALE back.

quantized_add follows CMSIS-NN: each operand's requantize((x - zp) << 20, m, shift), the
sum, and the sum's requantization to int8. An int8 operand has only 256 values, so the
operand step is one RESCALE (int8 -> int32) when some (multiplier, shift) reproduces it
for all 256 of them (checked here, exhaustively); otherwise it is two RESCALEs, the exact
<< 20 and the operand's own DOUBLE_ROUND requantization, which is CMSIS-NN's by identity.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from torchmcu.npu.tosa.graph import Args, Graph, Tensor, attr, physical_shape
from torchmcu.npu.tosa.ops_pool import tosa_double_round
from torchmcu.reference.ops_elementwise import ADD_INPUT_LEFT_SHIFT
from torchmcu.reference.quant import requantize

Read = Callable[[int], Tensor]


def _operand(g: Graph, a: Args, read: Read, i: int, out_shape: tuple[int, ...]) -> Tensor:
    """Operand i in the out tensor's physical shape, or as a per-channel [1,...,1,C] operand."""
    x = read(i)
    if x.shape == out_shape:
        return x
    if int(np.prod(x.shape)) == int(np.prod(out_shape)):
        return g.reshape(x, out_shape)
    out_t = a.tensor(len(a.args) - 2)
    if (
        len(out_t.sizes) == 4
        and int(np.prod(x.shape)) == out_t.sizes[1]
        and out_shape[-1] == out_t.sizes[1]
    ):
        return g.reshape(x, (1,) * (len(out_shape) - 1) + (out_shape[-1],))
    raise a.error(f"operand {i} of shape {list(x.shape)} does not broadcast to {list(out_shape)}")


def _centred(g: Graph, x: Tensor, zero_point: int, left_shift: int) -> Tensor:
    """int8 -> int32 (x - zero_point) * 2^left_shift, exactly (m = 2^30, shift = 30 - left_shift)."""
    return g.rescale(x, "INT32", [1 << 30], [30 - left_shift], input_zp=zero_point)


def single_rescale(zero_point: int, multiplier: int, shift: int) -> tuple[int, int] | None:
    """(m, tosa shift) whose one RESCALE of int8 x (input_zp = zero_point) equals
    requantize((x - zero_point) << 20, multiplier, shift) for every int8 x, if one exists.

    For each TOSA shift the multipliers that hit every target value form an interval
    (one linear inequality per x); shifts are tried from the natural one outwards."""
    centred = [x - zero_point for x in range(-128, 128)]
    want = requantize(np.array(centred, dtype=np.int64) << ADD_INPUT_LEFT_SHIFT, multiplier, shift)
    natural = 31 - shift - ADD_INPUT_LEFT_SHIFT
    # TOSA requires |value| < 2^(shift - 1): x - zero_point spans up to +-255, so shift >= 9.
    for s in sorted(range(9, 63), key=lambda s: (abs(s - natural), s)):
        lo, hi = 0, (1 << 31) - 1
        for v, f in zip(centred, want.tolist()):
            rounding = (1 << (s - 1)) + ((1 << 30) if v >= 0 else -(1 << 30)) * (s > 31)
            # f * 2^s <= v * m + rounding < (f + 1) * 2^s
            a, b = f * (1 << s) - rounding, (f + 1) * (1 << s) - rounding  # a <= v*m < b
            if v > 0:
                lo, hi = max(lo, -(-a // v)), min(hi, (b - 1) // v)
            elif v < 0:  # dividing by v < 0 flips: b / v < m <= a / v
                lo, hi = max(lo, b // v + 1), min(hi, a // v)
            elif not a <= 0 < b:
                lo, hi = 1, 0
            if lo > hi:
                break
        if lo <= hi:
            m = min(max(round(multiplier * 2.0 ** (s - natural)), lo), hi)
            assert np.array_equal(tosa_double_round(np.array(centred), m, s), want)
            return m, s
    return None


def add(g: Graph, a: Args, read: Read) -> Tensor:
    out_shape = physical_shape(a.tensor(len(a.args) - 2))
    terms = []
    for i in (0, 4):
        x = _operand(g, a, read, i, out_shape)
        zero_point, multiplier, shift = (int(a.scalar(i + k)) for k in (1, 2, 3))
        one = single_rescale(zero_point, multiplier, shift)
        if one is not None:
            terms.append(g.rescale(x, "INT32", [one[0]], [one[1]], input_zp=zero_point))
            continue
        wide = _centred(g, x, zero_point, ADD_INPUT_LEFT_SHIFT)
        terms.append(g.rescale(wide, "INT32", [multiplier], [31 - shift]))
    shape = tuple(max(p, q) for p, q in zip(terms[0].shape, terms[1].shape))
    total = g.op("ADD", terms, shape, "INT32", attr("AddAttribute"))
    return g.requantize(
        total,
        [int(a.scalar(9))],
        [int(a.scalar(10))],
        int(a.scalar(8)),
        int(a.scalar(11)),
        int(a.scalar(12)),
    )


def mul(g: Graph, a: Args, read: Read) -> Tensor:
    out_shape = physical_shape(a.tensor(len(a.args) - 2))
    terms = [
        _centred(g, _operand(g, a, read, i, out_shape), int(a.scalar(i + 1)), 0) for i in (0, 2)
    ]
    shape = tuple(max(p, q) for p, q in zip(terms[0].shape, terms[1].shape))
    product = g.op("MUL", [*terms, g.scalar(0, "INT8")], shape, "INT32", attr("MulAttribute"))
    return g.requantize(product, [int(a.scalar(5))], [int(a.scalar(6))], int(a.scalar(4)))
