#include "load.h"

#include "bench_markers.h"
#include "exit_codes.h"
#include "profile.h"
#include "tm_cmsis/platform.h"

extern const tm_kernel_registry tm_all_kernels;
/* Buffers sized from the program's memory plan (linker script). */
extern uint8_t __tm_meta_start[], __tm_meta_end[];
extern uint8_t __tm_arena_start[], __tm_arena_end[];

int tm_runner_load(tm_program *program, tm_method *method, const uint8_t *data, size_t size,
                   const tm_runner_load_options *options) {
  tm_status st = tm_program_load(program, data, size);
  size_t meta_bytes = 0, arena_bytes = 0;
  if (st == TM_OK) {
    st = tm_method_required_memory(program, NULL, &meta_bytes, &arena_bytes);
  }
  if (st != TM_OK) {
    options->put_diag("load", st, &program->diag);
    return TM_EXIT_LOAD_ERROR;
  }
  const size_t meta_reserved = (size_t)(__tm_meta_end - __tm_meta_start);
  const size_t arena_reserved = (size_t)(__tm_arena_end - __tm_arena_start);
  tm_puts("TM_MEMORY meta=");
  tm_put_u32((uint32_t)meta_bytes);
  tm_puts("/");
  tm_put_u32((uint32_t)meta_reserved);
  tm_puts(" arena=");
  tm_put_u32((uint32_t)arena_bytes);
  tm_puts("/");
  tm_put_u32((uint32_t)arena_reserved);
  tm_puts(" program=");
  tm_put_u32((uint32_t)size);
  if (options->extra_key != NULL) {
    tm_puts(" ");
    tm_puts(options->extra_key);
    tm_puts("=");
    tm_put_u32(options->extra_value);
  }
  tm_puts("\n");
  if (options->check_reserved && (meta_bytes > meta_reserved || arena_bytes > arena_reserved)) {
    tm_puts("TM_ERROR load status=OUT_OF_MEMORY message=the image reserves less memory than the "
            "program needs (rebuild the firmware for this .pte)\n");
    return TM_EXIT_LOAD_ERROR;
  }
  st = tm_method_init(method, program, NULL, &tm_all_kernels, __tm_meta_start, meta_reserved,
                      __tm_arena_start, arena_reserved);
  if (st == TM_ERR_MISSING_OPERATOR) {
    options->put_diag("missing_operator", st, &method->diag);
    return TM_EXIT_MISSING_OPERATOR;
  }
  if (st != TM_OK) {
    options->put_diag("load", st, &method->diag);
    return TM_EXIT_LOAD_ERROR;
  }
  if (method->scratch_needed > method->scratch_bytes) { /* never for an image built for the program */
    tm_puts("TM_SCRATCH needed=");
    tm_put_u32(method->scratch_needed);
    tm_puts(" available=");
    tm_put_u32(method->scratch_bytes);
    tm_puts(" (kernels short of it run their scalar path)\n");
  }
  return TM_EXIT_OK;
}

tm_status tm_runner_execute(tm_method *method, uint32_t *cycles, uint32_t *instructions) {
  tm_profile_begin_run(method); /* TORCHMCU_PROFILE only: calibrate the marks (profile.h) */
  tm_counters_start();
  tm_bench_begin(); /* one inference between the markers (tools/qemu_icount) */
  const tm_status st = tm_method_execute(method);
  tm_bench_end();
  tm_counters_read(cycles, instructions);
  return st;
}

void tm_runner_put_run(uint32_t sample, uint32_t cycles, uint32_t instructions) {
  tm_puts("TM_RUN ");
  tm_put_u32(sample);
  tm_puts(" cycles=");
  tm_put_u32(cycles);
  tm_puts(" instructions=");
  tm_put_u32(instructions);
  tm_puts("\n");
  tm_profile_put_run(sample); /* TORCHMCU_PROFILE only: the run's TM_PROF lines */
}

void tm_runner_put_output(uint32_t sample, uint32_t index, const tm_tensor *t) {
  tm_puts("TM_OUTPUT ");
  tm_put_u32(sample);
  tm_puts(" ");
  tm_put_u32(index);
  tm_puts(" ");
  tm_put_u32(t->scalar_type);
  tm_puts(" ");
  tm_put_u32(t->nbytes);
  tm_puts(" ");
  tm_put_hex_bytes(t->data, t->nbytes);
  tm_puts("\n");
}

int tm_runner_finish(uint32_t samples, uint32_t mismatches) {
  if (mismatches != 0) {
    tm_puts("TM_END status=OUTPUT_MISMATCH mismatches=");
    tm_put_u32(mismatches);
    tm_puts("\n");
    return TM_EXIT_OUTPUT_MISMATCH;
  }
  tm_puts("TM_END status=OK samples=");
  tm_put_u32(samples);
  tm_puts("\n");
  return TM_EXIT_OK;
}
