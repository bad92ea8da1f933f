"""cortex_m::maximum / minimum: int8 elementwise max and min with the binary broadcast.

ExecuTorch's operators (no quantization arguments): the quantizer gives both operands and the
output one set of qparams (the second operand is requantized to the first's where they
differ), so the integer max/min of the bytes is the float op's result exactly. The broadcast
rule is quantized_add's (equal layouts, a single element, a [1,C,1,1] channel vector of an
NHWC out, or the general broadcast: ops/layout.py's binary_broadcast). Defined here once: the check (the C kernels'
TM_ARG_CHECKs, firmware/kernels/cortex_m/minmax.c), the references, the TOSA lowerings, the
contracts and the aten rules of aten::maximum / minimum.

On the NPU: TOSA MAXIMUM / MINIMUM take int32 only, so each is RESCALE (exact, int8 ->
int32), MAXIMUM, RESCALE back. Vela 5.2's TOSA front end (Ethos-U55/U65) has neither, so
they stay on the CPU there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, Kernel, Npu, op, pattern
from torchmcu.ops.defs.elementwise import (
    binary_operands,
    centred_operand,
    operands_tensor,
    physical_operands,
    tensor_operand,
    tosa_operand,
)

if TYPE_CHECKING:
    from collections.abc import Callable

CONTRACT = """\
- `out = {fn}(self, other)` on the int8 values; `self`, `other` and `out` share one scale and
  zero point (the quantizer's, so no requantization). Shapes: the *Broadcast* rule of
  quantized_add (equal layouts, a single-element operand, a `[1,C,1,1]` channel vector of an
  NHWC out, or the general broadcast of operands of out's rank).
- Helium: 16 lanes per step (`VMAX.S8` / `VMIN.S8`), one predicated tail."""


def _int8(x: np.ndarray, name: str) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype != np.int8:
        raise ValueError(f"{name} must be int8, got {x.dtype}")
    return x


def maximum(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Elementwise max of two int8 arrays (numpy broadcasting), one shared qparams."""
    return np.maximum(_int8(self, "self"), _int8(other, "other"))


def minimum(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Elementwise min of two int8 arrays (numpy broadcasting), one shared qparams."""
    return np.minimum(_int8(self, "self"), _int8(other, "other"))


def check(b: Bound) -> None:
    """minmax.c's checks, in its order: self, other (int8 tensors), then out and the broadcast."""
    x = tensor_operand(b, "self")
    y = tensor_operand(b, "other")
    operands_tensor(b, x, y)


def _reference(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[Any], np.ndarray]:
    def reference(b: Any) -> np.ndarray:
        """(b: the interpreter's Bound) -> the physical out (flat)."""
        x, y = physical_operands(b)
        return fn(x, y).astype(np.int8).reshape(-1)

    return reference


def npu_support(b: Bound, family: str) -> str | None:
    if family in ("u55", "u65"):
        return "Vela 5.2's TOSA front end for Ethos-U55/U65 has no MAXIMUM/MINIMUM"
    return None


def _lower_tosa(kind: str) -> Callable[[Any, Any, Any], Any]:
    def lower(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
        """Both operands widened to int32 exactly (the zero point does not matter to a max),
        the int32 op, and back to int8 (exact: the result is one of the int8 operands)."""
        a.checked()
        out_shape = a.physical_shape("out")
        x, y = (
            centred_operand(g, tosa_operand(g, a, read, n, out_shape), 0, 0)
            for n in ("self", "other")
        )
        return g.rescale(g.minmax(kind, x, y), "INT8", [1 << 30], [30])

    return lower


def _definition(name: str, fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Any:
    return op(
        f"cortex_m::{name}.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
        family="int8",
        kernel=Kernel(f"tm_cortex_m_{name}_out", "cortex_m/minmax.c"),
        reference=_reference(fn),
        check=check,
        npu=Npu(
            lower=_lower_tosa(name.upper()),
            support=npu_support,
            doc=f"TOSA RESCALE, {name.upper()} (int32), RESCALE (Ethos-U85 only)",
        ),
        contract=CONTRACT.format(fn=name[:3]),
    )


MAXIMUM = _definition("maximum", maximum)
MINIMUM = _definition("minimum", minimum)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def _lower(definition: Any) -> Callable[[Any, Any], None]:
    def lower(k: Any, node: Any) -> None:
        a, c, out_shape, nhwc = binary_operands(k, node)
        qs, act, qp = k.output_quant(node, allow_activation=False)
        for v in (a, c):
            if not k.same_qparams(v.scale, v.zero_point, qp):
                raise k.unsupported(
                    node,
                    "operands quantized unlike the output (the quantizer "
                    "shares one scale and zero point)",
                )
        out = k.new_int8(node.name, out_shape, qp, nhwc=nhwc)
        k.call(definition, node, self=a.vi, other=c.vi, out=out.vi)
        k.bind_output(qs, act, out)

    return lower


pattern(
    "aten::maximum.default",
    annotate=Annotate("binary", {"kind": "maximum"}),
    lower=_lower(MAXIMUM),
    emits=(MAXIMUM,),
)
pattern(
    "aten::minimum.default",
    annotate=Annotate("binary", {"kind": "minimum"}),
    lower=_lower(MINIMUM),
    emits=(MINIMUM,),
)
