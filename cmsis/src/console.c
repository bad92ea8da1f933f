/*
 * Console output and exit, retargeted to semihosting or the CMSDK UART.
 * Output is collected per line so a semihosting build traps once per line,
 * not once per character.
 */
#include <stdbool.h>

#include "semihosting.h"
#include "tm_cmsis/core.h"
#include "tm_cmsis/platform.h"
#include "uart_cmsdk.h"

#if defined(TM_OUTPUT_SEMIHOSTING) == defined(TM_OUTPUT_UART)
#error "define exactly one of TM_OUTPUT_SEMIHOSTING and TM_OUTPUT_UART"
#endif
#if defined(TM_OUTPUT_UART) && !defined(TM_UART_BASE)
#error "TM_OUTPUT_UART needs TM_UART_BASE"
#endif

#if !defined(TM_CONSOLE_OFF) /* without a console, platform.h's empty inline functions */
static char line[256];
static size_t line_used;

void tm_flush(void) {
  if (line_used == 0) {
    return;
  }
#if defined(TM_OUTPUT_SEMIHOSTING)
  line[line_used] = '\0';
  tm_semihosting_write0(line);
#else
  for (size_t i = 0; i < line_used; ++i) {
    if (line[i] == '\n') {
      tm_uart_putc(TM_UART_BASE, '\r');
    }
    tm_uart_putc(TM_UART_BASE, line[i]);
  }
#endif
  line_used = 0;
}

void tm_write(const char *text, size_t length) {
  for (size_t i = 0; i < length; ++i) {
    line[line_used++] = text[i];
    if (text[i] == '\n' || line_used == sizeof(line) - 1u) {
      tm_flush();
    }
  }
}

void tm_puts(const char *text) {
  size_t n = 0;
  while (text[n] != '\0') {
    ++n;
  }
  tm_write(text, n);
}

void tm_put_u32(uint32_t value) {
  char digits[10];
  size_t n = 0;
  do {
    digits[n++] = (char)('0' + value % 10u);
    value /= 10u;
  } while (value != 0);
  char out[10];
  for (size_t i = 0; i < n; ++i) {
    out[i] = digits[n - 1u - i];
  }
  tm_write(out, n);
}

void tm_put_i32(int32_t value) {
  if (value < 0) {
    tm_write("-", 1);
    tm_put_u32(0u - (uint32_t)value);
  } else {
    tm_put_u32((uint32_t)value);
  }
}

static const char hex_digits[] = "0123456789abcdef";

void tm_put_hex32(uint32_t value) {
  char out[10] = {'0', 'x'};
  for (int i = 0; i < 8; ++i) {
    out[2 + i] = hex_digits[(value >> (28 - 4 * i)) & 0xFu];
  }
  tm_write(out, sizeof(out));
}

void tm_put_hex_bytes(const void *data, size_t length) {
  const uint8_t *bytes = data;
  for (size_t i = 0; i < length; ++i) {
    char pair[2] = {hex_digits[bytes[i] >> 4], hex_digits[bytes[i] & 0xFu]};
    tm_write(pair, 2);
  }
}

#endif /* !TM_CONSOLE_OFF */

_Noreturn void tm_exit(int code) {
  tm_flush();
#if defined(TM_OUTPUT_SEMIHOSTING)
  tm_semihosting_exit(code);
#else
  tm_puts("TM_EXIT ");
  tm_put_i32(code);
  tm_puts("\n");
  tm_flush();
  (void)code;
#endif
  for (;;) {
    __asm volatile("wfi");
  }
}

void tm_platform_init(void) {
#if defined(TM_OUTPUT_UART)
  tm_uart_init(TM_UART_BASE);
#endif
}

void tm_counters_start(void) {
#if defined(TM_HAVE_PMU)
  TM_SCB->DEMCR |= TM_SCB_DEMCR_TRCENA;
  TM_PMU->EVTYPER[0] = TM_PMU_EVENT_INST_RETIRED;
  TM_PMU->CNTENSET = TM_PMU_CNTEN_CYCLES | 1u;
  TM_PMU->CTRL = TM_PMU_CTRL_ENABLE | TM_PMU_CTRL_EVENT_RESET | TM_PMU_CTRL_CYCLE_RESET;
#endif
}

void tm_counters_read(uint32_t *cycles, uint32_t *instructions) {
#if defined(TM_HAVE_PMU)
  *cycles = TM_PMU->CCNTR;
  *instructions = TM_PMU->EVCNTR[0];
#else
  *cycles = 0;
  *instructions = 0;
#endif
}
