/* Internal: the execution-plan walker shared by program verification and method init. */
#ifndef TM_LOADER_H
#define TM_LOADER_H

#include "fb.h"
#include "torchmcu/backend.h"

/*
 * Runtime features an image may leave out (cmake/selective.cmake sets them from the image's
 * selected_operators.yaml; every one is in without a yaml and in host builds). A program that
 * uses a feature its image lacks is refused at load, naming the feature:
 *   TM_FEATURE_DELEGATES          delegates (BackendDelegate, DelegateCall)
 *   TM_FEATURE_CONTROL_FLOW       MoveCall, JumpFalseCall and the loop kernels of torch.map
 *   TM_FEATURE_STRING_LIST_VALUES String, TensorList and OptionalTensorList values
 * The code is written with plain `if (TM_FEATURE_...)`, so a feature left out costs no code.
 */
#ifndef TM_FEATURE_DELEGATES
#define TM_FEATURE_DELEGATES 1
#endif
#ifndef TM_FEATURE_CONTROL_FLOW
#define TM_FEATURE_CONTROL_FLOW 1
#endif
#ifndef TM_FEATURE_STRING_LIST_VALUES
#define TM_FEATURE_STRING_LIST_VALUES 1
#endif

enum {
  TM_INSTR_KERNEL = 1, /* numbered as program.fbs InstructionArguments */
  TM_INSTR_DELEGATE = 2,
  TM_INSTR_MOVE = 3,
  TM_INSTR_JUMP_FALSE = 4,
  TM_INSTR_FREE = 5,
};

struct tm_instruction {
  tm_kernel_fn fn;    /* KernelCall: resolved kernel */
  tm_value **args;    /* KernelCall/DelegateCall arguments */
  uint32_t nargs;
  uint32_t pos;       /* byte offset of the instruction table (diagnostics) */
  int32_t a;          /* op index / delegate index / move_from / cond / value index */
  int32_t b;          /* move_to / destination */
  uint8_t kind;
};

struct tm_delegate_slot {
  const tm_backend *backend;
  const char *id;       /* BackendDelegate.id (in the program) */
  uint32_t blob_offset; /* file offset of its blob (diagnostics) */
  uint32_t reserved;
  uint64_t state[TM_DELEGATE_STATE_BYTES / 8u]; /* the backend's state (8-byte aligned) */
};

/*
 * One pass over an execution plan. With all output pointers NULL it only
 * verifies and counts; with them set (second pass of tm_method_init) it also
 * fills the value table, tensors, int lists, instructions and kernel table.
 */
typedef struct {
  /* outputs, NULL while counting */
  tm_value *values;
  tm_tensor *tensors;
  int64_t *ints;
  const tm_value **list_items; /* items of TensorList values */
  tm_instruction *instrs;
  tm_value **argv;
  const tm_kernel_entry **ops; /* per operator: its registry entry (kernel, prepare) */
  uint32_t *io;
  uint8_t *arena;
  const tm_kernel_registry *registry;
  /* counts */
  uint32_t num_values, num_tensors, num_ints, num_list_items, num_instrs, num_args, num_ops;
  uint32_t num_inputs, num_outputs, num_chains, num_delegates;
  uint32_t arena_bytes;
} tm_walk;

tm_fb tm_program_fb(const tm_program *program);
tm_status tm_find_plan(tm_program *program, const char *name, tm_fb_table *plan);
tm_status tm_walk_plan(tm_program *program, tm_diag *diag, const tm_fb_table *plan, tm_walk *w);
/* Delegate `index` of a verified plan: id, blob in place, compile specs. */
tm_status tm_delegate_at(const tm_program *program, const tm_fb_table *plan, uint32_t index,
                         tm_delegate_info *info);
void tm_diag_set(tm_diag *d, tm_status st, const char *msg, uint32_t pos);
/* No error: empty message, no op, no index, no byte offset. */
void tm_diag_clear(tm_diag *d);

#endif /* TM_LOADER_H */
