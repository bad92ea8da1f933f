/* The cortex_m kernels' declarations (one operator per .c file): their entry points and scratch-size
 * functions are generated from the operator registry into kernel_entries.h; hand-written helpers
 * shared by these kernels go here. */
#ifndef TORCHMCU_KERNELS_CORTEX_M_KERNELS_H
#define TORCHMCU_KERNELS_CORTEX_M_KERNELS_H

#include "kernel_entries.h"

#endif /* TORCHMCU_KERNELS_CORTEX_M_KERNELS_H */
