/*
 * Fuzz target: the Ethos-U delegate blob parser/verifier (firmware/delegates/ethos_u). A blob
 * that parses must be safe to use as the delegate uses it: every block view readable, every
 * I/O record consistent, a DelegateCall built to the blob's description accepted by the call
 * check, and the scratch copies of the firmware delegate in bounds. A rejected blob must name
 * an offset inside the input.
 */
#include <stdlib.h>
#include <string.h>

#include "torchmcu/ethos_u_blob.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_IO 8u
#define MAX_ARENA ((size_t)1 << 20)

static uint8_t touch(const uint8_t *p, size_t n) {
  uint8_t acc = 0;
  for (size_t i = 0; i < n; ++i) acc ^= p[i];
  return acc;
}

static uint8_t scalar_type_of(int32_t elem_size) {
  return elem_size == 1 ? TM_CHAR : elem_size == 2 ? TM_SHORT : TM_INT;
}

/* Builds [inputs..., outputs..., scratch] in one arena, as the planner would, and runs the call
 * check and the delegate's scratch copies over it. */
static void exercise_call(const tm_ethos_u_blob *b) {
  const uint32_t n = b->num_inputs + b->num_outputs;
  if (b->num_inputs > MAX_IO || b->num_outputs > MAX_IO) return;
  tm_tensor tensors[2 * MAX_IO + 1];
  tm_value values[2 * MAX_IO + 1];
  tm_value *args[2 * MAX_IO + 1];
  tm_ethos_u_io io[2 * MAX_IO];
  size_t at = 0, offs[2 * MAX_IO + 1];
  for (uint32_t k = 0; k < n; ++k) {
    tm_ethos_u_blob_io(b, k >= b->num_inputs, k >= b->num_inputs ? k - b->num_inputs : k, &io[k]);
    offs[k] = at;
    at += ((size_t)io[k].nbytes + 15u) & ~(size_t)15u;
    if (at > MAX_ARENA) return;
  }
  offs[n] = at;
  at += b->scratch_size;
  if (at > MAX_ARENA) return;
  uint8_t *arena = aligned_alloc(16, (at + 15u) & ~(size_t)15u ? (at + 15u) & ~(size_t)15u : 16u);
  if (arena == NULL) return;
  memset(arena, 0x5a, at);
  for (uint32_t k = 0; k <= n; ++k) {
    tm_tensor *t = &tensors[k];
    memset(t, 0, sizeof(*t));
    t->dim = 1;
    t->scalar_type = k < n ? scalar_type_of(io[k].elem_size) : TM_BYTE;
    t->nbytes = k < n ? io[k].nbytes : b->scratch_size;
    t->numel = k < n ? io[k].nbytes / (uint32_t)io[k].elem_size : b->scratch_size;
    t->sizes[0] = (int32_t)t->numel;
    t->data = arena + offs[k];
    values[k].tag = TM_VALUE_TENSOR;
    values[k].u.tensor = t;
    args[k] = &values[k];
  }
  tm_delegate_call call = {args, (size_t)n + 1u, arena, at, 0, 0};
  tm_delegate_context ctx = {NULL, TM_DIAG_NO_OFFSET, UINT16_MAX};
  if (tm_ethos_u_check_call(b, &call, &ctx) != TM_OK) __builtin_trap(); /* built to match */
  /* What the firmware delegate does around the NPU run, for scratch-region I/O. */
  uint8_t *scratch = tensors[n].data;
  for (uint32_t k = 0; k < n; ++k) {
    if ((uint32_t)io[k].region != TM_ETHOS_U_REGION_SCRATCH) continue;
    if (k < b->num_inputs) memmove(scratch + io[k].offset, tensors[k].data, io[k].nbytes);
    else memmove(tensors[k].data, scratch + io[k].offset, io[k].nbytes);
  }
  /* A wrong argument count must be refused, not read past. */
  call.nargs = n;
  if (tm_ethos_u_check_call(b, &call, &ctx) == TM_OK) __builtin_trap();
  free(arena);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The delegate gets its blob 16-byte aligned (a .pte segment). */
  uint8_t *copy = aligned_alloc(16, size ? (size + 15u) & ~(size_t)15u : 16u);
  if (copy == NULL) return 0;
  if (size) memcpy(copy, data, size);
  tm_ethos_u_blob b;
  tm_ethos_u_error err;
  if (tm_ethos_u_blob_parse(copy, size, &b, &err) == TM_OK) {
    volatile uint8_t sink = touch(b.cmd, b.cmd_size) ^ touch(b.weights, b.weights_size);
    (void)sink;
    if (b.cmd == NULL || b.cmd_size == 0 || ((uintptr_t)b.cmd & 15u) != 0) __builtin_trap();
    for (uint32_t k = 0; k < b.num_inputs + b.num_outputs; ++k) {
      tm_ethos_u_io io;
      tm_ethos_u_blob_io(&b, k >= b.num_inputs, k >= b.num_inputs ? k - b.num_inputs : k, &io);
      if (io.region == (int32_t)TM_ETHOS_U_REGION_SCRATCH && (uint64_t)io.offset + io.nbytes > b.scratch_size) {
        __builtin_trap();
      }
    }
    exercise_call(&b);
  } else if (err.message == NULL || err.block == NULL || err.offset > size) {
    __builtin_trap();
  }
  free(copy);
  return 0;
}
