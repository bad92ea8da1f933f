/* The portable (non cortex_m::) kernels' declarations: the aten:: float32 operators of ExecuTorch's
 * portable library (docs/operators.md, "Portable fp32 operators"), the integer predicates of
 * torch.cond (predicate.c) and the loop kernels of torch.map (prim.c). Their entry points are
 * generated from the operator registry into kernel_entries.h; hand-written helpers shared by
 * these kernels go here. */
#ifndef TORCHMCU_KERNELS_PORTABLE_KERNELS_H
#define TORCHMCU_KERNELS_PORTABLE_KERNELS_H

#include "kernel_entries.h"

#endif
