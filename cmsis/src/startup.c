/*
 * Reset and vector table for Armv8-M / Armv8.1-M mainline cores.
 *
 * Order matters: the reset handler first grants access to CP10/CP11 (FPU
 * and MVE) in CPACR, in assembly, so no compiler-generated float or vector
 * instruction can run before it; then the C part copies .data and clears .bss
 * with plain word loops (built without vectorisation or libc calls, since the
 * C library is not ready), enables the separate fault exceptions and calls main.
 */
#include <stddef.h>
#include <stdint.h>

#include "tm_cmsis/core.h"
#include "tm_cmsis/faults.h"
#include "tm_cmsis/platform.h"

_Static_assert(offsetof(tm_scb_regs, CFSR) == 0x28, "SCB layout");
_Static_assert(offsetof(tm_scb_regs, CPACR) == 0x88, "SCB layout");
_Static_assert(offsetof(tm_scb_regs, SFSR) == 0xE4, "SCB layout");
_Static_assert(offsetof(tm_scb_regs, DEMCR) == 0xFC, "SCB layout");
_Static_assert(offsetof(tm_nvic_regs, IPR) == 0x300, "NVIC layout");
_Static_assert(offsetof(tm_pmu_regs, CCNTR) == 0x7C, "PMU layout");
_Static_assert(offsetof(tm_pmu_regs, EVTYPER) == 0x400, "PMU layout");
_Static_assert(offsetof(tm_pmu_regs, CNTENSET) == 0xC00, "PMU layout");
_Static_assert(offsetof(tm_pmu_regs, CTRL) == 0xE04, "PMU layout");

/* From the linker script. */
extern uint32_t __data_load[], __data_start[], __data_end[];
extern uint32_t __bss_start[], __bss_end[];
extern uint32_t __stack_limit[], __stack_top[];

int main(void);

void Reset_Handler(void);
void tm_reset_c(void);
void tm_default_handler(void);

/* Unused interrupts land here: an unexpected IRQ is a failure, not a hang. */
void tm_default_handler(void) { tm_fault_report(NULL, 0); }

__attribute__((naked, noreturn)) void Reset_Handler(void) {
  __asm volatile(
      "ldr r0, =0xE000ED88\n" /* CPACR */
      "ldr r1, [r0]\n"
      "orr r1, r1, #(0xF << 20)\n" /* CP10, CP11 full access */
      "str r1, [r0]\n"
      "dsb\n"
      "isb\n"
      "ldr r0, =__stack_limit\n"
      "msr msplim, r0\n" /* stack overflow -> UsageFault (STKOF), not silent corruption */
      "b tm_reset_c\n");
}

/* The copy loops go through volatile pointers (never merged into memcpy or vector code); the
 * GCC attribute also keeps the optimiser from rewriting them, belt and braces. */
#if defined(__clang__)
#define TM_SCALAR_CODE
#else
#define TM_SCALAR_CODE __attribute__((optimize("no-tree-loop-distribute-patterns", "no-tree-vectorize")))
#endif

__attribute__((noreturn, used)) TM_SCALAR_CODE void tm_reset_c(void) {
  volatile uint32_t *src = __data_load;
  for (volatile uint32_t *dst = __data_start; dst < __data_end;) {
    *dst++ = *src++;
  }
  for (volatile uint32_t *dst = __bss_start; dst < __bss_end;) {
    *dst++ = 0u;
  }
  TM_SCB->SHCSR |= TM_SCB_SHCSR_MEMFAULTENA | TM_SCB_SHCSR_BUSFAULTENA | TM_SCB_SHCSR_USGFAULTENA |
                   TM_SCB_SHCSR_SECUREFAULTENA;
  TM_SCB->CCR |= TM_SCB_CCR_DIV_0_TRP;
  tm_dsb();
  tm_isb();
  tm_platform_init();
  tm_exit(main());
}

#define TM_NUM_IRQS 96

typedef void (*tm_vector)(void);

/* Entry 0 is the initial main stack pointer. */
__attribute__((section(".vectors"), used)) const tm_vector tm_vector_table[16 + TM_NUM_IRQS] = {
    [0] = (tm_vector)(uintptr_t)__stack_top,
    [1] = Reset_Handler,
    [2] = tm_fault_handler,  /* NMI */
    [3] = tm_fault_handler,  /* HardFault */
    [4] = tm_fault_handler,  /* MemManage */
    [5] = tm_fault_handler,  /* BusFault */
    [6] = tm_fault_handler,  /* UsageFault */
    [7] = tm_fault_handler,  /* SecureFault */
    [11] = tm_fault_handler, /* SVCall: unused */
    [12] = tm_fault_handler, /* DebugMonitor */
    [14] = tm_fault_handler, /* PendSV: unused */
    [15] = tm_fault_handler, /* SysTick: unused */
    [16 ... 16 + TM_NUM_IRQS - 1] = tm_fault_handler,
};
