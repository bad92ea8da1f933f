"""Static memory planner: validity (hypothesis), the lower bound, and known optima.

The lower bound and the exact optima are computed here independently of the
planner: the bound by stepping through every instruction index, the optimum by
exhaustive search over 'gravity-stable' placements (every buffer rests at 0 or
on top of a lifetime-overlapping buffer below it; compacting any plan downward
reaches such a placement without growing the arena).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchmcu.plan import BufferRequest, describe, plan_memory


def aligned(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def brute_lower_bound(reqs: list[BufferRequest], a: int) -> int:
    if not reqs:
        return 0
    lo = min(r.first_use for r in reqs)
    hi = max(r.last_use for r in reqs)
    return max(
        sum(aligned(r.nbytes, a) for r in reqs if r.first_use <= t <= r.last_use)
        for t in range(lo, hi + 1)
    )


def exact_optimum(reqs: list[BufferRequest]) -> int:
    items = [(r.nbytes, r.first_use, r.last_use) for r in reqs if r.nbytes]
    n = len(items)
    best = [sum(s for s, _, _ in items)]

    def live_together(i: int, j: int) -> bool:
        return items[i][1] <= items[j][2] and items[j][1] <= items[i][2]

    def search(placed: dict[int, int], top: int) -> None:
        if top >= best[0]:
            return
        if len(placed) == n:
            best[0] = top
            return
        for i in range(n):
            if i in placed:
                continue
            size = items[i][0]
            spots = {0} | {placed[j] + items[j][0] for j in placed if live_together(i, j)}
            for off in spots:
                if all(
                    not live_together(i, j) or off + size <= placed[j] or placed[j] + items[j][0] <= off
                    for j in placed
                ):
                    placed[i] = off
                    search(placed, max(top, off + size))
                    del placed[i]

    search({}, 0)
    return best[0]


def check_valid(reqs: list[BufferRequest], alignment: int) -> None:
    plan = plan_memory(reqs, alignment=alignment)
    assert set(plan.offsets) == {r.key for r in reqs}
    assert plan.arena_bytes % alignment == 0
    assert plan.lower_bound == brute_lower_bound(reqs, alignment)
    assert plan.arena_bytes >= plan.lower_bound
    for r in reqs:
        off = plan.offsets[r.key]
        assert off % alignment == 0
        if r.nbytes == 0:
            assert off == 0
        assert 0 <= off and off + r.nbytes <= plan.arena_bytes
    live = [r for r in reqs if r.nbytes]
    for i, a in enumerate(live):
        for b in live[i + 1:]:
            if a.first_use <= b.last_use and b.first_use <= a.last_use:
                oa, ob = plan.offsets[a.key], plan.offsets[b.key]
                assert oa + a.nbytes <= ob or ob + b.nbytes <= oa, (a, b, oa, ob)


request_lists = st.lists(
    st.tuples(st.integers(0, 5000), st.integers(0, 40), st.integers(0, 12)),
    max_size=30,
).map(lambda rows: [BufferRequest(f"t{i}", n, f, f + d) for i, (n, f, d) in enumerate(rows)])


@settings(max_examples=150, deadline=None)
@given(request_lists, st.sampled_from([1, 4, 16, 64]))
def test_plan_is_valid(reqs: list[BufferRequest], alignment: int) -> None:
    check_valid(reqs, alignment)


@settings(max_examples=40, deadline=None)
@given(request_lists)
def test_plan_is_deterministic(reqs: list[BufferRequest]) -> None:
    a, b = plan_memory(reqs), plan_memory(list(reqs))
    assert a.offsets == b.offsets and a.arena_bytes == b.arena_bytes


def test_chain_reaches_max_adjacent_pair() -> None:
    # Conv chain: activation i is written by op i and read by op i+1.
    sizes = [3072, 8192, 8192, 2048, 4096, 1024, 1024, 256, 40]
    reqs = [BufferRequest(i, s, i, i + 1) for i, s in enumerate(sizes)]
    plan = plan_memory(reqs)
    assert plan.arena_bytes == max(a + b for a, b in zip(sizes, sizes[1:])) == 16384
    check_valid(reqs, 16)


def test_disjoint_lifetimes_share_everything() -> None:
    reqs = [BufferRequest(i, 100 * (i + 1), 2 * i, 2 * i + 1) for i in range(5)]
    plan = plan_memory(reqs)
    assert plan.arena_bytes == aligned(500, 16)
    assert set(plan.offsets.values()) == {0}


def test_all_overlapping_is_the_sum() -> None:
    reqs = [BufferRequest(i, 33 * (i + 1), 0, 3) for i in range(4)]
    assert plan_memory(reqs).arena_bytes == sum(aligned(33 * (i + 1), 16) for i in range(4))


def test_residual_block_reaches_bound() -> None:
    # x feeds conv1 and the add; y1 -> conv2 -> y2; add(x, y2) -> out.
    reqs = [
        BufferRequest("x", 16384, 0, 3),
        BufferRequest("y1", 16384, 1, 2),
        BufferRequest("y2", 16384, 2, 3),
        BufferRequest("out", 16384, 3, 4),
        BufferRequest("pooled", 64, 4, 5),
    ]
    plan = plan_memory(reqs)
    assert plan.lower_bound == 3 * 16384
    assert plan.arena_bytes == 3 * 16384


def test_zero_size_and_empty() -> None:
    plan = plan_memory([BufferRequest("z", 0, 0, 9)])
    assert plan.offsets == {"z": 0} and plan.arena_bytes == 0 and plan.lower_bound == 0
    assert plan_memory([]).arena_bytes == 0


def test_alignment_rounds_sizes() -> None:
    reqs = [BufferRequest("a", 1, 0, 1), BufferRequest("b", 1, 1, 2)]
    plan = plan_memory(reqs, alignment=16)
    assert plan.arena_bytes == 32 and sorted(plan.offsets.values()) == [0, 16]


def test_matches_exact_optimum_on_small_instances() -> None:
    rng = random.Random(2024)
    for _ in range(150):
        reqs = []
        for i in range(rng.randint(2, 6)):
            first = rng.randint(0, 6)
            reqs.append(BufferRequest(i, rng.randint(1, 4), first, first + rng.randint(0, 3)))
        assert plan_memory(reqs, alignment=1).arena_bytes == exact_optimum(reqs), reqs


@pytest.mark.parametrize(
    "bad, message",
    [
        ([BufferRequest("a", -1, 0, 0)], "nbytes"),
        ([BufferRequest("a", 4, 3, 2)], "first_use 3 is after last_use 2"),
        ([BufferRequest("a", 4, 0, 0), BufferRequest("a", 4, 1, 1)], "duplicate key"),
    ],
)
def test_bad_requests_are_rejected(bad: list[BufferRequest], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        plan_memory(bad)
    assert "'a'" in str(info.value)


def test_bad_alignment_is_rejected() -> None:
    with pytest.raises(ValueError, match="alignment"):
        plan_memory([], alignment=0)


def test_describe_lists_every_buffer() -> None:
    reqs = [BufferRequest("conv_out", 100, 0, 1), BufferRequest("relu_out", 50, 1, 2)]
    text = describe(plan_memory(reqs), reqs)
    assert "lower bound 176" in text and "conv_out" in text and "relu_out" in text
