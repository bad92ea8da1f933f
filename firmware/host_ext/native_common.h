/* Shared by the translation units of torchmcu._native. */
#ifndef TORCHMCU_NATIVE_COMMON_H
#define TORCHMCU_NATIVE_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "torchmcu/backend.h"
#include "torchmcu/ethos_u_blob.h"
#include "torchmcu/ethos_u_driver.h"

/* Every kernel of the tree plus the host-only torchmcu_test:: kernels. */
extern tm_kernel_registry tmx_registry;

/* Raises NativeError(status_name, message); returns NULL. */
PyObject *tmx_raise(tm_status status, const char *message);

PyObject *native_run_program(PyObject *self, PyObject *args);
PyObject *native_parse_ethos_u_blob(PyObject *self, PyObject *arg);

/* The host EthosUBackend (host_delegate.c) and its per-run Python session. */
typedef struct {
  PyObject *bridge; /* borrowed: native.py's bridge around the user's delegate_fn, or None */
  PyObject *npu_model; /* borrowed: the NPU functional model behind the real driver, or None */
  PyObject *error;  /* owned: the exception the callable raised, if any */
  char message[768];
  void *npus[32]; /* owned (PyMem_RawCalloc): the tmx_npu of each delegate on the NPU model */
  uint32_t num_npus;
} tmx_delegate_session;
extern const tm_backend tmx_ethos_u_host_backend;

/* The NPU functional model behind the real driver (host_npu.c): one per delegate. */
#define TMX_NPU_EXTENTS (1u + TM_ETHOSU_MAX_BASE_ADDRESSES)
typedef struct {
  uintptr_t address;
  size_t size;
} tmx_npu_extent;
typedef struct {
  uint32_t regs[64]; /* the register block, offsets 0x000..0x0FC */
  tmx_npu_extent extents[TMX_NPU_EXTENTS]; /* the running job's memory (cache_clean) */
  uint32_t num_extents;
  tm_ethosu_device dev;
  tmx_delegate_session *ses; /* set during execute */
  PyObject *model;           /* borrowed, set during execute */
  char message[256];         /* what the model reported for the last job */
  uint32_t job_qread, job_qsize; /* QREAD and QSIZE as the last job left them (a reset clears QREAD) */
  uint32_t index;                /* the program's delegate index, passed to the model */
  _Alignas(16) unsigned char state[512]; /* the firmware delegate's (tm_ethos_u_backend) state */
} tmx_npu;
tm_status tmx_npu_init(tm_delegate_context *ctx, tmx_npu *n, const tm_delegate_info *info,
                       const tm_ethos_u_blob *blob);
tm_status tmx_npu_execute(tm_delegate_context *ctx, tmx_npu *n, const tm_delegate_call *call,
                          tmx_delegate_session *ses, PyObject *model);
void tmx_delegate_begin(tmx_delegate_session *s, PyObject *bridge, PyObject *npu_model);
void tmx_delegate_end(tmx_delegate_session *s);
PyObject *native_program_info(PyObject *self, PyObject *args);

#endif
