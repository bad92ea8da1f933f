/*
 * Fuzz target: the real kernels (tm_all_kernels) on small real programs whose memory plan is
 * changed the way an edited .pte that still passes the loader changes it: planned tensors
 * moved inside the arena, keeping their element alignment. Buffers that the exporter kept
 * apart may then overlap; every kernel must either compute (garbage is fine) or refuse the
 * call, never read or write outside its tensors or memcpy between overlapping ranges.
 * The programs are the ones fuzz_run runs ($TM_FUZZ_PROGRAMS, see programs.h).
 *
 * Input: byte 0 picks the program; byte 1 is the number of moves; then 6-byte records
 * (u16 planned tensor: index among the method's non-empty tensors inside the arena, modulo
 * their count; i32 delta in bytes: the tensor's offset moves by it, rounded down to its
 * element size and clamped to the arena); then the bytes of every input tensor in order
 * (missing bytes are zero). The method is then executed once.
 */
#include <string.h>

#include "programs.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const tm_kernel_registry tm_all_kernels;

#define MAX_PLANNED 4096

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  tm_fuzz_load_programs("fuzz_plan", argv);
  return 0;
}

/* The method's non-empty tensors that live in the arena, in tensor order. */
static uint32_t planned_tensors(const tm_fuzz_method *f, tm_tensor **out) {
  const uint8_t *a = f->arena;
  uint32_t n = 0;
  for (uint32_t i = 0; i < f->method.num_tensors && n < MAX_PLANNED; ++i) {
    tm_tensor *t = &f->method.tensors[i];
    const uint8_t *p = t->data;
    if (t->nbytes != 0 && p != NULL && p >= a && p + t->nbytes <= a + f->arena_bytes) out[n++] = t;
  }
  return n;
}

static void move(const tm_fuzz_method *f, tm_tensor *t, int32_t delta) {
  const int64_t esize = (int64_t)tm_element_size(t->scalar_type);
  const int64_t last = (int64_t)f->arena_bytes - (int64_t)t->nbytes; /* >= 0: it fits now */
  int64_t off = (int64_t)((uint8_t *)t->data - (uint8_t *)f->arena) + delta;
  off = off < 0 ? 0 : off > last ? last : off;
  off -= off % (esize > 0 ? esize : 1); /* the arena is 16-byte aligned: so is the loader's rule */
  t->data = (uint8_t *)f->arena + off;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  const tm_fuzz_blob *prog = tm_fuzz_program(data[0]);
  size_t at = 2;
  tm_fuzz_method f;
  static tm_tensor *planned[MAX_PLANNED];
  if (tm_fuzz_prepare(&f, prog->bytes, prog->size, &tm_all_kernels, NULL) == TM_OK) {
    const uint32_t n = planned_tensors(&f, planned);
    for (uint32_t k = 0; k < data[1] && n > 0 && at + 6u <= size; ++k, at += 6u) {
      uint16_t which;
      int32_t delta;
      memcpy(&which, data + at, 2);
      memcpy(&delta, data + at + 2, 4);
      move(&f, planned[which % n], delta);
    }
    tm_fuzz_fill_inputs(&f, data, size, &at);
    (void)tm_method_execute(&f.method);
  }
  tm_fuzz_release(&f);
  return 0;
}
