"""cortex_m::quantized_transpose_conv2d and its _nhwc alias: int8 transposed 2-D convolution
of NHWC activations (ExecuTorch's name and argument list), and the aten rule that emits it
(aten::conv_transpose2d.input, groups 1).

Weights are OHWI [Cout, KH, KW, Cin] (torch's [Cin, Cout, KH, KW] permuted (1, 2, 3, 0), as
ExecuTorch does). Input row iy feeds output rows oy = iy*stride - padding + ky*dilation; the
output has OH = (H - 1)*stride - 2*padding + dilation*(KH - 1) + output_padding + 1 rows.
`scratch` holds the Helium path's per-tap offset terms and four interleaved input columns
(read when the kernel tiles the output: kernel == stride, no padding); `output_scratch` is
ExecuTorch's second buffer (CMSIS-NN's), which our kernel does not read: the exporter passes
the scratch value for both. On the NPU it is TOSA TRANSPOSE_CONV2D (dilation 1) and the requantizing
RESCALE; TOSA's out_pad is [-pad_h, output_padding_h - pad_h, -pad_w, output_padding_w - pad_w].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from torchmcu.ops.core import Annotate, Bound, Npu, nhwc_variant, op, pattern
from torchmcu.ops.defs.conv import (
    INT16_MAX,
    _activation,
    _finish,
    _nhwc_sizes,
    _operands,
    _quant,
    _requantized,
    _round_up,
    _weight,
    conv_quantization,
)
from torchmcu.ops.defs.linear import bias_of, int32_vector
from torchmcu.ops.layout import activation_dims, is_scratch
from torchmcu.ops.npu_limits import stride_reason
from torchmcu.pte import program as pm

if TYPE_CHECKING:
    from collections.abc import Callable

TRANSPOSE_CONV_CONTRACT = """\
- `input` int8 4-D activation (legacy `[N,Cin,H,W]`/NHWC bytes or `_nhwc` `[N,H,W,Cin]`);
  `weight` int8 `[Cout, KH, KW, Cin]` (torch's `[Cin, Cout, KH, KW]` permuted (1, 2, 3, 0));
  groups 1. `bias` None or int32 `[Cout]`; `requantize_multipliers`, `requantize_shifts` as
  conv2d's.
- `stride`, `padding`, `output_padding`, `dilation`: lists `[h, w]`; stride, dilation >= 1;
  padding >= 0; 0 <= output_padding < stride or < dilation (torch's rule).
- `out` sizes `[N, Cout, OH, OW]`, `OH = (H - 1)*stride_h - 2*pad_h + dil_h*(KH - 1) +
  output_padding_h + 1` (same for W), >= 1.
- `acc[n,oh,ow,oc] = bias[oc] + sum over ih, iw, kh, kw, c with oh = ih*stride_h - pad_h +
  kh*dil_h and ow = iw*stride_w - pad_w + kw*dil_w of (x[n,ih,iw,c] + input_offset) *
  w[oc,kh,kw,c]`; `out` as conv2d's.
- `scratch`, `output_scratch`: 1-D byte tensors; any size is accepted (the Helium path wants
  `tm_quantized_transpose_conv2d_scratch_bytes` in `scratch` and otherwise runs the scalar
  path); `output_scratch` is not read."""


def transpose_conv_output_size(
    size: int, kernel: int, stride: int, pad: int, out_pad: int, dilation: int
) -> int:
    return (size - 1) * stride - 2 * pad + dilation * (kernel - 1) + out_pad + 1


def quantized_transpose_conv2d(
    input: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, stride: Sequence[int],
    padding: Sequence[int], output_padding: Sequence[int], dilation: Sequence[int],
    input_offset: int, output_offset: int, requantize_multipliers: np.ndarray,
    requantize_shifts: np.ndarray, activation_min: int, activation_max: int,
    scratch: np.ndarray | None = None, output_scratch: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """NHWC input, OHWI weight -> NHWC int8: every input pixel's tap products scattered into
    the uncropped output, then the padding cropped off."""
    del scratch, output_scratch
    x = np.asarray(input, dtype=np.int64) + int(input_offset)
    w = np.asarray(weight, dtype=np.int64)
    n, h, wd, cin = x.shape
    cout, kh, kw, cin_w = w.shape
    if cin_w != cin:
        raise ValueError(f"weight Cin {cin_w} != input channels {cin} (groups 1 only)")
    (sh, sw), (ph, pw), (oph, opw), (dh, dw) = (
        (int(v[0]), int(v[1])) for v in (stride, padding, output_padding, dilation)
    )
    oh = transpose_conv_output_size(h, kh, sh, ph, oph, dh)
    ow = transpose_conv_output_size(wd, kw, sw, pw, opw, dw)
    if oh < 1 or ow < 1:
        raise ValueError("empty transposed convolution output")
    full = np.zeros(
        (
            n,
            ph + oh + (h - 1) * sh + dh * (kh - 1) + 1,
            pw + ow + (wd - 1) * sw + dw * (kw - 1) + 1,
            cout,
        ),
        np.int64,
    )
    for ky in range(kh):
        for kx in range(kw):
            contrib = x @ w[:, ky, kx, :].T  # (N, H, W, Cout)
            full[
                :,
                ky * dh : ky * dh + (h - 1) * sh + 1 : sh,
                kx * dw : kx * dw + (wd - 1) * sw + 1 : sw,
            ] += contrib
    acc = full[:, ph : ph + oh, pw : pw + ow]
    quant = (
        requantize_multipliers,
        requantize_shifts,
        output_offset,
        activation_min,
        activation_max,
    )
    return _finish(acc, bias, *quant)


def quantized_transpose_conv2d_scratch_bytes(
    input_nhwc: tuple[int, int, int, int], weight_ohwi: tuple[int, int, int, int]
) -> int:
    """16 bytes alignment slack, an int32 offset term per kernel tap and output channel, four
    interleaved input columns of Cin bytes rounded up to 16."""
    del input_nhwc
    cout, kh, kw, cin = weight_ohwi
    return 16 + 4 * kh * kw * _round_up(cout, 4) + 4 * _round_up(cin, 16)


def _windows(b: Bound) -> tuple[tuple[int, int], ...]:
    return (
        b.pair_in("stride", 1, INT16_MAX),
        b.pair_in("padding", 0, INT16_MAX),
        b.pair_or_none("output_padding", 0, INT16_MAX),  # type: ignore[return-value]
        b.pair_in("dilation", 1, INT16_MAX),
    )


def check_transpose_conv(b: Bound) -> None:
    """quantized_transpose_conv2d.c's checks, in its order, on a bound call."""
    dims = _activation(b, "input")
    cout, kh, kw, cin = _weight(b)
    if not (cout > 0 and kh > 0 and kw > 0 and cin == dims[3]):
        raise b.reject("weight", f"expected [Cout, KH, KW, {dims[3]}] (groups 1)")
    if not int32_vector(b, "bias", cout):
        raise b.reject("bias", f"expected None or an int32 tensor of {cout} items")
    stride, padding, out_pad, dilation = _windows(b)
    if out_pad is None or not all(o < s or o < d for o, s, d in zip(out_pad, stride, dilation)):
        raise b.reject("output_padding", "expected 2 ints >= 0, each below the stride or dilation")
    _quant(b, cout)
    for name in ("scratch", "output_scratch"):
        if not is_scratch(b.value(name), 0):
            raise b.reject(name, "expected a 1-D byte tensor")
    n, h, w, _ = dims
    want = (
        n,
        transpose_conv_output_size(h, kh, stride[0], padding[0], out_pad[0], dilation[0]),
        transpose_conv_output_size(w, kw, stride[1], padding[1], out_pad[1], dilation[1]),
        cout,
    )
    t = b.value("out")
    got = activation_dims(t, _nhwc_sizes(b)) if isinstance(t, pm.Tensor) else None
    if got != want or min(want[1:3]) < 1:
        raise b.reject("out", f"expected a 4-D int8 activation of N,OH,OW,C {list(want)}")


def reference_transpose_conv(b: Any) -> np.ndarray:
    return quantized_transpose_conv2d(output_padding=b.output_padding, **_operands(b))


def macs_transpose_conv(b: Bound) -> int:
    """One multiply-accumulate per input element, output channel and kernel tap."""
    cout, kh, kw, _ = b.tensor("weight").sizes
    return b.tensor("input").numel * cout * kh * kw


def lower_tosa_transpose_conv(g: Any, a: Any, read: Callable[[int], Any]) -> Any:
    a.checked()
    if list(a.dilation) != [1, 1]:
        raise a.error("a dilated transposed convolution has no TOSA form")
    n, h, w, c = a.nhwc_shape("input")
    x = g.reshape(read(a.index("input")), (n, h, w, c))
    weight = a.constant("weight")  # OHWI, TOSA's order
    cout = weight.shape[0]
    (ph, pw), (oph, opw) = a.padding, a.output_padding
    _, oh, ow, _ = a.nhwc_shape("out")
    acc = g.transpose_conv(
        x, weight, bias_of(a, "bias", cout), -int(a.input_offset), (n, oh, ow, cout),
        [-ph, oph - ph, -pw, opw - pw], list(a.stride),
    )  # fmt: skip
    return _requantized(g, a, acc)


def npu_support_transpose_conv(b: Bound, family: str) -> str | None:
    """TOSA's out_pad must exceed -KH (-KW): padding below the kernel size; no dilation."""
    if tuple(b.dilation) != (1, 1):
        return "dilated transposed convolution is not lowered to the NPU"
    _, kh, kw, _ = b.tensor("weight").sizes
    (ph, pw), (oph, opw) = b.padding, b.output_padding
    if min(-ph, oph - ph) <= -kh or min(-pw, opw - pw) <= -kw:
        return "transposed convolution padding of the kernel size or more"
    _, oh, ow, _ = activation_dims(b.tensor("out"), _nhwc_sizes(b))  # type: ignore[misc]
    return stride_reason("transposed convolution", family, b.stride, (oh, ow))


_SCRATCH = "tm_quantized_transpose_conv2d_scratch_bytes"

QUANTIZED_TRANSPOSE_CONV2D = op(
    "cortex_m::quantized_transpose_conv2d.out(Tensor input, Tensor weight, Tensor? bias,"
    " int[] stride, int[] padding, int[] output_padding, int[] dilation, int input_offset,"
    " int output_offset, Tensor requantize_multipliers, Tensor requantize_shifts,"
    " int activation_min, int activation_max, Tensor scratch, Tensor output_scratch, *,"
    " Tensor(a!) out) -> Tensor(a!)",
    family="int8",
    scratch_c=_SCRATCH,
    prepare=True,
    reference=reference_transpose_conv,
    check=check_transpose_conv,
    scratch_bytes=quantized_transpose_conv2d_scratch_bytes,
    macs=macs_transpose_conv,
    npu=Npu(
        lower=lower_tosa_transpose_conv,
        support=npu_support_transpose_conv,
        doc="TOSA TRANSPOSE_CONV2D and RESCALE (dilation 1)",
    ),
    contract=TRANSPOSE_CONV_CONTRACT,
)

QUANTIZED_TRANSPOSE_CONV2D_NHWC = nhwc_variant(QUANTIZED_TRANSPOSE_CONV2D)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def lower_conv_transpose2d(k: Any, node: Any) -> None:
    """aten::conv_transpose2d.input (groups 1): NHWC activations, per-tensor weights (torch's
    weight has its output channels on axis 1), per-channel requantization arrays."""
    x = k.as_nhwc(k.input_value(k.aten_arg(node, "input")))
    if int(k.aten_arg(node, "groups", 1)) != 1:
        raise k.unsupported(node, "a grouped transposed convolution")
    window = [
        k.pair(k.aten_arg(node, name, [d, d]), (d, d))
        for name, d in (("stride", 1), ("padding", 0), ("output_padding", 0), ("dilation", 1))
    ]
    out_shape = k.shape_of(node)
    if len(out_shape) != 4:
        raise k.unsupported(node, "only 2-D transposed convolution on 4-D inputs")
    w, bias, qs, act, out, quant_values = conv_quantization(k, node, x, out_shape)
    w_packed = np.ascontiguousarray(w.transpose(1, 2, 3, 0))  # OHWI
    scratch = k.kernel_scratch(node.name, QUANTIZED_TRANSPOSE_CONV2D, x, tuple(w_packed.shape))
    stride, padding, output_padding, dilation = window
    k.call(
        QUANTIZED_TRANSPOSE_CONV2D,
        node,
        input=x.vi,
        weight=k.constant(w_packed),
        bias=k.constant(bias),
        stride=k.int_list(stride),
        padding=k.int_list(padding),
        output_padding=k.int_list(output_padding),
        dilation=k.int_list(dilation),
        **quant_values(),
        scratch=scratch,
        output_scratch=scratch,
        out=out.vi,
    )
    k.bind_output(qs, act, out)


pattern(
    "aten::conv_transpose2d.input",
    annotate=Annotate("weighted", {"kind": "conv2d", "per_channel": False}),
    lower=lower_conv_transpose2d,
    emits=(QUANTIZED_TRANSPOSE_CONV2D,),
)
