#include "common.h"

#include <stdlib.h>
#include <string.h>

tm_status tm_fuzz_prepare(tm_fuzz_method *f, const uint8_t *data, size_t size,
                          const tm_kernel_registry *registry, tm_kernel_fn probe) {
  memset(f, 0, sizeof(*f));
  f->copy = malloc(size ? size : 1);
  if (f->copy == NULL) return TM_ERR_OUT_OF_MEMORY;
  if (size) memcpy(f->copy, data, size);
  tm_status st = tm_program_load(&f->program, f->copy, size);
  if (st != TM_OK) return st;
  size_t meta_bytes = 0;
  st = tm_method_required_memory(&f->program, NULL, &meta_bytes, &f->arena_bytes);
  if (st != TM_OK) return st;
  /* A corrupted program may ask for up to 4 GB of arena: give it none (the runtime must say so). */
  size_t arena_size = f->arena_bytes > ((size_t)64 << 20) ? 0 : f->arena_bytes;
  tm_kernel_registry probes = {NULL, 0, NULL, 0}; /* no delegate backends */
  if (registry == NULL) {
    uint32_t n = 0;
    const char *name, *overload;
    while (tm_program_operator(&f->program, NULL, n, &name, &overload) == TM_OK) ++n;
    f->probes = calloc(n + 1u, sizeof(*f->probes));
    if (f->probes == NULL) return TM_ERR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < n; ++i) {
      tm_program_operator(&f->program, NULL, i, &f->probes[i].name, &f->probes[i].overload);
      f->probes[i].fn = probe;
    }
    probes.entries = f->probes;
    probes.count = n;
    registry = &probes;
  }
  /* Exact sizes: malloc is 16-byte aligned on the host, as the runtime asks. */
  f->meta = malloc(meta_bytes ? meta_bytes : 1);
  f->arena_bytes = arena_size;
  f->arena = calloc(1, arena_size ? arena_size : 1);
  if (f->meta == NULL || f->arena == NULL) return TM_ERR_OUT_OF_MEMORY;
  st = tm_method_init(&f->method, &f->program, NULL, registry, f->meta, meta_bytes, f->arena,
                      f->arena_bytes);
  /* Asked for more than it was given: the runtime must refuse (it did not get the memory). */
  if (arena_size == 0 && st == TM_OK && f->method.num_tensors != 0) {
    size_t m2 = 0, a2 = 0;
    if (tm_method_required_memory(&f->program, NULL, &m2, &a2) == TM_OK && a2 > 0) __builtin_trap();
  }
  return st;
}

void tm_fuzz_release(tm_fuzz_method *f) {
  free(f->probes);
  free(f->meta);
  free(f->arena);
  free(f->copy);
  memset(f, 0, sizeof(*f));
}
