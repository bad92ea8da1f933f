"""Our PT2E quantizer: int8 activations, int8 symmetric weights, int32 bias.

Scheme (the CMSIS-NN / TFLite int8 scheme the cortex_m kernels implement):
- activations: asymmetric int8 per tensor, range -128..127;
- weights: symmetric int8, range -127..127 (zero point 0). ExecuTorch's
  CortexMQuantizer leaves the range at the observer default -128..127, which
  makes the scale amax/127.5 and lets +amax round to 128 and clip; -127..127
  keeps the range symmetric (scale amax/127), as TFLite requires for int8
  weights, and every kernel accepts it. Per output channel for conv2d and
  depthwise by default (per tensor on request); per tensor for linear.
- bias: int32, scale = input_scale * weight_scale (per channel when the
  weight is), zero point 0.
- ReLU/ReLU6/hardtanh/clamp after conv/linear/add are fused: the activation's
  output qparams become the anchor's, and the lowering turns the clamp into
  activation_min/max. A positive `* number` after a matmul of two activations
  (attention's scale) is folded the same way: one requantization, no int8 step
  between the matmul and the scale.
- the residual stream of a transformer (an add whose every reader is a layer norm or another
  such add, at least one a layer norm: `residual_stream`) is symmetric int16 (-32767..32767,
  zero point 0), read as it is by those layer norms and adds. In a graph with such a stream
  linear weights are per output channel too. Measured on vit_tiny (64 test inputs, fake-quant
  graph against float): all int8 26.58 dB, int16 stream 28.37, per-channel linear 27.16, both
  29.61, both and the class-token cat int16 29.63 (bench/README.md, issue 18).
- pools and data-movement ops share their input's qparams (the CMSIS pooling
  kernels do not requantize); softmax output is fixed at scale 1/256, zero
  point -128 as CMSIS-NN's arm_softmax_s8 requires.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.fx
from torch.fx import Node
from torchao.quantization.pt2e import (
    HistogramObserver,
    MinMaxObserver,
    PerChannelMinMaxObserver,
)
from torchao.quantization.pt2e.quantizer import (
    DerivedQuantizationSpec,
    FixedQParamsQuantizationSpec,
    QuantizationAnnotation,
    QuantizationSpec,
    QuantizationSpecBase,
    Quantizer,
    SharedQuantizationSpec,
)

from torchmcu.ops import views
from torchmcu.quantize.annotation import META_KEY, TorchmcuAnnotation, write_annotation
from torchmcu.quantize.float_config import FloatConfig
from torchmcu.quantize.fold_bn import fold_batch_norm
from torchmcu.quantize.noops import remove_noops
from torchmcu.quantize.targets import positive_scale_user, resolve_target

_aten = torch.ops.aten

ACT_QMIN, ACT_QMAX = -128, 127
ACT16_QMIN, ACT16_QMAX = -32767, 32767
WEIGHT_QMIN, WEIGHT_QMAX = -127, 127
SOFTMAX_SCALE = 1.0 / 256.0
SOFTMAX_ZERO_POINT = -128

# conv2d, linear: target -> {"kind", "per_channel"} from their definitions
# (torchmcu/ops/defs/conv.py, linear.py); per_channel says whether the weights may be per
# channel (the quantizer's option decides)
WEIGHTED_TARGETS = views.annotations(resolve_target, "weighted")
# add/sub/rsub/mul/div: target -> {"kind"}, from their definitions (torchmcu/ops/defs/elementwise.py)
BINARY_TARGETS = views.annotations(resolve_target, "binary")
# The clamps fused into their producer (relu, relu6, hardtanh, clamp): target -> {}, from
# their patterns (torchmcu/ops/defs/activations.py)
ACTIVATION_TARGETS = views.annotations(resolve_target, "activation")
# pools (output shares the input's qparams): from their definitions (torchmcu/ops/defs/pool.py)
POOL_TARGETS = views.annotations(resolve_target, "anchor")
# means and adaptive average pools: own output qparams when each output averages the whole
# reduced extent, else the input's (torchmcu/ops/defs/pool.py)
MEAN_TARGETS = views.annotations(resolve_target, "mean")
# softmax: from its definition (torchmcu/ops/defs/softmax.py); no params
SOFTMAX_TARGETS = views.annotations(resolve_target, "softmax")
# masked_fill read only by a softmax (attention's mask): from its pattern (ops/defs/softmax.py)
MASKED_SOFTMAX_TARGETS = views.annotations(resolve_target, "masked_softmax")
# Table activations (int8 LUT): target -> {"kind", "fixed_qparams" (None: observed)}, from
# their definitions (torchmcu/ops/defs/activation_table.py)
TABLE_TARGETS = views.annotations(resolve_target, "table")
# Ops that keep their input's qparams (views, pad, slice/select, transpose): target -> {},
# from their patterns (torchmcu/ops/defs/views.py and the definitions they emit)
SHARED_TARGETS = views.annotations(resolve_target, "shared")
# cat / stack (a list of observed inputs, own output qparams): from their patterns
# (torchmcu/ops/defs/quantized_cat.py)
CAT_TARGETS = views.annotations(resolve_target, "cat")
# embedding (a per-row int8 table, unquantized integer indices): from its pattern
# (torchmcu/ops/defs/embedding.py)
EMBEDDING_TARGETS = views.annotations(resolve_target, "embedding")


def _short(target: object) -> str:
    name = getattr(target, "__name__", str(target))
    return name.split(".")[0]


class TorchmcuQuantizer(Quantizer):
    """Annotates a graph captured by torch.export for the cortex_m int8 kernels."""

    def __init__(self, *, per_channel: bool = True, observer: str = "minmax") -> None:
        super().__init__()
        if observer not in ("minmax", "histogram"):
            raise ValueError(f"observer must be 'minmax' or 'histogram', got {observer!r}")
        self.per_channel = per_channel
        act_obs = MinMaxObserver if observer == "minmax" else HistogramObserver
        self.act_qspec = QuantizationSpec(
            dtype=torch.int8,
            quant_min=ACT_QMIN,
            quant_max=ACT_QMAX,
            qscheme=torch.per_tensor_affine,
            observer_or_fake_quant_ctr=act_obs,
        )
        self.act16_qspec = QuantizationSpec(
            dtype=torch.int16,
            quant_min=ACT16_QMIN,
            quant_max=ACT16_QMAX,
            qscheme=torch.per_tensor_symmetric,
            observer_or_fake_quant_ctr=act_obs,
        )
        self.float_config = FloatConfig()
        self._float: set[Node] = set()  # nodes of the graph being annotated kept in float
        self._int16: set[Node] = set()  # its residual stream (int16 outputs)
        self.weight_per_tensor = QuantizationSpec(
            dtype=torch.int8,
            quant_min=WEIGHT_QMIN,
            quant_max=WEIGHT_QMAX,
            qscheme=torch.per_tensor_symmetric,
            observer_or_fake_quant_ctr=MinMaxObserver,
        )
        self.weight_per_channel = QuantizationSpec(
            dtype=torch.int8,
            quant_min=WEIGHT_QMIN,
            quant_max=WEIGHT_QMAX,
            qscheme=torch.per_channel_symmetric,
            ch_axis=0,
            observer_or_fake_quant_ctr=PerChannelMinMaxObserver,
        )
        self.softmax_out = FixedQParamsQuantizationSpec(
            dtype=torch.int8,
            scale=SOFTMAX_SCALE,
            zero_point=SOFTMAX_ZERO_POINT,
            quant_min=ACT_QMIN,
            quant_max=ACT_QMAX,
            qscheme=torch.per_tensor_affine,
        )

    # -- keeping parts in float32 (PT2E-style; config None = not quantized) --------------
    def set_module_name(self, name: str, config: None) -> TorchmcuQuantizer:
        """Keep the submodule `name` (e.g. "head", "features.3") and everything in it in float."""
        self.float_config.add_module_name(name, config)
        return self

    def set_module_type(self, module_type: type, config: None) -> TorchmcuQuantizer:
        """Keep every instance of `module_type` (e.g. nn.LayerNorm) in float."""
        self.float_config.add_module_type(module_type, config)
        return self

    def set_operator(self, op: object, config: None) -> TorchmcuQuantizer:
        """Keep every call of the aten operator `op` (e.g. torch.ops.aten.gelu.default) in float."""
        self.float_config.add_operator(op, config)
        return self

    # -- Quantizer interface -------------------------------------------------------------
    def transform_for_annotation(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        return fold_batch_norm(remove_noops(model))

    def annotate(self, model: torch.fx.GraphModule) -> torch.fx.GraphModule:
        self._float = {n for n in model.graph.nodes if self.float_config.keeps_float(n)}
        self._int16 = residual_stream(model.graph, self._float)
        for node in model.graph.nodes:
            if node.op != "call_function" or _is_annotated(node) or node in self._float:
                continue
            t = node.target
            if t in WEIGHTED_TARGETS:
                self._annotate_weighted(node, **WEIGHTED_TARGETS[t])
            elif t in BINARY_TARGETS:
                self._annotate_binary(node, **BINARY_TARGETS[t])
            elif t in POOL_TARGETS:
                self._annotate_shared(node, _short(t), role="anchor")
            elif t in MEAN_TARGETS:
                self._annotate_mean(node)
            elif t in SOFTMAX_TARGETS:
                self._annotate_softmax(node, **SOFTMAX_TARGETS[t])
            elif t in MASKED_SOFTMAX_TARGETS:
                self._annotate_masked_softmax(node, **MASKED_SOFTMAX_TARGETS[t])
            elif t in TABLE_TARGETS:
                self._annotate_table(node, **TABLE_TARGETS[t])
            elif t in CAT_TARGETS:
                self._annotate_cat(node)
            elif t in EMBEDDING_TARGETS:
                self._annotate_embedding(node)
            elif t in SHARED_TARGETS:
                self._annotate_shared(node, _short(t), role="shared", **SHARED_TARGETS[t])
            elif t in ACTIVATION_TARGETS:
                # A ReLU/clamp not fused into a producer: keeps its input's qparams.
                self._annotate_shared(node, _short(t), role="anchor", **ACTIVATION_TARGETS[t])
        _record_the_rest(model, self._float)
        return model

    def validate(self, model: torch.fx.GraphModule) -> None:
        return None

    # -- helpers ----------------------------------------------------------------------------
    def _fused_activation(self, node: Node) -> Node | None:
        """The ReLU/clamp consuming `node`'s output, when it is the only user."""
        if len(node.users) != 1:
            return None
        user = next(iter(node.users))
        if (user.op == "call_function" and user.target in ACTIVATION_TARGETS
                and not _is_annotated(user) and user not in self._float):
            return user
        return None

    def _fused_scale(self, node: Node) -> Node | None:
        """The positive `* number` consuming a matmul's output, when it is the only user:
        attention's `(q @ k^T) * scale`, folded into the batch matmul's requantization."""
        scaled = positive_scale_user(node)
        if scaled is None or _is_annotated(scaled[0]) or scaled[0] in self._float:
            return None
        return scaled[0]

    def _finish_output(
        self, anchor: Node, pattern: str, extra: TorchmcuAnnotation, act: Node | None = None
    ) -> None:
        """Annotate the output of `anchor` (or of its fused activation, or of `act`)."""
        act = act or self._fused_activation(anchor)
        if act is None:
            _annotation(anchor).output_qspec = self.act_qspec
            extra.pattern = pattern
            write_annotation(anchor, extra)
            return
        pattern = f"{pattern}+{_short(act.target)}"
        extra.pattern = pattern
        write_annotation(anchor, extra)
        act_ann = QuantizationAnnotation(output_qspec=self.act_qspec, _annotated=True)
        act.meta["quantization_annotation"] = act_ann
        write_annotation(act, TorchmcuAnnotation(pattern=pattern, role="activation"))

    def _annotate_weighted(self, node: Node, kind: str, per_channel: bool) -> None:
        """`per_channel`: the op's weights may be quantized per output channel (they are if
        the quantizer is per_channel)."""
        # a transformer's linear layers (a graph with a residual stream): per channel too
        # and a linear reading an embedding's table (a tied LM head): the embedding's per-row
        # scales are its per-output-channel ones, so both read one int8 copy
        per_channel = (
            per_channel or (kind == "linear" and (bool(self._int16) or _embedding_table(node)))
        ) and self.per_channel
        x, w = node.args[0], node.args[1]
        b = node.args[2] if len(node.args) > 2 else None
        if not isinstance(x, Node) or not isinstance(w, Node):
            return
        w_spec = self.weight_per_channel if per_channel else self.weight_per_tensor
        qmap: dict[Node, QuantizationSpecBase | None] = {x: self.act_qspec, w: w_spec}
        if isinstance(b, Node):
            qmap[b] = DerivedQuantizationSpec(
                derived_from=[(x, node), (w, node)],
                derive_qparams_fn=_derive_bias_qparams,
                dtype=torch.int32,
                quant_min=-(2**31),
                quant_max=2**31 - 1,
                qscheme=torch.per_channel_symmetric if per_channel else torch.per_tensor_symmetric,
                ch_axis=0,
            )
        node.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map=qmap, _annotated=True
        )
        self._finish_output(
            node,
            kind,
            TorchmcuAnnotation(weight_qscheme="per_channel" if per_channel else "per_tensor"),
        )

    def _annotate_binary(self, node: Node, kind: str) -> None:
        """Tensor operands observed; a Python number operand (x * 0.5, x + 1, x / 6) is not
        (the lowering makes it an exact int8 constant). div only by a number; neg and abs
        (one operand) the same way."""
        operands = [a for a in node.args[:2] if isinstance(a, Node)]
        if not operands or (kind == "div" and isinstance(node.args[1], Node)):
            return
        qmap: dict[Node, QuantizationSpecBase | None] = {a: _input_spec(self, a) for a in operands}
        if kind in ("maximum", "minimum"):
            # One scale and zero point for both operands and the output (ExecuTorch's
            # cortex_m::maximum/minimum take none): the second operand is requantized to the
            # first's.
            shared = SharedQuantizationSpec((operands[0], node))
            qmap.update({a: shared for a in operands[1:]})
            node.meta["quantization_annotation"] = QuantizationAnnotation(
                input_qspec_map=qmap, output_qspec=shared, _annotated=True
            )
            write_annotation(node, TorchmcuAnnotation(pattern=kind))
            return
        node.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map=qmap, _annotated=True
        )
        if node in self._int16:
            _annotation(node).output_qspec = self.act16_qspec
            write_annotation(node, TorchmcuAnnotation(pattern=kind, output_dtype="int16"))
        elif kind in ("add", "sub", "rsub"):
            self._finish_output(node, kind, TorchmcuAnnotation())
        elif kind == "matmul" and (scale := self._fused_scale(node)) is not None:
            self._finish_output(node, kind, TorchmcuAnnotation(), act=scale)
        else:
            _annotation(node).output_qspec = self.act_qspec
            write_annotation(node, TorchmcuAnnotation(pattern=kind))

    def _annotate_shared(self, node: Node, pattern: str, role: str) -> None:
        x = node.args[0]
        if not isinstance(x, Node):
            return
        node.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map={x: _input_spec(self, x)},
            output_qspec=SharedQuantizationSpec((x, node)),
            _annotated=True,
        )
        write_annotation(node, TorchmcuAnnotation(pattern=pattern, role=role))

    def _annotate_mean(self, node: Node) -> None:
        """A global average (a mean over dims, an adaptive average pool to size 1) of an even
        number of values gets its own output qparams. With the input's, a sum lying exactly
        between two steps is a rounding tie, and ties are where the int8 kernels (half away
        from zero, as CMSIS-NN) and torchao's fake-quant model (half to even, float32) part
        ways; an odd count has no ties, so it keeps the input's qparams and, on the NPU, the
        cheaper AVG_POOL2D. Its own step is also finer: an average spans a far narrower range
        than the values it averages. Adaptive pools to larger sizes average windows and keep
        the input's qparams, as average pools do."""
        x = node.args[0]
        if not isinstance(x, Node):
            return
        if node.target != torch.ops.aten.mean.dim:
            size = node.args[1]
            if any(int(s) != 1 for s in (size if isinstance(size, (list, tuple)) else [size])):
                self._annotate_shared(node, _short(node.target), role="anchor")
                return
        if _averaged_count(x, node) % 2:
            self._annotate_shared(node, _short(node.target), role="anchor")
            return
        self._annotate_binary(node, "mean")

    def _annotate_cat(self, node: Node) -> None:
        """A tensor of the list that only the cat reads, made by an op with observed output
        qparams of its own (a conv, its fused ReLU, an add), shares one observer with the
        result and with the other such tensors: its producer writes the result's qparams and
        the kernel copies it (SqueezeNet's Fire modules, a U-Net's decoder branch), as
        ExecuTorch's quantizer shares them. Every other tensor (read elsewhere too, as a U-Net's
        skip is, or with fixed or inherited qparams) keeps its producer's qparams and the
        kernel requantizes it to the result's: widening a skip's range to the cat's would cost
        its other readers precision (the U-Net: 0.8 dB against float)."""
        items = node.args[0]
        if not isinstance(items, (list, tuple)) or not all(isinstance(x, Node) for x in items):
            return
        owned = [x for x in items if self._cat_may_share(x, items)]
        qmap: dict[Node, QuantizationSpecBase | None] = {x: _input_spec(self, x) for x in items}
        output: QuantizationSpecBase = self.act_qspec
        if owned:
            output = SharedQuantizationSpec((owned[0], node))
            qmap.update({x: output for x in owned[1:]})
        node.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map=qmap, output_qspec=output, _annotated=True
        )
        write_annotation(node, TorchmcuAnnotation(pattern=_short(node.target)))

    def _cat_may_share(self, x: Node, items: Sequence[object]) -> bool:
        """x, once in the cat's list, is read by the cat alone and its producer chose its
        output qparams by an observer of its own (changing them changes nothing else)."""
        if len(x.users) != 1 or sum(1 for y in items if y is x) != 1 or x in self._float:
            return False
        ann = x.meta.get("quantization_annotation")
        return ann is not None and ann.output_qspec is self.act_qspec

    def _annotate_embedding(self, node: Node) -> None:
        """aten.embedding(weight, indices, ...): the table int8 symmetric per row (axis 0: one
        scale per token, which is also a tied LM head's per-output-channel scale; per tensor
        with per_channel=False), the integer indices not quantized, the output observed."""
        w = node.args[0]
        if not isinstance(w, Node):
            return
        spec = self.weight_per_channel if self.per_channel else self.weight_per_tensor
        node.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map={w: spec}, output_qspec=self.act_qspec, _annotated=True
        )
        write_annotation(
            node,
            TorchmcuAnnotation(
                pattern="embedding",
                weight_qscheme="per_channel" if self.per_channel else "per_tensor",
            ),
        )

    def _annotate_softmax(self, node: Node) -> None:
        x = node.args[0]
        if not isinstance(x, Node):
            return
        node.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map={x: self.act_qspec},
            output_qspec=self.softmax_out,
            _annotated=True,
        )
        write_annotation(
            node,
            TorchmcuAnnotation(
                pattern="softmax", fixed_output_qparams=(SOFTMAX_SCALE, SOFTMAX_ZERO_POINT)
            ),
        )

    def _annotate_masked_softmax(self, node: Node, fill_max: float) -> None:
        """masked_fill(x, mask, v) with a constant mask and v <= fill_max (-inf) whose only
        reader is a softmax over the last dim: one masked softmax. x is observed; the filled
        scores are not (they hold -inf); the softmax's output has its fixed qparams. Any other
        masked_fill is left alone (the lowering names it)."""
        x, mask = node.args[0], node.args[1]
        value = node.args[2] if len(node.args) > 2 else None
        soft = next(iter(node.users)) if len(node.users) == 1 else None
        if not (
            isinstance(x, Node)
            and isinstance(mask, Node)
            and mask.op == "get_attr"
            and isinstance(value, (int, float))
            and value <= fill_max
            and soft is not None
            and soft.target in SOFTMAX_TARGETS
            and soft not in self._float
            and not _is_annotated(soft)
            and soft.args[0] is node
            and int(soft.args[1]) % x.meta["val"].dim() == x.meta["val"].dim() - 1
        ):
            return
        node.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map={x: _input_spec(self, x)}, _annotated=True
        )
        write_annotation(node, TorchmcuAnnotation(pattern="masked_softmax"))
        soft.meta["quantization_annotation"] = QuantizationAnnotation(
            output_qspec=self.softmax_out, _annotated=True
        )
        write_annotation(
            soft,
            TorchmcuAnnotation(
                pattern="masked_softmax",
                role="activation",
                fixed_output_qparams=(SOFTMAX_SCALE, SOFTMAX_ZERO_POINT),
            ),
        )

    def _annotate_table(
        self, node: Node, kind: str, fixed_qparams: tuple[float, int] | None
    ) -> None:
        """A table activation: observed input; the output fixed to the function's range
        (sigmoid, tanh, hardsigmoid) or observed (fixed_qparams None: hardswish, silu, ...)."""
        x = node.args[0]
        if not isinstance(x, Node):
            return
        if fixed_qparams is None:
            node.meta["quantization_annotation"] = QuantizationAnnotation(
                input_qspec_map={x: self.act_qspec}, output_qspec=self.act_qspec, _annotated=True
            )
            write_annotation(node, TorchmcuAnnotation(pattern=kind))
            return
        scale, zero_point = fixed_qparams
        out = FixedQParamsQuantizationSpec(
            dtype=torch.int8, scale=scale, zero_point=zero_point, quant_min=ACT_QMIN,
            quant_max=ACT_QMAX, qscheme=torch.per_tensor_affine,
        )
        node.meta["quantization_annotation"] = QuantizationAnnotation(
            input_qspec_map={x: self.act_qspec}, output_qspec=out, _annotated=True
        )
        write_annotation(
            node, TorchmcuAnnotation(pattern=kind, fixed_output_qparams=(scale, zero_point))
        )


_ROLE_OF_KIND = {"placeholder": "input", "output": "output", "get_attr": "constant"}


def _record_the_rest(model: torch.fx.GraphModule, kept: set[Node]) -> None:
    """Every node our patterns did not quantize gets a quantized=False record, so later passes
    (lowering, the NPU partitioner) never have to guess from dtypes. Its role says why: "float"
    for the nodes the float config keeps in float32 (`kept`), "fallback" for an op no int8
    pattern takes (export runs it in float32 with a warning, or refuses it when strict)."""
    for node in model.graph.nodes:
        previous = node.meta.get("custom", {}).get(META_KEY)
        if previous and previous.get("pattern"):
            continue
        pattern = _short(node.target) if node.op == "call_function" else node.op
        role = _ROLE_OF_KIND.get(node.op, "float" if node in kept else "fallback")
        write_annotation(node, TorchmcuAnnotation(quantized=False, pattern=pattern, role=role))


# from the registry: the adds (ops/defs/elementwise.py) and layer norms (ops/defs/layer_norm.py)
_RESIDUAL_ADDS = {t for t, v in BINARY_TARGETS.items() if v["kind"] == "add"}
_LAYER_NORMS = {t for t, v in BINARY_TARGETS.items() if v["kind"] == "layer_norm"}


def residual_stream(graph: torch.fx.Graph, kept: set[Node]) -> set[Node]:
    """The adds of two tensors whose output only layer norms and adds of the set read, at
    least one a layer norm: a transformer's residual stream (pre-norm: x + attn(ln(x)) read
    by the next ln and the next add; post-norm: the add a layer norm follows). Empty for a
    graph with no layer norm, so int8-only models are annotated as before."""

    def quantized_add(n: Node) -> bool:
        return (
            n.op == "call_function"
            and n.target in _RESIDUAL_ADDS
            and n not in kept
            and all(isinstance(a, Node) for a in n.args[:2])
            and n.kwargs.get("alpha", 1) == 1
            and (len(n.args) < 3 or n.args[2] == 1)
        )

    def reads(u: Node, n: Node) -> bool:
        return u.target in _LAYER_NORMS and u.args[0] is n and u not in kept

    stream = {n for n in graph.nodes if quantized_add(n) and any(reads(u, n) for u in n.users)}
    changed = True
    while changed:  # drop an add some other op reads (it would need an int8 copy)
        keep = {n for n in stream if all(reads(u, n) or u in stream for u in n.users)}
        changed, stream = keep != stream, keep
    return stream


def _embedding_table(linear: Node) -> bool:
    """The linear's weight is also read as an embedding's table (a tied LM head)."""
    w = linear.args[1] if len(linear.args) > 1 else None
    return isinstance(w, Node) and any(
        u.target in EMBEDDING_TARGETS and u.args[0] is w for u in w.users
    )


def _averaged_count(x: Node, mean: Node) -> int:
    """How many values of x each output of the global average `mean` averages."""
    shape = [int(d) for d in x.meta["val"].shape]
    if mean.target != torch.ops.aten.mean.dim:  # adaptive pool to size 1: the spatial dims
        return math.prod(shape[2:])
    dims = mean.args[1] if len(mean.args) > 1 else None
    items = [] if dims is None else list(dims) if isinstance(dims, (list, tuple)) else [dims]
    reduced = {int(d) % len(shape) for d in items} if items else set(range(len(shape)))
    return math.prod(shape[d] for d in reduced)


def _input_spec(q: TorchmcuQuantizer, x: Node) -> QuantizationSpecBase:
    """An input produced with fixed qparams (sigmoid, tanh) is read with those qparams, not
    re-observed (that would insert an int8 -> int8 requantization); so is an int16 one of the
    residual stream."""
    ann = x.meta.get("quantization_annotation")
    if x in q._int16 or (
        ann is not None and isinstance(ann.output_qspec, FixedQParamsQuantizationSpec)
    ):
        return SharedQuantizationSpec(x)  # the residual stream is read as int16 as it is
    return q.act_qspec


def _is_annotated(node: Node) -> bool:
    ann = node.meta.get("quantization_annotation")
    return ann is not None and ann._annotated


def _annotation(node: Node) -> QuantizationAnnotation:
    return node.meta["quantization_annotation"]


def _derive_bias_qparams(observers: list) -> tuple[torch.Tensor, torch.Tensor]:
    """Bias scale = input scale * weight scale (per channel when the weight is)."""
    act_obs, weight_obs = observers
    act_scale, _ = act_obs.calculate_qparams()
    weight_scale, _ = weight_obs.calculate_qparams()
    scale = (act_scale * weight_scale).to(torch.float32)
    return scale, torch.zeros_like(scale, dtype=torch.int32)

