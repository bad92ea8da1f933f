/*
 * The optional inputs blob embedded beside the program ("TMIO", written by
 * host/torchmcu/device/io_blob.py). Little-endian:
 *   header  : "TMIO", u32 version (1), u32 samples, u32 inputs, u32 expected, 12 bytes zero
 *   records : samples x (inputs + expected) of { u32 nbytes, 12 bytes zero, data padded to 16 }
 * `expected` is 0 (no reference outputs) or the method's output count. Tensor
 * data is in memory order (dim order applied), exactly the bytes of the tensor.
 */
#ifndef TM_RUNNER_IO_BLOB_H
#define TM_RUNNER_IO_BLOB_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  const uint8_t *data;
  size_t size;
  uint32_t samples, inputs, expected;
  size_t next; /* read position of the next record */
} tm_io_blob;

/* 0 on success (an empty blob is valid: samples = 0); -1 when malformed. */
int tm_io_blob_open(tm_io_blob *blob, const uint8_t *data, size_t size);

/* Next record: its bytes and length; -1 when the blob ends early or is malformed. */
int tm_io_blob_next(tm_io_blob *blob, const uint8_t **bytes, uint32_t *nbytes);

#endif
