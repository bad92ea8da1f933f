"""Architectures users bring to microcontrollers, written here from their papers.

`ARCHITECTURES` maps each example name to (constructor, input shape, image input?);
`torchmcu.examples.models` gives them seeded weights and calibration inputs like the
MLPerf Tiny models.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from torchmcu.examples.architectures.efficientnet import EfficientNetB0
from torchmcu.examples.architectures.ghostnet import GhostNet
from torchmcu.examples.architectures.gpt import GPT
from torchmcu.examples.architectures.kws import GRUKWS, Conv1dKWS
from torchmcu.examples.architectures.mobilenet import LCNet, MnasNet, MobileNetV2, MobileNetV3Small
from torchmcu.examples.architectures.resnet import ResNet18
from torchmcu.examples.architectures.shufflenet import ShuffleNetV2
from torchmcu.examples.architectures.squeezenet import SqueezeNet11
from torchmcu.examples.architectures.unet import TinyUNet
from torchmcu.examples.architectures.vit import ViT

__all__ = ["ARCHITECTURES", "TOKEN_INPUTS", "TRANSFORMERS"]

ARCHITECTURES: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], bool]] = {
    "mobilenet_v3_small": (MobileNetV3Small, (1, 3, 96, 96), True),
    "efficientnet_b0": (EfficientNetB0, (1, 3, 64, 64), True),
    "squeezenet1_1": (SqueezeNet11, (1, 3, 64, 64), True),
    "shufflenet_v2_x0_5": (ShuffleNetV2, (1, 3, 64, 64), True),
    "mnasnet0_5": (lambda: MnasNet(alpha=0.5), (1, 3, 64, 64), True),
    "mobilenet_v2_035": (lambda: MobileNetV2(width=0.35), (1, 3, 96, 96), True),
    "resnet18": (ResNet18, (1, 3, 32, 32), True),
    "ghostnet_050": (lambda: GhostNet(width=0.5), (1, 3, 64, 64), True),
    "lcnet_050": (lambda: LCNet(scale=0.5), (1, 3, 64, 64), True),
    "tiny_unet": (TinyUNet, (1, 3, 64, 64), True),
    "conv1d_kws": (Conv1dKWS, (1, 40, 49), False),
    "gru_kws": (GRUKWS, (1, 8, 16), False),
}

# Transformers (issue 18), kept apart from the twelve of issue 17 that the NPU tests and
# benches iterate over.
TRANSFORMERS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], bool]] = {
    "vit_tiny": (ViT, (1, 3, 32, 32), True),
    "gpt_tiny": (GPT, (1, 64), False),
    "gpt_tiny_masked": (lambda: GPT(masked=True), (1, 64), False),
}

# Models whose input is token ids (int64) below a vocabulary size, not a float tensor.
TOKEN_INPUTS: dict[str, int] = {"gpt_tiny": 16, "gpt_tiny_masked": 16}
