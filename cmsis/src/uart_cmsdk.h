/* Internal: Arm CMSDK APB UART (transmit only), as on the MPS3 / Corstone boards. */
#ifndef TM_CMSIS_UART_CMSDK_H
#define TM_CMSIS_UART_CMSDK_H

#include <stdint.h>

void tm_uart_init(uintptr_t base);
void tm_uart_putc(uintptr_t base, char c);

#endif
