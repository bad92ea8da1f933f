"""Memory a .pte needs on the device, for sizing the firmware's static buffers at configure time.

The arena is the program's planned arena (non_const_buffer_sizes) followed, 16-byte aligned, by
the kernels' shared scratch: what their prepare steps ask for beyond the scratch the program
planned (0 for torchmcu's programs; ExecuTorch's plan CMSIS-NN's smaller buffers), so every
kernel's Helium path runs. The metadata size comes
from the host build of the same runtime (tm_method_required_memory): every struct it counts
holds pointers, size_t and fixed-width integers, so the 64-bit host figure is an upper bound
of the 32-bit target's. The runner checks the exact figure again on the device.
An image holding several programs runs them one after another in the same buffers, so it
needs the largest arena and metadata of them and room for all of their bytes.

    python -m torchmcu.device.plan model.pte [other.pte ...] --board corstone-300 --format cmake
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from torchmcu.boards import BoardError, get_board

# Exit codes CMake tells apart from Python's own 1 (e.g. torchmcu not installed for it).
EXIT_DOES_NOT_FIT = 3  # valid programs that do not fit the board
EXIT_INVALID_PROGRAM = 4  # a program that cannot be read or verified


class PlanError(ValueError):
    """A program of the image cannot be read or verified."""


@dataclass(frozen=True)
class DevicePlan:
    arena_bytes: int  # planned tensors + shared scratch
    meta_bytes: int
    program_bytes: int
    scratch_bytes: int = 0  # the shared kernel scratch at the arena's end (part of arena_bytes)


def device_plan(pte: bytes) -> DevicePlan:
    """Verify the program with the host runtime and return the buffer sizes the device needs."""
    from torchmcu import native

    info = native.program_info(pte)
    scratch = int(info["scratch_bytes"])
    arena = int(info["arena_bytes"])
    return DevicePlan(
        arena_bytes=_align(arena, 16) + scratch if scratch else arena,
        meta_bytes=_align(int(info["meta_bytes"]), 8),
        program_bytes=len(pte),
        scratch_bytes=scratch,
    )


def combined_plan(plans: list[DevicePlan]) -> DevicePlan:
    """The plan of an image running `plans` in turn: the largest buffers, every program's bytes."""
    return DevicePlan(
        arena_bytes=max(p.arena_bytes for p in plans),
        meta_bytes=max(p.meta_bytes for p in plans),
        program_bytes=sum(p.program_bytes for p in plans),
        scratch_bytes=max(p.scratch_bytes for p in plans),
    )


def board_plan(ptes: list[str | Path], board: str | None) -> DevicePlan:
    """The plan of an image holding `ptes` (each verified), checked against the board's
    memory when a board is given: PlanError naming the file that cannot be read or verified,
    BoardError naming the files and both sizes when they do not fit."""
    plans = []
    for path in ptes:
        try:
            plans.append(device_plan(Path(path).read_bytes()))
        except (OSError, RuntimeError, ValueError) as e:
            raise PlanError(f"{path}: {e}") from e
    plan = combined_plan(plans)
    if board:
        try:
            get_board(board).check_fits(
                arena_bytes=plan.arena_bytes, program_bytes=plan.program_bytes
            )
        except BoardError as e:
            raise BoardError(f"{' + '.join(map(str, ptes))}: {e}") from None
    return plan


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchmcu.device.plan", description=__doc__)
    parser.add_argument("pte", nargs="+", help="the program(s) the image embeds")
    parser.add_argument("--board", help="also check that the arena and program fit this board")
    parser.add_argument("--format", choices=("json", "cmake"), default="json")
    args = parser.parse_args(argv)
    try:
        plan = board_plan(args.pte, args.board)
    except BoardError as e:  # the configure step shows this line alone: the sizes
        print(e, file=sys.stderr)
        return EXIT_DOES_NOT_FIT
    except PlanError as e:
        print(e, file=sys.stderr)
        return EXIT_INVALID_PROGRAM
    if args.format == "cmake":
        print(f"TM_ARENA_BYTES={plan.arena_bytes};TM_META_BYTES={plan.meta_bytes}")
    else:
        print(json.dumps(asdict(plan)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
