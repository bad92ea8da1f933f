/* Entry points of the portable (non cortex_m::) operators ExecuTorch's Cortex-M programs contain. */
#ifndef TORCHMCU_KERNELS_PORTABLE_KERNELS_H
#define TORCHMCU_KERNELS_PORTABLE_KERNELS_H

#include <stddef.h>

#include "torchmcu/types.h"

tm_status tm_portable_clone_dim_order_out(tm_kernel_context *ctx, tm_value *const *args, size_t nargs);

#endif
