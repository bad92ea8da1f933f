/*
 * torchmcu._native: the firmware runtime and kernels as a CPython extension,
 * so the host tests run the very C code that goes on the board.
 *
 * Python-facing conversions (numpy, layouts) live in torchmcu/native.py; this
 * file only speaks plain Python objects and the buffer protocol:
 *   tensor  -> tuple (buffer, scalar_type, sizes tuple, dim_order tuple)
 *   int list-> list of int; other scalars as Python None/bool/int/float; str -> String;
 *   tensor list -> list of tensors, (k,) references to argument k, or None items.
 * Host-only code: it may allocate (the firmware core never does).
 */
#include "native_common.h"

#include <stdio.h>
#include <string.h>

extern const tm_kernel_registry tm_all_kernels;
extern const tm_kernel_registry tm_host_test_kernels;

/* tm_all_kernels followed by the host-only test kernels (built at import). */
tm_kernel_registry tmx_registry;

#define MAX_CALL_ARGS 64
#define MAX_LIST_ITEMS 64

static PyObject *g_error_type; /* set by native.py to its NativeError; RuntimeError before */

static PyObject *native_set_error_type(PyObject *self, PyObject *type) {
  (void)self;
  if (!PyType_Check(type) || !PyType_IsSubtype((PyTypeObject *)type, (PyTypeObject *)PyExc_Exception)) {
    PyErr_SetString(PyExc_TypeError, "expected an exception type");
    return NULL;
  }
  Py_INCREF(type);
  Py_XSETREF(g_error_type, type);
  Py_RETURN_NONE;
}

/* Raises NativeError(status_name, message). Always returns NULL. */
PyObject *tmx_raise(tm_status status, const char *message) {
  PyObject *type = g_error_type != NULL ? g_error_type : PyExc_RuntimeError;
  PyObject *args = Py_BuildValue("(ss)", tm_status_name(status), message);
  if (args != NULL) {
    PyErr_SetObject(type, args);
    Py_DECREF(args);
  }
  return NULL;
}

/* ---- call_kernel ------------------------------------------------------- */

typedef struct {
  tm_value values[MAX_CALL_ARGS];
  tm_value *argv[MAX_CALL_ARGS + 1];
  tm_tensor tensors[MAX_CALL_ARGS];
  int64_t ints[MAX_CALL_ARGS][MAX_LIST_ITEMS];
  Py_buffer views[MAX_CALL_ARGS];
  int view_held[MAX_CALL_ARGS];
  /* tensor list items: one pool for all list arguments of the call */
  const tm_value *items[MAX_LIST_ITEMS];
  tm_value item_values[MAX_LIST_ITEMS];
  tm_tensor item_tensors[MAX_LIST_ITEMS];
  Py_buffer item_views[MAX_LIST_ITEMS];
  int item_held[MAX_LIST_ITEMS];
  size_t num_items;
} call_frame;

static int is_tensor_desc(PyObject *obj) { return PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 4; }

/* A reference to argument k of the call: a 1-tuple (k,), as a program's lists hold value indices. */
static int is_value_ref(PyObject *obj) {
  return PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 1 && PyLong_Check(PyTuple_GET_ITEM(obj, 0));
}

/* A list holding tensors, references or None is a TensorList (OptionalTensorList with a None). */
static int is_tensor_list(PyObject *obj) {
  if (!PyList_Check(obj)) return 0;
  for (Py_ssize_t k = 0; k < PyList_GET_SIZE(obj); ++k) {
    PyObject *item = PyList_GET_ITEM(obj, k);
    if (item == Py_None || is_tensor_desc(item) || is_value_ref(item)) return 1;
  }
  return 0;
}

static int fill_tensor(tm_tensor *t, Py_buffer *view, int *held, PyObject *desc, Py_ssize_t i,
                       const char *op);

static int fill_tensor_list(call_frame *f, Py_ssize_t i, PyObject *obj, const char *op) {
  tm_value *v = &f->values[i];
  Py_ssize_t n = PyList_GET_SIZE(obj);
  if (f->num_items + (size_t)n > MAX_LIST_ITEMS) {
    PyErr_Format(PyExc_ValueError, "%s: argument %zd: more than %d tensor list items in one call", op, i,
                 MAX_LIST_ITEMS);
    return -1;
  }
  v->tag = TM_VALUE_TENSOR_LIST;
  v->u.list.items = &f->items[f->num_items];
  v->u.list.length = (uint32_t)n;
  for (Py_ssize_t k = 0; k < n; ++k) {
    PyObject *item = PyList_GET_ITEM(obj, k);
    size_t slot = f->num_items++;
    if (item == Py_None) {
      v->tag = TM_VALUE_OPTIONAL_TENSOR_LIST;
      f->item_values[slot].tag = TM_VALUE_NONE;
      f->items[slot] = &f->item_values[slot];
    } else if (is_value_ref(item)) {
      long ref = PyLong_AsLong(PyTuple_GET_ITEM(item, 0));
      if (ref < 0 || ref >= i) {
        PyErr_Format(PyExc_ValueError, "%s: argument %zd item %zd: reference %ld is not an earlier argument", op,
                     i, k, ref);
        return -1;
      }
      f->items[slot] = &f->values[ref];
    } else if (is_tensor_desc(item)) {
      if (fill_tensor(&f->item_tensors[slot], &f->item_views[slot], &f->item_held[slot], item, i, op) != 0) {
        return -1;
      }
      f->item_values[slot].tag = TM_VALUE_TENSOR;
      f->item_values[slot].u.tensor = &f->item_tensors[slot];
      f->items[slot] = &f->item_values[slot];
    } else {
      PyErr_Format(PyExc_TypeError, "%s: argument %zd item %zd: not a tensor, reference or None", op, i, k);
      return -1;
    }
  }
  return 0;
}

static int fill_tensor(tm_tensor *t, Py_buffer *view, int *held, PyObject *desc, Py_ssize_t i,
                       const char *op) {
  PyObject *buf = PyTuple_GET_ITEM(desc, 0);
  long stype = PyLong_AsLong(PyTuple_GET_ITEM(desc, 1));
  PyObject *sizes = PyTuple_GET_ITEM(desc, 2);
  PyObject *order = PyTuple_GET_ITEM(desc, 3);
  if (PyErr_Occurred()) return -1;
  if (!PyTuple_Check(sizes) || !PyTuple_Check(order)) {
    PyErr_Format(PyExc_TypeError, "%s: argument %zd: tensor sizes/dim_order must be tuples", op, i);
    return -1;
  }
  Py_ssize_t dim = PyTuple_GET_SIZE(sizes);
  size_t esize = tm_element_size((uint32_t)stype);
  if (esize == 0) {
    PyErr_Format(PyExc_ValueError, "%s: argument %zd: unsupported scalar type %ld", op, i, stype);
    return -1;
  }
  if (dim > TM_MAX_DIMS || PyTuple_GET_SIZE(order) != dim) {
    PyErr_Format(PyExc_ValueError, "%s: argument %zd: rank %zd (max %d) or dim_order length %zd wrong",
                 op, i, dim, TM_MAX_DIMS, PyTuple_GET_SIZE(order));
    return -1;
  }
  memset(t, 0, sizeof(*t));
  uint64_t numel = 1;
  unsigned seen = 0;
  for (Py_ssize_t d = 0; d < dim; ++d) {
    long s = PyLong_AsLong(PyTuple_GET_ITEM(sizes, d));
    long o = PyLong_AsLong(PyTuple_GET_ITEM(order, d));
    if (PyErr_Occurred()) return -1;
    if (s < 0 || s > INT32_MAX || o < 0 || o >= dim || (seen & (1u << o))) {
      PyErr_Format(PyExc_ValueError, "%s: argument %zd: bad size %ld or dim_order entry %ld", op, i, s, o);
      return -1;
    }
    seen |= 1u << o;
    t->sizes[d] = (int32_t)s;
    t->dim_order[d] = (uint8_t)o;
    numel *= (uint64_t)s;
    if (numel > UINT32_MAX) {
      PyErr_Format(PyExc_ValueError, "%s: argument %zd: tensor too large", op, i);
      return -1;
    }
  }
  if (PyObject_GetBuffer(buf, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();
    if (PyObject_GetBuffer(buf, view, PyBUF_C_CONTIGUOUS) != 0) return -1;
  }
  *held = 1;
  if ((uint64_t)view->len != numel * esize) {
    PyErr_Format(PyExc_ValueError, "%s: argument %zd: buffer has %zd bytes, sizes need %llu", op, i,
                 view->len, (unsigned long long)(numel * esize));
    return -1;
  }
  t->data = numel != 0 ? view->buf : NULL;
  t->dim = (uint8_t)dim;
  t->scalar_type = (uint8_t)stype;
  t->numel = (uint32_t)numel;
  t->nbytes = (uint32_t)(numel * esize);
  return 0;
}

static int fill_value(call_frame *f, Py_ssize_t i, PyObject *obj, const char *op) {
  tm_value *v = &f->values[i];
  memset(v, 0, sizeof(*v));
  if (obj == Py_None) {
    v->tag = TM_VALUE_NONE;
  } else if (PyBool_Check(obj)) {
    v->tag = TM_VALUE_BOOL;
    v->u.b = obj == Py_True;
  } else if (PyLong_Check(obj)) {
    v->tag = TM_VALUE_INT;
    v->u.i = PyLong_AsLongLong(obj);
    if (PyErr_Occurred()) return -1;
  } else if (PyFloat_Check(obj)) {
    v->tag = TM_VALUE_DOUBLE;
    v->u.d = PyFloat_AS_DOUBLE(obj);
  } else if (PyUnicode_Check(obj)) {
    Py_ssize_t len = 0;
    const char *chars = PyUnicode_AsUTF8AndSize(obj, &len); /* lives as long as obj (the call) */
    if (chars == NULL) return -1;
    v->tag = TM_VALUE_STRING;
    v->u.string.chars = chars;
    v->u.string.length = (uint32_t)len;
  } else if (is_tensor_list(obj)) {
    return fill_tensor_list(f, i, obj, op);
  } else if (PyList_Check(obj)) {
    Py_ssize_t n = PyList_GET_SIZE(obj);
    if (n > MAX_LIST_ITEMS) {
      PyErr_Format(PyExc_ValueError, "%s: argument %zd: int list longer than %d", op, i, MAX_LIST_ITEMS);
      return -1;
    }
    for (Py_ssize_t k = 0; k < n; ++k) {
      f->ints[i][k] = PyLong_AsLongLong(PyList_GET_ITEM(obj, k));
      if (PyErr_Occurred()) return -1;
    }
    v->tag = TM_VALUE_INT_LIST;
    v->u.int_list.items = f->ints[i];
    v->u.int_list.length = (uint32_t)n;
  } else if (PyTuple_Check(obj) && PyTuple_GET_SIZE(obj) == 4) {
    if (fill_tensor(&f->tensors[i], &f->views[i], &f->view_held[i], obj, i, op) != 0) return -1;
    v->tag = TM_VALUE_TENSOR;
    v->u.tensor = &f->tensors[i];
  } else {
    PyErr_Format(PyExc_TypeError, "%s: argument %zd: unsupported type %s", op, i, Py_TYPE(obj)->tp_name);
    return -1;
  }
  return 0;
}

/* call_kernel(name, overload, args): args per schema ending with the out tensor once;
 * the out value is passed a second time (the returned value) as programs do. A
 * multi-output op instead ends with its returned TensorList (references to the outs),
 * passed once, as ExecuTorch emits it. */
static PyObject *native_call_kernel(PyObject *self, PyObject *pyargs) {
  (void)self;
  const char *name, *overload;
  PyObject *list;
  if (!PyArg_ParseTuple(pyargs, "ssO!", &name, &overload, &PyList_Type, &list)) return NULL;
  char op[256];
  snprintf(op, sizeof(op), "%s.%s", name, overload);
  tm_kernel_fn fn = tm_registry_find(&tmx_registry, name, overload);
  if (fn == NULL) {
    char msg[400];
    snprintf(msg, sizeof(msg), "operator %s not in this image (%zu kernels registered)", op,
             tmx_registry.count);
    return tmx_raise(TM_ERR_MISSING_OPERATOR, msg);
  }
  Py_ssize_t n = PyList_GET_SIZE(list);
  if (n < 1 || n > MAX_CALL_ARGS) {
    PyErr_Format(PyExc_ValueError, "%s: %zd arguments (expected 1..%d)", op, n, MAX_CALL_ARGS);
    return NULL;
  }
  call_frame *f = PyMem_Calloc(1, sizeof(call_frame));
  if (f == NULL) return PyErr_NoMemory();
  PyObject *result = NULL;
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (fill_value(f, i, PyList_GET_ITEM(list, i), op) != 0) goto done;
    f->argv[i] = &f->values[i];
  }
  const int returns_list = f->values[n - 1].tag == TM_VALUE_TENSOR_LIST;
  f->argv[n] = f->argv[n - 1];
  tm_kernel_context ctx = {0, 0, 0, 0, NULL}; /* one call: arguments never verified before, no shared scratch */
  tm_status st;
  Py_BEGIN_ALLOW_THREADS
  st = fn(&ctx, f->argv, returns_list ? (size_t)n : (size_t)n + 1);
  Py_END_ALLOW_THREADS
  if (st != TM_OK) {
    char msg[400];
    snprintf(msg, sizeof(msg), "%s: kernel returned %s (bad_argument %u)", op, tm_status_name(st),
             (unsigned)ctx.bad_argument);
    tmx_raise(st, msg);
    goto done;
  }
  result = Py_None;
  Py_INCREF(result);
done:
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (f->view_held[i]) PyBuffer_Release(&f->views[i]);
  }
  for (size_t k = 0; k < f->num_items; ++k) {
    if (f->item_held[k]) PyBuffer_Release(&f->item_views[k]);
  }
  PyMem_Free(f);
  return result;
}

static PyObject *native_kernel_names(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  PyObject *out = PyList_New(0);
  if (out == NULL) return NULL;
  for (size_t i = 0; i < tmx_registry.count; ++i) {
    const tm_kernel_entry *e = &tmx_registry.entries[i];
    PyObject *item = Py_BuildValue("(ss)", e->name, e->overload);
    if (item == NULL || PyList_Append(out, item) != 0) {
      Py_XDECREF(item);
      Py_DECREF(out);
      return NULL;
    }
    Py_DECREF(item);
  }
  return out;
}

static PyMethodDef native_methods[] = {
    {"call_kernel", native_call_kernel, METH_VARARGS, "call_kernel(name, overload, args)"},
    {"kernel_names", native_kernel_names, METH_NOARGS, "[(name, overload)] of the registry"},
    {"run_program", native_run_program, METH_VARARGS,
     "run_program(pte, inputs, method, runs=1, delegate_bridge=None)"},
    {"program_info", native_program_info, METH_VARARGS, "program_info(pte, method=None)"},
    {"parse_ethos_u_blob", native_parse_ethos_u_blob, METH_O, "parse_ethos_u_blob(blob) -> dict (C parser)"},
    {"_set_error_type", native_set_error_type, METH_O, "set the exception type raised on errors"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "_native", "torchmcu C runtime and kernels", -1, native_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__native(void) {
  size_t n = tm_all_kernels.count + tm_host_test_kernels.count;
  tm_kernel_entry *entries = PyMem_Calloc(n, sizeof(tm_kernel_entry));
  if (entries == NULL) return PyErr_NoMemory();
  if (tm_all_kernels.count != 0) {
    memcpy(entries, tm_all_kernels.entries, tm_all_kernels.count * sizeof(tm_kernel_entry));
  }
  memcpy(entries + tm_all_kernels.count, tm_host_test_kernels.entries,
         tm_host_test_kernels.count * sizeof(tm_kernel_entry));
  tmx_registry.entries = entries;
  tmx_registry.count = n;
  static const tm_backend *const host_backends[] = {&tmx_ethos_u_host_backend};
  tmx_registry.backends = host_backends;
  tmx_registry.num_backends = sizeof(host_backends) / sizeof(host_backends[0]);
  return PyModule_Create(&native_module);
}
