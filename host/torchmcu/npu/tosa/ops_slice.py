"""torchmcu::slice_copy (the LSTM's time-step and gate slices) as TOSA SLICE. Our slice
copies contiguous tensors, so the TOSA tensor (the physical shape) is the logical one; a
step above 1 has no TOSA SLICE equivalent and stays on the CPU (support.py)."""

from __future__ import annotations

from collections.abc import Callable

from torchmcu.npu.tosa.graph import Args, Graph, Tensor, physical_shape

Read = Callable[[int], Tensor]


def slice_copy(g: Graph, a: Args, read: Read) -> Tensor:
    t, out = a.tensor(0), a.tensor(len(a.args) - 2)
    rank = len(t.sizes)
    if list(t.dim_order) != list(range(rank)) or list(out.dim_order) != list(range(rank)):
        raise a.error("slice_copy of a tensor that is not contiguous")
    dim, start, end, step = (int(a.scalar(i)) for i in range(1, 5))
    if step != 1:
        raise a.error(f"slice step {step} (TOSA SLICE takes step 1)")
    if not (0 <= dim < rank and 0 <= start <= end <= t.sizes[dim]):
        raise a.error(f"slice dim {dim} [{start}, {end}) out of range for sizes {t.sizes}")
    begin = [0] * rank
    begin[dim] = start
    size = list(t.sizes)
    size[dim] = end - start
    if tuple(size) != physical_shape(out):
        raise a.error(f"sliced shape {size} does not fit the out tensor {list(out.sizes)}")
    return g.slice(read(0), begin, size)
