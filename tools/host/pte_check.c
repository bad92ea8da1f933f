/*
 * pte_check: load, verify and prepare a .pte with the firmware runtime, and
 * print the status and diagnostic. Host tool (may allocate).
 *
 *   pte_check [options] FILE...
 *     --method NAME        method to prepare (default: the first)
 *     --arena-bytes N      give the method an arena of N bytes (default: what it asks)
 *     --meta-bytes N       metadata buffer of N bytes (default: what it asks)
 *     --any-op             resolve every operator to a probe kernel that reads all
 *                          of its tensor arguments, and execute the method
 *     --truncations        hostile mode: try every truncated length of each file
 *     --flips              hostile mode: corrupt each u32 / byte of the flatbuffer part
 *     --byte-changes OPS   hostile mode: apply each change of OPS (comma-separated: xNN xor,
 *                          =NN set, +N / -N add, NN hex) to every byte of the flatbuffer part
 *     --run                execute accepted programs with the real kernels (zeroed arena)
 *
 * Every buffer is allocated with exactly the size the runtime was told, so an
 * out-of-bounds access shows up under AddressSanitizer. Exit status: 0 when
 * every plain check succeeded (hostile modes: when no truncation was accepted
 * and nothing crashed), 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "torchmcu/runtime.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TM_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(TM_ASAN)
#define TM_ASAN 1
#endif
#ifdef TM_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

extern const tm_kernel_registry tm_all_kernels;

typedef struct {
  const char *method;
  long arena_bytes; /* -1: as required */
  long meta_bytes;
  int any_op;
  int run;
  int quiet;
} options;

static void print_diag(const char *what, tm_status st, const tm_diag *d) {
  printf("%s: %s: %s", what, tm_status_name(st), d->message ? d->message : "");
  if (d->instruction != TM_DIAG_NONE) printf(" (instruction %d)", (int)d->instruction);
  if (d->value != TM_DIAG_NONE) printf(" (value %d)", (int)d->value);
  if (d->argument != TM_DIAG_NONE) printf(" (argument %d)", (int)d->argument);
  if (d->op_name) printf(" (operator %s.%s)", d->op_name, d->op_overload ? d->op_overload : "");
  if (d->byte_offset != TM_DIAG_NO_OFFSET) printf(" (byte offset %u)", (unsigned)d->byte_offset);
  printf("\n");
}

/* A heap buffer of exactly the last requested size, reused while the size stays the same
 * (the hostile modes run hundreds of thousands of checks: no mmap/munmap per check). */
typedef struct {
  void *p;
  size_t n;
} exact_buf;

static void *exact(exact_buf *b, size_t n) {
  if (n == 0) n = 1;
  if (b->p == NULL || b->n != n) {
    free(b->p);
    b->p = malloc(n);
    b->n = b->p ? n : 0;
  }
  return b->p;
}

static exact_buf g_meta, g_arena;

/* Load + required memory + init (+ execute with --any-op / --run) of `size` bytes at `copy`,
 * which the caller allocated (or poisoned) so that byte `size` is already out of bounds. */
static tm_status check_bytes(const char *what, const uint8_t *copy, size_t size, const options *o) {
  void *meta = NULL, *arena = NULL;
  tm_kernel_entry *stubs = NULL;
  tm_program program;
  tm_method method;
  tm_status st;
  const tm_diag *diag = &program.diag;
  st = tm_program_load(&program, copy, size);
  size_t meta_bytes = 0, arena_bytes = 0;
  if (st == TM_OK) st = tm_method_required_memory(&program, o->method, &meta_bytes, &arena_bytes);
  if (st == TM_OK) {
    tm_kernel_registry reg = tm_all_kernels;
    if (o->any_op) {
      uint32_t n = 0;
      const char *name, *overload;
      while (tm_program_operator(&program, o->method, n, &name, &overload) == TM_OK) ++n;
      stubs = calloc(n + 1u, sizeof(*stubs));
      for (uint32_t i = 0; stubs != NULL && i < n; ++i) {
        tm_program_operator(&program, o->method, i, &stubs[i].name, &stubs[i].overload);
        stubs[i].fn = tm_probe_kernel;
      }
      reg.entries = stubs;
      reg.count = n;
    }
    if (o->meta_bytes >= 0) meta_bytes = (size_t)o->meta_bytes;
    if (o->arena_bytes >= 0) arena_bytes = (size_t)o->arena_bytes;
    /* A (corrupted) program may ask for up to 4 GB: hand it none, the runtime must say so. */
    if (arena_bytes > ((size_t)1 << 28)) arena_bytes = 0;
    /* Exact sizes (malloc is 16-byte aligned here): one byte too far is an ASan report. */
    meta = exact(&g_meta, meta_bytes);
    arena = exact(&g_arena, arena_bytes);
    if (arena != NULL) memset(arena, 0, arena_bytes);
    diag = &method.diag;
    st = tm_method_init(&method, &program, o->method, &reg, meta, meta_bytes, arena, arena_bytes);
    if (st == TM_OK && (o->any_op || o->run)) st = tm_method_execute(&method);
  }
  if (!o->quiet) {
    if (st == TM_OK) {
      printf("%s: OK (meta %zu bytes, arena %zu bytes, %u values, %u instructions)\n", what, meta_bytes,
             arena_bytes, (unsigned)method.num_values, (unsigned)method.num_instructions);
    } else {
      print_diag(what, st, diag);
    }
  }
  free(stubs);
  return st;
}

static uint8_t *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  uint8_t *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long n = ftell(f);
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1u)) != NULL) {
      *size = fread(buf, 1, (size_t)n, f);
    }
  }
  fclose(f);
  return buf;
}

/* Every proper prefix must be rejected. Returns the number accepted (should be 0). */
static unsigned hostile_truncations(const char *path, const uint8_t *data, size_t size, const options *o) {
  unsigned accepted = 0;
  uint8_t *copy = malloc(size ? size : 1);
  if (copy == NULL) return 1;
  memcpy(copy, data, size);
  for (size_t len = 0; len < size; ++len) {
    POISON(copy + len, size - len); /* bytes past the truncation are out of bounds */
    if (check_bytes(path, copy, len, o) == TM_OK) {
      printf("%s: truncation to %zu bytes was ACCEPTED\n", path, len);
      ++accepted;
    }
    UNPOISON(copy + len, size - len);
  }
  free(copy);
  printf("%s: %zu truncations, %u accepted\n", path, size, accepted);
  return accepted;
}

/* Corrupts each aligned u32 (several patterns) and each byte of the flatbuffer part. */
static void hostile_flips(const char *path, const uint8_t *data, size_t size, const options *o) {
  static const uint32_t patterns[] = {0xFFFFFFFFu, 0x80000000u, 0x7FFFFFFFu, 0x00000000u, 0x00010000u};
  uint32_t fb_size = (uint32_t)size;
  tm_program p;
  if (tm_program_load(&p, data, size) == TM_OK) fb_size = p.program_size;
  uint8_t *copy = malloc(size);
  unsigned tried = 0, rejected = 0;
  if (copy == NULL) return;
  for (uint32_t pos = 0; pos + 4u <= fb_size; pos += 4u) {
    for (size_t k = 0; k < sizeof(patterns) / sizeof(patterns[0]) + 2u; ++k) {
      memcpy(copy, data, size);
      uint32_t v;
      memcpy(&v, copy + pos, 4);
      if (k < sizeof(patterns) / sizeof(patterns[0])) v = patterns[k];
      else v += (k & 1u) ? 4u : (uint32_t)-4;
      memcpy(copy + pos, &v, 4);
      ++tried;
      rejected += check_bytes(path, copy, size, o) != TM_OK;
    }
  }
  for (uint32_t pos = 0; pos < fb_size; ++pos) {
    memcpy(copy, data, size);
    copy[pos] ^= 0xA5u;
    ++tried;
    rejected += check_bytes(path, copy, size, o) != TM_OK;
  }
  free(copy);
  printf("%s: %u corruptions, %u rejected, %u accepted, no crash\n", path, tried, rejected, tried - rejected);
}

/* One byte change: kind 'x' xor, '=' set, '+' add (value may be negative). */
typedef struct {
  char kind;
  int value;
} byte_change;

#define MAX_CHANGES 16

static int parse_changes(const char *spec, byte_change *out) {
  int n = 0;
  while (*spec && n < MAX_CHANGES) {
    char *end;
    byte_change c = {'x', 0};
    if (*spec == 'x' || *spec == '=') c.kind = *spec++;
    else if (*spec == '+' || *spec == '-') c.kind = '+';
    long v = strtol(spec, &end, c.kind == '+' ? 10 : 16);
    if (end == spec) return -1;
    c.value = (int)v;
    out[n++] = c;
    spec = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') return -1;
  }
  return n;
}

/* Every change of `changes` at every byte of the flatbuffer part (restored after each try). */
static void hostile_byte_changes(const char *path, uint8_t *data, size_t size, const options *o,
                                 const byte_change *changes, int nchanges) {
  uint32_t fb_size = (uint32_t)size;
  tm_program p;
  if (tm_program_load(&p, data, size) == TM_OK) fb_size = p.program_size;
  unsigned tried = 0, rejected = 0, unchanged = 0;
  uint8_t *exact_copy = malloc(size ? size : 1);
  if (exact_copy == NULL) return;
  memcpy(exact_copy, data, size);
  data = exact_copy;
  for (uint32_t pos = 0; pos < fb_size; ++pos) {
    const uint8_t orig = data[pos];
    for (int k = 0; k < nchanges; ++k) {
      uint8_t b = orig;
      if (changes[k].kind == 'x') b ^= (uint8_t)changes[k].value;
      else if (changes[k].kind == '=') b = (uint8_t)changes[k].value;
      else b = (uint8_t)(b + changes[k].value);
      if (b == orig) {
        ++unchanged;
        continue;
      }
      data[pos] = b;
      ++tried;
      rejected += check_bytes(path, data, size, o) != TM_OK;
      data[pos] = orig;
    }
  }
  free(exact_copy);
  printf("%s: %u byte changes over %u bytes (%u no-ops skipped), %u rejected, %u accepted, no crash\n", path,
         tried, fb_size, unchanged, rejected, tried - rejected);
}

int main(int argc, char **argv) {
  options o = {NULL, -1, -1, 0, 0, 0};
  byte_change changes[MAX_CHANGES];
  int nchanges = 0;
  int truncations = 0, flips = 0, failed = 0, nfiles = 0;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (strcmp(a, "--method") == 0 && i + 1 < argc) o.method = argv[++i];
    else if (strcmp(a, "--arena-bytes") == 0 && i + 1 < argc) o.arena_bytes = strtol(argv[++i], NULL, 0);
    else if (strcmp(a, "--meta-bytes") == 0 && i + 1 < argc) o.meta_bytes = strtol(argv[++i], NULL, 0);
    else if (strcmp(a, "--any-op") == 0) o.any_op = 1;
    else if (strcmp(a, "--truncations") == 0) truncations = 1;
    else if (strcmp(a, "--flips") == 0) flips = 1;
    else if (strcmp(a, "--run") == 0) o.run = 1;
    else if (strcmp(a, "--byte-changes") == 0 && i + 1 < argc) {
      nchanges = parse_changes(argv[++i], changes);
      if (nchanges <= 0) {
        fprintf(stderr, "pte_check: bad --byte-changes list %s\n", argv[i]);
        return 2;
      }
    }
    else if (a[0] == '-') {
      fprintf(stderr, "pte_check: unknown option %s\n", a);
      return 2;
    } else {
      size_t size = 0;
      uint8_t *data = read_file(a, &size);
      ++nfiles;
      if (data == NULL) {
        fprintf(stderr, "pte_check: cannot read %s\n", a);
        failed = 1;
        continue;
      }
      if (truncations || flips || nchanges > 0) {
        options q = o;
        q.quiet = 1;
        if (truncations && hostile_truncations(a, data, size, &q) != 0) failed = 1;
        if (flips) hostile_flips(a, data, size, &q);
        if (nchanges > 0) hostile_byte_changes(a, data, size, &q, changes, nchanges);
      } else {
        uint8_t *copy = malloc(size ? size : 1);
        if (copy == NULL || (memcpy(copy, data, size), check_bytes(a, copy, size, &o)) != TM_OK) failed = 1;
        free(copy);
      }
      free(data);
    }
  }
  if (nfiles == 0) {
    fprintf(stderr, "usage: pte_check [--method NAME] [--arena-bytes N] [--meta-bytes N] [--any-op] "
                    "[--truncations] [--flips] [--byte-changes OPS] [--run] FILE...\n");
    return 2;
  }
  return failed;
}
