"""Building blocks of the TOSA 1.0 lowering: the serializer wrapper and call argument access.

Everything the op families share lives here: constants, RESCALE in the one rounding
mode we use (DOUBLE_ROUND, which equals CMSIS-NN's requantization), CLAMP, RESHAPE,
SLICE, and the window arithmetic TOSA's exact-output-size rule needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from torchmcu.ops.core import ArgError, Bound, OpDef
from torchmcu.pte import program as pm
from torchmcu.reference import ops_layout

_NP = {
    pm.ScalarType.BYTE: np.uint8,
    pm.ScalarType.CHAR: np.int8,
    pm.ScalarType.SHORT: np.int16,
    pm.ScalarType.INT: np.int32,
    pm.ScalarType.LONG: np.int64,
}


class TosaLoweringError(ValueError):
    """A KernelCall the TOSA lowering cannot express exactly (names the instruction)."""


def ts():
    """The tosa_serializer module (imported late: it is only needed when lowering)."""
    import tosa_serializer

    return tosa_serializer


def attr(kind: str, *args) -> object:
    """An initialised attribute (TOSA 1.0 needs one on every operator)."""
    a = ts().TosaSerializerAttribute()
    getattr(a, kind)(*args)
    return a


@dataclass
class Tensor:
    """A TOSA tensor of the graph being built, with its shape and dtype name."""

    obj: object
    shape: tuple[int, ...]
    dtype: str  # "INT8" | "INT32"

    @property
    def name(self) -> str:
        return self.obj.name  # type: ignore[attr-defined]


def physical_shape(t: pm.Tensor) -> tuple[int, ...]:
    return tuple(int(t.sizes[d]) for d in t.dim_order)


def laid_out_as(t: pm.Tensor, order: Sequence[int]) -> bool:
    """t's bytes are in `order` (dims of size 1 do not matter)."""
    if len(t.sizes) != len(order):
        return False
    return ops_layout.laid_out_as(t.sizes, t.dim_order, order)


class Graph:
    """One TOSA 1.0 graph under construction. family ("u55", "u65", "u85" or None): the NPU
    it is meant for, where the fastest of several exact forms depends on it (never the
    arithmetic: every form computes the same integers)."""

    def __init__(self, family: str | None = None) -> None:
        self.family = family
        self.g = ts().TosaSerializer(
            "", targetMajor=1, targetMinor=0, targetPatch=0, targetDraft=False
        )

    def dtype(self, name: str):
        return getattr(ts().DType, name)

    # -- tensors ------------------------------------------------------------------------------
    def placeholder(self, shape: Sequence[int], dtype: str = "INT8") -> Tensor:
        return Tensor(self.g.addPlaceholder(list(shape), self.dtype(dtype)), tuple(shape), dtype)

    def intermediate(self, shape: Sequence[int], dtype: str) -> Tensor:
        return Tensor(self.g.addIntermediate(list(shape), self.dtype(dtype)), tuple(shape), dtype)

    def const(self, array: np.ndarray, dtype: str) -> Tensor:
        arr = np.ascontiguousarray(array)
        shape = list(arr.shape) or [1]
        return Tensor(
            self.g.addConst(shape, self.dtype(dtype), arr.reshape(shape)), tuple(shape), dtype
        )

    def scalar(self, value: int, dtype: str) -> Tensor:
        """A one-element tensor (zero points, MUL's shift)."""
        np_type = {"INT8": np.int8, "INT16": np.int16, "INT32": np.int32}[dtype]
        return self.const(np.array([value], dtype=np_type), dtype)

    def shape_const(self, values: Sequence[int]) -> Tensor:
        vals = [int(v) for v in values]
        return Tensor(
            self.g.addConst([len(vals)], self.dtype("SHAPE"), np.array(vals, dtype=np.int64)),
            (len(vals),),
            "SHAPE",
        )

    def mark_output(self, t: Tensor) -> None:
        self.g.addOutputTensor(t.obj)

    def op(
        self, op: str, inputs: Sequence[Tensor], out_shape: Sequence[int], out_dtype: str, attribute
    ) -> Tensor:
        out = self.intermediate(out_shape, out_dtype)
        self.g.addOperator(getattr(ts().Op, op), [t.name for t in inputs], [out.name], attribute)
        return out

    def serialize(self) -> bytes:
        return bytes(self.g.serialize())

    # -- shared operators ------------------------------------------------------------------------
    def reshape(self, x: Tensor, shape: Sequence[int]) -> Tensor:
        shape = tuple(int(s) for s in shape)
        if shape == x.shape:
            return x
        if int(np.prod(shape)) != int(np.prod(x.shape)):
            raise TosaLoweringError(f"cannot reshape {list(x.shape)} to {list(shape)}")
        return self.op(
            "RESHAPE", [x, self.shape_const(shape)], shape, x.dtype, attr("ReshapeAttribute")
        )

    def pad(self, x: Tensor, amounts: Sequence[int], value: int, shape: Sequence[int]) -> Tensor:
        """PAD of an int8 x by (before, after) amounts per axis with the constant `value`."""
        pad_value = self.const(np.array([int(value)], dtype=np.int8), "INT8")
        return self.op(
            "PAD", [x, self.shape_const(amounts), pad_value], shape, "INT8", attr("PadAttribute")
        )

    def add(self, x: Tensor, y: Tensor) -> Tensor:
        """int32 ADD, broadcasting size-1 axes."""
        shape = tuple(max(p, q) for p, q in zip(x.shape, y.shape))
        return self.op("ADD", [x, y], shape, "INT32", attr("AddAttribute"))

    def sub(self, x: Tensor, y: Tensor) -> Tensor:
        """int32 SUB (x - y), broadcasting size-1 axes."""
        shape = tuple(max(p, q) for p, q in zip(x.shape, y.shape))
        return self.op("SUB", [x, y], shape, "INT32", attr("SubAttribute"))

    def scalar_tensor(self, value: int, dtype: str, rank: int) -> Tensor:
        """A constant of one element and `rank` axes (broadcast by the elementwise ops)."""
        return self.const(np.full((1,) * rank, value, dtype=np.int32 if dtype == "INT32" else np.int8), dtype)

    def mul(self, x: Tensor, y: Tensor) -> Tensor:
        """int32 MUL (shift 0), broadcasting size-1 axes."""
        shape = tuple(max(p, q) for p, q in zip(x.shape, y.shape))
        return self.op("MUL", [x, y, self.scalar(0, "INT8")], shape, "INT32", attr("MulAttribute"))

    def minmax(self, kind: str, x: Tensor, y: Tensor) -> Tensor:
        """int32 MAXIMUM or MINIMUM (`kind`), broadcasting size-1 axes."""
        shape = tuple(max(p, q) for p, q in zip(x.shape, y.shape))
        a = attr(f"{kind.capitalize()}Attribute", ts().NanPropagationMode.PROPAGATE)
        return self.op(kind, [x, y], shape, "INT32", a)

    def conv(
        self,
        kind: str,
        x: Tensor,
        weight: np.ndarray,
        bias: np.ndarray,
        input_zp: int,
        shape: Sequence[int],
        pad: Sequence[int],
        stride: Sequence[int],
        dilation: Sequence[int],
    ) -> Tensor:
        """int8 CONV2D (OHWI weight) or DEPTHWISE_CONV2D ([KH, KW, C, M] weight): int32 bias
        and accumulator, weight zero point 0."""
        inputs = self._conv_inputs(x, weight, bias, input_zp)
        a = attr(
            _CONV_ATTRIBUTES[kind],
            [int(p) for p in pad],
            [int(s) for s in stride],
            [int(d) for d in dilation],
            False,
            ts().DType.INT32,
        )
        return self.op(kind, inputs, tuple(shape), "INT32", a)

    def _conv_inputs(self, x: Tensor, weight: np.ndarray, bias: np.ndarray, input_zp: int) -> list:
        """A convolution's operands: input, int8 weight, int32 bias, the two zero points."""
        return [
            x,
            self.const(weight.astype(np.int8), "INT8"),
            self.const(bias, "INT32"),
            self.scalar(input_zp, "INT8"),
            self.scalar(0, "INT8"),
        ]

    def transpose_conv(
        self,
        x: Tensor,
        weight: np.ndarray,
        bias: np.ndarray,
        input_zp: int,
        shape: Sequence[int],
        out_pad: Sequence[int],
        stride: Sequence[int],
    ) -> Tensor:
        """int8 TRANSPOSE_CONV2D (OHWI weight, out_pad [top, bottom, left, right]): int32 bias
        and accumulator, weight zero point 0."""
        inputs = self._conv_inputs(x, weight, bias, input_zp)
        ints = ([int(p) for p in out_pad], [int(s) for s in stride])
        a = attr("TransposeConv2dAttribute", *ints, False, ts().DType.INT32)
        return self.op("TRANSPOSE_CONV2D", inputs, tuple(shape), "INT32", a)

    def concat(self, items: Sequence[Tensor], axis: int) -> Tensor:
        """CONCAT of same-dtype tensors along `axis`."""
        shape = list(items[0].shape)
        shape[axis] = sum(t.shape[axis] for t in items)
        return self.op("CONCAT", list(items), tuple(shape), items[0].dtype, attr("ConcatAttribute", axis))

    def table(self, x: Tensor, lut: np.ndarray) -> Tensor:
        """TABLE of an int8 x through the 256-entry int8 lut."""
        return self.op("TABLE", [x, self.const(lut, "INT8")], x.shape, "INT8", attr("TableAttribute"))

    def transpose(self, x: Tensor, perm: Sequence[int]) -> Tensor:
        shape = tuple(x.shape[p] for p in perm)
        return self.op("TRANSPOSE", [x], shape, x.dtype, attr("TransposeAttribute", list(perm)))

    def resize(
        self,
        x: Tensor,
        bilinear: bool,
        params: Sequence[Sequence[int]],
        shape: Sequence[int],
    ) -> Tensor:
        """RESIZE of an int8 x; params: scale (4), offset (2), border (2). NEAREST gives int8,
        BILINEAR int32 (the weighted sum in units of scale_y_n * scale_x_n)."""
        mode = ts().ResizeMode.BILINEAR if bilinear else ts().ResizeMode.NEAREST
        inputs = [x, *(self.shape_const(p) for p in params)]
        dtype = "INT32" if bilinear else "INT8"
        return self.op("RESIZE", inputs, tuple(shape), dtype, attr("ResizeAttribute", mode))

    def slice(self, x: Tensor, start: Sequence[int], size: Sequence[int]) -> Tensor:
        if tuple(size) == x.shape:
            return x
        return self.op(
            "SLICE",
            [x, self.shape_const(start), self.shape_const(size)],
            size,
            x.dtype,
            attr("SliceAttribute"),
        )

    def concat(self, parts: Sequence[Tensor], axis: int) -> Tensor:
        """CONCAT of tensors of one dtype along `axis`."""
        shape = list(parts[0].shape)
        shape[axis] = sum(p.shape[axis] for p in parts)
        return self.op("CONCAT", list(parts), shape, parts[0].dtype, attr("ConcatAttribute", axis))

    def rescale(
        self,
        x: Tensor,
        out_dtype: str,
        multipliers: Sequence[int],
        tosa_shifts: Sequence[int],
        input_zp: int = 0,
        output_zp: int = 0,
    ) -> Tensor:
        """RESCALE with DOUBLE_ROUND: out = ((v - input_zp) * m + r) >> shift + output_zp, where r is
        2^(shift-1), plus or minus 2^30 when shift > 31 (TOSA's definition); per channel when
        several multipliers are given (the last axis)."""
        mults = [int(m) for m in multipliers]
        shifts = [int(s) for s in tosa_shifts]
        for m, s in zip(mults, shifts):
            if not (0 <= m < (1 << 31)) or not 2 <= s <= 62:
                raise TosaLoweringError(
                    f"RESCALE multiplier {m} / shift {s} outside TOSA's range "
                    "(0 <= m < 2^31, 2 <= shift <= 62)"
                )
        mt = self.const(np.array(mults, dtype=np.int32), "INT32")
        st = self.const(np.array(shifts, dtype=np.int8), "INT8")
        izp = self.scalar(input_zp, x.dtype)
        ozp = self.scalar(output_zp, out_dtype)
        a = attr(
            "RescaleAttribute", True, ts().RoundingMode.DOUBLE_ROUND, len(mults) > 1, False, False
        )
        return self.op("RESCALE", [x, mt, st, izp, ozp], x.shape, out_dtype, a)

    def requantize(
        self,
        acc: Tensor,
        multipliers: Sequence[int],
        shifts: Sequence[int],
        output_zp: int,
        act_min: int = -128,
        act_max: int = 127,
    ) -> Tensor:
        """int32 accumulator -> int8 with our (multiplier, shift) pairs (shift > 0: left), the
        CMSIS-NN requantization: TOSA shift = 31 - shift with DOUBLE_ROUND is the same function."""
        mults = [int(m) for m in multipliers]
        ours = [int(s) for s in shifts]
        if len(ours) == 1 and len(mults) > 1:
            ours = ours * len(mults)
        if len(mults) == 1 and len(ours) > 1:
            mults = mults * len(ours)
        if len(mults) > 1 and len(mults) != acc.shape[-1]:
            raise TosaLoweringError(f"{len(mults)} multipliers for {acc.shape[-1]} channels")
        if len(set(zip(mults, ours))) == 1:
            mults, ours = mults[:1], ours[:1]
        out = self.rescale(acc, "INT8", mults, [31 - s for s in ours], 0, output_zp)
        return self.clamp(out, act_min, act_max)

    def clamp(self, x: Tensor, lo: int, hi: int) -> Tensor:
        """CLAMP of an int8 tensor; nothing when the range is all of int8."""
        if lo <= -128 and hi >= 127:
            return x
        lo_b = list(np.array([lo], dtype=np.int8).view(np.uint8).tolist())
        hi_b = list(np.array([hi], dtype=np.int8).view(np.uint8).tolist())
        a = attr("ClampAttribute", lo_b, hi_b, ts().NanPropagationMode.PROPAGATE)
        return self.op("CLAMP", [x], x.shape, x.dtype, a)

    # -- window operators (int32 accumulators, zero points as one-element constants) ------------
    def avg_pool2d(
        self, x: Tensor, kernel: Sequence[int], stride: Sequence[int], out_shape: Sequence[int],
        zero_point: int,
    ) -> Tensor:
        """AVG_POOL2D of an int8 NHWC x (no padding), input and output zero point `zero_point`."""
        zps = [self.scalar(zero_point, "INT8"), self.scalar(zero_point, "INT8")]
        a = attr("AvgPool2dAttribute", list(kernel), list(stride), [0, 0, 0, 0], ts().DType.INT32)
        return self.op("AVG_POOL2D", [x, *zps], out_shape, "INT8", a)

    def max_pool2d(
        self, x: Tensor, kernel: Sequence[int], stride: Sequence[int], pad: Sequence[int],
        out_shape: Sequence[int],
    ) -> Tensor:
        """MAX_POOL2D of an int8 NHWC x; pad is (top, bottom, left, right)."""
        a = attr(
            "MaxPool2dAttribute", list(kernel), list(stride), list(pad),
            ts().NanPropagationMode.PROPAGATE,
        )
        return self.op("MAX_POOL2D", [x], out_shape, "INT8", a)

    def reduce_sum(self, x: Tensor, axis: int) -> Tensor:
        """REDUCE_SUM of an int32 x along `axis` (kept, as size 1)."""
        shape = tuple(1 if k == axis else s for k, s in enumerate(x.shape))
        return self.op("REDUCE_SUM", [x], shape, x.dtype, attr("ReduceSumAttribute", axis))


_CONV_ATTRIBUTES = {"CONV2D": "Conv2dAttribute", "DEPTHWISE_CONV2D": "DepthwiseConv2dAttribute"}


def constant_data(program: pm.Program, t: pm.Tensor) -> np.ndarray:
    """A constant tensor's elements in its memory order (physical shape)."""
    dtype = _NP[pm.ScalarType(t.scalar_type)]
    arr = np.frombuffer(
        program.constants[t.data_buffer_idx],
        dtype=dtype,
        count=t.numel,
        offset=t.storage_offset * np.dtype(dtype).itemsize,
    )
    return arr.reshape(physical_shape(t)).copy()


class Args:
    """Argument access for one KernelCall of a sub-Program."""

    def __init__(
        self, program: pm.Program, plan: pm.ExecutionPlan, call: pm.KernelCall, where: str
    ) -> None:
        self.program = program
        self.plan = plan
        self.args = list(call.args)
        self.where = where
        self.op_name = plan.operators[call.op_index].name

    def error(self, message: str) -> TosaLoweringError:
        return TosaLoweringError(f"{self.where}: {message}")

    def value(self, i: int) -> pm.EValue:
        return self.plan.values[self.args[i]]

    def is_none(self, i: int) -> bool:
        return isinstance(self.value(i), pm.Null)

    def scalar(self, i: int):
        v = self.value(i)
        if isinstance(v, (pm.Int, pm.Bool, pm.Double)):
            return v.value
        if isinstance(v, pm.IntList):
            return [self.plan.values[k].value for k in v.items]  # type: ignore[union-attr]
        if isinstance(v, pm.Null):
            return None
        raise self.error(
            f"argument {i} (value {self.args[i]}) is {type(v).__name__}, expected a scalar"
        )

    def tensor(self, i: int) -> pm.Tensor:
        v = self.value(i)
        if not isinstance(v, pm.Tensor):
            raise self.error(
                f"argument {i} (value {self.args[i]}) is {type(v).__name__}, not a Tensor"
            )
        return v

    def constant(self, i: int) -> np.ndarray:
        """A constant tensor argument as an array in its memory order (physical shape)."""
        t = self.tensor(i)
        if t.data_buffer_idx <= 0:
            raise self.error(f"argument {i} (value {self.args[i]}) must be a constant tensor")
        return constant_data(self.program, t)

    def ints(self, i: int) -> list[int]:
        """An int list or a constant int tensor argument (per-channel parameters)."""
        if isinstance(self.value(i), pm.Tensor):
            return [int(v) for v in self.constant(i).reshape(-1)]
        value = self.scalar(i)
        return [int(v) for v in (value if isinstance(value, list) else [value])]

    def nhwc_shape(self, i: int) -> tuple[int, int, int, int]:
        """(N, H, W, C) of a 4-D activation whose memory is NHWC (legacy or _nhwc sizes)."""
        t = self.tensor(i)
        if len(t.sizes) != 4:
            raise self.error(f"argument {i} (value {self.args[i]}) is not 4-D: sizes {t.sizes}")
        if laid_out_as(t, (0, 2, 3, 1)):
            n, c, h, w = t.sizes
            return n, h, w, c
        raise self.error(
            f"argument {i} (value {self.args[i]}) is not NHWC in memory: sizes {t.sizes} "
            f"dim_order {t.dim_order}"
        )


class BoundArgs(Bound):
    """The TOSA side's named view of one KernelCall of a registry op (a registry lowering gets
    it as `a`): Args' constants, NHWC shapes and error type, by argument name."""

    def __init__(self, op: OpDef, args: Args) -> None:
        super().__init__(op, args.plan.values, args.args)
        self.raw = args

    def error(self, message: str) -> TosaLoweringError:
        return self.raw.error(message)

    def constant(self, name: str) -> np.ndarray:
        return self.raw.constant(self.index(name))

    def data(self, name: str) -> np.ndarray | None:
        """A constant tensor's elements (None for a tensor in the arena)."""
        t = self.value(name)
        return self.constant(name) if isinstance(t, pm.Tensor) and t.data_buffer_idx > 0 else None

    def nhwc_shape(self, name: str) -> tuple[int, int, int, int]:
        return self.raw.nhwc_shape(self.index(name))

    def physical_shape(self, name: str) -> tuple[int, ...]:
        return physical_shape(self.tensor(name))

    def checked(self) -> None:
        """The operator's check, its ArgError raised as this lowering's error."""
        try:
            self.check()
        except ArgError as exc:
            raise self.error(str(exc)) from exc

    def ints(self, name: str) -> list[int]:
        """An int list or a constant int tensor argument (per-channel parameters)."""
        return self.raw.ints(self.index(name))
