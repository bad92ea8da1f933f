"""Progress of long steps on stderr: calibration, export stages, firmware builds, emulator runs.

    with progress.task("calibrating", total=len(samples), unit="samples") as p:
        for s in samples:
            ...
            p.advance()

Library code names the stages of the task its caller runs with progress.stage("lower").
Silent unless switched on (the command line does, unless --quiet; bench/fuzz_bench.py too), so
the library prints nothing of its own. On a terminal a task is one line rewritten in place
(label, stage, count, elapsed seconds); elsewhere (a log file, a pipe, CI) it is plain lines:
the first, one per stage, about one per tenth of the count, and the last.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

_enabled = False
_stream: TextIO | None = None  # None: sys.stderr at the time a task starts

TTY_INTERVAL = 0.1  # seconds between redraws of the terminal line


def configure(*, enabled: bool, stream: TextIO | None = None) -> None:
    """Switch progress reports on or off (off by default), optionally to another stream."""
    global _enabled, _stream
    _enabled = enabled
    _stream = stream


def enabled() -> bool:
    return _enabled


class Task:
    """One step being reported. A disabled task (progress off) accepts every call silently."""

    def __init__(self, label: str, total: int | None, unit: str, stream: TextIO | None) -> None:
        self.label = label
        self.total = total
        self.unit = unit
        self.done = 0
        self.stage_name = ""
        self._stream = stream
        self._tty = bool(stream is not None and stream.isatty())
        self._started = time.monotonic()
        self._drawn = 0.0
        self._next_line = self._step()
        if stream is not None and not self._tty and total is not None:
            self._line()

    def _step(self) -> int:
        return max(1, (self.total or 10) // 10)

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def text(self, end: str = "") -> str:
        """'LABEL: STAGE, N/TOTAL UNIT, S.S s' (parts left out when unknown); with `end`
        ('done', 'failed'): 'LABEL: N/TOTAL UNIT, done in S.S s'."""
        parts = [self.stage_name] if self.stage_name and not end else []
        if self.total is not None:
            parts.append(f"{self.done}/{self.total}")
        elif self.done:
            parts.append(str(self.done))
        if self.unit and (self.total is not None or self.done):
            parts[-1] += f" {self.unit}"
        seconds = f"{self.elapsed():.1f} s"
        parts.append(f"{end} {'in' if end == 'done' else 'after'} {seconds}" if end else seconds)
        return f"{self.label}: {', '.join(parts)}"

    def _line(self, end: str = "") -> None:
        assert self._stream is not None
        self._stream.write(self.text(end) + "\n")
        self._stream.flush()

    def _draw(self, force: bool = False, end: str = "") -> None:
        now = time.monotonic()
        if self._stream is None or (not force and now - self._drawn < TTY_INTERVAL):
            return
        self._drawn = now
        self._stream.write("\r\x1b[K" + self.text(end))
        self._stream.flush()

    def advance(self, n: int = 1) -> None:
        """n more units done."""
        self.update(self.done + n)

    def update(self, done: int, total: int | None = None) -> None:
        """The count so far (and the total, once it is known)."""
        if total is not None:
            self.total = total
        if done == self.done and total is None:
            return
        self.done = done
        if self._stream is None:
            return
        if self._tty:
            self._draw()
        elif self.done >= self._next_line and (self.total is None or self.done < self.total):
            self._next_line = self.done + self._step()
            self._line()

    def stage(self, name: str) -> None:
        """The step moved on to `name` (e.g. an export stage): always shown."""
        self.stage_name = name
        if self._stream is None:
            return
        if self._tty:
            self._draw(force=True)
        else:
            self._line()

    def tick(self) -> None:
        """Nothing new but time: redraw the elapsed seconds on a terminal."""
        if self._tty:
            self._draw()

    def close(self, failed: bool = False) -> None:
        if self._stream is None:
            return
        end = "failed" if failed else "done"
        if self._tty:
            self._draw(force=True, end=end)
            self._stream.write("\n")
            self._stream.flush()
        else:
            self._line(end)
        self._stream = None


_active: list[Task] = []


def stage(name: str) -> None:
    """The innermost running task moved on to stage `name` (nothing when none runs): library
    code names its stages, the caller that owns the task decides whether it is shown."""
    if _active:
        _active[-1].stage(name)


@contextmanager
def task(label: str, total: int | None = None, unit: str = "") -> Iterator[Task]:
    """A Task reported while the block runs (a silent one when progress is off)."""
    stream = (_stream or sys.stderr) if _enabled else None
    t = Task(label, total, unit, stream)
    _active.append(t)
    try:
        yield t
    except BaseException:
        t.close(failed=True)
        raise
    finally:
        _active.remove(t)
    t.close()


def note(text: str) -> None:
    """A line of its own in the progress output (a warning export gives), above a terminal's
    progress line; nothing when progress is off or no task runs."""
    if not _active or _active[-1]._stream is None:
        return
    t = _active[-1]
    stream = t._stream
    assert stream is not None
    stream.write(("\r\x1b[K" if t._tty else "") + text + "\n")
    stream.flush()
    if t._tty:
        t._draw(force=True)
