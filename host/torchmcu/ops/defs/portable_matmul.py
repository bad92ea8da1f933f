"""aten::addmm.out, aten::mm.out, aten::convolution.out: the fp32 linear layer and convolution
(firmware/kernels/portable/addmm.c, mm.c, convolution.c), and the fp32 rules of aten::linear and
aten::conv2d that emit them. Conventions: defs/portable.py."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from torchmcu.ops.core import Bound, pattern
from torchmcu.ops.defs.portable import (
    F32,
    f32,
    f32_scalar,
    f32_tensor,
    int_list,
    is_f32,
    optional,
    portable,
)
from torchmcu.ops.intmath import INT16_MAX
from torchmcu.ops.layout import disjoint
from torchmcu.pte import program as pm

MATMUL_CONTRACT = """\
- `mat1 [M,K]`, `mat2 [K,N]`, `out [M,N]`; addmm: `out = beta*self + alpha*(mat1 @ mat2)`, `self`
  of rank <= 2 broadcast to `[M,N]` (`[N]`, `[1,N]`, `[M,1]`, `[M,N]`, one value). `beta == 0`
  ignores `self` (a NaN there does not propagate), as torch.
- Each dot product summed in k order, then `alpha*acc (+ beta*self)`. Any dim orders: a linear
  weight `[N,K]` can be passed in place as `mat2` with sizes `[K,N]`, dim order `[1,0]`.
- `out` must not share memory with `mat1`/`mat2`."""

CONVOLUTION_CONTRACT = """\
- 2-D (`input [N,C,H,W]`, `weight [Cout,C/groups,KH,KW]`) or 1-D (`[N,C,L]`, `[Cout,C/groups,K]`,
  computed as H = 1). `bias` None or `[Cout]`. `stride`, `padding`, `dilation`: one item per
  spatial dim, or one for all; stride, dilation in `[1, 32767]`, padding in `[0, 32767]`.
  `transposed` false; `output_padding` all zero; `groups >= 1`, `C == groups * weight.sizes[1]`,
  `Cout % groups == 0`.
- `out [N,Cout,OH,OW]`, `OH = (H + 2ph - dh(KH-1) - 1) / sh + 1` (floor; likewise OW), both > 0.
- `out[n,co,y,x] = sum_{ci,ky,kx} input[n, g*C/groups+ci, y*sh-ph+ky*dh, x*sw-pw+kx*dw] *
  weight[co,ci,ky,kx] (+ bias[co])`, `g = co / (Cout/groups)`, zero outside the input, summed
  in (ci, ky, kx) order, bias last. Input, weight, out in any dim orders (ExecuTorch's own
  kernel takes contiguous NCHW; channels-last works here too). `out` must not alias `input`."""


def addmm(
    self: np.ndarray, mat1: np.ndarray, mat2: np.ndarray, beta: float = 1, alpha: float = 1
) -> np.ndarray:
    """beta * self + alpha * (mat1 @ mat2); self broadcasts to [M, N] (rank <= 2);
    beta == 0 ignores self."""
    f32(self), f32(mat1), f32(mat2)
    if self.ndim > 2 or mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0]:
        raise ValueError("addmm: bad shapes")
    prod = F32(alpha) * (mat1 @ mat2).astype(F32)
    if beta == 0:
        return prod.astype(F32)
    return (prod + F32(beta) * np.broadcast_to(self, prod.shape)).astype(F32)


def mm(self: np.ndarray, mat2: np.ndarray) -> np.ndarray:
    """self @ mat2 for [M, K] x [K, N]."""
    f32(self), f32(mat2)
    if self.ndim != 2 or mat2.ndim != 2 or self.shape[1] != mat2.shape[0]:
        raise ValueError("mm: bad shapes")
    return (self @ mat2).astype(F32)


def convolution(
    input: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool = False,
    output_padding: Sequence[int] = (),
    groups: int = 1,
) -> np.ndarray:
    """Direct 1-D/2-D convolution (NCHW / NCL), zero padding, grouped; not transposed."""
    f32(input), f32(weight)
    if transposed or any(output_padding):
        raise ValueError("convolution: transposed convolution is not supported")
    one_d = input.ndim == 3
    x = input[:, :, None, :] if one_d else input
    w = weight[:, :, None, :] if one_d else weight

    def pair(v: Sequence[int], fill_h: int) -> tuple[int, int]:
        v = list(v)
        return (fill_h if one_d else v[0], v[-1])

    sh, sw = pair(stride, 1)
    ph, pw = pair(padding, 0)
    dh, dw = pair(dilation, 1)
    n, c, h, wd = x.shape
    cout, cpg, kh, kw = w.shape
    if c != cpg * groups or cout % groups:
        raise ValueError("convolution: channels do not match groups")
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((n, cout, oh, ow), F32)
    opg = cout // groups
    for g in range(groups):
        xg = xp[:, g * cpg : (g + 1) * cpg]
        wg = w[g * opg : (g + 1) * opg]
        for ky in range(kh):
            for kx in range(kw):
                patch = xg[
                    :,
                    :,
                    ky * dh : ky * dh + sh * (oh - 1) + 1 : sh,
                    kx * dw : kx * dw + sw * (ow - 1) + 1 : sw,
                ]
                out[:, g * opg : (g + 1) * opg] += np.einsum(
                    "ncyx,oc->noyx", patch, wg[:, :, ky, kx]
                ).astype(F32)
    if bias is not None:
        out += f32(bias)[None, :, None, None]
    return out[:, :, 0, :] if one_d else out


def _matmul_out(b: Bound, m1: Any, m2: Any) -> None:
    """tm_f32_matmul_out_ok: out [M, N] of m1 @ m2, sharing no byte with them."""
    o = b.value("out")
    if not (
        is_f32(o, 2, 2)
        and o.sizes[0] == m1.sizes[0]  # type: ignore[union-attr]
        and o.sizes[1] == m2.sizes[1]  # type: ignore[union-attr]
        and disjoint(m1, o)  # type: ignore[arg-type]
        and disjoint(m2, o)  # type: ignore[arg-type]
    ):
        raise b.reject(
            "out",
            f"expected a float32 [{m1.sizes[0]}, {m2.sizes[1]}] tensor apart from the operands",
        )


def _mat2(b: Bound, name: str, k: int) -> Any:
    m2 = b.value(name)
    if not (is_f32(m2, 2, 2) and m2.sizes[0] == k):  # type: ignore[union-attr]
        raise b.reject(name, f"expected a float32 [{k}, N] tensor")
    return m2


def check_mm(b: Bound) -> None:
    """mm.c's TM_ARG_CHECKs, in its order."""
    m1 = f32_tensor(b, "self", 2, 2)
    m2 = _mat2(b, "mat2", m1.sizes[1])
    _matmul_out(b, m1, m2)


def check_addmm(b: Bound) -> None:
    """addmm.c's TM_ARG_CHECKs, in its order."""
    bias = f32_tensor(b, "self", 0, 2)
    m1 = f32_tensor(b, "mat1", 2, 2)
    m2 = _mat2(b, "mat2", m1.sizes[1])
    f32_scalar(b, "beta")
    f32_scalar(b, "alpha")
    _matmul_out(b, m1, m2)
    m, n = m1.sizes[0], m2.sizes[1]
    s = bias.sizes
    fits = (
        (len(s) == 2 and s[0] in (m, 1) and s[1] in (n, 1))
        or (len(s) == 1 and s[0] in (n, 1))
        or len(s) == 0
    )
    if not fits or (bias.numel == 0 and m * n != 0):
        raise b.reject("self", f"expected a tensor that broadcasts to [{m}, {n}]")


ADDMM = portable(
    "aten::addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1,"
    " Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    reference=lambda b: b.to_out(
        addmm(b.logical("self"), b.logical("mat1"), b.logical("mat2"), b.beta, b.alpha)
    ),
    check=check_addmm,
    contract=MATMUL_CONTRACT,
)
MM = portable(
    "aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)",
    reference=lambda b: b.to_out(mm(b.logical("self"), b.logical("mat2"))),
    check=check_mm,
    contract=MATMUL_CONTRACT,
)


INT32_MAX = 2**31 - 1


def _spatial(b: Bound, name: str, spatial: int, lo: int, fill_h: int) -> tuple[int, int]:
    """convolution.c's spatial_arg: 1 or `spatial` items in [lo, 32767] as (h, w); 1-D takes
    h = fill_h."""
    items = int_list(b, name, 1, spatial)
    if not all(lo <= v <= INT16_MAX for v in items):
        raise b.reject(name, f"expected items in [{lo}, {INT16_MAX}]")
    return (items[0] if spatial == 2 else fill_h), items[-1]


def _out_size(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """tm_conv_out_size."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1
    return 0 if span < 0 else span // stride + 1


def check_convolution(b: Bound) -> None:
    """convolution.c's TM_ARG_CHECKs, in its order."""
    x = f32_tensor(b, "input", 3, 4)
    rank = len(x.sizes)
    spatial = rank - 2
    batch, cin = x.sizes[0], x.sizes[1]
    ih, iw = (x.sizes[2] if rank == 4 else 1), x.sizes[-1]
    w = b.value("weight")
    if not (is_f32(w, rank, rank) and w.sizes[0] > 0 and w.sizes[1] > 0):  # type: ignore[union-attr]
        raise b.reject("weight", f"expected a float32 rank-{rank} weight [Cout, C/groups, ...]")
    cout, cpg = w.sizes[0], w.sizes[1]  # type: ignore[union-attr]
    kh, kw = (w.sizes[2] if rank == 4 else 1), w.sizes[-1]  # type: ignore[union-attr]
    if not (kh > 0 and kw > 0):
        raise b.reject("weight", "expected a kernel of at least 1x1")
    if not b.is_none("bias"):
        bias = b.value("bias")
        if not (is_f32(bias, 1, 1) and bias.sizes[0] == cout):  # type: ignore[union-attr]
            raise b.reject("bias", f"expected None or a float32 [{cout}] tensor")
    sh, sw = _spatial(b, "stride", spatial, 1, 1)
    ph, pw = _spatial(b, "padding", spatial, 0, 0)
    dh, dw = _spatial(b, "dilation", spatial, 1, 1)
    transposed = b.value("transposed")
    if not (isinstance(transposed, pm.Bool) and not transposed.value):
        raise b.reject("transposed", "expected the Bool false")
    if any(v != 0 for v in int_list(b, "output_padding", 0, spatial)):
        raise b.reject("output_padding", "expected zeros")
    groups = b.value("groups")
    if not (
        isinstance(groups, pm.Int)
        and 1 <= groups.value <= INT32_MAX
        and groups.value * cpg == cin
        and cout % groups.value == 0
    ):
        raise b.reject("groups", f"expected groups dividing {cout} with groups * {cpg} == {cin}")
    oh, ow = _out_size(ih, kh, sh, ph, dh), _out_size(iw, kw, sw, pw, dw)
    out = b.value("out")
    if not (
        is_f32(out, rank, rank)
        and oh > 0
        and ow > 0
        and out.sizes[0] == batch  # type: ignore[union-attr]
        and out.sizes[1] == cout  # type: ignore[union-attr]
        and (rank == 3 or out.sizes[2] == oh)  # type: ignore[union-attr]
        and out.sizes[-1] == ow  # type: ignore[union-attr]
        and disjoint(x, out)  # type: ignore[arg-type]
    ):
        raise b.reject("out", "expected the convolution's float32 out sizes, apart from the input")


def _convolution_reference(b: Any) -> np.ndarray:
    return b.to_out(
        convolution(
            b.logical("input"),
            b.logical("weight"),
            optional(b, "bias"),
            b.stride,
            b.padding,
            b.dilation,
            b.transposed,
            b.output_padding,
            b.groups,
        )
    )


CONVOLUTION = portable(
    "aten::convolution.out(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride,"
    " SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding,"
    " SymInt groups, *, Tensor(a!) out) -> Tensor(a!)",
    reference=_convolution_reference,
    check=check_convolution,
    contract=CONVOLUTION_CONTRACT,
)


# -- the aten side: k is the lowering Kit, node a torch.fx.Node (torch-free here)
def lower_linear(k: Any, node: Any) -> None:
    """y = x W^T + b as addmm(b, x, W^T) (mm without bias); W^T stored as a [K, N] constant.
    An input of rank > 2 ([..., K], contiguous) is seen as [rows, K], its out as [rows, N]."""
    x = k.float_input(k.aten_arg(node, "input"))
    if x.rank < 2:
        raise k.unsupported(
            node, f"a float linear of a rank-{x.rank} input (only [batch, features])"
        )
    w = k.float_constant(k.aten_arg(node, "weight"))
    wt = k.constant(np.ascontiguousarray(w.T))
    bias = k.aten_arg(node, "bias")
    flat = None  # a rank > 2 linear's out as [rows, N] (made here, not in the call's arguments)
    if x.rank > 2:
        rows = int(np.prod(x.sizes[:-1]))
        x = k.alias(x, [rows, x.sizes[-1]], nhwc=False)
        flat = k.alias(k.float_out(node), [rows, int(w.shape[0])], nhwc=False)
    if bias is None:
        k.call(MM, node, self=x.vi, mat2=wt, out=(k.float_out(node) if flat is None else flat).vi)
        return
    bv = k.float_input(bias)
    k.call(
        ADDMM,
        node,
        self=bv.vi,
        mat1=x.vi,
        mat2=wt,
        beta=k.int_(1),
        alpha=k.int_(1),
        out=(k.float_out(node) if flat is None else flat).vi,
    )


def lower_conv2d(k: Any, node: Any, dims: int = 2) -> None:
    """aten::conv2d (conv1d: dims 1) -> convolution.out (not transposed), weight and bias
    float32 constants."""
    x = k.float_input(k.aten_arg(node, "input"))
    w = k.float_input(k.aten_arg(node, "weight"))
    bias = k.aten_arg(node, "bias")
    bias_vi = k.none() if bias is None else k.float_input(bias).vi
    stride, padding, dilation = (
        list(k.aten_arg(node, name, [d] * dims))
        for name, d in (("stride", 1), ("padding", 0), ("dilation", 1))
    )
    if isinstance(k.aten_arg(node, "padding", [0] * dims), str):
        raise k.unsupported(node, "string padding of a float conv")
    groups = int(k.aten_arg(node, "groups", 1))
    k.call(
        CONVOLUTION,
        node,
        input=x.vi,
        weight=w.vi,
        bias=bias_vi,
        stride=k.int_list(stride),
        padding=k.int_list(padding),
        dilation=k.int_list(dilation),
        transposed=k.bool_(False),
        output_padding=k.int_list([0] * len(stride)),
        groups=k.int_(groups),
        out=k.float_out(node).vi,
    )


pattern("aten::linear.default", lower_float=lower_linear, emits=(ADDMM, MM))
def lower_conv1d(k: Any, node: Any) -> None:
    lower_conv2d(k, node, dims=1)


pattern("aten::conv2d.default", lower_float=lower_conv2d, emits=(CONVOLUTION,))
pattern("aten::conv1d.default", lower_float=lower_conv1d, emits=(CONVOLUTION,))
