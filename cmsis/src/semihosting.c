/*
 * Arm semihosting (the BKPT 0xAB convention of M-profile): operation number
 * in r0, parameter pointer in r1, result in r0. Only the calls the firmware
 * needs. With semihosting disabled in the debugger/emulator the BKPT stops
 * the core, so images built for semihosting must be run with it enabled.
 */
#include "semihosting.h"

enum {
  SH_SYS_WRITE0 = 0x04,
  SH_SYS_EXIT = 0x18,
  SH_SYS_EXIT_EXTENDED = 0x20,
  SH_ADP_STOPPED_APPLICATION_EXIT = 0x20026,
};

static uint32_t sh_call(uint32_t op, const void *param) {
  register uint32_t r0 __asm("r0") = op;
  register const void *r1 __asm("r1") = param;
  __asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void tm_semihosting_write0(const char *text) { (void)sh_call(SH_SYS_WRITE0, text); }

void tm_semihosting_exit(int code) {
  const uint32_t block[2] = {SH_ADP_STOPPED_APPLICATION_EXIT, (uint32_t)code};
  (void)sh_call(SH_SYS_EXIT_EXTENDED, block);
  /* A host without the extended call: the plain one reports success only. */
  (void)sh_call(SH_SYS_EXIT, (const void *)(uintptr_t)SH_ADP_STOPPED_APPLICATION_EXIT);
}
