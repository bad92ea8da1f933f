"""The lowering toolkit as one object: what a rule defined in torchmcu.ops (a Pattern's
`lower`) gets instead of importing lower/ (docs/design/operator-registry.md 4.2).

Its methods are today's free functions around one Ctx, plus `aten_arg` (an aten argument by
its schema name) and `call` (a kernel call by the definition's argument names, in schema
order, so the values a call creates keep the order the rule writes them in, and with it the
numbering in the .pte).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.fx

from torchmcu.lower import context, float_values, graph, layout, requant
from torchmcu.lower.context import Ctx
from torchmcu.lower.errors import LoweringError, UnsupportedOpError, unsupported
from torchmcu.lower.graph import named_arg, pair, shape_of
from torchmcu.lower.values import LValue
from torchmcu.ops.core import OpDef, Pattern
from torchmcu.pte.program import ScalarType, String, TensorList
from torchmcu.quantize import targets
from torchmcu.quantize.annotation import read_annotation
from torchmcu.quantize.qdq import is_dq, is_q

Rule = Callable[[Ctx, torch.fx.Node], None]


def resolve_target(name: str) -> Any:
    """The torch op of an aten name as the registry writes it: "aten::slice.Tensor"."""
    try:
        return targets.resolve_target(name)
    except LookupError as exc:
        raise LoweringError(str(exc)) from None


def _under_qdq(arg: object) -> object:
    """The node a dequantize (of a quantize) argument stands for."""
    if is_dq(arg):
        arg = arg.args[0]  # type: ignore[union-attr]
    if is_q(arg):
        arg = arg.args[0]  # type: ignore[union-attr]
    return arg


def rule_of(lower: Callable[[Kit, torch.fx.Node], None]) -> Rule:
    """A Pattern's rule as the (ctx, node) rule lowering's EMITTERS dispatches to."""

    def rule(ctx: Ctx, node: torch.fx.Node) -> None:
        lower(Kit(ctx), node)

    return rule


def pattern_rule(p: Pattern) -> Rule:
    assert p.lower is not None
    return rule_of(p.lower)


def float_rule(p: Pattern) -> Rule:
    """A Pattern's fp32 rule as lowering's FLOAT_EMITTERS dispatches to it."""
    assert p.lower_float is not None
    return rule_of(p.lower_float)


class Kit:
    """One lowering run's helpers, for the rules of torchmcu.ops definitions."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx

    # -- aten side
    aten_arg = staticmethod(named_arg)  # (node, name, default): an aten argument by its name

    shape_of = staticmethod(shape_of)
    pair = staticmethod(pair)  # (h, w) of an int or int list aten argument, with a default

    @staticmethod
    def unsupported(node: torch.fx.Node, why: str = "") -> UnsupportedOpError:
        return unsupported(node, why)

    @staticmethod
    def is_node(value: object) -> bool:
        """An aten argument that is a graph value (not a Python scalar or list)."""
        return isinstance(value, torch.fx.Node)

    # -- values
    def input_value(self, node: object, channels_last_1d: bool = False) -> LValue:
        """The int8 value of an argument; a 3-D channels-last one (a conv1d's output) is
        made contiguous unless the rule reads that layout (channels_last_1d)."""
        v = context.input_value(self.ctx, node)
        if v.rank == 3 and v.nhwc and not channels_last_1d:
            return layout.as_contiguous(self.ctx, v)
        return v

    def new_int8(self, hint: str, sizes: Sequence[int], qp: Any, nhwc: bool) -> LValue:
        return context.new_int8(self.ctx, hint, sizes, qp, nhwc)

    def new_int16(self, hint: str, sizes: Sequence[int], qp: Any, nhwc: bool) -> LValue:
        """A fresh planned int16 tensor (the residual stream) carrying qp."""
        return context.new_int8(self.ctx, hint, sizes, qp, nhwc, ScalarType.SHORT)

    def alias(self, v: LValue, sizes: Sequence[int], nhwc: bool, **kw: Any) -> LValue:
        return context.alias(self.ctx, v, sizes, nhwc, **kw)

    def as_contiguous(self, v: LValue) -> LValue:
        return layout.as_contiguous(self.ctx, v)

    def as_nhwc(self, v: LValue) -> LValue:
        return layout.as_nhwc(self.ctx, v)

    def as_nhwc_1d(self, v: LValue) -> LValue:
        return layout.as_nhwc_1d(self.ctx, v)

    def output_quant(self, node: torch.fx.Node, allow_activation: bool):
        return requant.output_quant(self.ctx, node, allow_activation)

    same_qparams = staticmethod(requant.same_qparams)
    activation_range = staticmethod(requant.activation_range)  # (act_min, act_max) of a fused act
    # (multipliers, shifts) of acc (in_scale * w_scales) -> out_scale, one pair per channel
    per_channel_requant = staticmethod(requant.per_channel_requant)
    q8 = staticmethod(requant.q8)  # a float value quantized with the output's qparams

    def bind_output(self, qs: list[torch.fx.Node], act: torch.fx.Node | None, out: LValue) -> None:
        context.bind_output(self.ctx, qs, act, out)

    @staticmethod
    def annotated_pattern(node: torch.fx.Node) -> str | None:
        """The pattern the quantizer annotated node as ("masked_softmax", ...), None if none."""
        record = read_annotation(node)
        return None if record is None else record.pattern

    @staticmethod
    def quantized(node: torch.fx.Node) -> bool:
        """A quantize node uses node's output (PT2E puts none between two ops that share
        qparams, e.g. select -> unsqueeze)."""
        return any(is_q(u) for u in node.users)

    @staticmethod
    def scale_mul(node: torch.fx.Node) -> tuple[torch.fx.Node, float] | None:
        """The unquantized `* number` reading node's output, with the number: the quantizer
        folded it into node's requantization (attention's scale after q @ k^T)."""
        return None if Kit.quantized(node) else targets.positive_scale_user(node)

    @staticmethod
    def matmul_rhs_transpose(node: torch.fx.Node) -> bool:
        """node swaps the last two dims and every op reading it (through its quantize and
        dequantize) is a matmul taking it as the right-hand side only (attention's
        q @ k.transpose(-2, -1)): those matmuls read node's input, already the
        rhs_transposed their kernel takes, so node itself is not materialized."""
        if node.op != "call_function" or node.target != torch.ops.aten.transpose.int:
            return False
        rank = len(shape_of(node))
        if rank < 2 or sorted(int(d) % rank for d in node.args[1:3]) != [rank - 2, rank - 1]:
            return False
        readers = []
        for u in node.users:
            if not is_q(u):
                return False
            readers += [r for d in u.users if is_dq(d) for r in d.users]
            if any(not is_dq(d) for d in u.users):
                return False
        return bool(readers) and all(
            r.target == torch.ops.aten.matmul.default
            and _under_qdq(r.args[1]) is node
            and _under_qdq(r.args[0]) is not node
            for r in readers
        )

    def untransposed_rhs(self, arg: object) -> LValue | None:
        """A matmul's right-hand argument read under its folded transpose
        (matmul_rhs_transpose): the [..., N, K] value, or None."""
        src = _under_qdq(arg)
        if isinstance(src, torch.fx.Node) and self.matmul_rhs_transpose(src):
            return self.input_value(src.args[0])
        return None

    def shared_input(self, node: torch.fx.Node, what: str, keep_nhwc: bool = False):
        """(input, quantize users, fused activation, qparams or None) of an op that keeps the
        input's qparams (slice, select, transpose), the input made contiguous unless keep_nhwc.
        PT2E leaves no quantize between two ops that share qparams (e.g. select -> unsqueeze):
        then the output keeps the input's."""
        x = self.input_value(node.args[0])
        if x.nhwc and not keep_nhwc:
            x = self.as_contiguous(x)
        if not self.quantized(node):
            return x, [], None, None
        qs, act, qp = self.output_quant(node, allow_activation=False)
        if not requant.same_qparams(x.scale, x.zero_point, qp):
            raise unsupported(node, f"a {what} that changes qparams")
        return x, qs, act, qp

    def bind_shared(self, node: torch.fx.Node, qs: list, act: Any, out: LValue) -> None:
        """Binds a shared_input op's result: through its quantize users, else to the node."""
        if qs:
            self.bind_output(qs, act, out)
        else:
            self.ctx.env[node] = out

    @property
    def opts(self) -> Any:
        """The run's LoweringOptions."""
        return self.ctx.opts

    def weights(self, node: torch.fx.Node, w_node: object, cout: int | None) -> tuple[Any, Any]:
        """(int8 weight values, one scale per output channel) of a weighted op (cout None:
        the weight's first dim)."""
        return graph.int8_weights(self.ctx.gm, node, w_node, cout)

    def index_value(self, node: torch.fx.Node, arg: object, rows: int) -> int:
        """The value index of a gather's integer indices: an int64/int32 program input as it
        is, or a constant (torch.arange folded) stored as int32 after its values were checked
        against [0, rows)."""
        return context.index_value(self.ctx, node, arg, rows)

    def bias_int32(self, node: torch.fx.Node, bias_node: object, acc_scales: Any, cout: int) -> Any:
        """The bias as int32 at the accumulator scale (zeros when the op has none)."""
        return graph.bias_int32(self.ctx.gm, node, bias_node, acc_scales, cout)

    def kernel_scratch(self, hint: str, op: OpDef, x: LValue, *shapes: tuple[int, ...]) -> int:
        """A planned byte buffer of op.scratch_bytes for NHWC input x (and the other shapes
        the op's scratch rule takes)."""
        assert op.scratch_bytes is not None, op.key
        n, c, h, w = x.sizes
        return context.scratch_buffer(self.ctx, hint, int(op.scratch_bytes((n, h, w, c), *shapes)))

    def scratch(self, hint: str, nbytes: int) -> int:
        """A planned byte buffer of nbytes (a kernel's scratch argument)."""
        return context.scratch_buffer(self.ctx, hint, nbytes)

    def bind(self, node: torch.fx.Node, value: LValue) -> None:
        """`node`'s result is `value` (a float rule's out, or a view of its input)."""
        self.ctx.env[node] = value

    # -- float32 values (the fp32 rules: lower/float_values.py)
    def float_input(self, node: object) -> LValue:
        """The float32 contiguous value of an argument (an int8 one dequantized, cached)."""
        return float_values.float_input(self.ctx, node)

    def float_constant(self, node: torch.fx.Node) -> Any:
        """A float32 weight as a numpy array (a quantized constant dequantized)."""
        return float_values.constant_array(self.ctx, node)

    def bool_constant(self, node: object) -> Any:
        """A constant bool tensor (a mask) as a numpy array; a node that is not one is refused."""
        if not (isinstance(node, torch.fx.Node) and node.op == "get_attr"):
            raise unsupported(self.ctx.current, f"{node} is not a constant tensor (a mask the "
                              "export could fold)")
        return float_values.attr_tensor(self.ctx.gm, node).to(torch.bool).numpy()

    def new_float(self, hint: str, sizes: Sequence[int]) -> LValue:
        return float_values.new_float(self.ctx, hint, sizes)

    def float_out(self, node: torch.fx.Node) -> LValue:
        """A new float32 tensor of `node`'s shape, bound as its result."""
        out = self.new_float(node.name, shape_of(node))
        self.bind(node, out)
        return out

    # -- scalar and list values
    def int_(self, value: int) -> int:
        return self.ctx.b.int_(value)

    def bool_(self, value: bool) -> int:
        return self.ctx.b.bool_(value)

    def double(self, value: float) -> int:
        return self.ctx.b.double(value)

    def none(self) -> int:
        return self.ctx.b.none()

    def string(self, text: str) -> int:
        return self.ctx.b.add(String(text))

    def tensor_list(self, items: Sequence[int]) -> int:
        return self.ctx.b.add(TensorList(list(items)))

    def constant(self, array: Any) -> int:
        """A constant tensor of the array's bytes (identical bytes are shared)."""
        return self.ctx.b.constant(array)

    def constant_value(self, array: Any) -> LValue:
        """A float32 constant as a value a float rule reads (or a quantize folds to int8)."""
        return LValue(self.ctx.b.constant(array), "", list(array.shape), ScalarType.FLOAT)

    def int_list(self, values: Sequence[int]) -> int:
        return self.ctx.b.int_list(list(values))

    # -- the call
    def call(self, op: OpDef, node: torch.fx.Node | None, /, **named: int) -> None:
        """One KernelCall of `op`: `named` are value indices for every schema argument, the
        out included, given in schema order (keywords are evaluated as written, so a value
        created in the argument list keeps its place in the .pte). Positional-only, so an
        argument may be called `self`."""
        names = [a.name for a in op.schema.args]
        if list(named) != names:
            raise LoweringError(f"{op.key}: arguments {list(named)}, the schema's are {names}")
        outs = [a.name for a in op.schema.outs]
        args = [named[n] for n in names if n not in outs]
        if op.call == "multi_out":  # the outs, then one TensorList of them (the returned tuple)
            context.call_multi_out(self.ctx, op.qualified, args, [named[n] for n in outs], node)
        else:
            context.call(self.ctx, op.qualified, args, named[outs[0]], node)
