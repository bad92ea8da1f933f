"""The generation runner (firmware/runner/generate.h): greedy decoding on QEMU of the example
GPT (int64 token ids in, float logits out), token for token the host int8 program's greedy
continuation computed here with numpy's argmax; each step is one inference between the
instruction-count markers; a method of another form is refused with a clear line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torchmcu
from torchmcu import device, native
from torchmcu.device.icount import count_instructions
from torchmcu.device.run import parse_tokens
from torchmcu.examples import models

pytestmark = pytest.mark.needs("arm-gcc", "newlib", "qemu")

PAD, END, NEW = 15, 3, 5


@pytest.fixture(scope="module")
def gpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    model, example = models.build("gpt_tiny")
    exported = torchmcu.export(model, example, calibration=models.calibration("gpt_tiny", 8))
    out = tmp_path_factory.mktemp("gpt")
    exported.save(out, name="gpt")
    return out / "gpt.pte"


def _prompts() -> list[np.ndarray]:
    prompts = []
    for k in range(3):
        t = np.full((1, 64), PAD, np.int64)
        t[0, : 4 + 3 * k] = (np.arange(4 + 3 * k) * (k + 2)) % 14
        prompts.append(t)
    return prompts


def _host_greedy(pte: bytes, tokens: np.ndarray) -> list[int]:
    tokens = tokens.copy()
    length = int(np.argmax(tokens[0] == PAD))
    new: list[int] = []
    while len(new) < NEW and length < tokens.shape[1]:
        (logits,) = native.run_program(pte, [tokens])
        token = int(np.argmax(logits[0, length - 1]))
        new.append(token)
        tokens[0, length] = token
        length += 1
        if token == END:
            break
    return new


def test_device_generates_the_host_tokens(gpt: Path, tmp_path: Path) -> None:
    pte = gpt.read_bytes()
    prompts = _prompts()
    blob = device.write_io_blob(native.program_info(pte), [[p] for p in prompts])
    image = device.build(
        gpt,
        "qemu-an547",
        tmp_path / "fw",
        inputs=blob,
        generate=(PAD, END, NEW),
        ops_yaml=gpt.parent / "selected_operators.yaml",
    )
    counts = count_instructions(image.elf, "qemu-an547", timeout=600)
    generated = parse_tokens(counts["console"])
    want = [_host_greedy(pte, p) for p in prompts]
    assert [[r["token"] for r in generated[s]] for s in range(len(prompts))] == want
    steps = counts["regions"]["inference"]
    assert len(steps) == sum(len(w) for w in want)  # one inference per generated token
    assert min(steps) > 1_000_000 and max(steps) < 1.01 * min(steps)  # the window: same work


def test_a_program_without_token_ids_is_refused(tmp_path: Path) -> None:
    model, example = models.build("mlp")
    exported = torchmcu.export(model, example, calibration=models.calibration("mlp", 4))
    exported.save(tmp_path, name="mlp")
    image = device.build(tmp_path / "mlp.pte", "qemu-an547", tmp_path / "fw", generate=(0, -1, 2))
    result = device.run(image.elf, "qemu-an547", 120)
    assert not result.ok
    assert "generation needs input 0 to be int64 or int32 token ids" in result.console
