"""NPU_OP_DMA_START: a linear copy between regions (Vela moves weights and feature maps)."""

from __future__ import annotations

import numpy as np

from torchmcu.npu.model.memory import SHRAM, Memory
from torchmcu.npu.model.state import Registers


def dma(regs: Registers, mem: Memory) -> int:
    """DMA0_SRC/DST_REGION: region 7:0, internal 8 (the destination is SHRAM: Vela loads
    activation LUTs so), stride mode 10:9 (0 = 1-D). Returns the bytes moved."""
    src_p, dst_p = regs.param("NPU_SET_DMA0_SRC_REGION"), regs.param("NPU_SET_DMA0_DST_REGION")
    if regs.u85 and ((src_p | dst_p) & 0xF000 or regs.param("NPU_SET_DMA0_SIZE0", 1) != 1):
        # U85: idx_mode (gather/scatter) and 2-D/3-D transfers are not modelled
        raise NotImplementedError("U85 indexed or multi-dimensional DMA is not modelled")
    if (src_p >> 9) & 3 or (dst_p >> 9) & 3:
        raise NotImplementedError("2-D/3-D DMA stride modes are not modelled")
    length = regs.address("NPU_SET_DMA0_LEN")
    src, dst = regs.address("NPU_SET_DMA0_SRC"), regs.address("NPU_SET_DMA0_DST")
    data = mem.read_bytes(src_p & 0xFF, src, length, "DMA source")
    mem.write(
        SHRAM if dst_p & 0x100 else dst_p & 0xFF,
        np.arange(dst, dst + length),
        1,
        np.frombuffer(data, np.uint8),
        "DMA destination",
    )
    return length
