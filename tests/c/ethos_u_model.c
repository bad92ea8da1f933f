/* Register-level Ethos-U model for the driver's host tests (see ethos_u_model.h). Offsets
 * and bits are written out here from Arm's documentation, independently of the driver. */
#include "ethos_u_model.h"

#include <string.h>

enum {
  R_ID = 0x000, R_STATUS = 0x004, R_CMD = 0x008, R_RESET = 0x00C, R_QBASE = 0x010,
  R_QREAD = 0x018, R_QSIZE = 0x020, R_PROT = 0x024, R_CONFIG = 0x028,
};
#define S_RUNNING 0x001u
#define S_IRQ 0x002u
#define S_RESETTING 0x008u
#define S_CMD_END 0x020u
#define C_RUN 0x1u
#define C_CLEAR_IRQ 0x2u

void eu_model_init(eu_model *m) {
  memset(m, 0, sizeof(*m));
  m->id = EU_ID_U55;
  m->config = EU_CONFIG_U55_128;
  m->reset_reads = 2;
  m->job_polls = 3;
  m->regs[R_CMD / 4] = 0xC; /* clock and power Q enabled out of reset */
}

void eu_model_clear_log(eu_model *m) {
  m->log_count = 0;
  m->log_overflow = 0;
}

static void log_access(eu_model *m, uint8_t write, uint32_t offset, uint32_t value) {
  if (m->log_count < EU_MODEL_LOG_MAX) {
    m->log[m->log_count++] = (eu_access){write, offset, value};
  } else {
    m->log_overflow = 1;
  }
}

static void finish_reset(eu_model *m) {
  memset(m->regs, 0, sizeof(m->regs));
  m->regs[R_CMD / 4] = 0xC;
  m->status = 0;
  if (!m->ignore_levels) m->prot = m->pending_levels;
  m->resets++;
}

/* One STATUS read: advances a reset or a running job. */
static uint32_t read_status(eu_model *m) {
  if (m->status & S_RESETTING) {
    if (m->reset_hangs) return m->status;
    if (m->reset_left > 0) {
      m->reset_left--;
      return m->status;
    }
    finish_reset(m);
    return m->status;
  }
  if ((m->status & S_RUNNING) && !m->job_hangs) {
    if (m->job_left > 0) {
      m->job_left--;
      return m->status;
    }
    uint32_t qsize = m->regs[R_QSIZE / 4];
    m->status &= ~S_RUNNING;
    m->status |= S_IRQ;
    if (m->fault_bits != 0) {
      m->status |= m->fault_bits;
      m->regs[R_QREAD / 4] = (qsize / 2u) & ~3u;
    } else if (m->stop_early) {
      m->regs[R_QREAD / 4] = (qsize / 2u) & ~3u;
    } else {
      m->status |= S_CMD_END;
      m->regs[R_QREAD / 4] = qsize - m->qread_short;
    }
  }
  return m->status;
}

uint32_t eu_model_read(void *ctx, uint32_t offset) {
  eu_model *m = (eu_model *)ctx;
  uint32_t value;
  if (offset == R_STATUS) {
    value = read_status(m);
  } else if (m->status & S_RESETTING) {
    value = 0; /* only STATUS is readable during a reset */
  } else if (offset == R_ID) {
    value = m->id;
  } else if (offset == R_CONFIG) {
    value = m->config;
  } else if (offset == R_PROT) {
    value = m->prot;
  } else if (offset < EU_MODEL_REGS && offset % 4u == 0u) {
    value = m->regs[offset / 4];
  } else {
    value = 0xDEADBEEFu; /* outside the modelled space: the test will notice */
  }
  log_access(m, 0, offset, value);
  return value;
}

void eu_model_write(void *ctx, uint32_t offset, uint32_t value) {
  eu_model *m = (eu_model *)ctx;
  log_access(m, 1, offset, value);
  if (m->status & S_RESETTING) return; /* writes ignored during a reset */
  if (offset == R_RESET) {
    m->pending_levels = value & 3u;
    m->status = S_RESETTING; /* a reset also stops a running job */
    m->reset_left = m->reset_reads;
    return;
  }
  if (offset >= EU_MODEL_REGS || offset % 4u != 0u) return;
  if (offset == R_CMD) {
    m->regs[R_CMD / 4] = value;
    if (value & C_CLEAR_IRQ) m->status &= ~S_IRQ;
    if ((value & C_RUN) && !(m->status & S_RUNNING)) {
      m->status = (m->status & ~(S_CMD_END | S_IRQ)) | S_RUNNING;
      m->job_left = m->job_polls;
      m->regs[R_QREAD / 4] = 0;
      m->starts++;
    }
    return;
  }
  if (offset == R_ID || offset == R_CONFIG || offset == R_PROT || offset == R_STATUS ||
      offset == R_QREAD) {
    return; /* read-only */
  }
  m->regs[offset / 4] = value;
  if ((offset == R_QBASE || offset == R_QSIZE) && !(m->status & S_RUNNING)) {
    m->status &= ~S_CMD_END;
  }
}

void eu_model_cache_clean(void *ctx, const void *address, size_t size) {
  (void)address;
  (void)size;
  ((eu_model *)ctx)->cache_cleans++;
}

void eu_model_cache_invalidate(void *ctx, const void *address, size_t size) {
  (void)address;
  (void)size;
  ((eu_model *)ctx)->cache_invalidates++;
}
