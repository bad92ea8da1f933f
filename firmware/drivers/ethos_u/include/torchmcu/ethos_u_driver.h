/*
 * Register-level driver for the Arm Ethos-U55, U65 and U85 NPUs (polled, no heap).
 *
 * Register access goes through tm_ethosu_io, so the same code drives real hardware
 * (tm_ethosu_mmio_io) and the host tests' register model (tests/c/ethos_u_model.c).
 *
 * Programming model (from Arm's public Ethos-U documentation):
 *  - init: read ID and CONFIG, accept only a product this driver knows (U55/U65 with
 *    architecture major 1, U85 with major 2), soft reset (write RESET with the
 *    requested privilege/security level, poll STATUS until the reset bit clears, check
 *    PROT took the levels), then program the bus configuration (QCONFIG, REGIONCFG and
 *    AXI limits; on U85 MEM_ATTR0..3, AXI_SRAM, AXI_EXT instead of AXI_LIMIT0..3).
 *  - run: program QBASE/QSIZE/QCONFIG, the base pointers and REGIONCFG, set the run bit
 *    of CMD (keeping its clock/power Q bits), poll STATUS until the IRQ bit (the
 *    command stream stopped), clear the IRQ via CMD, then require no fault bit, the
 *    command-end bit and QREAD == command stream size.
 *  - any failure of a started job: the STATUS word is kept (tm_ethosu_last_status),
 *    the NPU is soft reset and its bus configuration restored, so the next job starts
 *    clean; the call returns TM_ERR_DELEGATE (fault) or TM_ERR_TIMEOUT.
 *
 * Caches: the NPU reads the command stream and base-pointer regions from memory. If
 * the CPU has a data cache, set io.cache_clean/io.cache_invalidate (both optional):
 * the driver cleans the command stream and every region before the start and
 * invalidates every region after a successful job.
 */
#ifndef TORCHMCU_ETHOS_U_DRIVER_H
#define TORCHMCU_ETHOS_U_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "torchmcu/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TM_ETHOSU_MAX_BASE_ADDRESSES 8u
/* QREAD/QSIZE cover 0..16 MB. */
#define TM_ETHOSU_MAX_COMMAND_STREAM (16u << 20)
/* Command stream and base addresses must be aligned to this many bytes. */
#define TM_ETHOSU_ALIGNMENT 16u

/* Register access: offsets are byte offsets from the NPU's register base. */
typedef struct {
  uint32_t (*read)(void *ctx, uint32_t offset);
  void (*write)(void *ctx, uint32_t offset, uint32_t value);
  void *ctx;
  /* Optional data-cache maintenance (NULL: none). */
  void (*cache_clean)(void *ctx, const void *address, size_t size);
  void (*cache_invalidate)(void *ctx, const void *address, size_t size);
} tm_ethosu_io;

/* Memory-mapped registers at `base` (volatile 32-bit accesses); no cache hooks. */
tm_ethosu_io tm_ethosu_mmio_io(uintptr_t base);

typedef enum {
  TM_ETHOSU_UNKNOWN = 0,
  TM_ETHOSU_U55 = 55,
  TM_ETHOSU_U65 = 65,
  TM_ETHOSU_U85 = 85,
} tm_ethosu_product;

/*
 * Bus and security settings. tm_ethosu_default_config() gives Arm's defaults:
 * secure + privileged, command stream on memory config 2, region 0 on config 3,
 * region 1 on config 0, regions 2..7 on config 1. The memory config numbers select
 * AXI_LIMIT0..3 on U55/U65 (0,1: AXI master 0; 2,3: master 1) and MEM_ATTR0..3 on U85.
 */
typedef struct {
  uint32_t timeout_polls; /* STATUS reads before a reset or a job counts as hung (> 0) */
  uint8_t secure;         /* 1: request secure NPU accesses, 0: non-secure */
  uint8_t privileged;     /* 1: privileged, 0: user */
  uint8_t qconfig;        /* memory config index (0..3) of the command stream */
  uint8_t region_config[TM_ETHOSU_MAX_BASE_ADDRESSES]; /* per region, 0..3 */
} tm_ethosu_config;

typedef struct {
  tm_ethosu_io io;
  tm_ethosu_config config;
  tm_ethosu_product product;
  uint32_t id;          /* ID register read at init */
  uint32_t npu_config;  /* CONFIG register read at init */
  uint32_t last_status; /* STATUS word of the last job (or of the failing reset) */
  uint8_t ready;        /* 1 after a successful init; 0 if a reset failed since */
} tm_ethosu_device;

/* One command stream run. base_addresses[i] goes to BASEP i (Vela's region i). */
typedef struct {
  const void *command_stream;
  size_t command_stream_size; /* bytes, a multiple of 4, at most 16 MB */
  uint64_t base_addresses[TM_ETHOSU_MAX_BASE_ADDRESSES];
  size_t base_address_sizes[TM_ETHOSU_MAX_BASE_ADDRESSES]; /* bytes, for cache maintenance */
  uint32_t num_base_addresses;
} tm_ethosu_job;

tm_ethosu_config tm_ethosu_default_config(uint32_t timeout_polls);

/* init with tm_ethosu_default_config(timeout_polls). */
tm_status tm_ethosu_init(tm_ethosu_device *dev, tm_ethosu_io io, uint32_t timeout_polls);

/*
 * Identify the NPU, soft reset it, program the bus configuration.
 * TM_ERR_INVALID_ARGUMENT: bad arguments (no register touched);
 * TM_ERR_UNSUPPORTED: not an Ethos-U product this driver knows (no register written);
 * TM_ERR_TIMEOUT: the reset did not complete; TM_ERR_DELEGATE: the NPU did not take
 * the requested privilege/security level.
 */
tm_status tm_ethosu_init_config(tm_ethosu_device *dev, tm_ethosu_io io,
                                const tm_ethosu_config *config);

/*
 * Run one command stream to completion (polled).
 * TM_ERR_INVALID_STATE: device not initialised, or the NPU is already running (a fault
 * left in STATUS by an earlier job is cleared by a soft reset before the start);
 * TM_ERR_INVALID_ARGUMENT (before any register access): misaligned, empty or oversized
 * command stream, too many or misaligned base addresses, an address beyond the NPU's
 * address width (32 bits U55, 40 bits U65/U85);
 * TM_ERR_DELEGATE: the NPU reported a fault or stopped before the end of the stream;
 * TM_ERR_TIMEOUT: no completion within timeout_polls STATUS reads.
 * On DELEGATE/TIMEOUT the NPU has been soft reset (ready stays 1 if that reset worked).
 */
tm_status tm_ethosu_run(tm_ethosu_device *dev, const tm_ethosu_job *job);

/* Soft reset + bus configuration again (what run does after a failure). */
tm_status tm_ethosu_reset(tm_ethosu_device *dev);

/* STATUS word recorded by the last run (or failing reset). */
uint32_t tm_ethosu_last_status(const tm_ethosu_device *dev);

/* Static strings describing a STATUS word. */
const char *tm_ethosu_status_reason(uint32_t status); /* the main problem, "ok" if none */
/* Name of STATUS bit `bit` (0..31); "reserved" for bits without a meaning here. */
const char *tm_ethosu_status_bit_name(unsigned bit);
/* Writes "bus_error|cmd_end_reached|..." (every set flag bit 0..9) into buf; returns
 * the length written (always NUL-terminated when size > 0, truncated if needed). */
size_t tm_ethosu_format_status(uint32_t status, char *buf, size_t size);
const char *tm_ethosu_product_name(tm_ethosu_product product);

/*
 * Vela's command data ("driver payload"): a "COP1" word, then driver actions. We read
 * OPTIMIZER_CONFIG (the CONFIG/ID words Vela compiled for), COMMAND_STREAM (the
 * register command stream, used in place) and skip NOP/READ_APB_REG/DUMP_SHRAM. Exactly
 * one COMMAND_STREAM and at most one OPTIMIZER_CONFIG (what Vela writes).
 */
typedef struct {
  const void *command_stream;
  size_t command_stream_size; /* bytes */
  uint8_t has_optimizer_config;
  uint32_t optimizer_config; /* CONFIG word Vela targeted */
  uint32_t optimizer_id;     /* ID word Vela targeted */
  size_t error_offset;       /* byte offset of the problem when parsing fails */
} tm_ethosu_payload;

/* TM_ERR_INVALID_PROGRAM with out->error_offset set on malformed data. `data` must be
 * 4-byte aligned. */
tm_status tm_ethosu_parse_payload(const void *data, size_t size, tm_ethosu_payload *out);

/* TM_OK if the NPU matches what Vela compiled for (MACs, command stream version,
 * SHRAM size on U55/U65, product on U85, architecture major equal and minor not older,
 * custom DMA); TM_ERR_UNSUPPORTED otherwise. No optimizer config: TM_OK. */
tm_status tm_ethosu_check_payload(const tm_ethosu_device *dev, const tm_ethosu_payload *payload);

#ifdef __cplusplus
}
#endif

#endif
