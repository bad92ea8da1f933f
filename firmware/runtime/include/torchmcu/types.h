/*
 * Core value types shared by the runtime and every kernel.
 *
 * A loaded method is a table of tm_value. Kernels receive pointers into that
 * table, in the order of the operator's schema (ExecuTorch's operators.yaml),
 * ending with the out tensor twice (the `out` argument and the returned value),
 * as ExecuTorch programs encode KernelCall arguments.
 */
#ifndef TORCHMCU_TYPES_H
#define TORCHMCU_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every runtime entry point and every kernel returns one of these. */
typedef enum {
  TM_OK = 0,
  TM_ERR_INVALID_PROGRAM = 1,  /* malformed or inconsistent .pte */
  TM_ERR_UNSUPPORTED = 2,      /* well formed, but uses something we do not implement */
  TM_ERR_MISSING_OPERATOR = 3, /* operator not registered in this image */
  TM_ERR_INVALID_ARGUMENT = 4, /* kernel argument violates the operator's contract */
  TM_ERR_OUT_OF_MEMORY = 5,    /* a caller-provided buffer is too small */
  TM_ERR_INVALID_STATE = 6,    /* API called in the wrong order */
  TM_ERR_KERNEL = 7,           /* a kernel failed while running */
  TM_ERR_DELEGATE = 8,         /* a delegate (backend, NPU) failed while running */
  TM_ERR_TIMEOUT = 9,          /* a device did not finish in time */
} tm_status;

/* ScalarType numbers of ExecuTorch's scalar_type.fbs (the subset we handle). */
typedef enum {
  TM_BYTE = 0,  /* uint8 */
  TM_CHAR = 1,  /* int8 */
  TM_SHORT = 2, /* int16 */
  TM_INT = 3,   /* int32 */
  TM_LONG = 4,  /* int64 */
  TM_FLOAT = 6,
  TM_DOUBLE = 7,
  TM_BOOL = 11,
} tm_scalar_type;

/* Bytes per element of a scalar type; 0 for a type we do not handle. One
 * table for the loader, the kernels and the host extension. */
static inline size_t tm_element_size(uint32_t scalar_type) {
  switch (scalar_type) {
    case TM_BYTE: case TM_CHAR: case TM_BOOL: return 1;
    case TM_SHORT: return 2;
    case TM_INT: case TM_FLOAT: return 4;
    case TM_LONG: case TM_DOUBLE: return 8;
    default: return 0;
  }
}

#define TM_MAX_DIMS 6

/*
 * A tensor as kernels see it. `sizes` are in the program's logical order;
 * `dim_order` lists the dimensions from outermost to innermost in memory
 * (ExecuTorch's dim order). A 4-D activation with sizes N,C,H,W and dim order
 * 0,2,3,1 is NHWC in memory.
 */
typedef struct {
  void *data;
  int32_t sizes[TM_MAX_DIMS];
  uint8_t dim_order[TM_MAX_DIMS];
  uint8_t dim;
  uint8_t scalar_type; /* tm_scalar_type */
  uint32_t numel;
  uint32_t nbytes;
} tm_tensor;

typedef struct {
  const int64_t *items;
  uint32_t length;
} tm_int_list;

typedef enum {
  TM_VALUE_NONE = 0,
  TM_VALUE_INT = 1,
  TM_VALUE_BOOL = 2,
  TM_VALUE_DOUBLE = 3,
  TM_VALUE_TENSOR = 4,
  TM_VALUE_STRING = 5,
  TM_VALUE_INT_LIST = 6,
  TM_VALUE_DOUBLE_LIST = 7,
  TM_VALUE_BOOL_LIST = 8,
  TM_VALUE_TENSOR_LIST = 9,
  TM_VALUE_OPTIONAL_TENSOR_LIST = 10,
} tm_value_tag; /* numbered as the KernelTypes union of program.fbs */

struct tm_value;

/* A String value: bytes in place (e.g. in the .pte), not NUL-terminated. */
typedef struct {
  const char *chars;
  uint32_t length;
} tm_string;

/* A TensorList / OptionalTensorList value: pointers to the listed values (each a
 * Tensor, or None in an optional list). NULL items means the list was not resolved. */
typedef struct {
  const struct tm_value *const *items;
  uint32_t length;
} tm_value_list;

typedef struct tm_value {
  uint8_t tag; /* tm_value_tag */
  union {
    int64_t i;
    bool b;
    double d;
    tm_tensor *tensor;
    tm_int_list int_list;
    tm_string string;      /* TM_VALUE_STRING */
    tm_value_list list;    /* TM_VALUE_TENSOR_LIST, TM_VALUE_OPTIONAL_TENSOR_LIST */
  } u;
} tm_value;

/*
 * Per-call context: lets a kernel report which argument was wrong, and tells it whether
 * its arguments were already checked. A KernelCall's arguments are static (tensor metadata,
 * ints and lists are the same on every execution; only tensor data changes), so the
 * executor sets arguments_verified once this instruction's kernel has returned TM_OK in
 * this method instance with the same argument values. A kernel may then skip its argument
 * checks and take only what it computes with; results must be the same either way.
 * Callers that cannot vouch for that (a single call, e.g. the host call_kernel) pass 0.
 */
typedef struct {
  uint16_t bad_argument;      /* index of the offending argument, set on error */
  uint8_t arguments_verified; /* 1: same arguments as an earlier successful call or prepare */
  uint8_t prepare;            /* 1: a prepare call (tm_kernel_entry.prepare) */
  /* The method's shared scratch region: 16-byte aligned, `scratch_bytes` long (NULL, 0: none).
   * Its contents do not survive the call; it serves a kernel whose `scratch` argument is
   * smaller than its fast path needs (a program planned for another runtime). In a prepare
   * call (tm_kernel_entry.prepare) scratch is NULL and the kernel sets scratch_bytes to what it
   * will need of the region (0: none). */
  uint32_t scratch_bytes;
  uint8_t *scratch;
} tm_kernel_context;

typedef tm_status (*tm_kernel_fn)(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);

/*
 * A kernel's entry point and, optionally, its prepare step. tm_method_init calls `prepare` once
 * per instruction of the operator, with the instruction's arguments (static: only tensor data
 * changes later) and ctx->prepare = 1: it checks them exactly as the kernel would, sets
 * ctx->scratch_bytes to the shared scratch the kernel needs, touches no tensor data and returns
 * TM_OK or the kernel's error (bad_argument set). After a successful prepare the kernel's first
 * call already gets arguments_verified. NULL: the kernel checks its arguments on its first call.
 */
typedef struct {
  const char *name;     /* e.g. "cortex_m::quantized_linear" */
  const char *overload; /* e.g. "out" */
  tm_kernel_fn fn;
  tm_kernel_fn prepare; /* NULL: none */
} tm_kernel_entry;

/* A delegate backend (DelegateCall executor, torchmcu/backend.h). */
typedef struct tm_backend tm_backend;

/*
 * What an image can run: its kernels, and its delegate backends (looked up by the
 * BackendDelegate id of the program, e.g. "EthosUBackend"). No backends: NULL, 0.
 */
typedef struct {
  const tm_kernel_entry *entries;
  size_t count;
  const tm_backend *const *backends;
  size_t num_backends;
} tm_kernel_registry;

#ifdef __cplusplus
}
#endif

#endif /* TORCHMCU_TYPES_H */
