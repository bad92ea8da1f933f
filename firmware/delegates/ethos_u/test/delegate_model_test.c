/*
 * Host test of the firmware EthosUBackend (delegate.c) on our driver and the register model of
 * the NPU (tests/c/ethos_u_model.c): loads a .pte holding one EthosUBackend DelegateCall, runs
 * it through the runtime, and prints what the NPU was given (command stream and base pointers)
 * and where the data went, as key=value lines for tests/test_ethos_u_delegate.py.
 *
 *   delegate_model_test PTE BLOB_OFFSET SCENARIO   (ok | fault | hang | u85 | unbound)
 *
 * The model cannot run a command stream, so it leaves the scratch untouched: the outputs then
 * hold what the delegate copied out of the scratch at Vela's output offsets. All buffers are
 * mapped below 4 GiB, as the U55's 32-bit address space requires.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ethos_u_model.h"
#include "ethos_u_regs.h"
#include "torchmcu/ethos_u_delegate.h"
#include "../../../runtime/src/loader.h" /* the resolved instruction layout (test only) */

static void *low_alloc(size_t n) {
  void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(2);
  }
  return p;
}

static void put_diag(const char *what, tm_status st, const tm_diag *d) {
  printf("%s=%s\n%s_message=%s\n%s_delegate=%d\n%s_op=%s\n%s_instruction=%d\n", what, tm_status_name(st), what,
         d->message ? d->message : "", what, (int)d->delegate, what, d->op_name ? d->op_name : "", what,
         (int)d->instruction);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s PTE BLOB_OFFSET SCENARIO\n", argv[0]);
    return 2;
  }
  const char *scenario = argv[3];
  FILE *f = fopen(argv[1], "rb");
  if (f == NULL) return 2;
  fseek(f, 0, SEEK_END);
  const size_t size = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *pte = low_alloc(size);
  if (fread(pte, 1, size, f) != size) return 2;
  fclose(f);

  static eu_model model;
  eu_model_init(&model);
  if (strcmp(scenario, "u85") == 0) { /* an NPU other than the one Vela compiled for */
    model.id = EU_ID_U85;
    model.config = EU_CONFIG_U85_256;
  }
  tm_ethosu_io io = {eu_model_read, eu_model_write, &model, NULL, NULL};
  static tm_ethosu_device dev;
  tm_status st = tm_ethosu_init(&dev, io, 1000);
  printf("npu_init=%s\n", tm_status_name(st));
  if (strcmp(scenario, "unbound") != 0) tm_ethos_u_delegate_bind(&dev, NULL, 0);

  tm_program program;
  tm_method method;
  size_t meta_bytes = 0, arena_bytes = 0;
  if ((st = tm_program_load(&program, pte, size)) != TM_OK ||
      (st = tm_method_required_memory(&program, NULL, &meta_bytes, &arena_bytes)) != TM_OK) {
    put_diag("load", st, &program.diag);
    return 0;
  }
  const tm_backend *backends[] = {&tm_ethos_u_backend};
  const tm_kernel_registry registry = {NULL, 0, backends, 1};
  void *meta = low_alloc(meta_bytes), *arena = low_alloc(arena_bytes);
  st = tm_method_init(&method, &program, NULL, &registry, meta, meta_bytes, arena, arena_bytes);
  put_diag("init", st, &method.diag);
  if (st != TM_OK) return 0;

  /* Inputs: a fixed pattern; scratch: 0xEE; outputs: zero. */
  const tm_instruction *ins = &method.instructions[0];
  tm_tensor *scratch = ins->args[ins->nargs - 1]->u.tensor;
  memset(scratch->data, 0xEE, scratch->nbytes);
  for (uint32_t k = 0; k < method.num_inputs; ++k) {
    tm_tensor *t = tm_method_input(&method, k);
    for (uint32_t j = 0; j < t->nbytes; ++j) ((uint8_t *)t->data)[j] = (uint8_t)(k * 37u + j * 11u + 1u);
  }
  for (uint32_t k = 0; k < method.num_outputs; ++k) {
    tm_tensor *t = tm_method_output(&method, k);
    memset(t->data, 0, t->nbytes);
  }
  if (strcmp(scenario, "fault") == 0) model.fault_bits = TM_NPU_STATUS_BUS_ERROR;
  if (strcmp(scenario, "hang") == 0) model.job_hangs = 1;
  eu_model_clear_log(&model);
  st = tm_method_execute(&method);
  put_diag("execute", st, &method.diag);
  printf("npu_starts=%u\n", (unsigned)model.starts);
  if (st != TM_OK) return 0;

  /* What the NPU was given, against the blob's own parts. */
  tm_ethos_u_blob blob;
  tm_ethos_u_error err;
  tm_ethosu_payload payload;
  const uint8_t *blob_data = pte + strtoul(argv[2], NULL, 10);
  if (tm_ethos_u_blob_parse(blob_data, size - strtoul(argv[2], NULL, 10), &blob, &err) != TM_OK ||
      tm_ethosu_parse_payload(blob.cmd, blob.cmd_size, &payload) != TM_OK) {
    printf("harness_error=blob\n");
    return 0;
  }
  printf("qbase_is_command_stream=%d\n", model.regs[TM_NPU_QBASE / 4u] == (uint32_t)(uintptr_t)payload.command_stream);
  printf("qsize_is_command_stream=%d\n", model.regs[TM_NPU_QSIZE / 4u] == (uint32_t)payload.command_stream_size);
  printf("basep0_is_weights=%d\n", model.regs[TM_NPU_BASEP(0) / 4u] == (uint32_t)(uintptr_t)blob.weights);
  printf("basep1_is_scratch=%d\n", model.regs[TM_NPU_BASEP(1) / 4u] == (uint32_t)(uintptr_t)scratch->data);
  int inputs_ok = 1, outputs_ok = 1, outputs_nonzero = 1;
  for (uint32_t k = 0; k < blob.num_inputs; ++k) {
    tm_ethos_u_io e;
    tm_ethos_u_blob_io(&blob, false, k, &e);
    const tm_tensor *t = tm_method_input(&method, k);
    inputs_ok &= memcmp((uint8_t *)scratch->data + e.offset, t->data, e.nbytes) == 0;
  }
  for (uint32_t k = 0; k < blob.num_outputs; ++k) {
    tm_ethos_u_io e;
    tm_ethos_u_blob_io(&blob, true, k, &e);
    const tm_tensor *t = tm_method_output(&method, k);
    outputs_ok &= memcmp((uint8_t *)scratch->data + e.offset, t->data, e.nbytes) == 0;
    for (uint32_t j = 0; j < e.nbytes; ++j) outputs_nonzero &= ((const uint8_t *)t->data)[j] != 0;
  }
  printf("inputs_in_scratch=%d\noutputs_from_scratch=%d\noutputs_written=%d\n", inputs_ok, outputs_ok,
         outputs_nonzero);
  return 0;
}
