"""Per-kernel profiling: the executor's TORCHMCU_PROFILE hook counted by the QEMU plugin.

One small program (conv, depthwise, pool, linear, softmax, with float quantize/dequantize)
is built twice - normal and profiled - with two samples embedded. The split is checked
against what the profile cannot make up: the kernel calls and operator names read from the
.pte by the test itself, the normal image's whole-inference count (the per-kernel counts
plus the executor's remainder equal it plus the marker overhead, which is a few
instructions per mark, as the runner measures with an empty mark pair), and MAC lower bounds
of the heavy kernels.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torchmcu
from torch import nn
from torchmcu import device, native
from torchmcu.device.icount import (
    PROFILE_MARKER,
    IcountError,
    count_instructions,
    profile_instructions,
    symbol_addresses,
)
from torchmcu.pte import reader
from torchmcu.pte.program import KernelCall

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu", "host-gcc")

BOARD = "qemu-an547"
SAMPLES = 3  # the first call of each instruction also checks its arguments; later ones do not
# A mark is the index move, the `bl` and the runner's hook (firmware/runner/profile.c): a counter
# read, two stores of a record and the count: a couple of dozen instructions at most.
MAX_INSTRUCTIONS_PER_MARK = 24


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.dw(torch.relu(self.conv(x))))
        return torch.softmax(self.fc(torch.flatten(self.pool(x), 1)), dim=-1)


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("profile-fw")
    torch.manual_seed(0)
    model = _Net().eval()
    calibration = [(torch.randn(1, 3, 8, 8),) for _ in range(4)]
    exported = torchmcu.export(model, calibration[0], calibration=calibration, board=BOARD)
    pte = Path(exported.save(root / "net"))
    samples = [[np.asarray(x[0].numpy())] for x in calibration[:SAMPLES]]
    blob = device.write_io_blob(native.program_info(exported.pte_bytes), samples)
    out = {"pte": pte}
    for kind, profile in (("plain", False), ("profiled", True)):
        image = device.build(pte, BOARD, root / "build", inputs=blob, profile=profile)
        out[kind] = root / f"{kind}.elf"
        shutil.copy(image.elf, out[kind])
    return out


def _program_calls(pte: Path) -> list[tuple[int, str]]:
    plan = reader.load(pte).execution_plan[0]
    calls = []
    for index, ins in enumerate(plan.chains[0].instructions):
        if isinstance(ins, KernelCall):
            op = plan.operators[ins.op_index]
            calls.append((index, f"{op.name}.{op.overload}"))
    return calls


def test_profile_split_matches_program_and_whole_inference(images: dict[str, Path]) -> None:
    calls = _program_calls(images["pte"])
    names = {name for _, name in calls}
    assert {"cortex_m::quantized_conv2d.out", "cortex_m::softmax.out"} <= names

    plain = count_instructions(images["plain"], BOARD)["regions"]["inference"]
    prof = profile_instructions(images["profiled"], BOARD, images["pte"])
    assert len(plain) == len(prof["inference"]) == len(prof["kernels"]) == SAMPLES

    marks = len(calls) + 1  # one before each kernel call, one after the last instruction
    for run in range(SAMPLES):
        kernels = prof["kernels"][run]
        # One occurrence per kernel call, in program order, with the program's names.
        assert [(k["instruction"], k["op"]) for k in kernels] == calls
        assert all(k["instructions"] > 0 for k in kernels)
        mark = prof["overhead"][run]  # an empty mark pair, measured in the same run
        assert 0 < mark <= MAX_INSTRUCTIONS_PER_MARK
        overhead = prof["inference"][run] - plain[run]
        # The marks are the whole difference to the plain image, give or take the executor's
        # code generation around the call (a few instructions per mark).
        assert abs(overhead - marks * mark) <= 2 * marks
        split = sum(k["instructions"] for k in kernels)
        # The split plus the executor's entry/exit is the profiled inference...
        assert split + prof["executor"][run] == prof["inference"][run]
        # ...and the part outside kernel calls is the executor prologue/epilogue: small.
        assert 0 < prof["executor"][run] < 100
        assert plain[run] - 100 < split <= plain[run] + overhead

    # Heavy kernels: no Cortex-M55 instruction does more than 16 int8 MACs.
    by_op = {k["op"]: k["instructions"] for k in prof["kernels"][0]}
    assert by_op["cortex_m::quantized_conv2d.out"] >= 8 * 8 * 16 * 27 / 16
    assert by_op["cortex_m::quantized_depthwise_conv2d.out"] >= 8 * 8 * 16 * 9 / 16
    # Kernels whose work does not depend on the data count the same in every sample: the
    # conv and linear kernels' prepare steps check their arguments at method init, so the
    # first call is already the steady one (issue 19's first-inference point).
    first, second, third = prof["kernels"]
    for a, b, c in zip(first, second, third, strict=True):
        if "conv" in a["op"] or "linear" in a["op"]:
            assert a["instructions"] == b["instructions"] == c["instructions"], a["op"]


def test_hook_absent_unless_requested(images: dict[str, Path]) -> None:
    assert PROFILE_MARKER not in symbol_addresses(images["plain"])
    assert PROFILE_MARKER in symbol_addresses(images["profiled"])
    with pytest.raises(IcountError, match=r"profile=True"):
        profile_instructions(images["plain"], BOARD, images["pte"])


def test_profile_rejects_another_program(images: dict[str, Path], tmp_path: Path) -> None:
    torch.manual_seed(1)
    other = nn.Sequential(nn.Linear(8, 4)).eval()
    x = torch.randn(1, 8)
    pte = torchmcu.export(other, (x,), calibration=[(x,)], board=BOARD).save(tmp_path / "other")
    with pytest.raises(IcountError, match="built with this program"):
        profile_instructions(images["profiled"], BOARD, pte)
