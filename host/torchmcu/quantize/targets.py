"""The torch op of an aten name as the registry writes it ("aten::slice.Tensor"): torchmcu.ops
is torch-free, so the stages that read its patterns (the quantizer, the lowering) resolve the
names here."""

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
