/* Kernel lookup and status names: the small pieces shared by the loader and host tools. */
#include "str_equal.h"
#include "torchmcu/backend.h"

const char *tm_status_name(tm_status status) {
  switch (status) {
    case TM_OK: return "OK";
    case TM_ERR_INVALID_PROGRAM: return "INVALID_PROGRAM";
    case TM_ERR_UNSUPPORTED: return "UNSUPPORTED";
    case TM_ERR_MISSING_OPERATOR: return "MISSING_OPERATOR";
    case TM_ERR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case TM_ERR_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case TM_ERR_INVALID_STATE: return "INVALID_STATE";
    case TM_ERR_KERNEL: return "KERNEL";
    case TM_ERR_DELEGATE: return "DELEGATE";
    case TM_ERR_TIMEOUT: return "TIMEOUT";
  }
  return "UNKNOWN_STATUS";
}

const tm_kernel_entry *tm_registry_entry(const tm_kernel_registry *registry, const char *name,
                                         const char *overload) {
  if (registry == NULL || name == NULL || overload == NULL) {
    return NULL;
  }
  for (size_t i = 0; i < registry->count; ++i) {
    const tm_kernel_entry *e = &registry->entries[i];
    if (e->fn != NULL && tm_str_equal(e->name, name) && tm_str_equal(e->overload, overload)) {
      return e;
    }
  }
  return NULL;
}

tm_kernel_fn tm_registry_find(const tm_kernel_registry *registry, const char *name,
                              const char *overload) {
  const tm_kernel_entry *e = tm_registry_entry(registry, name, overload);
  return e != NULL ? e->fn : NULL;
}

const tm_backend *tm_registry_find_backend(const tm_kernel_registry *registry, const char *id) {
  if (registry == NULL || id == NULL) {
    return NULL;
  }
  for (size_t i = 0; i < registry->num_backends; ++i) {
    const tm_backend *b = registry->backends[i];
    if (b != NULL && b->id != NULL && tm_str_equal(b->id, id)) {
      return b;
    }
  }
  return NULL;
}

bool tm_delegate_in_arena(const tm_delegate_call *call, const void *data, size_t nbytes) {
  const uint8_t *p = data;
  if (nbytes == 0) {
    return true;
  }
  return p != NULL && call->arena != NULL && p >= call->arena &&
         (size_t)(p - call->arena) <= call->arena_bytes && nbytes <= call->arena_bytes - (size_t)(p - call->arena);
}
