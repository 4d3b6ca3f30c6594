"""Clocks: the engine, its steps and the event bus read time and sleep only through one, so
tests can drive time."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (for timestamps)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin (for durations and limits)."""
        ...

    def sleep(self, seconds: float, cancel: threading.Event | None = None) -> float:
        """Sleep up to `seconds` (less if `cancel` is set); returns the seconds slept."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float, cancel: threading.Event | None = None) -> float:
        start = time.monotonic()
        if cancel is None:
            time.sleep(max(0.0, seconds))
        else:
            cancel.wait(max(0.0, seconds))
        return time.monotonic() - start


class FakeClock:
    """A clock that only moves when told to; `sleep` advances it instantly."""

    def __init__(self, start: float = 1_700_000_000.0, tick: float = 0.0) -> None:
        self._now = start
        self._mono = 0.0
        self.tick = tick
        self.sleeps: list[float] = []

    def now(self) -> float:
        self._advance(self.tick)
        return self._now

    def monotonic(self) -> float:
        self._advance(self.tick)
        return self._mono

    def _advance(self, seconds: float) -> None:
        self._now += seconds
        self._mono += seconds

    def advance(self, seconds: float) -> None:
        self._advance(seconds)

    def sleep(self, seconds: float, cancel: threading.Event | None = None) -> float:
        self.sleeps.append(seconds)
        self._advance(seconds)
        return seconds
