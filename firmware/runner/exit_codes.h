/*
 * Exit status of the runner, one per failure class. The host maps them to
 * messages (host/torchmcu/device/run.py keeps the same numbers).
 */
#ifndef TM_RUNNER_EXIT_CODES_H
#define TM_RUNNER_EXIT_CODES_H

#include "tm_cmsis/faults.h"

#define TM_EXIT_OK 0
#define TM_EXIT_LOAD_ERROR 2       /* program rejected, or buffers too small */
#define TM_EXIT_MISSING_OPERATOR 3 /* an operator has no kernel in this image */
#define TM_EXIT_KERNEL_ERROR 4     /* a kernel failed while running */
#define TM_EXIT_OUTPUT_MISMATCH 5  /* outputs differ from the embedded expected outputs */
#define TM_EXIT_INPUT_ERROR 6      /* embedded inputs do not match the method */
/* TM_EXIT_FAULT (7): a CPU fault, from tm_cmsis/faults.h */

#endif
