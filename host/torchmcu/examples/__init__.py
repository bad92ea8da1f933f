"""Deterministic example models (small test nets, MLPerf Tiny architectures)."""

from torchmcu.examples.models import MLPERF_TINY, MODELS, build, calibration, count_parameters

__all__ = ["MLPERF_TINY", "MODELS", "build", "calibration", "count_parameters"]
