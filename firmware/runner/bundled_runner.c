/*
 * The runner for a bundled program (.bpte embedded instead of a .pte; built with
 * TORCHMCU_BUNDLE): runs every test case of the first method's suite, compares each
 * output on the device and prints one line per output and a pass/fail line.
 *
 * Tolerances (build options, the format holds none; an element passes when
 * |actual - expected| <= atol + rtol * |expected|):
 *   float outputs   TM_BUNDLE_RTOL (1e-5), TM_BUNDLE_ATOL (1e-8): ExecuTorch's defaults for
 *                   verifying bundled outputs. The expected outputs torchmcu writes are the
 *                   program's own integer semantics, so a one-step int8 difference shows.
 *   integer outputs TM_BUNDLE_ATOL_INT (0): bit-exact; rtol does not apply.
 *
 * Lines (besides TM_BEGIN/TM_MEMORY/TM_OUTPUT/TM_RUN/TM_END as in main.c):
 *   TM_BUNDLE method=<name> cases=<n> rtol=<x> atol=<x> atol_int=<x>
 *   TM_CHECK case=<c> output=<i> max_abs_error=<x> mismatches=<k>/<numel> status=PASS|FAIL
 *   TM_MISMATCH case=<c> output=<i> index=<element> actual=<x> expected=<x> max_abs_error=<x>
 *   TM_BUNDLE_RESULT status=PASS|FAIL cases=<n> failed_outputs=<k>
 * Exit codes: exit_codes.h (5 on a mismatch, 6 when a test case does not fit the method).
 */
#include "bundled_runner.h"

#include <stdbool.h>
#include <string.h>

#include "exit_codes.h"
#include "load.h"
#include "tm_cmsis/platform.h"
#include "torchmcu/bundled.h"
#include "torchmcu/runtime.h"

#ifndef TM_BUNDLE_RTOL
#define TM_BUNDLE_RTOL 1e-5
#endif
#ifndef TM_BUNDLE_ATOL
#define TM_BUNDLE_ATOL 1e-8
#endif
#ifndef TM_BUNDLE_ATOL_INT
#define TM_BUNDLE_ATOL_INT 0
#endif

static tm_bundled bundle;
static tm_program program;
static tm_method method;

/* A double as d.ddddde[+-]x (6 significant digits), or 0, inf, nan. */
static void put_f64(double x) {
  if (x != x) {
    tm_puts("nan");
    return;
  }
  if (x < 0) {
    tm_puts("-");
    x = -x;
  }
  if (x == 0.0) {
    tm_puts("0");
    return;
  }
  if (x > 1.7976931348623157e308) {
    tm_puts("inf");
    return;
  }
  int32_t exp10 = 0;
  while (x >= 10.0) {
    x /= 10.0;
    ++exp10;
  }
  while (x < 1.0) {
    x *= 10.0;
    --exp10;
  }
  uint32_t digits = (uint32_t)(x * 100000.0 + 0.5); /* 100000 .. 1000000 */
  if (digits >= 1000000u) {
    digits /= 10u;
    ++exp10;
  }
  char buf[16];
  buf[0] = (char)('0' + digits / 100000u);
  buf[1] = '.';
  for (int k = 6; k >= 2; --k) {
    buf[k] = (char)('0' + digits % 10u);
    digits /= 10u;
  }
  buf[7] = 'e';
  buf[8] = '\0';
  tm_puts(buf);
  tm_put_i32(exp10);
}

static void put_diag(const char *what, tm_status st, const tm_diag *d) {
  tm_puts("TM_ERROR ");
  tm_puts(what);
  tm_puts(" status=");
  tm_puts(tm_status_name(st));
  tm_puts(" message=");
  tm_puts(d->message != NULL ? d->message : "");
  if (d->op_name != NULL) {
    tm_puts(" op=");
    tm_puts(d->op_name);
  }
  if (d->instruction != TM_DIAG_NONE) {
    tm_puts(" instruction=");
    tm_put_i32(d->instruction);
  }
  if (d->value != TM_DIAG_NONE) {
    tm_puts(" value=");
    tm_put_i32(d->value);
  }
  if (d->byte_offset != TM_DIAG_NO_OFFSET) {
    tm_puts(" byte_offset=");
    tm_put_u32(d->byte_offset);
  }
  tm_puts("\n");
}

static int case_error(uint32_t c, const char *message, uint32_t index) {
  tm_puts("TM_ERROR input case=");
  tm_put_u32(c);
  tm_puts(" index=");
  tm_put_u32(index);
  tm_puts(" message=");
  tm_puts(message);
  tm_puts("\n");
  return TM_EXIT_INPUT_ERROR;
}

static int prepare(void) {
  const size_t bundle_size = (size_t)(tm_bundle_end - tm_bundle_data);
  tm_status st = tm_bundled_load(&bundle, tm_bundle_data, bundle_size);
  if (st != TM_OK) {
    put_diag("load", st, &bundle.diag);
    return TM_EXIT_LOAD_ERROR;
  }
  const tm_runner_load_options load = {"bundle", (uint32_t)bundle_size, false, put_diag};
  return tm_runner_load(&program, &method, bundle.program, bundle.program_size, &load);
}

static int set_inputs(const tm_bundled_case *tc, uint32_t c) {
  if (tc->num_inputs != method.num_inputs) {
    return case_error(c, "test case input count differs from the method's", tc->num_inputs);
  }
  for (uint32_t i = 0; i < tc->num_inputs; ++i) {
    tm_bundled_value v;
    tm_tensor *t = tm_method_input(&method, i);
    if (t == NULL) {
      return case_error(c, "method input is not a tensor", i);
    }
    if (tm_bundled_get_value(&bundle, tc, false, i, &v) != TM_OK ||
        tm_bundled_set_input(&bundle, &v, t) != TM_OK) {
      return case_error(c, bundle.diag.message, i);
    }
  }
  return TM_EXIT_OK;
}

static bool is_float(uint8_t scalar_type) {
  return scalar_type == TM_FLOAT || scalar_type == TM_DOUBLE;
}

/* Prints and checks every output of case `c`; counts failing outputs. */
static int check_outputs(const tm_bundled_case *tc, uint32_t c, uint32_t *failed) {
  if (tc->num_outputs != method.num_outputs) {
    return case_error(c, "test case expected-output count differs from the method's",
                      tc->num_outputs);
  }
  for (uint32_t i = 0; i < tc->num_outputs; ++i) {
    tm_tensor *t = tm_method_output(&method, i);
    tm_bundled_value e;
    if (tm_bundled_get_value(&bundle, tc, true, i, &e) != TM_OK) {
      return case_error(c, bundle.diag.message, i);
    }
    if (t != NULL) {
      tm_runner_put_output(c, i, t);
    }
    const bool fl = e.kind == TM_BUNDLED_TENSOR && is_float(e.scalar_type);
    tm_bundled_compare_result r;
    tm_bundled_compare(t, &e, fl ? (double)TM_BUNDLE_RTOL : 0.0,
                       fl ? (double)TM_BUNDLE_ATOL : (double)TM_BUNDLE_ATOL_INT, &r);
    tm_puts("TM_CHECK case=");
    tm_put_u32(c);
    tm_puts(" output=");
    tm_put_u32(i);
    if (!r.shape_ok) {
      tm_puts(" status=FAIL message=scalar type, sizes or dim order differ from the expected\n");
      ++*failed;
      continue;
    }
    tm_puts(" max_abs_error=");
    put_f64(r.max_abs_error);
    tm_puts(" mismatches=");
    tm_put_u32(r.mismatches);
    tm_puts("/");
    tm_put_u32(e.numel);
    tm_puts(r.mismatches == 0 ? " status=PASS\n" : " status=FAIL\n");
    if (r.mismatches != 0) {
      tm_puts("TM_MISMATCH case=");
      tm_put_u32(c);
      tm_puts(" output=");
      tm_put_u32(i);
      tm_puts(" index=");
      tm_put_u32(r.first_index);
      tm_puts(" actual=");
      put_f64(r.first_actual);
      tm_puts(" expected=");
      put_f64(r.first_expected);
      tm_puts(" max_abs_error=");
      put_f64(r.max_abs_error);
      tm_puts("\n");
      ++*failed;
    }
  }
  return TM_EXIT_OK;
}

int tm_runner_bundled(void) {
  int code = prepare();
  if (code != TM_EXIT_OK) {
    return code;
  }
  const char *name = "";
  uint32_t suite = 0, cases = 0;
  tm_program_method_name(&program, 0, &name);
  tm_status st = tm_bundled_find_suite(&bundle, name, &suite, &cases);
  if (st != TM_OK) {
    put_diag("input", st, &bundle.diag);
    return TM_EXIT_INPUT_ERROR;
  }
  tm_puts("TM_BUNDLE method=");
  tm_puts(name);
  tm_puts(" cases=");
  tm_put_u32(cases);
  tm_puts(" rtol=");
  put_f64((double)TM_BUNDLE_RTOL);
  tm_puts(" atol=");
  put_f64((double)TM_BUNDLE_ATOL);
  tm_puts(" atol_int=");
  put_f64((double)TM_BUNDLE_ATOL_INT);
  tm_puts("\n");
  uint32_t failed = 0;
  for (uint32_t c = 0; c < cases; ++c) {
    tm_bundled_case tc;
    if (tm_bundled_get_case(&bundle, suite, c, &tc) != TM_OK) {
      put_diag("input", bundle.diag.status, &bundle.diag);
      return TM_EXIT_INPUT_ERROR;
    }
    code = set_inputs(&tc, c);
    if (code != TM_EXIT_OK) {
      return code;
    }
    uint32_t cycles, instructions;
    st = tm_runner_execute(&method, &cycles, &instructions);
    if (st != TM_OK) {
      put_diag("kernel", st, &method.diag);
      return TM_EXIT_KERNEL_ERROR;
    }
    code = check_outputs(&tc, c, &failed);
    if (code != TM_EXIT_OK) {
      return code;
    }
    tm_runner_put_run(c, cycles, instructions);
  }
  tm_puts(failed == 0 ? "TM_BUNDLE_RESULT status=PASS cases=" : "TM_BUNDLE_RESULT status=FAIL cases=");
  tm_put_u32(cases);
  tm_puts(" failed_outputs=");
  tm_put_u32(failed);
  tm_puts("\n");
  return tm_runner_finish(cases, failed);
}
