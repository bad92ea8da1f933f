/* CMSDK APB UART: DATA at 0x00, STATE at 0x04 (bit 0: TX buffer full),
 * CTRL at 0x08 (bit 0: TX enable), BAUDDIV at 0x10 (>= 16). */
#include "uart_cmsdk.h"

#include "tm_cmsis/core.h"

typedef struct {
  TM_REG DATA;
  TM_REG STATE;
  TM_REG CTRL;
  TM_REG INTSTATUS;
  TM_REG BAUDDIV;
} cmsdk_uart_regs;

#define UART_STATE_TX_FULL (1u << 0)
#define UART_CTRL_TX_ENABLE (1u << 0)

void tm_uart_init(uintptr_t base) {
  cmsdk_uart_regs *uart = (cmsdk_uart_regs *)base;
  uart->BAUDDIV = 16u; /* the fastest rate; FVPs and QEMU ignore it */
  uart->CTRL = UART_CTRL_TX_ENABLE;
}

void tm_uart_putc(uintptr_t base, char c) {
  cmsdk_uart_regs *uart = (cmsdk_uart_regs *)base;
  while (uart->STATE & UART_STATE_TX_FULL) {
  }
  uart->DATA = (uint32_t)(uint8_t)c;
}
