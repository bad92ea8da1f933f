"""Calibration samples that time their consumer, shared by the export benchmarks."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any


class TimedSamples:
    """Iterates calibration samples and adds up the time the consumer spends between them.

    The flow runs one forward pass per sample between two `next()` calls, so that
    sum is the calibration cost we subtract from the export time: `seconds` of wall
    time, `cpu_seconds` of this process's CPU time (the comparable one on a busy machine).
    """

    def __init__(self, samples: Sequence[tuple[Any, ...]]) -> None:
        self.samples = samples
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        self.seconds = self.cpu_seconds = 0.0
        handed_out: tuple[float, float] | None = None
        for sample in self.samples:
            self._add(handed_out)
            handed_out = (time.perf_counter(), time.process_time())
            yield sample
        self._add(handed_out)

    def _add(self, handed_out: tuple[float, float] | None) -> None:
        if handed_out is not None:
            self.seconds += time.perf_counter() - handed_out[0]
            self.cpu_seconds += time.process_time() - handed_out[1]

    def __len__(self) -> int:
        return len(self.samples)
