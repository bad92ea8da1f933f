/*
 * The instruction-counting markers (bench_markers.h). Each must stay a real,
 * separate function: noinline keeps the calls, `used` keeps the symbol, noipa
 * stops GCC from folding the two identical bodies into one address, and the
 * memory clobber keeps stores and loads from moving across a marker.
 */
#include "bench_markers.h"

#if defined(__GNUC__) && !defined(__clang__)
#define TM_MARKER __attribute__((noinline, noipa, used))
#else
#define TM_MARKER __attribute__((noinline, used))
#endif

TM_MARKER void tm_bench_begin(void) { __asm__ volatile("" ::: "memory"); }

TM_MARKER void tm_bench_end(void) { __asm__ volatile("" ::: "memory"); }
