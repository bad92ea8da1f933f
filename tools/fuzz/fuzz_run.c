/*
 * Fuzz target: load and run small real programs with the real kernels (tm_all_kernels),
 * fuzzed input bytes and fuzzed scalar arguments. The programs are .pte files read once from
 * $TM_FUZZ_PROGRAMS (a directory; default: "programs" next to the executable).
 *
 * Input: byte 0 picks the program; then the bytes of every input tensor in order (missing
 * bytes are zero); then 7-byte records that change one scalar argument each after init
 * (u16 slot over every int, bool and double value and every int list item; u8 mode; i32 v):
 * mode 0 sets v, 1 sets an edge value, 2 adds v, 3 sets a double edge value. Kernels must
 * reject what violates their contract, never read or write out of bounds.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "programs.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const tm_kernel_registry tm_all_kernels;

#define MAX_SLOTS 4096

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  tm_fuzz_load_programs("fuzz_run", argv);
  return 0;
}

static const int64_t k_int_edges[] = {0, 1, -1, 2, 31, 32, 33, -31, -32, 63, 64, 127, -128, 128, 255,
                                      INT32_MAX, INT32_MIN, (int64_t)INT32_MAX + 1, INT64_MAX, INT64_MIN,
                                      1 << 30, -(1 << 30), 65535, 1000000};

static double double_edge(int32_t v) {
  switch ((uint32_t)v % 10u) {
    case 0: return 0.0;
    case 1: return -0.0;
    case 2: return NAN;
    case 3: return INFINITY;
    case 4: return -INFINITY;
    case 5: return DBL_MIN;
    case 6: return DBL_MAX;
    case 7: return 1e-30;
    case 8: return 1e30;
    default: return (double)v / 65536.0;
  }
}

typedef struct {
  tm_value *value;
  int64_t *item; /* int list item, or NULL for the value itself */
} slot;

/* Every scalar the kernels receive, in value order (int list items live in the metadata buffer). */
static size_t collect_slots(tm_fuzz_method *f, slot *slots, const uint8_t *meta_end) {
  size_t n = 0;
  const uint8_t *meta = f->meta;
  for (uint32_t i = 0; i < f->method.num_values && n < MAX_SLOTS; ++i) {
    tm_value *v = &f->method.values[i];
    if (v->tag == TM_VALUE_INT || v->tag == TM_VALUE_BOOL || v->tag == TM_VALUE_DOUBLE) {
      slots[n++] = (slot){v, NULL};
    } else if (v->tag == TM_VALUE_INT_LIST) {
      const uint8_t *items = (const uint8_t *)v->u.int_list.items;
      if (items < meta || items + (size_t)v->u.int_list.length * sizeof(int64_t) > meta_end) continue;
      for (uint32_t k = 0; k < v->u.int_list.length && n < MAX_SLOTS; ++k) {
        slots[n++] = (slot){v, (int64_t *)(uintptr_t)&v->u.int_list.items[k]};
      }
    }
  }
  return n;
}

static void mutate(const slot *s, uint8_t mode, int32_t v) {
  if (s->item == NULL && s->value->tag == TM_VALUE_DOUBLE) {
    s->value->u.d = (mode & 1u) ? double_edge(v) : s->value->u.d * ((double)v / 4096.0);
    return;
  }
  if (s->item == NULL && s->value->tag == TM_VALUE_BOOL) {
    s->value->u.b = (v & 1) != 0;
    return;
  }
  int64_t *p = s->item ? s->item : &s->value->u.i;
  switch (mode & 3u) {
    case 0: *p = v; break;
    case 1: *p = k_int_edges[(uint32_t)v % (sizeof(k_int_edges) / sizeof(k_int_edges[0]))]; break;
    case 2: *p = (int64_t)((uint64_t)*p + (uint64_t)(int64_t)v); break;
    default: *p = *p == INT64_MIN ? 0 : -*p; break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  const tm_fuzz_blob *prog = tm_fuzz_program(data[0]);
  size_t at = 1;
  tm_fuzz_method f;
  static slot slots[MAX_SLOTS];
  if (tm_fuzz_prepare(&f, prog->bytes, prog->size, &tm_all_kernels, NULL) == TM_OK) {
    tm_fuzz_fill_inputs(&f, data, size, &at);
    size_t meta_bytes = 0, arena_bytes = 0;
    (void)tm_method_required_memory(&f.program, NULL, &meta_bytes, &arena_bytes);
    size_t nslots = collect_slots(&f, slots, (const uint8_t *)f.meta + meta_bytes);
    for (; nslots > 0 && at + 7u <= size; at += 7u) {
      uint16_t which;
      int32_t v;
      memcpy(&which, data + at, 2);
      memcpy(&v, data + at + 3, 4);
      mutate(&slots[which % nslots], data[at + 2], v);
    }
    /* The values changed behind the runtime's back: the prepare steps' checks at init no
     * longer vouch for them (what the runtime's own MOVE does). */
    tm_method_recheck_arguments(&f.method);
    (void)tm_method_execute(&f.method);
  }
  tm_fuzz_release(&f);
  return 0;
}
