"""Live rows: what a running step streams, folded by the live sink into the run store's `live`
table for surfaces in other processes, and gone when the step ends.

- the sink folds text, reasoning and tool calls per step iteration, caps their tails, writes
  the first row once the step has streamed for an interval and then at most every interval,
  and clears the row when the step finishes (and every row when the run ends);
- a secret split across two deltas is redacted in the row (never in the table);
- a live writer that fails warns once; the run and the other sinks go on;
- a real `podium run` whose model is still streaming (a local server holds the stream open)
  shows its partial text to another process, with a context gauge; after the run its live
  rows are gone, and its stored history holds no `model_delta`.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.held_openai import HeldOpenAI
from helpers_engine import cli_env, podium_argv, wait_until, write
from podium.clock import FakeClock
from podium.events.bus import EventBus
from podium.events.model import (
    Event,
    GuidanceAdded,
    ModelDelta,
    ModelExchange,
    PromptRendered,
    RunFinished,
    RunStarted,
    StepFailed,
    StepFinished,
)
from podium.events.redact import Redactor
from podium.events.sinks.jsonl import MemorySink
from podium.events.sinks.live import INTERVAL, TEXT_CAP, LiveSink, live_key
from podium.store.sqlite import SQLiteStore

SECRET = "sk-held-SECRET-4242"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "podium.db")
    try:
        yield s
    finally:
        s.close()


def _ev(event: Event, run_id: str = "r1") -> Event:
    return event.model_copy(update={"run_id": run_id})


def _delta(text: str, kind: str = "text", tool: str | None = None, step: str = "a") -> Event:
    return _ev(ModelDelta(step=step, iteration=1, kind=kind, text=text, tool=tool))  # type: ignore[arg-type]


def test_the_sink_folds_a_step_writes_it_and_clears_it(store: SQLiteStore) -> None:
    sink = LiveSink(store, window=lambda model, provider: 128_000, interval=0.05)
    sink.handle(_ev(PromptRendered(step="a", iteration=1, provider="openai",
                                   model="gpt-4o-mini", prompt="p" * 400)))
    assert store.live("r1") == {}  # a prompt alone writes nothing
    sink.handle(_delta("thinking first", "reasoning"))
    sink.handle(_delta("Hello, "))
    sink.handle(_delta('{"path": ', "tool_call", "read_file"))
    sink.handle(_delta('"a.py"}', "tool_call", "read_file"))
    sink.handle(_delta("x" * (3 * TEXT_CAP) + "THE TAIL"))
    assert wait_until(lambda: store.live("r1").get("a#1", {}).get("text", "")
                      .endswith("THE TAIL"))
    (key, body), = store.live("r1").items()
    assert key == live_key("a", 1) == "a#1"
    assert (body["step"], body["iteration"], body["model"]) == ("a", 1, "gpt-4o-mini")
    assert len(body["text"]) == TEXT_CAP  # the tail only
    assert body["reasoning"] == "thinking first"
    assert body["tools"] == ["read_file"]  # one call, its arguments in two pieces
    assert body["context_window"] == 128_000
    assert body["estimated"] is True
    assert body["tokens_used"] > 100
    # the API's count at the end of the stream replaces the estimate
    sink.handle(_ev(ModelExchange(step="a", iteration=1, attempt=1, provider="openai",
                                  request={}, response_text="", context_tokens=1024,
                                  context_window=128_000)))
    assert wait_until(lambda: store.live("r1")["a#1"]["estimated"] is False)
    assert store.live("r1")["a#1"]["tokens_used"] == 1024
    sink.handle(_ev(StepFinished(step="a", step_type="agent", iteration=1, elapsed=1.0)))
    assert store.live("r1") == {}  # cleared at once, in the run's thread
    sink.handle(_delta("b streams", step="b"))
    assert wait_until(lambda: "b#1" in store.live("r1"))
    sink.handle(_ev(RunFinished(status="success", elapsed=1.0, iterations=2, exit_code=0)))
    assert store.live("r1") == {}


def test_a_count_before_the_stream_is_kept_and_a_step_that_never_streams_leaves_nothing(
        store: SQLiteStore) -> None:
    sink = LiveSink(store, window=lambda model, provider: 64_000, interval=0.05)
    sink.handle(_ev(PromptRendered(step="a", iteration=1, provider="openai", model="m",
                                   prompt="p" * 4000)))
    # a tool loop: the first answer was counted by the API, then the next call streams
    sink.handle(_ev(ModelExchange(step="a", iteration=1, attempt=1, provider="openai",
                                  request={}, response_text="", context_tokens=900)))
    sink.handle(_delta("y" * 400))
    assert wait_until(lambda: "a#1" in store.live("r1"))
    body = store.live("r1")["a#1"]
    assert body["model"] == "m"  # the prompt's, taken in when the step first streamed
    assert body["tokens_used"] == 900 + 400 // 4  # the count, then the stream's estimate
    sink.handle(_ev(StepFinished(step="a", step_type="agent", iteration=1, elapsed=1.0)))
    for it in range(1, 50):  # steps that are prompted and answered without a stream
        sink.handle(_ev(PromptRendered(step="b", iteration=it, provider="scripted",
                                       model="m", prompt="q")))
        sink.handle(_ev(ModelExchange(step="b", iteration=it, attempt=1,
                                      provider="scripted", request={}, response_text="")))
        sink.handle(_ev(StepFinished(step="b", step_type="agent", iteration=it,
                                     elapsed=0.1)))
    sink.handle(_ev(PromptRendered(step="c", iteration=1, provider="scripted", model="m",
                                   prompt="q")))
    sink.handle(_ev(RunFinished(status="success", elapsed=1.0, iterations=3, exit_code=0)))
    assert store.live("r1") == {}
    assert not sink._folds  # nothing held for steps that ended
    assert not sink._prompts


def test_a_for_each_item_clears_the_row_its_agent_streamed(store: SQLiteStore) -> None:
    # an item ends as `worker[<key>]` (engine/groups.py) while its agent prompted and streamed
    # as `worker`, with the item's own iteration: the end clears that row, not a neighbour's
    sink = LiveSink(store, interval=0.05)
    for it in (1, 2, 3):
        sink.handle(_ev(PromptRendered(step="worker", iteration=it, provider="openai",
                                       model="m", prompt="p")))
        sink.handle(_ev(ModelDelta(step="worker", iteration=it, kind="text",
                                   text=f"item {it} talks")))
    assert wait_until(lambda: set(store.live("r1")) == {"worker#1", "worker#2", "worker#3"})
    sink.handle(_ev(StepFinished(step="worker[a]", step_type="agent", iteration=1,
                                 elapsed=1.0, group="fan")))
    sink.handle(_ev(StepFailed(step="worker[x[2]]", step_type="agent", iteration=3,
                               elapsed=1.0, error_type="provider_error", message="no",
                               group="fan")))  # an item key with brackets of its own
    assert set(store.live("r1")) == {"worker#2"}  # at once, in the run's thread
    assert set(sink._folds) == {("r1", "worker#2")}
    # a step whose own name ends in brackets keeps its own row
    sink.handle(_ev(ModelDelta(step="odd[1]", iteration=2, kind="text", text="mine")))
    assert wait_until(lambda: "odd[1]#2" in store.live("r1"))
    sink.handle(_ev(StepFinished(step="odd[1]", step_type="agent", iteration=2, elapsed=1.0)))
    assert set(store.live("r1")) == {"worker#2"}


def test_a_secret_split_across_deltas_never_reaches_the_table(store: SQLiteStore) -> None:
    redactor = Redactor({"MY_TOKEN": SECRET})
    sink = LiveSink(store, redactor=redactor, interval=0.05)
    half = len(SECRET) // 2
    sink.handle(_delta(f"the key is {SECRET[:half]}"))  # each delta alone holds no secret
    sink.handle(_delta(f"{SECRET[half:]} and more"))
    assert wait_until(lambda: "and more" in store.live("r1").get("a#1", {}).get("text", ""))
    assert store.live("r1")["a#1"]["text"] == "the key is <secret:MY_TOKEN> and more"
    con = sqlite3.connect(store.path)
    try:
        rows = con.execute("SELECT body FROM live").fetchall()
    finally:
        con.close()
    assert rows
    assert not any(SECRET in r[0] for r in rows)


def test_a_resumed_run_clears_what_its_killed_attempt_left(store: SQLiteStore) -> None:
    store.put_live("r1", "a#1", {"text": "cut off by a kill"})
    store.put_live("r2", "a#1", {"text": "another run's"})
    sink = LiveSink(store)
    sink.handle(_ev(RunStarted(workflow="f", workflow_path="/f.yaml", workflow_hash="h",
                               entry_point="a", inputs={}, podium_version="0",
                               max_iterations=5, resumed=True)))
    assert store.live("r1") == {}
    assert store.live("r2") == {"a#1": {"text": "another run's"}}


class _Recording:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def put_live(self, run_id: str, key: str, body: dict[str, Any]) -> None:
        self.calls.append(f"put {key}")

    def clear_live(self, run_id: str, key: str | None = None) -> None:
        self.calls.append(f"clear {key}")


def test_a_step_that_ends_within_the_interval_writes_nothing() -> None:
    writer = _Recording()
    sink = LiveSink(writer, interval=60.0)
    for n in range(50):  # a fan-out of short calls: each streams and ends at once
        sink.handle(_delta(f"answer {n}", step=f"s{n}"))
        sink.handle(_ev(StepFinished(step=f"s{n}", step_type="agent", iteration=1,
                                     elapsed=0.05)))
    sink.handle(_ev(RunFinished(status="success", elapsed=1.0, iterations=50, exit_code=0)))
    sink.close()
    assert writer.calls == []  # no row written, so none to clear


class _Broken:
    def put_live(self, run_id: str, key: str, body: dict[str, Any]) -> None:
        raise OSError("disk on fire")

    def clear_live(self, run_id: str, key: str | None = None) -> None:
        raise OSError("disk on fire")


def test_a_failing_live_writer_warns_once_and_the_run_goes_on(
        capsys: pytest.CaptureFixture[str]) -> None:
    bus = EventBus("r1", FakeClock())
    sink = LiveSink(_Broken(), interval=0.01)
    memory = MemorySink()
    bus.add(sink)
    bus.add(memory)
    bus.emit(ModelDelta(step="a", iteration=1, kind="text", text="hello"))
    assert wait_until(lambda: "disk on fire" in capsys.readouterr().err, 10)
    for _ in range(3):
        bus.emit(ModelDelta(step="a", iteration=1, kind="text", text="more"))
    bus.emit(StepFinished(step="a", step_type="agent", iteration=1, elapsed=1.0))
    assert "disk on fire" not in capsys.readouterr().err  # once
    assert len(memory.events) == 5


class _Reader(MemorySink):
    """An observer that says which event types it reads (the bus's `reads`)."""

    def __init__(self, reads: frozenset[str]) -> None:
        super().__init__()
        self.reads = reads


def test_the_bus_hands_an_observer_only_the_types_it_reads() -> None:
    bus = EventBus("r1", FakeClock())
    spend, every = _Reader(frozenset({"model_exchange"})), MemorySink()
    bus.add(spend)
    bus.add(every)
    bus.emit(GuidanceAdded(text="shorter", step="a", iteration=1))
    bus.emit(PromptRendered(step="a", iteration=1, provider="scripted", model="m", prompt="p"))
    bus.emit(ModelExchange(step="a", iteration=1, attempt=1, provider="scripted", model="m",
                           request={}, response_text="{}"))
    late = _Reader(frozenset({"prompt_rendered", "step_finished"}))
    bus.add(late)  # an observer added after the first events is routed as well
    bus.emit(PromptRendered(step="a", iteration=2, provider="scripted", model="m", prompt="q"))
    bus.emit(StepFinished(step="a", step_type="agent", iteration=2, elapsed=1.0))
    assert spend.types() == ["model_exchange"]
    assert every.types() == ["guidance_added", "prompt_rendered", "model_exchange",
                             "prompt_rendered", "step_finished"]
    assert late.types() == ["prompt_rendered", "step_finished"]
    assert [e.seq for e in every.events] == [1, 2, 3, 4, 5]
    # the live sink and the spend meter say what they read: every type their handle acts on
    assert {"model_delta", "prompt_rendered", "model_exchange", "step_finished", "step_failed",
            "run_finished", "run_started"} == LiveSink.reads


# ----------------------------------------------------------------------------- a real run

FLOW = """
workflow:
  name: live
  entry_point: a
  runtime: {provider: openai, default_model: gpt-4o-mini}
agents:
  - {name: a, prompt: "tell a story"}
"""

# the first third streams, then the server holds the stream until the test releases it
STORY = ("Once upon a streamed time " + SECRET + " " + "lorem ipsum " * 600 + "middle " +
         "dolor sit " * 220 + "THE END")


def _run(tmp_path: Path, srv: HeldOpenAI) -> tuple[subprocess.Popen[str], Path]:
    home = tmp_path / "home"
    flow = write(tmp_path, FLOW, "flow.yaml")
    env = cli_env(home, {"OPENAI_BASE_URL": srv.url + "/v1", "OPENAI_API_KEY": SECRET})
    proc = subprocess.Popen(podium_argv("run", flow, "--json"), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, encoding="utf-8")
    return proc, home


def _one_live(store: SQLiteStore) -> dict[str, Any]:
    runs = store.list_runs()
    if not runs:
        return {}
    return store.live(runs[0].id).get("a#1", {})


def test_a_streaming_run_shows_its_text_to_another_process_then_clears_it(
        tmp_path: Path) -> None:
    with HeldOpenAI(STORY) as srv:
        proc, home = _run(tmp_path, srv)
        try:
            assert srv.held.wait(60), proc.stderr.read() if proc.poll() is not None else ""
            viewer = SQLiteStore(home / "podium.db")  # this process is not the run's
            try:
                assert wait_until(lambda: "lorem" in _one_live(viewer).get("text", ""), 30)
                body = _one_live(viewer)
                run = viewer.list_runs()[0]
                assert run.status == "running"
                assert body["text"].startswith("Once upon a streamed time <secret:")
                assert SECRET not in json.dumps(viewer.live(run.id))
                assert "THE END" not in body["text"]
                assert body["context_window"] == 128_000
                assert body["tokens_used"] > 0
            finally:
                viewer.close()
        finally:
            srv.release.set()
            out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    run_id = json.loads(out)["run_id"]
    store = SQLiteStore(home / "podium.db")
    try:
        assert store.live(run_id) == {}
        events = store.events(run_id)
        assert not [e for e in events if e["type"] == "model_delta"]
        assert "THE END" in next(e for e in events if e["type"] == "model_exchange")[
            "response_text"]
    finally:
        store.close()
    con = sqlite3.connect(home / "podium.db")
    try:
        assert con.execute("SELECT count(*) FROM live").fetchone() == (0,)
    finally:
        con.close()


EACH = """
workflow:
  name: live-each
  entry_point: fan
  input:
    items: {type: array}
  runtime: {provider: openai, default_model: gpt-4o-mini}
for_each:
  - name: fan
    type: for_each
    source: workflow.input.items
    as: item
    max_concurrent: 2
    agent: {name: worker, prompt: "tell story {{ item }}"}
agents: []
"""


def test_a_for_each_item_that_ended_leaves_no_live_row_while_the_run_goes_on(
        tmp_path: Path) -> None:
    # the first item's stream is held; the other item streams its whole answer and ends. Its
    # row must not outlive it (it did: an item's end never matched the row its agent wrote,
    # so every finished item showed as streaming until the run ended)
    with HeldOpenAI(STORY) as srv:
        home = tmp_path / "home"
        env = cli_env(home, {"OPENAI_BASE_URL": srv.url + "/v1", "OPENAI_API_KEY": SECRET})
        proc = subprocess.Popen(
            podium_argv("run", write(tmp_path, EACH, "each.yaml"), "--json",
                        "--input-json", "items=[1, 2]"),
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8")
        try:
            assert srv.held.wait(60), proc.stderr.read() if proc.poll() is not None else ""
            viewer = SQLiteStore(home / "podium.db")
            try:
                run_id = viewer.list_runs()[0].id
                assert wait_until(lambda: any(
                    e["type"] == "step_finished" and e["step"].startswith("worker[")
                    for e in viewer.events(run_id)), 30)
                ended = next(e for e in viewer.events(run_id) if e["type"] == "step_finished")
                held = 3 - ended["iteration"]  # the other item's iteration (1 or 2)
                assert wait_until(lambda: list(viewer.live(run_id)) == [f"worker#{held}"], 30)
                time.sleep(3 * INTERVAL)  # a row the ended item left would be written by now
                assert list(viewer.live(run_id)) == [f"worker#{held}"]
                assert viewer.get_run(run_id).status == "running"
            finally:
                viewer.close()
        finally:
            srv.release.set()
            out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    store = SQLiteStore(home / "podium.db")
    try:
        assert store.live(json.loads(out)["run_id"]) == {}
    finally:
        store.close()
