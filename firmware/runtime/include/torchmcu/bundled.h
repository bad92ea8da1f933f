/*
 * Bundled programs (.bpte, ExecuTorch's BundledProgram flatbuffer, identifier "BP08"):
 * a .pte plus test cases (inputs and expected outputs per method), so a device can
 * verify itself. tm_bundled_load checks the whole file once (every table, vector,
 * union tag, tensor shape and data length), so the accessors below cannot read
 * outside it. Tolerances are not in the format: callers pass rtol/atol.
 */
#ifndef TORCHMCU_BUNDLED_H
#define TORCHMCU_BUNDLED_H

#include <stdbool.h>

#include "torchmcu/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A verified bundled program: a view of the caller's bytes (which must outlive it). */
typedef struct {
  const uint8_t *data;
  size_t size;
  uint32_t root;             /* position of the BundledProgram table */
  uint32_t version;
  const uint8_t *program;    /* the embedded .pte (32-byte aligned inside the file) */
  size_t program_size;
  uint32_t suites;           /* position of the first method_test_suites entry */
  uint32_t num_suites;
  tm_diag diag;              /* byte_offset: position in the .bpte */
} tm_bundled;

/* The union members of bundled_program_schema.fbs ValueUnion. */
typedef enum {
  TM_BUNDLED_TENSOR = 1,
  TM_BUNDLED_INT = 2,
  TM_BUNDLED_BOOL = 3,
  TM_BUNDLED_DOUBLE = 4,
} tm_bundled_kind;

typedef struct {
  uint8_t kind; /* tm_bundled_kind */
  /* tensors */
  uint8_t scalar_type;
  uint8_t dim;
  int32_t sizes[TM_MAX_DIMS];
  uint8_t dim_order[TM_MAX_DIMS];
  const uint8_t *data; /* memory order (dim order applied), 16-byte aligned in the file */
  uint32_t numel;
  uint32_t nbytes;
  /* scalars */
  int64_t int_val;
  bool bool_val;
  double double_val;
} tm_bundled_value;

/* One test case of a suite: positions of its input and expected-output vectors. */
typedef struct {
  uint32_t inputs, num_inputs;
  uint32_t outputs, num_outputs;
} tm_bundled_case;

/* Verifies the whole file. `data` must stay valid. */
tm_status tm_bundled_load(tm_bundled *bundle, const void *data, size_t size);

/* The suite for `method_name`: its index and test case count (TM_ERR_INVALID_ARGUMENT: none). */
tm_status tm_bundled_find_suite(tm_bundled *bundle, const char *method_name, uint32_t *suite,
                                uint32_t *num_cases);

/* Test case `index` of suite `suite`. */
tm_status tm_bundled_get_case(tm_bundled *bundle, uint32_t suite, uint32_t index,
                              tm_bundled_case *out);

/* Input (`expected` false) or expected output (`expected` true) `index` of a test case. */
tm_status tm_bundled_get_value(tm_bundled *bundle, const tm_bundled_case *test_case, bool expected,
                               uint32_t index, tm_bundled_value *out);

/* Copies a bundled input into a method input tensor; TM_ERR_INVALID_ARGUMENT when the
 * scalar type, sizes or dim order differ (diag names which). */
tm_status tm_bundled_set_input(tm_bundled *bundle, const tm_bundled_value *value, tm_tensor *input);

/* Result of comparing one output with its expected value. */
typedef struct {
  double max_abs_error;  /* over all elements */
  uint32_t mismatches;   /* elements outside |a - e| <= atol + rtol * |e| */
  uint32_t first_index;  /* memory index of the first mismatch (UINT32_MAX: none) */
  double first_actual, first_expected;
  bool shape_ok;         /* scalar type, sizes and dim order agree */
} tm_bundled_compare_result;

/* Compares a method output with an expected tensor. Integer types use the same rule with
 * exact integer arithmetic (rtol/atol of 0 means bit-exact); NaN equals NaN. */
tm_status tm_bundled_compare(const tm_tensor *actual, const tm_bundled_value *expected,
                             double rtol, double atol, tm_bundled_compare_result *out);

#ifdef __cplusplus
}
#endif

#endif /* TORCHMCU_BUNDLED_H */
