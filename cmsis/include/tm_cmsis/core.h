/*
 * torchmcu's own Cortex-M core layer: the few architectural registers the
 * firmware uses (Armv8-M / Armv8.1-M system control space), as fixed-address
 * volatile structs. Only what we touch is named; reserved gaps are padding.
 * Addresses and bit positions follow the Armv8-M Architecture Reference Manual.
 */
#ifndef TM_CMSIS_CORE_H
#define TM_CMSIS_CORE_H

#include <stdint.h>

#define TM_REG volatile uint32_t

/* System Control Block, 0xE000ED00. */
typedef struct {
  TM_REG CPUID;   /* 0x00 */
  TM_REG ICSR;    /* 0x04 */
  TM_REG VTOR;    /* 0x08 */
  TM_REG AIRCR;   /* 0x0C */
  TM_REG SCR;     /* 0x10 */
  TM_REG CCR;     /* 0x14 */
  volatile uint8_t SHPR[12]; /* 0x18 system handler priorities 4..15 */
  TM_REG SHCSR;   /* 0x24 */
  TM_REG CFSR;    /* 0x28 MMFSR | BFSR << 8 | UFSR << 16 */
  TM_REG HFSR;    /* 0x2C */
  TM_REG DFSR;    /* 0x30 */
  TM_REG MMFAR;   /* 0x34 */
  TM_REG BFAR;    /* 0x38 */
  TM_REG AFSR;    /* 0x3C */
  uint32_t reserved0[18]; /* 0x40..0x87 feature registers, unused */
  TM_REG CPACR;   /* 0x88 */
  TM_REG NSACR;   /* 0x8C */
  uint32_t reserved1[21]; /* 0x90..0xE3 */
  TM_REG SFSR;    /* 0xE4 secure fault status (Security Extension) */
  TM_REG SFAR;    /* 0xE8 */
  uint32_t reserved2[4]; /* 0xEC..0xFB */
  TM_REG DEMCR;   /* 0xFC debug exception and monitor control */
} tm_scb_regs;

#define TM_SCB ((tm_scb_regs *)0xE000ED00u)

/* SCB bits. */
#define TM_SCB_CCR_DIV_0_TRP (1u << 4)
#define TM_SCB_SHCSR_MEMFAULTENA (1u << 16)
#define TM_SCB_SHCSR_BUSFAULTENA (1u << 17)
#define TM_SCB_SHCSR_USGFAULTENA (1u << 18)
#define TM_SCB_SHCSR_SECUREFAULTENA (1u << 19)
#define TM_SCB_HFSR_FORCED (1u << 30)
#define TM_SCB_CFSR_MMARVALID (1u << 7)
#define TM_SCB_CFSR_BFARVALID (1u << 15)
/* CPACR: CP10/CP11 (FPU and MVE) full access, bits 20..23. */
#define TM_SCB_CPACR_CP10_CP11_FULL (0xFu << 20)
#define TM_SCB_DEMCR_TRCENA (1u << 24)
#define TM_SCB_AIRCR_VECTKEY (0x05FAu << 16)
#define TM_SCB_AIRCR_SYSRESETREQ (1u << 2)

/* SysTick, 0xE000E010. */
typedef struct {
  TM_REG CTRL;
  TM_REG LOAD;
  TM_REG VAL;
  TM_REG CALIB;
} tm_systick_regs;
#define TM_SYSTICK ((tm_systick_regs *)0xE000E010u)
#define TM_SYSTICK_CTRL_ENABLE (1u << 0)
#define TM_SYSTICK_CTRL_CLKSOURCE (1u << 2)

/* NVIC, 0xE000E100: enable/disable/pending/active bit sets and byte priorities. */
typedef struct {
  TM_REG ISER[16];        /* 0x000 */
  uint32_t reserved0[16];
  TM_REG ICER[16];        /* 0x080 */
  uint32_t reserved1[16];
  TM_REG ISPR[16];        /* 0x100 */
  uint32_t reserved2[16];
  TM_REG ICPR[16];        /* 0x180 */
  uint32_t reserved3[16];
  TM_REG IABR[16];        /* 0x200 */
  uint32_t reserved4[48];
  volatile uint8_t IPR[496]; /* 0x300 */
} tm_nvic_regs;
#define TM_NVIC ((tm_nvic_regs *)0xE000E100u)

static inline void tm_nvic_enable(uint32_t irq) { TM_NVIC->ISER[irq >> 5] = 1u << (irq & 31u); }
static inline void tm_nvic_disable(uint32_t irq) { TM_NVIC->ICER[irq >> 5] = 1u << (irq & 31u); }

/* Data Watchpoint and Trace unit, 0xE0001000 (cycle counter). */
typedef struct {
  TM_REG CTRL;   /* 0x00 */
  TM_REG CYCCNT; /* 0x04 */
} tm_dwt_regs;
#define TM_DWT ((tm_dwt_regs *)0xE0001000u)
#define TM_DWT_CTRL_CYCCNTENA (1u << 0)

/* Armv8.1-M Performance Monitoring Unit (Cortex-M55/M85), 0xE0003000. */
typedef struct {
  TM_REG EVCNTR[31];      /* 0x000 event counters */
  TM_REG CCNTR;           /* 0x07C cycle counter */
  uint32_t reserved0[224];
  TM_REG EVTYPER[31];     /* 0x400 event selection */
  TM_REG CCFILTR;         /* 0x47C */
  uint32_t reserved1[480];
  TM_REG CNTENSET;        /* 0xC00 */
  uint32_t reserved2[7];
  TM_REG CNTENCLR;        /* 0xC20 */
  uint32_t reserved3[7];
  TM_REG INTENSET;        /* 0xC40 */
  uint32_t reserved4[7];
  TM_REG INTENCLR;        /* 0xC60 */
  uint32_t reserved5[7];
  TM_REG OVSCLR;          /* 0xC80 */
  uint32_t reserved6[96]; /* 0xC84..0xE03 */
  TM_REG CTRL;            /* 0xE04 */
  TM_REG TYPE;            /* 0xE08 */
} tm_pmu_regs;
#define TM_PMU ((tm_pmu_regs *)0xE0003000u)
#define TM_PMU_CTRL_ENABLE (1u << 0)
#define TM_PMU_CTRL_EVENT_RESET (1u << 1)
#define TM_PMU_CTRL_CYCLE_RESET (1u << 2)
#define TM_PMU_CNTEN_CYCLES (1u << 31)
#define TM_PMU_EVENT_INST_RETIRED 0x0008u
#define TM_PMU_EVENT_CPU_CYCLES 0x0011u

/* Barriers and special registers. */
static inline void tm_dsb(void) { __asm volatile("dsb sy" ::: "memory"); }
static inline void tm_isb(void) { __asm volatile("isb sy" ::: "memory"); }
static inline uint32_t tm_get_ipsr(void) {
  uint32_t v;
  __asm volatile("mrs %0, ipsr" : "=r"(v));
  return v;
}

#endif /* TM_CMSIS_CORE_H */
