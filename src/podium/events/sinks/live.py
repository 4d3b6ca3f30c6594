"""The live sink: folds a running step's streamed model output into one live row per step and
writes it to the run store for surfaces in other processes (the console, the fleet TUI).

`model_delta` events are never stored; what they carry is folded here, per run and per step
iteration, into a body (the text and reasoning so far, their tails capped; the tools called;
the context gauge) that a background thread writes with `put_live` at most every INTERVAL
seconds per row, so neither the run nor its history waits or grows. A row is first written
INTERVAL after its step began to stream: a step that ends sooner writes nothing (an agent
fan-out of short calls costs the store nothing for its live view). Rows wait in a heap by the
time they are due, so an event costs the same however many steps stream at once. The row is
cleared when its step finishes or fails, and every row of a run when the run ends. An
observer: a write that fails is reported once on stderr and the live view stops; the run goes
on.
"""

from __future__ import annotations

import heapq
import itertools
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import field
from typing import Any, Protocol, cast

from podium.events.model import (
    Event,
    ModelDelta,
    ModelExchange,
    PromptRendered,
    StepFailed,
    StepFinished,
    item_agent_names,
)
from podium.events.redact import Redactor
from podium.records import record

INTERVAL = 0.2  # seconds between two writes of one live row
TEXT_CAP = 16_384  # characters of text (and of reasoning) a live row keeps: the tail
TOOLS_CAP = 50  # tool names a live row keeps: the last ones
CHARS_PER_TOKEN = 4  # the estimate of the context gauge until the API counts

Window = Callable[[str | None, str | None], int | None]  # (model, provider) -> tokens


class LiveWriter(Protocol):
    """Where live rows go: the run store (store/base.py RunStore)."""

    def put_live(self, run_id: str, key: str, body: dict[str, Any]) -> None: ...

    def clear_live(self, run_id: str, key: str | None = None) -> None: ...


def live_key(step: str, iteration: int) -> str:
    """The key of a step iteration's live row."""
    return f"{step}#{iteration}"


@record
class _Fold:
    """What one step iteration streamed so far."""

    run_id: str
    key: str
    step: str
    iteration: int
    text: str = ""
    reasoning: str = ""
    tools: list[str] = field(default_factory=list)
    last_kind: str | None = None
    last_tool: str | None = None
    model: str | None = None
    provider: str | None = None
    window: int | None = None
    look_up: bool = False  # the prompt's model window is still to be looked up (when written)
    counted: int | None = None  # context tokens the API counted at its last answer
    chars: int = 0  # characters of prompt and stream since that count (or since the start)
    dirty: bool = False
    written: float = 0.0  # monotonic time of the last write; 0: never written
    due: float = 0.0  # monotonic time its next write is due; 0: none is scheduled

    def add(self, delta: ModelDelta) -> None:
        self.chars += len(delta.text)
        if delta.kind == "text":
            self.text = (self.text + delta.text)[-2 * TEXT_CAP:]
        elif delta.kind == "reasoning":
            self.reasoning = (self.reasoning + delta.text)[-2 * TEXT_CAP:]
        elif delta.tool and (self.last_kind, self.last_tool) != ("tool_call", delta.tool):
            self.tools = [*self.tools, delta.tool][-TOOLS_CAP:]
        self.last_kind, self.last_tool = delta.kind, delta.tool

    def body(self, redactor: Redactor) -> dict[str, Any]:
        """The live row: secrets out before the tails are cut (a secret the cut halves
        would otherwise escape the redactor)."""
        estimated = self.counted is None or self.chars > 0
        used = (self.counted or 0) + self.chars // CHARS_PER_TOKEN
        return {"step": self.step, "iteration": self.iteration, "model": self.model,
                "text": redactor.text(self.text)[-TEXT_CAP:],
                "reasoning": redactor.text(self.reasoning)[-TEXT_CAP:],
                "tools": redactor.value(self.tools), "tokens_used": used or None,
                "context_window": self.window, "estimated": estimated,
                "updated_at": time.time()}


class LiveSink:
    """Writes a running step's live row through `writer` (the run store), from a thread of
    its own that runs while rows wait to be written."""

    # what the bus hands it (events/bus.py Sink): the types `handle` acts on
    reads = frozenset({"model_delta", "prompt_rendered", "model_exchange", "step_finished",
                       "step_failed", "run_finished", "run_started"})

    def __init__(self, writer: LiveWriter, *, redactor: Redactor | None = None,
                 window: Window | None = None, interval: float = INTERVAL) -> None:
        self.writer = writer
        self.redactor = redactor or Redactor()
        self.window = window
        self.interval = interval
        self._folds: dict[tuple[str, str], _Fold] = {}
        # what a step iteration's prompts said (model, provider, characters) before its
        # first streamed piece or counted answer: most steps never stream, and their fold
        # is never made
        self._prompts: dict[tuple[str, str], tuple[str | None, str | None, int]] = {}
        # (due, order, key, fold): rows waiting to be written; an entry whose fold has left
        # _folds (its step ended) is dropped when it comes up
        self._heap: list[tuple[float, int, tuple[str, str], _Fold]] = []
        self._order = itertools.count()
        self._cond = threading.Condition()
        self._io = threading.Lock()  # one write at a time: a clear never precedes a put
        self._thread: threading.Thread | None = None
        self._broken = False

    # ------------------------------------------------------------------ the run's thread

    def handle(self, event: Event) -> None:
        if self._broken:
            return
        # dispatched on the type's name: an isinstance of a pydantic model goes through its
        # metaclass, and every event of a run passes here
        kind = event.type
        if kind == "model_delta":
            delta = cast(ModelDelta, event)
            with self._cond:
                fold = self._fold(delta.run_id, delta.step, delta.iteration)
                fold.add(delta)
                self._mark(fold)
        elif kind == "prompt_rendered":
            prompt = cast(PromptRendered, event)
            chars = len(prompt.prompt) + len(prompt.system_prompt or "")
            key = (prompt.run_id, live_key(prompt.step, prompt.iteration))
            with self._cond:
                found = self._folds.get(key)
                if found is None:
                    before = self._prompts.get(key)
                    self._prompts[key] = (prompt.model, prompt.provider,
                                          chars + (before[2] if before else 0))
                else:
                    self._prompted(found, prompt.model, prompt.provider, chars)
        elif kind == "model_exchange":
            self._counted(cast(ModelExchange, event))
        elif kind in ("step_finished", "step_failed"):
            ended = cast(StepFinished | StepFailed, event)
            self._clear(ended.run_id, ended.step, ended.iteration)
        elif kind == "run_finished":
            self._clear(event.run_id, None)
        elif kind == "run_started" and event.__dict__.get("resumed"):
            self._clear(event.run_id, None, always=True)  # what a killed attempt left

    def _fold(self, run_id: str, step: str, iteration: int) -> _Fold:
        key = (run_id, live_key(step, iteration))
        fold = self._folds.get(key)
        if fold is None:
            fold = self._folds[key] = _Fold(run_id, key[1], step, iteration)
            prompted = self._prompts.pop(key, None)
            if prompted is not None:
                self._prompted(fold, *prompted)
        return fold

    @staticmethod
    def _prompted(fold: _Fold, model: str | None, provider: str | None, chars: int) -> None:
        # the window is looked up when the row is first written (the live thread): a step
        # that never streams long enough to write one never pays the lookup (genai-prices'
        # table, ~0.1-0.3 s to import)
        fold.model, fold.provider, fold.look_up = model, provider, True
        fold.chars += chars

    def _window(self, model: str | None, provider: str | None) -> int | None:
        if self.window is None:
            return None
        try:
            return self.window(model, provider)
        except Exception:  # an unknown model has no gauge, nothing more
            return None

    def _counted(self, event: ModelExchange) -> None:
        """The API's own count of the context replaces the estimate (the end of a stream)."""
        if event.context_tokens is None:
            return
        key = (event.run_id, live_key(event.step, event.iteration))
        with self._cond:
            fold = self._folds.get(key)
            if fold is None:
                if key not in self._prompts:
                    return  # nothing of this step was prompted or streamed here
                fold = self._fold(event.run_id, event.step, event.iteration)
            fold.counted, fold.chars = event.context_tokens, 0
            if event.context_window:
                fold.window, fold.look_up = event.context_window, False
            if fold.written:
                self._mark(fold)

    def _mark(self, fold: _Fold) -> None:
        fold.dirty = True
        if fold.due:
            return  # already waits in the heap
        fold.due = (fold.written or time.monotonic()) + self.interval
        entry = (fold.due, next(self._order), (fold.run_id, fold.key), fold)
        heapq.heappush(self._heap, entry)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="podium-live", daemon=True)
            self._thread.start()
        elif self._heap[0] is entry:
            self._cond.notify()  # due before what the thread waits for

    def _streamed_as(self, run_id: str, step: str, iteration: int) -> str:
        """The live key of the step iteration that ended as `step`: a for-each item ends as
        `name[key]` while its agent streamed as `name` (item_agent_names)."""
        key = live_key(step, iteration)
        if (run_id, key) in self._folds or (run_id, key) in self._prompts:
            return key
        for name in item_agent_names(step):
            named = live_key(name, iteration)
            if (run_id, named) in self._folds or (run_id, named) in self._prompts:
                return named
        return key

    def _clear(self, run_id: str, step: str | None, iteration: int = 0, *,
               always: bool = False) -> None:
        key: str | None = None  # None: every row of the run
        with self._cond:
            if step is not None:
                key = self._streamed_as(run_id, step, iteration)
                self._prompts.pop((run_id, key), None)
                fold = self._folds.pop((run_id, key), None)
                written = [fold.written] if fold is not None else []
            else:  # the run's end: once per run
                for k in [k for k in self._prompts if k[0] == run_id]:
                    del self._prompts[k]
                gone = [k for k in self._folds if k[0] == run_id]
                written = [self._folds.pop(k).written for k in gone]
        if not (always or any(written)):
            return  # nothing of it was written
        with self._io:
            try:
                self.writer.clear_live(run_id, key)
            except Exception as exc:
                self._fail(exc)

    # ------------------------------------------------------------------ the writer thread

    def _run(self) -> None:
        while True:
            with self._cond:
                batch, wait = ([], None) if self._broken else self._due()
                if not batch:
                    if wait is None:  # nothing waits: the thread ends (the next row starts one)
                        self._thread = None
                        return
                    self._cond.wait(wait)
                    continue
            self._write(batch)

    def _due(self) -> tuple[list[tuple[tuple[str, str], dict[str, Any]]], float | None]:
        """The rows to write now, and else how long until the next one is due (at least a
        quarter of the interval, so rows falling due one after another go in one batch)."""
        now = time.monotonic()
        batch: list[tuple[tuple[str, str], dict[str, Any]]] = []
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, key, fold = heapq.heappop(heap)
            fold.due = 0.0
            if self._folds.get(key) is fold and fold.dirty:
                fold.dirty, fold.written = False, now
                if fold.look_up:
                    fold.look_up = False
                    fold.window = self._window(fold.model, fold.provider) or fold.window
                batch.append((key, fold.body(self.redactor)))
        if batch or not heap:
            return batch, None
        return batch, max(heap[0][0] - now, self.interval / 4)

    def _write(self, batch: list[tuple[tuple[str, str], dict[str, Any]]]) -> None:
        with self._io:
            for (run_id, key), body in batch:
                with self._cond:
                    if (run_id, key) not in self._folds:
                        continue  # its step ended meanwhile: the row stays cleared
                try:
                    self.writer.put_live(run_id, key, body)
                except Exception as exc:
                    self._fail(exc)
                    return

    def _fail(self, exc: Exception) -> None:
        if not self._broken:
            self._broken = True
            sys.stderr.write(f"podium: warning: the live view of the running step stopped "
                             f"(the run goes on): {type(exc).__name__}: {exc}\n")

    def close(self) -> None:
        """Write nothing more (rows still waiting are dropped; a finished run cleared its)."""
        with self._cond:
            self._broken = True
            self._cond.notify_all()
