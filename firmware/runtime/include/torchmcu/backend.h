/*
 * Delegate backends: how a DelegateCall runs.
 *
 * A program's execution plan lists BackendDelegates (an id such as "EthosUBackend",
 * the processed blob, compile specs); a DelegateCall instruction runs one of them with
 * its argument values. The image registers its backends in tm_kernel_registry.backends;
 * tm_method_init finds each delegate's backend by id (missing: TM_ERR_MISSING_OPERATOR,
 * the diagnostic names the id), gives it TM_DELEGATE_STATE_BYTES of state in the
 * method's metadata buffer (no heap), calls init once per delegate, prepare once per
 * DelegateCall (argument checks happen at load, not while running), and execute runs it.
 */
#ifndef TORCHMCU_BACKEND_H
#define TORCHMCU_BACKEND_H

#include "torchmcu/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of per-delegate state each delegate gets in the metadata buffer (8-byte aligned).
 * Fixed, so tm_method_required_memory needs no registry; a backend's state_size must fit. */
#define TM_DELEGATE_STATE_BYTES 256u

/* One compile spec of a delegate: key and value bytes, in place in the program. */
typedef struct {
  const char *key; /* NUL-terminated */
  const uint8_t *value;
  size_t size;
} tm_compile_spec;

/* A delegate as its backend sees it at init. Everything points into the verified program. */
typedef struct {
  const char *id;            /* BackendDelegate.id, NUL-terminated */
  uint32_t index;            /* delegate index in the execution plan */
  const uint8_t *blob;       /* processed data, in place (a .pte segment or inline data) */
  size_t blob_size;
  uint32_t blob_offset;      /* byte offset of the blob in the .pte (diagnostics) */
  const tm_program *program; /* for tm_delegate_compile_spec */
  uint32_t specs;            /* position of the compile_specs vector in the program (0: none) */
  uint32_t num_specs;
} tm_delegate_info;

/* Compile spec `index` (< info->num_specs). */
tm_status tm_delegate_compile_spec(const tm_delegate_info *info, uint32_t index, tm_compile_spec *spec);
/* The first compile spec with this key; TM_ERR_INVALID_ARGUMENT when there is none. */
tm_status tm_delegate_find_compile_spec(const tm_delegate_info *info, const char *key,
                                        tm_compile_spec *spec);

/* Filled by a backend on error: what is wrong and where (the runtime adds the delegate id,
 * its index and the instruction to the method's tm_diag). */
typedef struct {
  const char *message;   /* static text */
  uint32_t blob_offset;  /* offset of the offending item inside the blob, or TM_DIAG_NO_OFFSET */
  uint16_t bad_argument; /* DelegateCall argument index, or UINT16_MAX */
} tm_delegate_context;

/* One DelegateCall. At prepare, outputs and scratch the backend writes must lie in the arena. */
typedef struct {
  tm_value *const *args;
  size_t nargs;
  const uint8_t *arena; /* the method's planned memory (at prepare; NULL, 0 at execute) */
  size_t arena_bytes;
  uint32_t delegate_index;
  uint32_t instruction;
} tm_delegate_call;

struct tm_backend {
  const char *id;    /* matched against BackendDelegate.id */
  size_t state_size; /* <= TM_DELEGATE_STATE_BYTES */
  /* Verify the blob and compile specs; fill `state` (zeroed, 8-byte aligned). */
  tm_status (*init)(tm_delegate_context *ctx, void *state, const tm_delegate_info *info);
  /* Check one DelegateCall's arguments against the delegate (counts, dtypes, sizes, memory). */
  tm_status (*prepare)(tm_delegate_context *ctx, void *state, const tm_delegate_call *call);
  /* Run it: arguments are those prepare accepted (only tensor data changes between runs). */
  tm_status (*execute)(tm_delegate_context *ctx, void *state, const tm_delegate_call *call);
};

/* Finds a backend by delegate id; NULL when the image has none. */
const tm_backend *tm_registry_find_backend(const tm_kernel_registry *registry, const char *id);

/* True when [data, data + nbytes) lies inside the call's arena (empty ranges always do). */
bool tm_delegate_in_arena(const tm_delegate_call *call, const void *data, size_t nbytes);

#ifdef __cplusplus
}
#endif

#endif /* TORCHMCU_BACKEND_H */
