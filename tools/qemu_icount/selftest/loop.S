/*
 * Test-only image for the icount plugin (QEMU mps3-an547, Cortex-M55): the
 * marked region runs a loop whose executed-instruction count is known exactly.
 *
 *   region 0: LOOP_ITERATIONS_A iterations of LOOP_BODY instructions
 *   region 1: LOOP_ITERATIONS_B iterations of LOOP_BODY instructions
 * Each occurrence counts LOOP_ITERATIONS * LOOP_BODY + 3: the begin marker's
 * `bx lr`, the `ldr` of the iteration count and the `bl` to the end marker.
 * Then the image exits with status 0 through semihosting (SYS_EXIT).
 * Build: arm-none-eabi-gcc -mcpu=cortex-m55 -nostdlib -Wl,-Ttext=0 -DLOOP_BODY=... loop.S
 */
#if !defined(LOOP_BODY) || LOOP_BODY < 2
#error "LOOP_BODY (instructions per iteration, at least 2) must be defined"
#endif
#ifndef LOOP_ITERATIONS_A
#define LOOP_ITERATIONS_A 1000
#endif
#ifndef LOOP_ITERATIONS_B
#define LOOP_ITERATIONS_B 7
#endif

#include "image.inc"

  .macro marked_loop iterations
  bl tm_bench_begin
  ldr r0, =\iterations
1:
  .rept LOOP_BODY - 2
  adds r1, r1, #1
  .endr
  subs r0, r0, #1
  bne 1b
  bl tm_bench_end
  .endm

  .thumb_func
  .global reset
reset:
  movs r1, #0
  marked_loop LOOP_ITERATIONS_A
  marked_loop LOOP_ITERATIONS_B
  exit_ok
