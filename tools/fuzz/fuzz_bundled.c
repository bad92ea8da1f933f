/*
 * Fuzz target: the bundled-program (.bpte) reader. When tm_bundled_load accepts the input,
 * every suite, case, input and expected value must be readable; tensor values have every byte
 * read; the embedded program is prepared with probe kernels, bundled inputs are copied into
 * its inputs and its outputs compared with the expected values.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "torchmcu/bundled.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint32_t g_sink;

static void touch(const tm_bundled_value *v) {
  uint32_t acc = 0;
  if (v->kind == TM_BUNDLED_TENSOR && v->data != NULL) {
    for (uint32_t i = 0; i < v->nbytes; ++i) acc += v->data[i];
  }
  g_sink = acc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *copy = malloc(size ? size : 1);
  if (copy == NULL) return 0;
  if (size) memcpy(copy, data, size);
  tm_bundled b;
  if (tm_bundled_load(&b, copy, size) == TM_OK) {
    tm_fuzz_method f;
    tm_status prepared = tm_fuzz_prepare(&f, b.program, b.program_size, NULL, tm_probe_kernel);
    const char *name = NULL;
    uint32_t suite = 0, cases = 0;
    if (prepared == TM_OK && tm_program_method_name(&f.program, 0, &name) == TM_OK &&
        tm_bundled_find_suite(&b, name, &suite, &cases) == TM_OK) {
      for (uint32_t c = 0; c < cases && c < 8u; ++c) {
        tm_bundled_case tc;
        if (tm_bundled_get_case(&b, suite, c, &tc) != TM_OK) continue;
        for (uint32_t i = 0; i < tc.num_inputs; ++i) {
          tm_bundled_value v;
          if (tm_bundled_get_value(&b, &tc, false, i, &v) != TM_OK) continue;
          touch(&v);
          tm_tensor *in = tm_method_input(&f.method, i);
          if (in != NULL) (void)tm_bundled_set_input(&b, &v, in);
        }
        (void)tm_method_execute(&f.method);
        for (uint32_t i = 0; i < tc.num_outputs; ++i) {
          tm_bundled_value v;
          tm_bundled_compare_result r;
          if (tm_bundled_get_value(&b, &tc, true, i, &v) != TM_OK) continue;
          touch(&v);
          const tm_tensor *out = tm_method_output(&f.method, i);
          if (out != NULL && v.kind == TM_BUNDLED_TENSOR) (void)tm_bundled_compare(out, &v, 1e-5, 1e-8, &r);
        }
      }
    }
    tm_fuzz_release(&f);
  }
  free(copy);
  return 0;
}
