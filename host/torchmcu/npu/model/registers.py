"""Ethos-U55/U65 and Ethos-U85 command-stream opcodes.

Source of fact: Vela's register definitions (ethosu/vela/ethos_u55_regs, classes cmd0/cmd1) and
its emitter (register_command_stream_generator.py): a command word holds the opcode in bits 9:0,
bit 14 set marks a cmd1 (a second, 32-bit payload word follows) and bits 31:16 hold a 16-bit
parameter. cmd0 and cmd1 opcodes are separate name spaces.
"""

from __future__ import annotations

OPCODE_MASK = 0x3FF
CMD1_FLAG = 0x4000
# Bits 13:10 and 15 must be zero in a cmd0 (Vela's must_be_zero0 field covers 15:10).
CMD0_MUST_BE_ZERO = 0xFC00
CMD1_MUST_BE_ZERO = 0xBC00

CMD0: dict[int, str] = {
    0x000: "NPU_OP_STOP",
    0x001: "NPU_OP_IRQ",
    0x002: "NPU_OP_CONV",
    0x003: "NPU_OP_DEPTHWISE",
    0x005: "NPU_OP_POOL",
    0x006: "NPU_OP_ELEMENTWISE",
    0x010: "NPU_OP_DMA_START",
    0x011: "NPU_OP_DMA_WAIT",
    0x012: "NPU_OP_KERNEL_WAIT",
    0x013: "NPU_OP_PMU_MASK",
    0x100: "NPU_SET_IFM_PAD_TOP",
    0x101: "NPU_SET_IFM_PAD_LEFT",
    0x102: "NPU_SET_IFM_PAD_RIGHT",
    0x103: "NPU_SET_IFM_PAD_BOTTOM",
    0x104: "NPU_SET_IFM_DEPTH_M1",
    0x105: "NPU_SET_IFM_PRECISION",
    0x107: "NPU_SET_IFM_UPSCALE",
    0x109: "NPU_SET_IFM_ZERO_POINT",
    0x10A: "NPU_SET_IFM_WIDTH0_M1",
    0x10B: "NPU_SET_IFM_HEIGHT0_M1",
    0x10C: "NPU_SET_IFM_HEIGHT1_M1",
    0x10D: "NPU_SET_IFM_IB_END",
    0x10F: "NPU_SET_IFM_REGION",
    0x111: "NPU_SET_OFM_WIDTH_M1",
    0x112: "NPU_SET_OFM_HEIGHT_M1",
    0x113: "NPU_SET_OFM_DEPTH_M1",
    0x114: "NPU_SET_OFM_PRECISION",
    0x115: "NPU_SET_OFM_BLK_WIDTH_M1",
    0x116: "NPU_SET_OFM_BLK_HEIGHT_M1",
    0x117: "NPU_SET_OFM_BLK_DEPTH_M1",
    0x118: "NPU_SET_OFM_ZERO_POINT",
    0x11A: "NPU_SET_OFM_WIDTH0_M1",
    0x11B: "NPU_SET_OFM_HEIGHT0_M1",
    0x11C: "NPU_SET_OFM_HEIGHT1_M1",
    0x11F: "NPU_SET_OFM_REGION",
    0x120: "NPU_SET_KERNEL_WIDTH_M1",
    0x121: "NPU_SET_KERNEL_HEIGHT_M1",
    0x122: "NPU_SET_KERNEL_STRIDE",
    0x123: "NPU_SET_PARALLEL_MODE",
    0x124: "NPU_SET_ACC_FORMAT",
    0x125: "NPU_SET_ACTIVATION",
    0x126: "NPU_SET_ACTIVATION_MIN",
    0x127: "NPU_SET_ACTIVATION_MAX",
    0x128: "NPU_SET_WEIGHT_REGION",
    0x129: "NPU_SET_SCALE_REGION",
    0x12D: "NPU_SET_AB_START",
    0x12F: "NPU_SET_BLOCKDEP",
    0x130: "NPU_SET_DMA0_SRC_REGION",
    0x131: "NPU_SET_DMA0_DST_REGION",
    0x132: "NPU_SET_DMA0_SIZE0",
    0x133: "NPU_SET_DMA0_SIZE1",
    0x180: "NPU_SET_IFM2_BROADCAST",
    0x181: "NPU_SET_IFM2_SCALAR",
    0x185: "NPU_SET_IFM2_PRECISION",
    0x189: "NPU_SET_IFM2_ZERO_POINT",
    0x18A: "NPU_SET_IFM2_WIDTH0_M1",
    0x18B: "NPU_SET_IFM2_HEIGHT0_M1",
    0x18C: "NPU_SET_IFM2_HEIGHT1_M1",
    0x18D: "NPU_SET_IFM2_IB_START",
    0x18F: "NPU_SET_IFM2_REGION",
}

CMD1: dict[int, str] = {
    0x000: "NPU_SET_IFM_BASE0",
    0x001: "NPU_SET_IFM_BASE1",
    0x002: "NPU_SET_IFM_BASE2",
    0x003: "NPU_SET_IFM_BASE3",
    0x004: "NPU_SET_IFM_STRIDE_X",
    0x005: "NPU_SET_IFM_STRIDE_Y",
    0x006: "NPU_SET_IFM_STRIDE_C",
    0x010: "NPU_SET_OFM_BASE0",
    0x011: "NPU_SET_OFM_BASE1",
    0x012: "NPU_SET_OFM_BASE2",
    0x013: "NPU_SET_OFM_BASE3",
    0x014: "NPU_SET_OFM_STRIDE_X",
    0x015: "NPU_SET_OFM_STRIDE_Y",
    0x016: "NPU_SET_OFM_STRIDE_C",
    0x020: "NPU_SET_WEIGHT_BASE",
    0x021: "NPU_SET_WEIGHT_LENGTH",
    0x022: "NPU_SET_SCALE_BASE",
    0x023: "NPU_SET_SCALE_LENGTH",
    0x024: "NPU_SET_OFM_SCALE",
    0x025: "NPU_SET_OPA_SCALE",
    0x026: "NPU_SET_OPB_SCALE",
    0x030: "NPU_SET_DMA0_SRC",
    0x031: "NPU_SET_DMA0_DST",
    0x032: "NPU_SET_DMA0_LEN",
    0x033: "NPU_SET_DMA0_SKIP0",
    0x034: "NPU_SET_DMA0_SKIP1",
    0x080: "NPU_SET_IFM2_BASE0",
    0x081: "NPU_SET_IFM2_BASE1",
    0x082: "NPU_SET_IFM2_BASE2",
    0x083: "NPU_SET_IFM2_BASE3",
    0x084: "NPU_SET_IFM2_STRIDE_X",
    0x085: "NPU_SET_IFM2_STRIDE_Y",
    0x086: "NPU_SET_IFM2_STRIDE_C",
    0x090: "NPU_SET_WEIGHT1_BASE",
    0x091: "NPU_SET_WEIGHT1_LENGTH",
    0x092: "NPU_SET_SCALE1_BASE",
    0x093: "NPU_SET_SCALE1_LENGTH",
}

OPERATIONS = frozenset(name for name in CMD0.values() if name.startswith("NPU_OP_"))

# Parameters that are signed 16-bit values (zero points, clamp bounds, scalar IFM2).
SIGNED_PARAMS = frozenset(
    {
        "NPU_SET_IFM_ZERO_POINT",
        "NPU_SET_IFM2_ZERO_POINT",
        "NPU_SET_OFM_ZERO_POINT",
        "NPU_SET_ACTIVATION_MIN",
        "NPU_SET_ACTIVATION_MAX",
        "NPU_SET_IFM2_SCALAR",
    }
)


# Ethos-U85: the same word format; most opcodes keep their number and name. Sources of fact:
# the opcode list of Linux's accel/ethosu driver (ethosu_device.h, "U85 only" entries) and
# regor's own --verbose-register-command-stream listing, which names every command it writes.
# Gone from the U85: the SHRAM layout registers (IFM_IB_END, IFM2_IB_START, AB_START) and
# PARALLEL_MODE. New: NPU_OP_RESIZE, IFM_BROADCAST, WEIGHT_FORMAT; OPA/OPB_SCALE became
# IFM/IFM2_SCALE; the DMA has source/destination strides instead of skips; four weight streams.
_U55_ONLY0 = {0x10D, 0x12D, 0x18D, 0x123}
CMD0_U85: dict[int, str] = {k: v for k, v in CMD0.items() if k not in _U55_ONLY0} | {
    0x007: "NPU_OP_RESIZE",
    0x108: "NPU_SET_IFM_BROADCAST",
    0x12E: "NPU_SET_WEIGHT_FORMAT",
}
_U55_ONLY1 = {0x025, 0x026, 0x033, 0x034, 0x092, 0x093}
CMD1_U85: dict[int, str] = {k: v for k, v in CMD1.items() if k not in _U55_ONLY1} | {
    0x025: "NPU_SET_IFM_SCALE",
    0x026: "NPU_SET_IFM2_SCALE",
    0x033: "NPU_SET_DMA0_SRC_STRIDE0",
    0x034: "NPU_SET_DMA0_SRC_STRIDE1",
    0x035: "NPU_SET_DMA0_DST_STRIDE0",
    0x036: "NPU_SET_DMA0_DST_STRIDE1",
    0x092: "NPU_SET_WEIGHT2_BASE",
    0x093: "NPU_SET_WEIGHT2_LENGTH",
    0x094: "NPU_SET_WEIGHT3_BASE",
    0x095: "NPU_SET_WEIGHT3_LENGTH",
}

# CONFIG.product (bits 31:28): 0 Ethos-U55, 1 Ethos-U65, 2 Ethos-U85
PRODUCT_U85 = 2


def product(config: int) -> int:
    return (config >> 28) & 0xF


def tables(product: int) -> tuple[dict[int, str], dict[int, str]]:
    """(cmd0, cmd1) opcode names for a CONFIG.product."""
    return (CMD0_U85, CMD1_U85) if product == PRODUCT_U85 else (CMD0, CMD1)
