/*
 * A probe kernel for host checks (pte_check, the fuzz targets): stands in for any operator
 * and reads every byte each tensor and int list argument claims, so a wrong size or pointer
 * the runtime hands a kernel shows up under AddressSanitizer.
 */
#ifndef TM_HOST_PROBE_H
#define TM_HOST_PROBE_H

#include <stddef.h>

#include "torchmcu/runtime.h"

tm_status tm_probe_kernel(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);

#endif
