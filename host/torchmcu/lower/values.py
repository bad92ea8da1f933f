"""What the lowering knows about each int8 (or float boundary) tensor it created."""

from __future__ import annotations

from dataclasses import dataclass, replace

from torchmcu.pte.program import ScalarType


@dataclass
class LValue:
    """A tensor value of the program and how its memory is laid out.

    sizes are logical (PyTorch order). nhwc: a 4-D tensor stored channels-last
    (dim_order [0,2,3,1]). flatten_chw: a [N, C*H*W] view whose memory is
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
        return [0, 2, 3, 1] if self.nhwc else list(range(self.rank))

    @property
    def layout_free(self) -> bool:
        """NHWC and NCHW memory are identical (C == 1 or H*W == 1)."""
        return self.rank == 4 and (self.sizes[1] == 1 or self.sizes[2] * self.sizes[3] == 1)

    def with_(self, **kw: object) -> LValue:
        return replace(self, **kw)
