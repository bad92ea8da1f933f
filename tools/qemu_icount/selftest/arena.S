/*
 * Test-only image for the icount plugin's arena accounting (QEMU mps3-an547): between the
 * markers it stores ARENA_WORDS words from ARENA_BASE up, loads them all twice, then stores
 * one word just below ARENA_BASE and one just past the words (all accesses aligned). Watching
 * [ARENA_BASE, ARENA_BASE + 4 * ARENA_WORDS) the plugin must report loaded = 8 * ARENA_WORDS,
 * stored = 4 * ARENA_WORDS and touched = 4 * ARENA_WORDS; watching from ARENA_BASE + 2, the
 * first word straddles the range start and only its 2 inside bytes count.
 * Then the image exits with status 0 (semihosting).
 * Build: arm-none-eabi-gcc -mcpu=cortex-m55 -nostdlib -Wl,-Ttext=0 -DARENA_WORDS=... arena.S
 */
#ifndef ARENA_BASE
#define ARENA_BASE 0x21000100 /* in SRAM2, with room below it */
#endif
#if !defined(ARENA_WORDS) || ARENA_WORDS < 1
#error "ARENA_WORDS (words stored, at least 1) must be defined"
#endif

#include "image.inc"

  .thumb_func
  .global reset
reset:
  ldr r2, =ARENA_BASE
  movs r3, #0
  bl tm_bench_begin
  ldr r0, =ARENA_WORDS
  mov r1, r2
1:
  str r3, [r1], #4
  subs r0, r0, #1
  bne 1b
  movs r4, #2
2:
  ldr r0, =ARENA_WORDS
  mov r1, r2
3:
  ldr r5, [r1], #4
  subs r0, r0, #1
  bne 3b
  subs r4, r4, #1
  bne 2b
  str r3, [r2, #-4]
  ldr r1, =ARENA_BASE + 4 * ARENA_WORDS
  str r3, [r1]
  bl tm_bench_end
  exit_ok
