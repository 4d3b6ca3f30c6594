"""A JSONL event log: one compact JSON object per event. It is a copy of what the run store
holds, so live-only events (streamed `model_delta`) are not written, and it reaches the file
when the store commits (events/commits.py): an event that waits for its step's checkpoint
waits in the buffer with it. A `set` step's four events are one write, not four; while a group
batches its members' commits (the bus's hold), their events reach the file with each batch."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from podium.events.commits import batched, defers
from podium.events.model import LIVE_ONLY, Event, event_json


class JsonlSink:
    """Writes each event as a line; the file is closed when its run finishes (and opened
    again, appending, if more events come: a resumed run)."""

    def __init__(self, path: Path, *, append: bool = False) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._mode = "a" if append else "w"
        self._fh: IO[str] | None = None  # opened by the first event
        self._holding: set[str] = set()  # runs whose group batches its members' commits

    def handle(self, event: Event) -> None:
        if event.type in LIVE_ONLY:
            return
        if self._fh is None or self._fh.closed:
            self._fh = self.path.open(self._mode, encoding="utf-8")
            self._mode = "a"
        self._fh.write(event_json(event) + "\n")
        if event.type == "run_finished" and event.parent_run_id is None:
            self._fh.close()
        elif not (event.run_id in self._holding and batched(event)) and not defers(event):
            self._fh.flush()  # (a held member's event, the common case, is asked first)

    # the bus's hold (events/bus.py): while a group's members commit in batches, their lines
    # reach the file with each batch

    def on_hold(self, run_id: str) -> None:
        self._holding.add(run_id)

    def on_commit_held(self, run_id: str) -> None:
        if self._fh is not None and not self._fh.closed:
            self._fh.flush()

    def on_release(self, run_id: str) -> None:
        self._holding.discard(run_id)
        self.on_commit_held(run_id)

    def close(self) -> None:
        if self._fh is not None:
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
