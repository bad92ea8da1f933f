/*
 * Ethos-U register offsets and bit fields used by our driver (ethos_u_driver.c).
 *
 * Written from Arm's public description of the Ethos-U55/U65/U85 programming
 * interface (the register maps of Arm's ethos-u-core-driver and of the upstream
 * Linux accel driver). Only the registers the driver touches are listed. U55 and
 * U65 share one map; U85 keeps the control block (ID..REGIONCFG) and the base
 * pointers at the same offsets but replaces AXI_LIMIT0..3 by MEM_ATTR0..3 and
 * AXI_SRAM/AXI_EXT.
 */
#ifndef TORCHMCU_ETHOS_U_REGS_H
#define TORCHMCU_ETHOS_U_REGS_H

/* Control block, all products. */
#define TM_NPU_ID 0x000u
#define TM_NPU_STATUS 0x004u
#define TM_NPU_CMD 0x008u
#define TM_NPU_RESET 0x00Cu
#define TM_NPU_QBASE 0x010u    /* command stream address, bits 31:0 */
#define TM_NPU_QBASE_HI 0x014u /* bits 39:32 (U65, U85) */
#define TM_NPU_QREAD 0x018u    /* byte offset the NPU has read up to */
#define TM_NPU_QCONFIG 0x01Cu  /* memory configuration index of the command stream */
#define TM_NPU_QSIZE 0x020u    /* command stream size in bytes */
#define TM_NPU_PROT 0x024u     /* active privilege/security level */
#define TM_NPU_CONFIG 0x028u
#define TM_NPU_REGIONCFG 0x03Cu /* 2 bits per region: memory configuration index */

/* U55/U65: four AXI limit registers (two per AXI master). */
#define TM_NPU_AXI_LIMIT(n) (0x040u + 4u * (n))
/* U85: four memory attribute entries, then the SRAM and external AXI port limits. */
#define TM_NPU_MEM_ATTR(n) (0x040u + 4u * (n))
#define TM_NPU_AXI_SRAM 0x050u
#define TM_NPU_AXI_EXT 0x054u

/* Base pointers 0..7: a 64-bit register pair each. */
#define TM_NPU_BASEP(n) (0x080u + 8u * (n))
#define TM_NPU_BASEP_HI(n) (0x084u + 8u * (n))
#define TM_NPU_MAX_REGIONS 8u

/* ID */
#define TM_NPU_ID_ARCH_MAJOR(id) (((id) >> 28) & 0xFu) /* 1: U55/U65, 2: U85 */
#define TM_NPU_ID_ARCH_MINOR(id) (((id) >> 20) & 0xFFu)
#define TM_NPU_ID_ARCH_PATCH(id) (((id) >> 16) & 0xFu)

/* CONFIG */
#define TM_NPU_CONFIG_MACS_LOG2(c) ((c) & 0xFu)
#define TM_NPU_CONFIG_CMD_STREAM_VERSION(c) (((c) >> 4) & 0xFu)
#define TM_NPU_CONFIG_SHRAM_KB(c) (((c) >> 8) & 0xFFu) /* U55/U65 only */
#define TM_NPU_CONFIG_CUSTOM_DMA(c) (((c) >> 27) & 0x1u)
#define TM_NPU_CONFIG_PRODUCT(c) (((c) >> 28) & 0xFu) /* 0: U55, 1: U65, 2: U85 */

/* STATUS */
#define TM_NPU_STATUS_RUNNING (1u << 0)
#define TM_NPU_STATUS_IRQ_RAISED (1u << 1)
#define TM_NPU_STATUS_BUS_ERROR (1u << 2)      /* AXI abort; cleared only by reset */
#define TM_NPU_STATUS_RESETTING (1u << 3)      /* only STATUS is readable meanwhile */
#define TM_NPU_STATUS_PARSE_ERROR (1u << 4)    /* command stream parse error; reset clears */
#define TM_NPU_STATUS_CMD_END (1u << 5)        /* command stream end reached */
#define TM_NPU_STATUS_PMU_IRQ (1u << 6)
#define TM_NPU_STATUS_WD_FAULT (1u << 7)       /* weight decoder fault (U55/U65) */
#define TM_NPU_STATUS_ECC_FAULT (1u << 8)
#define TM_NPU_STATUS_BRANCH_FAULT (1u << 9)   /* U85 */
#define TM_NPU_STATUS_FAULT_IFACE_SHIFT 11
#define TM_NPU_STATUS_FAULT_CHANNEL_SHIFT 12   /* 4 bits, meaningful on a bus error */

/* CMD (reads back as the last command written) */
#define TM_NPU_CMD_RUN (1u << 0)
#define TM_NPU_CMD_CLEAR_IRQ (1u << 1)
#define TM_NPU_CMD_CLOCK_Q (1u << 2)
#define TM_NPU_CMD_POWER_Q (1u << 3)
#define TM_NPU_CMD_KEEP_MASK (TM_NPU_CMD_CLOCK_Q | TM_NPU_CMD_POWER_Q)

/* RESET (pending levels) and PROT (active levels): same two bits. */
#define TM_NPU_LEVEL_PRIVILEGED (1u << 0) /* CPL: 1 privileged, 0 user */
#define TM_NPU_LEVEL_NON_SECURE (1u << 1) /* CSL: 1 non-secure, 0 secure */

/* U55/U65 AXI_LIMITn fields */
#define TM_NPU_AXI_LIMIT_READS_M1_SHIFT 16
#define TM_NPU_AXI_LIMIT_WRITES_M1_SHIFT 24
/* U85 AXI_SRAM/AXI_EXT fields */
#define TM_NPU_AXI_PORT_READS_M1_SHIFT 0
#define TM_NPU_AXI_PORT_WRITES_M1_SHIFT 8
#define TM_NPU_AXI_PORT_BEATS_SHIFT 16
/* U85 MEM_ATTRn fields */
#define TM_NPU_MEM_ATTR_EXT_PORT (1u << 2)

#endif
