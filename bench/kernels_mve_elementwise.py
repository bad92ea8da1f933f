"""Executed instructions of quantize/dequantize, add/mul (also broadcast), maximum, max/avg
pooling, softmax, table activations, prelu, embedding, resize, cat, batch matmul, layer norm
and the int16 residual stream's add16 and layer norm on QEMU (Cortex-M55), scalar vs Helium
(MVE), against the CMSIS-NN figures of issue 4 and, for the example architectures' shapes of
issue 17, CMSIS-NN figures measured the same way (bench/README.md).

    python bench/kernels_mve_elementwise.py [--shapes add maxpool ...]
                                            [--build-dir build/bench-kernels-mve-elementwise]

Each shape is a one-operator Program (random data) embedded in the runner and run once on QEMU
mps3-an547 with the counting plugin (tools/qemu_icount), in an image with the Helium paths and
in one built with -DTM_KERNELS_SCALAR_ONLY. The count runs from the kernel's entry to the
runner's end-of-inference marker (the kernel, its argument checks and a few instructions of
return path). Every output is compared bit for bit with the reference interpreter first.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "tests"))  # the one-op Program builder of the MVE tests

BOARD = "qemu-an547"
LEGACY = [0, 2, 3, 1]


@dataclass
class Shape:
    op: str  # cortex_m operator
    elements: int
    cmsis_nn: int | None  # issue 4's reference figure
    build: Callable  # (CaseProgram, rng) -> None, adds exactly one call
    prefix: str = "tm_cortex_m_"  # of the kernel's entry point
    flat: int | None = None  # broadcast: CMSIS-NN's one call on an operand expanded beforehand


def _quantize(p, rng) -> None:
    from torchmcu.pte import program as pm

    x = (rng.standard_normal(16384) * 30).astype(np.float32)
    out = p.output(pm.ScalarType.CHAR, [1, 16384])
    args = [p.input(x.reshape(1, -1), pm.ScalarType.FLOAT), p.d(0.25), p.i(3), p.i(-128), p.i(127), p.i(1), out]
    p.call("cortex_m::quantize_per_tensor", args, "16384")


def _dequantize(p, rng) -> None:
    from torchmcu.pte import program as pm

    q = rng.integers(-128, 128, (1, 16384), dtype=np.int8)
    out = p.output(pm.ScalarType.FLOAT, [1, 16384])
    args = [p.input(q, pm.ScalarType.CHAR), p.d(0.25), p.i(3), p.i(-128), p.i(127), p.i(1), out]
    p.call("cortex_m::dequantize_per_tensor", args, "16384")


def _nhwc(p, rng, h, w, c) -> int:
    from torchmcu.pte import program as pm

    sizes = [1, c, h, w]
    return p.input(rng.integers(-128, 128, sizes, dtype=np.int8), pm.ScalarType.CHAR, sizes, LEGACY)


def _binary_operands(p, rng, channel: bool) -> tuple[int, int]:
    """A 32x32x16 map and a second one, or (channel) a [1,16,1,1] vector."""
    from torchmcu.pte import program as pm

    a = _nhwc(p, rng, 32, 32, 16)
    if channel:
        return a, p.input(rng.integers(-128, 128, [1, 16, 1, 1], dtype=np.int8), pm.ScalarType.CHAR)
    return a, _nhwc(p, rng, 32, 32, 16)


def _add(p, rng, channel: bool = False) -> None:
    from torchmcu import reference as ref
    from torchmcu.pte import program as pm

    s1, s2, so = 0.05, 0.08, 0.1
    twice = 2 * max(s1, s2)
    m1, sh1 = ref.quantize_multiplier(s1 / twice)
    m2, sh2 = ref.quantize_multiplier(s2 / twice)
    mo, sho = ref.quantize_multiplier(twice / (so * (1 << 20)))
    a, b = _binary_operands(p, rng, channel)
    out = p.output(pm.ScalarType.CHAR, [1, 16, 32, 32], LEGACY)
    args = [a, p.i(-3), p.i(m1), p.i(sh1), b, p.i(5), p.i(m2), p.i(sh2), p.i(-1), p.i(mo), p.i(sho),
            p.i(-128), p.i(127), out]  # fmt: skip
    p.call("cortex_m::quantized_add", args, "32x32x16")


def _mul(p, rng) -> None:
    from torchmcu import reference as ref
    from torchmcu.pte import program as pm

    mo, sho = ref.quantize_multiplier(0.05 * 0.08 / 0.1)
    a, b = _nhwc(p, rng, 32, 32, 16), _nhwc(p, rng, 32, 32, 16)
    out = p.output(pm.ScalarType.CHAR, [1, 16, 32, 32], LEGACY)
    p.call("cortex_m::quantized_mul", [a, p.i(-3), b, p.i(5), p.i(-1), p.i(mo), p.i(sho), out], "32x32x16")


def _other_sizes(other: str, h: int, w: int, c: int) -> list[int]:
    return {"channel": [1, c, 1, 1], "scalar": [1], "spatial": [1, 1, h, w], "row": [1, c, h, 1]}[other]


def _mul_broadcast(other: str, h: int = 32, w: int = 32, c: int = 16) -> Callable:
    """mul of an h x w x c map by a [1,c,1,1] channel vector (squeeze-excite), one number, or
    (the general broadcast) a [1,1,h,w] map (x * x.mean(1, keepdim=True): rows of one value
    along C) or a [1,c,h,1] one (x * x.mean(3, keepdim=True): rows of C along W)."""

    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        mo, sho = ref.quantize_multiplier(0.05 * 0.08 / 0.1)
        a = _nhwc(p, rng, h, w, c)
        sizes = _other_sizes(other, h, w, c)
        order = LEGACY if len(sizes) == 4 else None
        b = p.input(rng.integers(-128, 128, sizes, dtype=np.int8), pm.ScalarType.CHAR, sizes, order)
        out = p.output(pm.ScalarType.CHAR, [1, c, h, w], LEGACY)
        p.call("cortex_m::quantized_mul", [a, p.i(-3), b, p.i(5), p.i(-1), p.i(mo), p.i(sho), out],
               f"{h}x{w}x{c} * {other}")  # fmt: skip

    return build


def _maximum(p, rng, channel: bool = False) -> None:
    from torchmcu.pte import program as pm

    a, b = _binary_operands(p, rng, channel)
    out = p.output(pm.ScalarType.CHAR, [1, 16, 32, 32], LEGACY)
    p.call("cortex_m::maximum", [a, b, out], "32x32x16")


def _maxpool(h: int = 32, w: int = 32, c: int = 16, k: int = 2, st: int = 2, pad: int = 0,
             ceil: bool = False) -> Callable:  # fmt: skip
    def build(p, rng) -> None:
        from torchmcu.ops.layout import pool_output_size
        from torchmcu.pte import program as pm

        x = _nhwc(p, rng, h, w, c)
        oh, ow = (pool_output_size(n, k, st, pad, ceil) for n in (h, w))
        out = p.output(pm.ScalarType.CHAR, [1, c, oh, ow], LEGACY)
        args = [x, p.ints([k, k]), p.ints([st, st]), p.ints([pad, pad]), p.ints([1, 1]), p.b(ceil), p.i(0), p.i(0),
                p.i(-128), p.i(127), out]  # fmt: skip
        p.call("cortex_m::quantized_max_pool2d", args, f"{h}x{w}x{c} {k}x{k} s{st} p{pad} ceil={ceil}")

    return build


def _avgpool(h: int = 25, w: int = 5, c: int = 64) -> Callable:
    """A global average pool (the squeeze-excite mean, a head's pool)."""

    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        x = _nhwc(p, rng, h, w, c)
        out = p.output(pm.ScalarType.CHAR, [1, c, 1, 1], LEGACY)
        m, s = ref.quantize_multiplier(0.05)
        args = [x, p.ints([h, w]), p.ints([1, 1]), p.ints([0, 0]), p.b(False), p.i(0), p.i(m), p.i(s),
                p.scratch(), out]  # fmt: skip
        p.call("cortex_m::quantized_avg_pool2d", args, f"{h}x{w}x{c} global")

    return build


def _table(h: int, w: int, c: int) -> Callable:
    """cortex_m::quantized_activation: hardswish, sigmoid ... as a 256-entry int8 table."""

    def build(p, rng) -> None:
        from torchmcu.pte import program as pm

        x = _nhwc(p, rng, h, w, c)
        lut = p.input(rng.integers(-128, 128, (256,), dtype=np.int8), pm.ScalarType.CHAR)
        out = p.output(pm.ScalarType.CHAR, [1, c, h, w], LEGACY)
        p.call("cortex_m::quantized_activation", [x, lut, out], f"{h}x{w}x{c} table")

    return build


def _embedding(tokens: int, vocab: int, dim: int) -> Callable:
    """torchmcu::quantized_embedding: `tokens` int64 ids into a [vocab, dim] table, one
    requantization per row (gpt_tiny's token embedding)."""

    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        pairs = [ref.single_rounding_multiplier(float(r)) for r in rng.uniform(0.2, 1.5, vocab)]
        w = p.input(rng.integers(-127, 128, (vocab, dim), dtype=np.int8), pm.ScalarType.CHAR)
        idx = p.input(rng.integers(0, vocab, (1, tokens)), pm.ScalarType.LONG)
        m = p.input(np.array([m for m, _ in pairs], np.int32), pm.ScalarType.INT)
        sh = p.input(np.array([s for _, s in pairs], np.int32), pm.ScalarType.INT)
        out = p.output(pm.ScalarType.CHAR, [1, tokens, dim])
        p.call("torchmcu::quantized_embedding", [w, idx, m, sh, p.i(-5), out], f"{tokens}x{dim}")

    return build


def _prelu(p, rng) -> None:
    """torchmcu::quantized_prelu of a 32x32x16 map, one negative slope per channel."""
    from torchmcu import reference as ref
    from torchmcu.pte import program as pm

    pairs = [ref.single_rounding_multiplier(float(a)) for a in rng.uniform(0.05, 0.5, 16)]
    pos_m, pos_s = ref.single_rounding_multiplier(0.8)
    x = _nhwc(p, rng, 32, 32, 16)
    m = p.input(np.array([-m for m, _ in pairs], np.int32), pm.ScalarType.INT)
    sh = p.input(np.array([s for _, s in pairs], np.int32), pm.ScalarType.INT)
    out = p.output(pm.ScalarType.CHAR, [1, 16, 32, 32], LEGACY)
    p.call("torchmcu::quantized_prelu", [x, p.i(-3), p.i(2), p.i(pos_m), p.i(pos_s), m, sh, out], "32x32x16")


def _softmax(n: int) -> Callable:
    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        m, s = ref.quantize_multiplier(min(0.0625 * (1 << 26), 2**31 - 1))
        diff_min = -int(np.floor(31 * (1 << 26) / (1 << s)))
        x = p.input(rng.integers(-128, 128, (1, n), dtype=np.int8), pm.ScalarType.CHAR)
        out = p.output(pm.ScalarType.CHAR, [1, n])
        p.call("cortex_m::softmax", [x, p.i(-1), p.i(0), p.i(-128), p.i(m), p.i(s), p.i(diff_min), out], f"1x{n}")

    return build


def _resize(bilinear: bool, h: int = 16, w: int = 16, c: int = 16) -> Callable:
    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        m, s = ref.single_rounding_multiplier(1 / 16) if bilinear else (0, 0)
        x = _nhwc(p, rng, h, w, c)
        out = p.output(pm.ScalarType.CHAR, [1, c, 2 * h, 2 * w], LEGACY)
        args = [x, p.ints([4, 2, 4, 2]), p.ints([-1, -1]), p.b(bilinear), p.i(m), p.i(s), out]
        p.call("torchmcu::resize2d", args, f"{h}x{w}x{c} 2x bilinear={bilinear}")

    return build


def _cat(requantized: bool, h: int, w: int) -> Callable:
    """Two NHWC halves of 32 channels joined along C, each requantized or both copied."""

    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        halves = [_nhwc(p, rng, h, w, 32) for _ in range(2)]
        out = p.output(pm.ScalarType.CHAR, [1, 64, h, w], LEGACY)
        params = [ref.single_rounding_multiplier(r) for r in (0.7, 1.6)] if requantized else [(1 << 30, 1)] * 2
        zps = [5, -9] if requantized else [0, 0]
        args = [p._add(pm.TensorList(halves)), p.i(1), p.ints(zps), p.ints([m for m, _ in params]),
                p.ints([s for _, s in params]), p.i(0), out]  # fmt: skip
        p.call("torchmcu::quantized_cat", args, f"2x{h}x{w}x32 requantized={requantized}")

    return build


def _shuffle(p, rng) -> None:
    """The channel shuffle of a 16x16x32 NHWC activation in 2 groups: [256, 2, 16] -> [256, 16, 2]."""
    from torchmcu.pte import program as pm

    x = p.input(rng.integers(-128, 128, (256, 2, 16), dtype=np.int8), pm.ScalarType.CHAR)
    out = p.output(pm.ScalarType.CHAR, [256, 16, 2])
    p.call("cortex_m::transpose", [x, p.ints([0, 2, 1]), out], "256x2x16 -> 256x16x2")


def _to_nhwc(c: int, h: int, w: int) -> Callable:
    """A program input's layout change, NCHW -> NHWC (the transpose before a model's first conv)."""

    def build(p, rng) -> None:
        from torchmcu.pte import program as pm

        x = p.input(rng.integers(-128, 128, (1, c, h, w), dtype=np.int8), pm.ScalarType.CHAR)
        out = p.output(pm.ScalarType.CHAR, [1, h, w, c])
        p.call("cortex_m::transpose", [x, p.ints([0, 2, 3, 1]), out], f"1x{c}x{h}x{w} -> NHWC")

    return build


def _batch_matmul(b: int, m: int, k: int, n: int) -> Callable:
    """cortex_m::quantized_batch_matmul of [b, m, k] by [b, n, k]^T, both zero points set."""

    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        mult, shift = ref.quantize_multiplier(0.05 * 0.08 / 0.1 / k)
        lhs = p.input(rng.integers(-128, 128, (b, m, k), dtype=np.int8), pm.ScalarType.CHAR)
        rhs = p.input(rng.integers(-128, 128, (b, n, k), dtype=np.int8), pm.ScalarType.CHAR)
        out = p.output(pm.ScalarType.CHAR, [b, m, n])
        args = [lhs, p.i(3), rhs, p.i(-5), p.i(1), p.i(mult), p.i(shift), p.scratch(), out]
        p.call("cortex_m::quantized_batch_matmul", args, f"[{b},{m},{k}] x [{b},{n},{k}]^T")

    return build


def _layer_norm(rows: int, c: int, int16: bool = False) -> Callable:
    """torchmcu::quantized_layer_norm of rows x c with the exporter's parameters (int16: an
    input of the residual stream)."""

    def build(p, rng) -> None:
        from torchmcu.ops.defs.layer_norm import layer_norm_params
        from torchmcu.pte import program as pm

        in_scale = 2e-4 if int16 else 0.05
        w, bias, eps, shift = layer_norm_params(rng.uniform(0.5, 1.5, c), rng.normal(0, 0.3, c), 1e-5, in_scale, 0.04,
                                                int16)  # fmt: skip
        if int16:
            x = p.input(rng.integers(-32768, 32768, (rows, c), dtype=np.int16), pm.ScalarType.SHORT)
        else:
            x = p.input(rng.integers(-128, 128, (rows, c), dtype=np.int8), pm.ScalarType.CHAR)
        args = [x, p.input(w, pm.ScalarType.INT), p.input(bias, pm.ScalarType.INT), p.i(eps), p.i(shift), p.i(2),
                p.output(pm.ScalarType.CHAR, [rows, c])]  # fmt: skip
        p.call("torchmcu::quantized_layer_norm", args, f"{rows}x{c}")

    return build


def _add16(rows: int, c: int, int16_operands: int) -> Callable:
    """torchmcu::quantized_add16 of two rows x c operands, the first `int16_operands` of them
    int16 (the residual stream: 1, an int8 branch added to the int16 stream)."""

    def build(p, rng) -> None:
        from torchmcu import reference as ref
        from torchmcu.pte import program as pm

        scales = [2e-4 if k < int16_operands else 0.03 for k in range(2)]
        twice = 2 * max(scales)
        (m1, sh1), (m2, sh2) = (ref.quantize_multiplier(s / twice) for s in scales)
        mo, sho = ref.quantize_multiplier(twice / (3e-4 * (1 << 15)))
        ops, zps = [], []
        for k in range(2):
            wide = k < int16_operands
            x = rng.integers(-32768, 32768, (rows, c), dtype=np.int16) if wide else \
                rng.integers(-128, 128, (rows, c), dtype=np.int8)  # fmt: skip
            ops.append(p.input(x, pm.ScalarType.SHORT if wide else pm.ScalarType.CHAR))
            zps.append(0 if wide else -3)
        args = [ops[0], p.i(zps[0]), p.i(m1), p.i(sh1), ops[1], p.i(zps[1]), p.i(m2), p.i(sh2), p.i(0), p.i(mo),
                p.i(sho), p.i(-32768), p.i(32767), p.output(pm.ScalarType.SHORT, [rows, c])]  # fmt: skip
        p.call("torchmcu::quantized_add16", args, f"{rows}x{c}")

    return build


SHAPES: dict[str, Shape] = {
    "quantize": Shape("quantize_per_tensor", 16384, None, _quantize),
    "dequantize": Shape("dequantize_per_tensor", 16384, None, _dequantize),
    "add": Shape("quantized_add", 16384, 225_378, _add),
    "mul": Shape("quantized_mul", 16384, 110_651, _mul),
    "mul_channel": Shape("quantized_mul", 16384, 173_064, _mul_broadcast("channel"), flat=110_651),
    "mul_scalar": Shape("quantized_mul", 16384, None, _mul_broadcast("scalar")),
    "mul_spatial": Shape("quantized_mul", 16384, None, _mul_broadcast("spatial")),
    "mul_row": Shape("quantized_mul", 16384, None, _mul_broadcast("row")),
    "maximum": Shape("maximum", 16384, 18_499, _maximum),
    "maxpool": Shape("quantized_max_pool2d", 16384, 44_780, _maxpool()),
    "avgpool": Shape("quantized_avg_pool2d", 8000, 9_359, _avgpool()),
    "softmax_1x10": Shape("softmax", 10, 5_779, _softmax(10)),
    "softmax_1x1000": Shape("softmax", 1000, 537_951, _softmax(1000)),
    "resize_nearest_2x": Shape("resize2d", 16384, None, _resize(False), "tm_torchmcu_"),
    "resize_bilinear_2x": Shape("resize2d", 16384, None, _resize(True), "tm_torchmcu_"),
    "cat_16x16": Shape("quantized_cat", 16384, None, _cat(True, 16, 16), "tm_torchmcu_"),
    "cat_2x2": Shape("quantized_cat", 256, None, _cat(True, 2, 2), "tm_torchmcu_"),
    "cat_copy_16x16": Shape("quantized_cat", 16384, None, _cat(False, 16, 16), "tm_torchmcu_"),
    "shuffle_16x16x32": Shape("transpose", 8192, None, _shuffle),
    # issue 19: the input layout change of MobileNetV1 (96x96x3) and ResNet8 (32x32x3)
    "to_nhwc_mbv1_3x96x96": Shape("transpose", 27648, None, _to_nhwc(3, 96, 96)),
    "to_nhwc_rn8_3x32x32": Shape("transpose", 3072, None, _to_nhwc(3, 32, 32)),
    # issue 17, shapes of the example architectures; CMSIS-NN figures measured as issue 4's
    # (bench/README.md). Broadcast rows: one CMSIS-NN call per pixel (arm_elementwise_* have
    # no broadcast); flat: one call on the operand expanded beforehand.
    "mul_se_mbv3_6x6x96": Shape("quantized_mul", 3456, 25_532, _mul_broadcast("channel", 6, 6, 96), flat=23_387),
    "mul_se_mbv3_24x24x16": Shape("quantized_mul", 9216, 97_352, _mul_broadcast("channel", 24, 24, 16),
                                  flat=62_267),
    "mul_se_mbv3_3x3x576": Shape("quantized_mul", 5184, 35_549, _mul_broadcast("channel", 3, 3, 576), flat=35_051),
    "mul_se_effnet_32x32x32": Shape("quantized_mul", 32768, 283_656, _mul_broadcast("channel", 32, 32, 32),
                                    flat=221_243),
    "add_channel": Shape("quantized_add", 16384, 325_636, lambda p, rng: _add(p, rng, True), flat=225_378),
    "maximum_channel": Shape("maximum", 16384, 46_403, lambda p, rng: _maximum(p, rng, True)),
    "maxpool_unet_64x64x8": Shape("quantized_max_pool2d", 32768, 168_816, _maxpool(64, 64, 8)),
    "maxpool_resnet18_3x3s2p1": Shape("quantized_max_pool2d", 16384, 47_850, _maxpool(16, 16, 64, 3, 2, 1)),
    "maxpool_shufflenet_3x3s2p1": Shape("quantized_max_pool2d", 24576, 119_344, _maxpool(32, 32, 24, 3, 2, 1)),
    "maxpool_squeezenet_ceil": Shape("quantized_max_pool2d", 61504, 181_162, _maxpool(31, 31, 64, 3, 2, 0, True)),
    "avgpool_se_6x6x96": Shape("quantized_avg_pool2d", 3456, 4_800, _avgpool(6, 6, 96)),
    "avgpool_se_24x24x16": Shape("quantized_avg_pool2d", 9216, 9_235, _avgpool(24, 24, 16)),
    "avgpool_se_3x3x576": Shape("quantized_avg_pool2d", 5184, 12_210, _avgpool(3, 3, 576)),
    "avgpool_se_32x32x32": Shape("quantized_avg_pool2d", 32768, 31_884, _avgpool(32, 32, 32)),
    "table_hardswish_48x48x16": Shape("quantized_activation", 36864, None, _table(48, 48, 16)),
    "table_6x6x240": Shape("quantized_activation", 8640, None, _table(6, 6, 240)),
    "prelu_32x32x16": Shape("quantized_prelu", 16384, None, _prelu, "tm_torchmcu_"),
    # issue 18, gpt_tiny's token embedding: 64 ids into a 16 x 128 table
    "embedding_gpt_64x128": Shape("quantized_embedding", 64 * 128, None, _embedding(64, 16, 128), "tm_torchmcu_"),
    "resize_nearest_unet": Shape("resize2d", 65536, None, _resize(False, 32, 32, 16), "tm_torchmcu_"),
    # issue 18, vit_tiny's attention (4 heads, 17 tokens, head dim 16; elements: MACs) and
    # layer norm (17 tokens x 64)
    "bmm_vit_qk": Shape("quantized_batch_matmul", 4 * 17 * 17 * 16, None, _batch_matmul(4, 17, 16, 17)),
    "bmm_vit_pv": Shape("quantized_batch_matmul", 4 * 17 * 16 * 17, None, _batch_matmul(4, 17, 17, 16)),
    "layer_norm_vit_17x64": Shape("quantized_layer_norm", 17 * 64, None, _layer_norm(17, 64), "tm_torchmcu_"),
    # and its int16 residual stream: the residual add (int16 stream + int8 branch), the first
    # one (+pos_embed, both int8), the layer norm reading the stream
    "add16_vit_17x64": Shape("quantized_add16", 17 * 64, None, _add16(17, 64, 1), "tm_torchmcu_"),
    "add16_vit_17x64_int8": Shape("quantized_add16", 17 * 64, None, _add16(17, 64, 0), "tm_torchmcu_"),
    "layer_norm16_vit_17x64": Shape("quantized_layer_norm", 17 * 64, None, _layer_norm(17, 64, True),
                                    "tm_torchmcu_"),
}


def measure(name: str, shape: Shape, build_dir: Path, scalar_only: bool) -> int:
    """Instructions from the kernel's entry to the end-of-inference marker, output checked."""
    from test_kernels_mve_elementwise import CaseProgram
    from torchmcu import device, native
    from torchmcu.device.icount import count_instructions
    from torchmcu.pte import writer
    from torchmcu.reference.interpreter import run_program

    p = CaseProgram()
    shape.build(p, np.random.default_rng(7))
    program = p.program()
    pte = writer.serialize(program)
    out = build_dir / name / ("scalar" if scalar_only else "mve")
    out.mkdir(parents=True, exist_ok=True)
    (out / "program.pte").write_bytes(pte)
    info = native.program_info(pte)
    defines = {"CMAKE_C_FLAGS": "-DTM_KERNELS_SCALAR_ONLY" if scalar_only else ""}
    image = device.build(out / "program.pte", BOARD, out, device.write_io_blob(info, [p.input_arrays]),
                           defines=defines)  # fmt: skip
    got = device.run(image.elf, BOARD, 120).check().outputs(info)
    expected = run_program(program, p.input_arrays)
    if any(g.tobytes() != e.tobytes() for g, e in zip(got, expected)):
        raise SystemExit(f"{name}: output differs from the reference (scalar_only={scalar_only})")
    entry = f"{shape.prefix}{shape.op}_out"
    counts = count_instructions(image.elf, BOARD, {"kernel": (entry, "tm_bench_end")}, timeout=300)
    return counts["regions"]["kernel"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="*", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build" / "bench-kernels-mve-elementwise")
    args = parser.parse_args()
    print(f"{'shape':26} {'elements':>9} {'scalar':>10} {'MVE':>10} {'MVE/elem':>9} {'CMSIS-NN':>10} {'ratio':>6} "
          f"{'CMSIS flat':>10} {'ratio':>6}")  # fmt: skip
    for name in args.shapes:
        shape = SHAPES[name]
        scalar = measure(name, shape, args.build_dir, True)
        mve = measure(name, shape, args.build_dir, False)
        refs = [f"{r:>10,} {mve / r:>6.2f}" if r else f"{'-':>10} {'-':>6}" for r in (shape.cmsis_nn, shape.flat)]
        print(f"{name:26} {shape.elements:>9,} {scalar:>10,} {mve:>10,} {mve / shape.elements:>9.2f} {' '.join(refs)}",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
