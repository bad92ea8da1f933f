"""aten::pixel_shuffle / pixel_unshuffle (torchmcu/ops/defs/pixel_shuffle.py): int8 as one
cortex_m::transpose of the NHWC bytes, fp32 as the portable permute_copy. Both are permutations,
so the reference is torch's own pixel_shuffle of the same values: exact on the int8 values of an
int8-I/O program and on the floats of a float region, the host runtime bit-exact with the
reference interpreter, and the int8 transpose's TOSA lowering bit-exact on the TOSA reference
model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
import torchmcu
from torch import nn
from torchmcu import native
from torchmcu.npu.tosa.lower import lower_to_tosa, run_tosa_reference
from torchmcu.quantize import TorchmcuQuantizer
from torchmcu.reference.interpreter import run_program


class Shuffles(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.shuffle = nn.PixelShuffle(2)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.shuffle(x), F.pixel_unshuffle(y, 3)


def _inputs(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(2, 12, 3, 5, generator=gen), torch.randn(1, 2, 6, 9, generator=gen)


@pytest.fixture(scope="module")
def exported():
    gen = torch.Generator().manual_seed(5)
    calibration = [_inputs(gen) for _ in range(4)]
    int8 = torchmcu.export(Shuffles().eval(), calibration[0], calibration=calibration,
                           int8_io=True)  # fmt: skip
    quantizer = TorchmcuQuantizer().set_module_type(nn.PixelShuffle, None)
    quantizer.set_operator(torch.ops.aten.pixel_unshuffle.default, None)
    fp32 = torchmcu.export(Shuffles().eval(), calibration[0], calibration=calibration,
                           quantizer=quantizer)  # fmt: skip
    return int8, fp32


def test_int8_is_torch_pixel_shuffle_of_the_values(exported):
    int8, _ = exported
    assert set(int8.report["op_counts"]) == {"cortex_m::transpose"}
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (2, 12, 3, 5), dtype=np.int8)
    y = rng.integers(-128, 128, (1, 2, 6, 9), dtype=np.int8)
    ours = native.run_program(int8.pte_bytes, [x, y])
    for o, r in zip(ours, run_program(int8.program, [x, y])):
        np.testing.assert_array_equal(o, r)
    np.testing.assert_array_equal(ours[0], F.pixel_shuffle(torch.from_numpy(x), 2).numpy())
    np.testing.assert_array_equal(ours[1], F.pixel_unshuffle(torch.from_numpy(y), 3).numpy())
    got = run_tosa_reference(lower_to_tosa(int8.program), [x, y])
    for g, o in zip(got, ours):
        assert g.tobytes() == o.tobytes()  # both outputs are contiguous NCHW int8 here


def test_fp32_region_is_torch_pixel_shuffle(exported):
    _, fp32 = exported
    counts = fp32.report["op_counts"]
    assert "aten::permute_copy" in counts and "cortex_m::transpose" not in counts, counts
    gen = torch.Generator().manual_seed(9)
    x, y = _inputs(gen)
    ours = native.run_program(fp32.pte_bytes, [x.numpy(), y.numpy()])
    for o, r in zip(ours, run_program(fp32.program, [x.numpy(), y.numpy()])):
        np.testing.assert_array_equal(o, r)
    np.testing.assert_array_equal(ours[0], F.pixel_shuffle(x, 2).numpy())
    np.testing.assert_array_equal(ours[1], F.pixel_unshuffle(y, 3).numpy())


class SubPixelDecoder(nn.Module):
    """conv, pixel_shuffle, nearest 2x upsample, conv: one Ethos-U55 delegate."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.up = nn.Upsample(scale_factor=2)
        self.head = nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.up(self.shuffle(self.conv(x))))


def test_shuffle_and_2x_upsample_go_to_the_ethos_u55_in_one_delegate():
    torch.manual_seed(0)
    model = SubPixelDecoder().eval()
    gen = torch.Generator().manual_seed(2)
    calibration = [(torch.randn(1, 3, 6, 6, generator=gen),) for _ in range(4)]
    cpu = torchmcu.export(model, calibration[0], calibration=calibration, int8_io=True)
    npu = torchmcu.export(model, calibration[0], calibration=calibration, int8_io=True,
                          npu="ethos-u55-128")  # fmt: skip
    assert npu.report["op_counts"] == {"delegate:EthosUBackend": 1}
    assert npu.report["npu"]["macs"]["fraction"] == 1.0
    x = np.random.default_rng(4).integers(-128, 128, (1, 3, 6, 6), dtype=np.int8)
    (want,) = native.run_program(cpu.pte_bytes, [x])
    (got,) = run_tosa_reference(lower_to_tosa(cpu.program, "u55"), [x])
    assert got.tobytes() == want.tobytes()
