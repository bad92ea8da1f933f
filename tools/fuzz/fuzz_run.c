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
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

extern const tm_kernel_registry tm_all_kernels;

#define MAX_PROGRAMS 32
#define MAX_SLOTS 4096

typedef struct {
  uint8_t *bytes;
  size_t size;
} blob;

static blob g_programs[MAX_PROGRAMS];
static size_t g_num_programs;

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void load_dir(const char *dir) {
  DIR *d = opendir(dir);
  char *names[MAX_PROGRAMS];
  size_t n = 0;
  struct dirent *e;
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL && n < MAX_PROGRAMS) {
    size_t len = strlen(e->d_name);
    if (len > 4 && strcmp(e->d_name + len - 4, ".pte") == 0) names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof(names[0]), by_name); /* stable program numbering for the corpus */
  for (size_t i = 0; i < n; ++i) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
    FILE *f = fopen(path, "rb");
    free(names[i]);
    if (f == NULL) continue;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    blob b = {malloc(len > 0 ? (size_t)len : 1u), 0};
    if (b.bytes != NULL && len > 0) b.size = fread(b.bytes, 1, (size_t)len, f);
    fclose(f);
    if (b.size > 0) g_programs[g_num_programs++] = b;
    else free(b.bytes);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *dir = getenv("TM_FUZZ_PROGRAMS");
  char buf[4096];
  if (dir == NULL) {
    const char *exe = (*argv)[0];
    const char *slash = strrchr(exe, '/');
    int len = slash ? (int)(slash - exe) : 1;
    snprintf(buf, sizeof(buf), "%.*s/programs", len, slash ? exe : ".");
    dir = buf;
  }
  (void)argc;
  load_dir(dir);
  if (g_num_programs == 0) {
    fprintf(stderr, "fuzz_run: no .pte programs in %s (set TM_FUZZ_PROGRAMS)\n", dir);
    exit(1);
  }
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
  const blob *prog = &g_programs[data[0] % g_num_programs];
  size_t at = 1;
  tm_fuzz_method f;
  static slot slots[MAX_SLOTS];
  if (tm_fuzz_prepare(&f, prog->bytes, prog->size, &tm_all_kernels, NULL) == TM_OK) {
    for (uint32_t i = 0; i < f.method.num_inputs; ++i) {
      tm_tensor *t = tm_method_input(&f.method, i);
      if (t == NULL || t->data == NULL) continue;
      size_t take = size - at < t->nbytes ? size - at : t->nbytes;
      memcpy(t->data, data + at, take);
      memset((uint8_t *)t->data + take, 0, t->nbytes - take);
      at += take;
    }
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
    (void)tm_method_execute(&f.method);
  }
  tm_fuzz_release(&f);
  return 0;
}
