"""ExecuTorch's portable fp32 operators the float regions run (kernels/portable/functions.yaml;
schemas from ATen), and dim_order_ops::_clone_dim_order, which its Cortex-M flow inserts."""

from __future__ import annotations

from torchmcu.ops.core import Kernel, op


def _portable(schema: str, symbol: str, source: str, table_index: int, **fields: object) -> None:
    kernel = Kernel(symbol, f"portable/{source}", table_index=table_index)
    op(schema, family="portable", kernel=kernel, **fields)


_portable(
    "dim_order_ops::_clone_dim_order.out(Tensor self, *, bool non_blocking=False,"
    " int[]? dim_order=None, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_clone_dim_order_out",
    "clone_dim_order.c",
    18,
)
_portable(
    "aten::addmm.out(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1,"
    " Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_addmm_out",
    "addmm.c",
    19,
)
_portable(
    "aten::mm.out(Tensor self, Tensor mat2, *, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_mm_out",
    "mm.c",
    20,
)
_portable(
    "aten::convolution.out(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride,"
    " SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding,"
    " SymInt groups, *, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_convolution_out",
    "convolution.c",
    21,
)
_portable(
    "aten::add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_add_out",
    "add.c",
    22,
)
_portable(
    "aten::mul.out(Tensor self, Tensor other, *, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_mul_out",
    "mul.c",
    23,
)
_portable(
    "aten::relu.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_relu_out",
    "relu.c",
    24,
)
_portable(
    "aten::sigmoid.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_sigmoid_out",
    "sigmoid.c",
    25,
)
_portable(
    "aten::tanh.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_tanh_out",
    "tanh.c",
    26,
)
_portable(
    "aten::_softmax.out(Tensor self, int dim, bool half_to_float, *, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_softmax_out",
    "softmax.c",
    27,
)
_portable(
    "aten::mean.out(Tensor self, int[1]? dim, bool keepdim=False, *,"
    " ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_mean_out",
    "mean.c",
    28,
)
_portable(
    "aten::view_copy.out(Tensor self, SymInt[] size, *, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_view_copy_out",
    "view_copy.c",
    29,
)
_portable(
    "aten::permute_copy.out(Tensor self, int[] dims, *, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_permute_copy_out",
    "permute_copy.c",
    30,
)
_portable(
    "aten::cat.out(Tensor[] tensors, int dim=0, *, Tensor(a!) out) -> Tensor(a!)",
    "tm_portable_cat_out",
    "cat.c",
    31,
)
# The layer norm's three outs come back as one TensorList (how ExecuTorch's emitter returns
# a tuple).
_portable(
    "aten::native_layer_norm.out(Tensor input, SymInt[] normalized_shape, Tensor? weight,"
    " Tensor? bias, float eps, *, Tensor(a!) out0, Tensor(b!) out1, Tensor(c!) out2)"
    " -> (Tensor(a!), Tensor(b!), Tensor(c!))",
    "tm_portable_native_layer_norm_out",
    "native_layer_norm.c",
    43,
    call="multi_out",
)
_portable(
    'aten::gelu.out(Tensor self, *, str approximate="none", Tensor(a!) out) -> Tensor(a!)',
    "tm_portable_gelu_out",
    "gelu.c",
    44,
)
