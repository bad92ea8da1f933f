/* Registry holding every kernel of the tree (development builds without a selective-build yaml). */
#include "torchmcu/types.h"

static const tm_kernel_entry kAllKernels[] = {
    {"", "", 0}, /* placeholder until kernels land */
};

const tm_kernel_registry tm_all_kernels = {kAllKernels, 0};
