/*
 * Shared pieces of the fuzz targets: exact-size heap copies (so one byte too far is an
 * ASan report) and the probe kernel (tools/host/probe.h) that touches every byte a call claims.
 */
#ifndef TM_FUZZ_COMMON_H
#define TM_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "probe.h" /* tools/host: tm_probe_kernel */
#include "torchmcu/runtime.h"

/* A prepared method with its own exact-size buffers (host only: may allocate). */
typedef struct {
  tm_program program;
  tm_method method;
  uint8_t *copy;  /* the .pte bytes, exactly `size` long */
  void *meta;
  void *arena;
  size_t arena_bytes;
  tm_kernel_entry *probes;
} tm_fuzz_method;

/*
 * Loads `data`, asks the required memory of the first method and initialises it with
 * `registry` (NULL: `probe` for every operator of the program). Returns the status;
 * tm_fuzz_release must be called either way.
 */
tm_status tm_fuzz_prepare(tm_fuzz_method *f, const uint8_t *data, size_t size,
                          const tm_kernel_registry *registry, tm_kernel_fn probe);
void tm_fuzz_release(tm_fuzz_method *f);

#endif
