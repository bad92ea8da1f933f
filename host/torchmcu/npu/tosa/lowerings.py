"""Which cortex_m operators have a TOSA lowering, and the op family function for each.

The lowering (torchmcu.npu.tosa.lower) calls them; the support rules (support.py) ask which
operators are here, so neither has to import the other. The table stays out of lower.py, which
imports support.py: holding it there would bring the lower <-> support cycle back.
"""

from __future__ import annotations

from collections.abc import Callable

from torchmcu.npu.tosa.graph import Args, BoundArgs, Graph, Tensor
from torchmcu.ops import views
from torchmcu.ops.core import OpDef

# (graph, the call's arguments, reader of its activation arguments) -> the output tensor
Lowering = Callable[[Graph, Args, Callable[[int], Tensor]], Tensor]


def _from_registry(op: OpDef) -> Lowering:
    def lowering(g: Graph, args: Args, read: Callable[[int], Tensor]) -> Tensor:
        return op.npu.lower(g, BoundArgs(op, args), read)  # type: ignore[union-attr,misc]

    return lowering


# A dict (tests monkeypatch it): every operator with a TOSA lowering in its definition.
LOWERINGS: dict[str, Lowering] = views.npu_lowerings(_from_registry)
