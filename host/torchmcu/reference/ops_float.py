"""float32 reference semantics of the portable aten:: operators (docs/operators.md,
"Portable fp32 operators").

These are what our C kernels in firmware/kernels/portable/ promise, written with numpy
in float32 (math functions evaluated in float64 and rounded once, so they are at least
as accurate as the kernels' libm calls). Arrays are logical (e.g. NCHW); memory layout
is the caller's concern. Each function takes the schema's arguments in order, without
the out tensors, and returns the result(s).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

F32 = np.float32


def _f32(x: np.ndarray) -> np.ndarray:
    if x.dtype != F32:
        raise TypeError(f"expected float32, got {x.dtype}")
    return x


def _dim(dim: int, rank: int) -> int:
    r = max(rank, 1)
    if not -r <= dim < r:
        raise ValueError(f"dim {dim} out of range for rank {rank}")
    return dim % r


def addmm(self: np.ndarray, mat1: np.ndarray, mat2: np.ndarray, beta: float = 1, alpha: float = 1) -> np.ndarray:
    """beta * self + alpha * (mat1 @ mat2); self broadcasts to [M, N] (rank <= 2);
    beta == 0 ignores self."""
    _f32(self), _f32(mat1), _f32(mat2)
    if self.ndim > 2 or mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0]:
        raise ValueError("addmm: bad shapes")
    prod = F32(alpha) * (mat1 @ mat2).astype(F32)
    if beta == 0:
        return prod.astype(F32)
    return (prod + F32(beta) * np.broadcast_to(self, prod.shape)).astype(F32)


def mm(self: np.ndarray, mat2: np.ndarray) -> np.ndarray:
    """self @ mat2 for [M, K] x [K, N]."""
    _f32(self), _f32(mat2)
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
    _f32(input), _f32(weight)
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
        xg = xp[:, g * cpg:(g + 1) * cpg]
        wg = w[g * opg:(g + 1) * opg]
        for ky in range(kh):
            for kx in range(kw):
                patch = xg[:, :, ky * dh: ky * dh + sh * (oh - 1) + 1: sh, kx * dw: kx * dw + sw * (ow - 1) + 1: sw]
                out[:, g * opg:(g + 1) * opg] += np.einsum("ncyx,oc->noyx", patch, wg[:, :, ky, kx]).astype(F32)
    if bias is not None:
        out += _f32(bias)[None, :, None, None]
    return out[:, :, 0, :] if one_d else out


def add(self: np.ndarray, other: np.ndarray, alpha: float = 1) -> np.ndarray:
    """self + alpha * other with broadcasting."""
    return (_f32(self) + F32(alpha) * _f32(other)).astype(F32)


def mul(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    """self * other with broadcasting."""
    return (_f32(self) * _f32(other)).astype(F32)


def relu(self: np.ndarray) -> np.ndarray:
    """max(self, 0); NaN stays NaN."""
    x = _f32(self)
    return np.where(np.isnan(x), x, np.maximum(x, F32(0))).astype(F32)


def sigmoid(self: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-self))."""
    x = _f32(self).astype(np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(F32)


def tanh(self: np.ndarray) -> np.ndarray:
    """tanh(self)."""
    return np.tanh(_f32(self).astype(np.float64)).astype(F32)


def _softmax(self: np.ndarray, dim: int, half_to_float: bool = False) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)) along dim."""
    if half_to_float:
        raise ValueError("_softmax: half_to_float is not supported")
    x = _f32(self).astype(np.float64)
    if x.ndim == 0:
        return np.ones_like(self)
    d = _dim(dim, x.ndim)
    e = np.exp(x - x.max(axis=d, keepdims=True))
    return (e / e.sum(axis=d, keepdims=True)).astype(F32)


def mean(self: np.ndarray, dim: Sequence[int] | None = None, keepdim: bool = False, dtype: int | None = None) -> np.ndarray:
    """Mean over dims (None or [] = all dims); keepdim keeps them as size 1."""
    if dtype not in (None, 6):
        raise ValueError("mean: dtype must be None or Float (6)")
    x = _f32(self)
    dims = list(range(x.ndim)) if not dim else [_dim(d, x.ndim) for d in dim]
    if len(set(dims)) != len(dims):
        raise ValueError("mean: repeated dim")
    if x.ndim == 0:
        return x.copy()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(x.astype(np.float64).mean(axis=tuple(dims), keepdims=keepdim), F32)


def view_copy(self: np.ndarray, size: Sequence[int]) -> np.ndarray:
    """The elements in row-major order under new sizes (one -1 inferred)."""
    if list(size).count(-1) > 1 or any(s < -1 for s in size):
        raise ValueError("view_copy: bad size")
    return self.reshape(tuple(size)).copy()


def permute_copy(self: np.ndarray, dims: Sequence[int]) -> np.ndarray:
    """out.sizes[k] = self.sizes[dims[k]]."""
    perm = [_dim(d, self.ndim) for d in dims]
    if sorted(perm) != list(range(self.ndim)):
        raise ValueError("permute_copy: dims is not a permutation")
    return np.ascontiguousarray(np.transpose(self, perm))


def cat(tensors: Sequence[np.ndarray], dim: int = 0) -> np.ndarray:
    """The tensors one after another along dim; 1-D empty tensors are skipped."""
    kept = [t for t in tensors if not (t.ndim == 1 and t.size == 0)]
    if not kept:
        return np.zeros((0,), tensors[0].dtype)
    return np.concatenate(kept, axis=_dim(dim, kept[0].ndim))


def native_layer_norm(
    input: np.ndarray,
    normalized_shape: Sequence[int],
    weight: np.ndarray | None,
    bias: np.ndarray | None,
    eps: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(out, mean, rstd) over the trailing normalized_shape dims (biased variance);
    mean and rstd keep the input's rank with those dims of size 1."""
    x = _f32(input).astype(np.float64)
    k = len(normalized_shape)
    if k < 1 or tuple(x.shape[x.ndim - k:]) != tuple(normalized_shape):
        raise ValueError("native_layer_norm: normalized_shape is not the trailing sizes")
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    rstd = 1.0 / np.sqrt(var + eps)
    y = (x - mu) * rstd
    if weight is not None:
        y = y * _f32(weight).astype(np.float64)
    if bias is not None:
        y = y + _f32(bias).astype(np.float64)
    return y.astype(F32), mu.astype(F32), rstd.astype(F32)


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu(self: np.ndarray, approximate: str = "none") -> np.ndarray:
    """x/2 (1 + erf(x/sqrt 2)), or the tanh form for approximate="tanh"."""
    x = _f32(self).astype(np.float64)
    if approximate == "none":
        return (0.5 * x * (1 + _erf(x / math.sqrt(2)).astype(np.float64))).astype(F32)
    if approximate == "tanh":
        return (0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))).astype(F32)
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', not {approximate!r}")
