/*
 * The torchmcu runner: loads the .pte embedded in the image, feeds inputs
 * (the embedded samples when present, otherwise a deterministic pattern),
 * runs the method, prints every output as one machine-readable line and
 * exits with a status per failure class (exit_codes.h).
 *
 * Output lines (the host parses them; see host/torchmcu/device/run.py):
 *   TM_BEGIN board=<name>
 *   TM_MEMORY meta=<bytes used>/<bytes reserved> arena=<used>/<reserved> program=<bytes>
 *   TM_OUTPUT <sample> <index> <scalar type> <nbytes> <hex of the tensor memory>
 *   TM_RUN <sample> cycles=<n> instructions=<n>       (0 where the core has no PMU)
 *   TM_TOKEN <sample> <step> <token> cycles=<n> instructions=<n>  (generation images only:
 *                                                  generate.h; TM_RUN then carries zeros)
 *   TM_ERROR <class> status=<name> message=<...> [op=<name>] [instruction=<i>] ...
 *   TM_END status=OK samples=<n>
 *
 * An image holding several programs (tm_runner_programs) runs each in turn with
 * the one kernel registry, in the same buffers. Each program's lines above (from
 * TM_MEMORY to its last TM_RUN or TM_ERROR) come between
 *   TM_PROGRAM <index> name=<name>
 *   TM_PROGRAM_END <index> status=OK samples=<n>
 *                          | status=OUTPUT_MISMATCH mismatches=<n> | status=FAILED exit=<code>
 * and the image ends with
 *   TM_END status=OK programs=<n>  |  TM_END status=FAILED exit=<code> failed=<n> programs=<n>
 * exiting with the exit code of the first program that failed (later ones still run).
 */
#include <stdbool.h>
#include <string.h>

#include "bundled_runner.h"
#include "exit_codes.h"
#include "generate.h"
#include "io_blob.h"
#include "load.h"
#include "tm_cmsis/platform.h"
#include "torchmcu/runtime.h"

#ifndef TM_BOARD_NAME
#define TM_BOARD_NAME "unknown"
#endif

static tm_program program;
static tm_method method;

static void put_kv(const char *key, const char *value) {
  tm_puts(" ");
  tm_puts(key);
  tm_puts("=");
  tm_puts(value);
}

static void put_kv_i32(const char *key, int32_t value) {
  tm_puts(" ");
  tm_puts(key);
  tm_puts("=");
  tm_put_i32(value);
}

/* Prints a diagnostic line and returns the exit code, so callers can `return fail(...)`. */
static int fail(int code, const char *what, tm_status status, const tm_diag *diag) {
  tm_puts("TM_ERROR ");
  tm_puts(what);
  put_kv("status", tm_status_name(status));
  if (diag != NULL) {
    put_kv("message", diag->message != NULL ? diag->message : "");
    if (diag->op_name != NULL) {
      put_kv("op", diag->op_name);
    }
    if (diag->op_overload != NULL) {
      put_kv("overload", diag->op_overload);
    }
    if (diag->instruction != TM_DIAG_NONE) {
      put_kv_i32("instruction", diag->instruction);
    }
    if (diag->value != TM_DIAG_NONE) {
      put_kv_i32("value", diag->value);
    }
    if (diag->argument != TM_DIAG_NONE) {
      put_kv_i32("argument", diag->argument);
    }
    if (diag->byte_offset != TM_DIAG_NO_OFFSET) {
      tm_puts(" byte_offset=");
      tm_put_u32(diag->byte_offset);
    }
  }
  tm_puts("\n");
  return code;
}

/* fail() as the load helper's error printer (the helper picks the exit code). */
static void put_fail(const char *what, tm_status status, const tm_diag *diag) {
  (void)fail(TM_EXIT_LOAD_ERROR, what, status, diag);
}

/* The default input: a fixed linear congruential sequence, reproduced on the host
 * (torchmcu.device.default_inputs). Floats are k / 2^23 - 1, exact in float32. */
static void fill_default(tm_tensor *t, uint32_t input_index) {
  uint32_t state = 0x9E3779B9u ^ (input_index * 0x85EBCA6Bu);
  uint8_t *bytes = t->data;
  for (uint32_t i = 0; i < t->numel; ++i) {
    state = state * 1664525u + 1013904223u;
    switch (t->scalar_type) {
      case TM_FLOAT: {
        float v = (float)(int32_t)((state >> 8) - 0x800000u) / 8388608.0f;
        memcpy(bytes + 4u * i, &v, 4);
        break;
      }
      case TM_CHAR:
      case TM_BYTE:
      case TM_BOOL:
        bytes[i] = (uint8_t)(state >> 24);
        if (t->scalar_type == TM_BOOL) {
          bytes[i] &= 1u;
        }
        break;
      default: {
        size_t width = t->nbytes / (t->numel ? t->numel : 1u);
        for (size_t b = 0; b < width; ++b) {
          bytes[width * i + b] = (uint8_t)(state >> (8u * (b & 3u)));
        }
        break;
      }
    }
  }
}

static int set_inputs(tm_io_blob *blob, uint32_t sample) {
  const uint32_t n = method.num_inputs;
  for (uint32_t i = 0; i < n; ++i) {
    tm_tensor *t = tm_method_input(&method, i);
    if (t == NULL) {
      tm_puts("TM_ERROR input index=");
      tm_put_u32(i);
      tm_puts(" message=not a tensor\n");
      return TM_EXIT_INPUT_ERROR;
    }
    if (blob->samples == 0) {
      fill_default(t, i);
      continue;
    }
    const uint8_t *bytes;
    uint32_t nbytes;
    if (tm_io_blob_next(blob, &bytes, &nbytes) != 0 || nbytes != t->nbytes) {
      tm_puts("TM_ERROR input sample=");
      tm_put_u32(sample);
      tm_puts(" index=");
      tm_put_u32(i);
      tm_puts(" message=embedded input has ");
      tm_put_u32(nbytes);
      tm_puts(" bytes, the method expects ");
      tm_put_u32(t->nbytes);
      tm_puts("\n");
      return TM_EXIT_INPUT_ERROR;
    }
    memcpy(t->data, bytes, nbytes);
  }
  return TM_EXIT_OK;
}

/* Prints the outputs of one run; compares them with the expected records when present. */
static int report_outputs(tm_io_blob *blob, uint32_t sample, uint32_t *mismatches) {
  for (uint32_t i = 0; i < method.num_outputs; ++i) {
    tm_tensor *t = tm_method_output(&method, i);
    if (t == NULL) {
      continue;
    }
    tm_runner_put_output(sample, i, t);
    if (blob->expected != 0) {
      const uint8_t *bytes;
      uint32_t nbytes;
      if (tm_io_blob_next(blob, &bytes, &nbytes) != 0) {
        tm_puts("TM_ERROR input message=expected outputs truncated\n");
        return TM_EXIT_INPUT_ERROR;
      }
      if (nbytes != t->nbytes || memcmp(bytes, t->data, nbytes) != 0) {
        tm_puts("TM_MISMATCH sample=");
        tm_put_u32(sample);
        tm_puts(" output=");
        tm_put_u32(i);
        tm_puts("\n");
        ++*mismatches;
      }
    }
  }
  return TM_EXIT_OK;
}

#if defined(TM_RUNNER_FAULT_TEST)
/* Test-only image: a load through a pointer into unmapped address space. */
static int provoke_fault(void) {
  volatile uint32_t *bad = (volatile uint32_t *)(uintptr_t)TM_RUNNER_FAULT_ADDRESS;
  tm_puts("TM_FAULT_TEST reading ");
  tm_put_hex32((uint32_t)(uintptr_t)bad);
  tm_puts("\n");
  return (int)*bad;
}
#endif

/* Loads, feeds and runs one embedded program, printing its outputs. Returns its exit code
 * (TM_EXIT_OK also when outputs differ from the expected ones: see *mismatches). */
static int run_program(const tm_runner_program *p, uint32_t *samples_run, uint32_t *mismatches) {
  *samples_run = 0;
  *mismatches = 0;
  const tm_runner_load_options load = {NULL, 0, true, put_fail};
  int code = tm_runner_load(&program, &method, p->data, (size_t)(p->end - p->data), &load);
  if (code != TM_EXIT_OK) {
    return code;
  }

  tm_io_blob blob;
  if (tm_io_blob_open(&blob, p->io, (size_t)(p->io_end - p->io)) != 0 ||
      (blob.samples != 0 && blob.inputs != method.num_inputs) ||
      (blob.expected != 0 && blob.expected != method.num_outputs)) {
    tm_puts("TM_ERROR input message=embedded inputs blob is malformed or does not match the method\n");
    return TM_EXIT_INPUT_ERROR;
  }
  const uint32_t samples = blob.samples != 0 ? blob.samples : 1u;
  for (uint32_t s = 0; s < samples; ++s) {
    code = set_inputs(&blob, s);
    if (code != TM_EXIT_OK) {
      return code;
    }
    uint32_t cycles = 0, instructions = 0;
#if defined(TM_RUNNER_GENERATE)
    tm_status st = TM_OK;
    code = tm_runner_generate(&method, s, &st);
    if (code == TM_EXIT_KERNEL_ERROR) {
      return fail(code, "kernel", st, &method.diag);
    }
    if (code != TM_EXIT_OK) {
      return code;
    }
#else
    const tm_status st = tm_runner_execute(&method, &cycles, &instructions);
    if (st != TM_OK) {
      return fail(TM_EXIT_KERNEL_ERROR, "kernel", st, &method.diag);
    }
#endif
    code = report_outputs(&blob, s, mismatches);
    if (code != TM_EXIT_OK) {
      return code;
    }
    tm_runner_put_run(s, cycles, instructions);
    ++*samples_run;
  }
  return TM_EXIT_OK;
}

/* Every program in turn, each between TM_PROGRAM / TM_PROGRAM_END lines. */
static int run_all_programs(void) {
  int first_failure = TM_EXIT_OK;
  uint32_t failed = 0;
  for (uint32_t i = 0; i < tm_runner_program_count; ++i) {
    const tm_runner_program *p = &tm_runner_programs[i];
    tm_puts("TM_PROGRAM ");
    tm_put_u32(i);
    put_kv("name", p->name);
    tm_puts("\n");
    uint32_t samples, mismatches;
    int code = run_program(p, &samples, &mismatches);
    tm_puts("TM_PROGRAM_END ");
    tm_put_u32(i);
    if (code == TM_EXIT_OK && mismatches != 0) {
      code = TM_EXIT_OUTPUT_MISMATCH;
      tm_puts(" status=OUTPUT_MISMATCH mismatches=");
      tm_put_u32(mismatches);
    } else if (code == TM_EXIT_OK) {
      tm_puts(" status=OK samples=");
      tm_put_u32(samples);
    } else {
      put_kv_i32("status=FAILED exit", code);
    }
    tm_puts("\n");
    if (code != TM_EXIT_OK) {
      ++failed;
      if (first_failure == TM_EXIT_OK) {
        first_failure = code;
      }
    }
  }
  if (failed == 0) {
    tm_puts("TM_END status=OK programs=");
  } else {
    tm_puts("TM_END status=FAILED exit=");
    tm_put_i32(first_failure);
    tm_puts(" failed=");
    tm_put_u32(failed);
    tm_puts(" programs=");
  }
  tm_put_u32(tm_runner_program_count);
  tm_puts("\n");
  return first_failure;
}

int main(void) {
  tm_puts("TM_BEGIN board=" TM_BOARD_NAME "\n");
#if defined(TM_RUNNER_FAULT_TEST)
  return provoke_fault();
#endif
#if defined(TM_RUNNER_BUNDLED)
  return tm_runner_bundled(); /* the embedded blob is a .bpte: check its test cases */
#endif
  if (tm_runner_program_count != 1u) {
    return run_all_programs();
  }
  uint32_t samples, mismatches;
  const int code = run_program(&tm_runner_programs[0], &samples, &mismatches);
  if (code != TM_EXIT_OK) {
    return code;
  }
  return tm_runner_finish(samples, mismatches);
}
