"""torchmcu.plan.check: a finished plan is checked against the instructions, not against the
lifetimes it was made from. Hand-made plans: one valid, and one of each way bytes can be lost
(overwritten between two uses, shared inside one instruction, outside the arena, an output
clobbered after its last write, an input clobbered before its first read)."""

from __future__ import annotations

import pytest
from torchmcu.plan import BufferRequest, plan_memory
from torchmcu.plan.check import PlanError, TensorUse, check_plan


def _name(i: int) -> str:
    return f"instruction {i} (op{i})"


def U(buffer: str, offset: int, nbytes: int) -> TensorUse:
    return TensorUse(buffer, offset, nbytes)


def test_a_plan_from_the_planner_passes() -> None:
    # a -> b -> c, a chain: a and c may share bytes, b may not share with either
    requests = [
        BufferRequest("a", 64, 0, 1),
        BufferRequest("b", 32, 1, 2),
        BufferRequest("c", 64, 2, 3),
    ]
    plan = plan_memory(requests)
    at = {r.key: U(r.key, plan.offsets[r.key], r.nbytes) for r in requests}
    assert plan.offsets["a"] == plan.offsets["c"]  # the case the check must allow
    steps = [[at["a"]], [at["a"], at["b"]], [at["b"], at["c"]], [at["c"]]]
    check_plan(steps, [at["a"]], [at["c"]], plan.arena_bytes, _name)


def test_bytes_taken_between_two_uses_name_the_reader_and_the_writer() -> None:
    steps = [[U("x", 0, 16), U("t", 16, 16)], [U("y", 16, 8)], [U("t", 16, 16), U("z", 32, 16)]]
    with pytest.raises(PlanError) as err:
        check_plan(steps, [U("x", 0, 16)], [U("z", 32, 16)], 48, _name)
    assert err.value.instruction == 2
    assert str(err.value) == (
        "memory plan: instruction 2 (op2) uses buffer 't' (arena bytes [16, 32)), but "
        "instruction 1 (op1) put buffer 'y' over byte 16 after instruction 0 (op0) last used it"
    )


def test_two_buffers_of_one_instruction_must_not_overlap() -> None:
    # cat's bug: an input and the output at the same offset, in one instruction
    steps = [[U("a", 0, 32)], [U("a", 0, 32), U("out", 16, 64)]]
    with pytest.raises(
        PlanError,
        match=r"instruction 1 \(op1\) uses buffers 'a' \(arena bytes "
        r"\[0, 32\)\) and 'out', which overlap at byte 16",
    ) as err:
        check_plan(steps, [], [U("out", 16, 64)], 80, _name)
    assert err.value.instruction == 1


def test_views_of_one_buffer_share_its_bytes() -> None:
    # a flatten: two tensor values of one buffer in one instruction and across instructions
    steps = [[U("x", 0, 24), U("x", 0, 24)], [U("x", 0, 12), U("y", 32, 12)]]
    check_plan(steps, [U("x", 0, 24)], [U("y", 32, 12)], 48, _name)


def test_a_tensor_outside_the_arena() -> None:
    with pytest.raises(
        PlanError,
        match=r"instruction 0 \(op0\) uses buffer 'big' at arena bytes "
        r"\[32, 96\), outside the arena of 64 bytes",
    ):
        check_plan([[U("big", 32, 64)]], [], [], 64, _name)


def test_an_output_overwritten_after_its_last_write() -> None:
    steps = [[U("x", 0, 8), U("out", 8, 8)], [U("tmp", 8, 8)]]
    with pytest.raises(PlanError) as err:
        check_plan(steps, [U("x", 0, 8)], [U("out", 8, 8)], 16, _name)
    assert err.value.instruction is None
    assert str(err.value).startswith(
        "memory plan: the program returns buffer 'out' (arena bytes [8, 16)), but instruction 1"
    )


def test_an_input_overwritten_before_it_is_read() -> None:
    steps = [[U("s", 0, 8)], [U("x", 0, 8), U("y", 8, 8)]]
    with pytest.raises(
        PlanError,
        match=r"instruction 1 \(op1\) uses buffer 'x' .* but "
        r"instruction 0 \(op0\) put buffer 's' over byte 0 after the program "
        r"inputs last used it",
    ):
        check_plan(steps, [U("x", 0, 8)], [U("y", 8, 8)], 16, _name)


def test_empty_tensors_take_no_bytes() -> None:
    check_plan([[U("e", 64, 0), U("a", 0, 8)]], [], [U("a", 0, 8)], 8, _name)
