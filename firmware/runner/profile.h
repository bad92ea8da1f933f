/*
 * Per-operator profile of the runner (images built with TORCHMCU_PROFILE, `torchmcu build
 * --profile`). The executor calls tm_profile_instruction(pc) before each kernel instruction
 * and once after the last (firmware/runtime/src/method.c); this module defines that hook: it
 * stores the instruction index and a cycle counter reading (the PMU cycle counter with
 * TORCHMCU_PMU, else the DWT's CYCCNT) per mark, and prints one record per instruction after
 * the run (one per kernel or delegate call). Before each run it measures its own cost: the counter between two marks with
 * nothing in between. Where the counter does not advance (QEMU) counts print as "-": the
 * host takes them from the instruction-count plugin, which sees the same marks
 * (torchmcu.device.icount.profile_run). Output, after the run's TM_RUN line:
 *
 *   TM_PROFILE <sample> counter=<pmu_cycles|dwt_cycles|none> overhead=<n|-> marks=<n>
 *              arena=<arena start, hex>
 *   TM_PROF <sample> <instruction index> <operator.overload> <count|-> <planned arena bytes>
 *
 * (a DelegateCall, marked too, prints as "delegate:<backend id>", e.g. delegate:EthosUBackend).
 *
 * `overhead` is one mark's cost in the counter's unit; each count holds one mark. The planned
 * arena bytes are the union of the arena byte ranges of the instruction's tensor arguments.
 * Without TORCHMCU_PROFILE both calls are empty and nothing is printed.
 */
#ifndef TORCHMCU_RUNNER_PROFILE_H
#define TORCHMCU_RUNNER_PROFILE_H

#include <stdint.h>

#include "torchmcu/runtime.h"

#if defined(TORCHMCU_PROFILE)
/* Before a run of `method` (and before the run's counters start): calibrate, clear marks. */
void tm_profile_begin_run(tm_method *method);
/* After the run's TM_RUN line: the TM_PROFILE header and one TM_PROF line per instruction. */
void tm_profile_put_run(uint32_t sample);
#else
static inline void tm_profile_begin_run(tm_method *method) { (void)method; }
static inline void tm_profile_put_run(uint32_t sample) { (void)sample; }
#endif

#endif /* TORCHMCU_RUNNER_PROFILE_H */
