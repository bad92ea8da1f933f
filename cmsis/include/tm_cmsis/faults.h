/*
 * Fault reporting: every fault and unexpected exception prints the exception
 * number, the fault status registers (CFSR, HFSR, MMFAR, BFAR, SFSR, SFAR)
 * and the stacked registers, then exits with TM_EXIT_FAULT.
 */
#ifndef TM_CMSIS_FAULTS_H
#define TM_CMSIS_FAULTS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit status of a firmware that took a fault (see firmware/runner/exit_codes.h). */
#define TM_EXIT_FAULT 7

/* The vector of every fault: finds the stacked frame and calls tm_fault_report. */
void tm_fault_handler(void);

/* Prints the report and exits; `frame` is the stacked r0-r3, r12, lr, pc, xpsr (or NULL). */
_Noreturn void tm_fault_report(const uint32_t *frame, uint32_t exc_return);

#ifdef __cplusplus
}
#endif

#endif /* TM_CMSIS_FAULTS_H */
