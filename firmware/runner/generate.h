/*
 * Greedy generation on the device (TORCHMCU_GENERATE images): the program maps token ids
 * [1, T] (int64 or int32, input 0) to logits [1, T, V] (float32 or int8, output 0). The
 * prompt is input 0 as embedded, padded after its end with TM_GEN_PAD; each step runs the
 * method, takes the arg max of the logits at the last real position (the first maximum on a
 * tie, as numpy's argmax), writes it after the prompt and prints
 *   TM_TOKEN <sample> <step> <token> cycles=<n> instructions=<n>
 * until TM_GEN_END is generated, TM_GEN_MAX_NEW tokens were, or the context is full.
 */
#ifndef TORCHMCU_RUNNER_GENERATE_H
#define TORCHMCU_RUNNER_GENERATE_H

#include <stdint.h>

#include "torchmcu/runtime.h"

/* Generates for one sample whose prompt is in the method's input 0. Returns TM_EXIT_OK,
 * TM_EXIT_INPUT_ERROR (a method of another form; printed) or TM_EXIT_KERNEL_ERROR with the
 * failing status in *kernel_status (the caller prints it). */
int tm_runner_generate(tm_method *method, uint32_t sample, tm_status *kernel_status);

#endif
