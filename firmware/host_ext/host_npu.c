/*
 * The host EthosUBackend with the NPU functional model behind the real driver
 * (native.run_program(..., npu_model=...)): the firmware delegate (delegates/ethos_u/delegate.c)
 * and our driver run unchanged on a register block in host memory. Writes are observed: RESET
 * completes at once, and the CMD write with RUN hands QBASE/QSIZE and the base pointers the
 * driver set to the Python model (with CONFIG and the delegate's index), which executes over
 * the host memory they address and leaves STATUS/QREAD as the hardware would (IRQ + CMD_END,
 * or IRQ + a fault bit).
 *
 * The NPU reaches memory through the job's extents: the command stream and each base pointer
 * with the size the driver cleans from the data cache for it (cache_clean). Outside those the
 * model raises BusError, as an AXI abort on a board.
 */
#include "native_common.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "../drivers/ethos_u/ethos_u_regs.h"
#include "torchmcu/ethos_u_delegate.h"

/* The firmware delegate drives one bound device (tm_ethos_u_delegate_bind, a global): bind and
 * use it under this lock, so runs in other threads cannot swap it mid-job. Taken without the
 * GIL (a job takes the GIL for the model while holding it). */
static pthread_mutex_t g_bind_lock = PTHREAD_MUTEX_INITIALIZER;

static tmx_npu *npu_of(void *ctx) { return (tmx_npu *)ctx; }

static uint32_t npu_read(void *ctx, uint32_t offset) {
  const tmx_npu *n = npu_of(ctx);
  return offset < sizeof(n->regs) ? n->regs[offset / 4u] : 0u;
}

static void npu_clean(void *ctx, const void *address, size_t size) {
  tmx_npu *n = npu_of(ctx);
  if (n->num_extents < TMX_NPU_EXTENTS) {
    n->extents[n->num_extents].address = (uintptr_t)address;
    n->extents[n->num_extents].size = size;
    ++n->num_extents;
  }
}

/* The extent holding [address, address + size), or NULL. */
static const tmx_npu_extent *find_extent(const tmx_npu *n, uint64_t address, uint64_t size, bool exact) {
  for (uint32_t i = 0; i < n->num_extents; ++i) {
    const tmx_npu_extent *e = &n->extents[i];
    if (e->size == 0u) continue;
    if (exact ? address == e->address
              : address >= e->address && size <= e->size && address - e->address <= e->size - size) {
      return e;
    }
  }
  return NULL;
}

static uint64_t reg64(const tmx_npu *n, uint32_t lo, uint32_t hi) {
  return (uint64_t)n->regs[lo / 4u] | ((uint64_t)n->regs[hi / 4u] << 32);
}

/* A model exception is not a hardware fault: the NPU stops without CMD_END (the driver reports
 * "stopped before the end"), and the exception becomes the NativeError's cause. */
static void model_raised(tmx_npu *n) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value != NULL && tb != NULL) PyException_SetTraceback(value, tb);
  PyObject *str = value != NULL ? PyObject_Str(value) : NULL;
  const char *text = str != NULL ? PyUnicode_AsUTF8(str) : NULL;
  if (text == NULL) PyErr_Clear();
  snprintf(n->message, sizeof(n->message), "npu_model raised %s: %s",
           type != NULL ? ((PyTypeObject *)type)->tp_name : "error", text != NULL ? text : "?");
  Py_XDECREF(str);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  if (n->ses != NULL) Py_XSETREF(n->ses->error, value);
  else Py_XDECREF(value);
  n->regs[TM_NPU_STATUS / 4u] = TM_NPU_STATUS_IRQ_RAISED;
}

static void npu_run(tmx_npu *n) {
  const uint64_t qbase = reg64(n, TM_NPU_QBASE, TM_NPU_QBASE_HI);
  const uint32_t qsize = n->regs[TM_NPU_QSIZE / 4u];
  n->regs[TM_NPU_QREAD / 4u] = 0;
  n->message[0] = '\0';
  n->job_qread = 0;
  n->job_qsize = qsize;
  const tmx_npu_extent *q = find_extent(n, qbase, qsize, false);
  if (q == NULL || qsize == 0u || n->model == NULL) {
    snprintf(n->message, sizeof(n->message), "command stream at 0x%llx (%u bytes) is outside the job's memory",
             (unsigned long long)qbase, (unsigned)qsize);
    n->regs[TM_NPU_STATUS / 4u] = TM_NPU_STATUS_IRQ_RAISED | TM_NPU_STATUS_BUS_ERROR;
    n->num_extents = 0;
    return;
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *stream = PyMemoryView_FromMemory((char *)(uintptr_t)qbase, (Py_ssize_t)qsize, PyBUF_READ);
  PyObject *regions = PyDict_New();
  PyObject *res = NULL;
  if (stream == NULL || regions == NULL) goto raised;
  for (uint32_t i = 0; i < TM_NPU_MAX_REGIONS; ++i) {
    const tmx_npu_extent *e = find_extent(n, reg64(n, TM_NPU_BASEP(i), TM_NPU_BASEP_HI(i)), 0, true);
    if (e == NULL) continue; /* a base pointer this job did not give memory: nothing mapped */
    PyObject *key = PyLong_FromUnsignedLong(i);
    PyObject *view = PyMemoryView_FromMemory((char *)e->address, (Py_ssize_t)e->size, PyBUF_WRITE);
    int bad = key == NULL || view == NULL || PyDict_SetItem(regions, key, view) != 0;
    Py_XDECREF(key);
    Py_XDECREF(view);
    if (bad) goto raised;
  }
  res = PyObject_CallFunction(n->model, "OOII", stream, regions, (unsigned)n->regs[TM_NPU_CONFIG / 4u],
                              (unsigned)n->index);
  unsigned fault = 0, qread = 0;
  const char *text = NULL;
  if (res == NULL || !PyArg_ParseTuple(res, "IIs", &fault, &qread, &text)) goto raised;
  snprintf(n->message, sizeof(n->message), "%s", text);
  fault &= TM_NPU_STATUS_BUS_ERROR | TM_NPU_STATUS_PARSE_ERROR | TM_NPU_STATUS_WD_FAULT;
  n->regs[TM_NPU_STATUS / 4u] = TM_NPU_STATUS_IRQ_RAISED | (fault != 0u ? fault : TM_NPU_STATUS_CMD_END);
  n->regs[TM_NPU_QREAD / 4u] = qread;
  goto done;
raised:
  model_raised(n);
done:
  Py_XDECREF(res);
  Py_XDECREF(stream);
  Py_XDECREF(regions);
  PyGILState_Release(gil);
  n->num_extents = 0;
  n->job_qread = n->regs[TM_NPU_QREAD / 4u];
}

static void npu_write(void *ctx, uint32_t offset, uint32_t value) {
  tmx_npu *n = npu_of(ctx);
  if (offset >= sizeof(n->regs) || offset % 4u != 0u) return;
  switch (offset) {
    case TM_NPU_ID: case TM_NPU_STATUS: case TM_NPU_CONFIG: case TM_NPU_QREAD: case TM_NPU_PROT:
      return; /* read-only */
    case TM_NPU_RESET: /* completes at once: faults, IRQ and CMD_END cleared, levels taken */
      n->regs[TM_NPU_STATUS / 4u] = 0;
      n->regs[TM_NPU_QREAD / 4u] = 0;
      n->regs[TM_NPU_PROT / 4u] = value & (TM_NPU_LEVEL_PRIVILEGED | TM_NPU_LEVEL_NON_SECURE);
      return;
    case TM_NPU_CMD:
      n->regs[offset / 4u] = value;
      if (value & TM_NPU_CMD_CLEAR_IRQ) n->regs[TM_NPU_STATUS / 4u] &= ~TM_NPU_STATUS_IRQ_RAISED;
      if (value & TM_NPU_CMD_RUN) npu_run(n);
      return;
    default:
      n->regs[offset / 4u] = value;
  }
}

tm_status tmx_npu_init(tm_delegate_context *ctx, tmx_npu *n, const tm_delegate_info *info, const tm_ethos_u_blob *blob) {
  memset(n->regs, 0, sizeof(n->regs));
  n->num_extents = 0;
  n->ses = NULL;
  n->model = NULL;
  n->message[0] = '\0';
  n->job_qread = n->job_qsize = 0;
  n->index = info->index;
  if (tm_ethos_u_backend.state_size > sizeof(n->state)) {
    ctx->message = "host npu_model: the firmware delegate's state outgrew tmx_npu.state";
    return TM_ERR_INVALID_STATE;
  }
  /* The modelled NPU is the configuration Vela compiled for: ID and CONFIG from its payload. */
  tm_ethosu_payload p;
  if (tm_ethosu_parse_payload(blob->cmd, blob->cmd_size, &p) != TM_OK || !p.has_optimizer_config) {
    ctx->message = "host npu_model: cmd_data has no Vela optimizer config to model the NPU from";
    return TM_ERR_INVALID_PROGRAM;
  }
  n->regs[TM_NPU_ID / 4u] = p.optimizer_id;
  n->regs[TM_NPU_CONFIG / 4u] = p.optimizer_config;
  tm_ethosu_io io = {npu_read, npu_write, n, npu_clean, NULL};
  tm_status st = tm_ethosu_init(&n->dev, io, 16);
  if (st != TM_OK) {
    ctx->message = "host npu_model: the driver did not bring the model NPU up (ID, CONFIG or reset)";
    return st;
  }
  Py_BEGIN_ALLOW_THREADS
  pthread_mutex_lock(&g_bind_lock);
  tm_ethos_u_delegate_bind(&n->dev, NULL, 0);
  st = tm_ethos_u_backend.init(ctx, n->state, info);
  tm_ethos_u_delegate_bind(NULL, NULL, 0);
  pthread_mutex_unlock(&g_bind_lock);
  Py_END_ALLOW_THREADS
  return st;
}

tm_status tmx_npu_execute(tm_delegate_context *ctx, tmx_npu *n, const tm_delegate_call *call,
                          tmx_delegate_session *ses, PyObject *model) {
  n->ses = ses;
  n->model = model;
  pthread_mutex_lock(&g_bind_lock); /* execute runs without the GIL */
  tm_ethos_u_delegate_bind(&n->dev, NULL, 0);
  const tm_status st = tm_ethos_u_backend.execute(ctx, n->state, call);
  tm_ethos_u_delegate_bind(NULL, NULL, 0);
  pthread_mutex_unlock(&g_bind_lock);
  if (st != TM_OK) {
    /* The driver's error path: the failing job's STATUS word, named, how far the NPU read the
     * command stream (QREAD, before the driver's reset cleared it) and what the model saw. */
    const uint32_t status = tm_ethosu_last_status(&n->dev);
    char bits[160];
    tm_ethosu_format_status(status, bits, sizeof(bits));
    snprintf(ses->message, sizeof(ses->message), "%s: STATUS 0x%08x [%s] %s; QREAD %u of QSIZE %u%s%s",
             ctx->message != NULL ? ctx->message : "NPU job failed", (unsigned)status, bits,
             tm_ethosu_status_reason(status), (unsigned)n->job_qread, (unsigned)n->job_qsize,
             n->message[0] != '\0' ? ": " : "", n->message);
    ctx->message = ses->message;
  }
  n->ses = NULL;
  n->model = NULL;
  return st;
}
