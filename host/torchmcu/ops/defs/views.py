"""The aten ops that only re-view bytes: flatten, view, reshape, _unsafe_view, squeeze,
unsqueeze, unflatten, and the no-ops of an eval graph: dropout (inference: the identity), alias, clone,
contiguous and detach.

The no-ops (params["noop"]) never reach the quantizer: quantize/noops.py removes them from the
exported graph first, so they cannot stand between a conv and its ReLU (breaking the fusion) or
leave an op without qparams. `noop(arg, node)` says whether this node is one (a dropout only
with train=False); their lowering rule below stays for graphs quantized by other means.

They emit no kernel of their own: the quantizer gives them their input's qparams (annotate
"shared") and the int8 rule aliases the input's bytes under the new sizes, a
cortex_m::transpose first when the bytes are NHWC and the new sizes need them contiguous
(lower/layout.py's as_contiguous). The rule gets the lowering Kit (torchmcu/lower/kit.py) as
`k`, `node` is a torch.fx.Node (torch-free here). The fp32 rule for the same targets is
lower/rules_float.py's until the portable family moves.
"""

from __future__ import annotations

from typing import Any

from torchmcu.ops.core import Annotate, pattern

VIEWS = (
    "aten::flatten.using_ints",
    "aten::view.default",
    "aten::reshape.default",
    "aten::_unsafe_view.default",
    "aten::squeeze.dim",
    "aten::squeeze.dims",
    "aten::unsqueeze.default",
    "aten::unflatten.int",
)
# The ops that are the identity on values in an eval graph (their first argument is the result)
NOOPS = (
    "aten::alias.default",
    "aten::clone.default",
    "aten::contiguous.default",
    "aten::detach.default",
    "aten::detach_.default",
    "aten::lift_fresh_copy.default",
)
# Dropout and its variants: the identity unless train=True
DROPOUTS = tuple(
    f"aten::{name}{inplace}.default"
    for name in ("dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")
    for inplace in ("", "_")
)


def _always(arg: Any, node: Any) -> bool:
    return True


def _not_training(arg: Any, node: Any) -> bool:
    return arg(node, "train", False) is False


def lower_view(k: Any, node: Any) -> None:
    """flatten / view / reshape / squeeze / dropout: an alias of the same bytes."""
    x = k.input_value(node.args[0])
    out_shape = k.shape_of(node)
    if not k.quantized(node):
        # PT2E puts no quantize between ops that share qparams (select -> reshape -> add)
        same = out_shape == x.sizes
        k.bind_shared(
            node, [], None, x if same else k.alias(k.as_contiguous(x), out_shape, nhwc=False)
        )
        return
    qs, act, qp = k.output_quant(node, allow_activation=False)
    if not k.same_qparams(x.scale, x.zero_point, qp):
        raise k.unsupported(node, "a reshape that changes qparams")
    if out_shape == x.sizes:
        out = x
    elif x.nhwc and not x.layout_free and len(out_shape) == 2 and out_shape[0] == x.sizes[0]:
        # flatten(1) of NHWC bytes: keep the bytes, remember their (h, w, c) order.
        out = k.alias(x, out_shape, nhwc=False, flatten_chw=tuple(x.sizes[1:]))
    else:
        out = k.alias(k.as_contiguous(x), out_shape, nhwc=False)
    k.bind_output(qs, act, out)


pattern(*VIEWS, annotate=Annotate("shared"), lower=lower_view)
pattern(*NOOPS, annotate=Annotate("shared"), lower=lower_view, params={"noop": _always})
pattern(*DROPOUTS, annotate=Annotate("shared"), lower=lower_view, params={"noop": _not_training})
