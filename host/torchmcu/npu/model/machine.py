"""Executing a register command stream: SET commands update the state, OP commands run."""

from __future__ import annotations

from dataclasses import dataclass

from torchmcu.npu.model.conv import convolution
from torchmcu.npu.model.decode import Command, CommandStreamError, command_stream, decode
from torchmcu.npu.model.dma import dma
from torchmcu.npu.model.elementwise import elementwise
from torchmcu.npu.model.featuremap import ofm_shape
from torchmcu.npu.model.memory import SHRAM, BusError, Memory
from torchmcu.npu.model.pool import pooling
from torchmcu.npu.model.state import Registers, StateError

_NO_OPS = {"NPU_OP_IRQ", "NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT", "NPU_OP_PMU_MASK"}


@dataclass(frozen=True)
class TraceEntry:
    offset: int  # word offset of the operation in the command stream
    op: str
    ofm_shape: tuple[int, int, int] | None  # (height, width, depth); None for a DMA
    macs: int
    source: tuple[int, int] | None = None  # (region, address): IFM base 0 or DMA source
    dest: tuple[int, int] | None = None  # OFM base 0 or DMA destination (region -1: SHRAM)

    def __str__(self) -> str:
        def at(where: tuple[int, int] | None) -> str:
            return "-" if where is None else f"r{where[0]}+0x{where[1]:x}"

        shape = "x".join(map(str, self.ofm_shape)) if self.ofm_shape else "-"
        return (
            f"{self.offset:6d}  {self.op:<20} {at(self.source):>12} -> {at(self.dest):<12} "
            f"{shape:>12} {self.macs:>10} MACs"
        )


def execute(stream: bytes, mem: Memory, macs_per_cc: int = 128) -> list[TraceEntry]:
    """Run a register command stream (not the COP1 payload) to NPU_OP_STOP; one entry per op.
    Operations run one after another (the model has no concurrency), so waits are no-ops."""
    regs = Registers()
    trace: list[TraceEntry] = []
    for cmd in decode(stream):
        if not cmd.name.startswith("NPU_OP_"):
            regs.set(cmd)
            continue
        if cmd.name == "NPU_OP_STOP":
            return trace
        if cmd.name in _NO_OPS:
            continue
        try:
            trace.append(_run(cmd, regs, mem, macs_per_cc))
        except (BusError, StateError) as e:
            # name the operation, as the hardware's error state would point at it
            err = type(e)(f"{cmd.name} at command word {cmd.offset}: {e}")
            err.offset = cmd.offset
            raise err from e
    raise CommandStreamError(len(stream) // 4, "the stream ends without NPU_OP_STOP")


def _run(cmd: Command, regs: Registers, mem: Memory, macs_per_cc: int) -> TraceEntry:
    if cmd.name == "NPU_OP_DMA_START":
        dma(regs, mem)
        src, dst = regs.param("NPU_SET_DMA0_SRC_REGION"), regs.param("NPU_SET_DMA0_DST_REGION")
        return TraceEntry(
            cmd.offset,
            cmd.name,
            None,
            0,
            (src & 0xFF, regs.address("NPU_SET_DMA0_SRC")),
            (SHRAM if dst & 0x100 else dst & 0xFF, regs.address("NPU_SET_DMA0_DST")),
        )
    if cmd.name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
        macs = convolution(regs, mem, cmd.name == "NPU_OP_DEPTHWISE", macs_per_cc)
    elif cmd.name == "NPU_OP_POOL":
        macs = pooling(regs, mem, cmd.param)
    elif cmd.name == "NPU_OP_ELEMENTWISE":
        macs = elementwise(regs, mem, cmd.param)
    else:
        raise CommandStreamError(cmd.offset, f"{cmd.name} is not an operation the model runs")
    return TraceEntry(
        cmd.offset,
        cmd.name,
        ofm_shape(regs),
        macs,
        (regs.param("NPU_SET_IFM_REGION"), regs.address("NPU_SET_IFM_BASE0")),
        (regs.param("NPU_SET_OFM_REGION"), regs.address("NPU_SET_OFM_BASE0")),
    )


def run_payload(payload: bytes, mem: Memory, macs_per_cc: int = 128) -> list[TraceEntry]:
    """Vela's driver payload (cmd_data, starting COP1) over `mem`."""
    return execute(command_stream(payload), mem, macs_per_cc)
