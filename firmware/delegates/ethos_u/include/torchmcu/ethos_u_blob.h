/*
 * The Ethos-U delegate blob ("EthosUBackend", ExecuTorch's Vela bin stream): a sequence of
 * blocks, each a 16-byte zero-padded name, a u32 data length, a u8 external flag, 11 reserved
 * bytes, then the data padded to 16 bytes. Blocks: vela_bin_stream (first, empty), cmd_data,
 * weight_data, scratch_size (u32), inputs and outputs (i32 count, then per tensor 6 x i32
 * shape, i32 element size, i32 offset, i32 region), vela_end_stream (last, empty).
 *
 * The parser checks every length, count and offset against the blob and reports the block and
 * the byte offset of the first problem; afterwards nothing reads outside the blob. Shared by the
 * firmware delegate (NPU driver) and the host backend (Python callback), so both accept exactly
 * the same blobs. No heap: the parsed view points into the blob.
 */
#ifndef TORCHMCU_ETHOS_U_BLOB_H
#define TORCHMCU_ETHOS_U_BLOB_H

#include "torchmcu/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Vela's base-pointer regions, numbered as ExecuTorch's EthosUBackend maps them. */
#define TM_ETHOS_U_REGION_WEIGHTS 0u      /* weight_data, in place in the .pte */
#define TM_ETHOS_U_REGION_SCRATCH 1u      /* the DelegateCall's scratch tensor (holds the I/O) */
#define TM_ETHOS_U_REGION_FAST_SCRATCH 2u /* the board's fast scratch (Dedicated_Sram) */
#define TM_ETHOS_U_MAX_REGIONS 8u

#define TM_ETHOS_U_BLOCK_HEADER 32u
#define TM_ETHOS_U_IO_RECORD 36u /* 9 x i32 */

/* One input or output as Vela placed it. */
typedef struct {
  int32_t shape[6];
  int32_t elem_size;
  int32_t offset; /* inside its region */
  int32_t region;
  uint32_t nbytes; /* product of shape x elem_size (checked at parse) */
} tm_ethos_u_io;

/* A verified blob: views into its bytes. */
typedef struct {
  const uint8_t *cmd;
  uint32_t cmd_size;
  const uint8_t *weights;
  uint32_t weights_size;
  uint32_t scratch_size;
  const uint8_t *inputs; /* first record of the inputs block */
  uint32_t num_inputs;
  const uint8_t *outputs;
  uint32_t num_outputs;
  uint32_t inputs_pos, outputs_pos, scratch_pos; /* blob offsets of those blocks (diagnostics) */
} tm_ethos_u_blob;

typedef struct {
  const char *message; /* static text naming the block */
  const char *block;   /* the block's name, "header" for a block header, or "blob" */
  uint32_t offset;     /* byte offset in the blob */
} tm_ethos_u_error;

/* Parses and verifies `size` bytes. TM_ERR_INVALID_PROGRAM (or TM_ERR_UNSUPPORTED for an
 * external block) with *err filled on failure. */
tm_status tm_ethos_u_blob_parse(const uint8_t *data, size_t size, tm_ethos_u_blob *blob,
                                tm_ethos_u_error *err);

/* A backend's init step: parses the delegate's blob (info->blob); on failure ctx names the
 * problem and its blob offset. */
tm_status tm_ethos_u_blob_init(tm_delegate_context *ctx, const tm_delegate_info *info, tm_ethos_u_blob *blob);

/* Input or output `index` of a parsed blob (index < num_inputs / num_outputs). */
void tm_ethos_u_blob_io(const tm_ethos_u_blob *blob, bool output, uint32_t index, tm_ethos_u_io *io);

/*
 * Checks one DelegateCall against the blob: args = [inputs..., outputs..., scratch]; each I/O a
 * tensor of the blob's element size and byte size, outputs in planned memory, the scratch a
 * byte tensor in planned memory, 16-byte aligned and at least scratch_size bytes.
 */
tm_status tm_ethos_u_check_call(const tm_ethos_u_blob *blob, const tm_delegate_call *call,
                                tm_delegate_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* TORCHMCU_ETHOS_U_BLOB_H */
