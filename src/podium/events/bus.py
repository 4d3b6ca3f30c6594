"""The event bus: stamps each event with run id, sequence and time, and hands it to sinks.

Two kinds of sink. The committer (the run store) gets each event first, and when it raises
the run stops: the error is re-raised to the emitter, and every later emit raises it again, so
a step that caught it cannot go on unrecorded. Observers (the console, the JSONL copy, traces)
may fail: one that raises is reported once on stderr and skipped for the rest of the run; it
never breaks the run or stops the other sinks. Live-only events (`model_delta`, streamed
model text) go to the observers alone: the run store never holds them; their text passes a
StreamRedactor (redact_stream.py), so a secret cut across two pieces reaches no observer.

An emit is not cut in two by an interrupt: the engine's SIGTERM handler asks
`defer_interrupt()` first, and when its thread is inside an emit the KeyboardInterrupt is
raised once the event is recorded (else a seq would be given to an event no sink had, or the
sinks after the interrupted one would miss it).

While a group runs, its members' commits may be batched (`hold`): the committer keeps the
writes that would commit at once and the group commits them in one transaction per turn of
its event loop (`commit_held`), and all of them before its own checkpoint (`release`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Protocol

from podium.clock import Clock
from podium.events.model import LIVE_ONLY, Event, ModelDelta
from podium.events.model import stamped as stamped_copy
from podium.events.redact import Redactor
from podium.events.redact_stream import StreamRedactor

# thread id -> emits in progress on it, and the threads whose interrupt waits for its end
_emitting: dict[int, int] = {}
_deferred: set[int] = set()


def defer_interrupt() -> bool:
    """For a signal handler about to raise KeyboardInterrupt: True when this thread is inside
    an emit, which then raises it itself once its event is recorded."""
    me = threading.get_ident()
    if _emitting.get(me):
        _deferred.add(me)
        return True
    return False


class Sink(Protocol):
    """Anything that consumes events. An observer with a `reads` attribute (a set of event
    types) is handed only events of those types; one without it, every event."""

    def handle(self, event: Event) -> None: ...

    def close(self) -> None: ...


class EventBus:
    def __init__(self, run_id: str, clock: Clock, *, start_seq: int = 0,
                 parent_run_id: str | None = None) -> None:
        self.run_id = run_id
        self.clock = clock
        self.seq = start_seq
        self.parent_run_id = parent_run_id
        self.sinks: list[Sink] = []
        self.committers: list[Sink] = []
        self.failure: BaseException | None = None  # a committer's error: the run must stop
        self._broken: set[int] = set()
        # event type -> the observers that read it (their `reads`), worked out when first
        # asked: a fan-out emits four events a member, most of which most observers skip
        self._readers: dict[str, list[tuple[int, Sink]]] = {}
        self._lock = threading.Lock()
        self.drop: frozenset[str] = frozenset()  # event types not to record
        self.redactor = Redactor()  # secret values never to record (shared with sub-runs)
        self.streams = StreamRedactor()  # the tails of streamed text held back from observers

    def add(self, sink: Sink) -> None:
        """An observer: it may fail, with a warning."""
        self.sinks.append(sink)
        self._readers.clear()

    def add_committer(self, sink: Sink) -> None:
        """The sink that commits the run: its failure stops the run."""
        self.committers.append(sink)

    def emit(self, event: Event) -> Event:
        if event.type in self.drop:
            return event
        me = threading.get_ident()
        _emitting[me] = _emitting.get(me, 0) + 1
        try:
            stamped = self._emit(event)
        finally:
            if _emitting[me] > 1:
                _emitting[me] -= 1
            else:
                del _emitting[me]
        if me in _deferred and me not in _emitting:
            _deferred.discard(me)
            raise KeyboardInterrupt  # a signal came while the event was being recorded
        return stamped

    def _emit(self, event: Event) -> Event:
        live = event.type in LIVE_ONLY  # observers only: not committed, no seq of its own
        with self._lock:
            if self.failure is not None:
                raise self.failure
            stamp = {"run_id": self.run_id, "ts": self.clock.now(),
                     "parent_run_id": self.parent_run_id}
            if live:
                stamped = stamped_copy(event, {**stamp, "seq": self.seq})
                if isinstance(stamped, ModelDelta) and self.redactor:
                    # a secret split across two pieces is held back whole, and what comes
                    # out is redacted (redact_stream.py)
                    for piece in self.streams.piece(stamped, self.redactor):
                        self._observe(piece)
                    return stamped
                self._observe(self._redacted(stamped) if self.redactor else stamped)
                return stamped
            if self.streams:  # a step's other event ends its streams: their held tails first
                step = getattr(event, "step", None)
                ending = isinstance(step, str) or event.type == "run_finished"
                for piece in self.streams.release(self.run_id, step) if ending else ():
                    self._observe(stamped_copy(piece, {"seq": self.seq}))
            self.seq += 1
            stamped = stamped_copy(event, {**stamp, "seq": self.seq})
            if self.redactor:
                stamped = self._redacted(stamped)
            for committer in self.committers:
                try:
                    committer.handle(stamped)
                except Exception as exc:
                    self.failure = exc
                    raise
            self._observe(stamped)
        return stamped

    def hold(self, wake: Callable[[], None]) -> bool:
        """Batch the commits of a group's members (store/sqlcore.py hold): True when a
        committer batches them, and then `commit_held` must follow each `wake()` and
        `release` the group's end."""
        held = False
        for committer in self.committers:
            hold = getattr(committer, "hold", None)
            if hold is not None:
                hold(self.run_id, wake)
                held = True
        if held:  # a sink that writes as the store commits (the JSONL copy) batches too
            self._each_sink("on_hold")
        return held

    def commit_held(self) -> None:
        """Commit what the members' events left waiting; a failure stops the run, as a
        failed commit inside an emit does."""
        self._each_committer("commit_held")
        self._each_sink("on_commit_held")

    def commit_waiting(self) -> None:
        """Commit now what this run's events left waiting for a later commit point: a step
        that waits on something slow (a script that outlasts COMMIT_WINDOW) shows as running
        while it waits. A failure stops the run, as a failed commit inside an emit does."""
        self._each_committer("commit_waiting")
        self._each_sink("on_commit_held")

    def release(self) -> None:
        self._each_committer("release")
        self._each_sink("on_release")

    def _each_sink(self, method: str) -> None:
        """Tell the sinks that follow the hold (`on_hold`, `on_commit_held`, `on_release`, each
        given the run id; the JSONL copy): under the lock their events are handed out under,
        and a sink that fails is disabled."""
        with self._lock:
            for i, sink in enumerate(self.sinks):
                fn = getattr(sink, method, None)
                if fn is None or i in self._broken:
                    continue
                try:
                    fn(self.run_id)
                except Exception as exc:
                    self._disable(i, sink, exc)

    def _each_committer(self, method: str) -> None:
        for committer in self.committers:
            fn = getattr(committer, method, None)
            if fn is None:
                continue
            try:
                fn(self.run_id)
            except Exception as exc:
                with self._lock:
                    self.failure = self.failure or exc
                raise

    def _observe(self, stamped: Event) -> None:
        readers = self._readers.get(stamped.type)
        if readers is None:
            readers = self._readers[stamped.type] = [
                (i, sink) for i, sink in enumerate(self.sinks)
                if (reads := getattr(sink, "reads", None)) is None or stamped.type in reads]
        for i, sink in readers:
            if i in self._broken:
                continue
            try:
                sink.handle(stamped)
            except Exception as exc:  # a sink must never break the run
                self._disable(i, sink, exc)

    def _disable(self, i: int, sink: Sink, exc: Exception) -> None:
        """A sink failed: it gets no more events, and the run goes on."""
        self._broken.add(i)
        sys.stderr.write(f"podium: event sink {type(sink).__name__} failed and was "
                         f"disabled: {type(exc).__name__}: {exc}\n")

    def _redacted(self, event: Event) -> Event:
        return self.redactor.event(event)  # value by value: the event stays valid JSON

    def close(self) -> None:
        with self._lock:  # a stream cut off by the run's end: what it held goes out
            for piece in self.streams.release(self.run_id):
                self._observe(piece)
        for sink in [*self.committers, *self.sinks]:
            try:
                sink.close()
            except Exception as exc:
                sys.stderr.write(f"podium: closing {type(sink).__name__} failed: {exc}\n")
