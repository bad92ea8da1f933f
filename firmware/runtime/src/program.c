/*
 * .pte loading and verification: the file header, the extended header, the
 * segment table, and a full walk of every execution plan (values, tensors,
 * operators, instructions), so that nothing later trusts unchecked bytes.
 */
#include <stdint.h>
#include <string.h>

#include "str_equal.h"
#include "loader.h"

/* Field slots of program.fbs tables (a union takes two slots: type, value). */
enum { PROGRAM_EXECUTION_PLAN = 1, PROGRAM_CONSTANT_BUFFER = 2, PROGRAM_SEGMENTS = 4,
       PROGRAM_CONSTANT_SEGMENT = 5 };
enum { PLAN_NAME = 0, PLAN_VALUES = 2, PLAN_INPUTS = 3, PLAN_OUTPUTS = 4, PLAN_CHAINS = 5,
       PLAN_OPERATORS = 6, PLAN_DELEGATES = 7, PLAN_BUFFER_SIZES = 8 };
enum { EVALUE_TYPE = 0, EVALUE_VAL = 1 };
enum { TENSOR_SCALAR_TYPE = 0, TENSOR_STORAGE_OFFSET = 1, TENSOR_SIZES = 2, TENSOR_DIM_ORDER = 3,
       TENSOR_DATA_BUFFER_IDX = 5, TENSOR_ALLOCATION = 6, TENSOR_EXTRA = 9 };
enum { EXTRA_LOCATION = 2 };
enum { ALLOC_MEMORY_ID = 0, ALLOC_OFFSET_LOW = 1, ALLOC_OFFSET_HIGH = 2 };
enum { CHAIN_INPUTS = 0, CHAIN_OUTPUTS = 1, CHAIN_INSTRUCTIONS = 2 };
enum { INSTR_TYPE = 0, INSTR_ARGS = 1 };
enum { OPERATOR_NAME = 0, OPERATOR_OVERLOAD = 1 };
enum { SEGMENT_OFFSET = 0, SEGMENT_SIZE = 1 };
enum { SUBSEG_INDEX = 0, SUBSEG_OFFSETS = 1 };
enum { DELEGATE_ID = 0, DELEGATE_PROCESSED = 1, DELEGATE_COMPILE_SPECS = 2 };
enum { DATAREF_LOCATION = 0, DATAREF_INDEX = 1 };
enum { PROGRAM_DELEGATE_DATA = 3 };

/* KernelTypes union members of program.fbs. */
enum { KT_NULL = 1, KT_INT, KT_BOOL, KT_DOUBLE, KT_TENSOR, KT_STRING, KT_INT_LIST, KT_DOUBLE_LIST,
       KT_BOOL_LIST, KT_TENSOR_LIST, KT_OPTIONAL_TENSOR_LIST };

#define EXT_HEADER_POS 8u
#define EXT_HEADER_MIN 24u
#define ARENA_ALIGN 16u

void tm_diag_set(tm_diag *d, tm_status st, const char *msg, uint32_t pos) {
  d->status = st;
  d->message = msg;
  d->byte_offset = pos;
}

void tm_diag_clear(tm_diag *d) {
  d->status = TM_OK;
  d->message = "";
  d->op_name = NULL;
  d->op_overload = NULL;
  d->instruction = TM_DIAG_NONE;
  d->value = TM_DIAG_NONE;
  d->argument = TM_DIAG_NONE;
  d->delegate = TM_DIAG_NONE;
  d->byte_offset = TM_DIAG_NO_OFFSET;
}

tm_fb tm_program_fb(const tm_program *program) {
  tm_fb fb = {program->data, program->program_size, 0, ""};
  return fb;
}

static tm_status fb_error(tm_diag *d, const tm_fb *fb) {
  tm_diag_set(d, TM_ERR_INVALID_PROGRAM, fb->err_msg, fb->err_pos);
  return TM_ERR_INVALID_PROGRAM;
}

static tm_status bad(tm_diag *d, tm_status st, const char *msg, uint32_t pos) {
  tm_diag_set(d, st, msg, pos);
  return st;
}

/* A program using a runtime feature this image was built without (loader.h): refused at
 * load, naming the feature (one short message per feature: the strings are the cost). */
#define without_feature(c, feature, pos)                                                     \
  bad((c)->diag, TM_ERR_UNSUPPORTED, "runtime feature '" feature "' not in this image", pos)

/* ---- walk state helpers --------------------------------------------------- */

/* A checked read of the walk failed (c->fb holds why and where): tm_walk_plan reports it. */
#define FB_FAILED TM_ERR_INVALID_PROGRAM

typedef struct {
  tm_program *prog;
  tm_diag *diag;
  tm_fb fb;
  tm_fb_table program;
  tm_fb_vec values;       /* EValue tables */
  tm_fb_vec buffer_sizes; /* non_const_buffer_sizes (int64) */
  uint32_t num_delegates;
  tm_walk *w;
} walk_ctx;

/* Union type of value `idx` (0 when unreadable: the caller reports). */
static bool value_type(walk_ctx *c, uint32_t idx, uint64_t *type, tm_fb_table *val) {
  tm_fb_table ev;
  if (!tm_fb_vec_table(&c->fb, &c->values, idx, &ev) ||
      !tm_fb_scalar(&c->fb, &ev, EVALUE_TYPE, 1, type) ||
      !tm_fb_subtable(&c->fb, &ev, EVALUE_VAL, val)) {
    return false;
  }
  if (val->pos == 0) {
    return tm_fb_fail(&c->fb, ev.pos, "value without payload");
  }
  return true;
}

/* Reads an index vector ([int]) and checks every entry is a value index (or -1 if allowed). */
static tm_status check_indices(walk_ctx *c, const tm_fb_table *t, unsigned field, bool allow_none,
                               tm_fb_vec *out) {
  if (!tm_fb_vector(&c->fb, t, field, 4, out)) {
    return FB_FAILED;
  }
  for (uint32_t k = 0; k < out->len; ++k) {
    int32_t v = tm_fb_i32(&c->fb, out->pos + 4u * k);
    if (!(v >= 0 && (uint32_t)v < c->values.len) && !(allow_none && v == -1)) {
      c->diag->value = v;
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "value index out of range", out->pos + 4u * k);
    }
  }
  return TM_OK;
}

/* ---- tensors -------------------------------------------------------------- */

static tm_status constant_data(walk_ctx *c, uint32_t buffer_idx, uint32_t nbytes, uint32_t esize,
                               uint32_t pos, void **data) {
  tm_fb *fb = &c->fb;
  tm_fb_table cs, seg;
  tm_fb_vec offsets, segments;
  uint64_t seg_index, seg_off, seg_size;
  if (!tm_fb_subtable(fb, &c->program, PROGRAM_CONSTANT_SEGMENT, &cs)) {
    return FB_FAILED;
  }
  if (cs.pos == 0) {
    return bad(c->diag, TM_ERR_UNSUPPORTED, "constant without constant_segment (inline constant_buffer)", pos);
  }
  if (!tm_fb_vector(fb, &cs, SUBSEG_OFFSETS, 8, &offsets) ||
      !tm_fb_scalar(fb, &cs, SUBSEG_INDEX, 4, &seg_index) ||
      !tm_fb_vector(fb, &c->program, PROGRAM_SEGMENTS, 4, &segments)) {
    return FB_FAILED;
  }
  if (buffer_idx >= offsets.len) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "data_buffer_idx beyond constant_segment.offsets", pos);
  }
  if (seg_index >= segments.len) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "constant_segment.segment_index out of range", cs.pos);
  }
  if (!tm_fb_vec_table(fb, &segments, (uint32_t)seg_index, &seg) ||
      !tm_fb_scalar(fb, &seg, SEGMENT_OFFSET, 8, &seg_off) ||
      !tm_fb_scalar(fb, &seg, SEGMENT_SIZE, 8, &seg_size)) {
    return FB_FAILED;
  }
  uint64_t off = tm_fb_u64(fb, offsets.pos + 8u * buffer_idx), end, file_pos;
  /* Segments were checked against the file at load: seg_off + seg_size fits. */
  if (!tm_add_u64(off, nbytes, &end) || end > seg_size) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "constant tensor data outside its segment", pos);
  }
  file_pos = c->prog->segment_base + seg_off + off;
  const uint8_t *p = c->prog->data + file_pos;
  if (((uintptr_t)p & (esize - 1u)) != 0) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "constant tensor data misaligned", pos);
  }
  *data = (void *)(uintptr_t)p;
  return TM_OK;
}

static tm_status planned_data(walk_ctx *c, const tm_fb_table *alloc, uint32_t nbytes, uint32_t esize,
                              void **data) {
  tm_fb *fb = &c->fb;
  uint64_t mem_id, low, high;
  if (!tm_fb_scalar(fb, alloc, ALLOC_MEMORY_ID, 4, &mem_id) ||
      !tm_fb_scalar(fb, alloc, ALLOC_OFFSET_LOW, 4, &low) ||
      !tm_fb_scalar(fb, alloc, ALLOC_OFFSET_HIGH, 4, &high)) {
    return FB_FAILED;
  }
  if (mem_id == 0 || mem_id >= c->buffer_sizes.len) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "allocation memory_id out of range", alloc->pos);
  }
  uint64_t cap = (uint64_t)tm_fb_i64(fb, c->buffer_sizes.pos + 8u * (uint32_t)mem_id);
  uint64_t offset = (high << 32) | low;
  if (high != 0 || offset + nbytes > cap) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "planned tensor outside its memory buffer", alloc->pos);
  }
  if ((offset & (esize - 1u)) != 0) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "planned tensor offset misaligned", alloc->pos);
  }
  /* Memory ids are laid out one after another in the arena, each 16-byte aligned. */
  uint64_t base = 0;
  for (uint32_t id = 1; id < (uint32_t)mem_id; ++id) {
    uint64_t sz = (uint64_t)tm_fb_i64(fb, c->buffer_sizes.pos + 8u * id);
    base += (sz + ARENA_ALIGN - 1u) & ~(uint64_t)(ARENA_ALIGN - 1u);
  }
  *data = c->w->arena != NULL ? c->w->arena + base + offset : NULL;
  return TM_OK;
}

static tm_status walk_tensor(walk_ctx *c, const tm_fb_table *t, tm_tensor *out) {
  tm_fb *fb = &c->fb;
  uint64_t stype, storage_offset, buffer_idx;
  tm_fb_vec sizes, order;
  tm_fb_table alloc, extra;
  if (!tm_fb_scalar(fb, t, TENSOR_SCALAR_TYPE, 1, &stype) ||
      !tm_fb_scalar(fb, t, TENSOR_STORAGE_OFFSET, 4, &storage_offset) ||
      !tm_fb_vector(fb, t, TENSOR_SIZES, 4, &sizes) ||
      !tm_fb_vector(fb, t, TENSOR_DIM_ORDER, 1, &order) ||
      !tm_fb_scalar(fb, t, TENSOR_DATA_BUFFER_IDX, 4, &buffer_idx) ||
      !tm_fb_subtable(fb, t, TENSOR_ALLOCATION, &alloc) ||
      !tm_fb_subtable(fb, t, TENSOR_EXTRA, &extra)) {
    return FB_FAILED;
  }
  uint32_t esize = (uint32_t)tm_element_size((uint32_t)stype); /* stype is a 1-byte field */
  if (esize == 0) {
    return bad(c->diag, TM_ERR_UNSUPPORTED, "tensor scalar type not supported", t->pos);
  }
  if (storage_offset != 0) {
    return bad(c->diag, TM_ERR_UNSUPPORTED, "tensor storage_offset not zero", t->pos);
  }
  if (sizes.len > TM_MAX_DIMS) {
    return bad(c->diag, TM_ERR_UNSUPPORTED, "tensor rank above TM_MAX_DIMS", t->pos);
  }
  if (order.len != 0 && order.len != sizes.len) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "dim_order length differs from rank", t->pos);
  }
  if (extra.pos != 0) {
    uint64_t location;
    if (!tm_fb_scalar(fb, &extra, EXTRA_LOCATION, 1, &location)) {
      return FB_FAILED;
    }
    if (location != 0) {
      return bad(c->diag, TM_ERR_UNSUPPORTED, "tensor data stored outside the .pte", t->pos);
    }
  }
  tm_tensor tmp;
  tm_tensor *tt = out != NULL ? out : &tmp;
  memset(tt, 0, sizeof(*tt));
  uint32_t numel = 1, nbytes, seen = 0;
  for (uint32_t d = 0; d < sizes.len; ++d) {
    int32_t s = tm_fb_i32(fb, sizes.pos + 4u * d);
    uint32_t o = order.len != 0 ? fb->p[order.pos + d] : d;
    if (s < 0) {
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "negative tensor size", sizes.pos + 4u * d);
    }
    if (o >= sizes.len || (seen & (1u << o)) != 0) {
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "dim_order is not a permutation", order.pos + d);
    }
    seen |= 1u << o;
    if (!tm_mul_u32(numel, (uint32_t)s, &numel)) {
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "tensor element count overflows", t->pos);
    }
    tt->sizes[d] = s;
    tt->dim_order[d] = (uint8_t)o;
  }
  if (!tm_mul_u32(numel, esize, &nbytes)) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "tensor byte size overflows", t->pos);
  }
  tt->dim = (uint8_t)sizes.len;
  tt->scalar_type = (uint8_t)stype;
  tt->numel = numel;
  tt->nbytes = nbytes;
  tm_status st = TM_OK;
  if (buffer_idx != 0 && alloc.pos != 0) {
    return bad(c->diag, TM_ERR_UNSUPPORTED, "mutable tensor with initial data", t->pos);
  } else if (buffer_idx != 0) {
    st = constant_data(c, (uint32_t)buffer_idx, nbytes, esize, t->pos, &tt->data);
  } else if (alloc.pos != 0) {
    st = planned_data(c, &alloc, nbytes, esize, &tt->data);
  }
  return st;
}

/* ---- values --------------------------------------------------------------- */

/* IntList items are indices of Int values; resolves them to their integers. */
static tm_status walk_int_list(walk_ctx *c, const tm_fb_table *t, tm_value *out) {
  tm_fb_vec items;
  if (!tm_fb_vector(&c->fb, t, 0, 8, &items)) {
    return FB_FAILED;
  }
  /* Shared item vectors could make the total quadratic: bound it by the file (no overflow: the
   * vector lies in the file, so items.len <= size / 8, and so does the total so far). */
  if (c->w->num_ints + items.len > c->fb.size / 8u) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "int lists larger than the program", t->pos);
  }
  int64_t *dst = c->w->ints != NULL ? c->w->ints + c->w->num_ints : NULL;
  for (uint32_t k = 0; k < items.len; ++k) {
    int64_t idx = tm_fb_i64(&c->fb, items.pos + 8u * k);
    uint64_t type;
    tm_fb_table val;
    if (idx < 0 || (uint64_t)idx >= c->values.len) {
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "int list item is not a value index", items.pos + 8u * k);
    }
    if (!value_type(c, (uint32_t)idx, &type, &val)) {
      return FB_FAILED;
    }
    if (type != KT_INT) {
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "int list item does not reference an Int", items.pos + 8u * k);
    }
    uint64_t iv;
    if (!tm_fb_scalar(&c->fb, &val, 0, 8, &iv)) {
      return FB_FAILED;
    }
    if (dst != NULL) {
      dst[k] = (int64_t)iv;
    }
  }
  if (out != NULL) {
    out->u.int_list.items = dst;
    out->u.int_list.length = items.len;
  }
  c->w->num_ints += items.len;
  return TM_OK;
}

static tm_status walk_value(walk_ctx *c, uint32_t i) {
  tm_walk *w = c->w;
  tm_fb *fb = &c->fb;
  uint64_t type, raw;
  tm_fb_table val;
  tm_fb_vec vec;
  const char *s;
  uint32_t slen;
  tm_value *out = w->values != NULL ? &w->values[i] : NULL;
  tm_status st = TM_OK;
  if (!value_type(c, i, &type, &val)) {
    return FB_FAILED;
  }
  if (out != NULL) {
    memset(out, 0, sizeof(*out));
    out->tag = (uint8_t)(type - 1u);
  }
  switch (type) {
    case KT_NULL:
      break;
    case KT_INT:
    case KT_BOOL:
    case KT_DOUBLE:
      if (!tm_fb_scalar(fb, &val, 0, type == KT_BOOL ? 1 : 8, &raw)) {
        return FB_FAILED;
      }
      if (out != NULL) {
        if (type == KT_INT) out->u.i = (int64_t)raw;
        else if (type == KT_BOOL) out->u.b = raw != 0;
        else memcpy(&out->u.d, &raw, sizeof(double));
      }
      break;
    case KT_TENSOR:
      st = walk_tensor(c, &val, w->tensors != NULL ? &w->tensors[w->num_tensors] : NULL);
      if (st == TM_OK && out != NULL) {
        out->u.tensor = &w->tensors[w->num_tensors];
      }
      w->num_tensors++;
      break;
    case KT_STRING:
      if (!TM_FEATURE_STRING_LIST_VALUES) {
        return without_feature(c, "string_list_values", val.pos);
      }
      if (!tm_fb_utf8_string(fb, &val, 0, "String.string_val is not UTF-8", &s, &slen)) {
        return FB_FAILED;
      }
      if (out != NULL) {
        out->u.string.chars = s;
        out->u.string.length = slen;
      }
      break;
    case KT_INT_LIST:
      st = walk_int_list(c, &val, out);
      break;
    case KT_DOUBLE_LIST:
    case KT_BOOL_LIST:
      if (!tm_fb_vector(fb, &val, 0, type == KT_BOOL_LIST ? 1 : 8, &vec)) {
        return FB_FAILED;
      }
      break;
    case KT_TENSOR_LIST:
    case KT_OPTIONAL_TENSOR_LIST:
      if (!TM_FEATURE_STRING_LIST_VALUES) {
        return without_feature(c, "string_list_values", val.pos);
      }
      st = check_indices(c, &val, 0, type == KT_OPTIONAL_TENSOR_LIST, &vec);
      if (st == TM_OK && w->num_list_items + vec.len > fb->size / 4u) { /* bounded as int lists */
        return bad(c->diag, TM_ERR_INVALID_PROGRAM, "tensor list items exceed the file", val.pos);
      }
      if (st == TM_OK && out != NULL) {
        /* items point into the value table (filled in any order; None items are NULL) */
        out->u.list.items = &w->list_items[w->num_list_items];
        out->u.list.length = vec.len;
      }
      for (uint32_t k = 0; st == TM_OK && k < vec.len; ++k) {
        int32_t idx = tm_fb_i32(fb, vec.pos + 4u * k);
        uint64_t t2;
        tm_fb_table v2;
        if (w->list_items != NULL) {
          w->list_items[w->num_list_items] = idx < 0 ? NULL : &w->values[idx];
        }
        w->num_list_items++;
        if (idx < 0) continue;
        if (!value_type(c, (uint32_t)idx, &t2, &v2)) return FB_FAILED;
        if (t2 != KT_TENSOR && !(t2 == KT_NULL && type == KT_OPTIONAL_TENSOR_LIST)) {
          st = bad(c->diag, TM_ERR_INVALID_PROGRAM, "tensor list item is not a tensor", vec.pos + 4u * k);
        }
      }
      break;
    default:
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "unknown value type", val.pos);
  }
  return st;
}

/* ---- operators, delegates, instructions ----------------------------------- */

static tm_status walk_operators(walk_ctx *c, const tm_fb_table *plan) {
  tm_fb *fb = &c->fb;
  tm_fb_vec ops;
  if (!tm_fb_vector(fb, plan, PLAN_OPERATORS, 4, &ops)) {
    return FB_FAILED;
  }
  for (uint32_t i = 0; i < ops.len; ++i) {
    tm_fb_table op;
    const char *name, *overload;
    uint32_t nlen, olen;
    if (!tm_fb_vec_table(fb, &ops, i, &op) ||
        !tm_fb_utf8_string(fb, &op, OPERATOR_NAME, "Operator.name is not UTF-8", &name, &nlen) ||
        !tm_fb_utf8_string(fb, &op, OPERATOR_OVERLOAD, "Operator.overload is not UTF-8", &overload, &olen)) {
      return FB_FAILED;
    }
    if (nlen == 0) {
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "operator without a name", op.pos);
    }
    if (c->w->ops != NULL) {
      const tm_kernel_entry *e = tm_registry_entry(c->w->registry, name, overload);
      if (e == NULL) {
        c->diag->op_name = name;
        c->diag->op_overload = overload;
        return bad(c->diag, TM_ERR_MISSING_OPERATOR, "operator not registered in this image", op.pos);
      }
      c->w->ops[i] = e;
    }
  }
  c->w->num_ops = ops.len;
  return TM_OK;
}

static tm_status walk_delegates(walk_ctx *c, const tm_fb_table *plan) {
  tm_fb *fb = &c->fb;
  tm_fb_vec dels, inline_data, segments;
  if (!tm_fb_vector(fb, plan, PLAN_DELEGATES, 4, &dels) ||
      !tm_fb_vector(fb, &c->program, PROGRAM_DELEGATE_DATA, 4, &inline_data) ||
      !tm_fb_vector(fb, &c->program, PROGRAM_SEGMENTS, 4, &segments)) {
    return FB_FAILED;
  }
  if (!TM_FEATURE_DELEGATES && dels.len != 0) {
    /* Refused when a method is initialised (the kernel table is filled), as a backend not
     * registered in this image is: missing operator, the delegate id named. */
    tm_fb_table d;
    const char *id;
    uint32_t len;
    c->num_delegates = c->w->num_delegates = dels.len;
    if (c->w->ops == NULL) {
      return TM_OK;
    }
    if (!tm_fb_vec_table(fb, &dels, 0, &d) || !tm_fb_string(fb, &d, DELEGATE_ID, &id, &len)) {
      return FB_FAILED;
    }
    c->diag->delegate = 0;
    c->diag->op_name = id;
    return bad(c->diag, TM_ERR_MISSING_OPERATOR, "delegate: runtime feature 'delegates' not in this image",
               d.pos);
  }
  for (uint32_t i = 0; i < dels.len; ++i) {
    tm_fb_table d, ref, spec;
    tm_fb_vec specs, bytes;
    const char *s;
    uint32_t len;
    uint64_t location, index;
    if (!tm_fb_vec_table(fb, &dels, i, &d) ||
        !tm_fb_utf8_string(fb, &d, DELEGATE_ID, "BackendDelegate.id is not UTF-8", &s, &len) ||
        !tm_fb_subtable(fb, &d, DELEGATE_PROCESSED, &ref) ||
        !tm_fb_vector(fb, &d, DELEGATE_COMPILE_SPECS, 4, &specs)) {
      return FB_FAILED;
    }
    if (ref.pos == 0) {
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "delegate without processed data", d.pos);
    }
    if (!tm_fb_scalar(fb, &ref, DATAREF_LOCATION, 1, &location) ||
        !tm_fb_scalar(fb, &ref, DATAREF_INDEX, 4, &index)) {
      return FB_FAILED;
    }
    if (location > 1 || index >= (location == 0 ? inline_data.len : segments.len)) {
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "delegate data reference out of range", ref.pos);
    }
    if (location == 0) { /* inline data: its byte vector must be readable */
      tm_fb_table inl;
      if (!tm_fb_vec_table(fb, &inline_data, (uint32_t)index, &inl) || !tm_fb_vector(fb, &inl, 0, 1, &bytes)) {
        return FB_FAILED;
      }
    }
    for (uint32_t k = 0; k < specs.len; ++k) {
      if (!tm_fb_vec_table(fb, &specs, k, &spec) ||
          !tm_fb_utf8_string(fb, &spec, 0, "CompileSpec.key is not UTF-8", &s, &len) ||
          !tm_fb_vector(fb, &spec, 1, 1, &bytes)) {
        return FB_FAILED;
      }
    }
  }
  c->num_delegates = dels.len;
  c->w->num_delegates = dels.len;
  return TM_OK;
}

tm_status tm_delegate_at(const tm_program *program, const tm_fb_table *plan, uint32_t index,
                         tm_delegate_info *info) {
  tm_fb fb = tm_program_fb(program);
  tm_fb_table root, d, ref, inl, seg;
  tm_fb_vec dels, specs, vec;
  uint32_t len;
  uint64_t location, ref_index, seg_off, seg_size;
  memset(info, 0, sizeof(*info));
  /* The plan was verified at load (walk_delegates): these reads only fail on a bug. */
  if (!tm_fb_root(&fb, &root) || !tm_fb_vector(&fb, plan, PLAN_DELEGATES, 4, &dels) ||
      !tm_fb_vec_table(&fb, &dels, index, &d) || !tm_fb_string(&fb, &d, DELEGATE_ID, &info->id, &len) ||
      !tm_fb_subtable(&fb, &d, DELEGATE_PROCESSED, &ref) || ref.pos == 0 ||
      !tm_fb_vector(&fb, &d, DELEGATE_COMPILE_SPECS, 4, &specs) ||
      !tm_fb_scalar(&fb, &ref, DATAREF_LOCATION, 1, &location) ||
      !tm_fb_scalar(&fb, &ref, DATAREF_INDEX, 4, &ref_index)) {
    return TM_ERR_INVALID_PROGRAM;
  }
  info->index = index;
  info->program = program;
  info->specs = specs.len != 0 ? specs.pos : 0;
  info->num_specs = specs.len;
  if (location == 0) {
    if (!tm_fb_vector(&fb, &root, PROGRAM_DELEGATE_DATA, 4, &vec) ||
        !tm_fb_vec_table(&fb, &vec, (uint32_t)ref_index, &inl) || !tm_fb_vector(&fb, &inl, 0, 1, &vec)) {
      return TM_ERR_INVALID_PROGRAM;
    }
    info->blob = program->data + vec.pos;
    info->blob_size = vec.len;
    info->blob_offset = vec.pos;
    return TM_OK;
  }
  if (!tm_fb_vector(&fb, &root, PROGRAM_SEGMENTS, 4, &vec) ||
      !tm_fb_vec_table(&fb, &vec, (uint32_t)ref_index, &seg) ||
      !tm_fb_scalar(&fb, &seg, SEGMENT_OFFSET, 8, &seg_off) ||
      !tm_fb_scalar(&fb, &seg, SEGMENT_SIZE, 8, &seg_size)) {
    return TM_ERR_INVALID_PROGRAM;
  }
  /* check_segments: segment_base + seg_off + seg_size lies inside the file. */
  const uint64_t file_pos = program->segment_base + seg_off;
  info->blob = program->data + file_pos;
  info->blob_size = (size_t)seg_size;
  info->blob_offset = file_pos <= UINT32_MAX ? (uint32_t)file_pos : TM_DIAG_NO_OFFSET;
  return TM_OK;
}

tm_status tm_delegate_compile_spec(const tm_delegate_info *info, uint32_t index, tm_compile_spec *spec) {
  if (info == NULL || spec == NULL || index >= info->num_specs || info->program == NULL) {
    return TM_ERR_INVALID_ARGUMENT;
  }
  tm_fb fb = tm_program_fb(info->program);
  tm_fb_vec specs = {info->specs, info->num_specs}, bytes;
  tm_fb_table t;
  uint32_t len;
  if (!tm_fb_vec_table(&fb, &specs, index, &t) || !tm_fb_string(&fb, &t, 0, &spec->key, &len) ||
      !tm_fb_vector(&fb, &t, 1, 1, &bytes)) {
    return TM_ERR_INVALID_PROGRAM;
  }
  spec->value = info->program->data + bytes.pos;
  spec->size = bytes.len;
  return TM_OK;
}

tm_status tm_delegate_find_compile_spec(const tm_delegate_info *info, const char *key,
                                        tm_compile_spec *spec) {
  if (info == NULL || key == NULL) {
    return TM_ERR_INVALID_ARGUMENT;
  }
  for (uint32_t i = 0; i < info->num_specs; ++i) {
    tm_status st = tm_delegate_compile_spec(info, i, spec);
    if (st != TM_OK) {
      return st;
    }
    if (tm_str_equal(spec->key, key)) {
      return TM_OK;
    }
  }
  return TM_ERR_INVALID_ARGUMENT;
}

static tm_status walk_instruction(walk_ctx *c, uint32_t chain, const tm_fb_vec *instrs, uint32_t i) {
  tm_fb *fb = &c->fb;
  tm_walk *w = c->w;
  tm_fb_table ins, args;
  uint64_t type, a = 0, b = 0;
  tm_fb_vec argv = {0, 0};
  if (!tm_fb_vec_table(fb, instrs, i, &ins) || !tm_fb_scalar(fb, &ins, INSTR_TYPE, 1, &type) ||
      !tm_fb_subtable(fb, &ins, INSTR_ARGS, &args)) {
    return FB_FAILED;
  }
  if (args.pos == 0 || type < TM_INSTR_KERNEL || type > TM_INSTR_FREE) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "unknown instruction type", ins.pos);
  }
  if (!tm_fb_scalar(fb, &args, 0, 4, &a) || !tm_fb_scalar(fb, &args, 1, 4, &b)) {
    return FB_FAILED;
  }
  int32_t ia = (int32_t)(uint32_t)a, ib = (int32_t)(uint32_t)b;
  /* Each kind's indices: a in [0, a_end), and for a move or a jump b in [0, b_end). A negative
   * index is at or above every end (no end is above 2^31: counts of vectors in the file). */
  uint32_t a_end = c->values.len, b_end = 1, b_checked = 0;
  const char *out_of_range = "free value index out of range";
  switch (type) {
    case TM_INSTR_KERNEL:
      a_end = w->num_ops;
      out_of_range = "op_index out of range";
      break;
    case TM_INSTR_DELEGATE:
      a_end = c->num_delegates;
      out_of_range = "delegate_index out of range";
      break;
    case TM_INSTR_MOVE:
      if (!TM_FEATURE_CONTROL_FLOW) {
        return without_feature(c, "control_flow", ins.pos);
      }
      b_checked = (uint32_t)ib;
      b_end = a_end;
      out_of_range = "move value index out of range";
      break;
    case TM_INSTR_JUMP_FALSE:
      if (!TM_FEATURE_CONTROL_FLOW) {
        return without_feature(c, "control_flow", ins.pos);
      }
      /* destination == the instruction count: the jump ends the method (a cond at the end) */
      b_checked = (uint32_t)ib;
      b_end = instrs->len + 1u;
      out_of_range = "jump condition or destination out of range";
      break;
    default: /* FreeCall */
      break;
  }
  if ((uint32_t)ia >= a_end || b_checked >= b_end) {
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, out_of_range, args.pos);
  }
  tm_status st = type <= TM_INSTR_DELEGATE ? check_indices(c, &args, 1, false, &argv) : TM_OK;
  if (st != TM_OK) {
    return st;
  }
  if (chain != 0) {
    return TM_OK; /* only the first chain is materialised */
  }
  if (w->num_args + argv.len > fb->size / 4u) { /* bounded as int lists */
    return bad(c->diag, TM_ERR_INVALID_PROGRAM, "instruction arguments larger than the program", args.pos);
  }
  if (w->instrs != NULL) {
    tm_instruction *out = &w->instrs[i];
    out->kind = (uint8_t)type;
    out->pos = ins.pos;
    out->a = ia;
    out->b = ib;
    out->args = w->argv + w->num_args;
    out->nargs = argv.len;
    out->fn = type == TM_INSTR_KERNEL ? w->ops[ia]->fn : NULL;
    for (uint32_t k = 0; k < argv.len; ++k) {
      out->args[k] = &w->values[tm_fb_i32(fb, argv.pos + 4u * k)];
    }
  }
  w->num_args += argv.len;
  return TM_OK;
}

static tm_status walk_chains(walk_ctx *c, const tm_fb_table *plan) {
  tm_fb *fb = &c->fb;
  tm_fb_vec chains;
  if (!tm_fb_vector(fb, plan, PLAN_CHAINS, 4, &chains)) {
    return FB_FAILED;
  }
  c->w->num_chains = chains.len;
  for (uint32_t ci = 0; ci < chains.len; ++ci) {
    tm_fb_table chain;
    tm_fb_vec ins, outs, instrs;
    tm_status st;
    if (!tm_fb_vec_table(fb, &chains, ci, &chain)) {
      return FB_FAILED;
    }
    if ((st = check_indices(c, &chain, CHAIN_INPUTS, false, &ins)) != TM_OK ||
        (st = check_indices(c, &chain, CHAIN_OUTPUTS, false, &outs)) != TM_OK) {
      return st;
    }
    if (!tm_fb_vector(fb, &chain, CHAIN_INSTRUCTIONS, 4, &instrs)) {
      return FB_FAILED;
    }
    if (instrs.len > INT32_MAX) {
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "too many instructions", chain.pos);
    }
    for (uint32_t i = 0; i < instrs.len; ++i) {
      c->diag->instruction = (int32_t)i;
      if ((st = walk_instruction(c, ci, &instrs, i)) != TM_OK) {
        return st;
      }
    }
    c->diag->instruction = TM_DIAG_NONE;
    if (ci == 0) {
      c->w->num_instrs = instrs.len;
    }
  }
  return TM_OK;
}

/* ---- plan ----------------------------------------------------------------- */

static tm_status walk_buffer_sizes(walk_ctx *c, const tm_fb_table *plan) {
  if (!tm_fb_vector(&c->fb, plan, PLAN_BUFFER_SIZES, 8, &c->buffer_sizes)) {
    return FB_FAILED;
  }
  uint32_t total = 0;
  for (uint32_t id = 1; id < c->buffer_sizes.len; ++id) {
    int64_t sz = tm_fb_i64(&c->fb, c->buffer_sizes.pos + 8u * id);
    uint32_t aligned;
    if (sz < 0 || sz > (int64_t)(UINT32_MAX - ARENA_ALIGN) ||
        !tm_add_u32(total, ((uint32_t)sz + ARENA_ALIGN - 1u) & ~(ARENA_ALIGN - 1u), &aligned)) {
      return bad(c->diag, TM_ERR_INVALID_PROGRAM, "non_const_buffer_sizes entry invalid",
                 c->buffer_sizes.pos + 8u * id);
    }
    total = aligned;
  }
  c->w->arena_bytes = total;
  return TM_OK;
}

static tm_status walk_io(walk_ctx *c, const tm_fb_table *plan) {
  tm_fb_vec ins, outs;
  tm_status st;
  if ((st = check_indices(c, plan, PLAN_INPUTS, false, &ins)) != TM_OK ||
      (st = check_indices(c, plan, PLAN_OUTPUTS, false, &outs)) != TM_OK) {
    return st;
  }
  if (c->w->io != NULL) { /* the checked (non-negative) little-endian indices as they are */
    memcpy(c->w->io, c->fb.p + ins.pos, 4u * ins.len);
    memcpy(c->w->io + ins.len, c->fb.p + outs.pos, 4u * outs.len);
  }
  c->w->num_inputs = ins.len;
  c->w->num_outputs = outs.len;
  return TM_OK;
}

static tm_status walk_plan(walk_ctx *c, const tm_fb_table *plan) {
  tm_diag *diag = c->diag;
  tm_walk *w = c->w;
  tm_status st;
  if (!tm_fb_root(&c->fb, &c->program) || !tm_fb_vector(&c->fb, plan, PLAN_VALUES, 4, &c->values)) {
    return FB_FAILED;
  }
  if (c->values.len > INT32_MAX) {
    return bad(diag, TM_ERR_INVALID_PROGRAM, "too many values", plan->pos);
  }
  w->num_values = c->values.len;
  if ((st = walk_buffer_sizes(c, plan)) != TM_OK || (st = walk_operators(c, plan)) != TM_OK ||
      (st = walk_delegates(c, plan)) != TM_OK) {
    return st;
  }
  for (uint32_t i = 0; i < c->values.len; ++i) {
    diag->value = (int32_t)i;
    if ((st = walk_value(c, i)) != TM_OK) {
      return st;
    }
  }
  diag->value = TM_DIAG_NONE;
  if ((st = walk_io(c, plan)) != TM_OK) {
    return st;
  }
  return walk_chains(c, plan);
}

tm_status tm_walk_plan(tm_program *program, tm_diag *diag, const tm_fb_table *plan, tm_walk *w) {
  walk_ctx c;
  memset(&c, 0, sizeof(c));
  c.prog = program;
  c.diag = diag;
  c.fb = tm_program_fb(program);
  c.w = w;
  w->num_tensors = w->num_ints = w->num_list_items = w->num_args = 0;
  tm_status st = walk_plan(&c, plan);
  /* Every failed read stops the walk at once: a recorded reader error is the walk's. */
  if (st != TM_OK && c.fb.err_msg[0] != '\0') {
    return fb_error(diag, &c.fb);
  }
  return st;
}

/* ---- program -------------------------------------------------------------- */

tm_status tm_program_method_name(const tm_program *program, uint32_t index, const char **name) {
  tm_fb fb = tm_program_fb(program);
  tm_fb_table root, plan;
  tm_fb_vec plans;
  uint32_t len;
  *name = NULL;
  if (program->root == 0 || !tm_fb_root(&fb, &root) ||
      !tm_fb_vector(&fb, &root, PROGRAM_EXECUTION_PLAN, 4, &plans) || index >= plans.len ||
      !tm_fb_vec_table(&fb, &plans, index, &plan) || !tm_fb_string(&fb, &plan, PLAN_NAME, name, &len)) {
    return TM_ERR_INVALID_ARGUMENT;
  }
  return TM_OK;
}

/* Table `index` of the plan vector `field` (operators, delegates) of method `method_name`. */
static bool plan_item(tm_program *program, tm_fb *fb, const char *method_name, unsigned field, uint32_t index,
                      tm_fb_table *item) {
  tm_fb_table plan;
  tm_fb_vec items;
  return program->root != 0 && tm_find_plan(program, method_name, &plan) == TM_OK &&
         tm_fb_vector(fb, &plan, field, 4, &items) && index < items.len && tm_fb_vec_table(fb, &items, index, item);
}

tm_status tm_program_operator(tm_program *program, const char *method_name, uint32_t index,
                              const char **name, const char **overload) {
  tm_fb fb = tm_program_fb(program);
  tm_fb_table op;
  uint32_t len;
  *name = *overload = NULL;
  if (!plan_item(program, &fb, method_name, PLAN_OPERATORS, index, &op) ||
      !tm_fb_string(&fb, &op, OPERATOR_NAME, name, &len) || !tm_fb_string(&fb, &op, OPERATOR_OVERLOAD, overload, &len)) {
    return TM_ERR_INVALID_ARGUMENT;
  }
  return TM_OK;
}

tm_status tm_program_delegate(tm_program *program, const char *method_name, uint32_t index, const char **id) {
  tm_fb fb = tm_program_fb(program);
  tm_fb_table d;
  uint32_t len;
  *id = NULL;
  if (!plan_item(program, &fb, method_name, PLAN_DELEGATES, index, &d) ||
      !tm_fb_string(&fb, &d, DELEGATE_ID, id, &len)) {
    return TM_ERR_INVALID_ARGUMENT;
  }
  return TM_OK;
}

/* The optional extended header "eh00" at byte 8: program size and segment placement. */
static tm_status read_ext_header(tm_program *p) {
  const uint8_t *d = p->data;
  uint64_t program_size = p->size;
  p->segment_base = 0;
  p->segment_data_size = 0;
  if (p->size >= EXT_HEADER_POS + EXT_HEADER_MIN && memcmp(d + EXT_HEADER_POS, "eh00", 4) == 0) {
    uint32_t len;
    uint64_t seg_end;
    memcpy(&len, d + EXT_HEADER_POS + 4, 4);
    memcpy(&program_size, d + EXT_HEADER_POS + 8, 8);
    memcpy(&p->segment_base, d + EXT_HEADER_POS + 16, 8);
    if (len >= 32 && p->size >= EXT_HEADER_POS + 32) {
      memcpy(&p->segment_data_size, d + EXT_HEADER_POS + 24, 8);
    }
    if (len < EXT_HEADER_MIN || program_size < EXT_HEADER_POS + (uint64_t)len || program_size > p->size) {
      return bad(&p->diag, TM_ERR_INVALID_PROGRAM, "extended header program_size invalid or file truncated",
                 EXT_HEADER_POS);
    }
    if (p->segment_base != 0) {
      if (len < 32) {
        p->segment_data_size = p->size > p->segment_base ? p->size - p->segment_base : 0;
      }
      if (p->segment_base < program_size || !tm_add_u64(p->segment_base, p->segment_data_size, &seg_end) ||
          seg_end > p->size) {
        return bad(&p->diag, TM_ERR_INVALID_PROGRAM, "segment data outside the file (truncated?)",
                   EXT_HEADER_POS + 16);
      }
    } else {
      p->segment_data_size = 0;
    }
  }
  if (program_size > UINT32_MAX - 8u) {
    return bad(&p->diag, TM_ERR_UNSUPPORTED, "flatbuffer part larger than 4 GiB", EXT_HEADER_POS);
  }
  p->program_size = (uint32_t)program_size;
  return TM_OK;
}

static tm_status check_segments(tm_program *p, tm_fb *fb, const tm_fb_table *root) {
  tm_fb_vec segs;
  if (!tm_fb_vector(fb, root, PROGRAM_SEGMENTS, 4, &segs)) {
    return fb_error(&p->diag, fb);
  }
  for (uint32_t i = 0; i < segs.len; ++i) {
    tm_fb_table seg;
    uint64_t off, size, end;
    if (!tm_fb_vec_table(fb, &segs, i, &seg) || !tm_fb_scalar(fb, &seg, SEGMENT_OFFSET, 8, &off) ||
        !tm_fb_scalar(fb, &seg, SEGMENT_SIZE, 8, &size)) {
      return fb_error(&p->diag, fb);
    }
    if (p->segment_base == 0 || !tm_add_u64(off, size, &end) || end > p->segment_data_size) {
      return bad(&p->diag, TM_ERR_INVALID_PROGRAM, "segment outside the segment data (truncated?)", seg.pos);
    }
  }
  return TM_OK;
}

/*
 * The execution plans, in order: with `verify` (at load) the segments and then every plan are
 * checked, and the program marked loaded; otherwise *plan is the plan called `name` (NULL: the
 * first) of the loaded program.
 */
static tm_status each_plan(tm_program *program, const char *name, tm_fb_table *plan, bool verify) {
  tm_fb fb = tm_program_fb(program);
  tm_fb_table root;
  tm_fb_vec plans;
  tm_status st;
  if (!tm_fb_root(&fb, &root) || !tm_fb_vector(&fb, &root, PROGRAM_EXECUTION_PLAN, 4, &plans)) {
    return fb_error(&program->diag, &fb);
  }
  if (verify && (st = check_segments(program, &fb, &root)) != TM_OK) {
    return st;
  }
  for (uint32_t i = 0; i < plans.len; ++i) {
    const char *pname;
    uint32_t len;
    if (!tm_fb_vec_table(&fb, &plans, i, plan) ||
        !tm_fb_utf8_string(&fb, plan, PLAN_NAME, "ExecutionPlan.name is not UTF-8", &pname, &len)) {
      return fb_error(&program->diag, &fb);
    }
    if (verify) {
      tm_walk w;
      memset(&w, 0, sizeof(w));
      if ((st = tm_walk_plan(program, &program->diag, plan, &w)) != TM_OK) {
        return st;
      }
    } else if (name == NULL || tm_str_equal(name, pname)) {
      return TM_OK;
    }
  }
  if (verify) {
    program->root = root.pos;
    program->num_methods = plans.len;
    return TM_OK;
  }
  return bad(&program->diag, TM_ERR_INVALID_ARGUMENT, "no method with this name", TM_DIAG_NO_OFFSET);
}

tm_status tm_find_plan(tm_program *program, const char *name, tm_fb_table *plan) {
  return each_plan(program, name, plan, false);
}

tm_status tm_program_load(tm_program *program, const void *data, size_t size) {
  if (program == NULL) {
    return TM_ERR_INVALID_ARGUMENT;
  }
  memset(program, 0, sizeof(*program));
  tm_diag_clear(&program->diag);
  program->data = data;
  program->size = size;
  if (data == NULL) {
    return bad(&program->diag, TM_ERR_INVALID_ARGUMENT, "no program data", TM_DIAG_NO_OFFSET);
  }
  if (size < 8 || memcmp(program->data + 4, "ET12", 4) != 0) {
    return bad(&program->diag, TM_ERR_INVALID_PROGRAM, "file identifier is not ET12", size < 8 ? 0 : 4);
  }
  tm_status st = read_ext_header(program);
  if (st != TM_OK) {
    return st;
  }
  tm_fb_table plan;
  return each_plan(program, NULL, &plan, true);
}
