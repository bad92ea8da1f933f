/* Checked flatbuffer access (see fb.h). */
#include "fb.h"

bool tm_fb_fail(tm_fb *fb, uint32_t pos, const char *msg) {
  fb->err_pos = pos;
  fb->err_msg = msg;
  return false;
}

/* [pos, pos + n) lies inside the buffer. */
static bool in_bounds(const tm_fb *fb, uint32_t pos, uint32_t n) {
  uint32_t end;
  return tm_add_u32(pos, n, &end) && end <= fb->size;
}

bool tm_fb_table_at(tm_fb *fb, uint32_t pos, tm_fb_table *out) {
  if ((pos & 3u) != 0 || !in_bounds(fb, pos, 4)) {
    return tm_fb_fail(fb, pos, "table offset out of bounds or misaligned");
  }
  int64_t vt = (int64_t)pos - (int64_t)tm_fb_i32(fb, pos);
  if (vt < 0 || vt > (int64_t)fb->size - 4 || (vt & 1) != 0) {
    return tm_fb_fail(fb, pos, "vtable offset out of bounds or misaligned");
  }
  uint16_t vt_len, tbl_len;
  memcpy(&vt_len, fb->p + vt, 2);
  memcpy(&tbl_len, fb->p + vt + 2, 2);
  if (vt_len < 4 || (vt_len & 1u) != 0 || !in_bounds(fb, (uint32_t)vt, vt_len)) {
    return tm_fb_fail(fb, (uint32_t)vt, "vtable size invalid");
  }
  /* The table size in the vtable is not trusted: flatbuffers' Python builder (which
   * ExecuTorch uses) shares vtables between tables of different sizes. Each field
   * is bounds-checked against the buffer instead. */
  out->pos = pos;
  out->vt = (uint32_t)vt;
  out->vt_len = vt_len;
  out->tbl_len = tbl_len;
  return true;
}

bool tm_fb_root(tm_fb *fb, tm_fb_table *out) {
  if (fb->size < 8) {
    return tm_fb_fail(fb, 0, "buffer too small for a flatbuffer");
  }
  return tm_fb_table_at(fb, tm_fb_u32(fb, 0), out);
}

/* Position of field `idx` holding `width` bytes; 0 when absent. False when it breaks bounds. */
static bool field_pos(tm_fb *fb, const tm_fb_table *t, unsigned idx, unsigned width, uint32_t *pos) {
  uint32_t slot = 4u + 2u * idx;
  *pos = 0;
  if (slot + 2u > t->vt_len) {
    return true; /* field newer than the writer: absent */
  }
  uint16_t off;
  memcpy(&off, fb->p + t->vt + slot, 2);
  if (off == 0) {
    return true;
  }
  uint32_t p;
  if (!tm_add_u32(t->pos, off, &p) || !in_bounds(fb, p, width)) {
    return tm_fb_fail(fb, t->pos, "field outside the buffer");
  }
  if ((p & (width - 1u)) != 0) {
    return tm_fb_fail(fb, p, "misaligned field");
  }
  *pos = p;
  return true;
}

bool tm_fb_scalar_field(tm_fb *fb, const tm_fb_table *t, unsigned field, uint64_t *out) {
  const unsigned idx = field & 0xFFu, width = field >> 8;
  uint32_t p;
  *out = 0;
  if (!field_pos(fb, t, idx, width, &p)) {
    return false;
  }
  if (p != 0) {
    memcpy(out, fb->p + p, width); /* little-endian: low bytes first */
  }
  return true;
}

/* Follows the uoffset field `idx`; *target = 0 when absent. */
static bool ref_field(tm_fb *fb, const tm_fb_table *t, unsigned idx, uint32_t *target) {
  uint32_t p;
  if (!field_pos(fb, t, idx, 4, &p)) {
    return false;
  }
  *target = 0;
  if (p == 0) {
    return true;
  }
  uint32_t tgt;
  if (!tm_add_u32(p, tm_fb_u32(fb, p), &tgt) || tgt >= fb->size || tgt == p) {
    return tm_fb_fail(fb, p, "reference out of bounds");
  }
  *target = tgt;
  return true;
}

bool tm_fb_subtable(tm_fb *fb, const tm_fb_table *t, unsigned idx, tm_fb_table *out) {
  uint32_t tgt;
  out->pos = 0;
  if (!ref_field(fb, t, idx, &tgt)) {
    return false;
  }
  return tgt == 0 || tm_fb_table_at(fb, tgt, out);
}

/* Vector header at `pos`: 4-byte length then elements aligned to min(elem, 8). */
static bool vector_at(tm_fb *fb, uint32_t pos, unsigned elem, tm_fb_vec *out) {
  if ((pos & 3u) != 0 || !in_bounds(fb, pos, 4)) {
    return tm_fb_fail(fb, pos, "vector offset out of bounds or misaligned");
  }
  uint32_t len = tm_fb_u32(fb, pos), bytes;
  uint32_t first = pos + 4u;
  if (!tm_mul_u32(len, elem, &bytes) || !in_bounds(fb, first, bytes)) {
    return tm_fb_fail(fb, pos, "vector length out of bounds");
  }
  if (elem == 8 && (first & 7u) != 0) {
    return tm_fb_fail(fb, pos, "misaligned vector");
  }
  out->pos = first;
  out->len = len;
  return true;
}

bool tm_fb_vector_field(tm_fb *fb, const tm_fb_table *t, unsigned field, tm_fb_vec *out) {
  const unsigned idx = field & 0xFFu, elem = field >> 8;
  uint32_t tgt;
  out->pos = 0;
  out->len = 0;
  if (!ref_field(fb, t, idx, &tgt)) {
    return false;
  }
  return tgt == 0 || vector_at(fb, tgt, elem, out);
}

bool tm_fb_vec_table(tm_fb *fb, const tm_fb_vec *v, uint32_t i, tm_fb_table *out) {
  if (i >= v->len) {
    return tm_fb_fail(fb, v->pos, "vector index out of range");
  }
  uint32_t p = v->pos + 4u * i; /* inside the checked vector */
  uint32_t tgt;
  if (!tm_add_u32(p, tm_fb_u32(fb, p), &tgt) || tgt == p) {
    return tm_fb_fail(fb, p, "reference out of bounds");
  }
  return tm_fb_table_at(fb, tgt, out);
}

bool tm_fb_string(tm_fb *fb, const tm_fb_table *t, unsigned idx, const char **s, uint32_t *len) {
  uint32_t tgt;
  *s = "";
  *len = 0;
  if (!ref_field(fb, t, idx, &tgt)) {
    return false;
  }
  if (tgt == 0) {
    return true;
  }
  tm_fb_vec v = {0, 0};
  if (!vector_at(fb, tgt, 1, &v)) {
    return false;
  }
  if (v.pos + v.len >= fb->size || fb->p[v.pos + v.len] != 0) {
    return tm_fb_fail(fb, tgt, "string not NUL-terminated");
  }
  *s = (const char *)(fb->p + v.pos);
  *len = v.len;
  return true;
}

/* Length of the well-formed UTF-8 sequence starting at p[0] (at most n bytes), 0 if none. */
static uint32_t utf8_sequence(const uint8_t *p, uint32_t n) {
  const uint8_t b = p[0];
  if (b < 0x80u) {
    return 1;
  }
  uint32_t len;
  uint8_t lo = 0x80u, hi = 0xBFu; /* the allowed range of the second byte */
  if (b >= 0xC2u && b <= 0xDFu) {
    len = 2;
  } else if (b >= 0xE0u && b <= 0xEFu) {
    len = 3;
    lo = b == 0xE0u ? 0xA0u : 0x80u; /* E0: no overlong forms */
    hi = b == 0xEDu ? 0x9Fu : 0xBFu; /* ED: no surrogates */
  } else if (b >= 0xF0u && b <= 0xF4u) {
    len = 4;
    lo = b == 0xF0u ? 0x90u : 0x80u; /* F0: no overlong forms */
    hi = b == 0xF4u ? 0x8Fu : 0xBFu; /* F4: nothing past U+10FFFF */
  } else {
    return 0; /* a continuation byte, C0/C1 (overlong) or F5..FF */
  }
  if (n < len || p[1] < lo || p[1] > hi) {
    return 0;
  }
  for (uint32_t k = 2; k < len; ++k) {
    if ((p[k] & 0xC0u) != 0x80u) {
      return 0;
    }
  }
  return len;
}

bool tm_fb_utf8_string(tm_fb *fb, const tm_fb_table *t, unsigned idx, const char *not_utf8, const char **s,
                       uint32_t *len) {
  if (!tm_fb_string(fb, t, idx, s, len)) {
    return false;
  }
  const uint8_t *p = (const uint8_t *)*s;
  for (uint32_t at = 0; at < *len;) {
    const uint32_t step = utf8_sequence(p + at, *len - at);
    if (step == 0) {
      /* the string's position, as the Python reader reports it: its length prefix */
      return tm_fb_fail(fb, (uint32_t)(p - fb->p) - 4u, not_utf8);
    }
    at += step;
  }
  return true;
}
