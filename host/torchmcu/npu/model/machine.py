"""Executing a register command stream: SET commands update the state, OP commands run."""

from __future__ import annotations

from dataclasses import dataclass

from torchmcu.npu.model.conv import convolution
from torchmcu.npu.model.decode import (
    Command,
    CommandStreamError,
    command_stream,
    decode,
    payload_product,
)
from torchmcu.npu.model.dma import dma
from torchmcu.npu.model.elementwise import elementwise, ifm2_shape
from torchmcu.npu.model.featuremap import ofm_shape
from torchmcu.npu.model.memory import SHRAM, BusError, Memory
from torchmcu.npu.model.pool import POOL_REDUCE_SUM, pooling
from torchmcu.npu.model.registers import PRODUCT_U85
from torchmcu.npu.model.state import U85_STORAGE_CHAINED, Registers, StateError, kernel
from torchmcu.npu.model.window import ifm_extent, padding

_NO_OPS = {"NPU_OP_IRQ", "NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT", "NPU_OP_PMU_MASK"}

Shape = tuple[int, int, int]  # (height, width, depth)
Where = tuple[int, int]  # (region, address); region -1 is SHRAM, -2 the U85 chaining buffer
CHAIN = -2


@dataclass(frozen=True)
class TraceEntry:
    offset: int  # word offset of the operation in the command stream
    op: str
    ofm_shape: Shape | None  # None for a DMA
    macs: int
    source: Where | None = None  # IFM base 0 or DMA source
    dest: Where | None = None  # OFM base 0 or DMA destination
    ifm_shape: Shape | None = None  # the part of the IFM the operation read
    ifm2: Where | None = None  # elementwise with a feature-map IFM2 (not a scalar)
    ifm2_shape: Shape | None = None  # as read: 1 along broadcast axes
    dma_bytes: int = 0

    def __str__(self) -> str:
        def at(where: Where | None) -> str:
            if where is not None and where[0] == CHAIN:
                return "chain"
            return "-" if where is None else f"r{where[0]}+0x{where[1]:x}"

        def dims(shape: Shape | None) -> str:
            return "x".join(map(str, shape)) if shape else "-"

        if self.ofm_shape is None:  # a DMA
            move = f"{at(self.source):>12} -> {at(self.dest):<12} {self.dma_bytes} bytes"
            return f"{self.offset:6d}  {self.op:<20} {move}"
        ifm = f"{dims(self.ifm_shape)}@{at(self.source)}"
        if self.ifm2 is not None:
            ifm += f" + {dims(self.ifm2_shape)}@{at(self.ifm2)}"
        ofm = f"{dims(self.ofm_shape)}@{at(self.dest)}"
        return f"{self.offset:6d}  {self.op:<20} {ifm:>24} -> {ofm:<24} {self.macs:>10} MACs"


def execute(
    stream: bytes,
    mem: Memory,
    macs_per_cc: int = 128,
    trace: list[TraceEntry] | None = None,
    product: int = 0,
) -> list[TraceEntry]:
    """Run a register command stream (not the COP1 payload) to NPU_OP_STOP; one entry per op,
    appended to `trace` (given: it keeps the operations before a fault). Operations run one
    after another (the model has no concurrency), so waits are no-ops. `product`:
    CONFIG.product (2: the Ethos-U85's command set and register fields)."""
    regs = Registers(u85=product == PRODUCT_U85)
    trace = [] if trace is None else trace
    for cmd in decode(stream, product):
        if not cmd.name.startswith("NPU_OP_"):
            regs.set(cmd)
            continue
        if cmd.name == "NPU_OP_STOP":
            return trace
        if cmd.name in _NO_OPS:
            continue
        try:
            trace.append(_run(cmd, regs, mem, macs_per_cc))
        except (BusError, StateError, NotImplementedError) as e:
            # name the operation, as the hardware's error state would point at it
            err = type(e)(f"{cmd.name} at command word {cmd.offset}: {e}")
            err.offset = cmd.offset
            raise err from e
    raise CommandStreamError(len(stream) // 4, "the stream ends without NPU_OP_STOP")


def _run(cmd: Command, regs: Registers, mem: Memory, macs_per_cc: int) -> TraceEntry:
    if cmd.name == "NPU_OP_DMA_START":
        moved = dma(regs, mem)
        src, dst = regs.param("NPU_SET_DMA0_SRC_REGION"), regs.param("NPU_SET_DMA0_DST_REGION")
        return TraceEntry(
            cmd.offset,
            cmd.name,
            None,
            0,
            (src & 0xFF, regs.address("NPU_SET_DMA0_SRC")),
            (SHRAM if dst & 0x100 else dst & 0xFF, regs.address("NPU_SET_DMA0_DST")),
            dma_bytes=moved,
        )
    if cmd.name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
        macs = convolution(regs, mem, cmd.name == "NPU_OP_DEPTHWISE", macs_per_cc)
    elif cmd.name == "NPU_OP_POOL":
        macs = pooling(regs, mem, cmd.param)
    elif cmd.name == "NPU_OP_ELEMENTWISE":
        macs = elementwise(regs, mem, cmd.param)
    else:
        raise CommandStreamError(cmd.offset, f"{cmd.name} is not an operation the model runs")
    ifm2, ifm2_shape = _ifm2_read(cmd, regs)
    return TraceEntry(
        cmd.offset,
        cmd.name,
        ofm_shape(regs),
        macs,
        _where(regs, "IFM"),
        _where(regs, "OFM"),
        ifm_shape=_ifm_read(cmd, regs),
        ifm2=ifm2,
        ifm2_shape=ifm2_shape,
    )


def _ifm_read(cmd: Command, regs: Registers) -> Shape:
    """The IFM an operation (that ran) read: elementwise the OFM's shape, else what the
    kernel, stride and padding reach (window.ifm_extent), IFM_DEPTH channels deep (pools
    other than REDUCE_SUM read the OFM's depth)."""
    oh, ow, oc = ofm_shape(regs)
    if cmd.name == "NPU_OP_ELEMENTWISE":
        return oh, ow, oc
    h, w = ifm_extent(kernel(regs), oh, ow, padding(regs))
    pool_copy = cmd.name == "NPU_OP_POOL" and cmd.param != POOL_REDUCE_SUM
    return h, w, oc if pool_copy else regs.param("NPU_SET_IFM_DEPTH_M1") + 1


def _ifm2_read(cmd: Command, regs: Registers) -> tuple[Where | None, Shape | None]:
    """IFM2 base 0 and the shape read (1 along IFM2_BROADCAST's axes); none for a scalar."""
    shape = ifm2_shape(regs, ofm_shape(regs)) if cmd.name == "NPU_OP_ELEMENTWISE" else None
    if shape is None:
        return None, None
    return _where(regs, "IFM2"), shape


def _where(regs: Registers, name: str) -> Where:
    """A feature map's region and base 0; (CHAIN, 0) for the U85's chaining buffer."""
    if regs.u85 and regs.param(f"NPU_SET_{name}_PRECISION") >> 14 == U85_STORAGE_CHAINED:
        return CHAIN, 0
    return regs.param(f"NPU_SET_{name}_REGION"), regs.address(f"NPU_SET_{name}_BASE0")


def run_payload(
    payload: bytes, mem: Memory, macs_per_cc: int = 128, product: int | None = None
) -> list[TraceEntry]:
    """Vela's driver payload (cmd_data, starting COP1) over `mem`; the product (U55/U65 or
    U85) is the payload's optimizer config unless given."""
    if product is None:
        product = payload_product(payload)
    return execute(command_stream(payload), mem, macs_per_cc, product=product)
