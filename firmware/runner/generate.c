/* Greedy generation on the device: see generate.h. */
#include "generate.h"

#include <stdbool.h>

#include "exit_codes.h"
#include "load.h"
#include "tm_cmsis/platform.h"

#ifndef TM_GEN_PAD
#define TM_GEN_PAD 0
#endif
#ifndef TM_GEN_END
#define TM_GEN_END (-1) /* none: stop at TM_GEN_MAX_NEW or a full context */
#endif
#ifndef TM_GEN_MAX_NEW
#define TM_GEN_MAX_NEW 64
#endif
#define MAX_CONTEXT 4096

/* The tokens so far: the input tensor is planned memory that the method may reuse for
 * intermediates once it has read it, so every step writes the whole window again. */
static int64_t window[MAX_CONTEXT];

static int64_t token_at(const tm_tensor *t, uint32_t i) {
  return t->scalar_type == TM_LONG ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

static void write_window(tm_tensor *t, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    if (t->scalar_type == TM_LONG) {
      ((int64_t *)t->data)[i] = window[i];
    } else {
      ((int32_t *)t->data)[i] = (int32_t)window[i];
    }
  }
}

/* The first index of the largest of the V logits of row `row`. */
static uint32_t arg_max(const tm_tensor *logits, uint32_t row, uint32_t vocab) {
  uint32_t best = 0;
  if (logits->scalar_type == TM_FLOAT) {
    const float *x = (const float *)logits->data + (size_t)row * vocab;
    for (uint32_t v = 1; v < vocab; ++v) {
      best = x[v] > x[best] ? v : best;
    }
  } else {
    const int8_t *x = (const int8_t *)logits->data + (size_t)row * vocab;
    for (uint32_t v = 1; v < vocab; ++v) {
      best = x[v] > x[best] ? v : best;
    }
  }
  return best;
}

static int refuse(const char *why) {
  tm_puts("TM_ERROR input message=generation needs ");
  tm_puts(why);
  tm_puts("\n");
  return TM_EXIT_INPUT_ERROR;
}

int tm_runner_generate(tm_method *method, uint32_t sample, tm_status *kernel_status) {
  tm_tensor *tokens = tm_method_input(method, 0);
  const tm_tensor *logits = tm_method_output(method, 0);
  if (tokens == NULL || (tokens->scalar_type != TM_LONG && tokens->scalar_type != TM_INT)) {
    return refuse("input 0 to be int64 or int32 token ids");
  }
  if (logits == NULL || (logits->scalar_type != TM_FLOAT && logits->scalar_type != TM_CHAR) ||
      logits->dim == 0) {
    return refuse("output 0 to be float32 or int8 logits");
  }
  const uint32_t context = tokens->numel;
  if (context > MAX_CONTEXT) {
    return refuse("a context of at most 4096 tokens");
  }
  const uint32_t vocab = (uint32_t)logits->sizes[logits->dim - 1];
  if (vocab == 0 || logits->numel != context * vocab) {
    return refuse("output 0 to hold one row of logits per token of input 0");
  }
  uint32_t length = 0;
  for (uint32_t i = 0; i < context; ++i) {
    window[i] = token_at(tokens, i);
    length += length == i && window[i] != TM_GEN_PAD;
  }
  if (length == 0) {
    return refuse("a prompt of at least one token before the padding");
  }
  for (uint32_t step = 0; step < TM_GEN_MAX_NEW && length < context; ++step) {
    uint32_t cycles, instructions;
    write_window(tokens, context);
    const tm_status st = tm_runner_execute(method, &cycles, &instructions);
    if (st != TM_OK) {
      *kernel_status = st;
      return TM_EXIT_KERNEL_ERROR;
    }
    const int64_t token = arg_max(logits, length - 1, vocab);
    window[length++] = token;
    tm_puts("TM_TOKEN ");
    tm_put_u32(sample);
    tm_puts(" ");
    tm_put_u32(step);
    tm_puts(" ");
    tm_put_u32((uint32_t)token);
    tm_puts(" cycles=");
    tm_put_u32(cycles);
    tm_puts(" instructions=");
    tm_put_u32(instructions);
    tm_puts("\n");
    if (token == TM_GEN_END) {
      break;
    }
  }
  return TM_EXIT_OK;
}
