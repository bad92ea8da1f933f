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

/* One program embedded in the image, with its inputs blob (empty: the default input). */
typedef struct {
  const uint8_t *data, *end;
  const uint8_t *io, *io_end;
  const char *name;
} tm_runner_program;

/* The programs of the image in run order (generated: embedded_programs.c, runner/CMakeLists.txt). */
extern const tm_runner_program tm_runner_programs[];
extern const uint32_t tm_runner_program_count;

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

/* One inference of `method` between the instruction-count markers, with the core's counters
 * (0 where it has none) in *cycles / *instructions. */
tm_status tm_runner_execute(tm_method *method, uint32_t *cycles, uint32_t *instructions);

/* The TM_RUN line of one sample. */
void tm_runner_put_run(uint32_t sample, uint32_t cycles, uint32_t instructions);

/* The TM_OUTPUT line of output `index` of one sample: dtype, byte count, bytes in hex. */
void tm_runner_put_output(uint32_t sample, uint32_t index, const tm_tensor *t);

/* The TM_END line; returns TM_EXIT_OUTPUT_MISMATCH when mismatches != 0, else TM_EXIT_OK. */
int tm_runner_finish(uint32_t samples, uint32_t mismatches);

#endif
