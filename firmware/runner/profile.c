/* The runner's per-operator profile (profile.h). Built only with TORCHMCU_PROFILE. */
#include "profile.h"

#include "loader.h" /* the resolved instruction layout: kind, operator index, arguments */
#include "tm_cmsis/core.h"
#include "tm_cmsis/platform.h"

#ifndef TM_PROFILE_MAX_MARKS
#define TM_PROFILE_MAX_MARKS 1024u /* kernel calls per run + 1; 8 bytes each */
#endif
/* The instruction index of the calibration marks (no instruction has it). */
#define TM_PROFILE_CALIBRATION UINT32_MAX

extern uint8_t __tm_arena_start[], __tm_arena_end[];

static uint32_t mark_pc[TM_PROFILE_MAX_MARKS];
static uint32_t mark_at[TM_PROFILE_MAX_MARKS];
static uint32_t marks;
static uint32_t overhead;
static uint8_t counter_runs;
static tm_method *profiled;

#if defined(TM_PROFILE_PMU)
#define COUNTER_NAME "pmu_cycles"
static inline uint32_t read_counter(void) { return TM_PMU->CCNTR; }
static void start_counter(void) {
  TM_SCB->DEMCR |= TM_SCB_DEMCR_TRCENA;
  TM_PMU->CNTENSET = TM_PMU_CNTEN_CYCLES;
  TM_PMU->CTRL |= TM_PMU_CTRL_ENABLE;
}
#else
#define COUNTER_NAME "dwt_cycles"
static inline uint32_t read_counter(void) { return TM_DWT->CYCCNT; }
static void start_counter(void) {
  TM_SCB->DEMCR |= TM_SCB_DEMCR_TRCENA;
  TM_DWT->CTRL |= TM_DWT_CTRL_CYCCNTENA;
}
#endif

/* The executor's hook (a strong definition over the runtime's empty weak one). A real,
 * separate call, so every mark costs the same and the QEMU plugin can tick on its address. */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((noinline, noipa, used))
#else
__attribute__((noinline, used))
#endif
void tm_profile_instruction(uint32_t instruction) {
  const uint32_t now = read_counter();
  const uint32_t n = marks;
  if (n < TM_PROFILE_MAX_MARKS) {
    mark_pc[n] = instruction;
    mark_at[n] = now;
  }
  marks = n + 1u;
}

void tm_profile_begin_run(tm_method *method) {
  start_counter();
  const uint32_t before = read_counter();
  for (volatile uint32_t spin = 0; spin < 16u; spin = spin + 1u) {
  }
  counter_runs = read_counter() != before; /* QEMU: the counter reads 0 */
  /* An empty mark pair: what one mark adds to a count. */
  marks = 0;
  tm_profile_instruction(TM_PROFILE_CALIBRATION);
  tm_profile_instruction(TM_PROFILE_CALIBRATION);
  overhead = mark_at[1] - mark_at[0];
  marks = 0;
  profiled = method;
}

/* Bytes of the union of the arena ranges of an instruction's tensor arguments. */
static uint32_t planned_arena_bytes(const tm_instruction *ins) {
  const uintptr_t arena_lo = (uintptr_t)__tm_arena_start, arena_hi = (uintptr_t)__tm_arena_end;
  uint32_t total = 0;
  uintptr_t cursor = arena_lo;
  for (;;) {
    /* The lowest start at or after the cursor of a range still reaching past it... */
    uintptr_t start = UINTPTR_MAX, end = 0;
    for (uint32_t k = 0; k < ins->nargs; ++k) {
      const tm_value *v = ins->args[k];
      if (v->tag != TM_VALUE_TENSOR || v->u.tensor->data == NULL) {
        continue;
      }
      const uintptr_t lo = (uintptr_t)v->u.tensor->data, hi = lo + v->u.tensor->nbytes;
      if (lo < arena_lo || hi > arena_hi || hi <= cursor) {
        continue; /* a constant, or already counted */
      }
      const uintptr_t from = lo > cursor ? lo : cursor;
      if (from < start) {
        start = from;
        end = hi;
      }
    }
    if (start == UINTPTR_MAX) {
      return total;
    }
    /* ...grown by every range overlapping it. */
    for (int grown = 1; grown;) {
      grown = 0;
      for (uint32_t k = 0; k < ins->nargs; ++k) {
        const tm_value *v = ins->args[k];
        if (v->tag != TM_VALUE_TENSOR || v->u.tensor->data == NULL) {
          continue;
        }
        const uintptr_t lo = (uintptr_t)v->u.tensor->data, hi = lo + v->u.tensor->nbytes;
        if (lo >= arena_lo && hi <= arena_hi && lo <= end && hi > end) {
          end = hi;
          grown = 1;
        }
      }
    }
    total += (uint32_t)(end - start);
    cursor = end;
  }
}

static void put_operator(const tm_instruction *ins) {
  const char *name = NULL, *overload = NULL;
  if (ins->kind == TM_INSTR_KERNEL &&
      tm_program_operator((tm_program *)(uintptr_t)profiled->program, NULL, (uint32_t)ins->a,
                          &name, &overload) == TM_OK) {
    tm_puts(name);
    if (overload != NULL && overload[0] != '\0') {
      tm_puts(".");
      tm_puts(overload);
    }
  } else if (ins->kind == TM_INSTR_DELEGATE &&
             tm_program_delegate((tm_program *)(uintptr_t)profiled->program, NULL, (uint32_t)ins->a,
                                 &name) == TM_OK) {
    tm_puts("delegate:");
    tm_puts(name);
  } else {
    tm_puts(ins->kind == TM_INSTR_DELEGATE ? "delegate" : "instruction");
  }
}

void tm_profile_put_run(uint32_t sample) {
  if (profiled == NULL) {
    return;
  }
  const uint32_t recorded = marks < TM_PROFILE_MAX_MARKS ? marks : TM_PROFILE_MAX_MARKS;
  tm_puts("TM_PROFILE ");
  tm_put_u32(sample);
  tm_puts(counter_runs ? " counter=" COUNTER_NAME " overhead=" : " counter=none overhead=");
  if (counter_runs) {
    tm_put_u32(overhead);
  } else {
    tm_puts("-");
  }
  tm_puts(" marks=");
  tm_put_u32(marks);
  tm_puts(" arena=");
  tm_put_hex32((uint32_t)(uintptr_t)__tm_arena_start);
  if (marks > TM_PROFILE_MAX_MARKS) {
    tm_puts(" overflow=");
    tm_put_u32(marks - TM_PROFILE_MAX_MARKS);
  }
  tm_puts("\n");
  for (uint32_t k = 0; k + 1u < recorded; ++k) {
    const uint32_t pc = mark_pc[k];
    if (pc >= profiled->num_instructions) {
      continue; /* cannot happen: the last mark (pc == count) closes the run */
    }
    const tm_instruction *ins = &profiled->instructions[pc];
    tm_puts("TM_PROF ");
    tm_put_u32(sample);
    tm_puts(" ");
    tm_put_u32(pc);
    tm_puts(" ");
    put_operator(ins);
    tm_puts(" ");
    if (counter_runs) {
      tm_put_u32(mark_at[k + 1u] - mark_at[k]);
    } else {
      tm_puts("-");
    }
    tm_puts(" ");
    tm_put_u32(planned_arena_bytes(ins));
    tm_puts("\n");
  }
  profiled = NULL;
}
