/*
 * EthosUBackend on the NPU: init verifies the blob (and that its command stream and weights,
 * used in place, are 16-byte aligned); prepare checks each DelegateCall's arguments; execute
 * copies the inputs into the scratch tensor at Vela's offsets, runs the command stream with the
 * base pointers of ExecuTorch's region convention (0 weights, 1 scratch, 2 fast scratch) and
 * copies the outputs back out.
 */
#include <string.h>

#include "torchmcu/ethos_u_delegate.h"

typedef struct {
  tm_ethos_u_blob blob;
  const void *command_stream; /* inside cmd_data (Vela's driver payload) */
  size_t command_stream_size;
} ethos_u_state;

#if !defined(TM_ETHOS_U_TIMEOUT_POLLS)
#define TM_ETHOS_U_TIMEOUT_POLLS 100000000u /* STATUS reads before a job counts as hung */
#endif

static tm_ethosu_device *g_device;
static uint8_t *g_fast_scratch;
static size_t g_fast_scratch_size;

void tm_ethos_u_delegate_bind(tm_ethosu_device *device, void *fast_scratch, size_t fast_scratch_size) {
  g_device = device;
  g_fast_scratch = fast_scratch;
  g_fast_scratch_size = fast_scratch != NULL ? fast_scratch_size : 0;
}

tm_status tm_ethos_u_delegate_init_board(uintptr_t base, uint32_t timeout_polls) {
  static tm_ethosu_device device;
  tm_status st = tm_ethosu_init(&device, tm_ethosu_mmio_io(base), timeout_polls);
  if (st == TM_OK) {
    tm_ethos_u_delegate_bind(&device, NULL, 0);
  }
  return st;
}

static tm_status fail(tm_delegate_context *ctx, tm_status st, const char *msg, uint32_t blob_pos) {
  ctx->message = msg;
  ctx->blob_offset = blob_pos;
  return st;
}

static tm_status ethos_u_init(tm_delegate_context *ctx, void *state, const tm_delegate_info *info) {
  ethos_u_state *s = state;
  tm_status st = tm_ethos_u_blob_init(ctx, info, &s->blob);
  if (st != TM_OK) {
    return st;
  }
#if defined(TM_ETHOS_U_NPU_BASE)
  /* Board build (CMake passes the board's NPU base): the first delegate brings the NPU up,
   * unless the runner bound a device of its own. */
  if (g_device == NULL && (st = tm_ethos_u_delegate_init_board(TM_ETHOS_U_NPU_BASE, TM_ETHOS_U_TIMEOUT_POLLS)) != TM_OK) {
    return fail(ctx, st, "NPU at the board's base address failed to initialise (ID, reset or protection)",
                TM_DIAG_NO_OFFSET);
  }
#endif
  if (g_device == NULL) {
    return fail(ctx, TM_ERR_INVALID_STATE, "no NPU bound (tm_ethos_u_delegate_bind) in this image",
                TM_DIAG_NO_OFFSET);
  }
  if (((uintptr_t)s->blob.cmd & 15u) != 0 || ((uintptr_t)s->blob.weights & 15u) != 0) {
    return fail(ctx, TM_ERR_INVALID_PROGRAM,
                "cmd_data or weight_data not 16-byte aligned in memory (delegate segment misaligned)",
                (uint32_t)(s->blob.cmd - info->blob));
  }
  /* cmd_data is Vela's driver payload ("COP1" + actions): find the register command stream and
   * check the bound NPU is the configuration Vela compiled for. */
  tm_ethosu_payload payload;
  memset(&payload, 0, sizeof(payload));
  const uint32_t cmd_pos = (uint32_t)(s->blob.cmd - info->blob);
  if ((st = tm_ethosu_parse_payload(s->blob.cmd, s->blob.cmd_size, &payload)) != TM_OK) {
    const size_t at = payload.error_offset < s->blob.cmd_size ? payload.error_offset : 0;
    return fail(ctx, TM_ERR_INVALID_PROGRAM, "cmd_data block: malformed Vela driver payload (COP1)",
                cmd_pos + (uint32_t)at);
  }
  if ((st = tm_ethosu_check_payload(g_device, &payload)) != TM_OK) {
    return fail(ctx, st, "cmd_data block: compiled for another NPU configuration than the bound one",
                cmd_pos);
  }
  s->command_stream = payload.command_stream;
  s->command_stream_size = payload.command_stream_size;
  /* The I/O goes through the scratch tensor: a blob placing it elsewhere is not ours. */
  for (uint32_t pass = 0; pass < 2; ++pass) {
    const bool output = pass == 1;
    const uint32_t n = output ? s->blob.num_outputs : s->blob.num_inputs;
    for (uint32_t i = 0; i < n; ++i) {
      tm_ethos_u_io io;
      tm_ethos_u_blob_io(&s->blob, output, i, &io);
      if ((uint32_t)io.region != TM_ETHOS_U_REGION_SCRATCH) {
        return fail(ctx, TM_ERR_UNSUPPORTED,
                    output ? "outputs block: output in a Vela region other than scratch (1)"
                           : "inputs block: input in a Vela region other than scratch (1)",
                    (output ? s->blob.outputs_pos : s->blob.inputs_pos) + 4u + i * TM_ETHOS_U_IO_RECORD + 32u);
      }
    }
  }
  return TM_OK;
}

static tm_status ethos_u_prepare(tm_delegate_context *ctx, void *state, const tm_delegate_call *call) {
  const ethos_u_state *s = state;
  return tm_ethos_u_check_call(&s->blob, call, ctx);
}

static tm_status ethos_u_execute(tm_delegate_context *ctx, void *state, const tm_delegate_call *call) {
  const ethos_u_state *s = state;
  const tm_ethos_u_blob *b = &s->blob;
  const uint32_t ni = b->num_inputs, no = b->num_outputs;
  tm_tensor *scratch = call->args[ni + no]->u.tensor;
  uint8_t *base = scratch->data;
  tm_ethos_u_io io;
  for (uint32_t i = 0; i < ni; ++i) {
    tm_ethos_u_blob_io(b, false, i, &io);
    const tm_tensor *t = call->args[i]->u.tensor;
    if (io.nbytes != 0 && t->data != base + io.offset) {
      memmove(base + io.offset, t->data, io.nbytes);
    }
  }
  tm_ethosu_job job;
  memset(&job, 0, sizeof(job));
  job.command_stream = s->command_stream;
  job.command_stream_size = s->command_stream_size;
  job.base_addresses[TM_ETHOS_U_REGION_WEIGHTS] = (uint64_t)(uintptr_t)b->weights;
  job.base_address_sizes[TM_ETHOS_U_REGION_WEIGHTS] = b->weights_size;
  job.base_addresses[TM_ETHOS_U_REGION_SCRATCH] = (uint64_t)(uintptr_t)base;
  job.base_address_sizes[TM_ETHOS_U_REGION_SCRATCH] = scratch->nbytes;
  job.base_addresses[TM_ETHOS_U_REGION_FAST_SCRATCH] = (uint64_t)(uintptr_t)g_fast_scratch;
  job.base_address_sizes[TM_ETHOS_U_REGION_FAST_SCRATCH] = g_fast_scratch_size;
  job.num_base_addresses = 3;
  tm_status st = tm_ethosu_run(g_device, &job);
  if (st != TM_OK) {
    return fail(ctx, st, st == TM_ERR_TIMEOUT ? "NPU did not finish (timeout)" : "NPU reported an error",
                TM_DIAG_NO_OFFSET);
  }
  for (uint32_t i = 0; i < no; ++i) {
    tm_ethos_u_blob_io(b, true, i, &io);
    tm_tensor *t = call->args[ni + i]->u.tensor;
    if (io.nbytes != 0 && t->data != base + io.offset) {
      memmove(t->data, base + io.offset, io.nbytes);
    }
  }
  return TM_OK;
}

const tm_backend tm_ethos_u_backend = {"EthosUBackend", sizeof(ethos_u_state), ethos_u_init, ethos_u_prepare,
                                       ethos_u_execute};
