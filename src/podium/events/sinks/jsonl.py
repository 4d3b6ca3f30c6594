"""A JSONL event log: one compact JSON object per event, flushed as it is written."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from podium.events.model import Event


class JsonlSink:
    def __init__(self, path: Path, *, append: bool = False) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fh: IO[str] = path.open("a" if append else "w", encoding="utf-8")

    def handle(self, event: Event) -> None:
        self._fh.write(event.model_dump_json(exclude_none=True) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class MemorySink:
    """Keeps events in a list (tests and in-process callers)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def handle(self, event: Event) -> None:
        self.events.append(event)

    def close(self) -> None:
        pass

    def types(self) -> list[str]:
        return [e.type for e in self.events]
