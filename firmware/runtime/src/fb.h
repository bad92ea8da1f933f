/*
 * Checked flatbuffer access. Every position handed out by these functions has
 * been bounds- and alignment-checked against the buffer, so the loader never
 * reads outside the .pte whatever the bytes say. Values are read with memcpy
 * (little-endian hosts and targets only), so no access relies on alignment.
 */
#ifndef TM_FB_H
#define TM_FB_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef struct {
  const uint8_t *p;
  uint32_t size;
  uint32_t err_pos;    /* where the last check failed */
  const char *err_msg; /* why (static) */
} tm_fb;

typedef struct {
  uint32_t pos;     /* table start (its soffset to the vtable) */
  uint32_t vt;      /* vtable position */
  uint16_t vt_len;  /* vtable bytes */
  uint16_t tbl_len; /* inline table bytes as the vtable states (not trusted, see fb.c) */
} tm_fb_table;

typedef struct {
  uint32_t pos; /* first element */
  uint32_t len; /* element count */
} tm_fb_vec;

static inline bool tm_add_u32(uint32_t a, uint32_t b, uint32_t *r) { return !__builtin_add_overflow(a, b, r); }
static inline bool tm_mul_u32(uint32_t a, uint32_t b, uint32_t *r) { return !__builtin_mul_overflow(a, b, r); }
static inline bool tm_add_u64(uint64_t a, uint64_t b, uint64_t *r) { return !__builtin_add_overflow(a, b, r); }

/* Raw little-endian loads at positions already checked by the functions below. */
#define TM_FB_LOAD(name, type)                                      \
  static inline type name(const tm_fb *fb, uint32_t pos) {          \
    type v;                                                         \
    memcpy(&v, fb->p + pos, sizeof v);                              \
    return v;                                                       \
  }
TM_FB_LOAD(tm_fb_u32, uint32_t)
TM_FB_LOAD(tm_fb_i32, int32_t)
TM_FB_LOAD(tm_fb_i64, int64_t)
TM_FB_LOAD(tm_fb_u64, uint64_t)
#undef TM_FB_LOAD

/* Records a failure; always returns false. */
bool tm_fb_fail(tm_fb *fb, uint32_t pos, const char *msg);

/* Table at `pos`: checks the table, its vtable and their bounds. */
bool tm_fb_table_at(tm_fb *fb, uint32_t pos, tm_fb_table *out);
/* The root table (uoffset at byte 0). */
bool tm_fb_root(tm_fb *fb, tm_fb_table *out);

/* Scalar field `idx` of `width` bytes (1, 2, 4, 8), zero-extended; 0 when absent (no field
 * the runtime reads has another default). tm_fb_scalar_field takes idx | width << 8, so its
 * four arguments all go in registers: each of the ~30 call sites is a few bytes shorter. */
bool tm_fb_scalar_field(tm_fb *fb, const tm_fb_table *t, unsigned field, uint64_t *out);
#define tm_fb_scalar(fb, t, idx, width, out) tm_fb_scalar_field(fb, t, (idx) | (width) << 8u, out)
/* Sub-table field; out->pos == 0 when absent (no table starts at 0: the root offset is there). */
bool tm_fb_subtable(tm_fb *fb, const tm_fb_table *t, unsigned idx, tm_fb_table *out);
/* Vector field `idx` of `elem` byte elements (empty when absent); packed as tm_fb_scalar's. */
bool tm_fb_vector_field(tm_fb *fb, const tm_fb_table *t, unsigned field, tm_fb_vec *out);
#define tm_fb_vector(fb, t, idx, elem, out) tm_fb_vector_field(fb, t, (idx) | (elem) << 8u, out)
/* Element `i` of a vector of tables. */
bool tm_fb_vec_table(tm_fb *fb, const tm_fb_vec *v, uint32_t i, tm_fb_table *out);
/* String field: NUL-terminated in the buffer; "" when absent. */
bool tm_fb_string(tm_fb *fb, const tm_fb_table *t, unsigned idx, const char **s, uint32_t *len);
/* A string field as tm_fb_string that is also well-formed UTF-8, as flatbuffers require
 * (the strict rules of RFC 3629: no overlong forms, surrogates or code points past
 * U+10FFFF). Otherwise fails with `not_utf8` (naming the field) at the string's offset. */
bool tm_fb_utf8_string(tm_fb *fb, const tm_fb_table *t, unsigned idx, const char *not_utf8, const char **s,
                       uint32_t *len);

#endif /* TM_FB_H */
