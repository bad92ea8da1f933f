"""The record our quantizer leaves on each annotated node for later passes.

It lives in ``node.meta["custom"]["torchmcu"]`` as a plain dict (not the
dataclass itself) so it survives ``copy.deepcopy``, pickling and re-export;
the partitioner and the lowering read it back with `read_annotation`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch.fx

from torchmcu.quantize.qdq import is_dq, is_q

META_KEY = "torchmcu"


@dataclass
class TorchmcuAnnotation:
    """What the quantizer decided for one node.

    pattern: the group this node belongs to, e.g. "conv2d+relu6", "add", "max_pool2d".
    role: "anchor" (the compute op of the group), "activation" (a ReLU/clamp fused into the
        anchor's output range, or the `* scale` folded into a matmul's) or "shared" (a
        data-movement op sharing its input's qparams);
        for a node left in float32, "float" (kept there by the float config: set_module_name,
        set_module_type, set_operator) or "fallback" (no int8 pattern takes it).
    folded: operations folded into this node's constants before quantization
        (e.g. ["batch_norm"] for a conv whose BatchNorm was folded into it).
    weight_qscheme: "per_channel" or "per_tensor" for nodes with weights, else None.
    fixed_output_qparams: (scale, zero_point) when the output range is fixed (softmax).
    output_dtype: "int8", or "int16" for a transformer's residual stream (symmetric int16,
        zero point 0: the adds a layer norm reads; quantizer.residual_stream).
    """

    quantized: bool = True
    pattern: str = ""
    role: str = "anchor"
    folded: list[str] = field(default_factory=list)
    weight_qscheme: str | None = None
    fixed_output_qparams: tuple[float, int] | None = None
    output_dtype: str = "int8"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.output_dtype == "int8":  # the records of int8-only graphs stay as they were
            del d["output_dtype"]
        if self.fixed_output_qparams is not None:
            d["fixed_output_qparams"] = list(self.fixed_output_qparams)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TorchmcuAnnotation:
        fixed = d.get("fixed_output_qparams")
        return cls(
            quantized=bool(d.get("quantized", True)),
            pattern=str(d.get("pattern", "")),
            role=str(d.get("role", "anchor")),
            folded=list(d.get("folded", [])),
            weight_qscheme=d.get("weight_qscheme"),
            fixed_output_qparams=(float(fixed[0]), int(fixed[1])) if fixed else None,
            output_dtype=str(d.get("output_dtype", "int8")),
        )


def write_annotation(node: torch.fx.Node, record: TorchmcuAnnotation) -> None:
    """Store `record` on `node`, merging with a `folded` list already there."""
    custom = node.meta.setdefault("custom", {})
    previous = custom.get(META_KEY)
    if previous:
        for item in previous.get("folded", []):
            if item not in record.folded:
                record.folded.append(item)
    custom[META_KEY] = record.to_dict()


def read_annotation(node: torch.fx.Node) -> TorchmcuAnnotation | None:
    """The record on `node`, or None when our quantizer did not annotate it."""
    d = node.meta.get("custom", {}).get(META_KEY)
    return TorchmcuAnnotation.from_dict(d) if d else None


def mark_folded(node: torch.fx.Node, what: str) -> None:
    """Note on `node` (before annotation) that `what` was folded into its constants."""
    custom = node.meta.setdefault("custom", {})
    d = custom.setdefault(META_KEY, {"quantized": False})
    folded = d.setdefault("folded", [])
    if what not in folded:
        folded.append(what)


def record_converted_nodes(gm: torch.fx.GraphModule) -> None:
    """Give the nodes convert_pt2e inserted (quantize/dequantize, their scale/zero-point and
    frozen-weight constants) a record too, so every node of the graph carries one: a q/dq node
    is an int8 boundary (quantized=True, role "qdq"), a constant read only by dequantize nodes
    is a quantized weight (role "constant")."""
    for node in gm.graph.nodes:
        if node.meta.get("custom", {}).get(META_KEY):
            continue
        if is_q(node) or is_dq(node):
            record = TorchmcuAnnotation(quantized=True, pattern=_name(node), role="qdq")
        elif node.op == "get_attr":
            quantized = bool(node.users) and all(is_q(u) or is_dq(u) for u in node.users)
            record = TorchmcuAnnotation(quantized=quantized, pattern="get_attr", role="constant")
        else:
            record = TorchmcuAnnotation(quantized=False, pattern=_name(node), role="float")
        node.meta["custom"] = {**node.meta.get("custom", {}), META_KEY: record.to_dict()}


def _name(node: torch.fx.Node) -> str:
    target = node.target if node.op == "call_function" else node.op
    return str(getattr(target, "__name__", target)).split(".")[0]
