/*
 * The host build's "EthosUBackend": instead of the NPU driver, each DelegateCall hands its
 * inputs to a Python callable (native.run_program(..., delegate_fn=...)), e.g. the TOSA
 * reference model of the subgraph, and writes what it returns into the outputs. The blob is
 * parsed and every call checked by the same C code as on the firmware (ethos_u_blob.h), so a
 * program the host accepts is one the firmware accepts.
 *
 * The callable lives in a thread-local session set by run_program around tm_method_execute
 * (which runs without the GIL; the backend takes it for the call). An exception from the
 * callable is kept here and chained to the NativeError run_program raises.
 */
#include "native_common.h"

#include <stdio.h>
#include <string.h>


typedef struct {
  tm_ethos_u_blob blob;
  uint32_t index;
  tmx_npu *npu; /* non-NULL: run through the firmware delegate + driver on the NPU model */
} host_state;

static _Thread_local tmx_delegate_session *g_session;

void tmx_delegate_begin(tmx_delegate_session *s, PyObject *bridge, PyObject *npu_model) {
  memset(s, 0, sizeof(*s));
  s->bridge = bridge;
  s->npu_model = npu_model;
  g_session = s;
}

void tmx_delegate_end(tmx_delegate_session *s) {
  g_session = NULL;
  Py_CLEAR(s->error);
  for (uint32_t i = 0; i < s->num_npus; ++i) PyMem_RawFree(s->npus[i]);
  s->num_npus = 0;
}

static tm_status host_init(tm_delegate_context *ctx, void *state, const tm_delegate_info *info) {
  host_state *s = state;
  const tm_status st = tm_ethos_u_blob_init(ctx, info, &s->blob);
  if (st != TM_OK) {
    return st;
  }
  s->index = info->index;
  s->npu = NULL;
  tmx_delegate_session *ses = g_session;
  if (ses == NULL || ses->npu_model == NULL || ses->npu_model == Py_None) return TM_OK;
  /* The NPU model's state (registers, driver, firmware delegate) outgrows the runtime's
   * delegate state: it lives with the session, freed by tmx_delegate_end. */
  if (ses->num_npus == sizeof(ses->npus) / sizeof(ses->npus[0]) ||
      (s->npu = PyMem_RawCalloc(1, sizeof(tmx_npu))) == NULL) {
    ctx->message = "host npu_model: too many delegates or out of memory";
    return TM_ERR_OUT_OF_MEMORY;
  }
  ses->npus[ses->num_npus++] = s->npu;
  return tmx_npu_init(ctx, s->npu, info, &s->blob);
}

static tm_status host_prepare(tm_delegate_context *ctx, void *state, const tm_delegate_call *call) {
  const host_state *s = state;
  return tm_ethos_u_check_call(&s->blob, call, ctx);
}

/* (scalar_type, physical shape) of a tensor: sizes in memory order (dim_order). */
static PyObject *physical_meta(const tm_tensor *t) {
  PyObject *shape = PyTuple_New(t->dim);
  if (shape == NULL) return NULL;
  for (uint32_t d = 0; d < t->dim; ++d) {
    PyTuple_SET_ITEM(shape, d, PyLong_FromLong(t->sizes[t->dim_order[d]]));
  }
  return Py_BuildValue("(iN)", (int)t->scalar_type, shape);
}

/* Keeps the pending Python exception for run_program; the diagnostic names it. */
static tm_status callback_failed(tm_delegate_context *ctx, tmx_delegate_session *ses) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value != NULL && tb != NULL) PyException_SetTraceback(value, tb);
  const char *tname = type != NULL ? ((PyTypeObject *)type)->tp_name : "error";
  PyObject *str = value != NULL ? PyObject_Str(value) : NULL;
  const char *text = str != NULL ? PyUnicode_AsUTF8(str) : NULL;
  if (text == NULL) PyErr_Clear();
  snprintf(ses->message, sizeof(ses->message), "delegate_fn raised %s: %s", tname, text ? text : "?");
  Py_XDECREF(str);
  Py_XDECREF(type);
  Py_XDECREF(tb);
  Py_XSETREF(ses->error, value);
  ctx->message = ses->message;
  return TM_ERR_DELEGATE;
}

static tm_status host_execute(tm_delegate_context *ctx, void *state, const tm_delegate_call *call) {
  host_state *s = state;
  const uint32_t ni = s->blob.num_inputs, no = s->blob.num_outputs;
  tmx_delegate_session *ses = g_session;
  if (s->npu != NULL) {
    if (ses == NULL) {
      ctx->message = "EthosUBackend on the NPU model ran outside native.run_program";
      return TM_ERR_DELEGATE;
    }
    return tmx_npu_execute(ctx, s->npu, call, ses, ses->npu_model);
  }
  if (ses == NULL || ses->bridge == NULL || ses->bridge == Py_None) {
    ctx->message = "EthosUBackend on the host needs a delegate_fn (native.run_program(..., delegate_fn=...))";
    return TM_ERR_DELEGATE;
  }
  PyGILState_STATE gil = PyGILState_Ensure();
  tm_status st = TM_OK;
  PyObject *ins = PyList_New(ni), *outs = PyList_New(no), *res = NULL;
  if (ins == NULL || outs == NULL) goto py_error;
  for (uint32_t i = 0; i < ni; ++i) {
    const tm_tensor *t = call->args[i]->u.tensor;
    PyObject *meta = physical_meta(t);
    PyObject *data = meta != NULL ? PyBytes_FromStringAndSize(t->data, (Py_ssize_t)t->nbytes) : NULL;
    if (data == NULL) { Py_XDECREF(meta); goto py_error; }
    PyList_SET_ITEM(ins, i, Py_BuildValue("(NOO)", data, PyTuple_GET_ITEM(meta, 0), PyTuple_GET_ITEM(meta, 1)));
    Py_DECREF(meta);
    if (PyList_GET_ITEM(ins, i) == NULL) goto py_error;
  }
  for (uint32_t i = 0; i < no; ++i) {
    PyObject *meta = physical_meta(call->args[ni + i]->u.tensor);
    if (meta == NULL) goto py_error;
    PyList_SET_ITEM(outs, i, meta);
  }
  res = PyObject_CallFunction(ses->bridge, "IOO", (unsigned)s->index, ins, outs);
  if (res == NULL) goto py_error;
  /* The bridge (native.py) returns one bytes-like per output, already checked; check again. */
  if (!PyList_Check(res) || (uint32_t)PyList_GET_SIZE(res) != no) {
    ctx->message = "delegate_fn bridge returned the wrong number of outputs";
    st = TM_ERR_DELEGATE;
    goto done;
  }
  for (uint32_t i = 0; i < no && st == TM_OK; ++i) {
    tm_tensor *t = call->args[ni + i]->u.tensor;
    Py_buffer view;
    if (PyObject_GetBuffer(PyList_GET_ITEM(res, i), &view, PyBUF_C_CONTIGUOUS) != 0) goto py_error;
    if ((size_t)view.len != t->nbytes) {
      ctx->message = "delegate_fn output has the wrong byte size";
      ctx->bad_argument = (uint16_t)(ni + i);
      st = TM_ERR_DELEGATE;
    } else if (t->nbytes != 0) {
      memcpy(t->data, view.buf, t->nbytes);
    }
    PyBuffer_Release(&view);
  }
  goto done;
py_error:
  st = callback_failed(ctx, ses);
done:
  Py_XDECREF(ins);
  Py_XDECREF(outs);
  Py_XDECREF(res);
  PyGILState_Release(gil);
  return st;
}

const tm_backend tmx_ethos_u_host_backend = {"EthosUBackend", sizeof(host_state), host_init, host_prepare,
                                             host_execute};

/* parse_ethos_u_blob(bytes) -> dict (the C parser's view), or NativeError naming block and offset. */
static PyObject *io_list(const tm_ethos_u_blob *b, bool output) {
  const uint32_t n = output ? b->num_outputs : b->num_inputs;
  PyObject *list = PyList_New(n);
  for (uint32_t i = 0; list != NULL && i < n; ++i) {
    tm_ethos_u_io io;
    tm_ethos_u_blob_io(b, output, i, &io);
    PyObject *d = Py_BuildValue("{s:[iiiiii],s:i,s:i,s:i,s:I}", "shape", io.shape[0], io.shape[1], io.shape[2],
                                io.shape[3], io.shape[4], io.shape[5], "elem_size", io.elem_size, "offset",
                                io.offset, "region", io.region, "nbytes", (unsigned)io.nbytes);
    if (d == NULL) Py_CLEAR(list);
    else PyList_SET_ITEM(list, i, d);
  }
  return list;
}

PyObject *native_parse_ethos_u_blob(PyObject *self, PyObject *arg) {
  (void)self;
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_C_CONTIGUOUS) != 0) return NULL;
  tm_ethos_u_blob b;
  tm_ethos_u_error err;
  PyObject *result = NULL;
  tm_status st = tm_ethos_u_blob_parse(view.buf, (size_t)view.len, &b, &err);
  if (st != TM_OK) {
    char msg[256];
    snprintf(msg, sizeof(msg), "%s (block %s, blob offset %u)", err.message, err.block, (unsigned)err.offset);
    tmx_raise(st, msg);
  } else {
    const uint8_t *base = view.buf;
    result = Py_BuildValue("{s:n,s:I,s:n,s:I,s:I,s:N,s:N}", "cmd_offset", (Py_ssize_t)(b.cmd - base), "cmd_size",
                           (unsigned)b.cmd_size, "weights_offset",
                           (Py_ssize_t)(b.weights != NULL ? b.weights - base : -1), "weights_size",
                           (unsigned)b.weights_size, "scratch_size", (unsigned)b.scratch_size, "inputs",
                           io_list(&b, false), "outputs", io_list(&b, true));
  }
  PyBuffer_Release(&view);
  return result;
}
