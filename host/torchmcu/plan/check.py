"""Check a finished memory plan against the instructions that use it.

The planner places buffers by the lifetimes the lowering recorded; a lifetime that misses a
use (a tensor read through a tensor list, say) lets another buffer take its bytes while they
are still needed, and the program then computes garbage or is refused by its runtime. This
check does not trust those lifetimes: it walks the instructions in order, lets every
instruction claim the arena bytes of each tensor it uses for that tensor's buffer, and
fails when an instruction uses a buffer whose bytes another buffer has claimed since the
buffer's previous use, or uses two buffers whose bytes overlap. Program inputs are claimed
before the first instruction; program outputs must still hold their bytes after the last.

The walk is the straight-line instruction order: a loop's back edge is not followed (the
lowering keeps everything a loop touches live over the whole loop). Cost: one pass over the
instructions, each use a slice of a byte-owner array the size of the arena.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["PlanError", "TensorUse", "check_plan"]

# Step index of the program inputs' claim (before instruction 0) and of the outputs' check.
_INPUTS = -1


class PlanError(ValueError):
    """A memory plan in which a tensor's bytes are overwritten while it is still in use.

    `instruction` is the index of the instruction that would see the wrong bytes (None when
    the program outputs are the victims)."""

    def __init__(self, message: str, instruction: int | None) -> None:
        super().__init__(message)
        self.instruction = instruction


@dataclass(frozen=True)
class TensorUse:
    """One planned tensor an instruction uses: its buffer and its bytes in the arena."""

    buffer: Hashable
    offset: int
    nbytes: int


def check_plan(
    steps: Sequence[Sequence[TensorUse]],
    inputs: Sequence[TensorUse],
    outputs: Sequence[TensorUse],
    arena_bytes: int,
    name_of: Callable[[int], str],
) -> None:
    """Raise PlanError unless every instruction sees its tensors' bytes as their buffers left
    them. steps[i] lists the tensors instruction i uses (inputs, outputs and scratch alike);
    name_of(i) names instruction i in messages, e.g. "instruction 7 (aten::cat.out)"."""
    owner = np.full(max(int(arena_bytes), 0), -1, dtype=np.int32)
    ids: dict[Hashable, int] = {}
    buffers: list[Hashable] = []
    last_use: list[int] = []  # per buffer id: the step that last claimed its bytes

    def where(step: int) -> str:
        return "the program inputs" if step == _INPUTS else name_of(step)

    def span(u: TensorUse) -> str:
        return f"arena bytes [{u.offset}, {u.offset + u.nbytes})"

    def id_of(u: TensorUse, step: int) -> int:
        if u.offset < 0 or u.offset + u.nbytes > owner.size:
            raise PlanError(
                f"memory plan: {where(step)} uses buffer {u.buffer!r} at {span(u)}, outside "
                f"the arena of {owner.size} bytes",
                None if step == _INPUTS else step,
            )
        if u.buffer not in ids:
            ids[u.buffer] = len(buffers)
            buffers.append(u.buffer)
            last_use.append(step)
        return ids[u.buffer]

    def expect_intact(u: TensorUse, who: str, instruction: int | None) -> None:
        """u's bytes still belong to its buffer (claimed before): else name who took them."""
        me = ids[u.buffer]
        seg = owner[u.offset : u.offset + u.nbytes]
        bad = np.flatnonzero(seg != me)
        if bad.size:
            other = int(seg[bad[0]])
            raise PlanError(
                f"memory plan: {who} buffer {u.buffer!r} ({span(u)}), but "
                f"{where(last_use[other])} put buffer {buffers[other]!r} over byte "
                f"{u.offset + int(bad[0])} after {where(last_use[me])} last used it",
                instruction,
            )

    def claim(uses: Sequence[TensorUse], step: int) -> None:
        for u in uses:
            owner[u.offset : u.offset + u.nbytes] = ids[u.buffer]
            last_use[ids[u.buffer]] = step

    live = [u for u in inputs if u.nbytes > 0]
    for u in live:
        id_of(u, _INPUTS)
    claim(live, _INPUTS)
    for step, uses in enumerate(steps):
        used = [u for u in uses if u.nbytes > 0]
        seen_before = [u for u in used if u.buffer in ids]
        for u in used:
            id_of(u, step)
        for u in seen_before:
            expect_intact(u, f"{name_of(step)} uses", step)
        claim(used, step)
        for u in used:  # two buffers of one instruction must not share bytes
            seg = owner[u.offset : u.offset + u.nbytes]
            bad = np.flatnonzero(seg != ids[u.buffer])
            if bad.size:
                other = buffers[int(seg[bad[0]])]
                raise PlanError(
                    f"memory plan: {name_of(step)} uses buffers {u.buffer!r} ({span(u)}) "
                    f"and {other!r}, which overlap at byte {u.offset + int(bad[0])}",
                    step,
                )
    end = len(steps) - 1
    for u in outputs:
        if u.nbytes > 0:
            if u.buffer not in ids:
                id_of(u, end)
                continue  # an output no instruction writes (a program input passed through)
            expect_intact(u, "the program returns", None)
