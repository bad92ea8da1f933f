/* Fault handlers: report the fault status registers and exit non-zero. */
#include <stddef.h>

#include "tm_cmsis/core.h"
#include "tm_cmsis/faults.h"
#include "tm_cmsis/platform.h"

static const char *exception_name(uint32_t number) {
  switch (number) {
    case 2: return "NMI";
    case 3: return "HardFault";
    case 4: return "MemManage";
    case 5: return "BusFault";
    case 6: return "UsageFault";
    case 7: return "SecureFault";
    case 11: return "SVCall";
    case 12: return "DebugMonitor";
    case 14: return "PendSV";
    case 15: return "SysTick";
    default: return number >= 16 ? "IRQ" : "reserved";
  }
}

/* EXC_RETURN bit 2 selects the stack the frame was pushed to (0: MSP, 1: PSP). */
__attribute__((naked)) void tm_fault_handler(void) {
  __asm volatile(
      "tst lr, #4\n"
      "ite eq\n"
      "mrseq r0, msp\n"
      "mrsne r0, psp\n"
      "mov r1, lr\n"
      "b tm_fault_report\n");
}

static void field(const char *name, uint32_t value) {
  tm_puts(" ");
  tm_puts(name);
  tm_puts("=");
  tm_put_hex32(value);
}

_Noreturn void tm_fault_report(const uint32_t *frame, uint32_t exc_return) {
  uint32_t number = tm_get_ipsr() & 0x1FFu;
  uint32_t cfsr = TM_SCB->CFSR;
  tm_puts("\nTM_FAULT ");
  tm_puts(exception_name(number));
  tm_puts(" exception=");
  tm_put_u32(number);
  field("CFSR", cfsr);
  field("HFSR", TM_SCB->HFSR);
  field("MMFAR", TM_SCB->MMFAR);
  field("BFAR", TM_SCB->BFAR);
  field("SFSR", TM_SCB->SFSR);
  field("SFAR", TM_SCB->SFAR);
  tm_puts(cfsr & TM_SCB_CFSR_BFARVALID ? " BFARVALID" : "");
  tm_puts(cfsr & TM_SCB_CFSR_MMARVALID ? " MMARVALID" : "");
  tm_puts("\n");
  if (frame != NULL) {
    tm_puts("TM_FAULT_FRAME");
    field("R0", frame[0]);
    field("R1", frame[1]);
    field("R2", frame[2]);
    field("R3", frame[3]);
    field("R12", frame[4]);
    field("LR", frame[5]);
    field("PC", frame[6]);
    field("xPSR", frame[7]);
    field("EXC_RETURN", exc_return);
    tm_puts("\n");
  }
  tm_exit(TM_EXIT_FAULT);
}
