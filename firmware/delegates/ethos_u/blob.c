/* Ethos-U delegate blob: parser/verifier and the DelegateCall argument check (no heap). */
#include <string.h>

#include "torchmcu/ethos_u_blob.h"

enum { B_BEGIN, B_CMD, B_WEIGHTS, B_SCRATCH, B_INPUTS, B_OUTPUTS, B_END, B_UNKNOWN };

static const char *const kBlockNames[] = {"vela_bin_stream", "cmd_data",  "weight_data",    "scratch_size",
                                          "inputs",          "outputs",   "vela_end_stream"};

static tm_status blob_fail(tm_ethos_u_error *err, const char *msg, const char *block, size_t offset) {
  err->message = msg;
  err->block = block;
  err->offset = offset <= UINT32_MAX ? (uint32_t)offset : UINT32_MAX;
  return TM_ERR_INVALID_PROGRAM;
}

static int32_t load_i32(const uint8_t *p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

static uint32_t load_u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

void tm_ethos_u_blob_io(const tm_ethos_u_blob *blob, bool output, uint32_t index, tm_ethos_u_io *io) {
  const uint8_t *rec = (output ? blob->outputs : blob->inputs) + (size_t)index * TM_ETHOS_U_IO_RECORD;
  uint64_t n = 1;
  for (unsigned d = 0; d < 6; ++d) {
    io->shape[d] = load_i32(rec + 4u * d);
    n *= (uint64_t)io->shape[d]; /* verified at parse: non-negative, product fits */
  }
  io->elem_size = load_i32(rec + 24);
  io->offset = load_i32(rec + 28);
  io->region = load_i32(rec + 32);
  io->nbytes = (uint32_t)(n * (uint64_t)io->elem_size);
}

/* The inputs or outputs block: count, then records, each with a sane shape, element size,
 * offset and region. */
static tm_status parse_io(const uint8_t *data, size_t pos, uint32_t len, bool output, tm_ethos_u_blob *b,
                          tm_ethos_u_error *err) {
  const char *name = output ? "outputs" : "inputs";
  if (len < 4u) {
    return blob_fail(err, output ? "outputs block: shorter than its 4-byte count"
                                 : "inputs block: shorter than its 4-byte count", name, pos);
  }
  const int32_t count = load_i32(data + pos);
  if (count < 0 || (uint32_t)count > (len - 4u) / TM_ETHOS_U_IO_RECORD ||
      4u + (uint32_t)count * TM_ETHOS_U_IO_RECORD != len) {
    return blob_fail(err, output ? "outputs block: length is not 4 + 36 x count"
                                 : "inputs block: length is not 4 + 36 x count", name, pos);
  }
  for (uint32_t i = 0; i < (uint32_t)count; ++i) {
    const size_t rec = pos + 4u + (size_t)i * TM_ETHOS_U_IO_RECORD;
    uint64_t n = 1;
    for (unsigned d = 0; d < 6; ++d) {
      const int32_t s = load_i32(data + rec + 4u * d);
      if (s < 0) {
        return blob_fail(err, output ? "outputs block: negative shape entry" : "inputs block: negative shape entry",
                         name, rec + 4u * d);
      }
      n *= (uint64_t)s;
      if (n > UINT32_MAX) {
        return blob_fail(err, output ? "outputs block: tensor larger than 4 GiB" : "inputs block: tensor larger than 4 GiB",
                         name, rec + 4u * d);
      }
    }
    const int32_t esize = load_i32(data + rec + 24);
    if (esize != 1 && esize != 2 && esize != 4) {
      return blob_fail(err, output ? "outputs block: element size not 1, 2 or 4"
                                   : "inputs block: element size not 1, 2 or 4", name, rec + 24);
    }
    if (n * (uint64_t)esize > UINT32_MAX) {
      return blob_fail(err, output ? "outputs block: tensor larger than 4 GiB" : "inputs block: tensor larger than 4 GiB",
                       name, rec + 24);
    }
    if (load_i32(data + rec + 28) < 0) {
      return blob_fail(err, output ? "outputs block: negative offset" : "inputs block: negative offset", name, rec + 28);
    }
    const int32_t region = load_i32(data + rec + 32);
    if (region < 0 || (uint32_t)region >= TM_ETHOS_U_MAX_REGIONS) {
      return blob_fail(err, output ? "outputs block: region outside 0..7" : "inputs block: region outside 0..7",
                       name, rec + 32);
    }
  }
  if (output) {
    b->outputs = data + pos + 4u;
    b->num_outputs = (uint32_t)count;
    b->outputs_pos = (uint32_t)pos;
  } else {
    b->inputs = data + pos + 4u;
    b->num_inputs = (uint32_t)count;
    b->inputs_pos = (uint32_t)pos;
  }
  return TM_OK;
}

/* Scratch-region I/O must lie inside the scratch Vela asked for. */
static tm_status check_scratch_io(const tm_ethos_u_blob *b, bool output, tm_ethos_u_error *err) {
  const uint32_t n = output ? b->num_outputs : b->num_inputs;
  for (uint32_t i = 0; i < n; ++i) {
    tm_ethos_u_io io;
    tm_ethos_u_blob_io(b, output, i, &io);
    if ((uint32_t)io.region == TM_ETHOS_U_REGION_SCRATCH &&
        (uint64_t)(uint32_t)io.offset + io.nbytes > b->scratch_size) {
      return blob_fail(err, output ? "outputs block: output lies beyond scratch_size"
                                   : "inputs block: input lies beyond scratch_size",
                       output ? "outputs" : "inputs",
                       (output ? b->outputs_pos : b->inputs_pos) + 4u + i * TM_ETHOS_U_IO_RECORD + 28u);
    }
  }
  return TM_OK;
}

tm_status tm_ethos_u_blob_parse(const uint8_t *data, size_t size, tm_ethos_u_blob *blob, tm_ethos_u_error *err) {
  memset(blob, 0, sizeof(*blob));
  err->message = "";
  err->block = "blob";
  err->offset = 0;
  if (data == NULL || size < TM_ETHOS_U_BLOCK_HEADER) {
    return blob_fail(err, "blob shorter than one block header (empty delegate data?)", "blob", 0);
  }
  if (size > UINT32_MAX) {
    return blob_fail(err, "blob larger than 4 GiB", "blob", 0);
  }
  bool seen[B_UNKNOWN] = {false};
  size_t pos = 0;
  for (unsigned nblock = 0;; ++nblock) {
    if (size - pos < TM_ETHOS_U_BLOCK_HEADER) {
      return blob_fail(err, "block header truncated (no vela_end_stream block)", "header", pos);
    }
    const uint8_t *h = data + pos;
    if (memchr(h, 0, 16) == NULL) {
      return blob_fail(err, "block name is not NUL-terminated within 16 bytes", "header", pos);
    }
    int kind = B_UNKNOWN;
    for (int k = 0; k < B_UNKNOWN; ++k) {
      if (strcmp((const char *)h, kBlockNames[k]) == 0) kind = k;
    }
    const char *name = kind != B_UNKNOWN ? kBlockNames[kind] : "unknown block";
    const uint32_t len = load_u32(h + 16);
    const size_t at = pos + TM_ETHOS_U_BLOCK_HEADER;
    if (len > size - at) {
      return blob_fail(err, "block length runs past the end of the blob", name, pos + 16u);
    }
    if (h[20] != 0) {
      err->message = "block data stored outside the blob (external flag) is not supported";
      err->block = name;
      err->offset = (uint32_t)pos + 20u;
      return TM_ERR_UNSUPPORTED;
    }
    if (nblock == 0 && kind != B_BEGIN) {
      return blob_fail(err, "first block is not vela_bin_stream (not an EthosUBackend blob)", name, pos);
    }
    if (kind != B_UNKNOWN) {
      if (seen[kind]) {
        return blob_fail(err, "duplicate block", name, pos);
      }
      seen[kind] = true;
    }
    tm_status st = TM_OK;
    switch (kind) {
      case B_BEGIN:
      case B_END:
        if (len != 0) {
          return blob_fail(err, "vela_bin_stream / vela_end_stream block is not empty", name, pos + 16u);
        }
        break;
      case B_CMD:
        if (len == 0 || len % 4u != 0) {
          return blob_fail(err, "cmd_data block: command stream empty or not a multiple of 4 bytes", name, pos + 16u);
        }
        blob->cmd = data + at;
        blob->cmd_size = len;
        break;
      case B_WEIGHTS:
        blob->weights = len != 0 ? data + at : NULL;
        blob->weights_size = len;
        break;
      case B_SCRATCH:
        if (len != 4u) {
          return blob_fail(err, "scratch_size block: length is not 4", name, pos + 16u);
        }
        blob->scratch_size = load_u32(data + at);
        blob->scratch_pos = (uint32_t)pos;
        break;
      case B_INPUTS:
      case B_OUTPUTS:
        st = parse_io(data, at, len, kind == B_OUTPUTS, blob, err);
        break;
      default: /* a block of a later format version: skipped, bounds already checked */
        break;
    }
    if (st != TM_OK) {
      return st;
    }
    if (kind == B_END) {
      break;
    }
    const size_t pad = (16u - (len & 15u)) & 15u; /* no overflow: len <= size - at */
    if (pad > size - at - len) {
      return blob_fail(err, "block padding runs past the end of the blob (no vela_end_stream block)", name,
                       pos + 16u);
    }
    pos = at + len + pad;
  }
  for (int k = B_CMD; k <= B_OUTPUTS; ++k) {
    if (!seen[k]) {
      return blob_fail(err, k == B_CMD       ? "missing block cmd_data"
                            : k == B_WEIGHTS ? "missing block weight_data"
                            : k == B_SCRATCH ? "missing block scratch_size"
                            : k == B_INPUTS  ? "missing block inputs"
                                             : "missing block outputs",
                       kBlockNames[k], pos);
    }
  }
  tm_status st = check_scratch_io(blob, false, err);
  return st != TM_OK ? st : check_scratch_io(blob, true, err);
}

tm_status tm_ethos_u_blob_init(tm_delegate_context *ctx, const tm_delegate_info *info, tm_ethos_u_blob *blob) {
  tm_ethos_u_error err;
  const tm_status st = tm_ethos_u_blob_parse(info->blob, info->blob_size, blob, &err);
  if (st != TM_OK) {
    ctx->message = err.message;
    ctx->blob_offset = err.offset;
  }
  return st;
}

static tm_status call_fail(tm_delegate_context *ctx, const char *msg, size_t arg, uint32_t blob_pos) {
  ctx->message = msg;
  ctx->bad_argument = (uint16_t)(arg < UINT16_MAX ? arg : UINT16_MAX);
  ctx->blob_offset = blob_pos;
  return TM_ERR_INVALID_PROGRAM;
}

tm_status tm_ethos_u_check_call(const tm_ethos_u_blob *blob, const tm_delegate_call *call,
                                tm_delegate_context *ctx) {
  const size_t nio = (size_t)blob->num_inputs + blob->num_outputs;
  if (call->nargs != nio + 1u) {
    return call_fail(ctx,
                     "DelegateCall argument count is not the blob's inputs + outputs + 1 (scratch)",
                     UINT16_MAX, blob->inputs_pos);
  }
  for (size_t k = 0; k < nio; ++k) {
    const bool output = k >= blob->num_inputs;
    const uint32_t i = (uint32_t)(output ? k - blob->num_inputs : k);
    const uint32_t rec = (output ? blob->outputs_pos : blob->inputs_pos) + 4u + i * TM_ETHOS_U_IO_RECORD;
    tm_ethos_u_io io;
    tm_ethos_u_blob_io(blob, output, i, &io);
    const tm_value *v = call->args[k];
    if (v->tag != TM_VALUE_TENSOR) {
      return call_fail(ctx, output ? "delegate output argument is not a tensor" : "delegate input argument is not a tensor",
                       k, rec);
    }
    const tm_tensor *t = v->u.tensor;
    if (tm_element_size(t->scalar_type) != (size_t)io.elem_size ||
        (io.elem_size == 1 && t->scalar_type != TM_CHAR && t->scalar_type != TM_BYTE) ||
        (io.elem_size == 2 && t->scalar_type != TM_SHORT) || (io.elem_size == 4 && t->scalar_type != TM_INT)) {
      return call_fail(ctx, output ? "delegate output dtype differs from the blob's element size"
                                   : "delegate input dtype differs from the blob's element size", k, rec + 24u);
    }
    if (t->nbytes != io.nbytes) {
      return call_fail(ctx, output ? "delegate output size differs from the blob's output shape"
                                   : "delegate input size differs from the blob's input shape", k, rec);
    }
    if (output && !tm_delegate_in_arena(call, t->data, t->nbytes)) {
      return call_fail(ctx, "delegate output is not planned memory (a constant?)", k, TM_DIAG_NO_OFFSET);
    }
  }
  const tm_value *sv = call->args[nio];
  if (sv->tag != TM_VALUE_TENSOR ||
      (sv->u.tensor->scalar_type != TM_BYTE && sv->u.tensor->scalar_type != TM_CHAR)) {
    return call_fail(ctx, "delegate scratch argument (last) is not a uint8 tensor", nio, TM_DIAG_NO_OFFSET);
  }
  const tm_tensor *s = sv->u.tensor;
  if (s->nbytes < blob->scratch_size) {
    return call_fail(ctx, "delegate scratch tensor smaller than the blob's scratch_size", nio, blob->scratch_pos);
  }
  if (!tm_delegate_in_arena(call, s->data, s->nbytes)) {
    return call_fail(ctx, "delegate scratch tensor is not planned memory", nio, TM_DIAG_NO_OFFSET);
  }
  if (((uintptr_t)s->data & 15u) != 0) {
    return call_fail(ctx, "delegate scratch tensor is not 16-byte aligned", nio, TM_DIAG_NO_OFFSET);
  }
  return TM_OK;
}
