/* Ethos-U55/U65/U85 driver: identify, reset, configure, run a command stream (polled). */
#include "torchmcu/ethos_u_driver.h"

#include "ethos_u_regs.h"

/* Fault bits per product family: a set bit stops the job and needs a reset. */
#define FAULTS_U55_U65 \
  (TM_NPU_STATUS_BUS_ERROR | TM_NPU_STATUS_PARSE_ERROR | TM_NPU_STATUS_WD_FAULT | \
   TM_NPU_STATUS_ECC_FAULT)
#define FAULTS_U85 \
  (TM_NPU_STATUS_BUS_ERROR | TM_NPU_STATUS_PARSE_ERROR | TM_NPU_STATUS_ECC_FAULT | \
   TM_NPU_STATUS_BRANCH_FAULT)

/* Bus defaults (Arm's published driver defaults):
 * U55/U65 AXI_LIMITn: 32 outstanding reads, 16 writes, no burst split, memtype 0.
 * U85 AXI_SRAM/AXI_EXT: 64 reads, 32 writes, 256-byte bursts.
 * U85 MEM_ATTR0/1 on the SRAM port, MEM_ATTR2/3 on the external port. */
#define AXI_LIMIT_DEFAULT \
  ((31u << TM_NPU_AXI_LIMIT_READS_M1_SHIFT) | (15u << TM_NPU_AXI_LIMIT_WRITES_M1_SHIFT))
#define AXI_PORT_DEFAULT                                                             \
  ((63u << TM_NPU_AXI_PORT_READS_M1_SHIFT) | (31u << TM_NPU_AXI_PORT_WRITES_M1_SHIFT) | \
   (2u << TM_NPU_AXI_PORT_BEATS_SHIFT))

static uint32_t mmio_read(void *ctx, uint32_t offset) {
  return *(volatile const uint32_t *)((uintptr_t)ctx + offset);
}

static void mmio_write(void *ctx, uint32_t offset, uint32_t value) {
  *(volatile uint32_t *)((uintptr_t)ctx + offset) = value;
}

tm_ethosu_io tm_ethosu_mmio_io(uintptr_t base) {
  tm_ethosu_io io = {mmio_read, mmio_write, (void *)base, NULL, NULL};
  return io;
}

tm_ethosu_config tm_ethosu_default_config(uint32_t timeout_polls) {
  tm_ethosu_config c = {timeout_polls, 1, 1, 2, {3, 0, 1, 1, 1, 1, 1, 1}};
  return c;
}

static uint32_t rd(const tm_ethosu_device *dev, uint32_t offset) {
  return dev->io.read(dev->io.ctx, offset);
}

static void wr(const tm_ethosu_device *dev, uint32_t offset, uint32_t value) {
  dev->io.write(dev->io.ctx, offset, value);
}

static uint32_t fault_mask(const tm_ethosu_device *dev) {
  return dev->product == TM_ETHOSU_U85 ? FAULTS_U85 : FAULTS_U55_U65;
}

static uint32_t address_bits(const tm_ethosu_device *dev) {
  return dev->product == TM_ETHOSU_U55 ? 32u : 40u;
}

/* The product from ID (architecture major) and CONFIG (product field); both must agree. */
static tm_ethosu_product identify(uint32_t id, uint32_t config) {
  uint32_t major = TM_NPU_ID_ARCH_MAJOR(id);
  uint32_t product = TM_NPU_CONFIG_PRODUCT(config);
  if (major == 1u && product == 0u) return TM_ETHOSU_U55;
  if (major == 1u && product == 1u) return TM_ETHOSU_U65;
  if (major == 2u && product == 2u) return TM_ETHOSU_U85;
  return TM_ETHOSU_UNKNOWN;
}

static uint32_t region_config_word(const tm_ethosu_config *c) {
  uint32_t word = 0;
  for (uint32_t i = 0; i < TM_ETHOSU_MAX_BASE_ADDRESSES; ++i) {
    word |= (uint32_t)(c->region_config[i] & 3u) << (2u * i);
  }
  return word;
}

/* QCONFIG, REGIONCFG and the AXI settings; lost by a reset, so written after each. */
static void configure_bus(const tm_ethosu_device *dev) {
  if (dev->product == TM_ETHOSU_U85) {
    wr(dev, TM_NPU_MEM_ATTR(0), 0);
    wr(dev, TM_NPU_MEM_ATTR(1), 0);
    wr(dev, TM_NPU_MEM_ATTR(2), TM_NPU_MEM_ATTR_EXT_PORT);
    wr(dev, TM_NPU_MEM_ATTR(3), TM_NPU_MEM_ATTR_EXT_PORT);
    wr(dev, TM_NPU_QCONFIG, dev->config.qconfig & 3u);
    wr(dev, TM_NPU_REGIONCFG, region_config_word(&dev->config));
    wr(dev, TM_NPU_AXI_SRAM, AXI_PORT_DEFAULT);
    wr(dev, TM_NPU_AXI_EXT, AXI_PORT_DEFAULT);
  } else {
    wr(dev, TM_NPU_QCONFIG, dev->config.qconfig & 3u);
    wr(dev, TM_NPU_REGIONCFG, region_config_word(&dev->config));
    for (uint32_t n = 0; n < 4u; ++n) wr(dev, TM_NPU_AXI_LIMIT(n), AXI_LIMIT_DEFAULT);
  }
}

static uint32_t requested_levels(const tm_ethosu_config *c) {
  return (c->privileged ? TM_NPU_LEVEL_PRIVILEGED : 0u) |
         (c->secure ? 0u : TM_NPU_LEVEL_NON_SECURE);
}

/* Soft reset: request it with the wanted levels, wait for STATUS.reset to clear, check
 * PROT, restore the bus configuration. On failure dev->ready drops to 0. */
static tm_status soft_reset(tm_ethosu_device *dev) {
  uint32_t levels = requested_levels(&dev->config);
  wr(dev, TM_NPU_RESET, levels);
  uint32_t status = TM_NPU_STATUS_RESETTING;
  for (uint32_t n = 0; n < dev->config.timeout_polls; ++n) {
    status = rd(dev, TM_NPU_STATUS);
    if ((status & TM_NPU_STATUS_RESETTING) == 0u) break;
  }
  if (status & TM_NPU_STATUS_RESETTING) {
    dev->last_status = status;
    dev->ready = 0;
    return TM_ERR_TIMEOUT;
  }
  uint32_t prot = rd(dev, TM_NPU_PROT);
  if ((prot & (TM_NPU_LEVEL_PRIVILEGED | TM_NPU_LEVEL_NON_SECURE)) != levels) {
    dev->last_status = status;
    dev->ready = 0;
    return TM_ERR_DELEGATE;
  }
  configure_bus(dev);
  return TM_OK;
}

tm_status tm_ethosu_init(tm_ethosu_device *dev, tm_ethosu_io io, uint32_t timeout_polls) {
  tm_ethosu_config config = tm_ethosu_default_config(timeout_polls);
  return tm_ethosu_init_config(dev, io, &config);
}

tm_status tm_ethosu_init_config(tm_ethosu_device *dev, tm_ethosu_io io,
                                const tm_ethosu_config *config) {
  if (dev == NULL) return TM_ERR_INVALID_ARGUMENT;
  dev->ready = 0;
  dev->product = TM_ETHOSU_UNKNOWN;
  dev->id = 0;
  dev->npu_config = 0;
  dev->last_status = 0;
  if (config == NULL || io.read == NULL || io.write == NULL || config->timeout_polls == 0u ||
      config->qconfig > 3u) {
    return TM_ERR_INVALID_ARGUMENT;
  }
  for (uint32_t i = 0; i < TM_ETHOSU_MAX_BASE_ADDRESSES; ++i) {
    if (config->region_config[i] > 3u) return TM_ERR_INVALID_ARGUMENT;
  }
  dev->io = io;
  dev->config = *config;
  /* Identify before writing anything: an unknown device is left untouched. */
  dev->id = rd(dev, TM_NPU_ID);
  dev->npu_config = rd(dev, TM_NPU_CONFIG);
  dev->product = identify(dev->id, dev->npu_config);
  if (dev->product == TM_ETHOSU_UNKNOWN) return TM_ERR_UNSUPPORTED;
  tm_status st = soft_reset(dev);
  if (st != TM_OK) return st;
  dev->ready = 1;
  return TM_OK;
}

tm_status tm_ethosu_reset(tm_ethosu_device *dev) {
  if (dev == NULL || dev->product == TM_ETHOSU_UNKNOWN) return TM_ERR_INVALID_STATE;
  tm_status st = soft_reset(dev);
  if (st == TM_OK) dev->ready = 1;
  return st;
}

uint32_t tm_ethosu_last_status(const tm_ethosu_device *dev) {
  return dev == NULL ? 0u : dev->last_status;
}

static tm_status check_job(const tm_ethosu_device *dev, const tm_ethosu_job *job) {
  uintptr_t cmd = (uintptr_t)job->command_stream;
  if (job->command_stream == NULL || job->command_stream_size == 0u ||
      job->command_stream_size % 4u != 0u || cmd % TM_ETHOSU_ALIGNMENT != 0u ||
      job->num_base_addresses > TM_ETHOSU_MAX_BASE_ADDRESSES) {
    return TM_ERR_INVALID_ARGUMENT;
  }
  uint64_t limit = ((uint64_t)1 << address_bits(dev)) - 1u; /* highest valid address */
  uint64_t size = job->command_stream_size;
  if (size > TM_ETHOSU_MAX_COMMAND_STREAM || (uint64_t)cmd > limit ||
      size - 1u > limit - (uint64_t)cmd) {
    return TM_ERR_INVALID_ARGUMENT;
  }
  for (uint32_t i = 0; i < job->num_base_addresses; ++i) {
    uint64_t a = job->base_addresses[i];
    if (a % TM_ETHOSU_ALIGNMENT != 0u || a > limit) return TM_ERR_INVALID_ARGUMENT;
  }
  return TM_OK;
}

/* Record the failing STATUS word, reset so the next job starts clean, report `error`. */
static tm_status fail_job(tm_ethosu_device *dev, uint32_t status, tm_status error) {
  (void)soft_reset(dev);
  dev->last_status = status; /* the job's status, not the reset's */
  return error;
}

static void write_address(const tm_ethosu_device *dev, uint32_t lo, uint32_t hi,
                          uint64_t address) {
  wr(dev, lo, (uint32_t)address);
  if (address_bits(dev) > 32u) wr(dev, hi, (uint32_t)(address >> 32));
}

tm_status tm_ethosu_run(tm_ethosu_device *dev, const tm_ethosu_job *job) {
  if (dev == NULL || !dev->ready) return TM_ERR_INVALID_STATE;
  if (job == NULL) return TM_ERR_INVALID_ARGUMENT;
  tm_status st = check_job(dev, job);
  if (st != TM_OK) return st;

  uint32_t faults = fault_mask(dev);
  uint32_t status = rd(dev, TM_NPU_STATUS);
  if (status & (TM_NPU_STATUS_RUNNING | TM_NPU_STATUS_RESETTING)) {
    dev->last_status = status;
    return TM_ERR_INVALID_STATE;
  }
  if (status & faults) {
    /* A fault left by someone else's job: only a reset clears it. */
    st = soft_reset(dev);
    if (st != TM_OK) return st;
  }
  if (dev->io.cache_clean != NULL) {
    dev->io.cache_clean(dev->io.ctx, job->command_stream, job->command_stream_size);
    for (uint32_t i = 0; i < job->num_base_addresses; ++i) {
      dev->io.cache_clean(dev->io.ctx, (const void *)(uintptr_t)job->base_addresses[i],
                          job->base_address_sizes[i]);
    }
  }

  write_address(dev, TM_NPU_QBASE, TM_NPU_QBASE_HI, (uint64_t)(uintptr_t)job->command_stream);
  wr(dev, TM_NPU_QSIZE, (uint32_t)job->command_stream_size);
  wr(dev, TM_NPU_QCONFIG, dev->config.qconfig & 3u);
  for (uint32_t i = 0; i < job->num_base_addresses; ++i) {
    write_address(dev, TM_NPU_BASEP(i), TM_NPU_BASEP_HI(i), job->base_addresses[i]);
  }
  wr(dev, TM_NPU_REGIONCFG, region_config_word(&dev->config));
  /* Start, keeping the clock/power Q-interface enables as they are. */
  wr(dev, TM_NPU_CMD, (rd(dev, TM_NPU_CMD) & TM_NPU_CMD_KEEP_MASK) | TM_NPU_CMD_RUN);

  /* Done when the IRQ bit is up and the NPU has left the running state (the stream's
   * final stop command raises the IRQ); a fault bit ends the wait at once. */
  int stopped = 0;
  for (uint32_t n = 0; n < dev->config.timeout_polls; ++n) {
    status = rd(dev, TM_NPU_STATUS);
    if (status & faults) return fail_job(dev, status, TM_ERR_DELEGATE);
    if ((status & TM_NPU_STATUS_IRQ_RAISED) && !(status & TM_NPU_STATUS_RUNNING)) {
      stopped = 1;
      break;
    }
  }
  if (!stopped) return fail_job(dev, status, TM_ERR_TIMEOUT);

  wr(dev, TM_NPU_CMD, (rd(dev, TM_NPU_CMD) & TM_NPU_CMD_KEEP_MASK) | TM_NPU_CMD_CLEAR_IRQ);
  status = rd(dev, TM_NPU_STATUS);
  if ((status & faults) || !(status & TM_NPU_STATUS_CMD_END)) {
    return fail_job(dev, status, TM_ERR_DELEGATE);
  }
  if (rd(dev, TM_NPU_QREAD) != (uint32_t)job->command_stream_size) {
    return fail_job(dev, status, TM_ERR_DELEGATE);
  }
  dev->last_status = status;
  if (dev->io.cache_invalidate != NULL) {
    for (uint32_t i = 0; i < job->num_base_addresses; ++i) {
      dev->io.cache_invalidate(dev->io.ctx, (const void *)(uintptr_t)job->base_addresses[i],
                               job->base_address_sizes[i]);
    }
  }
  return TM_OK;
}

const char *tm_ethosu_status_bit_name(unsigned bit) {
  switch (bit) {
    case 0: return "running";
    case 1: return "irq_raised";
    case 2: return "bus_error";
    case 3: return "reset_in_progress";
    case 4: return "cmd_parse_error";
    case 5: return "cmd_end_reached";
    case 6: return "pmu_irq_raised";
    case 7: return "weight_decoder_fault";
    case 8: return "ecc_fault";
    case 9: return "branch_fault";
    default: return "reserved";
  }
}

const char *tm_ethosu_status_reason(uint32_t status) {
  if (status & TM_NPU_STATUS_BUS_ERROR) return "NPU bus error (AXI abort)";
  if (status & TM_NPU_STATUS_PARSE_ERROR) return "NPU command stream parse error";
  if (status & TM_NPU_STATUS_WD_FAULT) return "NPU weight decoder fault";
  if (status & TM_NPU_STATUS_ECC_FAULT) return "NPU ECC fault in internal RAM";
  if (status & TM_NPU_STATUS_BRANCH_FAULT) return "NPU command stream branch fault";
  if (status & TM_NPU_STATUS_RESETTING) return "NPU reset did not complete";
  if (status & TM_NPU_STATUS_RUNNING) return "NPU still running (timeout)";
  if (!(status & TM_NPU_STATUS_CMD_END)) return "NPU stopped before the end of the command stream";
  return "ok";
}

size_t tm_ethosu_format_status(uint32_t status, char *buf, size_t size) {
  size_t len = 0;
  if (buf == NULL || size == 0u) return 0;
  for (unsigned bit = 0; bit <= 9u; ++bit) {
    if (!(status & (1u << bit))) continue;
    const char *name = tm_ethosu_status_bit_name(bit);
    if (len > 0 && len + 1 < size) buf[len++] = '|';
    for (const char *p = name; *p != '\0' && len + 1 < size; ++p) buf[len++] = *p;
  }
  buf[len] = '\0';
  return len;
}

const char *tm_ethosu_product_name(tm_ethosu_product product) {
  switch (product) {
    case TM_ETHOSU_U55: return "Ethos-U55";
    case TM_ETHOSU_U65: return "Ethos-U65";
    case TM_ETHOSU_U85: return "Ethos-U85";
    case TM_ETHOSU_UNKNOWN: break;
  }
  return "unknown";
}

/* Driver payload: little-endian 32-bit words. Word 0 is "COP1". An action word holds the
 * action in bits 7:0, and in bits 31:8 its data (for COMMAND_STREAM: the stream length in
 * words, bits 23:16 of the length in bits 15:8 of the word, bits 15:0 in bits 31:16). */
#define PAYLOAD_MAGIC 0x31504F43u /* 'C' 'O' 'P' '1' */
enum { ACTION_OPTIMIZER_CONFIG = 1, ACTION_COMMAND_STREAM = 2, ACTION_READ_APB_REG = 3,
       ACTION_DUMP_SHRAM = 4, ACTION_NOP = 5 };

static tm_status payload_error(tm_ethosu_payload *out, size_t word) {
  out->error_offset = word * 4u;
  return TM_ERR_INVALID_PROGRAM;
}

tm_status tm_ethosu_parse_payload(const void *data, size_t size, tm_ethosu_payload *out) {
  if (out == NULL) return TM_ERR_INVALID_ARGUMENT;
  *out = (tm_ethosu_payload){0};
  if (data == NULL || (uintptr_t)data % 4u != 0u) return TM_ERR_INVALID_ARGUMENT;
  if (size % 4u != 0u) {
    out->error_offset = size;
    return TM_ERR_INVALID_PROGRAM;
  }
  const uint32_t *w = (const uint32_t *)data;
  size_t nwords = size / 4u;
  if (nwords == 0u || w[0] != PAYLOAD_MAGIC) return payload_error(out, 0);
  size_t i = 1;
  while (i < nwords) {
    uint32_t action = w[i] & 0xFFu;
    if (action == ACTION_OPTIMIZER_CONFIG) {
      if (nwords - i < 3u || out->has_optimizer_config) return payload_error(out, i);
      out->has_optimizer_config = 1;
      out->optimizer_config = w[i + 1];
      out->optimizer_id = w[i + 2];
      i += 3;
    } else if (action == ACTION_COMMAND_STREAM) {
      size_t length = ((size_t)((w[i] >> 8) & 0xFFu) << 16) | (w[i] >> 16);
      if (length == 0u || length > nwords - i - 1u || out->command_stream != NULL) {
        return payload_error(out, i);
      }
      out->command_stream = &w[i + 1];
      out->command_stream_size = length * 4u;
      i += 1 + length;
    } else if (action == ACTION_NOP || action == ACTION_READ_APB_REG ||
               action == ACTION_DUMP_SHRAM) {
      i += 1; /* debug actions: nothing for a production run to do */
    } else {
      return payload_error(out, i);
    }
  }
  if (out->command_stream == NULL) return payload_error(out, nwords);
  return TM_OK;
}

tm_status tm_ethosu_check_payload(const tm_ethosu_device *dev, const tm_ethosu_payload *payload) {
  if (dev == NULL || payload == NULL) return TM_ERR_INVALID_ARGUMENT;
  if (!dev->ready) return TM_ERR_INVALID_STATE;
  if (!payload->has_optimizer_config) return TM_OK;
  uint32_t hw = dev->npu_config, opt = payload->optimizer_config;
  if (TM_NPU_CONFIG_MACS_LOG2(hw) != TM_NPU_CONFIG_MACS_LOG2(opt) ||
      TM_NPU_CONFIG_CMD_STREAM_VERSION(hw) != TM_NPU_CONFIG_CMD_STREAM_VERSION(opt) ||
      (!TM_NPU_CONFIG_CUSTOM_DMA(hw) && TM_NPU_CONFIG_CUSTOM_DMA(opt))) {
    return TM_ERR_UNSUPPORTED;
  }
  if (dev->product == TM_ETHOSU_U85) {
    if (TM_NPU_CONFIG_PRODUCT(hw) != TM_NPU_CONFIG_PRODUCT(opt)) return TM_ERR_UNSUPPORTED;
  } else if (TM_NPU_CONFIG_SHRAM_KB(hw) != TM_NPU_CONFIG_SHRAM_KB(opt)) {
    return TM_ERR_UNSUPPORTED;
  }
  if (TM_NPU_ID_ARCH_MAJOR(dev->id) != TM_NPU_ID_ARCH_MAJOR(payload->optimizer_id) ||
      TM_NPU_ID_ARCH_MINOR(dev->id) < TM_NPU_ID_ARCH_MINOR(payload->optimizer_id)) {
    return TM_ERR_UNSUPPORTED;
  }
  return TM_OK;
}
