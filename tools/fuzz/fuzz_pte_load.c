/*
 * Fuzz target: the .pte loader and verifier. Loads the input; when it is accepted, every
 * method name, every operator and each method's memory requirement must be readable.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1);
  if (copy == NULL) return 0;
  if (size) memcpy(copy, data, size);
  tm_program p;
  if (tm_program_load(&p, copy, size) == TM_OK) {
    for (uint32_t m = 0; m < p.num_methods; ++m) {
      const char *name = NULL, *op = NULL, *overload = NULL;
      if (tm_program_method_name(&p, m, &name) != TM_OK) __builtin_trap(); /* verified: must work */
      size_t meta = 0, arena = 0;
      (void)tm_method_required_memory(&p, name, &meta, &arena);
      for (uint32_t i = 0; tm_program_operator(&p, name, i, &op, &overload) == TM_OK; ++i) {
        if (strlen(op) + strlen(overload) > p.program_size) __builtin_trap();
      }
    }
  }
  free(copy);
  return 0;
}
