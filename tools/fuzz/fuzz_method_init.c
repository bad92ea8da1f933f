/*
 * Fuzz target: method init and execution with probe kernels. Every accepted program gets
 * exact-size metadata and arena buffers; each kernel call reads all bytes of its tensor and
 * int list arguments and writes its out tensor, so a tensor outside the file, its segment or
 * the arena is an ASan report. The out tensor must be planned (inside the arena).
 */
#include <string.h>

#include "common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const tm_fuzz_method *g_current;

/* The probe, plus: the out tensor (last argument) must live in the arena and is written. */
static tm_status probe_and_write(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  tm_status st = tm_probe_kernel(ctx, args, nargs);
  const tm_tensor *out = args[nargs - 1]->u.tensor; /* the executor checked it is a tensor */
  if (out->nbytes != 0) {
    const uint8_t *a = g_current->arena, *p = out->data;
    if (p < a || p + out->nbytes > a + g_current->arena_bytes) __builtin_trap(); /* writes outside */
    memset(out->data, 0x5A, out->nbytes);
  }
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tm_fuzz_method f;
  g_current = &f;
  if (tm_fuzz_prepare(&f, data, size, NULL, probe_and_write) == TM_OK) {
    (void)tm_method_execute(&f.method);
    for (uint32_t i = 0; i < f.method.num_inputs + 1u; ++i) (void)tm_method_input(&f.method, i);
    for (uint32_t i = 0; i < f.method.num_outputs + 1u; ++i) (void)tm_method_output(&f.method, i);
  }
  tm_fuzz_release(&f);
  return 0;
}
