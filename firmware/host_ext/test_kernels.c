/*
 * Host-only kernels for testing the runtime and the extension itself
 * (namespace torchmcu_test::, never built into firmware):
 *   add.out(Tensor self, Tensor other, int alpha, *, Tensor out)
 *       int8: saturate(self + alpha * other); int32/float32: plain.
 *   describe.out(any..., *, Tensor out)  out int64: a record of what arrived
 *       (see tests/test_native_call_kernel.py for the layout).
 *   fail.out(Tensor x, int status, int bad_argument, *, Tensor out)
 *       returns `status` and reports `bad_argument`.
 *   verified.out(Tensor x, *, Tensor out)  out int64[1]: ctx->arguments_verified of this call.
 */
#include <math.h>
#include <string.h>

#include "torchmcu/types.h"

static bool is_tensor(const tm_value *v) { return v->tag == TM_VALUE_TENSOR; }

static tm_status reject(tm_kernel_context *ctx, size_t arg) {
  ctx->bad_argument = (uint16_t)arg;
  return TM_ERR_INVALID_ARGUMENT;
}

static tm_status test_add(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  if (nargs != 5) return reject(ctx, nargs);
  for (size_t k = 0; k < 5; ++k) {
    if (k != 2 && !is_tensor(args[k])) return reject(ctx, k);
  }
  if (args[2]->tag != TM_VALUE_INT) return reject(ctx, 2);
  const tm_tensor *a = args[0]->u.tensor, *b = args[1]->u.tensor;
  tm_tensor *out = args[3]->u.tensor;
  int64_t alpha = args[2]->u.i;
  if (b->scalar_type != a->scalar_type || b->numel != a->numel) return reject(ctx, 1);
  if (out->scalar_type != a->scalar_type || out->numel != a->numel) return reject(ctx, 3);
  for (uint32_t i = 0; i < a->numel; ++i) {
    switch (a->scalar_type) {
      case TM_CHAR: {
        int64_t v = ((const int8_t *)a->data)[i] + alpha * ((const int8_t *)b->data)[i];
        ((int8_t *)out->data)[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
        break;
      }
      case TM_INT:
        ((int32_t *)out->data)[i] =
            (int32_t)(((const int32_t *)a->data)[i] + alpha * ((const int32_t *)b->data)[i]);
        break;
      case TM_FLOAT:
        ((float *)out->data)[i] = ((const float *)a->data)[i] + (float)alpha * ((const float *)b->data)[i];
        break;
      default:
        return reject(ctx, 0);
    }
  }
  return TM_OK;
}

static int64_t first_element(const tm_tensor *t) {
  if (t->numel == 0 || t->data == NULL) return 0;
  switch (t->scalar_type) {
    case TM_BYTE: return ((const uint8_t *)t->data)[0];
    case TM_CHAR: return ((const int8_t *)t->data)[0];
    case TM_BOOL: return ((const uint8_t *)t->data)[0];
    case TM_SHORT: return ((const int16_t *)t->data)[0];
    case TM_INT: return ((const int32_t *)t->data)[0];
    case TM_LONG: return ((const int64_t *)t->data)[0];
    case TM_FLOAT: return (int64_t)llround(((const float *)t->data)[0] * 1000.0f);
    case TM_DOUBLE: return (int64_t)llround(((const double *)t->data)[0] * 1000.0);
    default: return 0;
  }
}

/* Record: nargs, out-passed-twice flag, then per argument before the out pair: tag, payload. */
static tm_status test_describe(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  if (nargs < 2 || !is_tensor(args[nargs - 1])) return reject(ctx, nargs ? nargs - 1 : 0);
  tm_tensor *out = args[nargs - 1]->u.tensor;
  if (out->scalar_type != TM_LONG) return reject(ctx, nargs - 1);
  int64_t *o = out->data;
  uint32_t n = 0, cap = out->numel;
#define PUT(x)                                         \
  do {                                                 \
    if (n >= cap) return reject(ctx, nargs - 1);       \
    o[n++] = (int64_t)(x);                             \
  } while (0)
  PUT(nargs);
  PUT(args[nargs - 1] == args[nargs - 2]);
  for (size_t k = 0; k + 2 < nargs; ++k) {
    const tm_value *v = args[k];
    PUT(v->tag);
    switch (v->tag) {
      case TM_VALUE_INT: PUT(v->u.i); break;
      case TM_VALUE_BOOL: PUT(v->u.b); break;
      case TM_VALUE_DOUBLE: PUT(llround(v->u.d * 1000.0)); break;
      case TM_VALUE_INT_LIST:
        PUT(v->u.int_list.length);
        for (uint32_t i = 0; i < v->u.int_list.length; ++i) PUT(v->u.int_list.items[i]);
        break;
      case TM_VALUE_TENSOR: {
        const tm_tensor *t = v->u.tensor;
        PUT(t->scalar_type);
        PUT(t->dim);
        for (uint32_t d = 0; d < t->dim; ++d) PUT(t->sizes[d]);
        for (uint32_t d = 0; d < t->dim; ++d) PUT(t->dim_order[d]);
        PUT(t->numel);
        PUT(t->nbytes);
        PUT(first_element(t));
        break;
      }
      default:
        break;
    }
  }
#undef PUT
  return TM_OK;
}

static tm_status test_fail(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  if (nargs != 5 || args[1]->tag != TM_VALUE_INT || args[2]->tag != TM_VALUE_INT) return reject(ctx, 0);
  ctx->bad_argument = (uint16_t)args[2]->u.i;
  return (tm_status)args[1]->u.i;
}

static tm_status test_verified(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  if (nargs != 3 || !is_tensor(args[2])) return reject(ctx, nargs ? nargs - 1 : 0);
  tm_tensor *out = args[2]->u.tensor;
  if (out->scalar_type != TM_LONG || out->numel != 1) return reject(ctx, 1);
  ((int64_t *)out->data)[0] = ctx->arguments_verified;
  return TM_OK;
}

static const tm_kernel_entry kTestKernels[] = {
    {"torchmcu_test::add", "out", test_add, NULL},
    {"torchmcu_test::describe", "out", test_describe, NULL},
    {"torchmcu_test::fail", "out", test_fail, NULL},
    {"torchmcu_test::verified", "out", test_verified, NULL},
};

const tm_kernel_registry tm_host_test_kernels = {kTestKernels, sizeof(kTestKernels) / sizeof(kTestKernels[0]),
                                                  NULL, 0};
