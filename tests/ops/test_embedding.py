"""torchmcu::quantized_embedding, defined once in torchmcu/ops/defs/embedding.py: the reference
against the float64 formula (within one step: requantize rounds ties up), the C kernel
bit-exact with the reference (the interpreter running the definition) on generated cases,
the argument check naming the argument the C kernel names, an index out of range refused by
every stage before anything is written, and small token models (nn.Embedding, a position
embedding of torch.arange, a layer norm, an LM head tied to the token table) exported
strict=True: int8 calls only, int64 token ids as the program input, the host runtime
bit-exact with the interpreter and within one step of torchao's fake-quantized model, the
tied table stored once, and QEMU bit-exact with the host."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torchmcu
from _arg_checks import assert_every_stage_names
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torchmcu import device, native, ops
from torchmcu.lower.requant import per_channel_requant
from torchmcu.ops.defs.embedding import quantized_embedding
from torchmcu.pte import program as pm
from torchmcu.reference.interpreter import InterpreterError, run_program

EMBEDDING = ops.get("torchmcu::quantized_embedding.out")
A = EMBEDDING.schema.A
INDEX_TYPE = {np.dtype(np.int64): pm.ScalarType.LONG, np.dtype(np.int32): pm.ScalarType.INT}


def embedding_program(
    weight,
    index_sizes,
    index_dtype,
    mults,
    shifts,
    zp,
    *,
    out_sizes=None,
    weight_sizes=None,
    index_order=None,
    out_type=pm.ScalarType.CHAR,
):
    """One quantized_embedding call: value 0 the planned indices (the method input), then the
    constant table and row pairs, the zero point and the planned out."""
    weight = np.asarray(weight, np.int8)
    cols = weight.shape[-1]
    out_sizes = [*index_sizes, cols] if out_sizes is None else list(out_sizes)
    index_bytes = int(np.prod(index_sizes)) * np.dtype(index_dtype).itemsize
    out_offset = (index_bytes + 15) // 16 * 16
    order = list(range(len(index_sizes))) if index_order is None else index_order
    stype = INDEX_TYPE.get(np.dtype(index_dtype), pm.ScalarType.FLOAT)
    values = [
        pm.Tensor(stype, list(index_sizes), order, allocation=pm.Allocation(1, 0)),
        pm.Tensor(pm.ScalarType.CHAR, list(weight_sizes or weight.shape),
                  list(range(len(weight_sizes or weight.shape))), data_buffer_idx=1),
        pm.Tensor(pm.ScalarType.INT, [len(mults)], [0], data_buffer_idx=2),
        pm.Tensor(pm.ScalarType.INT, [len(shifts)], [0], data_buffer_idx=3),
        pm.Int(zp),
        pm.Tensor(out_type, out_sizes, list(range(len(out_sizes))),
                  allocation=pm.Allocation(1, out_offset)),
    ]  # fmt: skip
    call = pm.KernelCall(0, [1, 0, 2, 3, 4, 5, 5])
    arena = out_offset + int(np.prod(out_sizes)) * pm.ELEMENT_SIZE[out_type]
    plan = pm.ExecutionPlan(
        name="forward",
        values=values,
        inputs=[0],
        outputs=[5],
        chains=[pm.Chain([0], [5], [call])],
        operators=[pm.Operator(EMBEDDING.qualified, "out")],
        non_const_buffer_sizes=[0, arena],
    )
    constants = [b"", weight.tobytes(), np.asarray(mults, np.int32).tobytes(),
                 np.asarray(shifts, np.int32).tobytes()]  # fmt: skip
    return pm.Program(execution_plan=[plan], constants=constants)


def _case(rows: int, cols: int, seed: int):
    """(int8 table, per-row scales, out scale, zp, row pairs) of a random symmetric table:
    row scales spread over 2^-4..2^4 of the out scale (left and right shifts both)."""
    rng = np.random.default_rng(seed)
    weight = rng.integers(-127, 128, (rows, cols), dtype=np.int8)
    out_scale = float(rng.uniform(0.01, 0.1))
    scales = out_scale * 2.0 ** rng.uniform(-4, 4, rows)
    zp = int(rng.integers(-128, 128))
    mults, shifts = (np.array(v, np.int32) for v in per_channel_requant(1.0, scales, out_scale))
    return weight, scales, out_scale, zp, mults, shifts


def test_reference_is_the_float_formula():
    """Within one step of round(w[v] * s_v / s_out) + zp, mostly equal."""
    weight, scales, out_scale, zp, mults, shifts = _case(37, 29, 3)
    idx = np.random.default_rng(4).integers(0, 37, (3, 11))
    got = quantized_embedding(weight, idx, mults, shifts, zp).astype(np.int64)
    assert got.shape == (3, 11, 29)
    real = weight.astype(np.float64)[idx] * scales[idx][..., None] / out_scale
    want = np.clip(np.round(real) + zp, -128, 127)
    assert np.abs(got - want).max() <= 1
    assert (got != want).mean() < 0.01


def _call(weight, indices, mults, shifts, zp, out):
    native.call_kernel(EMBEDDING.qualified, [weight, indices, mults, shifts, zp, out])


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 40),
    cols=st.integers(1, 40),
    index_sizes=st.lists(st.integers(1, 4), min_size=1, max_size=5),
    wide=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_c_kernel_is_bit_exact_with_the_reference(rows, cols, index_sizes, wide, seed):
    weight, _, _, zp, mults, shifts = _case(rows, cols, seed)
    dtype = np.int64 if wide else np.int32
    idx = np.random.default_rng(seed + 1).integers(0, rows, index_sizes).astype(dtype)
    out = np.zeros([*index_sizes, cols], np.int8)
    _call(weight, idx, mults, shifts, zp, out)
    program = embedding_program(weight, index_sizes, dtype, mults, shifts, zp)
    (reference,) = run_program(program, [idx])
    assert reference.tobytes() == out.tobytes()
    (host,) = native.run_program(writer_bytes(program), [idx])
    assert host.tobytes() == out.tobytes()


def writer_bytes(program: pm.Program) -> bytes:
    from torchmcu.pte.writer import serialize

    return serialize(program)


W = np.arange(-6, 6, dtype=np.int8).reshape(4, 3)
GOOD = {"mults": [1 << 30] * 4, "shifts": [0] * 4, "zp": 2, "index_sizes": [2, 3]}
# (changes to GOOD, the argument named), in the C kernel's order of checks
BAD = [
    ({"weight_sizes": [4, 3, 1]}, A.weight),  # rank 3
    ({"index_dtype": np.float32}, A.indices),
    ({"index_order": [1, 0]}, A.indices),  # not contiguous
    ({"index_sizes": [1, 1, 1, 1, 1, 2], "out_sizes": [1, 1, 1, 1, 2, 3]}, A.indices),  # rank 6
    ({"mults": [1 << 30] * 3}, A.multipliers),  # 3 for 4 rows
    ({"shifts": [0] * 5}, A.shifts),
    ({"zp": 128}, A.output_zero_point),
    ({"out_sizes": [2, 3, 4]}, A.out),  # D is 3
    ({"out_sizes": [3, 2, 3]}, A.out),  # the indices' sizes first
    ({"out_type": pm.ScalarType.SHORT}, A.out),
]


@pytest.mark.parametrize(("changes", "bad"), BAD)
def test_check_names_the_argument_the_c_kernel_names(changes, bad):
    case = {**GOOD, "index_dtype": np.int64, **changes}
    sizes, dtype = case["index_sizes"], case["index_dtype"]
    stype = INDEX_TYPE.get(np.dtype(dtype), pm.ScalarType.FLOAT)
    idx = np.zeros(sizes, dtype)
    out_sizes = case.get("out_sizes", [*sizes, 3])
    out_type = case.get("out_type", pm.ScalarType.CHAR)
    weight = W.reshape(case.get("weight_sizes", W.shape))
    order = case.get("index_order", list(range(len(sizes))))
    with pytest.raises(native.NativeError, match=rf"argument {bad}\b"):
        _call(
            weight,
            native.TensorArg(idx, sizes, order),
            np.array(case["mults"], np.int32),
            np.array(case["shifts"], np.int32),
            case["zp"],
            np.zeros(out_sizes, native.dtype_of(int(out_type))),
        )
    program = embedding_program(
        W, sizes, dtype, case["mults"], case["shifts"], case["zp"], out_sizes=out_sizes,
        weight_sizes=case.get("weight_sizes"), index_order=case.get("index_order"),
        out_type=out_type,
    )  # fmt: skip
    assert stype == program.execution_plan[0].values[0].scalar_type
    assert_every_stage_names(EMBEDDING, program, bad, [idx])


def test_a_shift_out_of_range_is_named_by_the_stages_that_read_constants():
    program = embedding_program(W, [2], np.int64, [1 << 30] * 4, [0, 40, 0, 0], 0)
    with pytest.raises(InterpreterError, match=rf"argument {A.shifts} \(shifts\)"):
        run_program(program, [np.zeros(2, np.int64)])
    with pytest.raises(native.NativeError, match=rf"argument {A.shifts} \(shifts\)"):
        native.run_program(writer_bytes(program), [np.zeros(2, np.int64)])


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
@pytest.mark.parametrize("bad_index", [4, -1, 2**31 - 1, -(2**31)])
def test_an_index_out_of_range_is_refused_before_anything_is_written(dtype, bad_index):
    """The kernel, the host runtime and the interpreter all name `indices`; the out tensor
    keeps its bytes."""
    idx = np.array([[0, 3, 1], [2, bad_index, 0]], dtype)
    mults, shifts = [1 << 30] * 4, [0] * 4
    out = np.full([2, 3, 3], 77, np.int8)
    with pytest.raises(native.NativeError, match=rf"argument {A.indices}\b"):
        _call(W, idx, np.array(mults, np.int32), np.array(shifts, np.int32), 0, out)
    assert (out == 77).all()
    program = embedding_program(W, [2, 3], dtype, mults, shifts, 0)
    with pytest.raises(
        InterpreterError, match=rf"argument {A.indices} \(indices\): index {bad_index} "
    ):
        run_program(program, [idx])
    with pytest.raises(native.NativeError, match=rf"argument {A.indices} \(indices\), operator "):
        native.run_program(writer_bytes(program), [idx])
    idx[1, 1] = 3  # the same program runs once every index is in range
    (got,) = native.run_program(writer_bytes(program), [idx])
    np.testing.assert_array_equal(got, run_program(program, [idx])[0])


# --- models ---------------------------------------------------------------------------------

VOCAB, CONTEXT, DIM = 16, 8, 24


class TokenModel(nn.Module):
    """Token + position embedding (positions from torch.arange), a layer norm, an LM head
    (tied to the token table unless tied=False; no layer norm with norm=False)."""

    def __init__(self, tied: bool = True, norm: bool = True) -> None:
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(CONTEXT, DIM)
        self.ln = nn.LayerNorm(DIM) if norm else nn.Identity()
        self.head = nn.Linear(DIM, VOCAB, bias=False)
        if tied:
            self.head.weight = self.tok.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], dtype=torch.long, device=tokens.device)
        return self.head(self.ln(self.tok(tokens) + self.pos(positions)))


def _tokens(n: int, seed: int, dtype=torch.int64) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.randint(0, VOCAB, (1, CONTEXT), generator=g, dtype=dtype),) for _ in range(n)]


_EXPORTS: dict[tuple, object] = {}


def exported(tied: bool = True, norm: bool = True, dtype=torch.int64):
    key = (tied, norm, dtype)
    if key not in _EXPORTS:
        torch.manual_seed(0)
        model = TokenModel(tied, norm).eval()
        cal = _tokens(8, 1, dtype)
        _EXPORTS[key] = torchmcu.export(model, cal[0], calibration=cal, strict=True)
    return _EXPORTS[key]


def _ops(prog) -> list[str]:
    plan = prog.program.execution_plan[0]
    return [plan.operators[i.op_index].name for i in plan.chains[0].instructions]


@pytest.mark.parametrize("norm", [True, False])
def test_token_model_exports_as_int8_calls_with_an_int64_input(norm):
    prog = exported(norm=norm)
    names = _ops(prog)
    assert names.count("torchmcu::quantized_embedding") == 2
    assert all(n.startswith(("cortex_m::", "torchmcu::")) for n in names), names
    assert "cortex_m::quantize_per_tensor" not in names  # the token ids are not quantized
    (inp,) = prog.report["inputs"]
    assert inp["dtype"] == "int64" and inp["sizes"] == [1, CONTEXT] and inp["scale"] is None
    plan = prog.program.execution_plan[0]
    assert plan.values[plan.inputs[0]].scalar_type == pm.ScalarType.LONG
    info = native.program_info(prog.pte_bytes)
    assert info["inputs"][0]["dtype"] == "int64"
    # the positions are a constant: int32 0..T-1 (torch.arange folded before quantization)
    pos_call = plan.chains[0].instructions[names.index("torchmcu::quantized_embedding", 1)]
    positions = plan.values[pos_call.args[A.indices]]
    assert positions.scalar_type == pm.ScalarType.INT and positions.data_buffer_idx > 0
    data = np.frombuffer(prog.program.constants[positions.data_buffer_idx], np.int32)
    np.testing.assert_array_equal(data, np.arange(CONTEXT))


@pytest.mark.parametrize("norm", [True, False])
def test_token_model_host_is_the_reference_and_within_a_step_of_fake_quant(norm):
    prog = exported(norm=norm)
    (out_q,) = prog.report["outputs"]
    steps = []
    for (tokens,) in _tokens(6, 7):
        x = tokens.numpy()
        (ours,) = torchmcu.run_on_host(prog.pte_bytes, [x])
        (reference,) = run_program(prog.program, [x])
        np.testing.assert_array_equal(ours, reference)
        with torch.no_grad():
            fq = prog.quantized_model(tokens).double().numpy()
        steps.append(np.abs(ours.astype(np.float64) - fq).max() / out_q["scale"])
    assert max(steps) <= 1 + 1e-6, steps


def test_int32_token_ids_are_a_program_input_as_they_are():
    prog = exported(dtype=torch.int32)
    assert prog.report["inputs"][0]["dtype"] == "int32"
    (tokens,) = _tokens(1, 5, torch.int32)[0]
    (ours,) = torchmcu.run_on_host(prog.pte_bytes, [tokens.numpy()])
    np.testing.assert_array_equal(ours, run_program(prog.program, [tokens.numpy()])[0])


def _tables(prog) -> int:
    """How many constants have the token table's size (V x D int8 bytes)."""
    return sum(1 for c in prog.program.constants if len(c) == VOCAB * DIM)


@pytest.mark.parametrize("norm", [True, False])
def test_a_tied_table_is_stored_once(norm):
    """The tied model's constants are the untied one's minus one int8 table (V x D bytes);
    the table's bytes appear once, read by the embedding and the LM head alike."""
    tied, untied = exported(tied=True, norm=norm), exported(tied=False, norm=norm)
    assert untied.report["constant_bytes"] - tied.report["constant_bytes"] == VOCAB * DIM
    assert (_tables(tied), _tables(untied)) == (1, 2)
    plan = tied.program.execution_plan[0]
    names = _ops(tied)
    calls = plan.chains[0].instructions
    emb = calls[names.index("torchmcu::quantized_embedding")]
    lin = calls[names.index("cortex_m::quantized_linear")]
    weights = ops.get("cortex_m::quantized_linear.out").schema.A.weights
    assert (plan.values[emb.args[A.weight]].data_buffer_idx
            == plan.values[lin.args[weights]].data_buffer_idx)  # fmt: skip


def test_float_token_ids_are_refused_naming_the_input():
    prog = exported()
    tokens = _tokens(1, 5)[0][0].numpy()
    with pytest.raises(native.NativeError, match=r"input 0: expected int64\[1, 8\], got float32"):
        torchmcu.run_on_host(prog.pte_bytes, [tokens.astype(np.float32)])
    with pytest.raises(InterpreterError, match=r"input 0: expected int64\[1, 8\], got float32"):
        run_program(prog.program, [tokens.astype(np.float32)])
    with pytest.raises(ValueError, match=r"sample 0 input 0: expected int64\[1, 8\], got float32"):
        device.write_io_blob(native.program_info(prog.pte_bytes), [[tokens.astype(np.float32)]])
    model = TokenModel().eval()
    with pytest.raises(ValueError, match=r"sample 1, input 0: the arrays must be int64"):
        torchmcu.export(model, (torch.zeros(1, CONTEXT, dtype=torch.long),),
                        calibration=[_tokens(1, 1)[0], (torch.zeros(1, CONTEXT),)])  # fmt: skip


def test_token_ids_out_of_the_vocabulary_fail_the_run_naming_indices():
    prog = exported()
    tokens = _tokens(1, 5)[0][0].numpy().copy()
    tokens[0, 2] = VOCAB
    with pytest.raises(
        native.NativeError, match=r"argument 1 \(indices\), operator torchmcu::quantized_embedding"
    ):
        torchmcu.run_on_host(prog.pte_bytes, [tokens])


@pytest.mark.needs("arm-gcc", "newlib", "qemu")
def test_qemu_bit_exact_with_the_host(tmp_path: Path):
    prog = exported()
    pte = prog.save(tmp_path, name="tokens")
    info = native.program_info(pte.read_bytes())
    samples = [[t.numpy()] for (t,) in _tokens(2, 11)]
    blob = device.write_io_blob(info, samples)
    image = device.build([pte], "qemu-an547", tmp_path / "fw", inputs=[blob],
                         ops_yaml=tmp_path / "selected_operators.yaml")  # fmt: skip
    result = device.run(image.elf, "qemu-an547", 300).check()
    for k, (x,) in enumerate(samples):
        (want,) = native.run_program(pte.read_bytes(), [x])
        (got,) = result.outputs(info, k)
        np.testing.assert_array_equal(got, want)
