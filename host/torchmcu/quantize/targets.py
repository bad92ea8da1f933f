"""The torch op of an aten name as the registry writes it ("aten::slice.Tensor"): torchmcu.ops
is torch-free, so the stages that read its patterns (the quantizer, the lowering) resolve the
names here, and match here the torch patterns both stages must agree on."""

from __future__ import annotations

from typing import Any

import torch

import torchmcu.quantize.pool_values  # noqa: F401  (defines torchmcu::adaptive_max_pool)


def resolve_target(name: str) -> Any:
    """torch.ops.<namespace>.<name>.<overload or default>; LookupError for a name torch lacks."""
    namespace, _, rest = name.partition("::")
    packet_name, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), packet_name)
        return getattr(packet, overload or "default")
    except AttributeError:
        raise LookupError(f"the registry names {name}, which torch does not have") from None


def positive_scale_user(node: torch.fx.Node) -> tuple[torch.fx.Node, float] | None:
    """The `node * number` (a positive number) that is node's only user, with the number:
    attention's `(q @ k^T) * scale`, which the quantizer folds into the matmul's output
    requantization and the lowering then reads back."""
    if len(node.users) != 1:
        return None
    user = next(iter(node.users))
    factor = user.args[1] if len(user.args) > 1 else None
    if (
        user.op == "call_function"
        and user.target == torch.ops.aten.mul.Tensor
        and user.args[0] is node
        and isinstance(factor, (int, float))
        and not isinstance(factor, bool)
        and factor > 0
    ):
        return user, float(factor)
    return None
