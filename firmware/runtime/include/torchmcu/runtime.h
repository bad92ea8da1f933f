/*
 * The torchmcu runtime: load and verify a .pte (ExecuTorch program format),
 * prepare one method in caller-provided memory, run it.
 *
 * No heap. The caller asks how much memory a method needs
 * (tm_method_required_memory), provides two buffers (metadata and the
 * activation arena) and the kernel registry of its image, then executes.
 * A malformed program is rejected with a status and a tm_diag naming the
 * problem and where it is (instruction, value, byte offset, operator).
 */
#ifndef TORCHMCU_RUNTIME_H
#define TORCHMCU_RUNTIME_H

#include "torchmcu/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TM_DIAG_NONE (-1)
#define TM_DIAG_NO_OFFSET UINT32_MAX

/* Filled on every error; `message` is a static string. */
typedef struct {
  tm_status status;
  const char *message;     /* what is wrong (static text) */
  const char *op_name;     /* operator involved, NUL-terminated inside the program, or NULL */
  const char *op_overload; /* its overload name, or NULL */
  int32_t instruction;     /* instruction index in the chain, or TM_DIAG_NONE */
  int32_t value;           /* value index in the execution plan, or TM_DIAG_NONE */
  int32_t argument;        /* kernel or delegate call argument index, or TM_DIAG_NONE */
  int32_t delegate;        /* delegate index in the plan (op_name then holds its id), or TM_DIAG_NONE */
  uint32_t byte_offset;    /* offset in the .pte of the offending item, or TM_DIAG_NO_OFFSET */
} tm_diag;

/* A verified program: a view of the caller's .pte bytes (which must outlive it). */
typedef struct {
  const uint8_t *data;
  size_t size;
  uint32_t program_size;      /* bytes of the flatbuffer part (header included) */
  uint64_t segment_base;      /* file offset of the segment data, 0 when there is none */
  uint64_t segment_data_size; /* bytes of segment data */
  uint32_t root;              /* position of the Program table */
  uint32_t num_methods;
  tm_diag diag;
} tm_program;

/* One resolved instruction (internal layout; lives in the metadata buffer). */
typedef struct tm_instruction tm_instruction;
/* One delegate: its backend and state (internal layout; lives in the metadata buffer). */
typedef struct tm_delegate_slot tm_delegate_slot;

typedef struct {
  const tm_program *program;
  uint32_t plan;              /* position of the ExecutionPlan table */
  tm_value *values;
  uint32_t num_values;
  tm_tensor *tensors;
  uint32_t num_tensors;
  tm_instruction *instructions;
  uint32_t num_instructions;
  const uint32_t *inputs;     /* value indices */
  uint32_t num_inputs;
  const uint32_t *outputs;
  uint32_t num_outputs;
  uint8_t *verified;          /* one bit per instruction (metadata buffer), see tm_kernel_context */
  tm_delegate_slot *delegates; /* one per BackendDelegate of the plan (metadata buffer) */
  uint32_t num_delegates;
  uint8_t *scratch;           /* the shared kernel scratch: the arena past the planned tensors */
  uint32_t scratch_bytes;     /* its size (arena_size given to init - planned bytes, aligned) */
  uint32_t scratch_needed;    /* the most any kernel's prepare asked for; > scratch_bytes: some
                               * kernel runs a slower path (the runner reports it) */
  uint8_t ready;
  tm_diag diag;
} tm_method;

/* Short upper-case name of a status, e.g. "INVALID_PROGRAM". */
#if defined(__GNUC__)
__attribute__((pure)) /* no side effects: a call whose name is unused (a quiet runner) goes */
#endif
const char *tm_status_name(tm_status status);

/* Finds a kernel by operator name and overload; NULL when absent. */
tm_kernel_fn tm_registry_find(const tm_kernel_registry *registry, const char *name,
                              const char *overload);
/* The registry entry of an operator (its kernel and prepare step); NULL when absent. */
const tm_kernel_entry *tm_registry_entry(const tm_kernel_registry *registry, const char *name,
                                         const char *overload);

/* Verifies the whole program (every method). `data` must stay valid. */
tm_status tm_program_load(tm_program *program, const void *data, size_t size);

/* Number of methods and the name of one (NUL-terminated, inside the program). */
tm_status tm_program_method_name(const tm_program *program, uint32_t index, const char **name);

/* Operator `index` of a method (name and overload, NUL-terminated inside the program). */
tm_status tm_program_operator(tm_program *program, const char *method_name, uint32_t index,
                              const char **name, const char **overload);

/* Delegate `index` of a method: its backend id (NUL-terminated, inside the program). */
tm_status tm_program_delegate(tm_program *program, const char *method_name, uint32_t index, const char **id);

/*
 * Memory a method needs: `meta_bytes` for values, tensors, resolved instructions and
 * per-delegate state (TM_DELEGATE_STATE_BYTES each; 8-byte aligned buffer),
 * `arena_bytes` for planned tensors
 * (16-byte aligned buffer). `method_name` NULL selects the first method.
 */
tm_status tm_method_required_memory(tm_program *program, const char *method_name,
                                    size_t *meta_bytes, size_t *arena_bytes);

/* Builds the method inside the two buffers; resolves every operator and delegate backend in
 * `registry`, initialises each delegate and checks each DelegateCall's arguments; checks every
 * KernelCall's argument memory and runs its kernel's prepare step (tm_kernel_entry.prepare),
 * so the first execution costs what later ones do. The arena beyond the planned tensors (16-byte
 * aligned) is the kernels' shared scratch: size the arena as planned + the scratch the
 * kernels' prepare steps ask for (method->scratch_needed; torchmcu.device.plan does). */
tm_status tm_method_init(tm_method *method, tm_program *program, const char *method_name,
                         const tm_kernel_registry *registry, void *meta, size_t meta_size,
                         void *arena, size_t arena_size);

/* Input/output tensors (NULL when out of range or not a tensor). Write the tensor's data only:
 * its metadata (sizes, dim order, data pointer) is static, and kernels skip their argument
 * checks once their prepare step or a call accepted it (tm_kernel_context.arguments_verified;
 * after changing metadata, call tm_method_recheck_arguments). */
tm_tensor *tm_method_input(tm_method *method, uint32_t index);
tm_tensor *tm_method_output(tm_method *method, uint32_t index);

/* Runs the method's instructions once. */
tm_status tm_method_execute(tm_method *method);

/* For a caller that changed a value of the method after init (a scalar argument, a tensor's
 * metadata): every kernel checks its arguments again on its next call. The prepare steps of
 * tm_method_init and earlier successful calls vouch only for the values they saw; a MOVE
 * instruction does this itself. */
void tm_method_recheck_arguments(tm_method *method);

#ifdef __cplusplus
}
#endif

#endif /* TORCHMCU_RUNTIME_H */
