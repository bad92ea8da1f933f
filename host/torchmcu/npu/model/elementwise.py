"""NPU_OP_ELEMENTWISE."""

from __future__ import annotations

from torchmcu.npu.model.memory import Memory
from torchmcu.npu.model.state import Registers


def elementwise(regs: Registers, mem: Memory, mode: int) -> int:
    raise NotImplementedError(f"elementwise mode {mode}")
