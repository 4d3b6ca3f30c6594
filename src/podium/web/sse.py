"""Live updates: one poller watches the store, server-sent event streams fan its news out.

Runs are written by other processes, so the console cannot be told about new events: it asks.
A single `ChangeFeed` reads SQLite's `PRAGMA data_version` on a connection of its own every
200 ms (a counter in shared memory: no table is read while nothing changes) and wakes every
stream when another connection committed; on a PostgreSQL store it polls the server's current
snapshot instead, which changes whenever a writing transaction starts or ends. Each stream
then reads only what is new for it (events after the last sequence number it sent, by primary
key). A stream of a run resumes where it left off with `Last-Event-ID` (the event's `seq`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio.to_thread

from podium.app.catalog import StoreVersion
from podium.web.queries import Reader

IDLE_REFRESH = 5.0  # seconds: re-read summaries even without a change (liveness, gates)
HEARTBEAT = 15.0
BATCH = 500


class ChangeFeed:
    """Wakes waiting streams whenever the store changes."""

    def __init__(self, path: Path | str, interval: float = 0.2) -> None:
        self.path = path
        self.interval = interval
        self.generation = 0
        self.closing = False
        self._event = asyncio.Event()
        # stream id -> (run id, last seq sent): how far each run stream got (for draining)
        self.sent: dict[int, tuple[str, int]] = {}
        self._ids = itertools.count(1)

    async def run(self) -> None:
        version = StoreVersion(self.path)  # the store's commit counter (store/catalog.py)
        try:
            last: object = None
            while not self.closing:
                now = (await anyio.to_thread.run_sync(version.read) if version.blocking
                       else version.read())
                if now is not None and now != last:
                    last = now
                    self._wake()
                await asyncio.sleep(self.interval)
        finally:
            version.close()

    def _wake(self) -> None:
        self.generation += 1
        event, self._event = self._event, asyncio.Event()
        event.set()

    def close(self) -> None:
        self.closing = True
        self._wake()

    async def changed(self, seen: int, timeout: float) -> int:
        """The current generation, once it differs from `seen` (or after `timeout`)."""
        if self.generation == seen and not self.closing:
            event = self._event
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        return self.generation

    def behind(self, run_id: str, seq: int) -> int:
        """How many connected streams of `run_id` have not yet sent event `seq`."""
        return sum(1 for rid, last in self.sent.values() if rid == run_id and last < seq)


def _frame(data: str, event: str | None = None, event_id: int | None = None) -> str:
    head = ""
    if event_id is not None:
        head += f"id: {event_id}\n"
    if event is not None:
        head += f"event: {event}\n"
    return head + "".join(f"data: {line}\n" for line in data.split("\n")) + "\n"


async def run_stream(feed: ChangeFeed, reader: Reader, run_id: str,
                     after: int) -> AsyncIterator[str]:
    """A run's events after `after` (each with its seq as id), then every new one; its
    summary (`run`: status, open gates, children) whenever it changes; and what its running
    steps streamed so far (`live`: key -> body, store/sqlcore.py) whenever that changes."""
    stream = next(feed._ids)
    feed.sent[stream] = (run_id, after)
    last = after
    last_detail = ""
    last_live = "{}"
    seen = -1
    beat = time.monotonic()
    try:
        yield "retry: 1000\n\n"
        while not feed.closing:
            generation = await feed.changed(seen, IDLE_REFRESH)
            seen = generation
            while True:
                rows = await anyio.to_thread.run_sync(reader.events_text, run_id, last, BATCH)
                for seq, body in rows:
                    yield _frame(body, "ev", seq)
                    last = seq
                feed.sent[stream] = (run_id, last)
                if len(rows) < BATCH:
                    break
            detail = await anyio.to_thread.run_sync(reader.detail, run_id)
            text = json.dumps(detail, separators=(",", ":"), default=str)
            if text != last_detail:
                last_detail = text
                yield _frame(text, "run")
            live = await anyio.to_thread.run_sync(reader.streaming, run_id)
            text = json.dumps(live, separators=(",", ":"), default=str)
            if text != last_live:  # what its running steps streamed (a store's live rows)
                last_live = text
                yield _frame(text, "live")
            if time.monotonic() - beat > HEARTBEAT:
                beat = time.monotonic()
                yield ": ping\n\n"
    finally:
        feed.sent.pop(stream, None)


def _row_key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, separators=(",", ":"), default=str)


async def runs_stream(feed: ChangeFeed, reader: Reader,
                      query: dict[str, Any]) -> AsyncIterator[str]:
    """The runs page: the whole list first, then only the rows that changed (and the ids of
    rows that left the list), with the counts."""
    sent: dict[str, str] = {}
    sent_extra = ""
    seen = -1
    beat = time.monotonic()
    first = True
    yield "retry: 1000\n\n"
    while not feed.closing:
        generation = await feed.changed(seen, IDLE_REFRESH)
        seen = generation
        data = await anyio.to_thread.run_sync(lambda: reader.runs(**query))
        rows = data["runs"]
        keys = {r["id"]: _row_key(r) for r in rows}
        changed = [r for r in rows if sent.get(r["id"]) != keys[r["id"]]]
        removed = [rid for rid in sent if rid not in keys]
        # the counts and the attention list cover every run, shown or not
        extra = _row_key({"counts": data["counts"], "attention": data["attention"]})
        if first or changed or removed or extra != sent_extra:
            payload = {"full": first, "runs": rows if first else changed, "removed": removed,
                       "order": [r["id"] for r in rows], "counts": data["counts"],
                       "attention": data["attention"], "workflows": data["workflows"],
                       "now": data["now"]}
            yield _frame(json.dumps(payload, separators=(",", ":"), default=str), "runs")
            first = False
            sent = keys
            sent_extra = extra
            beat = time.monotonic()
        elif time.monotonic() - beat > HEARTBEAT:
            beat = time.monotonic()
            yield ": ping\n\n"
