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

    async def asleep(self, seconds: float, cancel: threading.Event | None = None) -> float:
        """`sleep` for a task of an event loop: the loop runs the other tasks meanwhile (a
        set `cancel` ends it within a tenth of a second; cancelling the task, at once)."""
        import asyncio

        start = time.monotonic()
        end = start + max(0.0, seconds)
        while (left := end - time.monotonic()) > 0 and not (cancel and cancel.is_set()):
            await asyncio.sleep(left if cancel is None else min(left, 0.1))
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

    async def asleep(self, seconds: float, cancel: threading.Event | None = None) -> float:
        import asyncio

        await asyncio.sleep(0)  # the other tasks get their turn, as a real sleep gives it
        return self.sleep(seconds, cancel)
