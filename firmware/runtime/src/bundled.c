/*
 * Bundled program (.bpte) reader and output comparison (see torchmcu/bundled.h).
 * Field slots follow ExecuTorch 1.5.1's bundled_program_schema.fbs in declaration
 * order; a union field takes two slots (type byte, then table).
 */
#include "torchmcu/bundled.h"

#include <string.h>

#include "str_equal.h"
#include "fb.h"
#include "loader.h"

enum { BP_VERSION = 0, BP_SUITES = 1, BP_PROGRAM = 2 };
enum { SUITE_METHOD_NAME = 0, SUITE_TEST_CASES = 1 };
enum { CASE_INPUTS = 0, CASE_EXPECTED = 1 };
enum { VALUE_TYPE = 0, VALUE_VAL = 1 };
enum { TENSOR_SCALAR_TYPE = 0, TENSOR_SIZES = 1, TENSOR_DATA = 2, TENSOR_DIM_ORDER = 3 };

#define PROGRAM_ALIGN 32u
#define DATA_ALIGN 16u

static tm_status bad(tm_bundled *b, tm_status st, const char *msg, uint32_t pos) {
  tm_diag_set(&b->diag, st, msg, pos);
  return st;
}

static tm_fb bundle_fb(const tm_bundled *b) {
  tm_fb fb = {b->data, (uint32_t)b->size, 0, ""};
  return fb;
}

static tm_status fb_error(tm_bundled *b, const tm_fb *fb) {
  return bad(b, TM_ERR_INVALID_PROGRAM, fb->err_msg, fb->err_pos);
}

/* Reads and checks one Value table. */
static tm_status read_value(tm_bundled *b, tm_fb *fb, const tm_fb_table *vt, tm_bundled_value *out) {
  uint64_t tag;
  tm_fb_table body;
  if (!tm_fb_scalar(fb, vt, VALUE_TYPE, 1, &tag) ||
      !tm_fb_subtable(fb, vt, VALUE_VAL, &body)) {
    return fb_error(b, fb);
  }
  memset(out, 0, sizeof(*out));
  if (tag < TM_BUNDLED_TENSOR || tag > TM_BUNDLED_DOUBLE) {
    return bad(b, TM_ERR_INVALID_PROGRAM, "bundled value: unknown union tag", vt->pos);
  }
  if (body.pos == 0) {
    return bad(b, TM_ERR_INVALID_PROGRAM, "bundled value: union table missing", vt->pos);
  }
  out->kind = (uint8_t)tag;
  uint64_t raw;
  switch (tag) {
    case TM_BUNDLED_INT:
      if (!tm_fb_scalar(fb, &body, 0, 8, &raw)) {
        return fb_error(b, fb);
      }
      out->int_val = (int64_t)raw;
      return TM_OK;
    case TM_BUNDLED_BOOL:
      if (!tm_fb_scalar(fb, &body, 0, 1, &raw)) {
        return fb_error(b, fb);
      }
      out->bool_val = raw != 0;
      return TM_OK;
    case TM_BUNDLED_DOUBLE:
      if (!tm_fb_scalar(fb, &body, 0, 8, &raw)) {
        return fb_error(b, fb);
      }
      memcpy(&out->double_val, &raw, 8);
      return TM_OK;
    default:
      break;
  }
  tm_fb_vec sizes, data, order;
  if (!tm_fb_scalar(fb, &body, TENSOR_SCALAR_TYPE, 1, &raw) ||
      !tm_fb_vector(fb, &body, TENSOR_SIZES, 4, &sizes) ||
      !tm_fb_vector(fb, &body, TENSOR_DATA, 1, &data) ||
      !tm_fb_vector(fb, &body, TENSOR_DIM_ORDER, 1, &order)) {
    return fb_error(b, fb);
  }
  size_t esize = tm_element_size((uint32_t)raw);
  if (esize == 0) {
    return bad(b, TM_ERR_UNSUPPORTED, "bundled tensor: unsupported scalar type", body.pos);
  }
  if (sizes.len > TM_MAX_DIMS) {
    return bad(b, TM_ERR_UNSUPPORTED, "bundled tensor: too many dimensions", sizes.pos);
  }
  if (order.len != sizes.len) {
    return bad(b, TM_ERR_INVALID_PROGRAM, "bundled tensor: dim_order length differs from sizes",
               body.pos);
  }
  out->scalar_type = (uint8_t)raw;
  out->dim = (uint8_t)sizes.len;
  uint32_t numel = 1, seen = 0;
  for (uint32_t d = 0; d < sizes.len; ++d) {
    int32_t s = tm_fb_i32(fb, sizes.pos + 4u * d);
    uint8_t o = fb->p[order.pos + d];
    if (s < 0 || !tm_mul_u32(numel, (uint32_t)s, &numel)) {
      return bad(b, TM_ERR_INVALID_PROGRAM, "bundled tensor: negative or overflowing size",
                 sizes.pos + 4u * d);
    }
    if (o >= sizes.len || (seen & (1u << o)) != 0) {
      return bad(b, TM_ERR_INVALID_PROGRAM, "bundled tensor: dim_order is not a permutation",
                 order.pos + d);
    }
    seen |= 1u << o;
    out->sizes[d] = s;
    out->dim_order[d] = o;
  }
  uint32_t nbytes;
  if (!tm_mul_u32(numel, (uint32_t)esize, &nbytes) || nbytes != data.len) {
    return bad(b, TM_ERR_INVALID_PROGRAM, "bundled tensor: data length differs from its sizes",
               data.pos);
  }
  if (data.len != 0 && (data.pos & (DATA_ALIGN - 1u)) != 0) {
    return bad(b, TM_ERR_INVALID_PROGRAM, "bundled tensor: data not 16-byte aligned", data.pos);
  }
  out->numel = numel;
  out->nbytes = nbytes;
  out->data = fb->p + data.pos;
  return TM_OK;
}

/* Checks every value of a [Value] vector. */
static tm_status check_values(tm_bundled *b, tm_fb *fb, const tm_fb_vec *v) {
  for (uint32_t i = 0; i < v->len; ++i) {
    tm_fb_table vt;
    tm_bundled_value value;
    if (!tm_fb_vec_table(fb, v, i, &vt)) {
      return fb_error(b, fb);
    }
    tm_status st = read_value(b, fb, &vt, &value);
    if (st != TM_OK) {
      b->diag.value = (int32_t)i;
      return st;
    }
  }
  return TM_OK;
}

tm_status tm_bundled_load(tm_bundled *bundle, const void *data, size_t size) {
  memset(bundle, 0, sizeof(*bundle));
  tm_diag_clear(&bundle->diag);
  bundle->data = data;
  bundle->size = size;
  if (data == NULL || size < 8) {
    return bad(bundle, TM_ERR_INVALID_PROGRAM, "bundled program: too small", 0);
  }
  if (size > UINT32_MAX) {
    return bad(bundle, TM_ERR_UNSUPPORTED, "bundled program: larger than 4 GiB", 0);
  }
  if (memcmp(bundle->data + 4, "BP08", 4) != 0) {
    return bad(bundle, TM_ERR_INVALID_PROGRAM, "bundled program: file identifier is not BP08", 4);
  }
  tm_fb fb = bundle_fb(bundle);
  tm_fb_table root;
  uint64_t version;
  tm_fb_vec suites, program;
  if (!tm_fb_root(&fb, &root) || !tm_fb_scalar(&fb, &root, BP_VERSION, 4, &version) ||
      !tm_fb_vector(&fb, &root, BP_SUITES, 4, &suites) ||
      !tm_fb_vector(&fb, &root, BP_PROGRAM, 1, &program)) {
    return fb_error(bundle, &fb);
  }
  if (program.len == 0) {
    return bad(bundle, TM_ERR_INVALID_PROGRAM, "bundled program: no program", root.pos);
  }
  if ((program.pos & (PROGRAM_ALIGN - 1u)) != 0) {
    return bad(bundle, TM_ERR_INVALID_PROGRAM, "bundled program: program not 32-byte aligned",
               program.pos);
  }
  for (uint32_t s = 0; s < suites.len; ++s) {
    tm_fb_table suite, tc;
    tm_fb_vec cases, inputs, outputs;
    const char *name;
    uint32_t name_len;
    if (!tm_fb_vec_table(&fb, &suites, s, &suite) ||
        !tm_fb_string(&fb, &suite, SUITE_METHOD_NAME, &name, &name_len) ||
        !tm_fb_vector(&fb, &suite, SUITE_TEST_CASES, 4, &cases)) {
      return fb_error(bundle, &fb);
    }
    for (uint32_t c = 0; c < cases.len; ++c) {
      if (!tm_fb_vec_table(&fb, &cases, c, &tc) ||
          !tm_fb_vector(&fb, &tc, CASE_INPUTS, 4, &inputs) ||
          !tm_fb_vector(&fb, &tc, CASE_EXPECTED, 4, &outputs)) {
        return fb_error(bundle, &fb);
      }
      tm_status st = check_values(bundle, &fb, &inputs);
      if (st == TM_OK) {
        st = check_values(bundle, &fb, &outputs);
      }
      if (st != TM_OK) {
        bundle->diag.instruction = (int32_t)c; /* the test case, reported like an index */
        return st;
      }
    }
  }
  bundle->root = root.pos;
  bundle->version = (uint32_t)version;
  bundle->program = bundle->data + program.pos;
  bundle->program_size = program.len;
  bundle->suites = suites.pos;
  bundle->num_suites = suites.len;
  return TM_OK;
}

static tm_fb_vec suites_vec(const tm_bundled *b) {
  tm_fb_vec v = {b->suites, b->num_suites};
  return v;
}

tm_status tm_bundled_find_suite(tm_bundled *bundle, const char *method_name, uint32_t *suite,
                                uint32_t *num_cases) {
  if (bundle->program == NULL) {
    return bad(bundle, TM_ERR_INVALID_STATE, "bundled program not loaded", TM_DIAG_NO_OFFSET);
  }
  tm_fb fb = bundle_fb(bundle);
  tm_fb_vec suites = suites_vec(bundle);
  for (uint32_t s = 0; s < suites.len; ++s) {
    tm_fb_table t;
    tm_fb_vec cases;
    const char *name;
    uint32_t len;
    if (!tm_fb_vec_table(&fb, &suites, s, &t) ||
        !tm_fb_string(&fb, &t, SUITE_METHOD_NAME, &name, &len) ||
        !tm_fb_vector(&fb, &t, SUITE_TEST_CASES, 4, &cases)) {
      return fb_error(bundle, &fb);
    }
    if (tm_str_equal(name, method_name)) {
      *suite = s;
      *num_cases = cases.len;
      return TM_OK;
    }
  }
  return bad(bundle, TM_ERR_INVALID_ARGUMENT, "bundled program: no test suite for the method",
             TM_DIAG_NO_OFFSET);
}

tm_status tm_bundled_get_case(tm_bundled *bundle, uint32_t suite, uint32_t index,
                              tm_bundled_case *out) {
  if (bundle->program == NULL) {
    return bad(bundle, TM_ERR_INVALID_STATE, "bundled program not loaded", TM_DIAG_NO_OFFSET);
  }
  tm_fb fb = bundle_fb(bundle);
  tm_fb_vec suites = suites_vec(bundle), cases, inputs, outputs;
  tm_fb_table t, tc;
  if (suite >= suites.len) {
    return bad(bundle, TM_ERR_INVALID_ARGUMENT, "test suite index out of range", TM_DIAG_NO_OFFSET);
  }
  if (!tm_fb_vec_table(&fb, &suites, suite, &t) ||
      !tm_fb_vector(&fb, &t, SUITE_TEST_CASES, 4, &cases)) {
    return fb_error(bundle, &fb);
  }
  if (index >= cases.len) {
    return bad(bundle, TM_ERR_INVALID_ARGUMENT, "test case index out of range", cases.pos);
  }
  if (!tm_fb_vec_table(&fb, &cases, index, &tc) ||
      !tm_fb_vector(&fb, &tc, CASE_INPUTS, 4, &inputs) ||
      !tm_fb_vector(&fb, &tc, CASE_EXPECTED, 4, &outputs)) {
    return fb_error(bundle, &fb);
  }
  out->inputs = inputs.pos;
  out->num_inputs = inputs.len;
  out->outputs = outputs.pos;
  out->num_outputs = outputs.len;
  return TM_OK;
}

tm_status tm_bundled_get_value(tm_bundled *bundle, const tm_bundled_case *test_case, bool expected,
                               uint32_t index, tm_bundled_value *out) {
  tm_fb fb = bundle_fb(bundle);
  tm_fb_vec v = {expected ? test_case->outputs : test_case->inputs,
                 expected ? test_case->num_outputs : test_case->num_inputs};
  tm_fb_table vt;
  if (index >= v.len) {
    return bad(bundle, TM_ERR_INVALID_ARGUMENT, "bundled value index out of range", v.pos);
  }
  if (!tm_fb_vec_table(&fb, &v, index, &vt)) {
    return fb_error(bundle, &fb);
  }
  return read_value(bundle, &fb, &vt, out);
}

/* Scalar type, rank, sizes and dim order agree. */
static bool same_shape(const tm_tensor *t, const tm_bundled_value *v) {
  if (v->kind != TM_BUNDLED_TENSOR || t->scalar_type != v->scalar_type || t->dim != v->dim ||
      t->nbytes != v->nbytes) {
    return false;
  }
  for (uint32_t d = 0; d < v->dim; ++d) {
    if (t->sizes[d] != v->sizes[d] || t->dim_order[d] != v->dim_order[d]) {
      return false;
    }
  }
  return true;
}

tm_status tm_bundled_set_input(tm_bundled *bundle, const tm_bundled_value *value, tm_tensor *input) {
  if (!same_shape(input, value)) {
    return bad(bundle, TM_ERR_INVALID_ARGUMENT,
               "bundled input differs from the method input in scalar type, sizes or dim order",
               (uint32_t)(value->data != NULL ? value->data - bundle->data : 0));
  }
  if (value->nbytes != 0) {
    if (input->data == NULL) { /* an unplanned input of a hostile program: nowhere to copy */
      return bad(bundle, TM_ERR_INVALID_ARGUMENT, "method input has no memory (not planned)",
                 (uint32_t)(value->data - bundle->data));
    }
    memcpy(input->data, value->data, value->nbytes);
  }
  return TM_OK;
}

/* Element `i` of a tensor's memory as a double (integers exact up to 2^53). */
static double element(const void *data, uint8_t scalar_type, uint32_t i) {
  const uint8_t *p = data;
  switch (scalar_type) {
    case TM_BYTE: return (double)p[i];
    case TM_CHAR: return (double)(int8_t)p[i];
    case TM_BOOL: return p[i] != 0 ? 1.0 : 0.0;
    case TM_SHORT: { int16_t v; memcpy(&v, p + 2u * i, 2); return (double)v; }
    case TM_INT: { int32_t v; memcpy(&v, p + 4u * i, 4); return (double)v; }
    case TM_LONG: { int64_t v; memcpy(&v, p + 8u * i, 8); return (double)v; }
    case TM_FLOAT: { float v; memcpy(&v, p + 4u * i, 4); return (double)v; }
    case TM_DOUBLE: { double v; memcpy(&v, p + 8u * i, 8); return v; }
    default: return 0.0;
  }
}

tm_status tm_bundled_compare(const tm_tensor *actual, const tm_bundled_value *expected,
                             double rtol, double atol, tm_bundled_compare_result *out) {
  memset(out, 0, sizeof(*out));
  out->first_index = UINT32_MAX;
  if (actual != NULL && actual->data == NULL && actual->nbytes != 0) {
    return TM_ERR_INVALID_ARGUMENT; /* an output without memory (not planned): nothing to read */
  }
  out->shape_ok = actual != NULL && same_shape(actual, expected);
  if (!out->shape_ok) {
    out->mismatches = 1;
    return TM_OK;
  }
  for (uint32_t i = 0; i < expected->numel; ++i) {
    double a = element(actual->data, expected->scalar_type, i);
    double e = element(expected->data, expected->scalar_type, i);
    double err;
    bool ok;
    if (a != a || e != e) { /* NaN: equal only to NaN */
      ok = (a != a) && (e != e);
      err = ok ? 0.0 : __builtin_inf();
    } else {
      err = __builtin_fabs(a - e);
      ok = err <= atol + rtol * __builtin_fabs(e);
    }
    if (err > out->max_abs_error || err != err) {
      out->max_abs_error = err;
    }
    if (!ok) {
      if (out->mismatches == 0) {
        out->first_index = i;
        out->first_actual = a;
        out->first_expected = e;
      }
      ++out->mismatches;
    }
  }
  return TM_OK;
}
