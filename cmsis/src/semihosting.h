/* Internal: the semihosting calls used by the console and exit. */
#ifndef TM_CMSIS_SEMIHOSTING_H
#define TM_CMSIS_SEMIHOSTING_H

#include <stdint.h>

void tm_semihosting_write0(const char *text);
void tm_semihosting_exit(int code);

#endif
