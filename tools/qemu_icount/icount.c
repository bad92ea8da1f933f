/*
 * icount: a QEMU TCG plugin that counts executed guest instructions exactly.
 *
 *   qemu-system-arm ... -plugin libicount.so,region=NAME:BEGIN:END[,region=...] \
 *                       -d plugin -D icount.log
 *
 * Every executed instruction adds one to a counter (an inline add before the
 * instruction, so an instruction that faults or ends a block early is still
 * counted exactly once and the instructions after it are not counted).
 * A region is a pair of marker addresses (usually two tiny functions): it opens
 * when the instruction at BEGIN starts and closes when the instruction at END
 * starts, so its count covers BEGIN's own instructions up to, not including,
 * END's first. Each closing prints one line; a region may occur many times.
 * BEGIN == END makes a "tick": each hit closes the previous occurrence.
 *
 * With arena=LO:HI (a byte range [LO, HI), e.g. the firmware's activation arena),
 * every load and store is also checked against the range, and each closing region
 * reports the bytes loaded and stored inside it, and how many distinct bytes of it
 * were touched (read or written), during that occurrence.
 *
 * Output (qemu_plugin_outs, i.e. the -D log with -d plugin), one event a line:
 *   icount region <name> <occurrence> <instructions>
 *   icount arena <name> <occurrence> loaded=<bytes> stored=<bytes> touched=<bytes>
 *                                                 (after its region line, with arena=)
 *   icount error <name> <problem> at=<total so far>
 *   icount summary <name> occurrences=<n>        (at exit, one per region)
 *   icount total <instructions>                   (at exit)
 * The emulation has one vCPU (Cortex-M); counts are identical from run to run.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_api.h"

TM_PLUGIN_EXPORT int qemu_plugin_version = TM_QEMU_PLUGIN_API_VERSION;

#define MAX_REGIONS 32
#define MAX_NAME 48

#define MAX_ARENA_BYTES (256u << 20)

typedef struct {
  char name[MAX_NAME];
  uint64_t begin, end;   /* instruction addresses (Thumb bit cleared) */
  uint64_t opened_at;    /* instructions executed before BEGIN started */
  uint64_t occurrences;
  int open;
  /* arena traffic of the open occurrence (with arena=) */
  uint64_t loaded, stored, touched;
  uint8_t *seen;         /* one bit per arena byte: touched in this occurrence */
} region;

static region regions[MAX_REGIONS];
static size_t num_regions;
/* Instructions executed so far; incremented inline by the translated code. */
static uint64_t executed;
/* The watched address range [arena_lo, arena_hi); empty without arena=. */
static uint64_t arena_lo, arena_hi;

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  qemu_plugin_outs(line);
}

static int is_marker(uint64_t addr) {
  for (size_t i = 0; i < num_regions; ++i) {
    if (regions[i].begin == addr || regions[i].end == addr) {
      return 1;
    }
  }
  return 0;
}

static void open_region(region *r, uint64_t at) {
  r->open = 1;
  r->opened_at = at;
  if (r->seen != NULL) {
    r->loaded = r->stored = r->touched = 0;
    memset(r->seen, 0, (size_t)((arena_hi - arena_lo + 7) / 8));
  }
}

static void close_region(region *r, uint64_t at) {
  out("icount region %s %" PRIu64 " %" PRIu64 "\n", r->name, r->occurrences, at - r->opened_at);
  if (r->seen != NULL) {
    out("icount arena %s %" PRIu64 " loaded=%" PRIu64 " stored=%" PRIu64 " touched=%" PRIu64 "\n",
        r->name, r->occurrences, r->loaded, r->stored, r->touched);
  }
  r->occurrences++;
  r->open = 0;
}

/* After every load and store (with arena=): the bytes inside the arena, per open region. */
static void on_access(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
                      void *userdata) {
  (void)vcpu_index;
  (void)userdata;
  const uint64_t size = 1ull << qemu_plugin_mem_size_shift(info);
  if (vaddr >= arena_hi || vaddr + size <= arena_lo) {
    return;
  }
  const uint64_t lo = vaddr > arena_lo ? vaddr : arena_lo;
  const uint64_t hi = vaddr + size < arena_hi ? vaddr + size : arena_hi;
  const int store = qemu_plugin_mem_is_store(info);
  for (size_t i = 0; i < num_regions; ++i) {
    region *r = &regions[i];
    if (!r->open || r->seen == NULL) {
      continue;
    }
    if (store) {
      r->stored += hi - lo;
    } else {
      r->loaded += hi - lo;
    }
    for (uint64_t a = lo - arena_lo; a < hi - arena_lo; ++a) {
      const uint8_t bit = (uint8_t)(1u << (a & 7u));
      if (!(r->seen[a >> 3] & bit)) {
        r->seen[a >> 3] |= bit;
        r->touched++;
      }
    }
  }
}

/* Runs instead of the inline add at a marker's first instruction. */
static void on_marker(unsigned int vcpu_index, void *userdata) {
  (void)vcpu_index;
  const uint64_t addr = (uint64_t)(uintptr_t)userdata;
  const uint64_t before = executed++;
  for (size_t i = 0; i < num_regions; ++i) {
    region *r = &regions[i];
    if (r->end == addr) {
      if (r->open) {
        close_region(r, before);
      } else if (r->begin != addr) {
        out("icount error %s end-without-begin at=%" PRIu64 "\n", r->name, before);
      }
    }
    if (r->begin == addr) {
      if (r->open) {
        out("icount error %s begin-while-open at=%" PRIu64 "\n", r->name, before);
      }
      open_region(r, before);
    }
  }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  (void)id;
  const size_t n = qemu_plugin_tb_n_insns(tb);
  for (size_t i = 0; i < n; ++i) {
    struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
    const uint64_t addr = qemu_plugin_insn_vaddr(insn);
    if (is_marker(addr)) {
      qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker, QEMU_PLUGIN_CB_NO_REGS,
                                             (void *)(uintptr_t)addr);
    } else {
      qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &executed, 1);
    }
    if (arena_hi > arena_lo) {
      qemu_plugin_register_vcpu_mem_cb(insn, on_access, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW,
                                       NULL);
    }
  }
}

static void report_at_exit(qemu_plugin_id_t id, void *userdata) {
  (void)id;
  (void)userdata;
  for (size_t i = 0; i < num_regions; ++i) {
    if (regions[i].open && regions[i].begin != regions[i].end) { /* a tick stays open */
      out("icount error %s unclosed at=%" PRIu64 "\n", regions[i].name, executed);
    }
    out("icount summary %s occurrences=%" PRIu64 "\n", regions[i].name, regions[i].occurrences);
  }
  out("icount total %" PRIu64 "\n", executed);
}

static int parse_address(const char *text, uint64_t *addr) {
  char *end = NULL;
  if (*text == '\0') {
    return -1;
  }
  unsigned long long v = strtoull(text, &end, 0);
  if (end == NULL || *end != '\0') {
    return -1;
  }
  *addr = (uint64_t)v & ~(uint64_t)1; /* a Thumb function symbol has bit 0 set */
  return 0;
}

/* "region=NAME:BEGIN:END" -> regions[num_regions]. */
static int parse_region(const char *spec) {
  char buf[160];
  if (num_regions == MAX_REGIONS || strlen(spec) >= sizeof buf) {
    return -1;
  }
  strcpy(buf, spec);
  char *begin = strchr(buf, ':');
  char *end = begin ? strchr(begin + 1, ':') : NULL;
  if (begin == NULL || end == NULL || begin == buf || (size_t)(begin - buf) >= MAX_NAME) {
    return -1;
  }
  *begin++ = '\0';
  *end++ = '\0';
  for (const char *c = buf; *c; ++c) {
    if (*c == ' ' || *c == '\n') {
      return -1;
    }
  }
  region *r = &regions[num_regions];
  memset(r, 0, sizeof *r);
  strcpy(r->name, buf);
  if (parse_address(begin, &r->begin) != 0 || parse_address(end, &r->end) != 0) {
    return -1;
  }
  num_regions++;
  return 0;
}

/* "arena=LO:HI" -> the watched byte range (HI exclusive). */
static int parse_arena(const char *spec) {
  char buf[64];
  if (strlen(spec) >= sizeof buf) {
    return -1;
  }
  strcpy(buf, spec);
  char *hi = strchr(buf, ':');
  if (hi == NULL) {
    return -1;
  }
  *hi++ = '\0';
  char *end = NULL;
  const unsigned long long lo_v = strtoull(buf, &end, 0);
  if (*buf == '\0' || *end != '\0') {
    return -1;
  }
  const unsigned long long hi_v = strtoull(hi, &end, 0);
  if (*hi == '\0' || *end != '\0' || hi_v <= lo_v || hi_v - lo_v > MAX_ARENA_BYTES) {
    return -1;
  }
  arena_lo = lo_v;
  arena_hi = hi_v;
  return 0;
}

TM_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                         char **argv) {
  if (info->version.min > TM_QEMU_PLUGIN_API_VERSION) {
    fprintf(stderr, "icount: QEMU requires plugin API >= %d, this plugin has %d\n",
            info->version.min, TM_QEMU_PLUGIN_API_VERSION);
    return -1;
  }
  for (int i = 0; i < argc; ++i) {
    const char *arg = argv[i];
    if (strncmp(arg, "region=", 7) == 0) {
      if (parse_region(arg + 7) != 0) {
        fprintf(stderr,
                "icount: bad argument '%s' (expected region=NAME:BEGIN:END with addresses in C "
                "syntax, at most %d regions, names without spaces shorter than %d)\n",
                arg, MAX_REGIONS, MAX_NAME);
        return -1;
      }
    } else if (strncmp(arg, "arena=", 6) == 0) {
      if (parse_arena(arg + 6) != 0) {
        fprintf(stderr,
                "icount: bad argument '%s' (expected arena=LO:HI, addresses in C syntax, "
                "LO < HI, at most %u bytes)\n",
                arg, MAX_ARENA_BYTES);
        return -1;
      }
    } else {
      fprintf(stderr,
              "icount: unknown argument '%s' (expected region=NAME:BEGIN:END or arena=LO:HI)\n",
              arg);
      return -1;
    }
  }
  if (arena_hi > arena_lo) {
    for (size_t i = 0; i < num_regions; ++i) {
      regions[i].seen = calloc((size_t)((arena_hi - arena_lo + 7) / 8), 1);
      if (regions[i].seen == NULL) {
        fprintf(stderr, "icount: no memory for the arena map of region %s\n", regions[i].name);
        return -1;
      }
    }
  }
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
  qemu_plugin_register_atexit_cb(id, report_at_exit, NULL);
  return 0;
}
