"""What the lowering knows about each int8 (or float boundary) tensor it created."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from torchmcu.pte.program import ScalarType


@dataclass
class LValue:
    """A tensor value of the program and how its memory is laid out.

    sizes are logical (PyTorch order). nhwc: a 4-D tensor stored channels-last
    (dim_order [0,2,3,1]), or a 3-D [N, C, L] one stored [N, L, C] (dim_order [0,2,1]: a
    conv1d's output, the bytes of its [N, C, 1, L] NHWC view); only the conv1d rules read a
    3-D one as it is (Kit.input_value makes it contiguous for every other rule). flatten_chw: a [N, C*H*W] view whose memory is
    still in H,W,C order (a flatten of an NHWC tensor that was not transposed;
    a following linear absorbs the order into its weight columns).
    """

    vi: int
    buffer: str
    sizes: list[int]
    scalar_type: ScalarType
    scale: float | None = None
    zero_point: int | None = None
    nhwc: bool = False
    flatten_chw: tuple[int, int, int] | None = None

    @property
    def rank(self) -> int:
        return len(self.sizes)

    @property
    def dim_order(self) -> list[int]:
        if not self.nhwc:
            return list(range(self.rank))
        return [0, 2, 1] if self.rank == 3 else [0, 2, 3, 1]

    @property
    def layout_free(self) -> bool:
        """NHWC and NCHW memory are identical (C == 1 or H*W == 1; for 3-D, C == 1 or L == 1)."""
        return self.rank in (3, 4) and (self.sizes[1] == 1 or math.prod(self.sizes[2:]) == 1)

    def with_(self, **kw: object) -> LValue:
        return replace(self, **kw)
