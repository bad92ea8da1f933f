/*
 * The small real programs the fuzz targets that run the real kernels (fuzz_run, fuzz_plan)
 * load once: every .pte of $TM_FUZZ_PROGRAMS (default: "programs" next to the executable),
 * numbered by sorted file name so that a corpus input's first byte keeps naming one program.
 */
#ifndef TM_FUZZ_PROGRAMS_H
#define TM_FUZZ_PROGRAMS_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"

typedef struct {
  uint8_t *bytes;
  size_t size;
} tm_fuzz_blob;

/* Loads the programs (from LLVMFuzzerInitialize); exits naming `target` when there is none. */
void tm_fuzz_load_programs(const char *target, char ***argv);

/* Program number `pick` modulo the number of programs. */
const tm_fuzz_blob *tm_fuzz_program(uint8_t pick);

/* Copies data[*at..size) into the method's input tensors in order (zeros where it runs out)
 * and advances *at past the bytes taken. */
void tm_fuzz_fill_inputs(tm_fuzz_method *f, const uint8_t *data, size_t size, size_t *at);

#endif
