"""torchmcu::masked_softmax (torchmcu/ops/defs/softmax.py): the reference against a float64
masked softmax (within CMSIS-NN's +-1), the C kernel bit-exact with the reference on broadcast
masks and fully masked rows, the argument checks naming the mask, and attention with a mask
exported every way GPT code writes it (masked_fill of a buffer, causal SDPA, a bool or a -inf
float attn_mask): one masked_softmax per attention, host runtime bit-exact with the
interpreter and within one output step of torchao's fake-quantized model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from _arg_checks import assert_every_stage_names
from _pte_programs import softmax_program
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torchmcu import native, ops
from torchmcu.lower.errors import UnsupportedOpError
from torchmcu.ops.defs.softmax import INPUT_INTEGER_BITS, masked_softmax
from torchmcu.ops.intmath import quantize_multiplier
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import run_program

MASKED = ops.get("torchmcu::masked_softmax.out")
A = MASKED.schema.A


def _params(scale: float, zero_point: int = 0) -> dict[str, int]:
    """The exporter's parameters for an input scale (docs/operators.md, softmax.out)."""
    mult, shift = quantize_multiplier(min(scale * (1 << (31 - INPUT_INTEGER_BITS)), 2**31 - 1))
    diff_min = -math.floor(31 * math.ldexp(1.0, 31 - INPUT_INTEGER_BITS) / math.ldexp(1.0, shift))
    return {
        "dim": -1,
        "input_zero_point": zero_point,
        "output_zero_point": -128,
        "input_multiplier": mult,
        "input_shift": shift,
        "diff_min": diff_min,
    }


def _args(x, mask, p: dict[str, int], out) -> list:
    named = {"input": x, "mask": mask, "out": out}
    return [named[a.name] if a.name in named else p[a.name] for a in MASKED.schema.args]


def _mask_shape(rng: np.random.Generator, shape: list[int]) -> list[int]:
    """The input's sizes with some leading ones replaced by 1 (broadcast)."""
    return [n if rng.random() < 0.5 else 1 for n in shape[:-1]] + [shape[-1]]


def test_reference_is_the_float_masked_softmax_within_one():
    rng = np.random.default_rng(3)
    for scale in (0.02, 0.1, 0.3):
        x = rng.integers(-128, 128, (6, 33), dtype=np.int8)
        mask = rng.random((6, 33)) < 0.4
        mask[:, 0] = False  # every row keeps something
        p = _params(scale)
        got = masked_softmax(x, mask, **{k: v for k, v in p.items()}).astype(int)
        logits = np.where(mask, -np.inf, x.astype(np.float64) * scale)
        e = np.exp(logits - logits.max(axis=-1, keepdims=True))
        want = np.clip(np.round(e / e.sum(axis=-1, keepdims=True) * 256) - 128, -128, 127)
        assert np.abs(got - want).max() <= 1
        assert np.all(got[mask] == -128)


def test_a_row_the_mask_leaves_out_entirely_is_all_minus_128():
    x = np.arange(-8, 8, dtype=np.int8).reshape(2, 8)
    mask = np.zeros((2, 8), bool)
    mask[1] = True
    got = masked_softmax(x, mask, **_params(0.1))
    assert np.all(got[1] == -128)
    assert abs((got[0].astype(int) + 128).sum() - 256) <= 8  # probabilities summing to ~1


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.lists(st.integers(1, 7), min_size=1, max_size=4),
    scale=st.floats(0.005, 0.5),
    zero_point=st.integers(-128, 127),
    density=st.sampled_from([0.0, 0.3, 0.9, 1.0]),
)
def test_c_kernel_is_bit_exact_with_the_reference(seed, shape, scale, zero_point, density):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    mask = rng.random(_mask_shape(rng, shape)) < density
    p = _params(scale, zero_point)
    out = np.zeros_like(x)
    native.call_kernel(MASKED.qualified, _args(x, mask, p, out))
    (reference,) = run_program(softmax_program(shape, p, mask=mask), [x])
    assert reference.tobytes() == out.tobytes()


def test_causal_mask_of_attention_scores_matches_the_reference():
    """[1, 4, 16, 16] scores with a [1, 1, 16, 16] causal mask: row i keeps i + 1 scores."""
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (1, 4, 16, 16), dtype=np.int8)
    mask = ~np.tril(np.ones((16, 16), bool)).reshape(1, 1, 16, 16)
    p = _params(0.08)
    out = np.zeros_like(x)
    native.call_kernel(MASKED.qualified, _args(x, mask, p, out))
    assert np.all(out[0, :, 0, 0] == 127)  # a row of one kept score: probability 1 (255/256)
    assert np.all(out[np.broadcast_to(mask, x.shape)] == -128)
    (reference,) = run_program(softmax_program(list(x.shape), p, mask=mask), [x])
    assert reference.tobytes() == out.tobytes()


P = _params(0.05)
GOOD_MASK = np.zeros((1, 8), bool)
# (mask, its scalar type, the argument named): softmax's own checks are test_softmax.py's
BAD = [
    (np.zeros((2, 4), bool), pm.ScalarType.BOOL, A.mask),  # row size 4 for rows of 8
    (np.zeros((3, 8), bool), pm.ScalarType.BOOL, A.mask),  # 3 rows against 2: no broadcast
    (np.zeros((8,), bool), pm.ScalarType.BOOL, A.mask),  # rank 1 for a rank-2 input
    (GOOD_MASK, pm.ScalarType.CHAR, A.mask),  # int8, not bool
]


@pytest.mark.parametrize(("mask", "stype", "bad"), BAD)
def test_check_names_the_mask(mask, stype, bad):
    x = np.zeros((2, 8), np.int8)
    given = mask.astype(np.int8) if stype == pm.ScalarType.CHAR else mask
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        native.call_kernel(MASKED.qualified, _args(x, given, P, np.zeros_like(x)))
    program = softmax_program([2, 8], P, mask=mask, mask_type=stype)
    assert_every_stage_names(MASKED, program, bad, [x])


def test_softmax_checks_come_first():
    """An argument softmax also has is named at its masked_softmax position."""
    x = np.zeros((2, 8), np.int8)
    with pytest.raises(native.NativeError, match=rf"argument {A.diff_min}\b"):
        native.call_kernel(
            MASKED.qualified, _args(x, GOOD_MASK, {**P, "diff_min": 1}, np.zeros_like(x))
        )
    program = softmax_program([2, 8], {**P, "diff_min": 1}, mask=GOOD_MASK)
    assert_every_stage_names(MASKED, program, A.diff_min, [x])


class Attention(nn.Module):
    """One attention of 4 heads over 12 tokens of width 32, masked as `form` says."""

    def __init__(self, form: str, tokens: int = 12, dim: int = 32) -> None:
        super().__init__()
        self.form, self.heads = form, 4
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        keep = torch.tril(torch.ones(tokens, tokens, dtype=torch.bool))
        keep[:, 0] = True
        keep[5, 1:4] = False  # not only causal
        self.register_buffer("keep", keep, persistent=False)
        self.register_buffer("bias", torch.zeros(tokens, tokens).masked_fill(~keep, float("-inf")))
        self.register_buffer("tril", torch.tril(torch.ones(1, 1, tokens, tokens)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (
            y.view(b, t, self.heads, c // self.heads).transpose(1, 2)
            for y in self.qkv(x).split(c, dim=2)
        )
        if self.form == "masked_fill":
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
            att = att.masked_fill(self.tril[:, :, :t, :t] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        elif self.form == "causal":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.form == "bool":
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.keep)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


@pytest.mark.parametrize("form", ["masked_fill", "causal", "bool", "float"])
def test_masked_attention_exports_as_int8_and_matches_fake_quant(form):
    torch.manual_seed(0)
    model = Attention(form).eval()
    cal = [(torch.randn(1, 12, 32),) for _ in range(8)]
    exported = torchmcu.export(model, cal[0], calibration=cal, strict=True)
    plan = exported.program.execution_plan[0]
    names = [plan.operators[i.op_index].name for i in plan.chains[0].instructions]
    assert names.count("torchmcu::masked_softmax") == 1
    assert "cortex_m::softmax" not in names
    assert all(n.startswith(("cortex_m::", "torchmcu::")) for n in names), names
    scale = exported.report["outputs"][0]["scale"]
    for (x,) in [cal[0], (torch.randn(1, 12, 32),)]:
        (ours,) = torchmcu.run_on_host(exported.pte_bytes, [x.numpy()])
        (reference,) = run_program(exported.program, [x.numpy()])
        np.testing.assert_array_equal(ours, reference)
        want = exported.quantized_model(x).detach().numpy()
        assert np.abs(ours - want).max() <= 2 * scale + 1e-6
        floats = model(x).detach().numpy()
        sqnr = 10 * np.log10((floats**2).sum() / ((floats - ours) ** 2).sum())
        assert sqnr > 25.0, sqnr


def test_an_additive_bias_that_is_not_a_mask_is_named():
    """ALiBi-style finite biases are not a mask: the SDPA stays one node and export says so."""
    torch.manual_seed(0)
    model = Attention("float").eval()
    model.bias.copy_(torch.randn(12, 12))
    cal = [(torch.randn(1, 12, 32),) for _ in range(2)]
    with pytest.raises(UnsupportedOpError, match="scaled_dot_product_attention"):
        torchmcu.export(model, cal[0], calibration=cal, strict=True)


class FillNotBeforeSoftmax(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("mask", torch.tensor([True, False] * 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.masked_fill(self.mask, 0.0))


def test_a_masked_fill_that_is_not_a_mask_is_named():
    cal = [(torch.randn(1, 8),) for _ in range(2)]
    with pytest.raises(UnsupportedOpError, match="masked_fill other than attention's mask"):
        torchmcu.export(FillNotBeforeSoftmax().eval(), cal[0], calibration=cal, strict=True)
