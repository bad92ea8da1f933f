/*
 * Marker functions for counting executed instructions on an emulator
 * (tools/qemu_icount): the plugin counts the instructions from the first
 * instruction of tm_bench_begin up to, not including, the first instruction
 * of tm_bench_end, once per call pair. They do nothing else and cost a call
 * and a return each, so they stay in every image.
 */
#ifndef TM_RUNNER_BENCH_MARKERS_H
#define TM_RUNNER_BENCH_MARKERS_H

void tm_bench_begin(void);
void tm_bench_end(void);

#endif /* TM_RUNNER_BENCH_MARKERS_H */
