#include "common.h"

#include <stdlib.h>
#include <string.h>

#include "torchmcu/ethos_u_blob.h"

/*
 * The probe registry's delegate backend: "EthosUBackend" with the real blob parser and call
 * check at init (what the firmware delegate accepts), and at execute the probe kernel's rule:
 * every input byte is read, every output and the scratch written, all inside the arena.
 */
static const tm_fuzz_method *g_prepared;

typedef struct {
  tm_ethos_u_blob blob;
} probe_delegate;

static tm_status probe_delegate_init(tm_delegate_context *ctx, void *state, const tm_delegate_info *info) {
  return tm_ethos_u_blob_init(ctx, info, &((probe_delegate *)state)->blob);
}

static tm_status probe_delegate_prepare(tm_delegate_context *ctx, void *state, const tm_delegate_call *call) {
  return tm_ethos_u_check_call(&((probe_delegate *)state)->blob, call, ctx);
}

static tm_status probe_delegate_execute(tm_delegate_context *ctx, void *state, const tm_delegate_call *call) {
  const probe_delegate *s = state;
  const size_t n = (size_t)s->blob.num_inputs + s->blob.num_outputs + 1u;
  const uint8_t *a = g_prepared->arena;
  volatile uint8_t sink = 0;
  (void)ctx;
  if (call->nargs != n) __builtin_trap(); /* prepare accepted only this count */
  for (size_t k = 0; k < n; ++k) {
    tm_tensor *t = call->args[k]->u.tensor;
    const uint8_t *p = t->data;
    for (uint32_t j = 0; j < t->nbytes; ++j) sink ^= p[j];
    if (k >= s->blob.num_inputs && t->nbytes != 0) {
      if (p < a || p + t->nbytes > a + g_prepared->arena_bytes) __builtin_trap(); /* writes outside */
      memset(t->data, 0xA5, t->nbytes);
    }
  }
  (void)sink;
  return TM_OK;
}

static const tm_backend kProbeDelegate = {"EthosUBackend", sizeof(probe_delegate), probe_delegate_init,
                                          probe_delegate_prepare, probe_delegate_execute};
static const tm_backend *const kProbeBackends[] = {&kProbeDelegate};

tm_status tm_fuzz_prepare(tm_fuzz_method *f, const uint8_t *data, size_t size,
                          const tm_kernel_registry *registry, tm_kernel_fn probe) {
  memset(f, 0, sizeof(*f));
  g_prepared = f;
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
  tm_kernel_registry probes = {NULL, 0, NULL, 0};
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
    probes.backends = kProbeBackends;
    probes.num_backends = 1;
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
