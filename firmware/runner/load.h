/*
 * Program load shared by the runners (main.c, bundled_runner.c): loads the program,
 * prints the TM_MEMORY line and initialises the method in the image's reserved buffers.
 */
#ifndef TORCHMCU_RUNNER_LOAD_H
#define TORCHMCU_RUNNER_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "torchmcu/runtime.h"

/* Prints one TM_ERROR line for a failed step ("load", "missing_operator"). */
typedef void (*tm_runner_diag_fn)(const char *what, tm_status status, const tm_diag *diag);

/* What the TM_MEMORY line carries besides meta/arena/program, and how errors print. */
typedef struct {
  const char *extra_key;  /* printed as " <key>=<extra_value>" before the newline; NULL: none */
  uint32_t extra_value;
  bool check_reserved;    /* stop with OUT_OF_MEMORY when the image reserves too little */
  tm_runner_diag_fn put_diag;
} tm_runner_load_options;

/* Loads `data` into `program` and initialises `method` in the linker-reserved metadata and
 * arena buffers. Returns TM_EXIT_OK or the exit code of the failure (after printing it). */
int tm_runner_load(tm_program *program, tm_method *method, const uint8_t *data, size_t size,
                   const tm_runner_load_options *options);

#endif
