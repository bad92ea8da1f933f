/*
 * Host tests of our Ethos-U driver against the register model (ethos_u_model.c).
 *
 * The expected register sequences below are written out from Arm's documented
 * programming model of the Ethos-U (register offsets and bits as Arm publishes them,
 * restated here as plain numbers, not taken from the driver's header):
 *   init  : read ID, CONFIG; write RESET with the pending privilege/security levels;
 *           poll STATUS until bit 3 (reset in progress) clears; read PROT; program
 *           QCONFIG (0x1C), REGIONCFG (0x3C) and AXI_LIMIT0..3 (0x40..0x4C) - on U85
 *           MEM_ATTR0..3 (0x40..0x4C), QCONFIG, REGIONCFG, AXI_SRAM (0x50), AXI_EXT (0x54).
 *   run   : QBASE (0x10) [+ QBASE_HI 0x14 on 40-bit NPUs], QSIZE (0x20), QCONFIG, BASEPn
 *           (0x80 + 8n) [+ hi word at 0x84 + 8n], REGIONCFG, CMD read then CMD = kept
 *           clock/power Q bits (0xC) | 1; poll STATUS until IRQ (bit 1) with the NPU
 *           stopped (bit 0 clear); CMD = 0xC | 2 clears the IRQ; STATUS must show no fault
 *           and command end (bit 5); QREAD (0x18) must equal QSIZE.
 *   error : after a fault or a timeout the NPU is soft reset (the init reset sequence).
 * Prints one line per test and "ALL PASS" at the end; exit status 1 on any failure.
 */
#include <stdio.h>
#include <string.h>

#include "ethos_u_model.h"
#include "torchmcu/ethos_u_driver.h"

static int failures = 0;
static int checks = 0;

#define CHECK(cond)                                                        \
  do {                                                                     \
    ++checks;                                                              \
    if (!(cond)) {                                                         \
      ++failures;                                                          \
      printf("  FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
    }                                                                      \
  } while (0)

/* Register offsets and values as documented (see the header comment). */
enum {
  ID = 0x00, STATUS = 0x04, CMD = 0x08, RESET = 0x0C, QBASE = 0x10, QBASE_HI = 0x14,
  QREAD = 0x18, QCONFIG = 0x1C, QSIZE = 0x20, PROT = 0x24, CONFIG = 0x28, REGIONCFG = 0x3C,
  AXI_LIMIT0 = 0x40, AXI_LIMIT1 = 0x44, AXI_LIMIT2 = 0x48, AXI_LIMIT3 = 0x4C,
  MEM_ATTR0 = 0x40, MEM_ATTR1 = 0x44, MEM_ATTR2 = 0x48, MEM_ATTR3 = 0x4C,
  AXI_SRAM = 0x50, AXI_EXT = 0x54, BASEP0 = 0x80,
};
/* Arm's default memory configs: region 0 -> 3, region 1 -> 0, regions 2..7 -> 1
 * (2 bits each): 0b01_01_01_01_01_01_00_11. */
#define REGIONCFG_DEFAULT 0x5553u
#define QCONFIG_DEFAULT 2u
/* AXI_LIMITn: 32 outstanding reads (31 at bit 16), 16 writes (15 at bit 24). */
#define AXI_LIMIT_DEFAULT 0x0F1F0000u
/* U85 AXI ports: 64 reads (63 at bit 0), 32 writes (31 at bit 8), 256-byte bursts (2 at
 * bit 16) - the value Arm's upstream Linux driver programs. */
#define AXI_PORT_DEFAULT 0x00021F3Fu
/* STATUS bits */
#define ST_RUNNING 0x1u
#define ST_IRQ 0x2u
#define ST_BUS 0x4u
#define ST_RESET 0x8u
#define ST_PARSE 0x10u
#define ST_END 0x20u
#define ST_BRANCH 0x200u

#define R(off, val) {0, (off), (val)}
#define W(off, val) {1, (off), (val)}

static void dump(const eu_access *a, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    printf("    %3u %s 0x%03x 0x%08x\n", (unsigned)i, a[i].write ? "W" : "R",
           (unsigned)a[i].offset, (unsigned)a[i].value);
  }
}

/* The model's log from position `from` must begin with `expected`; with `exact`, nothing may
 * follow it. */
static void check_log(const char *kind, const char *what, const eu_model *m, uint32_t from,
                      const eu_access *expected, uint32_t n, int exact) {
  ++checks;
  uint32_t have = m->log_count > from ? m->log_count - from : 0;
  int ok = !m->log_overflow && (exact ? have == n : have >= n);
  for (uint32_t i = 0; ok && i < n; ++i) {
    const eu_access *a = &m->log[from + i];
    ok = a->write == expected[i].write && a->offset == expected[i].offset &&
         a->value == expected[i].value;
  }
  if (!ok) {
    ++failures;
    printf("  FAIL %s %s\n  expected:\n", kind, what);
    dump(expected, n);
    printf("  actual:\n");
    dump(&m->log[from], have);
  }
}

/* The model's log from position `from` must equal `expected` exactly. */
static void check_sequence(const char *what, const eu_model *m, uint32_t from,
                           const eu_access *expected, uint32_t n) {
  check_log("sequence", what, m, from, expected, n, 1);
}

/* The n log entries from position `from` must equal `expected` (more may follow). */
static void check_prefix(const char *what, const eu_model *m, uint32_t from,
                         const eu_access *expected, uint32_t n) {
  check_log("prefix", what, m, from, expected, n, 0);
}

static tm_ethosu_io model_io(eu_model *m) {
  tm_ethosu_io io = {eu_model_read, eu_model_write, m, NULL, NULL};
  return io;
}

/* The soft reset + bus setup of a U55/U65 with the default config and reset_reads = 2. */
static const eu_access RESET_U55[] = {
    W(RESET, 0x1), /* privileged (CPL bit 0 = 1), secure (CSL bit 1 = 0) */
    R(STATUS, ST_RESET), R(STATUS, ST_RESET), R(STATUS, 0),
    R(PROT, 0x1),
    W(QCONFIG, QCONFIG_DEFAULT), W(REGIONCFG, REGIONCFG_DEFAULT),
    W(AXI_LIMIT0, AXI_LIMIT_DEFAULT), W(AXI_LIMIT1, AXI_LIMIT_DEFAULT),
    W(AXI_LIMIT2, AXI_LIMIT_DEFAULT), W(AXI_LIMIT3, AXI_LIMIT_DEFAULT),
};
#define RESET_U55_N (sizeof(RESET_U55) / sizeof(RESET_U55[0]))

/* Fake bus addresses: the driver never dereferences them (no cache hooks). */
#define CMD_ADDR 0x60000100u
#define BASE0 0x60010000u
#define BASE1 0x21000000u
#define BASE2 0x01000040u

static tm_ethosu_job three_region_job(void) {
  tm_ethosu_job job;
  memset(&job, 0, sizeof(job));
  job.command_stream = (const void *)(uintptr_t)CMD_ADDR;
  job.command_stream_size = 64;
  job.base_addresses[0] = BASE0;
  job.base_addresses[1] = BASE1;
  job.base_addresses[2] = BASE2;
  job.base_address_sizes[0] = 1024;
  job.base_address_sizes[1] = 4096;
  job.base_address_sizes[2] = 256;
  job.num_base_addresses = 3;
  return job;
}

/* Programming and start of three_region_job on a U55 (32-bit addresses). */
static const eu_access START_U55[] = {
    R(STATUS, 0),
    W(QBASE, CMD_ADDR), W(QSIZE, 64), W(QCONFIG, QCONFIG_DEFAULT),
    W(BASEP0, BASE0), W(BASEP0 + 8, BASE1), W(BASEP0 + 16, BASE2),
    W(REGIONCFG, REGIONCFG_DEFAULT),
    R(CMD, 0xC), W(CMD, 0xD),
};
#define START_U55_N (sizeof(START_U55) / sizeof(START_U55[0]))

static void init_u55(eu_model *m, tm_ethosu_device *dev, uint32_t timeout) {
  eu_model_init(m);
  CHECK(tm_ethosu_init(dev, model_io(m), timeout) == TM_OK);
  eu_model_clear_log(m);
}

static void test_init_u55(void) {
  puts("test_init_u55");
  eu_model m;
  eu_model_init(&m);
  tm_ethosu_device dev;
  CHECK(tm_ethosu_init(&dev, model_io(&m), 100) == TM_OK);
  const eu_access head[] = {R(ID, EU_ID_U55), R(CONFIG, EU_CONFIG_U55_128)};
  check_prefix("init head", &m, 0, head, 2);
  check_sequence("init reset", &m, 2, RESET_U55, RESET_U55_N);
  CHECK(dev.product == TM_ETHOSU_U55);
  CHECK(dev.ready == 1);
  CHECK(dev.id == EU_ID_U55 && dev.npu_config == EU_CONFIG_U55_128);
  CHECK(m.resets == 1 && m.prot == 0x1);
  CHECK(strcmp(tm_ethosu_product_name(dev.product), "Ethos-U55") == 0);
}

static void test_init_non_secure_user(void) {
  puts("test_init_non_secure_user");
  eu_model m;
  eu_model_init(&m);
  m.reset_reads = 0;
  tm_ethosu_config c = tm_ethosu_default_config(10);
  c.secure = 0;
  c.privileged = 0;
  c.qconfig = 1;
  for (int i = 0; i < 8; ++i) c.region_config[i] = (uint8_t)(i % 4);
  tm_ethosu_device dev;
  CHECK(tm_ethosu_init_config(&dev, model_io(&m), &c) == TM_OK);
  /* regions 0..7 -> 0,1,2,3,0,1,2,3: 0b11_10_01_00_11_10_01_00 */
  const eu_access want[] = {
      R(ID, EU_ID_U55), R(CONFIG, EU_CONFIG_U55_128),
      W(RESET, 0x2), /* user (CPL 0), non-secure (CSL 1) */
      R(STATUS, 0), R(PROT, 0x2),
      W(QCONFIG, 1), W(REGIONCFG, 0xE4E4u),
      W(AXI_LIMIT0, AXI_LIMIT_DEFAULT), W(AXI_LIMIT1, AXI_LIMIT_DEFAULT),
      W(AXI_LIMIT2, AXI_LIMIT_DEFAULT), W(AXI_LIMIT3, AXI_LIMIT_DEFAULT),
  };
  check_sequence("non-secure init", &m, 0, want, sizeof(want) / sizeof(want[0]));
}

static void test_init_wrong_product(void) {
  puts("test_init_wrong_product");
  const uint32_t cases[][2] = {
      {0x30000001u, 0x00000007u}, /* architecture major 3: no such Ethos-U */
      {0x10104201u, 0x20000008u}, /* architecture 1 with U85's product number */
      {0x20000001u, 0x00000007u}, /* architecture 2 with U55's product number */
      {0x00000000u, 0x00000000u}, /* nothing there */
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    eu_model m;
    eu_model_init(&m);
    m.id = cases[i][0];
    m.config = cases[i][1];
    tm_ethosu_device dev;
    CHECK(tm_ethosu_init(&dev, model_io(&m), 100) == TM_ERR_UNSUPPORTED);
    const eu_access want[] = {R(ID, m.id), R(CONFIG, m.config)};
    check_sequence("wrong product: identify only, no write", &m, 0, want, 2);
    CHECK(dev.ready == 0 && dev.product == TM_ETHOSU_UNKNOWN);
    tm_ethosu_job job = three_region_job();
    CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_STATE);
    CHECK(m.log_count == 2);
  }
}

static void test_init_reset_timeout(void) {
  puts("test_init_reset_timeout");
  eu_model m;
  eu_model_init(&m);
  m.reset_hangs = 1;
  tm_ethosu_device dev;
  CHECK(tm_ethosu_init(&dev, model_io(&m), 4) == TM_ERR_TIMEOUT);
  const eu_access want[] = {
      R(ID, EU_ID_U55), R(CONFIG, EU_CONFIG_U55_128), W(RESET, 0x1),
      R(STATUS, ST_RESET), R(STATUS, ST_RESET), R(STATUS, ST_RESET), R(STATUS, ST_RESET),
  };
  check_sequence("reset timeout: exactly timeout_polls STATUS reads", &m, 0, want,
                 sizeof(want) / sizeof(want[0]));
  CHECK(dev.ready == 0);
  CHECK(tm_ethosu_last_status(&dev) == ST_RESET);
  CHECK(strcmp(tm_ethosu_status_reason(tm_ethosu_last_status(&dev)),
               "NPU reset did not complete") == 0);
}

static void test_init_levels_not_taken(void) {
  puts("test_init_levels_not_taken");
  eu_model m;
  eu_model_init(&m);
  m.ignore_levels = 1; /* PROT stays 0 (secure user) though privileged was requested */
  tm_ethosu_device dev;
  CHECK(tm_ethosu_init(&dev, model_io(&m), 10) == TM_ERR_DELEGATE);
  CHECK(dev.ready == 0);
  CHECK(m.log_count == 7); /* ID, CONFIG, RESET, 3 STATUS, PROT: no bus setup after */
}

static void test_init_bad_arguments(void) {
  puts("test_init_bad_arguments");
  eu_model m;
  eu_model_init(&m);
  tm_ethosu_device dev;
  CHECK(tm_ethosu_init(&dev, model_io(&m), 0) == TM_ERR_INVALID_ARGUMENT);
  tm_ethosu_config c = tm_ethosu_default_config(10);
  c.region_config[5] = 4;
  CHECK(tm_ethosu_init_config(&dev, model_io(&m), &c) == TM_ERR_INVALID_ARGUMENT);
  c = tm_ethosu_default_config(10);
  c.qconfig = 7;
  CHECK(tm_ethosu_init_config(&dev, model_io(&m), &c) == TM_ERR_INVALID_ARGUMENT);
  tm_ethosu_io no_read = {NULL, eu_model_write, &m, NULL, NULL};
  CHECK(tm_ethosu_init(&dev, no_read, 10) == TM_ERR_INVALID_ARGUMENT);
  CHECK(tm_ethosu_init(NULL, model_io(&m), 10) == TM_ERR_INVALID_ARGUMENT);
  CHECK(m.log_count == 0);
}

static void test_run_ok_u55(void) {
  puts("test_run_ok_u55");
  eu_model m;
  tm_ethosu_device dev;
  init_u55(&m, &dev, 100);
  tm_ethosu_job job = three_region_job();
  CHECK(tm_ethosu_run(&dev, &job) == TM_OK);
  check_prefix("run start", &m, 0, START_U55, START_U55_N);
  const eu_access finish[] = {
      R(STATUS, ST_RUNNING), R(STATUS, ST_RUNNING), R(STATUS, ST_RUNNING), /* job_polls 3 */
      R(STATUS, ST_IRQ | ST_END),
      R(CMD, 0xD), W(CMD, 0xE), /* clear IRQ, keep clock/power Q */
      R(STATUS, ST_END), R(QREAD, 64),
  };
  check_sequence("run completion", &m, START_U55_N, finish, sizeof(finish) / sizeof(finish[0]));
  CHECK(tm_ethosu_last_status(&dev) == ST_END);
  CHECK(strcmp(tm_ethosu_status_reason(ST_END), "ok") == 0);
  CHECK(m.starts == 1 && m.resets == 1);
  /* A second job runs the same way. */
  eu_model_clear_log(&m);
  CHECK(tm_ethosu_run(&dev, &job) == TM_OK);
  /* The idle check sees the end bit of the previous job (kept until QBASE/QSIZE). */
  const eu_access idle[] = {R(STATUS, ST_END)};
  check_prefix("second run idle check", &m, 0, idle, 1);
  check_prefix("second run programming", &m, 1, START_U55 + 1, START_U55_N - 3);
  /* CMD reads back the last command (clear IRQ, 0xE); the start keeps only its Q bits. */
  const eu_access start2[] = {R(CMD, 0xE), W(CMD, 0xD)};
  check_prefix("second run start", &m, START_U55_N - 2, start2, 2);
  CHECK(m.starts == 2);
}

/* A fault (STATUS bit `fault`) reported while the job runs. */
static void run_fault_u55(const char *what, uint32_t fault, const char *reason) {
  eu_model m;
  tm_ethosu_device dev;
  init_u55(&m, &dev, 100);
  m.job_polls = 1;
  m.fault_bits = fault;
  tm_ethosu_job job = three_region_job();
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_DELEGATE);
  check_prefix(what, &m, 0, START_U55, START_U55_N);
  const eu_access seen[] = {R(STATUS, ST_RUNNING), R(STATUS, ST_IRQ | fault)};
  check_prefix(what, &m, START_U55_N, seen, 2);
  check_sequence("reset after the fault", &m, START_U55_N + 2, RESET_U55, RESET_U55_N);
  CHECK(tm_ethosu_last_status(&dev) == (ST_IRQ | fault));
  CHECK(strcmp(tm_ethosu_status_reason(tm_ethosu_last_status(&dev)), reason) == 0);
  CHECK(m.status == 0 && m.resets == 2); /* the NPU is left reset: no fault, not running */
  CHECK(dev.ready == 1);
  /* The next job starts clean and succeeds. */
  m.fault_bits = 0;
  eu_model_clear_log(&m);
  CHECK(tm_ethosu_run(&dev, &job) == TM_OK);
  check_prefix("job after the fault", &m, 0, START_U55, START_U55_N);
}

static void test_run_bus_error(void) {
  puts("test_run_bus_error");
  run_fault_u55("bus error", ST_BUS, "NPU bus error (AXI abort)");
}

static void test_run_parse_error(void) {
  puts("test_run_parse_error");
  run_fault_u55("parse error", ST_PARSE, "NPU command stream parse error");
}

static void test_run_timeout(void) {
  puts("test_run_timeout");
  eu_model m;
  tm_ethosu_device dev;
  init_u55(&m, &dev, 5);
  m.job_hangs = 1;
  tm_ethosu_job job = three_region_job();
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_TIMEOUT);
  check_prefix("timeout start", &m, 0, START_U55, START_U55_N);
  const eu_access polls[] = {R(STATUS, ST_RUNNING), R(STATUS, ST_RUNNING), R(STATUS, ST_RUNNING),
                             R(STATUS, ST_RUNNING), R(STATUS, ST_RUNNING)};
  check_prefix("timeout: exactly timeout_polls reads", &m, START_U55_N, polls, 5);
  check_sequence("reset after the timeout", &m, START_U55_N + 5, RESET_U55, RESET_U55_N);
  CHECK(tm_ethosu_last_status(&dev) == ST_RUNNING);
  CHECK(strcmp(tm_ethosu_status_reason(ST_RUNNING), "NPU still running (timeout)") == 0);
  CHECK(m.status == 0); /* reset stopped the job */
  m.job_hangs = 0;
  CHECK(tm_ethosu_run(&dev, &job) == TM_OK);
}

static void test_run_stops_early(void) {
  puts("test_run_stops_early");
  eu_model m;
  tm_ethosu_device dev;
  init_u55(&m, &dev, 100);
  m.job_polls = 0;
  m.stop_early = 1; /* IRQ without the command-end bit */
  tm_ethosu_job job = three_region_job();
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_DELEGATE);
  const eu_access seen[] = {R(STATUS, ST_IRQ), R(CMD, 0xD), W(CMD, 0xE), R(STATUS, 0)};
  check_prefix("early stop", &m, START_U55_N, seen, 4);
  check_sequence("reset after early stop", &m, START_U55_N + 4, RESET_U55, RESET_U55_N);
  CHECK(tm_ethosu_last_status(&dev) == 0);
  CHECK(strcmp(tm_ethosu_status_reason(0), "NPU stopped before the end of the command stream") ==
        0);
}

static void test_run_qread_short(void) {
  puts("test_run_qread_short");
  eu_model m;
  tm_ethosu_device dev;
  init_u55(&m, &dev, 100);
  m.job_polls = 0;
  m.qread_short = 8;
  tm_ethosu_job job = three_region_job();
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_DELEGATE);
  const eu_access seen[] = {R(STATUS, ST_IRQ | ST_END), R(CMD, 0xD), W(CMD, 0xE),
                            R(STATUS, ST_END), R(QREAD, 56)};
  check_prefix("QREAD short of QSIZE", &m, START_U55_N, seen, 5);
  check_sequence("reset after short QREAD", &m, START_U55_N + 5, RESET_U55, RESET_U55_N);
  CHECK(tm_ethosu_last_status(&dev) == ST_END);
}

static void test_run_busy(void) {
  puts("test_run_busy");
  eu_model m;
  tm_ethosu_device dev;
  init_u55(&m, &dev, 100);
  m.status = ST_RUNNING; /* someone else's job, still running */
  m.job_hangs = 1;
  tm_ethosu_job job = three_region_job();
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_STATE);
  const eu_access want[] = {R(STATUS, ST_RUNNING)};
  check_sequence("busy: one STATUS read, no write", &m, 0, want, 1);
}

static void test_run_after_foreign_fault(void) {
  puts("test_run_after_foreign_fault");
  eu_model m;
  tm_ethosu_device dev;
  init_u55(&m, &dev, 100);
  m.status = ST_BUS; /* sticky bus error from a job we did not run */
  m.job_polls = 0;
  tm_ethosu_job job = three_region_job();
  CHECK(tm_ethosu_run(&dev, &job) == TM_OK);
  const eu_access idle[] = {R(STATUS, ST_BUS)};
  check_prefix("sticky fault seen", &m, 0, idle, 1);
  check_prefix("reset before programming", &m, 1, RESET_U55, RESET_U55_N);
  check_prefix("then the job", &m, 1 + RESET_U55_N, START_U55 + 1, START_U55_N - 1);
}

/* Fault bits differ per family (Arm: STATUS bit 7 is the weight decoder fault on U55/U65
 * and reserved on U85; bit 9 is the branch fault on U85, tested in test_u85). */
static void test_weight_decoder_fault(void) {
  puts("test_weight_decoder_fault");
  run_fault_u55("weight decoder fault", 0x80u, "NPU weight decoder fault");
  eu_model m;
  eu_model_init(&m);
  m.id = EU_ID_U85;
  m.config = EU_CONFIG_U85_256;
  m.job_polls = 0;
  tm_ethosu_device dev;
  CHECK(tm_ethosu_init(&dev, model_io(&m), 100) == TM_OK);
  m.status = 0x80u; /* reserved bit on U85: neither a reason to reset nor to fail */
  uint32_t resets = m.resets;
  tm_ethosu_job job = three_region_job();
  job.num_base_addresses = 1;
  CHECK(tm_ethosu_run(&dev, &job) == TM_OK);
  CHECK(m.resets == resets);
  CHECK(tm_ethosu_last_status(&dev) == (0x80u | ST_END));
}

static void test_run_bad_jobs(void) {
  puts("test_run_bad_jobs");
  eu_model m;
  tm_ethosu_device dev;
  init_u55(&m, &dev, 100);
  tm_ethosu_job job;
  CHECK(tm_ethosu_run(&dev, NULL) == TM_ERR_INVALID_ARGUMENT);
  job = three_region_job();
  job.command_stream = NULL;
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_ARGUMENT);
  job = three_region_job();
  job.command_stream_size = 0;
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_ARGUMENT);
  job = three_region_job();
  job.command_stream_size = 62; /* not whole words */
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_ARGUMENT);
  job = three_region_job();
  job.command_stream = (const void *)(uintptr_t)(CMD_ADDR + 4u); /* not 16-byte aligned */
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_ARGUMENT);
  job = three_region_job();
  job.command_stream_size = (16u << 20) + 16u; /* QSIZE holds at most 16 MB */
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_ARGUMENT);
  job = three_region_job();
  job.num_base_addresses = 9;
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_ARGUMENT);
  job = three_region_job();
  job.base_addresses[1] = BASE1 + 8u; /* not 16-byte aligned */
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_ARGUMENT);
  job = three_region_job();
  job.base_addresses[2] = 0x100000000ull; /* beyond U55's 32-bit address space */
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_ARGUMENT);
  job = three_region_job();
  job.command_stream = (const void *)(uintptr_t)0xFFFFFFF0u; /* stream crosses 4 GB */
  job.command_stream_size = 32;
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_ARGUMENT);
  CHECK(m.log_count == 0); /* rejected before any register access */
  job = three_region_job();
  job.num_base_addresses = 0; /* a stream without regions is fine */
  CHECK(tm_ethosu_run(&dev, &job) == TM_OK);
}

static void test_run_before_init(void) {
  puts("test_run_before_init");
  tm_ethosu_device dev;
  memset(&dev, 0, sizeof(dev));
  tm_ethosu_job job = three_region_job();
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_STATE);
  CHECK(tm_ethosu_run(NULL, &job) == TM_ERR_INVALID_STATE);
  CHECK(tm_ethosu_reset(&dev) == TM_ERR_INVALID_STATE);
}

static void test_u65_40bit(void) {
  puts("test_u65_40bit");
  eu_model m;
  eu_model_init(&m);
  m.id = EU_ID_U65;
  m.config = EU_CONFIG_U65_256;
  m.job_polls = 0;
  tm_ethosu_device dev;
  CHECK(tm_ethosu_init(&dev, model_io(&m), 100) == TM_OK);
  CHECK(dev.product == TM_ETHOSU_U65);
  check_sequence("U65 reset (same map as U55)", &m, 2, RESET_U55, RESET_U55_N);
  eu_model_clear_log(&m);
  tm_ethosu_job job = three_region_job();
  job.base_addresses[0] = 0x1234567800ull; /* needs the high word */
  job.base_addresses[1] = 0xFFFFFFFFF0ull; /* highest aligned 40-bit address */
  CHECK(tm_ethosu_run(&dev, &job) == TM_OK);
  const eu_access want[] = {
      R(STATUS, 0),
      W(QBASE, CMD_ADDR), W(QBASE_HI, 0), W(QSIZE, 64), W(QCONFIG, QCONFIG_DEFAULT),
      W(BASEP0, 0x34567800u), W(BASEP0 + 4, 0x12u),
      W(BASEP0 + 8, 0xFFFFFFF0u), W(BASEP0 + 12, 0xFFu),
      W(BASEP0 + 16, BASE2), W(BASEP0 + 20, 0),
      W(REGIONCFG, REGIONCFG_DEFAULT),
      R(CMD, 0xC), W(CMD, 0xD),
      R(STATUS, ST_IRQ | ST_END), R(CMD, 0xD), W(CMD, 0xE), R(STATUS, ST_END), R(QREAD, 64),
  };
  check_sequence("U65 run with 40-bit addresses", &m, 0, want, sizeof(want) / sizeof(want[0]));
  eu_model_clear_log(&m);
  job.base_addresses[1] = 0x10000000000ull; /* 2^40: too wide */
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_INVALID_ARGUMENT);
  CHECK(m.log_count == 0);
}

static void test_u85(void) {
  puts("test_u85");
  eu_model m;
  eu_model_init(&m);
  m.id = EU_ID_U85;
  m.config = EU_CONFIG_U85_256;
  m.reset_reads = 1;
  m.job_polls = 0;
  tm_ethosu_device dev;
  CHECK(tm_ethosu_init(&dev, model_io(&m), 100) == TM_OK);
  CHECK(dev.product == TM_ETHOSU_U85);
  const eu_access reset85[] = {
      W(RESET, 0x1), R(STATUS, ST_RESET), R(STATUS, 0), R(PROT, 0x1),
      W(MEM_ATTR0, 0), W(MEM_ATTR1, 0),        /* SRAM AXI port */
      W(MEM_ATTR2, 0x4), W(MEM_ATTR3, 0x4),    /* external AXI port (bit 2) */
      W(QCONFIG, QCONFIG_DEFAULT), W(REGIONCFG, REGIONCFG_DEFAULT),
      W(AXI_SRAM, AXI_PORT_DEFAULT), W(AXI_EXT, AXI_PORT_DEFAULT),
  };
  const uint32_t nreset = sizeof(reset85) / sizeof(reset85[0]);
  const eu_access head[] = {R(ID, EU_ID_U85), R(CONFIG, EU_CONFIG_U85_256)};
  check_prefix("U85 identify", &m, 0, head, 2);
  check_sequence("U85 reset", &m, 2, reset85, nreset);
  eu_model_clear_log(&m);
  tm_ethosu_job job = three_region_job();
  job.num_base_addresses = 1;
  CHECK(tm_ethosu_run(&dev, &job) == TM_OK);
  const eu_access run[] = {
      R(STATUS, 0), W(QBASE, CMD_ADDR), W(QBASE_HI, 0), W(QSIZE, 64),
      W(QCONFIG, QCONFIG_DEFAULT), W(BASEP0, BASE0), W(BASEP0 + 4, 0),
      W(REGIONCFG, REGIONCFG_DEFAULT), R(CMD, 0xC), W(CMD, 0xD),
      R(STATUS, ST_IRQ | ST_END), R(CMD, 0xD), W(CMD, 0xE), R(STATUS, ST_END), R(QREAD, 64),
  };
  check_sequence("U85 run", &m, 0, run, sizeof(run) / sizeof(run[0]));
  /* U85's branch fault (bit 9) is a fault; it resets with the U85 bus setup. */
  eu_model_clear_log(&m);
  m.fault_bits = ST_BRANCH;
  CHECK(tm_ethosu_run(&dev, &job) == TM_ERR_DELEGATE);
  check_sequence("U85 reset after branch fault", &m, 11, reset85, nreset);
  CHECK(tm_ethosu_last_status(&dev) == (ST_IRQ | ST_BRANCH));
  CHECK(strcmp(tm_ethosu_status_reason(ST_IRQ | ST_BRANCH), "NPU command stream branch fault") ==
        0);
}

static void test_cache_hooks(void) {
  puts("test_cache_hooks");
  eu_model m;
  eu_model_init(&m);
  tm_ethosu_io io = {eu_model_read, eu_model_write, &m, eu_model_cache_clean,
                     eu_model_cache_invalidate};
  tm_ethosu_device dev;
  CHECK(tm_ethosu_init(&dev, io, 100) == TM_OK);
  tm_ethosu_job job = three_region_job();
  CHECK(tm_ethosu_run(&dev, &job) == TM_OK);
  CHECK(m.cache_cleans == 4);      /* command stream + 3 regions before the start */
  CHECK(m.cache_invalidates == 3); /* 3 regions after the job */
}

static void test_mmio(void) {
  puts("test_mmio");
  static uint32_t block[64];
  tm_ethosu_io io = tm_ethosu_mmio_io((uintptr_t)block);
  io.write(io.ctx, 0x24, 0x5u);
  CHECK(block[9] == 0x5u);
  block[2] = 0xC;
  CHECK(io.read(io.ctx, 0x08) == 0xCu);
  CHECK(io.cache_clean == NULL && io.cache_invalidate == NULL);
}

static void test_status_strings(void) {
  puts("test_status_strings");
  char buf[128];
  size_t n = tm_ethosu_format_status(ST_IRQ | ST_BUS | ST_END, buf, sizeof(buf));
  CHECK(strcmp(buf, "irq_raised|bus_error|cmd_end_reached") == 0);
  CHECK(n == strlen("irq_raised|bus_error|cmd_end_reached"));
  n = tm_ethosu_format_status(ST_IRQ | ST_BUS, buf, 5);
  CHECK(strcmp(buf, "irq_") == 0 && n == 4);
  CHECK(tm_ethosu_format_status(0, buf, sizeof(buf)) == 0 && buf[0] == '\0');
  CHECK(tm_ethosu_format_status(ST_IRQ, NULL, 0) == 0);
  CHECK(strcmp(tm_ethosu_status_bit_name(3), "reset_in_progress") == 0);
  CHECK(strcmp(tm_ethosu_status_bit_name(20), "reserved") == 0);
  CHECK(strcmp(tm_ethosu_status_reason(ST_BUS | ST_PARSE), "NPU bus error (AXI abort)") == 0);
  CHECK(strcmp(tm_ethosu_status_reason(0x80), "NPU weight decoder fault") == 0);
  CHECK(strcmp(tm_ethosu_status_reason(0x100), "NPU ECC fault in internal RAM") == 0);
  CHECK(strcmp(tm_ethosu_product_name(TM_ETHOSU_U85), "Ethos-U85") == 0);
  CHECK(strcmp(tm_ethosu_product_name(TM_ETHOSU_UNKNOWN), "unknown") == 0);
}

/* Vela driver payload: "COP1", OPTIMIZER_CONFIG (action 1 + CONFIG + ID), COMMAND_STREAM
 * (action 2, length in words in bits 31:16 and bits 23:16 of it in 15:8), NOP (5). */
static void test_payload(void) {
  puts("test_payload");
  static uint32_t w[16];
  memcpy(&w[0], "COP1", 4); /* the magic as bytes in memory */
  w[1] = 0x00000001u;
  w[2] = EU_CONFIG_U55_128;
  w[3] = EU_ID_U55;
  w[4] = 0x00000002u | (4u << 16); /* command stream of 4 words */
  w[5] = 0x11111111u;
  w[6] = 0x22222222u;
  w[7] = 0x33333333u;
  w[8] = 0x44444444u;
  w[9] = 0x00000005u; /* NOP */
  tm_ethosu_payload p;
  CHECK(tm_ethosu_parse_payload(w, 40, &p) == TM_OK);
  CHECK(p.command_stream == (const void *)&w[5] && p.command_stream_size == 16);
  CHECK(p.has_optimizer_config && p.optimizer_config == EU_CONFIG_U55_128 &&
        p.optimizer_id == EU_ID_U55);

  eu_model m;
  tm_ethosu_device dev;
  init_u55(&m, &dev, 100);
  CHECK(tm_ethosu_check_payload(&dev, &p) == TM_OK);
  p.optimizer_config = EU_CONFIG_U55_128 + 1u; /* compiled for 256 MACs */
  CHECK(tm_ethosu_check_payload(&dev, &p) == TM_ERR_UNSUPPORTED);
  p.optimizer_config = EU_CONFIG_U55_128 + 0x100u; /* other SHRAM size */
  CHECK(tm_ethosu_check_payload(&dev, &p) == TM_ERR_UNSUPPORTED);
  p.optimizer_config = EU_CONFIG_U55_128;
  p.optimizer_id = EU_ID_U55 + (1u << 20); /* compiled for a newer architecture minor */
  CHECK(tm_ethosu_check_payload(&dev, &p) == TM_ERR_UNSUPPORTED);
  p.optimizer_id = EU_ID_U55 - (1u << 20); /* older minor: fine */
  CHECK(tm_ethosu_check_payload(&dev, &p) == TM_OK);
  p.has_optimizer_config = 0;
  CHECK(tm_ethosu_check_payload(&dev, &p) == TM_OK);

  /* Malformed payloads name the offending byte offset. */
  uint32_t saved = w[0];
  w[0] = 0x32504F43u; /* "COP2" */
  CHECK(tm_ethosu_parse_payload(w, 40, &p) == TM_ERR_INVALID_PROGRAM && p.error_offset == 0);
  w[0] = saved;
  CHECK(tm_ethosu_parse_payload(w, 38, &p) == TM_ERR_INVALID_PROGRAM && p.error_offset == 38);
  CHECK(tm_ethosu_parse_payload(w, 32, &p) == TM_ERR_INVALID_PROGRAM && p.error_offset == 16);
  w[4] = 0x00000102u | (4u << 16); /* length 0x10004 words: beyond the data */
  CHECK(tm_ethosu_parse_payload(w, 40, &p) == TM_ERR_INVALID_PROGRAM && p.error_offset == 16);
  w[4] = 0x00000002u | (4u << 16);
  w[9] = 0x00000009u; /* unknown action */
  CHECK(tm_ethosu_parse_payload(w, 40, &p) == TM_ERR_INVALID_PROGRAM && p.error_offset == 36);
  CHECK(tm_ethosu_parse_payload(w, 16, &p) == TM_ERR_INVALID_PROGRAM && p.error_offset == 16);
  CHECK(tm_ethosu_parse_payload(w, 8, &p) == TM_ERR_INVALID_PROGRAM && p.error_offset == 4);
  CHECK(tm_ethosu_parse_payload((const uint8_t *)w + 2, 8, &p) == TM_ERR_INVALID_ARGUMENT);
}

/* `payload FILE u55|u65|u85`: parse a Vela command data file and check it against a model
 * of that product (the Python test feeds Vela's real output). Prints one line. */
static int payload_mode(const char *path, const char *product) {
  static uint32_t words[1u << 16]; /* 4-byte aligned, 256 KB */
  FILE *f = fopen(path, "rb");
  if (f == NULL) return 2;
  size_t n = fread(words, 1, sizeof(words), f);
  fclose(f);
  eu_model m;
  eu_model_init(&m);
  if (strcmp(product, "u65") == 0) {
    m.id = EU_ID_U65;
    m.config = EU_CONFIG_U65_256;
  } else if (strcmp(product, "u85") == 0) {
    m.id = EU_ID_U85;
    m.config = EU_CONFIG_U85_256;
  } else if (strcmp(product, "u55") != 0) {
    return 2;
  }
  tm_ethosu_device dev;
  if (tm_ethosu_init(&dev, model_io(&m), 100) != TM_OK) return 3;
  tm_ethosu_payload p;
  tm_status st = tm_ethosu_parse_payload(words, n, &p);
  if (st != TM_OK) {
    printf("parse %d offset %u\n", (int)st, (unsigned)p.error_offset);
    return 1;
  }
  printf("stream_offset %u stream_size %u has_config %u config 0x%08x id 0x%08x check %d\n",
         (unsigned)((const uint8_t *)p.command_stream - (const uint8_t *)words),
         (unsigned)p.command_stream_size, (unsigned)p.has_optimizer_config,
         (unsigned)p.optimizer_config, (unsigned)p.optimizer_id,
         (int)tm_ethosu_check_payload(&dev, &p));
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "payload") == 0) return payload_mode(argv[2], argv[3]);
  test_init_u55();
  test_init_non_secure_user();
  test_init_wrong_product();
  test_init_reset_timeout();
  test_init_levels_not_taken();
  test_init_bad_arguments();
  test_run_ok_u55();
  test_run_bus_error();
  test_run_parse_error();
  test_run_timeout();
  test_run_stops_early();
  test_run_qread_short();
  test_run_busy();
  test_run_after_foreign_fault();
  test_weight_decoder_fault();
  test_run_bad_jobs();
  test_run_before_init();
  test_u65_40bit();
  test_u85();
  test_cache_hooks();
  test_mmio();
  test_status_strings();
  test_payload();
  if (failures != 0) {
    printf("FAILED %d of %d checks\n", failures, checks);
    return 1;
  }
  printf("ALL PASS (%d checks)\n", checks);
  return 0;
}
