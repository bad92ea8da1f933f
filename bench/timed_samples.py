"""Calibration samples that time their consumer, shared by the export benchmarks."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any


class TimedSamples:
    """Iterates calibration samples and adds up the time the consumer spends between them.

    The flow runs one forward pass per sample between two `next()` calls, so that
    sum is the calibration cost we subtract from the export time.
    """

    def __init__(self, samples: Sequence[tuple[Any, ...]]) -> None:
        self.samples = samples
        self.seconds = 0.0

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        self.seconds = 0.0
        handed_out: float | None = None
        for sample in self.samples:
            if handed_out is not None:
                self.seconds += time.perf_counter() - handed_out
            handed_out = time.perf_counter()
            yield sample
        if handed_out is not None:
            self.seconds += time.perf_counter() - handed_out

    def __len__(self) -> int:
        return len(self.samples)
