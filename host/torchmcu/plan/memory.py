"""Static activation-arena planner.

Every planned tensor of a program lives at a fixed offset of one arena whose
size the host computes ahead of time (the firmware has no heap). Two buffers
may share bytes only when their lifetimes (inclusive instruction indices) do
not overlap. Finding the smallest arena is NP-hard (dynamic storage
allocation), so we run a handful of cheap greedy placements - several
orderings, best-fit and first-fit gap choice - and keep the smallest result.
The peak of simultaneously live bytes is reported next to it as a lower bound,
so the quality of every plan is visible in the export report.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
import random
from dataclasses import dataclass

# Extra randomised orderings tried when no fixed ordering reaches the lower bound.
_RESTARTS = 32

__all__ = ["BufferRequest", "MemoryPlan", "plan_memory", "lower_bound", "describe"]


@dataclass(frozen=True)
class BufferRequest:
    """One buffer to place: `nbytes` live from `first_use` to `last_use` (inclusive)."""

    key: Hashable
    nbytes: int
    first_use: int
    last_use: int


@dataclass(frozen=True)
class MemoryPlan:
    """Offsets (bytes from the arena start) per key, the arena size and the live-bytes bound."""

    offsets: dict[Hashable, int]
    arena_bytes: int
    lower_bound: int
    strategy: str = ""

    @property
    def ratio(self) -> float:
        """arena / lower bound (1.0 is provably optimal)."""
        return self.arena_bytes / self.lower_bound if self.lower_bound else 1.0


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def _validate(requests: Sequence[BufferRequest], alignment: int) -> None:
    if not isinstance(alignment, int) or alignment <= 0:
        raise ValueError(f"plan_memory: alignment must be a positive integer, got {alignment!r}")
    seen: set[Hashable] = set()
    for i, r in enumerate(requests):
        where = f"plan_memory: request #{i} (key {r.key!r})"
        if r.key in seen:
            raise ValueError(f"{where}: duplicate key")
        seen.add(r.key)
        if not isinstance(r.nbytes, int) or r.nbytes < 0:
            raise ValueError(f"{where}: nbytes must be a non-negative int, got {r.nbytes!r}")
        if r.first_use > r.last_use:
            raise ValueError(f"{where}: first_use {r.first_use} is after last_use {r.last_use}")


def lower_bound(requests: Sequence[BufferRequest], alignment: int = 16) -> int:
    """Largest sum of aligned sizes live at one instruction (no plan can be smaller)."""
    events: list[tuple[int, int, int]] = []
    for r in requests:
        size = _align(r.nbytes, alignment)
        if size:
            # Starts sort before ends at the same index: lifetimes are inclusive.
            events.append((r.first_use, 0, size))
            events.append((r.last_use, 1, size))
    live = peak = 0
    for _, kind, size in sorted(events):
        live += size if kind == 0 else -size
        peak = max(peak, live)
    return peak


@dataclass(frozen=True)
class _Item:
    index: int
    size: int
    first: int
    last: int


def _overlaps(a: _Item, b: _Item) -> bool:
    return a.first <= b.last and b.first <= a.last


def _place(order: Sequence[_Item], best_fit: bool) -> tuple[dict[int, int], int]:
    """Place items in `order`; each goes to a gap among already placed lifetime-overlapping items."""
    placed: list[tuple[_Item, int]] = []
    offsets: dict[int, int] = {}
    arena = 0
    for item in order:
        conflicts = sorted(
            ((off, off + other.size) for other, off in placed if _overlaps(item, other)),
        )
        cursor = 0
        choice: int | None = None
        choice_gap = 0
        for start, end in conflicts:
            gap = start - cursor
            if gap >= item.size:
                if not best_fit:
                    choice = cursor
                    break
                if choice is None or gap < choice_gap:
                    choice, choice_gap = cursor, gap
            cursor = max(cursor, end)
        if choice is None:
            choice = cursor
        offsets[item.index] = choice
        placed.append((item, choice))
        arena = max(arena, choice + item.size)
    return offsets, arena


def _peak_load(items: Sequence[_Item]) -> dict[int, int]:
    """For each item, the largest live total at any instruction inside its lifetime."""
    times = sorted({t for it in items for t in (it.first, it.last)})
    load = {t: 0 for t in times}
    for it in items:
        for t in times:
            if it.first <= t <= it.last:
                load[t] += it.size
    return {it.index: max(load[t] for t in times if it.first <= t <= it.last) for it in items}


def _orderings(items: Sequence[_Item]) -> list[tuple[str, list[_Item]]]:
    peak = _peak_load(items)

    def by(name: str, key: Callable[[_Item], tuple]) -> tuple[str, list[_Item]]:
        return name, sorted(items, key=key)

    return [
        by("size", lambda i: (-i.size, i.first, i.index)),
        by("peak-then-size", lambda i: (-peak[i.index], -i.size, i.first, i.index)),
        by("lifetime", lambda i: (-(i.last - i.first), -i.size, i.index)),
        by("area", lambda i: (-i.size * (i.last - i.first + 1), i.index)),
        by("first-use", lambda i: (i.first, -i.size, i.index)),
    ]


def plan_memory(requests: Sequence[BufferRequest], alignment: int = 16) -> MemoryPlan:
    """Give every request an aligned offset so that buffers live at the same time never overlap."""
    _validate(requests, alignment)
    items = [
        _Item(i, _align(r.nbytes, alignment), r.first_use, r.last_use)
        for i, r in enumerate(requests)
        if r.nbytes > 0
    ]
    bound = lower_bound(requests, alignment)
    best: tuple[int, str, dict[int, int]] | None = None
    if items:
        for name, order in _orderings(items):
            for best_fit in (True, False):
                offsets, arena = _place(order, best_fit)
                if best is None or arena < best[0]:
                    best = (arena, f"{name}/{'best' if best_fit else 'first'}-fit", offsets)
                if arena == bound:
                    break
            if best is not None and best[0] == bound:
                break
    if best is not None and best[0] > bound:
        # Seeded restarts: sizes jittered by up to +-50% reorder near-equal buffers.
        rng = random.Random(len(items))
        for attempt in range(_RESTARTS):
            jitter = {i.index: i.size * rng.uniform(0.5, 1.5) for i in items}
            order = sorted(items, key=lambda i: (-jitter[i.index], i.index))
            offsets, arena = _place(order, best_fit=attempt % 2 == 0)
            if arena < best[0]:
                best = (arena, f"jittered-size#{attempt}", offsets)
                if arena == bound:
                    break
    arena, strategy, by_index = best if best is not None else (0, "empty", {})
    offsets = {r.key: by_index.get(i, 0) for i, r in enumerate(requests)}
    return MemoryPlan(offsets=offsets, arena_bytes=arena, lower_bound=bound, strategy=strategy)


def describe(plan: MemoryPlan, requests: Sequence[BufferRequest]) -> str:
    """A fixed-width table of the plan, sorted by offset, for export reports."""
    rows = sorted(requests, key=lambda r: (plan.offsets[r.key], r.first_use))
    names = [str(r.key) for r in rows]
    width = max([len("buffer"), *map(len, names)])
    lines = [
        f"arena {plan.arena_bytes} bytes, lower bound {plan.lower_bound} bytes "
        f"(ratio {plan.ratio:.3f}, strategy {plan.strategy})",
        f"{'buffer':<{width}}  {'offset':>8}  {'bytes':>8}  lifetime",
    ]
    for name, r in zip(names, rows):
        lines.append(
            f"{name:<{width}}  {plan.offsets[r.key]:>8}  {r.nbytes:>8}  [{r.first_use}, {r.last_use}]"
        )
    return "\n".join(lines)
