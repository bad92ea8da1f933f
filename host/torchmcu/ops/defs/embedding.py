"""torchmcu::quantized_embedding: an int8 row gather (nn.Embedding, F.embedding).

Defined here once: the argument check (the rules firmware/kernels/cortex_m/
quantized_embedding.c enforces, naming the same argument), the reference, the contract, and
the aten side: the quantizer makes the table int8 symmetric per row (a tied LM head's linear
reads the same rows as its output channels, so one int8 copy serves both) and observes the
output; the rule turns each row's scale into a requantization to the output scale (it gets
the lowering Kit as `k`).

Per index i (any rank) with v = indices[i], for every column d:
    out[i, d] = clamp(requantize(weight[v, d], multipliers[v], shifts[v]) + output_zero_point)
with (multipliers[v], shifts[v]) for weight_scale[v] / out_scale. Every index is checked to
lie in [0, V) before anything is written: an index out of range fails the call, naming
`indices`. The indices are int64 (a program input of token ids) or int32 (constant indices,
e.g. positions from torch.arange, which the exporter stores narrower).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, op, pattern
from torchmcu.ops.defs.conv import per_channel
from torchmcu.ops.defs.linear import contiguous
from torchmcu.ops.intmath import (
    INT8_MAX,
    INT8_MIN,
    requantize,
)
from torchmcu.ops.layout import disjoint
from torchmcu.pte import program as pm

INDEX_TYPES = (pm.ScalarType.LONG, pm.ScalarType.INT)
MAX_INDEX_RANK = 5  # out has one dim more: the runtime's 6
INDEX_INT32_MAX = 2**31 - 1

CONTRACT = """\
- int8 row gather: for each index `v = indices[i]` (in memory order) and column `d`,
  `out[i, d] = clamp(requantize(weight[v, d], multipliers[v], shifts[v]) + output_zero_point,
  -128, 127)`.
- `weight` int8 `[V, D]` contiguous, symmetric (zero point 0) with one scale per row;
  `indices` int64 or int32, rank 1..5, contiguous, every value in `[0, V)`: the kernel checks
  them all before it writes anything, and an index out of range fails the call naming
  `indices`; `multipliers` and `shifts` int32 with V elements (shifts in [-31, 31]) for
  `weight_scale[v] / out_scale`; `output_zero_point` in [-128, 127]; `out` int8
  `indices.sizes + [D]`, contiguous, sharing no byte with `indices` or `weight`.
- torchmcu emits it for `aten::embedding` (nn.Embedding, F.embedding; `padding_idx`,
  `scale_grad_by_freq` and `sparse` only matter in training): the table is quantized per row
  (per tensor with `per_channel=False`), symmetric in [-127, 127]; a linear reading the same
  parameter (a tied LM head) gets the same quantization, so the .pte holds the int8 table
  once. Token ids are an int64 (or int32) program input, passed as they are; constant indices
  (positions from `torch.arange`) are stored as int32.
- Helium: four columns per step (a predicated tail), one requantization of the row's pair."""


def check(b: Bound) -> None:
    """quantized_embedding.c's TM_ARG_CHECKs, in its order, on a bound call."""
    w = b.value("weight")
    if not (contiguous(w, pm.ScalarType.CHAR, 2, 2) and min(w.sizes) > 0):
        raise b.reject("weight", "expected a contiguous int8 [V, D] tensor, V and D >= 1")
    rows, cols = int(w.sizes[0]), int(w.sizes[1])
    idx = b.value("indices")
    if not (
        isinstance(idx, pm.Tensor)
        and idx.scalar_type in INDEX_TYPES
        and contiguous(idx, idx.scalar_type, 1, MAX_INDEX_RANK)
    ):
        raise b.reject(
            "indices", f"expected a contiguous int64 or int32 tensor of rank 1..{MAX_INDEX_RANK}"
        )
    per_channel(b, "multipliers", rows)
    per_channel(b, "shifts", rows, -31, 31)
    b.int_in("output_zero_point", INT8_MIN, INT8_MAX)
    out = b.value("out")
    if not (
        contiguous(out, pm.ScalarType.CHAR, 2, MAX_INDEX_RANK + 1)
        and list(out.sizes) == [*idx.sizes, cols]
        and disjoint(idx, out)
        and disjoint(w, out)  # type: ignore[arg-type]
    ):
        raise b.reject("out", f"expected a contiguous int8 tensor of sizes {[*idx.sizes, cols]}")
    data = b.data("indices")
    if data is not None:
        values = np.asarray(data).reshape(-1)
        bad = np.flatnonzero((values < 0) | (values >= rows))
        if bad.size:
            raise b.reject(
                "indices",
                f"index {int(values[bad[0]])} at position {int(bad[0])} is outside [0, {rows})",
            )


def quantized_embedding(
    weight: np.ndarray,
    indices: np.ndarray,
    multipliers: np.ndarray,
    shifts: np.ndarray,
    output_zero_point: int,
) -> np.ndarray:
    """The contract: int8 weight [V, D], integer indices of any shape -> int8 indices.shape + [D]."""
    w = np.asarray(weight, np.int64)
    rows = w.shape[0]
    idx = np.asarray(indices, np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= rows):
        raise ValueError(f"indices outside [0, {rows})")
    m = np.asarray(multipliers, np.int64).reshape(rows)[idx][..., None]
    s = np.asarray(shifts, np.int64).reshape(rows)[idx][..., None]
    y = requantize(w[idx], m, s) + output_zero_point
    return np.clip(y, INT8_MIN, INT8_MAX).astype(np.int8)


def reference(b: Any) -> np.ndarray:
    """(b: the interpreter's Bound) -> the physical out (contiguous)."""
    return quantized_embedding(
        b.physical("weight"),
        b.physical("indices"),
        b.physical("multipliers"),
        b.physical("shifts"),
        b.output_zero_point,
    )


QUANTIZED_EMBEDDING = op(
    "torchmcu::quantized_embedding.out(Tensor weight, Tensor indices, Tensor multipliers,"
    " Tensor shifts, int output_zero_point, *, Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    reference=reference,
    check=check,
    no_npu="TOSA GATHER runs on the Ethos-U85 only and is not lowered yet; it stays on the Cortex-M",
    contract=CONTRACT,
)


def lower_embedding(k: Any, node: Any) -> None:
    """aten.embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse): the int8
    table with one scale per row, the indices a program input (int64) or a constant (int32)."""
    w_node = k.aten_arg(node, "weight")
    idx_node = k.aten_arg(node, "indices")
    if not k.is_node(w_node) or not k.is_node(idx_node):
        raise k.unsupported(node, "embedding of a non-tensor weight or indices")
    out_shape = k.shape_of(node)
    w, w_scales = k.weights(node, w_node, None)
    if w.ndim != 2:
        raise k.unsupported(node, f"a rank-{w.ndim} embedding table (rank 2 only)")
    rows = int(w.shape[0])
    if not 1 <= len(out_shape) - 1 <= MAX_INDEX_RANK:
        raise k.unsupported(node, f"rank-{len(out_shape) - 1} indices (rank 1..{MAX_INDEX_RANK})")
    indices = k.index_value(node, idx_node, rows)
    qs, act, qp = k.output_quant(node, allow_activation=False)
    mults, shifts = k.per_channel_requant(1.0, w_scales, qp.scale)  # row v: s_v / s_out
    out = k.new_int8(node.name, out_shape, qp, nhwc=False)
    k.call(
        QUANTIZED_EMBEDDING,
        node,
        weight=k.constant(np.ascontiguousarray(w)),
        indices=indices,
        multipliers=k.constant(np.array(mults, np.int32)),
        shifts=k.constant(np.array(shifts, np.int32)),
        output_zero_point=k.int_(qp.zero_point),
        out=out.vi,
    )
    k.bind_output(qs, act, out)


# The table (args[0]) per row, symmetric; the indices are not quantized; the output observed.
pattern(
    "aten::embedding.default",
    annotate=Annotate("embedding"),
    lower=lower_embedding,
    emits=(QUANTIZED_EMBEDDING,),
)
