"""Helium (MVE) paths of quantize/dequantize, add/mul, max/avg pooling, softmax, resize, prelu,
embedding, cat, table activations, batch matmul and layer norm on QEMU (Cortex-M55), bit-exact
with the numpy reference and with the host (scalar) kernels.

One firmware image per session runs every case: each case is an independent one-op call
inside a single Program (its operands are method inputs, its result a method output), so
the whole set costs one cross build and one QEMU run. Cases cover tails 0-15 of the
vector loops, channel counts 1..27, broadcast, padding, strides and unaligned int8 tensors
(planned at odd arena offsets). The expected values come from the reference interpreter
(torchmcu.reference), which shares no code with the C kernels.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from torchmcu import device, native
from torchmcu import reference as ref
from torchmcu.ops.layout import pool_output_size
from torchmcu.pte import program as pm
from torchmcu.pte import writer
from torchmcu.reference.interpreter import run_program

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu")

BOARD = "qemu-an547"
LEGACY = [0, 2, 3, 1]  # NHWC memory, sizes N,C,H,W
_NP = {
    pm.ScalarType.CHAR: np.int8,
    pm.ScalarType.SHORT: np.int16,
    pm.ScalarType.FLOAT: np.float32,
    pm.ScalarType.BYTE: np.uint8,
    pm.ScalarType.INT: np.int32,
    pm.ScalarType.BOOL: np.bool_,
    pm.ScalarType.LONG: np.int64,
}


@dataclass
class CaseProgram:
    """Builds one method holding many independent one-op cases."""

    values: list = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    input_arrays: list[np.ndarray] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    instructions: list[pm.KernelCall] = field(default_factory=list)
    operators: list[str] = field(default_factory=list)
    cases: list[tuple[str, str, int]] = field(default_factory=list)  # (op, description, output #)
    arena: int = 0

    def _add(self, value) -> int:
        self.values.append(value)
        return len(self.values) - 1

    def _planned(self, stype: pm.ScalarType, sizes, order, misalign: int) -> int:
        esize = np.dtype(_NP[stype]).itemsize
        start = (self.arena + 15) // 16 * 16 + misalign * esize
        t = pm.Tensor(stype, list(sizes), list(order), allocation=pm.Allocation(1, start))
        self.arena = start + t.nbytes
        return self._add(t)

    def input(self, logical: np.ndarray, stype: pm.ScalarType, sizes=None, order=None, misalign=0) -> int:
        sizes = list(logical.shape) if sizes is None else list(sizes)
        order = list(range(len(sizes))) if order is None else list(order)
        index = self._planned(stype, sizes, order, misalign)
        self.inputs.append(index)
        self.input_arrays.append(np.ascontiguousarray(logical.reshape(sizes), dtype=_NP[stype]))
        return index

    def output(self, stype: pm.ScalarType, sizes, order=None, misalign=0) -> int:
        order = list(range(len(sizes))) if order is None else list(order)
        index = self._planned(stype, sizes, order, misalign)
        self.outputs.append(index)
        return index

    def scratch(self) -> int:
        return self._planned(pm.ScalarType.BYTE, [0], [0], 0)

    def i(self, v: int) -> int:
        return self._add(pm.Int(int(v)))

    def d(self, v: float) -> int:
        return self._add(pm.Double(float(v)))

    def b(self, v: bool) -> int:
        return self._add(pm.Bool(bool(v)))

    def ints(self, items) -> int:
        return self._add(pm.IntList([self.i(v) for v in items]))

    def call(self, op: str, args: list[int], description: str) -> None:
        if op not in self.operators:
            self.operators.append(op)
        out = args[-1]
        self.instructions.append(pm.KernelCall(self.operators.index(op), [*args, out]))
        self.cases.append((op.split("::")[1], description, self.outputs.index(out)))

    def program(self) -> pm.Program:
        plan = pm.ExecutionPlan(
            name="forward",
            values=self.values,
            inputs=self.inputs,
            outputs=self.outputs,
            chains=[pm.Chain(self.inputs, self.outputs, self.instructions)],
            operators=[pm.Operator(op, "out") for op in self.operators],
            non_const_buffer_sizes=[0, (self.arena + 15) // 16 * 16],
        )
        return pm.Program(execution_plan=[plan])


# --- cases ------------------------------------------------------------------------------------

TAIL_SIZES = [*range(1, 36), 64, 100, 257, 1000, 1031]
CHANNELS = [1, 3, 7, 16, 17, 24, 27, 40]


def _floats(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    x = (rng.standard_normal(n) * 150 * scale).astype(np.float32)
    ties = (rng.integers(-300, 300, n) + 0.5).astype(np.float32) * np.float32(scale)
    pick = rng.random(n) < 0.3
    x[pick] = ties[pick]
    specials = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3e38, -3e38, 1e-30]
    for k, s in enumerate(specials[: n // 4]):
        x[(k * 7) % n] = s
    return x


def quantize_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    for k, n in enumerate(TAIL_SIZES):
        scale = float(rng.choice([0.0125, 0.1, 1.0, 3.7, 1 / 3]))
        zp = int(rng.integers(-128, 128))
        qmin, qmax = (-128, 127) if k % 3 else (int(rng.integers(-128, 0)), int(rng.integers(0, 128)))
        stype, dtype, lo, hi = pm.ScalarType.CHAR, 1, qmin, qmax
        if k % 5 == 4:
            stype, dtype = pm.ScalarType.SHORT, 2
            zp = int(rng.integers(-30000, 30000))
            lo, hi = (-32768, 32767) if k % 2 else (-1000, 20000)
            scale = scale / 200
        x = _floats(rng, n, scale)
        shape = [n] if k % 2 else [1, n]
        x_i = p.input(x.reshape(shape), pm.ScalarType.FLOAT)
        out = p.output(stype, shape, misalign=k % 7)
        args = [x_i, p.d(scale), p.i(zp), p.i(lo), p.i(hi), p.i(dtype), out]
        p.call("cortex_m::quantize_per_tensor", args, f"n={n} scale={scale} zp={zp} [{lo},{hi}] dtype={dtype}")
    # Subnormal inputs with a scale so small that they quantize to nonzero values (MVE floating
    # point flushes subnormals: the kernel must take its scalar loop here).
    x = np.array([1e-39, -2e-39, 5e-39, 1e-38, 0.0, 1.0, -1e-45] * 3, np.float32)
    x_i = p.input(x, pm.ScalarType.FLOAT)
    out = p.output(pm.ScalarType.CHAR, [x.size])
    args = [x_i, p.d(1.5e-38), p.i(0), p.i(-128), p.i(127), p.i(1), out]
    p.call("cortex_m::quantize_per_tensor", args, "subnormal inputs, scale 1.5e-38")


def dequantize_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    for k, n in enumerate(TAIL_SIZES):
        scale = float(rng.choice([0.0125, 0.1, 1.0, 3.7, 1 / 3, 1e-30]))
        if k % 4 == 3:
            stype, dtype, lo, hi = pm.ScalarType.SHORT, 2, -32768, 32767
            q = rng.integers(lo, hi + 1, n).astype(np.int16)
        else:
            stype, dtype, lo, hi = pm.ScalarType.CHAR, 1, -128, 127
            q = rng.integers(lo, hi + 1, n).astype(np.int8)
        zp = int(rng.integers(lo, hi + 1))
        q_i = p.input(q, stype, misalign=k % 5)
        out = p.output(pm.ScalarType.FLOAT, [n])
        args = [q_i, p.d(scale), p.i(zp), p.i(lo), p.i(hi), p.i(dtype), out]
        p.call("cortex_m::dequantize_per_tensor", args, f"n={n} scale={scale} zp={zp} dtype={dtype}")
    q = np.arange(-128, 128, dtype=np.int8)
    for scale in (1e-39, 1e-42):  # subnormal scale and products
        args = [p.input(q, pm.ScalarType.CHAR), p.d(scale), p.i(1), p.i(-128), p.i(127), p.i(1),
                p.output(pm.ScalarType.FLOAT, [q.size])]  # fmt: skip
        p.call("cortex_m::dequantize_per_tensor", args, f"subnormal scale {scale}")


def _int8(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def _binary_shapes():
    """(self sizes, self order, other sizes, other order, out sizes, out order, description)."""
    shapes = []
    for n in TAIL_SIZES[::2]:
        shapes.append(([n], [0], [n], [0], [n], [0], f"flat n={n}"))
    for c in CHANNELS:
        for h, w in [(1, 1), (2, 3), (5, 5)]:
            full = [1, c, h, w]
            shapes.append((full, LEGACY, full, LEGACY, full, LEGACY, f"nhwc c={c} {h}x{w}"))
            if h * w == 1:
                continue  # per-channel == elementwise (and the interpreter compares physical shapes)
            shapes.append((full, LEGACY, [1, c, 1, 1], LEGACY, full, LEGACY, f"other per-channel c={c} {h}x{w}"))
            shapes.append(([1, c, 1, 1], [0, 1, 2, 3], full, LEGACY, full, LEGACY, f"self per-channel c={c} {h}x{w}"))
    shapes.append(([2, 17, 3, 2], LEGACY, [1, 17, 1, 1], LEGACY, [2, 17, 3, 2], LEGACY, "other per-channel n=2"))
    for n in (1, 15, 16, 63, 64, 65, 130):  # a one-element operand: rows of TM_BINARY_ROW, tails
        shapes.append(([n], [0], [1], [0], [n], [0], f"other scalar n={n}"))
        shapes.append(([1, 1], [0, 1], [1, n], [0, 1], [1, n], [0, 1], f"self scalar n={n}"))
    return shapes + _general_shapes()


def _general_shapes():
    """The general broadcast: inner rows where both operands advance, inner rows of one
    repeated value (tails, rows over TM_BINARY_ROW), both operands broadcast, rank 3."""
    g = [([2, 16, 3, 5], LEGACY, [2, 1, 3, 5], LEGACY, [2, 16, 3, 5], LEGACY, "general [N,1,H,W] c=16"),
         ([1, 70, 2, 2], LEGACY, [1, 1, 2, 2], [0, 1, 2, 3], [1, 70, 2, 2], LEGACY, "general [N,1,H,W] c=70"),
         ([1, 23, 4, 3], LEGACY, [1, 23, 4, 1], LEGACY, [1, 23, 4, 3], LEGACY, "general [N,C,H,1] c=23"),
         ([1, 7, 1, 5], LEGACY, [1, 1, 6, 1], LEGACY, [1, 7, 6, 5], LEGACY, "general [N,C,1,W]+[N,1,H,1]"),
         ([1, 1, 1, 9], LEGACY, [2, 5, 3, 9], LEGACY, [2, 5, 3, 9], LEGACY, "general self [1,1,1,W]"),
         ([3, 5, 17], [0, 1, 2], [3, 5, 1], [0, 1, 2], [3, 5, 17], [0, 1, 2], "general [B,T,1] c=17"),
         ([1, 1, 33], [0, 1, 2], [2, 4, 33], [0, 1, 2], [2, 4, 33], [0, 1, 2], "general self [1,1,C]")]
    return g


def _add_params(rng: np.random.Generator) -> list[int]:
    s1, s2, so = (float(v) for v in rng.uniform(0.005, 0.5, 3))
    twice = 2 * max(s1, s2)
    m1, sh1 = ref.quantize_multiplier(s1 / twice)
    m2, sh2 = ref.quantize_multiplier(s2 / twice)
    mo, sho = ref.quantize_multiplier(twice / (so * (1 << 20)))
    if rng.random() < 0.25:
        m2 = -m2  # subtraction
    return [m1, sh1, m2, sh2, mo, sho]


def _add_table_shapes():
    """Shapes of >= 512 elements (the MVE kernel's table path): tails 0-15, both broadcasts."""
    shapes = [([n], [0], [n], [0], [n], [0], f"flat n={n}") for n in [*range(512, 528), 1031, 4099]]
    for c, h, w in [(3, 16, 16), (17, 8, 8), (24, 5, 5), (40, 4, 4), (1, 23, 23)]:
        full = [1, c, h, w]
        shapes.append((full, LEGACY, full, LEGACY, full, LEGACY, f"nhwc c={c} {h}x{w}"))
        shapes.append((full, LEGACY, [1, c, 1, 1], LEGACY, full, LEGACY, f"other per-channel c={c} {h}x{w}"))
        shapes.append(([1, c, 1, 1], [0, 1, 2, 3], full, LEGACY, full, LEGACY, f"self per-channel c={c} {h}x{w}"))
    shapes.append(([2, 17, 4, 4], LEGACY, [1, 17, 1, 1], LEGACY, [2, 17, 4, 4], LEGACY, "other per-channel n=2"))
    shapes.append(([1, 9, 8, 8], LEGACY, [1], [0], [1, 9, 8, 8], LEGACY, "other scalar 9x8x8"))
    shapes.append(([1], [0], [1031], [0], [1031], [0], "self scalar n=1031"))
    shapes.append(([1, 40, 4, 4], LEGACY, [1, 1, 4, 4], LEGACY, [1, 40, 4, 4], LEGACY, "general [N,1,H,W] c=40"))
    shapes.append(([1, 9, 1, 8], LEGACY, [1, 1, 8, 1], LEGACY, [1, 9, 8, 8], LEGACY, "general both 9x8x8"))
    return shapes


def _extreme_add_params(rng: np.random.Generator, k: int) -> list[int]:
    """Edge requantizations that still give varied outputs: operand left shifts that saturate
    the larger values, an output left shift, scales four decades apart, negative multipliers."""
    if k % 7 == 0:  # INT32_MIN operand multiplier (the MVE kernel's scalar fallback)
        return [-(2**31), int(rng.integers(-31, 1)), 1 << 30, -1, 1 << 30, -19]
    sign = [1 if v else -1 for v in rng.integers(0, 2, 3)]
    if k % 5 == 2:  # operands near x, output right shift 1-2: rounding ties on both signs
        m1, m2, mo = (int(v) for v in rng.integers(1 << 30, 2**31, 3))
        sh1, sh2, sho = -20, -20, -int(rng.integers(1, 3))
    elif k % 3 == 0:  # operand left shifts: |x| * 2^20 * 2^sh saturates int32 for the larger |x|
        sh1, sh2 = (int(v) for v in rng.integers(1, 3, 2))
        m1, m2 = (int(v) for v in rng.integers(1 << 29, 2**31, 2))
        mo, sho = int(rng.integers(1 << 30, 2**31)), -(22 + max(sh1, sh2) + int(rng.integers(0, 2)))
    elif k % 3 == 1:  # small operands, output left shift
        m1, m2 = (int(v) for v in rng.integers(1 << 30, 2**31, 2))
        sh1, sh2 = -12, -int(rng.integers(10, 15))
        sho = int(rng.integers(1, 4))
        mo = int(rng.integers(1 << (21 - sho), 1 << (23 - sho)))
    else:  # the exporter's form with scales up to four decades apart
        s1, s2, so = (float(v) for v in 10.0 ** rng.uniform(-4, 0, 3))
        twice = 2 * max(s1, s2)
        m1, sh1 = ref.quantize_multiplier(s1 / twice)
        m2, sh2 = ref.quantize_multiplier(s2 / twice)
        mo, sho = ref.quantize_multiplier(min(twice / (so * (1 << 20)), 2.0**31))
    return [sign[0] * m1, sh1, sign[1] * m2, sh2, sign[2] * mo, sho]


def add_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    shapes = _binary_shapes()
    table = _add_table_shapes()
    for k, (sa, oa, sb, ob, so, oo, what) in enumerate(shapes + table + table[::3]):
        extreme = k >= len(shapes) + len(table)
        m1, sh1, m2, sh2, mo, sho = _extreme_add_params(rng, k) if extreme else _add_params(rng)
        zps = [int(v) for v in rng.integers(-128, 128, 3)]
        act = (-128, 127) if k % 3 or extreme else tuple(sorted(int(v) for v in rng.integers(-128, 128, 2)))
        a = p.input(_int8(rng, sa), pm.ScalarType.CHAR, sa, oa, misalign=k % 3)
        b = p.input(_int8(rng, sb), pm.ScalarType.CHAR, sb, ob, misalign=(k + 1) % 5)
        out = p.output(pm.ScalarType.CHAR, so, oo, misalign=k % 4)
        args = [a, p.i(zps[0]), p.i(m1), p.i(sh1), b, p.i(zps[1]), p.i(m2), p.i(sh2), p.i(zps[2]), p.i(mo),
                p.i(sho), p.i(act[0]), p.i(act[1]), out]  # fmt: skip
        p.call("cortex_m::quantized_add", args, f"{what} zps={zps} act={act} m2={m2}")


def add16_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """The residual stream's add: each operand type pair (int16 zero point 0, int8 any) on the
    flat tails (the Helium path), the broadcasts (the scalar loop), a clamp now and then."""
    shapes = [s for s in _binary_shapes() if s[-1].startswith(("flat", "general"))]
    shapes += [([1, 17, 64], [0, 1, 2], [1, 17, 64], [0, 1, 2], [1, 17, 64], [0, 1, 2], "vit 17x64")]
    for k, (sa, oa, sb, ob, so, oo, what) in enumerate(shapes * 2):
        wide = ((k % 4) in (0, 1), (k % 4) in (0, 2))
        scales = [float(rng.uniform(1e-5, 3e-4)) if w else float(rng.uniform(0.005, 0.05)) for w in wide]
        twice = 2 * max(scales)
        m1, sh1 = ref.quantize_multiplier(scales[0] / twice)
        m2, sh2 = ref.quantize_multiplier(scales[1] / twice)
        mo, sho = ref.quantize_multiplier(twice / (float(rng.uniform(2e-5, 2e-4)) * (1 << 15)))
        zps = [0 if w else int(rng.integers(-128, 128)) for w in wide]
        act = (-32768, 32767) if k % 3 else tuple(sorted(int(v) for v in rng.integers(-32768, 32768, 2)))
        ops = []
        for w, sizes, order, mis in ((wide[0], sa, oa, k % 3), (wide[1], sb, ob, (k + 1) % 5)):
            x = rng.integers(-32767, 32768, sizes, dtype=np.int16) if w else _int8(rng, sizes)
            ops.append(p.input(x, pm.ScalarType.SHORT if w else pm.ScalarType.CHAR, sizes, order, misalign=mis))
        out = p.output(pm.ScalarType.SHORT, so, oo, misalign=k % 4)
        args = [ops[0], p.i(zps[0]), p.i(m1), p.i(sh1), ops[1], p.i(zps[1]), p.i(m2), p.i(sh2), p.i(0), p.i(mo),
                p.i(sho), p.i(act[0]), p.i(act[1]), out]  # fmt: skip
        p.call("torchmcu::quantized_add16", args, f"{what} int16={wide} zps={zps} act={act}")


def mul_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    for k, (sa, oa, sb, ob, so, oo, what) in enumerate(_binary_shapes()):
        s1, s2, s_out = (float(v) for v in rng.uniform(0.005, 0.5, 3))
        mo, sho = ref.quantize_multiplier(s1 * s2 / s_out)
        zps = [int(v) for v in rng.integers(-128, 128, 3)]
        a = p.input(_int8(rng, sa), pm.ScalarType.CHAR, sa, oa, misalign=k % 3)
        b = p.input(_int8(rng, sb), pm.ScalarType.CHAR, sb, ob, misalign=(k + 2) % 5)
        out = p.output(pm.ScalarType.CHAR, so, oo, misalign=(k + 1) % 4)
        args = [a, p.i(zps[0]), b, p.i(zps[1]), p.i(zps[2]), p.i(mo), p.i(sho), out]
        p.call("cortex_m::quantized_mul", args, f"{what} zps={zps} m={mo} s={sho}")


def minmax_cases(name: str) -> Callable[[CaseProgram, np.random.Generator], None]:
    def cases(p: CaseProgram, rng: np.random.Generator) -> None:
        for k, (sa, oa, sb, ob, so, oo, what) in enumerate(_binary_shapes()[::2]):
            a = p.input(_int8(rng, sa), pm.ScalarType.CHAR, sa, oa, misalign=k % 3)
            b = p.input(_int8(rng, sb), pm.ScalarType.CHAR, sb, ob, misalign=(k + 2) % 5)
            out = p.output(pm.ScalarType.CHAR, so, oo, misalign=(k + 1) % 4)
            p.call(f"cortex_m::{name}", [a, b, out], what)

    return cases


def _pool_geometries():
    """(h, w, c, kernel, stride, padding) covering channel tails, padding and strides 1-3."""
    geoms = []
    for c in CHANNELS:
        geoms.append((5, 6, c, [2, 2], [2, 2], [0, 0]))
        geoms.append((5, 5, c, [3, 3], [1, 1], [1, 1]))
        geoms.append((7, 6, c, [3, 2], [3, 2], [1, 1]))
    geoms.append((4, 4, 33, [3], [3], [1]))  # single-item lists
    geoms.append((1, 9, 5, [1, 3], [1, 2], [0, 1]))
    return geoms


def _pool_out(size: int, k: int, s: int, pad: int, ceil: bool) -> int:
    return pool_output_size(size, k, s, pad, ceil)


def max_pool_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    for k, (h, w, c, ks, st, pad) in enumerate(_pool_geometries()):
        kh, kw = (ks * 2)[:2]
        sh, sw = (st * 2)[:2]
        ph, pw = (pad * 2)[:2]
        oh, ow = _pool_out(h, kh, sh, ph, False), _pool_out(w, kw, sw, pw, False)
        nhwc = k % 4 == 3
        n = 2 if k % 5 == 0 else 1
        sizes_in, sizes_out = ([n, h, w, c], [n, oh, ow, c]) if nhwc else ([n, c, h, w], [n, c, oh, ow])
        order = [0, 1, 2, 3] if nhwc else LEGACY
        x = p.input(_int8(rng, sizes_in), pm.ScalarType.CHAR, sizes_in, order, misalign=k % 16)
        out = p.output(pm.ScalarType.CHAR, sizes_out, order, misalign=(k * 3) % 16)
        zp = int(rng.integers(-128, 128))
        act = (-128, 127) if k % 2 else tuple(sorted(int(v) for v in rng.integers(-128, 128, 2)))
        args = [x, p.ints(ks), p.ints(st), p.ints(pad), p.ints([1, 1]), p.b(False), p.i(zp), p.i(zp),
                p.i(act[0]), p.i(act[1]), out]  # fmt: skip
        op = "cortex_m::quantized_max_pool2d_nhwc" if nhwc else "cortex_m::quantized_max_pool2d"
        p.call(op, args, f"n={n} {h}x{w}x{c} k={ks} s={st} p={pad} act={act} nhwc={nhwc}")
    # dilation and ceil mode: (h, w, c, kernel, stride, padding, dilation, ceil_mode)
    dilated = [(9, 8, c, [3, 2], [2, 1], [1, 1], [2, 3], ceil) for c in (1, 17) for ceil in (False, True)]
    dilated += [(12, 12, 24, [3, 3], [2, 2], [0, 0], [1, 1], True), (5, 4, 3, [2, 2], [1, 1], [1, 1], [3, 3], True)]
    for k, (h, w, c, ks, st, pad, dil, ceil) in enumerate(dilated):
        oh = _pool_out(h, dil[0] * (ks[0] - 1) + 1, st[0], pad[0], ceil)
        ow = _pool_out(w, dil[1] * (ks[1] - 1) + 1, st[1], pad[1], ceil)
        x = p.input(_int8(rng, [1, c, h, w]), pm.ScalarType.CHAR, [1, c, h, w], LEGACY, misalign=k % 16)
        out = p.output(pm.ScalarType.CHAR, [1, c, oh, ow], LEGACY, misalign=(k * 7) % 16)
        args = [x, p.ints(ks), p.ints(st), p.ints(pad), p.ints(dil), p.b(ceil), p.i(0), p.i(0), p.i(-128),
                p.i(127), out]  # fmt: skip
        p.call("cortex_m::quantized_max_pool2d", args, f"{h}x{w}x{c} k={ks} s={st} p={pad} d={dil} ceil={ceil}")


def adaptive_pool_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """torchmcu::quantized_adaptive_avg/max_pool2d: unequal windows, outputs above the input, a
    window of more than 256 taps (the int32 sums)."""
    geoms = [(7, 5, c, 3, 2) for c in CHANNELS] + [(6, 6, c, 4, 4) for c in (3, 16, 17)]
    geoms += [(3, 4, 9, 5, 7), (40, 30, 5, 3, 1), (1, 10, 16, 1, 4), (13, 1, 2, 6, 1)]
    for k, (h, w, c, oh, ow) in enumerate(geoms):
        for kind in ("avg", "max"):
            data = _int8(rng, [1, c, h, w])
            if k % 3 == 0:  # exact .5 means and extreme sums
                data = rng.choice(np.array([-128, 127, -128, 0, 1], np.int8), size=(1, c, h, w))
            x = p.input(data, pm.ScalarType.CHAR, [1, c, h, w], LEGACY, misalign=k % 16)
            out = p.output(pm.ScalarType.CHAR, [1, c, oh, ow], LEGACY, misalign=(k * 5) % 16)
            act = [] if kind == "avg" else [p.i(-100 if k % 2 else -128), p.i(127)]
            p.call(f"torchmcu::quantized_adaptive_{kind}_pool2d", [x, *act, out], f"{h}x{w}x{c} -> {oh}x{ow}")


def avg_pool_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    geoms = [(h, w, c, ks, st, pad, False) for h, w, c, ks, st, pad in _pool_geometries()]
    geoms += [(5, 6, c, [2, 2], [2, 2], [1, 1], True) for c in (3, 17)]  # ceil_mode
    geoms += [(5, 5, 64, [5, 5], [1, 1], [0, 0], False), (25, 5, 24, [25, 5], [1, 1], [0, 0], False)]
    geoms += [(20, 20, 5, [20, 20], [1, 1], [0, 0], False), (80, 80, 3, [80, 80], [1, 1], [0, 0], False)]
    # more than 256 taps: int16 partial sums split inside a row, channel tails of 8
    geoms += [(23, 23, 17, [23, 23], [1, 1], [0, 0], False), (24, 24, 16, [24, 24], [1, 1], [0, 0], False)]
    geoms += [(20, 40, 9, [17, 17], [3, 3], [0, 0], False), (30, 30, 6, [30, 30], [1, 1], [0, 0], False)]
    for k, (h, w, c, ks, st, pad, ceil) in enumerate(geoms):
        kh, kw = (ks * 2)[:2]
        sh, sw = (st * 2)[:2]
        ph, pw = (pad * 2)[:2]
        oh, ow = _pool_out(h, kh, sh, ph, ceil), _pool_out(w, kw, sw, pw, ceil)
        nhwc = k % 4 == 1
        sizes_in, sizes_out = ([1, h, w, c], [1, oh, ow, c]) if nhwc else ([1, c, h, w], [1, c, oh, ow])
        order = [0, 1, 2, 3] if nhwc else LEGACY
        data = _int8(rng, sizes_in)
        if k % 3 == 0:  # extremes: sums at the int16 limits, exact .5 averages
            data = rng.choice(np.array([-128, 127, -128, 0, 1], np.int8), size=sizes_in)
        x = p.input(data, pm.ScalarType.CHAR, sizes_in, order, misalign=k % 16)
        out = p.output(pm.ScalarType.CHAR, sizes_out, order, misalign=(k * 5) % 16)
        m, s = ref.quantize_multiplier(0.05)
        args = [x, p.ints(ks), p.ints(st), p.ints(pad), p.b(ceil), p.i(3), p.i(m), p.i(s), p.scratch(), out]
        op = "cortex_m::quantized_avg_pool2d_nhwc" if nhwc else "cortex_m::quantized_avg_pool2d"
        p.call(op, args, f"{h}x{w}x{c} k={ks} s={st} p={pad} ceil={ceil} nhwc={nhwc}")


def _softmax_params(rng: np.random.Generator, k: int) -> tuple[int, int, int]:
    """(input_multiplier, input_shift, diff_min): the exporter's form, or extremes."""
    if k % 5 == 3:  # saturating differences, barely any live lane
        return 2**31 - 1, 31, -int(rng.integers(0, 3))
    if k % 5 == 4:  # scaled differences near 0: everything close to exp(0)
        return int(rng.integers(1, 1 << 20)), 0, -(2**31)
    if k % 7 == 6:  # any multiplier and shift, diff_min cutting inside the int8 range
        return int(rng.integers(1, 2**31)), int(rng.integers(0, 32)), -int(rng.integers(0, 256))
    scale = float(rng.choice([0.02, 0.1, 0.25, 1.0 / 16, 2.0]))
    m, s = ref.quantize_multiplier(min(scale * (1 << 26), 2**31 - 1))
    return m, s, -int(np.floor(31 * (1 << 26) / (1 << s)))


def softmax_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    # rows below and above the 256-element table threshold of the MVE kernel, 4096 the maximum
    shapes = [(1 + k % 3, n) for k, n in enumerate([*range(1, 41), 63, 64, 100, 127, 255])]
    shapes += [(1, 256), (3, 100), (1, 1000), (2, 1000), (1, 1001), (1, 4095), (2, 4096)]
    for k, (rows, n) in enumerate(shapes):
        m, s, diff_min = _softmax_params(rng, k)
        x = _int8(rng, (rows, n))
        if k % 4 == 0:  # many equal maxima, and values far below diff_min
            x = rng.choice(np.array([127, 126, 120, -128], np.int8), size=(rows, n))
        elif k % 4 == 1:  # narrow range around a random level
            level = int(rng.integers(-120, 120))
            x = (level + rng.integers(-6, 7, (rows, n))).astype(np.int8)
        if n in (1000, 4096) and rows == 2:  # one row all equal: sum 2^31 (4096) or 2^29
            x[1] = np.int8(rng.integers(-128, 128))
        x_i = p.input(x, pm.ScalarType.CHAR, misalign=k % 16)
        out = p.output(pm.ScalarType.CHAR, [rows, n], misalign=(k + 3) % 16)
        args = [x_i, p.i(-1 if k % 2 else 1), p.i(0), p.i(-128), p.i(m), p.i(s), p.i(diff_min), out]
        p.call("cortex_m::softmax", args, f"{rows}x{n} m={m} s={s} diff_min={diff_min}")


def masked_softmax_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """Masks broadcast over leading dims, causal masks of attention scores, rows the mask
    leaves out entirely, masked elements above the kept maximum, on both Helium paths (rows
    under and over the 256-element table threshold) and every tail."""
    shapes = [([1 + k % 3, n], [1 + k % 3 if k % 2 else 1, n]) for k, n in enumerate(range(1, 21))]
    shapes += [([1, 4, 16, 16], [1, 1, 16, 16]), ([1, 4, 64, 64], [1, 1, 64, 64]),
               ([2, 3, 5, 7], [2, 1, 5, 7]), ([2, 3, 5, 7], [1, 3, 1, 7]), ([3, 300], [3, 300]),
               ([1, 2, 9, 33], [1, 1, 9, 33]), ([4, 100], [1, 100])]
    for k, (sizes, mask_sizes) in enumerate(shapes):
        m, s, diff_min = _softmax_params(rng, k)
        x = _int8(rng, sizes)
        if sizes[-2:] == mask_sizes[-2:] and len(sizes) == 4 and sizes[-1] == sizes[-2]:
            mask = ~np.tril(np.ones(sizes[-2:], bool)).reshape(mask_sizes)
            x[..., -1] = 127  # masked maxima above every kept score
        else:
            mask = rng.random(mask_sizes) < [0.2, 0.5, 0.9, 1.0][k % 4]
        x_i = p.input(x, pm.ScalarType.CHAR, misalign=k % 16)
        mask_i = p.input(mask, pm.ScalarType.BOOL, misalign=(k + 5) % 16)
        out = p.output(pm.ScalarType.CHAR, sizes, misalign=(k + 3) % 16)
        args = [x_i, mask_i, p.i(-1), p.i(0), p.i(-128), p.i(m), p.i(s), p.i(diff_min), out]
        p.call("torchmcu::masked_softmax", args, f"{sizes} mask {mask_sizes} m={m} s={s}")


def cat_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """Runs of 1..40 bytes (the 4-lane loop and its tails), inputs of >= 256 elements (the
    table), identity inputs (copies), NHWC and contiguous, any cat dim, extreme shifts."""
    shapes = [([1, c, 1, 1], 1, LEGACY) for c in range(1, 41)]
    shapes += [([1, 5, 4, 13], 1, LEGACY), ([2, 24, 4, 4], 1, LEGACY), ([1, 3, 9, 11], 2, LEGACY),
               ([3, 7, 5], 2, None), ([300], 0, None), ([2, 17, 9], 1, None)]  # fmt: skip
    for k, (sizes, dim, order) in enumerate(shapes):
        items, zps, mults, shifts = [], [], [], []
        for j in range(1 + k % 3):
            part = list(sizes)
            part[dim] = max(1, sizes[dim] - j)
            identity = (k + j) % 4 == 0
            if identity:
                m, sh, zp = 1 << 30, 1, 0
            elif (k + j) % 7 == 3:  # extremes: the largest shifts either way
                m, sh, zp = int(rng.integers(1 << 30, 2**31)), int(rng.choice([-31, -20, 20, 31])), 0
                zp = int(rng.integers(-128, 128))
            else:
                m, sh = ref.single_rounding_multiplier(float(rng.uniform(0.05, 3.0)))
                zp = int(rng.integers(-128, 128))
            items.append(p.input(_int8(rng, part), pm.ScalarType.CHAR, part, order, misalign=(k + j) % 3))
            zps.append(zp)
            mults.append(m)
            shifts.append(sh)
        out_zp = 0 if k % 4 == 0 else int(rng.integers(-128, 128))
        zps = [out_zp if (k + j) % 4 == 0 else z for j, z in enumerate(zps)]
        out_sizes = list(sizes)
        out_sizes[dim] = sum(p.values[i].sizes[dim] for i in items)
        out = p.output(pm.ScalarType.CHAR, out_sizes, order, misalign=k % 4)
        lst = p._add(pm.TensorList(items))
        args = [lst, p.i(dim), p.ints(zps), p.ints(mults), p.ints(shifts), p.i(out_zp), out]
        p.call("torchmcu::quantized_cat", args, f"{out_sizes} dim={dim} zps={zps} shifts={shifts}")


def resize_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """torchmcu::resize2d: nearest (the predicated byte copy) and bilinear (4 int32 lanes a
    step), channel tails 1..40, the exporter's 2x forms and random TOSA parameters."""
    for k, c in enumerate([*CHANNELS, 2, 4, 5, 8, 13, 15, 31, 33, 48, 1, 3, 17]):
        bilinear = k % 2 == 1
        h, w = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        if k < 4:  # the exporter's 2x upsample (half-pixel centres)
            oh, ow, scale, offset = 2 * h, 2 * w, [4, 2, 4, 2], [-1, -1]
        else:
            oh, ow = int(rng.integers(1, 11)), int(rng.integers(1, 11))
            yn, xn = int(rng.integers(1, 12)), int(rng.integers(1, 12))
            scale = [yn, int(rng.integers(1, 16 * yn)), xn, int(rng.integers(1, 16 * xn))]
            offset = [int(rng.integers(-yn, 16 * yn)), int(rng.integers(-xn, 16 * xn))]
        m, s = ref.single_rounding_multiplier(1 / (scale[0] * scale[2])) if bilinear else (0, 0)
        x = p.input(_int8(rng, [1, c, h, w]), pm.ScalarType.CHAR, [1, c, h, w], LEGACY, misalign=k % 16)
        out = p.output(pm.ScalarType.CHAR, [1, c, oh, ow], LEGACY, misalign=(k * 7) % 16)
        args = [x, p.ints(scale), p.ints(offset), p.b(bilinear), p.i(m), p.i(s), out]
        p.call("torchmcu::resize2d", args, f"{h}x{w}x{c} -> {oh}x{ow} {scale} {offset} bilinear={bilinear}")
def table_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """cortex_m::quantized_activation (the int8 table of hardswish, sigmoid ...): the byte
    gather over every tail 1..35 and longer runs, unaligned, [1, n] and NHWC."""
    for k, n in enumerate(TAIL_SIZES):
        sizes, order = ([1, n], [0, 1]) if k % 3 else ([1, n, 1, 1], LEGACY)
        x = p.input(_int8(rng, sizes), pm.ScalarType.CHAR, sizes, order, misalign=k % 5)
        lut = p.input(_int8(rng, (256,)), pm.ScalarType.CHAR, misalign=(k + 1) % 3)
        out = p.output(pm.ScalarType.CHAR, sizes, order, misalign=(k + 2) % 4)
        p.call("cortex_m::quantized_activation", [x, lut, out], f"{sizes}")


def prelu_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """Channel tails 1..27 (four lanes a step), [N, C] and NHWC, slopes of both signs and 0."""
    for k, c in enumerate([*range(1, 13), *CHANNELS, 5, 9, 13, 31]):
        sizes, order = ([3, c], [0, 1]) if k % 2 else ([1, c, 2, 3], LEGACY)
        s_in, s_out = (float(v) for v in rng.uniform(0.01, 0.1, 2))
        slopes = rng.uniform(-2.0, 2.0, c)
        slopes[k % c] = 0.0
        pairs = [ref.single_rounding_multiplier(abs(s_in * a / s_out)) for a in slopes]
        neg_m = np.array([-m if a < 0 else m for (m, _), a in zip(pairs, slopes)], np.int32)
        neg_s = np.array([sh for _, sh in pairs], np.int32)
        pos_m, pos_s = ref.single_rounding_multiplier(s_in / s_out)
        zps = [int(v) for v in rng.integers(-128, 128, 2)]
        x = p.input(_int8(rng, sizes), pm.ScalarType.CHAR, sizes, order, misalign=k % 3)
        m = p.input(neg_m, pm.ScalarType.INT)
        sh = p.input(neg_s, pm.ScalarType.INT)
        out = p.output(pm.ScalarType.CHAR, sizes, order, misalign=(k + 1) % 4)
        args = [x, p.i(zps[0]), p.i(zps[1]), p.i(pos_m), p.i(pos_s), m, sh, out]
        p.call("torchmcu::quantized_prelu", args, f"{sizes} zps={zps}")


def embedding_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """Row lengths 1..35, 64, 100 (every tail of the four-column steps), 1..40 rows, int64 and
    int32 indices of rank 1..3, row scales from 2^-4 to 2^4 of the output's (left and right
    shifts), unaligned tables and outputs."""
    for k, cols in enumerate([*range(1, 36), 64, 100]):
        rows = 1 + (k * 7) % 40
        weight = rng.integers(-127, 128, (rows, cols), dtype=np.int8)
        out_scale = float(rng.uniform(0.01, 0.1))
        pairs = [ref.single_rounding_multiplier(out_scale * 2.0 ** float(e) / out_scale)
                 for e in rng.uniform(-4, 4, rows)]  # fmt: skip
        sizes = [[5], [2, 3], [2, 1, 3]][k % 3]
        stype = pm.ScalarType.LONG if k % 2 else pm.ScalarType.INT
        idx = rng.integers(0, rows, sizes)
        w = p.input(weight, pm.ScalarType.CHAR, misalign=k % 5)
        i = p.input(idx, stype, misalign=k % 3)
        m = p.input(np.array([m for m, _ in pairs], np.int32), pm.ScalarType.INT)
        sh = p.input(np.array([s for _, s in pairs], np.int32), pm.ScalarType.INT)
        out = p.output(pm.ScalarType.CHAR, [*sizes, cols], misalign=(k + 1) % 4)
        zp = int(rng.integers(-128, 128))
        args = [w, i, m, sh, p.i(zp), out]
        p.call("torchmcu::quantized_embedding", args, f"{rows}x{cols} {sizes} {stype.name} zp={zp}")


def batch_matmul_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """Inner sizes 1..40 (every tail of the 16-byte loop), column counts around the
    4-channel blocks, batches 1..4, zero points of both sides 0 or not (the offset terms
    the Helium path folds out), and vit_tiny's q @ k^T and p @ v."""
    shapes = [
        (1 + k % 4, 1 + 2 * (k % 3), k, [1, 2, 3, 4, 5, 7, 12, 17][k % 8]) for k in range(1, 41)
    ]
    shapes += [(4, 17, 16, 17), (4, 17, 17, 16)]
    for k, (b, m, inner, n) in enumerate(shapes):
        lz = 0 if k % 5 == 1 else int(rng.integers(-127, 129))
        rz = 0 if k % 5 == 2 else int(rng.integers(-127, 129))
        mult = int(rng.integers(1 << 30, 1 << 31))
        shift = int(rng.integers(-16, -6))
        lhs = p.input(_int8(rng, (b, m, inner)), pm.ScalarType.CHAR, misalign=k % 3)
        rhs = p.input(_int8(rng, (b, n, inner)), pm.ScalarType.CHAR, misalign=(k + 1) % 3)
        out = p.output(pm.ScalarType.CHAR, [b, m, n], misalign=(k + 2) % 4)
        args = [lhs, p.i(lz), rhs, p.i(rz), p.i(int(rng.integers(-128, 128))), p.i(mult), p.i(shift),
                p.scratch(), out]  # fmt: skip
        p.call(
            "cortex_m::quantized_batch_matmul",
            args,
            f"[{b},{m},{inner}] x [{b},{n},{inner}]^T zps={lz},{rz}",
        )


def layer_norm_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """Row sizes 1..40, 64, 100, 257 (tails of the 16-lane sums), 1..3 rows, wide and narrow
    rows (the small-variance end), a constant row (variance 0), the exporter's parameters."""
    from torchmcu.ops.defs.layer_norm import layer_norm_params

    for k, c in enumerate([*range(1, 41), 64, 100, 257]):
        rows = 1 + k % 3
        x = _int8(rng, (rows, c))
        if k % 4 == 1:
            x = (int(rng.integers(-100, 100)) + rng.integers(-3, 4, (rows, c))).astype(np.int8)
        elif k % 4 == 2:
            x[0] = np.int8(rng.integers(-128, 128))
        gamma = rng.uniform(0.5, 1.5, c) * rng.choice([-1, 1], c)
        beta = rng.normal(0, 0.3, c)
        in_scale, out_scale = float(rng.uniform(0.005, 0.1)), float(rng.uniform(0.02, 0.06))
        w, bias, eps, shift = layer_norm_params(gamma, beta, 1e-5, in_scale, out_scale)
        x_i = p.input(x, pm.ScalarType.CHAR, misalign=k % 16)
        w_i = p.input(w, pm.ScalarType.INT)
        b_i = p.input(bias, pm.ScalarType.INT)
        out = p.output(pm.ScalarType.CHAR, [rows, c], misalign=(k + 5) % 16)
        zp = int(rng.integers(-20, 20))
        args = [x_i, w_i, b_i, p.i(eps), p.i(shift), p.i(zp), out]
        p.call("torchmcu::quantized_layer_norm", args, f"{rows}x{c} eps={eps} shift={shift}")
    # int16 input (the residual stream): tails of the 8-lane sums, up to the 1024 limit
    for k, c in enumerate([*range(1, 20), 64, 100, 257, 1024]):
        rows = 1 + k % 3
        x = rng.integers(-32768, 32768, (rows, c), dtype=np.int16)
        if k % 4 == 1:
            x = (int(rng.integers(-30000, 30000)) + rng.integers(-3, 4, (rows, c))).astype(np.int16)
        gamma = rng.uniform(0.5, 1.5, c) * rng.choice([-1, 1], c)
        beta = rng.normal(0, 0.3, c)
        in_scale, out_scale = float(rng.uniform(2e-5, 4e-4)), float(rng.uniform(0.02, 0.06))
        w, bias, eps, shift = layer_norm_params(gamma, beta, 1e-5, in_scale, out_scale, True)
        x_i = p.input(x, pm.ScalarType.SHORT, misalign=k % 8)
        w_i = p.input(w, pm.ScalarType.INT)
        b_i = p.input(bias, pm.ScalarType.INT)
        out = p.output(pm.ScalarType.CHAR, [rows, c], misalign=(k + 5) % 16)
        args = [x_i, w_i, b_i, p.i(eps), p.i(shift), p.i(int(rng.integers(-20, 20))), out]
        p.call("torchmcu::quantized_layer_norm", args, f"int16 {rows}x{c} eps={eps} shift={shift}")


def transpose_cases(p: CaseProgram, rng: np.random.Generator) -> None:
    """Layout changes (NCHW <-> NHWC) with few and many channels, 2-D and channel-shuffle
    permutations, channels-last inputs, runs with and without a 16-byte tail (the Helium path's
    byte-offset and word-offset scatters and gathers) and wider elements (the scalar path)."""
    to_nhwc = [(3, 20, 19), (3, 5, 33), (1, 7, 9), (16, 5, 5), (17, 3, 40), (64, 4, 4),
               (7, 1, 100), (18, 2, 3)]  # fmt: skip
    to_nchw = [(5, 6, 3), (4, 4, 17), (2, 9, 64), (3, 3, 200), (1, 40, 15), (2, 2, 1)]
    cases = [([1, c, h, w], [0, 2, 3, 1], None) for c, h, w in to_nhwc]
    cases += [([1, h, w, c], [0, 3, 1, 2], None) for h, w, c in to_nchw]
    cases += [([a, b], [1, 0], None) for a, b in
              [(16, 20), (37, 5), (5, 37), (300, 3), (3, 300), (1, 9), (40, 20)]]  # fmt: skip
    cases += [([64, 4, 8], [0, 2, 1], None), ([10, 2, 16], [0, 2, 1], None),
              ([40, 3, 2], [0, 2, 1], None), ([2, 5, 3, 8], [3, 1, 0, 2], None)]  # fmt: skip
    # channels-last inputs
    cases += [([2, 3, 4, 21], [0, 2, 3, 1], LEGACY), ([1, 20, 6, 5], [0, 2, 3, 1], LEGACY)]
    for k, (sizes, perm, order) in enumerate(cases):
        stype = pm.ScalarType.CHAR
        if k % 9 == 8:
            stype = pm.ScalarType.SHORT if k % 2 else pm.ScalarType.INT
        x = rng.integers(-128, 128, sizes).astype(_NP[stype])
        src = p.input(x, stype, sizes, order, misalign=k % 3)
        out = p.output(stype, [sizes[d] for d in perm], misalign=(k + 1) % 4)
        what = f"{sizes} perm={perm} order={order} {stype.name}"
        p.call("cortex_m::transpose", [src, p.ints(perm), out], what)


CASE_BUILDERS = {
    "quantize_per_tensor": quantize_cases,
    "dequantize_per_tensor": dequantize_cases,
    "quantized_add": add_cases,
    "quantized_add16": add16_cases,
    "quantized_mul": mul_cases,
    "maximum": minmax_cases("maximum"),
    "minimum": minmax_cases("minimum"),
    "quantized_max_pool2d": max_pool_cases,
    "quantized_avg_pool2d": avg_pool_cases,
    "quantized_adaptive": adaptive_pool_cases,
    "softmax": softmax_cases,
    "masked_softmax": masked_softmax_cases,
    "resize2d": resize_cases,
    "quantized_prelu": prelu_cases,
    "quantized_embedding": embedding_cases,
    "quantized_cat": cat_cases,
    "quantized_activation": table_cases,
    "quantized_batch_matmul": batch_matmul_cases,
    "quantized_layer_norm": layer_norm_cases,
    "transpose": transpose_cases,
}


@dataclass
class SessionRun:
    builder: CaseProgram
    device: list[np.ndarray]
    host: list[np.ndarray]
    expected: list[np.ndarray]
    image: Path


@pytest.fixture(scope="session")
def mve_run(tmp_path_factory: pytest.TempPathFactory) -> SessionRun:
    rng = np.random.default_rng(20240611)
    builder = CaseProgram()
    for make in CASE_BUILDERS.values():
        make(builder, rng)
    program = builder.program()
    pte = writer.serialize(program)
    expected = run_program(program, builder.input_arrays)
    host = native.run_program(pte, builder.input_arrays)
    out_dir = tmp_path_factory.mktemp("mve-elementwise")
    outs, _ = device.run_samples(pte, BOARD, [builder.input_arrays], out_dir, timeout=100)
    return SessionRun(builder, outs[0], host, expected, out_dir)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("op", list(CASE_BUILDERS))
def test_mve_bit_exact(op: str, mve_run: SessionRun) -> None:
    cases = [c for c in mve_run.builder.cases if c[0].startswith(op)]
    assert len(cases) >= 20
    bad = []
    for name, what, k in cases:
        exp, dev, host = mve_run.expected[k], mve_run.device[k], mve_run.host[k]
        if not _same_bits(dev, exp) or not _same_bits(host, exp):
            diff = np.flatnonzero(dev.reshape(-1).view(np.uint8) != exp.reshape(-1).view(np.uint8))
            bad.append(f"{name} {what}: device==ref {_same_bits(dev, exp)}, host==ref "
                       f"{_same_bits(host, exp)}, first differing bytes {diff[:5].tolist()}")  # fmt: skip
    assert not bad, f"{len(bad)} of {len(cases)} cases differ:\n" + "\n".join(bad[:15])


MVE_KERNELS = {
    "quantize_per_tensor": "vcvtn.s32.f32",
    "dequantize_per_tensor": "vcvt.f32.s32",
    "quantized_max_pool2d": "vmax.s8",
    "minmax": "vmin.s8",
    "quantized_avg_pool2d": "vmulh",
    "quantized_add": "vqrdmulh",
    "quantized_add16": "vqrdmulh",
    "quantized_mul": "vqrdmulh",
    "softmax": "vqrdmulh",
    "resize2d": "vqrdmulh",
    "quantized_prelu": "vqrdmulh",
    "quantized_embedding": "vqrdmulh",
    "quantized_cat": "vqrdmulh",
    "quantized_activation": "vldrbt.u8",
    "quantized_batch_matmul": "vmlava.s8",  # objdump's name of vmladava
    "quantized_layer_norm": ("vmlava.s8", "vmlalva.s16"),  # and the int16 rows' vmlaldava
    "transpose": "vstrbt.8",  # the byte-offset scatter (predicated)
}


@pytest.mark.parametrize("op", list(MVE_KERNELS))
def test_image_runs_mve_code(op: str, mve_run: SessionRun) -> None:
    """The cases above exercise vector code: the kernel object in the image uses Helium."""
    objs = list(mve_run.image.rglob(f"{op}.c.obj"))
    assert objs, f"no object for {op} under {mve_run.image}"
    dis = subprocess.run(
        ["arm-none-eabi-objdump", "-d", "-m", "armv8.1-m.main", str(objs[0])],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    wanted = MVE_KERNELS[op]
    assert all(m in dis for m in ((wanted,) if isinstance(wanted, str) else wanted)) and "vctp" in dis
