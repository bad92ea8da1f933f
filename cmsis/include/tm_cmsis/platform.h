/*
 * Board-independent services of the firmware: console output, exit, the
 * performance counters. Output goes to Arm semihosting (QEMU, FVP with
 * semihosting enabled) or to the board's CMSDK UART, chosen at build time
 * (TM_OUTPUT_SEMIHOSTING or TM_OUTPUT_UART, with TM_UART_BASE).
 */
#ifndef TM_CMSIS_PLATFORM_H
#define TM_CMSIS_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called by the reset handler before main (UART enable, counters). */
void tm_platform_init(void);

/* Console output; buffered per line, flushed on '\n' and on exit. An image built without a
 * console (TORCHMCU_CONSOLE=OFF: TM_CONSOLE_OFF) prints nothing: the calls compile to nothing,
 * with their strings, and the exit code is the only result. */
#if defined(TM_CONSOLE_OFF)
static inline void tm_write(const char *text, size_t length) { (void)text, (void)length; }
static inline void tm_puts(const char *text) { (void)text; }
static inline void tm_put_u32(uint32_t value) { (void)value; }
static inline void tm_put_i32(int32_t value) { (void)value; }
static inline void tm_put_hex32(uint32_t value) { (void)value; }
static inline void tm_put_hex_bytes(const void *data, size_t length) { (void)data, (void)length; }
static inline void tm_flush(void) {}
#else
void tm_write(const char *text, size_t length);
void tm_puts(const char *text); /* no newline added */
void tm_put_u32(uint32_t value);
void tm_put_i32(int32_t value);
void tm_put_hex32(uint32_t value); /* 0x%08x */
void tm_put_hex_bytes(const void *data, size_t length); /* two lower-case digits per byte */
void tm_flush(void);
#endif

/*
 * Ends the program with `code`. Semihosting: the host sees it as the exit
 * status (SYS_EXIT_EXTENDED). UART: prints "TM_EXIT <code>" (nothing without a console) and
 * sleeps forever.
 */
_Noreturn void tm_exit(int code);

/* Cycle and retired-instruction counts from the PMU (0 where the core has none). */
void tm_counters_start(void);
void tm_counters_read(uint32_t *cycles, uint32_t *instructions);

#ifdef __cplusplus
}
#endif

#endif /* TM_CMSIS_PLATFORM_H */
