/*
 * run_program / program_info: load, verify, init and run a .pte with the
 * firmware runtime. Host wrapper: buffers come from the Python allocator.
 */
#include "native_common.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define BUF_ALIGN 16u

/* A loaded program and initialised method with their (aligned) buffers. */
typedef struct {
  void *raw[3]; /* pte copy, metadata, arena */
  size_t raw_bytes[3]; /* mapped sizes when low_memory */
  bool low_memory; /* buffers below 4 GB: what a 32-bit NPU (Ethos-U55) can address */
  tm_program program;
  tm_method method;
  size_t meta_bytes, arena_bytes;
} session;

/* Zeroed pages below 4 GB, as on a board where the NPU sees the CPU's memory 1:1; NULL when
 * the host gives none there (no MAP_32BIT and the hint not taken). */
static void *alloc_low(size_t n) {
  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
#if defined(MAP_32BIT)
  flags |= MAP_32BIT;
#endif
  void *p = mmap((void *)(uintptr_t)0x40000000u, n, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (p == MAP_FAILED) return NULL;
  if ((uintptr_t)p + n > ((uintptr_t)1 << 32)) {
    munmap(p, n);
    return NULL;
  }
  return p;
}

static void *alloc_aligned(session *s, int slot, size_t n) {
  if (s->low_memory) {
    s->raw_bytes[slot] = n + BUF_ALIGN;
    s->raw[slot] = alloc_low(s->raw_bytes[slot]);
  } else {
    s->raw[slot] = PyMem_Calloc(1, n + BUF_ALIGN);
  }
  if (s->raw[slot] == NULL) return NULL;
  uintptr_t p = ((uintptr_t)s->raw[slot] + BUF_ALIGN - 1u) & ~(uintptr_t)(BUF_ALIGN - 1u);
  return (void *)p;
}

static void session_close(session *s) {
  for (int i = 0; i < 3; ++i) {
    if (!s->low_memory) PyMem_Free(s->raw[i]);
    else if (s->raw[i] != NULL) munmap(s->raw[i], s->raw_bytes[i]);
  }
}

/* "message (instruction 3, value 7, argument 2, operator x.out, byte offset 120)" */
static void format_diag(const tm_diag *d, char *buf, size_t n) {
  int at = snprintf(buf, n, "%s", d->message != NULL ? d->message : "");
  const char *sep = " (";
#define ADD(...)                                                      \
  do {                                                                \
    if (at >= 0 && (size_t)at < n) at += snprintf(buf + at, n - (size_t)at, __VA_ARGS__); \
  } while (0)
  if (d->instruction != TM_DIAG_NONE) { ADD("%sinstruction %d", sep, (int)d->instruction); sep = ", "; }
  if (d->value != TM_DIAG_NONE) { ADD("%svalue %d", sep, (int)d->value); sep = ", "; }
  if (d->argument != TM_DIAG_NONE) { ADD("%sargument %d", sep, (int)d->argument); sep = ", "; }
  if (d->delegate != TM_DIAG_NONE) {
    ADD("%sdelegate %d %s", sep, (int)d->delegate, d->op_name != NULL ? d->op_name : "?");
    sep = ", ";
  } else if (d->op_name != NULL) {
    ADD("%soperator %s%s%s", sep, d->op_name, d->op_overload && *d->op_overload ? "." : "",
        d->op_overload ? d->op_overload : "");
    sep = ", ";
  }
  if (d->byte_offset != TM_DIAG_NO_OFFSET) { ADD("%sbyte offset %u", sep, (unsigned)d->byte_offset); sep = ", "; }
  if (sep[0] == ',') ADD(")");
#undef ADD
}

static PyObject *raise_diag(const tm_diag *d, tm_status st) {
  char msg[512];
  format_diag(d, msg, sizeof(msg));
  return tmx_raise(st, msg);
}

/* Copies the .pte into aligned memory and loads it. -1 on error (exception set). */
static int session_load(session *s, Py_buffer *pte, bool low_memory) {
  memset(s, 0, sizeof(*s));
  s->low_memory = low_memory;
  uint8_t *copy = alloc_aligned(s, 0, (size_t)pte->len);
  if (copy == NULL) { PyErr_NoMemory(); return -1; }
  memcpy(copy, pte->buf, (size_t)pte->len);
  tm_status st = tm_program_load(&s->program, copy, (size_t)pte->len);
  if (st != TM_OK) { raise_diag(&s->program.diag, st); return -1; }
  return 0;
}

/* Initialises `method_name` of a loaded session with `registry`. */
static int session_init(session *s, const char *method_name, const tm_kernel_registry *registry) {
  tm_status st = tm_method_required_memory(&s->program, method_name, &s->meta_bytes, &s->arena_bytes);
  if (st != TM_OK) { raise_diag(&s->program.diag, st); return -1; }
  void *meta = alloc_aligned(s, 1, s->meta_bytes);
  void *arena = alloc_aligned(s, 2, s->arena_bytes);
  if (meta == NULL || arena == NULL) { PyErr_NoMemory(); return -1; }
  st = tm_method_init(&s->method, &s->program, method_name, registry, meta, s->meta_bytes, arena,
                      s->arena_bytes);
  if (st != TM_OK) { raise_diag(&s->method.diag, st); return -1; }
  return 0;
}

static PyObject *tensor_meta(const tm_tensor *t) {
  PyObject *sizes = PyTuple_New(t->dim), *order = PyTuple_New(t->dim);
  if (sizes == NULL || order == NULL) { Py_XDECREF(sizes); Py_XDECREF(order); return NULL; }
  for (uint32_t d = 0; d < t->dim; ++d) {
    PyTuple_SET_ITEM(sizes, d, PyLong_FromLong(t->sizes[d]));
    PyTuple_SET_ITEM(order, d, PyLong_FromLong(t->dim_order[d]));
  }
  return Py_BuildValue("{s:i,s:N,s:N,s:I,s:O}", "scalar_type", (int)t->scalar_type, "sizes", sizes,
                       "dim_order", order, "nbytes", (unsigned)t->nbytes, "planned",
                       t->data != NULL ? Py_True : Py_False);
}

/* Output value as Python: tensors as (bytes, scalar_type, sizes, dim_order). */
static PyObject *output_object(tm_method *m, uint32_t i) {
  const tm_value *v = &m->values[m->outputs[i]];
  switch (v->tag) {
    case TM_VALUE_INT: return PyLong_FromLongLong(v->u.i);
    case TM_VALUE_BOOL: return PyBool_FromLong(v->u.b);
    case TM_VALUE_DOUBLE: return PyFloat_FromDouble(v->u.d);
    case TM_VALUE_TENSOR: {
      const tm_tensor *t = v->u.tensor;
      PyObject *meta = tensor_meta(t);
      if (meta == NULL) return NULL;
      PyObject *data = PyBytes_FromStringAndSize(t->data, t->data != NULL ? (Py_ssize_t)t->nbytes : 0);
      PyObject *res = data == NULL ? NULL
                                   : Py_BuildValue("(NOOO)", data, PyDict_GetItemString(meta, "scalar_type"),
                                                   PyDict_GetItemString(meta, "sizes"),
                                                   PyDict_GetItemString(meta, "dim_order"));
      Py_DECREF(meta);
      return res;
    }
    default: Py_RETURN_NONE;
  }
}

static int copy_input(tm_method *m, uint32_t i, PyObject *item) {
  char msg[256];
  tm_tensor *t = tm_method_input(m, i);
  if (t == NULL) {
    snprintf(msg, sizeof(msg), "input %u is not a tensor", (unsigned)i);
    tmx_raise(TM_ERR_UNSUPPORTED, msg);
    return -1;
  }
  PyObject *buf, *sizes;
  int stype;
  if (!PyArg_ParseTuple(item, "OiO!", &buf, &stype, &PyTuple_Type, &sizes)) return -1;
  int ok = stype == t->scalar_type && PyTuple_GET_SIZE(sizes) == t->dim;
  for (uint32_t d = 0; ok && d < t->dim; ++d) {
    ok = PyLong_AsLong(PyTuple_GET_ITEM(sizes, d)) == t->sizes[d];
  }
  if (PyErr_Occurred()) return -1;
  if (!ok) {
    snprintf(msg, sizeof(msg), "input %u: expected scalar type %d with %u dims, got scalar type %d sizes %s",
             (unsigned)i, (int)t->scalar_type, (unsigned)t->dim, stype, "(mismatch)");
    tmx_raise(TM_ERR_INVALID_ARGUMENT, msg);
    return -1;
  }
  if (t->data == NULL && t->numel != 0) {
    snprintf(msg, sizeof(msg), "input %u has no planned memory", (unsigned)i);
    tmx_raise(TM_ERR_UNSUPPORTED, msg);
    return -1;
  }
  Py_buffer view;
  if (PyObject_GetBuffer(buf, &view, PyBUF_C_CONTIGUOUS) != 0) return -1;
  int rc = 0;
  if ((size_t)view.len != t->nbytes) {
    snprintf(msg, sizeof(msg), "input %u: %zd bytes given, tensor holds %u", (unsigned)i, view.len,
             (unsigned)t->nbytes);
    tmx_raise(TM_ERR_INVALID_ARGUMENT, msg);
    rc = -1;
  } else if (t->nbytes != 0) {
    memcpy(t->data, view.buf, t->nbytes);
  }
  PyBuffer_Release(&view);
  return rc;
}

PyObject *native_run_program(PyObject *self, PyObject *args) {
  (void)self;
  Py_buffer pte;
  PyObject *inputs;
  const char *method_name = "forward";
  int runs = 1; /* executions of the one method instance (later ones see verified arguments) */
  PyObject *bridge = Py_None; /* native.py's wrapper of delegate_fn (host EthosUBackend) */
  PyObject *npu_model = Py_None; /* NPU functional model: delegates run the real driver on it */
  if (!PyArg_ParseTuple(args, "y*O!|siOO", &pte, &PyList_Type, &inputs, &method_name, &runs, &bridge, &npu_model))
    return NULL;
  session s;
  tmx_delegate_session ds;
  PyObject *result = NULL;
  tmx_delegate_begin(&ds, bridge, npu_model);
  if (session_load(&s, &pte, npu_model != Py_None) != 0 || session_init(&s, method_name, &tmx_registry) != 0) goto done;
  tm_method *m = &s.method;
  if ((uint32_t)PyList_GET_SIZE(inputs) != m->num_inputs) {
    char msg[128];
    snprintf(msg, sizeof(msg), "method takes %u inputs, %zd given", (unsigned)m->num_inputs,
             PyList_GET_SIZE(inputs));
    tmx_raise(TM_ERR_INVALID_ARGUMENT, msg);
    goto done;
  }
  for (uint32_t i = 0; i < m->num_inputs; ++i) {
    if (copy_input(m, i, PyList_GET_ITEM(inputs, i)) != 0) goto done;
  }
  tm_status st = TM_OK;
  Py_BEGIN_ALLOW_THREADS
  for (int r = 0; r < runs && st == TM_OK; ++r) st = tm_method_execute(m);
  Py_END_ALLOW_THREADS
  if (st != TM_OK) {
    raise_diag(&m->diag, st);
    if (ds.error != NULL) { /* the delegate_fn's own exception becomes the NativeError's cause */
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      PyErr_NormalizeException(&type, &value, &tb);
      if (value != NULL) PyException_SetCause(value, Py_NewRef(ds.error));
      PyErr_Restore(type, value, tb);
    }
    goto done;
  }
  result = PyList_New(m->num_outputs);
  for (uint32_t i = 0; result != NULL && i < m->num_outputs; ++i) {
    PyObject *o = output_object(m, i);
    if (o == NULL) Py_CLEAR(result);
    else PyList_SET_ITEM(result, i, o);
  }
done:
  tmx_delegate_end(&ds);
  session_close(&s);
  PyBuffer_Release(&pte);
  return result;
}

static tm_status stub_kernel(tm_kernel_context *ctx, tm_value *const *args, size_t nargs) {
  (void)ctx; (void)args; (void)nargs;
  return TM_ERR_UNSUPPORTED;
}

/* program_info's backends: accept any blob and call (info needs no backend to size memory);
 * init records what the runtime hands a backend (blob place, compile specs) for the caller. */
static PyObject *g_info_delegates; /* list being filled by stub_delegate_init (GIL held) */

static tm_status stub_delegate_init(tm_delegate_context *ctx, void *state, const tm_delegate_info *info) {
  (void)state;
  PyObject *specs = PyDict_New();
  for (uint32_t i = 0; specs != NULL && i < info->num_specs; ++i) {
    tm_compile_spec spec;
    PyObject *value;
    if (tm_delegate_compile_spec(info, i, &spec) != TM_OK ||
        (value = PyBytes_FromStringAndSize((const char *)spec.value, (Py_ssize_t)spec.size)) == NULL) {
      Py_CLEAR(specs);
      break;
    }
    if (PyDict_SetItemString(specs, spec.key, value) != 0) Py_CLEAR(specs);
    Py_DECREF(value);
  }
  PyObject *d = specs == NULL ? NULL
                              : Py_BuildValue("{s:N,s:I,s:n}", "compile_specs", specs, "blob_offset",
                                              (unsigned)info->blob_offset, "blob_size", (Py_ssize_t)info->blob_size);
  if (d == NULL || g_info_delegates == NULL || PyList_Append(g_info_delegates, d) != 0) {
    PyErr_Clear();
    Py_XDECREF(d);
    ctx->message = "program_info: recording the delegate failed";
    return TM_ERR_OUT_OF_MEMORY;
  }
  Py_DECREF(d);
  return TM_OK;
}
static tm_status stub_delegate_execute(tm_delegate_context *ctx, void *state, const tm_delegate_call *call) {
  (void)state; (void)call;
  ctx->message = "stub backend of program_info";
  return TM_ERR_UNSUPPORTED;
}

PyObject *native_program_info(PyObject *self, PyObject *args) {
  (void)self;
  Py_buffer pte;
  const char *method_name = NULL;
  if (!PyArg_ParseTuple(args, "y*|z", &pte, &method_name)) return NULL;
  PyObject *result = NULL, *ops = NULL, *missing = NULL, *methods = NULL, *delegates = NULL, *recorded = NULL;
  tm_kernel_entry *stubs = NULL;
  tm_backend *stub_backends = NULL;
  const tm_backend **stub_table = NULL;
  session s;
  memset(&s, 0, sizeof(s));
  if (session_load(&s, &pte, false) != 0) goto done;
  tm_program *probe = &s.program;
  /* Every operator of the method resolves to a stub, so info works without the kernels. */
  ops = PyList_New(0);
  missing = PyList_New(0);
  methods = PyList_New(0);
  if (ops == NULL || missing == NULL || methods == NULL) goto done;
  for (uint32_t i = 0; i < probe->num_methods; ++i) {
    const char *name;
    if (tm_program_method_name(probe, i, &name) == TM_OK) {
      PyObject *u = PyUnicode_FromString(name);
      if (u == NULL || PyList_Append(methods, u) != 0) { Py_XDECREF(u); goto done; }
      Py_DECREF(u);
    }
  }
  uint32_t nops = 0;
  const char *oname, *ooverload;
  while (tm_program_operator(probe, method_name, nops, &oname, &ooverload) == TM_OK) ++nops;
  stubs = PyMem_Calloc(nops + 1u, sizeof(tm_kernel_entry));
  if (stubs == NULL) { PyErr_NoMemory(); goto done; }
  for (uint32_t i = 0; i < nops; ++i) {
    tm_program_operator(probe, method_name, i, &oname, &ooverload);
    stubs[i].name = oname;
    stubs[i].overload = ooverload;
    stubs[i].fn = stub_kernel;
    /* The real prepare step, if any: its argument checks and the shared scratch it asks for
     * are what the device's init sees (scratch sizes do not depend on the build). */
    const tm_kernel_entry *real = tm_registry_entry(&tmx_registry, oname, ooverload);
    stubs[i].prepare = real != NULL ? real->prepare : NULL;
    PyObject *t = Py_BuildValue("(ss)", oname, ooverload);
    if (t == NULL || PyList_Append(ops, t) != 0) { Py_XDECREF(t); goto done; }
    if (tm_registry_find(&tmx_registry, oname, ooverload) == NULL && PyList_Append(missing, t) != 0) {
      Py_DECREF(t);
      goto done;
    }
    Py_DECREF(t);
  }
  uint32_t ndel = 0;
  const char *did;
  while (tm_program_delegate(probe, method_name, ndel, &did) == TM_OK) ++ndel;
  stub_backends = PyMem_Calloc(ndel + 1u, sizeof(tm_backend));
  stub_table = PyMem_Calloc(ndel + 1u, sizeof(tm_backend *));
  delegates = PyList_New(0);
  if (stub_backends == NULL || stub_table == NULL || delegates == NULL) { PyErr_NoMemory(); goto done; }
  for (uint32_t i = 0; i < ndel; ++i) {
    tm_program_delegate(probe, method_name, i, &did);
    stub_backends[i].id = did;
    stub_backends[i].init = stub_delegate_init;
    stub_backends[i].execute = stub_delegate_execute;
    stub_table[i] = &stub_backends[i];
    PyObject *t = Py_BuildValue("{s:s,s:O}", "id", did, "missing",
                                tm_registry_find_backend(&tmx_registry, did) == NULL ? Py_True : Py_False);
    if (t == NULL || PyList_Append(delegates, t) != 0) { Py_XDECREF(t); goto done; }
    Py_DECREF(t);
  }
  tm_kernel_registry stub_registry = {stubs, nops, (const tm_backend *const *)stub_table, ndel};
  recorded = PyList_New(0);
  if (recorded == NULL) goto done;
  g_info_delegates = recorded;
  int init_rc = session_init(&s, method_name, &stub_registry);
  g_info_delegates = NULL;
  if (init_rc != 0) goto done;
  for (uint32_t i = 0; i < ndel && i < (uint32_t)PyList_GET_SIZE(recorded); ++i) {
    if (PyDict_Update(PyList_GET_ITEM(delegates, i), PyList_GET_ITEM(recorded, i)) != 0) goto done;
  }
  tm_method *m = &s.method;
  PyObject *ins = PyList_New(0), *outs = PyList_New(0);
  if (ins == NULL || outs == NULL) { Py_XDECREF(ins); Py_XDECREF(outs); goto done; }
  for (uint32_t pass = 0; pass < 2; ++pass) {
    uint32_t n = pass == 0 ? m->num_inputs : m->num_outputs;
    for (uint32_t i = 0; i < n; ++i) {
      tm_tensor *t = pass == 0 ? tm_method_input(m, i) : tm_method_output(m, i);
      PyObject *d = t != NULL ? tensor_meta(t) : (Py_INCREF(Py_None), Py_None);
      if (d == NULL || PyList_Append(pass == 0 ? ins : outs, d) != 0) {
        Py_XDECREF(d); Py_DECREF(ins); Py_DECREF(outs);
        goto done;
      }
      Py_DECREF(d);
    }
  }
  result = Py_BuildValue("{s:O,s:O,s:O,s:O,s:I,s:I,s:I,s:n,s:n,s:I,s:N,s:N,s:K,s:K}", "delegates", delegates,
                         "methods", methods,
                         "operators", ops, "missing_operators", missing, "num_values",
                         (unsigned)m->num_values, "num_tensors", (unsigned)m->num_tensors,
                         "num_instructions", (unsigned)m->num_instructions, "meta_bytes",
                         (Py_ssize_t)s.meta_bytes, "arena_bytes", (Py_ssize_t)s.arena_bytes, "scratch_bytes",
                         (unsigned)m->scratch_needed, "inputs", ins,
                         "outputs", outs, "program_size", (unsigned long long)s.program.program_size,
                         "segment_data_size", (unsigned long long)s.program.segment_data_size);
done:
  session_close(&s);
  PyMem_Free(stubs);
  PyMem_Free(stub_backends);
  PyMem_Free(stub_table);
  Py_XDECREF(delegates);
  Py_XDECREF(recorded);
  Py_XDECREF(ops);
  Py_XDECREF(missing);
  Py_XDECREF(methods);
  PyBuffer_Release(&pte);
  return result;
}
