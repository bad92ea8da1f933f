#include "io_blob.h"

#include <string.h>

static uint32_t read_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int tm_io_blob_open(tm_io_blob *blob, const uint8_t *data, size_t size) {
  memset(blob, 0, sizeof(*blob));
  blob->data = data;
  blob->size = size;
  if (size == 0) {
    return 0;
  }
  if (size < 32 || memcmp(data, "TMIO", 4) != 0 || read_u32(data + 4) != 1u) {
    return -1;
  }
  blob->samples = read_u32(data + 8);
  blob->inputs = read_u32(data + 12);
  blob->expected = read_u32(data + 16);
  blob->next = 32;
  return 0;
}

int tm_io_blob_next(tm_io_blob *blob, const uint8_t **bytes, uint32_t *nbytes) {
  if (blob->next > blob->size || blob->size - blob->next < 16) {
    return -1;
  }
  uint32_t n = read_u32(blob->data + blob->next);
  size_t padded = ((size_t)n + 15u) & ~(size_t)15u;
  if (padded < n || blob->size - blob->next - 16 < padded) {
    return -1;
  }
  *bytes = blob->data + blob->next + 16;
  *nbytes = n;
  blob->next += 16 + padded;
  return 0;
}
