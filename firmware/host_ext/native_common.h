/* Shared by the translation units of torchmcu._native. */
#ifndef TORCHMCU_NATIVE_COMMON_H
#define TORCHMCU_NATIVE_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "torchmcu/backend.h"

/* Every kernel of the tree plus the host-only torchmcu_test:: kernels. */
extern tm_kernel_registry tmx_registry;

/* Raises NativeError(status_name, message); returns NULL. */
PyObject *tmx_raise(tm_status status, const char *message);

PyObject *native_run_program(PyObject *self, PyObject *args);
PyObject *native_parse_ethos_u_blob(PyObject *self, PyObject *arg);

/* The host EthosUBackend (host_delegate.c) and its per-run Python session. */
typedef struct {
  PyObject *bridge; /* borrowed: native.py's bridge around the user's delegate_fn, or None */
  PyObject *error;  /* owned: the exception the callable raised, if any */
  char message[320];
} tmx_delegate_session;
extern const tm_backend tmx_ethos_u_host_backend;
void tmx_delegate_begin(tmx_delegate_session *s, PyObject *bridge);
void tmx_delegate_end(tmx_delegate_session *s);
PyObject *native_program_info(PyObject *self, PyObject *args);

#endif
