/* Shared by the translation units of torchmcu._native. */
#ifndef TORCHMCU_NATIVE_COMMON_H
#define TORCHMCU_NATIVE_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "torchmcu/runtime.h"

/* Every kernel of the tree plus the host-only torchmcu_test:: kernels. */
extern tm_kernel_registry tmx_registry;

/* Raises NativeError(status_name, message); returns NULL. */
PyObject *tmx_raise(tm_status status, const char *message);

PyObject *native_run_program(PyObject *self, PyObject *args);
PyObject *native_program_info(PyObject *self, PyObject *args);

#endif
