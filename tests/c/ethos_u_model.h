/*
 * A register-level model of an Ethos-U NPU for host tests of our driver.
 *
 * It models what the driver can observe through the register interface: ID/CONFIG
 * values, a soft reset that completes after a number of STATUS reads (meanwhile other
 * registers read as 0 and writes are ignored, as Arm documents), PROT taking the
 * levels written to RESET, a command stream that stops after a number of STATUS polls
 * (IRQ raised, command end reached, QREAD = QSIZE), injectable faults, a job that never
 * completes, and a log of every register access in order.
 */
#ifndef TORCHMCU_TESTS_ETHOS_U_MODEL_H
#define TORCHMCU_TESTS_ETHOS_U_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define EU_MODEL_REGS 0x400u /* bytes of register space modelled (up to the BASEP block) */
#define EU_MODEL_LOG_MAX 512u

typedef struct {
  uint8_t write; /* 1: write, 0: read */
  uint32_t offset;
  uint32_t value; /* written value, or value returned by the read */
} eu_access;

typedef struct {
  /* Configuration (set before use; eu_model_init gives a U55-128). */
  uint32_t id;
  uint32_t config;
  uint32_t reset_reads;     /* STATUS reads that still show the reset in progress */
  uint32_t job_polls;       /* STATUS reads after the start before the stream stops */
  uint8_t reset_hangs;      /* 1: a reset never completes */
  uint8_t job_hangs;        /* 1: a started job never stops */
  uint8_t ignore_levels;    /* 1: PROT stays at its old value after a reset */
  uint32_t fault_bits;      /* STATUS bits set when the job stops (0: clean end) */
  uint8_t stop_early;       /* 1: the job stops (IRQ) without reaching the stream end */
  uint32_t qread_short;     /* bytes QREAD falls short of QSIZE at a clean end */

  /* State. */
  uint32_t regs[EU_MODEL_REGS / 4u]; /* plain read/write registers */
  uint32_t status;
  uint32_t prot;
  uint32_t pending_levels;
  uint32_t reset_left;
  uint32_t job_left;
  uint32_t resets; /* completed resets */
  uint32_t starts; /* jobs started */

  eu_access log[EU_MODEL_LOG_MAX];
  uint32_t log_count;
  uint8_t log_overflow;
  uint32_t cache_cleans;
  uint32_t cache_invalidates;
} eu_model;

/* ID/CONFIG words of the modelled products. */
#define EU_ID_U55 0x10104201u     /* architecture 1.1.0, product major 4, r2p0 */
#define EU_CONFIG_U55_128 0x00001807u /* product 0, SHRAM 24 KB, cmd stream v0, log2(MACs)=7 */
#define EU_ID_U65 0x10104201u
#define EU_CONFIG_U65_256 0x10003008u /* product 1, SHRAM 48 KB, log2(MACs)=8 */
#define EU_ID_U85 0x20000001u     /* architecture 2.0.0 */
/* product 2, cmd stream v1, log2(MACs)=8, bit 8: U85's AXI port field (the word Vela
 * 4.x compiles ethos-u85-256 for, checked by tests/test_ethos_u_driver.py) */
#define EU_CONFIG_U85_256 0x20000118u

/* A U55-128 out of reset: STATUS reset bit clear, CMD = clock/power Q enabled. */
void eu_model_init(eu_model *m);
/* Clear the access log (state is kept). */
void eu_model_clear_log(eu_model *m);

uint32_t eu_model_read(void *ctx, uint32_t offset);
void eu_model_write(void *ctx, uint32_t offset, uint32_t value);
/* Cache hooks: count the calls. */
void eu_model_cache_clean(void *ctx, const void *address, size_t size);
void eu_model_cache_invalidate(void *ctx, const void *address, size_t size);

#endif
