/* Program loading and input filling shared by fuzz_run and fuzz_plan (see programs.h). */
#define _POSIX_C_SOURCE 200809L
#include "programs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROGRAMS 32

static tm_fuzz_blob g_programs[MAX_PROGRAMS];
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
    tm_fuzz_blob b = {malloc(len > 0 ? (size_t)len : 1u), 0};
    if (b.bytes != NULL && len > 0) b.size = fread(b.bytes, 1, (size_t)len, f);
    fclose(f);
    if (b.size > 0) g_programs[g_num_programs++] = b;
    else free(b.bytes);
  }
}

void tm_fuzz_load_programs(const char *target, char ***argv) {
  const char *dir = getenv("TM_FUZZ_PROGRAMS");
  char buf[4096];
  if (dir == NULL) {
    const char *exe = (*argv)[0];
    const char *slash = strrchr(exe, '/');
    int len = slash ? (int)(slash - exe) : 1;
    snprintf(buf, sizeof(buf), "%.*s/programs", len, slash ? exe : ".");
    dir = buf;
  }
  load_dir(dir);
  if (g_num_programs == 0) {
    fprintf(stderr, "%s: no .pte programs in %s (set TM_FUZZ_PROGRAMS)\n", target, dir);
    exit(1);
  }
}

const tm_fuzz_blob *tm_fuzz_program(uint8_t pick) { return &g_programs[pick % g_num_programs]; }

void tm_fuzz_fill_inputs(tm_fuzz_method *f, const uint8_t *data, size_t size, size_t *at) {
  for (uint32_t i = 0; i < f->method.num_inputs; ++i) {
    tm_tensor *t = tm_method_input(&f->method, i);
    if (t == NULL || t->data == NULL) continue;
    size_t take = size - *at < t->nbytes ? size - *at : t->nbytes;
    memcpy(t->data, data + *at, take);
    memset((uint8_t *)t->data + take, 0, t->nbytes - take);
    *at += take;
  }
}
